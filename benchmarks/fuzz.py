"""Random programs, region vs eager, at scale: straight-line programs over the op table, or with --control
programs with control flow (branches on tensor values, loops with break/continue, lists), or with --breaks
those programs with Python-only statements drawn in (split functions: regions around Python lines).

The tests run a few hundred programs; this runs as many as asked (the bar is 10,000 with
0 mismatches, for each kind), batched into one C++ build per BATCH programs. Straight-line:
a probe first keeps the op forms that compile (see tests/support/fuzz.py); hypothesis then
draws the programs. Control flow: tests/support/control_fuzz.py draws them (outputs, errors
and gradients compared alike; every one must compile). Breaks: tests/support/break_fuzz.py
draws them; a batch is one cell, each program called until its split settles (builds waited
for between rounds), every call compared with eager. Prints programs generated (and
distinct), compiled, matched, stayed Python, mismatched, crashed, and where the time went;
every mismatch with a cell that reproduces it.

    python -m benchmarks.fuzz [--programs 10000] [--batch 500] [--seed N] [--max-statements 6]
                              [--exclude F.,softmax] [--control] [--breaks [--rounds 6]]

Exits 1 when any program differs from eager, crashes, or a build fails; with --breaks also when a
break's reason is a compiler bug ("cannot compile this (").
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import torch

from tests.support.batch import BatchStats, build_failures_text, canonical, run_cases
from tests.support.fuzz import fuzz_forms, generate_programs, probe_fuzz
from tests.support.outcomes import (
    CRASH,
    FAILURES,
    MATCH,
    MISMATCH,
    NO_RUN,
    NONDETERMINISTIC,
    PYTHON,
    count,
    reproduction,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500, help="programs per C++ build")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: derandomized)")
    parser.add_argument("--max-statements", type=int, default=6)
    parser.add_argument(
        "--exclude",
        default="",
        help="comma-separated substrings: leave out op forms containing any; with --breaks, kinds of Python-only "
        "statements to leave out (dict, tolist, try, with, helper, isinstance, del, acc, early, jump)",
    )
    parser.add_argument("--control", action="store_true", help="programs with branches, loops and lists")
    parser.add_argument("--breaks", action="store_true", help="control-flow programs with Python-only statements")
    parser.add_argument("--rounds", type=int, default=6, help="with --breaks: calls per program to settle, at most")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.control:
        return control(args)
    if args.breaks:
        return breaks(args)

    t0 = time.perf_counter()
    stats = BatchStats()
    excluded = [part for part in args.exclude.split(",") if part]
    forms = [f for f in fuzz_forms() if not any(part in f.template for part in excluded)]
    support = probe_fuzz(forms, stats=stats)
    print(
        f"probe: {len(support.forms)} of {len(forms)} op forms compile and match; "
        f"tuple returns {'compile' if support.tuple_returns else 'stay Python'}"
    )
    probe_failures = [o for o in support.outcomes if o.status in FAILURES]
    t1 = time.perf_counter()
    programs = generate_programs(
        support.forms,
        args.programs,
        seed=args.seed,
        max_statements=args.max_statements,
        tuple_returns=support.tuple_returns,
    )
    t2 = time.perf_counter()
    cases = [p.case(f"prog{i}", label=f"program {i}") for i, p in enumerate(programs)]
    outcomes = run_cases(
        cases, prefix="ppy-fuzz", chunk=args.batch, stats=stats, progress=lambda line: print("  " + line, flush=True)
    )
    t3 = time.perf_counter()

    counts = count(outcomes)
    bodies = len({canonical(c.source) for c in cases})
    print(f"programs generated: {len(programs)} (distinct in text or input shapes/dtypes; {bodies} distinct texts)")
    print(f"compiled:           {len(outcomes) - counts[PYTHON] - counts[CRASH]}")
    print(f"matched:            {counts[MATCH]}")
    print(f"stayed Python:      {counts[PYTHON]}")
    print(f"mismatched:         {counts[MISMATCH]}")
    print(f"did not run:        {counts[NO_RUN]}")
    print(f"crashed:            {counts[CRASH]}")
    print(f"eager-nondeterministic: {counts[NONDETERMINISTIC]}")
    print(f"C++ build failures: {len(stats.build_failures)}")
    print(
        f"time: probe {t1 - t0:.1f} s, generate {t2 - t1:.1f} s, compile {stats.compile_seconds:.1f} s "
        f"in {stats.builds} builds, run and compare {stats.run_seconds:.1f} s, total {t3 - t0:.1f} s"
    )
    reasons = collections.Counter(o.detail.split(": ", 1)[-1] for o in outcomes if o.status == PYTHON)
    for reason, n in reasons.most_common(10):
        print(f"  stays Python ({n}): {reason}")
    bad = probe_failures + [o for o in outcomes if o.status in FAILURES]
    for o in bad[:20]:
        print(f"\n{o}\n{reproduction(o)}")
    if stats.build_failures:
        print("\nC++ builds failed:\n" + build_failures_text(stats))
    return 1 if bad or stats.build_failures else 0


def control(args: argparse.Namespace) -> int:
    import warnings

    from tests.support import control_fuzz

    warnings.simplefilter("ignore")  # float() of a tensor that requires grad warns, in eager and in the region
    t0 = time.perf_counter()
    programs = control_fuzz.generate(args.programs, seed=args.seed or 0)
    t1 = time.perf_counter()
    cases = [p.case(f"ctl{i}", label=f"control program {i}") for i, p in enumerate(programs)]
    stats = BatchStats()
    outcomes = run_cases(
        cases, prefix="ppy-fuzz-control", chunk=args.batch, stats=stats, progress=lambda line: print("  " + line)
    )
    t2 = time.perf_counter()
    counts = count(outcomes)
    bodies = ["\n".join(p.lines) for p in programs]
    print(f"control-flow programs: {len(programs)} distinct ({len({canonical(c.source) for c in cases})} texts)")
    for construct in ("if ", " if ", "while ", "for ", "break", "continue", "else:", ".append(", ".item()", "any("):
        print(f"  with {construct!r:12} {sum(construct in body for body in bodies)}")
    print(f"compiled:           {len(outcomes) - counts[PYTHON] - counts[CRASH]}")
    print(f"matched:            {counts[MATCH]}")
    print(f"stayed Python:      {counts[PYTHON]}")
    print(f"mismatched:         {counts[MISMATCH]}")
    print(f"did not run:        {counts[NO_RUN]}")
    print(f"crashed:            {counts[CRASH]}")
    print(f"eager-nondeterministic: {counts[NONDETERMINISTIC]}")
    print(f"C++ build failures: {len(stats.build_failures)}")
    print(
        f"time: generate {t1 - t0:.1f} s, compile {stats.compile_seconds:.1f} s in {stats.builds} builds, "
        f"run and compare {stats.run_seconds:.1f} s, total {t2 - t0:.1f} s"
    )
    bad = [o for o in outcomes if o.status in (*FAILURES, PYTHON)]
    for o in bad[:20]:
        print(f"\n{o}\n{reproduction(o)}")
    if stats.build_failures:
        print("\nC++ builds failed:\n" + build_failures_text(stats))
    return 1 if bad or stats.build_failures else 0


def breaks(args: argparse.Namespace) -> int:
    import warnings

    from tests.support import break_fuzz

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    exclude = tuple(part for part in args.exclude.split(",") if part)
    figures = break_fuzz.run(
        args.programs,
        batch=args.batch,
        seed=args.seed or 0,
        rounds=args.rounds,
        exclude=exclude,
        progress=lambda line: print("  " + line, flush=True),
    )
    programs = [r.program for r in figures.results]
    print(f"programs with breaks: {len(programs)} distinct" + (f" (left out: {', '.join(exclude)})" if exclude else ""))
    for kind in break_fuzz.KINDS:
        print(f"  with {kind!r:12} {sum(kind in p.inserted for p in programs)}")
    print(figures.text())
    print(f"total {time.perf_counter() - t0:.1f} s")
    bad = figures.failures
    reasons = collections.Counter(r.detail.split(": ", 1)[-1][:160] for r in bad if r.detail)
    for reason, n in reasons.most_common(10):
        print(f"  failure ({n}): {reason}")
    for r in bad[:20]:
        print(f"\n{r}\n" + "\n".join(r.breaks) + f"\n{r.reproduction()}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
