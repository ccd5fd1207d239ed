"""Binding built regions to Python functions, the fallback hook, and ``explain``.

A ``RegionFunction`` (C++, from the runtime) stands in for the Python function:
same ``__name__``, ``__qualname__``, ``__doc__``, ``__module__``, ``__wrapped__``
and signature. Functions left Python carry ``__ppy_reason__``.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .backend import RegionSpec
from .backend.levels import SAFE_REUSE_RULE
from .backend.levels import describe as describe_level
from .language.module_plan import ABSENT

# The values of the C++ DeviceType enum (torch/headeronly/core/DeviceType.h).
DEVICE_TYPES = {"cpu": 0, "cuda": 1, "hip": 6, "xpu": 12, "mps": 13, "meta": 14}


def built_device_types() -> tuple[str, ...]:
    """Device types a region runs on: the CPU, plus the accelerator this torch was built for."""
    types_ = ["cpu"]
    if torch.version.cuda:
        types_.append("cuda")
    if getattr(torch.version, "hip", None):
        types_.append("cuda")  # ROCm tensors report device type cuda
    return tuple(dict.fromkeys(types_))


def device_mask(device_types: tuple[str, ...]) -> int:
    mask = 0
    for name in device_types:
        mask |= 1 << DEVICE_TYPES[name]
    return mask


@dataclass
class RegionInfo:
    """What ``explain`` tells about a region; kept on the RegionFunction."""

    spec: RegionSpec
    module_name: str
    device_types: tuple[str, ...]
    level: int


class FallbackLog:
    """Per-function fallback reasons, fed by the runtime's hook; warns once per (function, reason) if asked.

    The counts live on the region itself (its ``__dict__``), so they go away
    with it and a new region never inherits an old one's counts.
    """

    _COUNTS = "__ppy_fallback_reasons__"
    _WARNED = "__ppy_fallback_warned__"

    def __init__(self) -> None:
        self.warn = False
        self._lock = threading.Lock()

    def __call__(self, region: Any, reason: str) -> None:
        state = region.__dict__
        with self._lock:
            per = state.setdefault(self._COUNTS, {})
            per[reason] = per.get(reason, 0) + 1
            # Only warnings actually shown count as warned: turning the option on
            # later still warns about reasons seen before.
            first = self.warn and reason not in state.setdefault(self._WARNED, set())
            if first:
                state[self._WARNED].add(reason)
        if first:
            warnings.warn(
                f"ppy region '{region.__qualname__}' ran as Python: {reason}. "
                "ppy_magic.explain(f) shows its fallbacks.",
                PpyFallbackWarning,
                stacklevel=2,
            )

    def for_region(self, region: Any) -> dict[str, int]:
        with self._lock:
            return dict(getattr(region, "__dict__", {}).get(self._COUNTS, {}))


class PpyFallbackWarning(RuntimeWarning):
    """A region ran its Python body because a guard failed."""


FALLBACKS = FallbackLog()


def make_region(
    runtime: Any, module: Any, spec: RegionSpec, fn: Callable, level: int, global_guards: tuple = ()
) -> Any:
    """The RegionFunction of `spec` in `module`, standing for `fn`. A region that reads modules
    (a method) gets its plan at its first call, when the classes it names exist. `global_guards`:
    (dict, name, value) of the globals a variant compiled at a call read, checked at each call."""
    devices = built_device_types()
    # The defaults the call binds: the function's own objects, as Python passes them (a dtype, a tuple).
    defaults = getattr(fn, "__defaults__", None) or ()
    if len(defaults) != len(spec.defaults):
        defaults = spec.defaults
    region = runtime.RegionFunction(
        fn,
        module,
        spec.index,
        spec.kinds,
        spec.ret,
        device_mask(devices),
        spec.param_names,
        tuple(defaults),
        dict(spec.line_notes),
        tuple(spec.result_types),
        # Levels 2 and 3 read Out::unobserved: the runtime establishes it on each call.
        check_unobserved=max(level, spec.opt_level) >= 2,
        extras=spec.extras,  # *args/**kwargs the region ignores (1 positional, 2 keywords)
        **({"constants": tuple(spec.constants)} if spec.constants else {}),
        **({"global_guards": tuple(global_guards)} if global_guards else {}),
    )
    functools.update_wrapper(region, fn)
    region.__ppy_info__ = RegionInfo(spec, module.__name__, devices, level)
    if spec.plan is not None:
        runtime.set_resolver(region, PlanResolver(runtime, spec, fn))
    return region


def make_pending(runtime: Any, fn: Callable, extras: int) -> Any:
    """A RegionFunction for `fn` with no variant yet: each is built at a call (``variants``), until then
    every call runs `fn`. `extras`: what its regions ignore of a call (``function.ignored_extras``)."""
    code = fn.__code__
    names = code.co_varnames[: code.co_argcount]
    reg = runtime.RegionFunction(
        fn,
        None,
        0,
        "",
        "N",
        device_mask(built_device_types()),
        tuple(names),
        tuple(getattr(fn, "__defaults__", None) or ()),
        {},
        (),
        extras=extras,
    )
    functools.update_wrapper(reg, fn)
    return reg


class PlanResolver:
    """Gives a method region its plan once the classes the plan names exist (the cell has run).

    A class of the cell is the one whose methods were compiled from the cell's lines: the
    region's own class (``__set_name__``), or the class of that name in the function's
    globals whose code lies in those lines. Until then the call runs the Python method."""

    def __init__(self, runtime: Any, spec: RegionSpec, fn: Callable):
        self.runtime = runtime
        self.spec = spec
        self.fn = fn

    def __call__(self, region: Any) -> str | None:
        plan = self.spec.plan
        classes = {}
        for ref in plan.classes():
            cls = self.resolve(ref, region)
            if isinstance(cls, str):
                return cls
            classes[ref] = cls
        layouts = []
        for lay in plan.layouts:
            cls = classes.get(lay.cls) if lay.cls is not None else None
            slots = []
            for s in lay.slots:
                expected = s.value if s.kind == "K" else None
                if s.how == "x":
                    expected = self.method(cls, s)
                    if isinstance(expected, str):
                        return expected
                slots.append((s.name, s.how, s.kind, s.optional, s.subs, s.pos, expected))
            layouts.append((cls, lay.module, lay.inline, lay.keyed, lay.name, tuple(slots)))
        self.runtime.set_plan(region, (plan.params, tuple(layouts), global_hook_dicts()))
        return None

    def method(self, cls: type, slot: Any) -> Any:
        """The method of `cls` the region compiled inline (checked at each call to still be there),
        or why the class's is another one."""
        found = next((k.__dict__[slot.name] for k in cls.__mro__ if slot.name in k.__dict__), None)
        if slot.origin == ABSENT:  # getattr(obj, name, default) where obj had no such attribute: still none
            return None if found is None else f"a {cls.__name__} whose class now has {slot.name}"
        if slot.origin == "torch":
            if getattr(found, "__module__", "").startswith("torch."):
                return found
            return f"a {cls.__name__} whose {slot.name} is not torch's own (it was replaced): the region runs torch's"
        code = getattr(getattr(found, "__wrapped__", None), "__code__", None)
        filename = slot.origin or self.spec.filename
        plain = getattr(found.fget if type(found) is property else found, "__code__", None)
        if plain is not None and (plain.co_filename, plain.co_firstlineno) == (filename, slot.pos):
            return found  # a library's method (or property) compiled from its source as written
        if getattr(found, "__ppy_region__", False) and code is not None and code.co_filename == filename:
            decorators = getattr(found, "__ppy_info__", None)
            first = decorators.spec.first_line if decorators is not None else code.co_firstlineno
            if first == slot.pos:
                return found
        return f"a {cls.__name__} whose {slot.name} is not the method compiled into the region (it was replaced)"

    def resolve(self, ref: Any, region: Any) -> Any:
        if ref.obj is not None:
            return ref.obj
        owner = getattr(region, "__ppy_owner__", None)
        first, last = ref.cell
        if owner is not None and owner.__name__ == ref.name and _defined_in(owner, self.spec.filename, first, last):
            return owner
        cls = getattr(self.fn, "__globals__", {}).get(ref.name)
        if isinstance(cls, type) and _defined_in(cls, self.spec.filename, first, last):
            return cls
        return f"the class {ref.name} of its cell is not defined yet (or was redefined)"


