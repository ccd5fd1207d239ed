"""torch's own Python-level functions, compiled from the installed torch's source.

``torch.nn.functional``, ``torch.functional`` and the helpers they call (``torch.nn._reduction``,
``torch.nn.modules.utils``) are Python code around ATen calls. A region compiles them from their
source through the same front end as any library's code (``callees.callee_def``): inside a region
``has_torch_function*`` is False and ``torch.jit.is_scripting()`` is False, as wherever Python runs
them past the region's guard. An adapter (``adapters``) restates one of them only where its source
does not compile for the call: the call then takes the adapter, and ``fallbacks`` says why.
"""

from __future__ import annotations

import types
from typing import Any

MODULES = frozenset(
    {"torch.nn.functional", "torch.functional", "torch.nn._reduction", "torch.nn.modules.utils", "torch._tensor"}
)
# Whose globals hold torch's names, not the user's: those modules, and the one boolean_dispatch's wrappers
# (F.max_pool2d, ...) are defined in.
_NAMESPACES = MODULES | {"torch._jit_internal"}

# Per function name (``name_of``), in this process: the calls whose region compiled its source, and what
# made its source give way to its adapter (the first reason seen). benchmarks/functional_coverage reports them.
compiled: set[str] = set()
fallbacks: dict[str, str] = {}


def holds(fn: Any) -> bool:
    """Whether `fn` is one of torch's Python-level functions whose source a region compiles."""
    return isinstance(fn, types.FunctionType) and getattr(fn, "__module__", None) in MODULES


def holds_method(fn: Any) -> bool:
    """Whether `fn` is a method of a torch.nn module class (``nn.Linear.forward``) a region compiles from source."""
    if not isinstance(fn, types.FunctionType) or not getattr(fn, "__module__", "").startswith("torch.nn.modules."):
        return False
    return "." in fn.__qualname__ and "<locals>" not in fn.__qualname__


def holds_class(cls: Any) -> bool:
    """Whether `cls` is a torch.nn module class (or a base of one) whose methods a region compiles from source."""
    return isinstance(cls, type) and getattr(cls, "__module__", "").startswith("torch.nn.modules.")


def name_of(fn: Any) -> str:
    """`F.max_pool2d`, `torch.norm`, `nn.Linear.forward`: the name a user calls it by (a dispatcher's is `<locals>`)."""
    if holds_method(fn):
        return f"nn.{fn.__qualname__}"
    if fn.__module__ == "torch._tensor":  # Tensor.split
        return fn.__qualname__
    module = {"torch.nn.functional": "F", "torch.functional": "torch"}.get(fn.__module__, fn.__module__)
    return f"{module}.{fn.__name__}"


def relative(filename: str) -> str:
    """`torch/nn/functional.py` for a file of the installed torch (else the name as it is)."""
    import os

    import torch

    root = os.path.dirname(os.path.dirname(os.path.realpath(torch.__file__)))
    path = os.path.realpath(filename)
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else filename


def where(fn: Any) -> str:
    """`torch/nn/functional.py:2170`: the file and line of `fn`'s def."""
    return f"{relative(fn.__code__.co_filename)}:{fn.__code__.co_firstlineno}"


def is_torch_namespace(namespace: dict) -> bool:
    """Whether a module's globals are one of those modules' (its names are torch's, not the user's)."""
    name = namespace.get("__name__")
    return name in _NAMESPACES or (isinstance(name, str) and name.startswith("torch.nn.modules."))


def gave_way(fn: Any, reason: str) -> None:
    fallbacks.setdefault(name_of(fn), reason)


def how_compiled(name: str) -> str | None:
    """How this process's regions took torch function `name`: its source, its adapter (and why), or both."""
    why = fallbacks.get(name)
    if name in compiled:
        return "torch's source" + (f"; the adapter where {why}" if why else "")
    return f"the adapter: its source {why}" if why else None
