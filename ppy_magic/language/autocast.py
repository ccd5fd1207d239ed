"""``with torch.autocast("cpu", dtype=..., enabled=..., cache_enabled=...):`` (also ``torch.amp.autocast``).

A mixin of ``function.FunctionCompiler``; ``grad_modes.GradModeCompiler.with_items`` asks it for an
item whose context manager is ``torch.autocast``. The block is a guard variable (kind ``AUTOCAST``,
a guard object of the backend's ``ppy_native.h``) that does what torch 2.13's
``torch/amp/autocast_mode.py`` does, step for step: ``__init__`` (the dtype and cache setting read
when not given, the warning that disables autocast for a dtype other than bfloat16 and float16) and
``__enter__`` (the previous enabled flag, dtype and cache setting saved; the new ones set, the
nesting incremented; the TypeErrors of a non-bool ``enabled`` or ``cache_enabled``) when the block is
entered; ``__exit__`` (nesting decremented, the cast cache cleared when it returns to 0, the saved
state set back) at its normal end, and from the guard's destructor when a ``return``, ``break``,
``continue`` or an exception leaves it first.

What ``__init__`` decides from the device type alone is decided here: the device type must be a
constant; one that is not a str, not a device type, or has no autocast raises as eager raises, at
run time; only CPU device types compile (CUDA's ``__init__`` asks whether CUDA and bf16 are
available, and other devices' state is theirs). ``__enter__``'s TorchScript and
``PreDispatchTorchFunctionMode`` branches never run in a region: it is not scripted, and a region
runs its Python body whenever a torch function mode is active. A function with an autocast block is
built at level 1: the levels' shortcuts rest on the autocast state the call started with.

``torch.cpu.amp.autocast`` and ``torch.cuda.amp.autocast`` stay refused: constructing one issues
a ``FutureWarning`` (deprecated), a category the region's warnings cannot carry.
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from ..torchlib import ops
from . import ir
from .ir import Kind

AUTOCAST = torch.amp.autocast_mode.autocast  # torch.autocast and torch.amp.autocast
DEPRECATED = tuple(
    f
    for f in (
        getattr(getattr(torch, "cpu", None) and torch.cpu.amp, "autocast", None),
        getattr(getattr(torch, "cuda", None) and torch.cuda.amp, "autocast", None),
    )
    if f is not None
)
PARAMS = ("device_type", "dtype", "enabled", "cache_enabled")
DEFAULTS = {"dtype": ir.Const(None, Kind.NONE), "enabled": ir.Const(True, Kind.BOOL), "cache_enabled": None}
# `enabled=`: kinds whose truth __init__ tests, and the type name torch.set_autocast_enabled's
# TypeError gives for one that is not a bool ("" for a bool).
ENABLED_TYPES = {Kind.BOOL: "", Kind.INT: "int", Kind.FLOAT: "float", Kind.NONE: "NoneType"}
# `cache_enabled=`: None (the current setting), a bool, or a number torch.set_autocast_cache_enabled refuses.
CACHE_TYPES = {Kind.BOOL: "", Kind.OPT_BOOL: "", Kind.NONE: "", Kind.INT: "int", Kind.FLOAT: "float"}
DTYPE_KINDS = (Kind.DTYPE, Kind.OPT_DTYPE, Kind.NONE)


def is_autocast(fn: Any) -> bool:
    return fn is not None and (fn is AUTOCAST or any(fn is d for d in DEPRECATED))


def _str(text: str) -> ir.Const:
    return ir.Const(text, Kind.STR)


class AutocastCompiler:
    def autocast_enter(self, item: ast.withitem, fn: Any) -> ir.Var | None:
        """Enter the block of `item` (`with torch.autocast(...)`): its guard, or None where __init__
        always raises (the raise is emitted and the block is not compiled)."""
        ctx = item.context_expr
        if any(fn is d for d in DEPRECATED):
            raise self.error(
                ctx,
                f"`with torch.{'cpu' if fn is DEPRECATED[0] else 'cuda'}.amp.autocast(...)` is not supported in a "
                "region: constructing it issues a FutureWarning (it is deprecated), which a region cannot issue",
                "Use `torch.autocast('cpu', ...)`, which a region compiles.",
            )
        if item.optional_vars is not None:
            raise self.error(item.optional_vars, "`with torch.autocast(...) as name` is not supported in a region")
        bound = self.autocast_arguments(ctx)
        device = bound["device_type"]
        if not isinstance(device, ir.Const):
            raise self.error(
                ctx,
                f"torch.autocast() of a device type known only at run time ({ops.describe(device)}) is not "
                "supported in a region: what __init__ checks and sets depends on it",
                "Pass the device type as a constant string, e.g. torch.autocast('cpu').",
            )
        if not isinstance(device.value, str):
            return self.autocast_raises(
                "ValueError", f"Expected `device_type` of type `str`, got: `{type(device.value)}`"
            )
        name = device.value
        dtype, enabled, cache = bound["dtype"], bound["enabled"], bound["cache_enabled"]
        try:  # __init__'s first reads: the device type is parsed (the dtype read only when not given)
            if isinstance(dtype, ir.Const) and dtype.kind == Kind.NONE:
                torch.get_autocast_dtype(name)
            available = torch._C._is_autocast_available(name)
        except RuntimeError as exc:
            return self.autocast_raises("RuntimeError", str(exc))
        if not available:
            return self.autocast_raises("RuntimeError", f"User specified an unsupported autocast device_type '{name}'")
        if torch.device(name).type != "cpu":
            raise self.error(
                ctx,
                f"`torch.autocast({name!r})` is not supported in a region: only CPU autocast is compiled "
                f"(for {name!r}, autocast.__init__ checks and sets that device's own state)",
                "Keep the block outside the region (call the region inside it), or leave this function Python.",
            )
        for what, value, kinds in (("dtype", dtype, DTYPE_KINDS), ("enabled", enabled, ENABLED_TYPES)):
            if getattr(value, "kind", None) not in kinds:
                raise self.error(ctx, f"torch.autocast({what}=) of {ops.describe(value)} is not supported in a region")
        if cache is None:
            cache = ir.Const(None, Kind.NONE)
        elif getattr(cache, "kind", None) not in CACHE_TYPES:
            raise self.error(
                ctx, f"torch.autocast(cache_enabled=) of {ops.describe(cache)} is not supported in a region"
            )
        self.ctx.autocasting = True
        operands = (_str(name.upper()), dtype, enabled, _str(ENABLED_TYPES[enabled.kind]), cache)
        operands += (_str(CACHE_TYPES[cache.kind]),)
        return self.assign(ir.Intrinsic("autocast_enter", operands), Kind.AUTOCAST, base="autocast")

    def autocast_arguments(self, ctx: ast.Call) -> dict[str, Any]:
        """torch.autocast's arguments by name, evaluated in order as Python evaluates them."""
        if any(isinstance(a, ast.Starred) for a in ctx.args) or any(k.arg is None for k in ctx.keywords):
            raise self.error(ctx, "torch.autocast() with * or ** is not supported in a region")
        if len(ctx.args) > len(PARAMS):
            raise self.error(ctx, f"torch.autocast() takes at most {len(PARAMS)} arguments")
        bound: dict[str, Any] = {}
        for param, a in zip(PARAMS, ctx.args, strict=False):
            bound[param] = self.value(a)
        for k in ctx.keywords:
            if k.arg not in PARAMS or k.arg in bound:
                raise self.error(ctx, f"torch.autocast() got an unexpected or repeated argument {k.arg!r}")
            bound[k.arg] = self.value(k.value)
        if "device_type" not in bound:
            raise self.error(ctx, "torch.autocast() takes a device type, e.g. torch.autocast('cpu')")
        return {p: bound.get(p, DEFAULTS.get(p)) for p in PARAMS}

    def autocast_raises(self, error: str, message: str) -> None:
        """autocast.__init__ raises whatever the call: the block is never entered."""
        self.emit(ir.Raise(error, message, self.line()))
        self.terminated = True
        return None
