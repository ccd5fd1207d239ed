"""Functions split around breaks: running one to its steady state, and the share of its ATen calls in regions.

``settle(f, call)`` calls a split function until no call changes its split or starts a build (each
call may add a break, and the segments build in the background). ``region_share(f, args)`` counts
the ATen calls eager makes for each line of the function (a dispatch mode on the Python body) and
the share of them on lines a region runs: a segment whose region is built, not a break's line.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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


class _LineCounter(TorchDispatchMode):
    def __init__(self, code: Any):
        super().__init__()
        self.code = code
        self.lines: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not self.code:
            frame = frame.f_back
        self.lines[frame.f_lineno if frame is not None else 0] += 1
        return func(*args, **(kwargs or {}))


def aten_calls_by_line(f: Any, args: tuple) -> Counter:
    """line -> ATen calls eager makes on that line of `f` (its Python body), for `args`."""
    python = f.__wrapped__
    counter = _LineCounter(python.__code__)
    with torch.no_grad(), counter:
        python(*args)
    return counter.lines


def region_lines(f: Any) -> set[int]:
    """The lines of `f` a region runs now (all its lines if it is a region whole)."""
    split = getattr(f, "__dict__", {}).get("__ppy_split__")
    if split is None:
        if not getattr(f, "__ppy_region__", False):
            return set()
        code = f.__wrapped__.__code__
        return set(range(code.co_firstlineno, code.co_firstlineno + 10_000))
    python = split.python_lines()
    lines: set[int] = set()
    for p in split.parts:
        if p.region.__ppy_region__:
            lines |= {n for n in range(p.segment.first_line, p.segment.last_line + 1) if n not in python}
    return lines


def region_share(f: Any, args: tuple) -> float:
    """The share of eager's ATen calls for `args` that `f` makes from regions (1.0: all of them)."""
    by_line = aten_calls_by_line(f, args)
    total = sum(by_line.values())
    if not total:
        return 1.0
    inside = region_lines(f)
    return sum(n for line, n in by_line.items() if line in inside) / total


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