def _defined_in(cls: type, filename: str, first: int, last: int) -> bool:
    """Whether `cls` is the class written at lines `first`..`last` of `filename`."""
    for value in vars(cls).values():
        code = getattr(getattr(value, "__wrapped__", value), "__code__", None)
        if code is not None and code.co_filename == filename and first <= code.co_firstlineno <= last:
            return True
    return False


def global_hook_dicts() -> tuple[dict, ...]:
    """torch's global module hooks: a region that calls submodules inline cannot run them."""
    from torch.nn.modules import module as m

    return (
        m._global_forward_hooks,
        m._global_forward_pre_hooks,
        m._global_backward_hooks,
        m._global_backward_pre_hooks,
    )


@dataclass
class Explanation:
    name: str
    is_region: bool
    reason: str | None
    cpp: str | None
    fallbacks: int
    calls: int
    last_fallback_reason: str | None
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    frozen_globals: dict[str, Any] = field(default_factory=dict)
    device_types: tuple[str, ...] = ()
    module_name: str | None = None
    level: int | None = None  # the optimisation level it was compiled at
    level_notes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # what each level changes in it
    reads: tuple[str, ...] = ()  # a method: what it reads of each kind of module, per call
    variants: tuple[str, ...] = ()  # the variants built at calls: what each is specialised on, why, by which call
    split: tuple[str, ...] = ()  # a function split around what a region cannot take: its breaks and segments
    torch_sources: tuple[str, ...] = ()  # torch functions compiled from torch's own source

    def __str__(self) -> str:
        lines = []
        if self.split:
            what = "ATen regions around Python lines" if self.is_region else "Python function, split (no region yet)"
            lines.append(f"{self.name}: {what}")
            lines.append(f"  calls of its segments as regions: {self.calls}; in Python: {self.fallbacks}")
            lines += [f"  {ln}" for ln in self.split]
            return "\n".join(lines)
        if self.is_region:
            lines.append(
                f"{self.name}: ATen region (module {self.module_name}; devices {', '.join(self.device_types)})"
            )
            lines.append(
                f"  calls as region: {self.calls}; fallbacks to Python: {self.fallbacks}"
                + (f" (last: {self.last_fallback_reason})" if self.last_fallback_reason else "")
            )
            for reason, n in sorted(self.fallback_reasons.items()):
                lines.append(f"    {n} x {reason}")
            if self.frozen_globals:
                frozen = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.frozen_globals.items()))
                lines.append(f"  globals frozen at compile time: {frozen}")
            if self.torch_sources:
                lines.append(f"  compiled from torch's own source: {', '.join(self.torch_sources)}")
            if self.variants:
                lines.append("  variants built at calls (tried in this order, each guarded by its kinds and values):")
                lines += [f"    {v}" for v in self.variants]
                if self.reason:
                    lines.append(f"  new calls: {self.reason}")
            if self.reads:
                lines.append("  read at each call (and checked):")
                lines += [f"    {r}" for r in self.reads]
            if self.level is not None:
                lines.append(f"  compiled at level {self.level}; what each level does here:")
                for lv in sorted(self.level_notes or {self.level: ()}):
                    mark = "  <- this region" if lv == self.level else ""
                    lines.append(f"    {describe_level(lv)}{mark}")
                    if lv == 3:
                        lines.append(f"      ({SAFE_REUSE_RULE})")
                    notes = self.level_notes.get(lv, ())
                    lines += [f"      - {n}" for n in notes] or (["      (nothing beyond level 1)"] if lv > 1 else [])
            lines.append("  generated C++:")
            lines += ["    " + ln for ln in (self.cpp or "").splitlines()]
        else:
            lines.append(f"{self.name}: Python function, not a region")
            lines.append(f"  why: {self.reason}")
            lines += [f"  {v}" for v in self.variants]
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def _short(v: Any) -> str:
    if hasattr(v, "__name__") and type(v).__name__ == "module":
        return f"<module {v.__name__}>"
    text = repr(v)
    return text if len(text) < 40 else text[:37] + "..."


