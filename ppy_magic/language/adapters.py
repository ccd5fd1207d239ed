"""Adapters: Python-level torch wrappers, reproduced in the region language.

Some public torch functions are Python code with logic of their own around an
ATen call (``F.softmax`` picks an overload by ``dtype``; ``Tensor.split`` picks
``split`` or ``split_with_sizes``; ``F.cross_entropy`` maps its reduction string
to an enum). Each adapter restates that logic, written in the same language
regions are written in, and the front end compiles it like any other callee,
specialised to the call site: branches on constant arguments vanish at compile
time. ``unsupported(...)`` marks a path the region will not take (the function
then stays Python, with that reason). Each adapter is checked against eager by
the differential tests.

This module holds the registry and the adapters of ``torch`` and ``Tensor``
methods; ``nn_functional.py``, ``nn_pooling.py`` and ``nn_losses.py`` restate
``torch.nn.functional`` and ``torch_functional.py`` the wrappers of
``torch/functional.py`` and ``torch/_tensor.py``. Adapter
functions are registered with ``@adapts(target, ...)``; shared helpers they
call by name with ``@helper``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import warnings
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
        "DETERMINISTIC": bool(torch.are_deterministic_algorithms_enabled()),
    }


# What the adapters read; namespace() reads them again whenever a region is compiled.
CUDNN_ENABLED = _backend_flags()["CUDNN_ENABLED"]
OPT_EINSUM = _backend_flags()["OPT_EINSUM"]
DETERMINISTIC = _backend_flags()["DETERMINISTIC"]

FUNCTIONS: dict[int, tuple[object, str]] = {}  # id(python callable) -> (callable, adapter name)
METHODS: dict[str, str] = {}  # Tensor method name -> adapter name
HELPERS: dict[str, Callable] = {}  # helpers adapters call by name (registered as their own adapters)
MODULES: list[Any] = []  # the modules adapters are defined in, for their sources


def unsupported(reason: str) -> None:  # noqa: ARG001 - understood by the front end only
    """Reached at compile time: the calling function stays Python with `reason`."""


def adapts(*targets: object, methods: tuple[str, ...] = ()) -> Callable:
    """Register `fn` as the region-language restatement of `targets` (and of Tensor `methods`)."""

    def register(fn: Callable) -> Callable:
        for t in targets:
            FUNCTIONS[id(t)] = (t, fn.__name__)
        for m in methods:
            METHODS[m] = fn.__name__
        _remember_module(fn)
        return fn

    return register


def helper(fn: Callable) -> Callable:
    """Register `fn` as a helper adapters call by its name (compiled like an adapter)."""
    FUNCTIONS[id(fn)] = (fn, fn.__name__)
    HELPERS[fn.__name__] = fn
    _remember_module(fn)
    return fn


def _remember_module(fn: Callable) -> None:
    module = inspect.getmodule(fn)
    if module is not None and module not in MODULES:
        MODULES.append(module)


def lookup(obj: object) -> str | None:
    entry = FUNCTIONS.get(id(obj))
    return entry[1] if entry is not None and entry[0] is obj else None


@functools.cache
def definitions() -> tuple[dict[str, ast.FunctionDef], list[str]]:
    """The adapters' own ASTs (compiled by the front end like user code) and this file's lines.

    Adapters are never located in these files (errors point at the caller), so the lines are only
    kept for the front end's interface."""
    defs: dict[str, ast.FunctionDef] = {}
    for module in MODULES:
        tree = ast.parse(inspect.getsource(module))
        for n in tree.body:
            if isinstance(n, ast.FunctionDef):
                if n.name in defs:
                    raise RuntimeError(f"two adapters are named {n.name}")  # a bug in this package
                defs[n.name] = n
    return defs, inspect.getsource(inspect.getmodule(definitions)).splitlines()


def namespace() -> dict[str, Any]:
    """Globals of the adapters; the backend flags are read when a region is compiled."""
    return {
        "torch": torch,
        "F": F,
        "_nn": _nn,
        "_VF": _VF,
        "math": math,
        "warnings": warnings,
        "unsupported": unsupported,
        **HELPERS,
        **_backend_flags(),
    }


# The other adapter modules register themselves on import.
from . import nn_attention as _nn_attention  # noqa: E402, F401
from . import nn_functional as _nn_functional  # noqa: E402, F401
from . import nn_losses as _nn_losses  # noqa: E402, F401
from . import nn_pooling as _nn_pooling  # noqa: E402, F401
from . import torch_functional as _torch_functional  # noqa: E402, F401
