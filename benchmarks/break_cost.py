"""What a break costs: a region with one Python statement in it, against the same region without it.

``python -m benchmarks.call_overhead --breaks`` runs this. Two pairs, each pair's functions the same
ATen calls, one of them with one Python-only statement (a dict round trip of a value, which no region
takes) that splits it into two regions with Python between:

- the seed layer ``relu(x @ w + b)`` (x 8×32): the cost of one break, in µs per call;
- the GRU cell of ``call_overhead`` unrolled over 32 steps, the statement in its loop's body: the loop
  runs in Python, its body as two regions per step (whole: the loop stays in C++).

Printed: median µs per call over interleaved rounds (no grad, one thread, CPU time), the break's cost
(split minus whole) and each one's ratio to eager. Exits 1 when a split function is not split, or
differs from eager.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch

from tests.support.breaks import settle

SOURCE = """\
import torch
import ppy


@ppy.opt(3)
def layer_whole(x, w, b):
    y = x @ w
    y = y + b
    return torch.relu(y)


@ppy.opt(3)
def layer_break(x, w, b):
    y = x @ w
    y = {"y": y}["y"]
    y = y + b
    return torch.relu(y)

"""


def gru_pair() -> str:
    """call_overhead's GRU as `gru_whole`, and as `gru_break` with its new gate read through a dict."""
    from benchmarks.call_overhead import SOURCE as CALL_SOURCE

    gru = "@ppy.opt(3)\n" + CALL_SOURCE[CALL_SOURCE.index("def gru(") :]
    gate = "newgate = (i_n + resetgate * h_n).tanh()"
    assert gate in gru, "call_overhead's GRU changed: update the break this benchmark puts in it"
    split = gru.replace("def gru(", "def gru_break(").replace(
        gate, 'newgate = {"n": (i_n + resetgate * h_n).tanh()}["n"]'
    )
    return "\n\n" + gru.replace("def gru(", "def gru_whole(") + "\n\n" + split


def measure_breaks(rounds: int, scale: float, clock: Callable[[], float]) -> int:
    from benchmarks.call_overhead import gru_inputs, make_loop, same, time_round
    from tests.support.cells import compile_cell

    ns, _ = compile_cell(SOURCE + gru_pair(), filename="<call_overhead breaks>")
    g = torch.Generator().manual_seed(0)
    layer_args = (torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g), torch.randn(32, generator=g))
    pairs = (("seed layer", "layer", layer_args, 20000), ("GRU, 32 steps", "gru", gru_inputs(), 300))
    broken = False
    print("breaks: one Python statement in a region (no grad, µs per call, median of interleaved rounds)")
    for label, stem, args, number in pairs:
        whole, split = ns[f"{stem}_whole"], ns[f"{stem}_break"]
        for f in (whole, split):
            settle(f, lambda f=f, args=args: f(*args))
        if split.__ppy_driver__ is None or not split.__ppy_region__ or not whole.__ppy_region__:
            print(f"  {label}: not split into regions as it should be:\n{split.__dict__.get('__ppy_split__')}")
            broken = True
            continue
        variants = {
            "whole": whole,
            "split": split,
            "eager whole": whole.__wrapped__,
            "eager split": split.__wrapped__,
        }
        with torch.no_grad():
            want = whole.__wrapped__(*args)
            bad = [k for k, f in variants.items() if not same(f(*args), want)]
            if bad:
                print(f"  {label}: differs from eager: {bad}")
                broken = True
                continue
            loop = make_loop(len(args))
            n = max(1, int(number * scale))
            times: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(rounds):
                for k, f in variants.items():
                    times[k].append(time_round(loop, f, args, n, clock))
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        cost = [s - w for s, w in zip(times["split"], times["whole"], strict=True)]
        segments = len(split.__ppy_parts__)
        print(
            f"  {label}: whole {med['whole']:.2f} · split ({segments} segments) {med['split']:.2f} · "
            f"the break costs {statistics.median(cost) * 1e6:.2f} µs per call "
            f"({min(cost) * 1e6:.2f}..{max(cost) * 1e6:.2f})"
        )
        print(
            f"    against eager: whole {med['whole'] / med['eager whole']:.3f}, "
            f"split {med['split'] / med['eager split']:.3f}"
        )
    return 1 if broken else 0
