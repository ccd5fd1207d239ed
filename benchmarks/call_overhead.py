"""Per-call cost of the seed's layer, relu(x @ w + b), as an ATen region, in eager and under torch.compile.

x is 8×32, w 32×32, b 32: small enough that the cost is the Python round trip
per operator, which is what a region removes. One PyTorch thread; the three
variants run interleaved round by round in this one process (``ppy_magic.bench``,
the same measurement ``%ppy_bench`` uses), so their ratios are comparable even
on a busy machine. Prints µs per call (best round) and the ratios against the
targets: region/eager ≤ 0.75 and compile/region ≥ 5.

    python -m benchmarks.call_overhead [-n CALLS] [-r ROUNDS] [--no-compile]

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
"""
FILENAME = "<call_overhead>"
REGION_OVER_EAGER_AT_MOST = 0.75
COMPILE_OVER_REGION_AT_LEAST = 5.0


def compile_layer():
    """The region, built the way a %%ppy cell builds it (cached under PPY_CACHE_DIR)."""
    namespace, report = compile_cell(SOURCE, {"__name__": "__call_overhead__"}, FILENAME)
    layer = namespace["layer"]
    if not getattr(layer, "__ppy_region__", False):
        sys.exit(f"call_overhead: the layer did not compile:\n{report.summary()}")
    return layer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--number", type=int, default=20_000, help="calls per round (default 20,000)")
    parser.add_argument("-r", "--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    args = parser.parse_args(argv)

    layer = compile_layer()
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g), torch.randn(32, generator=g)
    options = bench.BenchOptions(number=args.number, repeat=args.repeat, threads=1, compile=not args.no_compile)
    result = bench.measure(layer, (x, w, b), options, arg_names=["x", "w", "b"])
    # Drop torch.compile's caches now: left to interpreter shutdown, dynamo's weakref
    # callbacks print an ignored KeyError (torch 2.13).
    torch._dynamo.reset()

    print(
        f"relu(x @ w + b), x 8×32, w 32×32, b 32 · 1 thread · torch {torch.__version__} · "
        f"best of {args.repeat} rounds of {args.number:,} calls, interleaved"
    )
    broken = False
    for v in result.variants:
        if v.ran:
            first = f"  (first call, compiling: {v.first_call_s:.1f} s)" if v.first_call_s is not None else ""
            check = "" if v.matches_eager else f"  OUTPUT {v.check.upper()}"
            print(f"  {v.label:<16} {v.best_s * 1e6:7.2f} µs/call{first}{check}")
            broken |= not v.matches_eager
        else:
            print(f"  {v.label:<16} not run: {v.skipped}")
            broken |= v.label != bench.COMPILE or not args.no_compile
    if result.region_fallbacks:
        print(f"  the region fell back to Python {result.region_fallbacks:,} times ({result.last_fallback_reason})")
        broken = True

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
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
