"""OpInfo coverage: which entries of PyTorch's OpInfo database compile into regions that match eager.

One line per entry (op + variant): dtype, the forms generated (torch.f / x.f / operator),
functions needed (samples x forms), compiled, matched, whether it counts (every function
compiled and matched), and the first reason a function stayed Python. Then the totals
the README quotes. The same run as tests/test_opinfo.py; see tests/support/opinfo.py.

    python -m benchmarks.opinfo_coverage [--samples 8] [--all-samples] [--only SUBSTRING]

--all-samples compiles every sample even when an entry's first sample stays Python.
Exits 1 when any sample differs from eager, crashes, or a build fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from tests.support.batch import build_failures_text
from tests.support.opinfo import opinfo_key, opinfo_table, run_opinfo
from tests.support.outcomes import FAILURES, reproduction


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8, help="samples per entry (the first N)")
    parser.add_argument("--all-samples", action="store_true", help="do not stop at a first sample that stays Python")
    parser.add_argument("--only", default=None, help="entries whose name contains this")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if args.only is None or args.only in opinfo_key(op)]
    t0 = time.perf_counter()
    run = run_opinfo(
        ops,
        cap=args.samples,
        probe_first=not args.all_samples,
        progress=lambda line: print("  " + line, file=sys.stderr, flush=True),
    )
    elapsed = time.perf_counter() - t0
    print(opinfo_table(run))
    print(
        f"time: {elapsed:.0f} s ({run.stats.compile_seconds:.0f} s compiling in {run.stats.builds} builds, "
        f"{run.stats.run_seconds:.0f} s running and comparing)"
    )
    print("\nentries that count: " + ", ".join(run.counting))
    bad = [o for o in run.outcomes if o.status in FAILURES]
    for o in bad[:20]:
        print(f"\n{o}\n{reproduction(o)}")
    if run.stats.build_failures:
        print("\nC++ builds failed:\n" + build_failures_text(run.stats))
    return 1 if bad or run.stats.build_failures else 0


if __name__ == "__main__":
    sys.exit(main())
