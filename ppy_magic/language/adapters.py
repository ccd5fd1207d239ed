"""Adapters: Python-level torch wrappers, reproduced in the region language.

Some public torch functions are Python code with logic of their own around an
ATen call (``F.softmax`` picks an overload by ``dtype``; ``Tensor.split`` picks
``split`` or ``split_with_sizes``; ``F.cross_entropy`` maps its reduction string
to an enum). Each adapter below restates that logic, written in the same
language regions are written in, and the front end compiles it like any other
callee, specialised to the call site: branches on constant arguments vanish at
compile time. ``unsupported(...)`` marks a path the region will not take (the
function then stays Python, with that reason). Each adapter is checked against
eager by the differential tests.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

_nn = torch._C._nn
_VF = torch._C._VariableFunctions


def _backend_flags() -> dict[str, bool]:
    return {
        "CUDNN_ENABLED": bool(torch.backends.cudnn.enabled),
        "OPT_EINSUM": bool(torch.backends.opt_einsum.enabled and torch.backends.opt_einsum.is_available()),
    }


# What the adapters below read; namespace() reads them again whenever a region is compiled.
CUDNN_ENABLED = _backend_flags()["CUDNN_ENABLED"]
OPT_EINSUM = _backend_flags()["OPT_EINSUM"]

FUNCTIONS: dict[int, tuple[object, str]] = {}  # id(python callable) -> (callable, adapter name)
METHODS: dict[str, str] = {}  # Tensor method name -> adapter name


def unsupported(reason: str) -> None:  # noqa: ARG001 - understood by the front end only
    """Reached at compile time: the calling function stays Python with `reason`."""


def _adapts(*targets: object, methods: tuple[str, ...] = ()) -> Callable:
    def register(fn: Callable) -> Callable:
        for t in targets:
            FUNCTIONS[id(t)] = (t, fn.__name__)
        for m in methods:
            METHODS[m] = fn.__name__
        return fn

    return register


@_adapts(F.softmax, methods=())
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        unsupported("F.softmax without dim= picks a dimension with a deprecation warning; pass dim=")
    if dtype is None:
        return input.softmax(dim)
    return input.softmax(dim, dtype=dtype)


@_adapts(F.log_softmax)
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        unsupported("F.log_softmax without dim= picks a dimension with a deprecation warning; pass dim=")
    if dtype is None:
        return input.log_softmax(dim)
    return input.log_softmax(dim, dtype=dtype)


@_adapts(F.relu)
def relu(input, inplace=False):
    if inplace:
        return torch.relu_(input)
    return torch.relu(input)


@_adapts(F.silu)
def silu(input, inplace=False):
    if inplace:
        return _nn.silu_(input)
    return _nn.silu(input)


@_adapts(F.dropout)
def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        return _VF.dropout_(input, p, training)
    return _VF.dropout(input, p, training)


@_adapts(F.layer_norm)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    # torch.backends.cudnn.enabled is passed through; ATen's layer_norm ignores it.
    return torch.layer_norm(input, normalized_shape, weight, bias, eps, True)


@_adapts(F.cross_entropy)
def cross_entropy(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
):
    if size_average is not None or reduce is not None:
        unsupported("the deprecated size_average= and reduce= arguments of F.cross_entropy")
    if reduction == "none":
        return _nn.cross_entropy_loss(input, target, weight, 0, ignore_index, label_smoothing)
    if reduction == "mean":
        return _nn.cross_entropy_loss(input, target, weight, 1, ignore_index, label_smoothing)
    if reduction == "sum":
        return _nn.cross_entropy_loss(input, target, weight, 2, ignore_index, label_smoothing)
    raise ValueError(f"{reduction} is not a valid value for reduction")


@_adapts(F.embedding)
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        unsupported("F.embedding with max_norm= renormalises the weight in place under no_grad")
    if padding_idx is None:
        return torch.embedding(weight, input, -1, scale_grad_by_freq, sparse)
    if padding_idx > 0:
        assert padding_idx < weight.size(0), "Padding_idx must be within num_embeddings"
        return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
    if padding_idx < 0:
        assert padding_idx >= -weight.size(0), "Padding_idx must be within num_embeddings"
        return torch.embedding(weight, input, weight.size(0) + padding_idx, scale_grad_by_freq, sparse)
    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


@_adapts(torch.split, methods=("split",))
def split(self, split_size, dim=0):
    if isinstance(split_size, int):
        return _VF.split(self, split_size, dim)
    return _VF.split_with_sizes(self, split_size, dim)


@_adapts(torch.einsum)
def einsum(*args):
    if len(args) < 2:
        raise ValueError(
            "einsum(): must specify the equation string and at least one operand, "
            "or at least one operand and its subscripts list"
        )
    if not isinstance(args[0], str):
        unsupported("torch.einsum in the sublist format; write the equation as a string")
    operands = args[1:]
    if len(operands) == 1 and isinstance(operands[0], tuple):
        unsupported("torch.einsum with the operands in one list; pass them as separate arguments")
    if len(operands) > 2 and OPT_EINSUM:
        unsupported(
            "torch.einsum with more than two operands picks its contraction path from the shapes "
            "at run time (opt_einsum)"
        )
    return _VF.einsum(args[0], operands)


@_adapts(torch.norm, methods=("norm",))
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    # torch.norm's path for strided tensors on the CPU and CUDA, the only ones a region sees.
    if out is not None:
        unsupported("torch.norm with out=")
    if dim is None:
        _dim = None
    elif isinstance(dim, int):
        _dim = [dim]
    else:
        _dim = dim
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return torch.linalg.vector_norm(input, 2, _dim, keepdim, dtype=dtype)
        if _dim is None:
            unsupported("torch.norm with a matrix norm over all dimensions; pass dim=")
        return torch.linalg.matrix_norm(input, p, _dim, keepdim, dtype=dtype)
    if p is None:
        return torch.linalg.vector_norm(input, 2.0, _dim, keepdim, dtype=dtype)
    return torch.linalg.vector_norm(input, p, _dim, keepdim, dtype=dtype)


@_adapts(F.max_pool2d)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        unsupported("F.max_pool2d with return_indices=True")
    if stride is None:
        return torch.max_pool2d(input, kernel_size, [], padding, dilation, ceil_mode)
    return torch.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


@_adapts(F.batch_norm)
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    if training:
        size = input.size()
        size_prods = size[0]
        for i in range(len(size) - 2):
            size_prods = size_prods * size[i + 2]
        if size_prods == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    return torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, CUDNN_ENABLED)


# Tensor.float() and friends: PyTorch's binding calls self.to(dtype) (to.dtype).
@_adapts(methods=("float",))
def float_(self, memory_format=None):
    return self.to(torch.float32, memory_format=memory_format)


@_adapts(methods=("double",))
def double_(self, memory_format=None):
    return self.to(torch.float64, memory_format=memory_format)


@_adapts(methods=("half",))
def half_(self, memory_format=None):
    return self.to(torch.float16, memory_format=memory_format)


@_adapts(methods=("bfloat16",))
def bfloat16_(self, memory_format=None):
    return self.to(torch.bfloat16, memory_format=memory_format)


@_adapts(methods=("int",))
def int_(self, memory_format=None):
    return self.to(torch.int32, memory_format=memory_format)


@_adapts(methods=("long",))
def long_(self, memory_format=None):
    return self.to(torch.int64, memory_format=memory_format)


@_adapts(methods=("bool",))
def bool_(self, memory_format=None):
    return self.to(torch.bool, memory_format=memory_format)


def lookup(obj: object) -> str | None:
    entry = FUNCTIONS.get(id(obj))
    return entry[1] if entry is not None and entry[0] is obj else None


@functools.cache
def definitions() -> tuple[dict[str, ast.FunctionDef], list[str]]:
    """The adapters' own ASTs (compiled by the front end like user code) and this file's lines."""
    source = inspect.getsource(inspect.getmodule(definitions))
    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    return defs, source.splitlines()


def namespace() -> dict[str, Any]:
    """Globals of the adapters; the backend flags are read when a region is compiled."""
    return {"torch": torch, "F": F, "_nn": _nn, "_VF": _VF, "unsupported": unsupported, **_backend_flags()}
