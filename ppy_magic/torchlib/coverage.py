"""Which public functions of ``torch.nn.functional`` (and ``torch.functional``) a region can call, and how.

Generated from the installed torch: every public function of the module is
looked up the way the front end looks it up. A generated binding
(``F.conv2d`` is ``torch.conv2d``) maps to its ATen op; a Python-level function
compiles from the installed torch's own source (``torch_source``), and where an
adapter still restates it the entry says where and why that adapter is taken;
anything else stays Python with the reason recorded next to the adapters.
``benchmarks/functional_coverage.py`` checks the table by compiling a probe of
every name; the README quotes its figure.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass

import torch

from . import adapters, nn_functional, ops, torch_functional, torch_source

BINDING = "binding"
SOURCE = "source"  # compiled from the installed torch's own source
ADAPTER = "adapter"
PYTHON = "python"


@dataclass(frozen=True)
class Entry:
    """One public name: how a region calls it, or why it cannot."""

    name: str  # as user code spells it: "F.relu6", "torch.meshgrid"
    status: str  # BINDING, SOURCE, ADAPTER or PYTHON
    detail: str  # the ATen op, the adapter, or why it stays Python
    stays_python: tuple[str, ...] = ()  # for an adapter: the cases that stay Python

    @property
    def compiles(self) -> bool:
        return self.status != PYTHON


def _public_functions(module: types.ModuleType, skip: tuple[str, ...]) -> list[tuple[str, object]]:
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    out = []
    for name in sorted(names):
        obj = getattr(module, name, None)
        if name in skip or isinstance(obj, (type, types.ModuleType)) or not callable(obj):
            continue
        if getattr(obj, "__module__", "").startswith(("typing", "collections")):
            continue
        out.append((name, obj))
    return out


def _unsupported_reasons(adapter: str) -> tuple[str, ...]:
    """The reasons an adapter (and the helpers it calls) gives for the cases it leaves to Python."""
    defs, _ = adapters.definitions()
    seen: set[str] = set()
    reasons: list[str] = []

    def walk(name: str) -> None:
        if name in seen or name not in defs:
            return
        seen.add(name)
        for node in ast.walk(defs[name]):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id == "unsupported" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and arg.value not in reasons:
                    reasons.append(arg.value)
            elif isinstance(f, ast.Name):
                walk(f.id)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("F", "torch"):
                target = getattr(torch.nn.functional if f.value.id == "F" else torch, f.attr, None)
                called = adapters.lookup(target)
                if called is not None:
                    walk(called)

    walk(adapter)
    return tuple(reasons)


def _entry(label: str, name: str, obj: object, reasons: dict[str, str]) -> Entry:
    spelled = f"{label}.{name}"
    adapter = adapters.lookup(obj)
    if name in reasons:  # torch's source is known not to compile, and nothing restates it
        return Entry(spelled, PYTHON, reasons[name])
    if torch_source.holds(obj):
        detail = f"torch's source ({torch_source.where(obj)})"
        if adapter is None:
            return Entry(spelled, SOURCE, detail)
        why = adapters.RESTATED[adapter]
        detail += f"; restated ({adapter}) where {why}"
        return Entry(spelled, SOURCE, detail, _unsupported_reasons(adapter))
    if adapter is not None:
        return Entry(spelled, ADAPTER, f"restated in the region language ({adapter})", _unsupported_reasons(adapter))
    spec = ops.function_spec(obj)
    if spec is not None:
        return Entry(spelled, BINDING, f"aten::{spec.aten}")
    why = reasons.get(name, "no adapter restates this Python function yet")
    return Entry(spelled, PYTHON, why)


def functional_coverage() -> list[Entry]:
    """Every public function of ``torch.nn.functional``: compiled (and how) or not (and why)."""
    F = torch.nn.functional
    return [
        _entry("F", name, obj, nn_functional.UNSUPPORTED)
        for name, obj in _public_functions(F, nn_functional.NOT_FUNCTIONAL)
    ]


def torch_functional_coverage() -> list[Entry]:
    """Every public function of ``torch.functional`` (``torch.split``, ``torch.einsum``, ...)."""
    import torch.functional as TF

    return [_entry("torch", name, obj, torch_functional.UNSUPPORTED) for name, obj in _public_functions(TF, ())]


def summary(entries: list[Entry]) -> str:
    n = sum(e.compiles for e in entries)
    return f"{n} of {len(entries)} ({100.0 * n / max(len(entries), 1):.1f}%)"


def table(entries: list[Entry]) -> str:
    """The entries as text: one line each, then the cases adapters leave to Python."""
    width = max(len(e.name) for e in entries)
    lines = []
    for e in entries:
        lines.append(f"{e.name.ljust(width)}  {e.status:8}  {e.detail}")
        lines += [f"{''.ljust(width)}  {'':8}  stays Python: {r}" for r in e.stays_python]
    lines.append(f"compiled: {summary(entries)}")
    return "\n".join(lines)
