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


def make_region(runtime: Any, module: Any, spec: RegionSpec, fn: Callable, level: int) -> Any:
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
        # *args/**kwargs the region ignores: only where the function has them (the argument is optional)
        **({"extras": spec.extras} if spec.extras else {}),
    )
    functools.update_wrapper(region, fn)
    region.__ppy_info__ = RegionInfo(spec, module.__name__, devices, level)
    return region


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

    def __str__(self) -> str:
        lines = []
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
            lines.append("  generated C++:")
            lines += ["    " + ln for ln in (self.cpp or "").splitlines()]
        else:
            lines.append(f"{self.name}: Python function, not a region")
            lines.append(f"  why: {self.reason}")
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def _short(v: Any) -> str:
    if hasattr(v, "__name__") and type(v).__name__ == "module":
        return f"<module {v.__name__}>"
    text = repr(v)
    return text if len(text) < 40 else text[:37] + "..."


def explain(f: Any) -> Explanation:
    """Whether `f` is a region, why not if not, its fallbacks so far and its generated C++."""
    name = getattr(f, "__qualname__", repr(f))
    info = getattr(f, "__ppy_info__", None) if getattr(f, "__ppy_region__", False) else None
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
        None,
        info.spec.cpp,
        f.fallbacks,
        f.calls,
        f.last_fallback_reason,
        FALLBACKS.for_region(f),
        dict(info.spec.frozen_globals),
        info.device_types,
        info.module_name,
    )