def counters(f: Any) -> tuple[int, int]:
    """(calls that ran a region, calls that ran Python) of `f`; for a split function, of its segments."""
    parts = getattr(f, "__ppy_parts__", ())
    if parts:
        return sum(p.calls for p in parts), sum(p.fallbacks for p in parts)
    return getattr(f, "calls", 0), getattr(f, "fallbacks", 0)


def explain(f: Any) -> Explanation:
    """Whether `f` is a region, why not if not, its fallbacks so far and its generated C++."""
    name = getattr(f, "__qualname__", repr(f))
    split = getattr(f, "__dict__", {}).get("__ppy_split__")
    if split is not None and getattr(f, "__ppy_driver__", None) is not None:
        calls, fallbacks = counters(f)
        return Explanation(
            name,
            bool(f.__ppy_region__),
            None,
            None,
            fallbacks,
            calls,
            None,
            split=tuple(split.describe()),
        )
    info = getattr(f, "__ppy_info__", None) if getattr(f, "__ppy_region__", False) else None
    built = getattr(f, "__ppy_variants__", ())
    if info is None and built:  # compiled at its calls: the first variant's
        info = getattr(built[0], "__ppy_info__", None)
    asked = getattr(f, "__dict__", {}).get("__ppy_variant_records__", ())
    records = tuple(str(r) for r in asked)
    call_reason = getattr(f, "__dict__", {}).get("__ppy_call_reason__")
    if info is None and hasattr(f, "__ppy_variants__"):  # compiled at calls, no variant built yet
        building = any(r.status == "building" for r in asked)
        at_cell = f.__dict__.get("__ppy_reason__")
        reason = call_reason or (
            "a variant for its first call's values is building: calls run the Python body until it lands"
            if building
            else f"{at_cell + '; ' if at_cell else ''}it is compiled at its first call, from the values that call "
            "brings, and has not been called yet"
        )
        return Explanation(name, False, reason, None, f.fallbacks, f.calls, f.last_fallback_reason, variants=records)
    if info is None:
        reason = getattr(f, "__ppy_reason__", None)
        if reason is None:
            reason = (
                "it is not decorated with @ppy.opt"
                if getattr(f, "__ppy_opt__", None) is None
                else "it was not defined in a %%ppy cell or a file run with `ppy`"
            )
        return Explanation(name, False, reason, None, 0, 0, None)
    return Explanation(
        name,
        True,
        call_reason if records else None,  # a region with variants: why new calls may not get one
        info.spec.cpp,
        f.fallbacks,
        f.calls,
        f.last_fallback_reason,
        FALLBACKS.for_region(f),
        dict(info.spec.frozen_globals),
        info.device_types,
        info.module_name,
        level=info.spec.opt_level,
        level_notes=dict(info.spec.level_notes),
        reads=_reads(info.spec.plan),
        variants=records,
        torch_sources=info.spec.torch_sources,
    )


def _reads(plan: Any) -> tuple[str, ...]:
    """One line per kind of module a method region reads: its class, checks, and the attributes."""
    if plan is None:
        return ()
    out = []
    for lay in plan.layouts:
        names = [
            s.name if s.how == "a" else f"[{s.name!r}]" if s.how == "k" else f"[{s.pos}]"
            for s in lay.slots
            if s.how in "akp"
        ]
        checks = ["exact class"] if lay.cls is not None else []
        if lay.inline:
            checks.append("no hooks")
        checks += [
            f"{s.name} {'still absent' if s.origin == ABSENT else 'not replaced'}" for s in lay.slots if s.how == "x"
        ]
        if any(s.how == "l" for s in lay.slots):
            names.append("its modules")
        what = ", ".join(names) or "nothing"
        out.append(f"{lay.name} ({'; '.join(checks) or 'any object'}): {what}")
    return tuple(out)
