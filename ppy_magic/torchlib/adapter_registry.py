"""The adapters' registry: which Python callables and Tensor methods have an adapter, and their sources.

Adapter modules (``nn_functional.py``, ``nn_pooling.py``, ``nn_resampling.py``,
``nn_losses.py``, ``torch_functional.py``) register their functions with
``@adapts(target, ...)`` and the helpers they call by name with ``@helper``;
``adapters.py`` imports them all, so that looking an adapter up there finds it.
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
RESTATED: dict[str, str] = {}  # adapter name -> where its target's own source gives way to it, and why


def unsupported(reason: str) -> None:  # noqa: ARG001 - understood by the front end only
    """Reached at compile time: the calling function stays Python with `reason`."""


def adapts(*targets: object, methods: tuple[str, ...] = (), because: str = "") -> Callable:
    """Register `fn` as the region-language restatement of `targets` (and of Tensor `methods`). A target
    a region compiles from torch's own source is restated only where that source does not compile:
    `because` says where, in one line (``functional_coverage()`` shows it)."""

    def register(fn: Callable) -> Callable:
        RESTATED[fn.__name__] = because
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
        "_aten": torch.ops.aten,
        "math": math,
        "warnings": warnings,
        "unsupported": unsupported,
        **HELPERS,
        **_backend_flags(),
    }
