"""``torch/functional.py`` and ``torch/_tensor.py`` functions still restated in the region language.

``torch.einsum``, ``torch.meshgrid`` and ``torch.norm`` where torch's own source does not compile for
a call (each ``because=`` says where), ``Tensor.unflatten``, and the dtype shortcuts (``x.float()``,
``x.to(...)``), which are C methods whose Python argument parsing a region restates. The rules are
those of ``nn_functional.py``.
"""

from __future__ import annotations

import torch

from .adapter_registry import OPT_EINSUM, adapts, helper, unsupported

_VF = torch._C._VariableFunctions
_aten = torch.ops.aten

# torch.functional's public names the adapters below cannot restate, and why.
UNSUPPORTED = {
    "broadcast_shapes": "returns a torch.Size computed from Python sequences (no tensors); call it outside",
    "pca_lowrank": "random projections and iterations in Python (torch._lowrank)",
    "svd_lowrank": "random projections and iterations in Python (torch._lowrank)",
    "unravel_index": "builds its coefficients with itertools.accumulate over a Python sequence",
}


@adapts(torch.einsum, because="its source asks isinstance() of a list of tensors, decided only by the value")
def einsum(*args):
    if len(args) < 2:
        raise ValueError(
            "einsum(): must specify the equation string and at least one operand, "
            "or at least one operand and its subscripts list"
        )
    if not isinstance(args[0], str):
        return unsupported("torch.einsum in the sublist format; write the equation as a string")
    equation = args[0]
    operands = args[1:]
    if len(operands) == 1 and not isinstance(operands[0], torch.Tensor):
        # the old interface: the operands in one list or tuple (torch calls itself again with them spread)
        operands = operands[0]
    if OPT_EINSUM and len(operands) > 2:
        return unsupported(
            "torch.einsum with more than two operands (or a list of them of a length known only at run time) "
            "picks its contraction path from the shapes at run time (opt_einsum); contract two operands at a "
            "time, or set torch.backends.opt_einsum.enabled = False"
        )
    return _VF.einsum(equation, operands)


@adapts(torch.meshgrid, because="its source builds a dict of keywords")
def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and not isinstance(tensors[0], torch.Tensor):  # one list or tuple of them
        tensors = tensors[0]
    if indexing is None:
        return _VF.meshgrid(tensors)
    return _VF.meshgrid(tensors, indexing=indexing)


@helper
def _range_list(t, start, stop):
    # list(range(start, stop)) as a run-time sequence (t: any tensor, for an empty one)
    out = t.size()[:0]
    for i in range(start, stop):
        out = out + (i,)
    return out


@adapts(torch.norm, because="its source compares an optional value with a constant")
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    # torch.norm's path for strided tensors on the CPU and CUDA, the only ones a region sees.
    if dim is None:
        _dim = None
    elif isinstance(dim, int):
        _dim = [dim]
    else:
        _dim = dim
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            if out is None:
                return torch.linalg.vector_norm(input, 2, _dim, keepdim, dtype=dtype)
            return torch.linalg.vector_norm(input, 2, _dim, keepdim, dtype=dtype, out=out)
        if _dim is None:
            _dim = _range_list(input, 0, input.ndim)
        if out is None:
            return torch.linalg.matrix_norm(input, p, _dim, keepdim, dtype=dtype)
        return torch.linalg.matrix_norm(input, p, _dim, keepdim, dtype=dtype, out=out)
    _p = 2.0 if p is None else p
    if out is None:
        return torch.linalg.vector_norm(input, _p, _dim, keepdim, dtype=dtype)
    return torch.linalg.vector_norm(input, _p, _dim, keepdim, dtype=dtype, out=out)


@adapts(torch.Tensor.unflatten, methods=("unflatten",), because="torch/_tensor.py's Tensor.unflatten calls super()")
def unflatten(self, dim, sizes):
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    return torch.unflatten(self, dim, sizes)


@adapts(methods=("to",))
def tensor_to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    # THPVariable_to (torch/csrc/autograd/python_variable_methods.cpp): parse_to_conversion takes a device
    # and a dtype from to(dtype, ...), to(device=None, dtype=None, ...) or to(other, ...); then the dispatch
    rest = args
    if len(args) > 0 and isinstance(args[0], torch.Tensor):
        if dtype is not None or device is not None:
            return unsupported("Tensor.to(other) with dtype= or device= as well")
        device = args[0].device
        dtype = args[0].dtype
        rest = args[1:]
    elif len(args) > 0 and isinstance(args[0], torch.dtype):
        if dtype is not None:
            return unsupported("Tensor.to(dtype) with dtype= as well")
        dtype = args[0]
        rest = args[1:]
    elif len(args) > 0:
        if device is not None:
            return unsupported("Tensor.to(device) with device= as well")
        device = args[0]
        rest = args[1:]
        if len(rest) > 0 and isinstance(rest[0], torch.dtype):
            dtype = rest[0]
            rest = rest[1:]
    if len(rest) > 2:
        return unsupported("Tensor.to with more positional arguments than it takes")
    if len(rest) > 0:
        non_blocking = rest[0]
    if len(rest) > 1:
        copy = rest[1]
    # a region's tensors are strided: self.options() has layout torch.strided
    if device is None and dtype is None:
        if not copy and memory_format is None:
            return self
        return _aten.to.dtype_layout(
            self,
            dtype=self.dtype,
            layout=torch.strided,
            device=self.device,
            non_blocking=non_blocking,
            copy=copy,
            memory_format=memory_format,
        )
    if device is None:
        return _aten.to.dtype(self, dtype, non_blocking, copy, memory_format)
    if dtype is None:
        return _aten.to.dtype_layout(
            self,
            dtype=self.dtype,
            layout=torch.strided,
            device=device,
            non_blocking=non_blocking,
            copy=copy,
            memory_format=memory_format,
        )
    return _aten.to.device(self, device, dtype, non_blocking, copy, memory_format)


# Tensor.float() and friends: PyTorch's binding calls self.to(dtype) (to.dtype).
@adapts(methods=("float",))
def float_(self, memory_format=None):
    return self.to(torch.float32, memory_format=memory_format)


@adapts(methods=("double",))
def double_(self, memory_format=None):
    return self.to(torch.float64, memory_format=memory_format)


@adapts(methods=("half",))
def half_(self, memory_format=None):
    return self.to(torch.float16, memory_format=memory_format)


@adapts(methods=("bfloat16",))
def bfloat16_(self, memory_format=None):
    return self.to(torch.bfloat16, memory_format=memory_format)


@adapts(methods=("int",))
def int_(self, memory_format=None):
    return self.to(torch.int32, memory_format=memory_format)


@adapts(methods=("long",))
def long_(self, memory_format=None):
    return self.to(torch.int64, memory_format=memory_format)


@adapts(methods=("bool",))
def bool_(self, memory_format=None):
    return self.to(torch.bool, memory_format=memory_format)


@adapts(methods=("byte",))
def byte_(self, memory_format=None):
    return self.to(torch.uint8, memory_format=memory_format)


@adapts(methods=("char",))
def char_(self, memory_format=None):
    return self.to(torch.int8, memory_format=memory_format)


@adapts(methods=("short",))
def short_(self, memory_format=None):
    return self.to(torch.int16, memory_format=memory_format)


@adapts(methods=("cfloat",))
def cfloat_(self, memory_format=None):
    return self.to(torch.complex64, memory_format=memory_format)


@adapts(methods=("cdouble",))
def cdouble_(self, memory_format=None):
    return self.to(torch.complex128, memory_format=memory_format)
