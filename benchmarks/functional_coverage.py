"""Coverage of ``torch.nn.functional`` and ``torch.functional``: every public function, compiled or not, and why.

Generated from the installed torch: the static table (``ppy_magic.functional_coverage()``:
a generated binding, torch's own source (with a restatement kept where it says so), or Python
with the reason) checked by compiling the
probes of tests/support/functional_probes.py (one cell, one build) and comparing each probe
with eager, gradients included. A name counts when it has a probe, every probe of it
compiled and every call matched eager. The README quotes the last lines.

    python -m benchmarks.functional_coverage [--static]

--static prints the table without compiling anything.
Exits 1 when a probe differs from eager or crashes.
"""

from __future__ import annotations

import argparse
import sys

from tests.support import functional_probes as fp
from tests.support.batch import python_outcome
from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import FAILURES, MATCH, PYTHON


def run_probes() -> dict[str, list[tuple[str, str]]]:
    """Public name -> [(status, detail)] of every call of every probe of it."""
    ns, report = compile_cell(fp.CELL, filename="<functional-probes>")
    results: dict[str, list[tuple[str, str]]] = {}
    for probe, (name, calls) in fp.PROBES.items():
        f = ns[probe]
        for make in calls:
            args, kwargs = make()
            outcome = compare_call(f, args, kwargs) if is_region(f) else python_outcome(f, report)
            results.setdefault(name, []).append(outcome)
    return results


def _function(name: str) -> object:
    """`F.relu` -> torch.nn.functional.relu, `torch.split` -> torch.functional.split."""
    import torch

    module, attr = name.split(".", 1)
    return getattr(torch.nn.functional if module == "F" else torch, attr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static", action="store_true", help="the table only; compile nothing")
    args = parser.parse_args(argv)

    import torch

    from ppy_magic.torchlib import coverage, torch_source

    torch.set_num_threads(1)
    tables = [
        ("torch.nn.functional", coverage.functional_coverage()),
        ("torch.functional", coverage.torch_functional_coverage()),
    ]
    if args.static:
        for title, entries in tables:
            print(f"== {title}\n{coverage.table(entries)}\n")
        return 0
    results = run_probes()
    failed = False
    for title, entries in tables:
        print(f"== {title}")
        width = max(len(e.name) for e in entries)
        verified = from_source = source_only = 0
        for e in entries:
            outcomes = results.get(e.name, [])
            statuses = {s for s, _ in outcomes}
            if not outcomes:
                check = "no probe"
            elif statuses == {MATCH}:
                check = f"compiled, matched eager ({len(outcomes)} calls)"
                verified += 1
            else:
                bad = next(d for s, d in outcomes if s != MATCH)
                check = f"{'stays Python' if statuses <= {PYTHON} else 'FAILED'}: {bad}"
                failed = failed or bool(statuses & set(FAILURES))
            print(f"{e.name.ljust(width)}  {e.status:8}  {check[:160]}")
            if e.status == coverage.PYTHON:
                print(f"{''.ljust(width)}  {'':8}  why: {e.detail}")
            if e.status == coverage.SOURCE:
                print(f"{''.ljust(width)}  {'':8}  {e.detail[:160]}")
                how = torch_source.how_compiled(torch_source.name_of(_function(e.name)))
                if how is not None:
                    print(f"{''.ljust(width)}  {'':8}  ran {how[:150]}")
                    from_source += how.startswith("torch's source")
                    source_only += how == "torch's source"
        sourced = sum(e.status == coverage.SOURCE for e in entries)
        restated = sum(e.status == coverage.SOURCE and "; restated (" in e.detail for e in entries)
        print(f"{title}: {verified} of {len(entries)} public functions compile and match eager on every probe")
        print(f"{title}: {coverage.summary(entries)} reachable from a region (ATen bindings and torch's source)")
        print(
            f"{title}: {sourced} compile from torch's own source, {restated} of them with a restatement kept for "
            f"calls their source does not take; on the probes, {from_source} ran torch's source "
            f"({source_only} on every probe)\n"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
