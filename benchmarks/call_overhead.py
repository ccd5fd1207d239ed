"""Per-call cost of the seed's layer, relu(x @ w + b), as an ATen region, in eager and under torch.compile;
and of a loop: a GRU cell unrolled over 32 steps, its outputs collected in a list and stacked.

x is 8×32, w 32×32, b 32: small enough that the cost is the Python round trip
per operator, which is what a region removes. One PyTorch thread; the three
variants run interleaved round by round in this one process (``ppy_magic.bench``,
the same measurement ``%ppy_bench`` uses), so their ratios are comparable even
on a busy machine. Prints µs per call (best round) and the ratios against the
targets: region/eager ≤ 0.75 and compile/region ≥ 5.

The GRU (state 8×32, input 32, 32 steps: ~450 ATen calls per call) is a loop
with a list the region keeps in C++; region and eager are timed the same way
(torch.compile, which traces all 32 steps, only with --gru-compile). Target:
region/eager ≤ 0.6.

    python -m benchmarks.call_overhead [-n CALLS] [-r ROUNDS] [--no-compile] [--gru-number CALLS]
                                       [--gru-compile]

Exits 1 only when the measurement is broken (a variant could not run or
differs from eager), not when a target is missed: timings are for reading.
"""

from __future__ import annotations

import argparse
import sys

import torch

from ppy_magic.bench import measure as bench
from tests.support.cells import compile_cell

SOURCE = """\
import torch
import ppy


@ppy.opt(3)
def layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b)


@ppy.opt(3)
def gru(xs, h, w_ih, w_hh, b_ih, b_hh):
    # the GRU cell of PyTorch's own RNN benchmarks (benchmarks/fastrnns/cells.py), over time
    outs = []
    for x in xs:
        gi = torch.mm(x, w_ih.t()) + b_ih
        gh = torch.mm(h, w_hh.t()) + b_hh
        i_r, i_i, i_n = gi.chunk(3, 1)
        h_r, h_i, h_n = gh.chunk(3, 1)
        resetgate = (i_r + h_r).sigmoid()
        inputgate = torch.sigmoid(i_i + h_i)
        newgate = (i_n + resetgate * h_n).tanh()
        h = newgate + inputgate * (h - newgate)
        outs.append(h)
    return torch.stack(outs)
"""
FILENAME = "<call_overhead>"
REGION_OVER_EAGER_AT_MOST = 0.75
COMPILE_OVER_REGION_AT_LEAST = 5.0
GRU_REGION_OVER_EAGER_AT_MOST = 0.6


def compile_regions():
    """The regions, built the way a %%ppy cell builds them (cached under PPY_CACHE_DIR)."""
    namespace, report = compile_cell(SOURCE, {"__name__": "__call_overhead__"}, FILENAME)
    for name in ("layer", "gru"):
        if not getattr(namespace[name], "__ppy_region__", False):
            sys.exit(f"call_overhead: {name} did not compile:\n{report.summary()}")
    return namespace["layer"], namespace["gru"]


def report(result, title: str, no_compile: bool) -> bool:
    """Print one measurement; True when it is broken (a variant could not run, differs, or fell back)."""
    print(title)
    broken = False
    for v in result.variants:
        if v.ran:
            first = f"  (first call, compiling: {v.first_call_s:.1f} s)" if v.first_call_s is not None else ""
            check = "" if v.matches_eager else f"  OUTPUT {v.check.upper()}"
            print(f"  {v.label:<16} {v.best_s * 1e6:7.2f} µs/call{first}{check}")
            broken |= not v.matches_eager
        else:
            print(f"  {v.label:<16} not run: {v.skipped}")
            broken |= v.label != bench.COMPILE or not no_compile
    if result.region_fallbacks:
        print(f"  the region fell back to Python {result.region_fallbacks:,} times ({result.last_fallback_reason})")
        broken = True
    return broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--number", type=int, default=20_000, help="calls per round (default 20,000)")
    parser.add_argument("-r", "--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    parser.add_argument("--gru-number", type=int, default=300, help="GRU calls per round (default 300)")
    parser.add_argument("--gru-compile", action="store_true", help="time torch.compile of the GRU too")
    args = parser.parse_args(argv)

    layer, gru = compile_regions()
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g), torch.randn(32, generator=g)
    options = bench.BenchOptions(number=args.number, repeat=args.repeat, threads=1, compile=not args.no_compile)
    result = bench.measure(layer, (x, w, b), options, arg_names=["x", "w", "b"])

    scale = 32**-0.5
    gru_args = (
        torch.randn(32, 8, 32, generator=g),
        torch.randn(8, 32, generator=g),
        torch.randn(96, 32, generator=g) * scale,
        torch.randn(96, 32, generator=g) * scale,
        torch.randn(96, generator=g) * scale,
        torch.randn(96, generator=g) * scale,
    )
    gru_options = bench.BenchOptions(
        number=args.gru_number, repeat=args.repeat, warmup=20, threads=1, compile=args.gru_compile
    )
    gru_result = bench.measure(gru, gru_args, gru_options, arg_names=["xs", "h", "w_ih", "w_hh", "b_ih", "b_hh"])
    # Drop torch.compile's caches now: left to interpreter shutdown, dynamo's weakref
    # callbacks print an ignored KeyError (torch 2.13).
    torch._dynamo.reset()

    broken = report(
        result,
        f"relu(x @ w + b), x 8×32, w 32×32, b 32 · 1 thread · torch {torch.__version__} · "
        f"best of {args.repeat} rounds of {args.number:,} calls, interleaved",
        args.no_compile,
    )
    region, eager, comp = result[bench.REGION], result[bench.EAGER], result[bench.COMPILE]
    if region.ran:
        ratio = region.best_s / eager.best_s
        print(
            f"  region/eager   = {ratio:.2f}  (target ≤ {REGION_OVER_EAGER_AT_MOST}: "
            f"{'met' if ratio <= REGION_OVER_EAGER_AT_MOST else 'MISSED'})"
        )
    if region.ran and comp.ran:
        ratio = comp.best_s / region.best_s
        print(
            f"  compile/region = {ratio:.1f}   (target ≥ {COMPILE_OVER_REGION_AT_LEAST:g}: "
            f"{'met' if ratio >= COMPILE_OVER_REGION_AT_LEAST else 'MISSED'})"
        )
    broken |= report(
        gru_result,
        f"GRU cell unrolled over 32 steps, state 8×32, outputs stacked · best of {args.repeat} rounds of "
        f"{args.gru_number:,} calls, interleaved",
        not args.gru_compile,
    )
    region, eager = gru_result[bench.REGION], gru_result[bench.EAGER]
    if region.ran and eager.ran:
        ratio = region.best_s / eager.best_s
        print(
            f"  region/eager   = {ratio:.2f}  (target ≤ {GRU_REGION_OVER_EAGER_AT_MOST}: "
            f"{'met' if ratio <= GRU_REGION_OVER_EAGER_AT_MOST else 'MISSED'})"
        )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
