"""SIGINT (the notebook's "interrupt kernel") stops a region as it stops Python: KeyboardInterrupt, soon.

A region polls for signals between loop iterations and every few ATen calls, as the
interpreter does between bytecodes: with the GIL it asks Python whether a signal is
pending (and now and then lets other threads take the GIL, as the switch interval
does); without it (large inputs) it takes the GIL every 5 ms to ask. The signal is
sent by another thread of this process, which needs the GIL to run: a region that
never let go of it would never be interrupted. This file costs one build.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import torch

from tests.support.cells import assert_same, compile_cell

STEPS = 400  # matmuls in one straight-line call: seconds of work, unless interrupted

CELL = (
    """
import torch
import ppy

@ppy.opt(3)
def spin(x, forever: bool):
    while forever or x.sum() < 10:
        x = x + 1
    return x

@ppy.opt(3)
def spin_in_helper(x):
    return count_up(x, 10**12)

@ppy.opt(3)
def count_up(x, n: int):
    for _ in range(n):
        x = x * 1.0
    return x

@ppy.opt(3)
def long_call(x, w):
"""
    + "".join("    x = torch.tanh(x @ w)\n" for _ in range(STEPS))
    + "    return x\n"
)


@pytest.fixture(scope="module")
def ns():
    namespace, report = compile_cell(CELL, filename="<interrupt-cell>")
    assert not report.python, report.python
    return namespace


def interrupted(f, *args, delay: float = 0.3) -> float:
    """Call f(*args), send SIGINT to this process `delay` seconds later; the seconds from that moment to
    the KeyboardInterrupt (the sending thread's own wait for the GIL included)."""
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    due = time.monotonic() + delay
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            f(*args)
        return time.monotonic() - due
    finally:
        timer.join()


@pytest.mark.parametrize("shape", [(4,), (300, 300)], ids=["holding-the-gil", "gil-released"])
def test_sigint_stops_an_endless_while_loop_and_the_region_still_works(ns, shape):
    f = ns["spin"]
    latency = interrupted(f, torch.zeros(shape), True)
    print(f"\nSIGINT -> KeyboardInterrupt in {latency * 1e3:.1f} ms ({'x'.join(map(str, shape))} input)")
    assert latency < 1.0
    calls = f.calls
    x = torch.zeros(shape)
    assert_same(f(x, False), f.__wrapped__(x, False))  # the same region, usable, still a region
    assert f.calls == calls + 1 and f.fallbacks == 0


def test_sigint_stops_a_loop_inside_a_called_region(ns):
    latency = interrupted(ns["spin_in_helper"], torch.zeros(4))
    assert latency < 1.0


def test_sigint_stops_one_long_call_of_many_ops(ns):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(384, 384, generator=g), torch.randn(384, 384, generator=g) / 20
    f = ns["long_call"]
    start = time.monotonic()
    latency = interrupted(f, x, w, delay=0.2)
    print(f"\nSIGINT -> KeyboardInterrupt in {latency * 1e3:.1f} ms, {time.monotonic() - start:.2f} s into the call")
    assert latency < 1.0


def test_the_interrupt_names_the_line_it_stopped_at(ns):
    with pytest.raises(KeyboardInterrupt) as info:
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            ns["spin"](torch.zeros(3), True)
        finally:
            timer.join()
    notes = getattr(info.value, "__notes__", [])
    assert any("ppy region 'spin', line" in n for n in notes), notes
