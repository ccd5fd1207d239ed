"""Functions split around breaks: running one to its steady state, and the share of its ATen calls in regions.

``settle(f, call)`` calls a split function until no call changes its split or starts a build (each
call may add a break, and the segments build in the background). ``region_share(f, args)`` profiles
one call and counts its top-level ATen calls, and those a region made (inside its profiler scope).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import ppy_magic


def shape(f: Any) -> tuple:
    """What a split function is now: its breaks and its segments' lines, and which are regions."""
    split = getattr(f, "__dict__", {}).get("__ppy_split__")
    if split is None:
        return (bool(getattr(f, "__ppy_region__", False)),)
    return (
        tuple(sorted(st.lineno for st, _ in split.breaks.values())),
        tuple((p.segment.first_line, p.segment.last_line, bool(p.region.__ppy_region__)) for p in split.parts),
    )


def settle(f: Any, call: Callable[[], Any], rounds: int = 8) -> Any:
    """Call `call` until `f`'s split and its segments' builds stop changing; the last call's result."""
    out = None
    before = None
    for _ in range(rounds):
        out = call()
        assert ppy_magic.wait(timeout=900), "a build did not land in 15 minutes"
        now = shape(f)
        if now == before:
            return out
        before = now
    return out


def aten_calls(f: Any, args: tuple) -> tuple[int, int]:
    """(ATen calls `f` makes from regions, all its ATen calls) for one call on `args`: the profiler's
    top-level ``aten::`` events, and those inside a region's scope ("ppy region ...")."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        f(*args)
    inside = total = 0
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        if parent is not None and parent.name.startswith("aten::"):
            continue  # made by another ATen call: counted with it
        total += 1
        while parent is not None and not parent.name.startswith("ppy region "):
            parent = parent.cpu_parent
        inside += parent is not None
    return inside, total


def region_share(f: Any, args: tuple) -> float:
    """The share of `f`'s ATen calls for `args` that regions make (1.0: all of them)."""
    inside, total = aten_calls(f, args)
    return inside / total if total else 1.0


def differences(f: Any, args: tuple, *, grad: bool = True) -> list[str]:
    """What differs between split function `f` and eager (``f.__wrapped__``) on `args`: outputs, inputs after
    the call, errors (type and message), random state, gradients. Empty: the same, bit for bit."""
    from tests.support.eager import _call, _diff_grads, _diff_runs

    got = _call(f, args, {})
    want = _call(f.__wrapped__, args, {})
    diffs = _diff_runs(got, want)
    if not diffs and grad:
        diffs = _diff_grads(got, want)
    return diffs
