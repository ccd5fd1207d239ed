"""What a region needs to know of the standard ``torch.nn`` modules beyond their source.

A ``torch.nn`` module's ``forward`` (and the methods it calls on ``self``) compiles from the
installed torch's source (``torch_source``), like any library class's. Declared here, as
annotations, are the kinds of the attributes torch's ``__init__`` does not state
(``Linear.bias`` may be None; a convolution's padding a tuple of ints, not a ``str``), so a
cell builds ahead of the first call; a module whose attribute differs runs its Python
``forward``, counted, with the reason (``declare``).

Restated (``@forward_of``), line by line after torch's own, are only the forwards whose source
the front end does not take yet, each saying why; they are taken where torch's source does not
compile for a call (``CalleeCompiler.torch_forward_call`` tries it first). The front end
compiles them like ``adapters.py``'s: as helpers specialised to the call site, errors pointing
at the user's line.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .adapters import unsupported

_nn = torch._C._nn
_VF = torch._C._VariableFunctions

# The kinds declared below, as annotations (attr_types.annotation_type reads them, exactly:
# a tuple here is a tuple, not a list).
OPT_TENSOR = torch.Tensor | None
INTS = tuple[int, ...]
NONE = None

# class -> (its forward's restatement, or None where torch's source is compiled; attribute kinds)
FORWARDS: dict[type, tuple[str | None, dict[str, Any]]] = {}


def forward_of(*classes: type, **kinds: Any) -> Callable:
    def register(fn: Callable) -> Callable:
        for cls in classes:
            FORWARDS[cls] = (fn.__name__, kinds)
        return fn

    return register


def declare(*classes: type, **kinds: Any) -> None:
    """The attribute kinds of classes whose forward compiles from torch's source (no restatement)."""
    for cls in classes:
        FORWARDS[cls] = (None, kinds)


# Containers without a forward of their own: read (indexed, iterated), never called.
declare(nn.ModuleList, nn.ModuleDict)


def declared(cls: type) -> tuple[dict[str, Any], str | None] | None:
    """The attribute kinds declared for a torch.nn class and the name of its forward's restatement."""
    entry = FORWARDS.get(cls)
    if entry is None:
        return None
    return dict(entry[1]), entry[0]


# ---- compiled from torch's own source -------------------------------------------------------------------
# Their forward (and the methods it calls) compile from the installed torch's source; declared here are
# only the attribute kinds a cell is built for ahead of the first call (what torch's __init__ does not
# say: `Linear.bias` may be None, a convolution's padding is a tuple of ints, not a str).

declare(nn.Sequential, nn.Identity, nn.Flatten, nn.Dropout, nn.ReLU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Mish)
declare(nn.LeakyReLU, nn.ELU, nn.Hardtanh, nn.ReLU6, nn.Hardswish, nn.Hardsigmoid, nn.SELU, nn.Softplus)
declare(nn.Softsign, nn.Tanhshrink)
declare(nn.Softmax, nn.LogSoftmax, dim=int)
declare(nn.Linear, nn.Bilinear, bias=OPT_TENSOR)
declare(nn.Embedding, max_norm=NONE)
declare(nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d, bias=OPT_TENSOR, padding=INTS)
declare(nn.GroupNorm, weight=OPT_TENSOR, bias=OPT_TENSOR)
declare(nn.RMSNorm, weight=OPT_TENSOR)
BATCH_NORM = dict(
    weight=OPT_TENSOR, bias=OPT_TENSOR, running_mean=OPT_TENSOR, running_var=OPT_TENSOR, num_batches_tracked=OPT_TENSOR
)
declare(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, **BATCH_NORM)


# ---- restated: where torch's source does not compile yet --------------------------------------------------


@forward_of(nn.LayerNorm, weight=OPT_TENSOR, bias=OPT_TENSOR)
def layer_norm_forward(self, input):
    # torch's: F.layer_norm's source, where an input that may be None reaches torch.layer_norm
    return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


# ---- the front end's view ---------------------------------------------------------------------------------


@functools.cache
def definitions() -> tuple[dict[str, ast.FunctionDef], list[str]]:
    """The restatements' ASTs (compiled like user code) and this file's lines."""
    source = inspect.getsource(inspect.getmodule(definitions))
    tree = ast.parse(source)
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}, source.splitlines()


def namespace() -> dict[str, Any]:
    """Globals of the restatements."""
    return {
        "torch": torch,
        "F": F,
        "_nn": _nn,
        "_VF": _VF,
        "unsupported": unsupported,
    }
