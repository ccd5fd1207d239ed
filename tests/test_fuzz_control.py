"""Random programs with control flow (tests/support/control_fuzz.py), each a region compared with eager.

Branches on tensor values, for/while loops with break, continue and else, lists built,
indexed, popped, filtered and stacked, numbers from .item(): drawn deterministically, compiled
in one batch, each called once as a region and once as Python on the same inputs (outputs,
errors and gradients compared bit for bit). Every program must compile: the generator writes
only what the region language supports. ``python -m benchmarks.fuzz --control`` is the large run.
This file costs one build.
"""

from __future__ import annotations

import os

from tests.support import control_fuzz
from tests.support.batch import BatchStats, build_failures_text, run_cases
from tests.support.outcomes import FAILURES, PYTHON, count, reproduction

PROGRAMS = int(os.environ.get("PPY_FUZZ_CONTROL_PROGRAMS", "120"))


def test_programs_are_reproducible_and_distinct():
    one = [p.lines for p in control_fuzz.generate(30, seed=3)]
    two = [p.lines for p in control_fuzz.generate(30, seed=3)]
    assert one == two
    programs = control_fuzz.generate(60)
    assert len({(p.lines, p.params) for p in programs}) == 60
    text = "\n".join("\n".join(p.lines) for p in programs)
    for construct in ("if ", "else:", "while ", "for ", "break", "continue", ".append(", ".item()", " for y"):
        assert construct in text, construct


def test_random_control_flow_programs_compile_and_match_eager():
    programs = control_fuzz.generate(PROGRAMS)
    cases = [p.case(f"ctl{i}", label=f"control program {i}") for i, p in enumerate(programs)]
    stats = BatchStats()
    outcomes = run_cases(cases, prefix="ppy-fuzz-control", chunk=max(len(cases), 1), stats=stats)
    counts = count(outcomes)
    print(f"\ncontrol-flow fuzz: {len(programs)} programs: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    bad = [o for o in outcomes if o.status in FAILURES]
    assert not bad, f"{len(bad)} programs differ from eager or crashed:\n" + "\n\n".join(
        f"{o}\n{reproduction(o)}" for o in bad[:5]
    )
    assert not stats.build_failures, "C++ builds failed:\n" + build_failures_text(stats)
    python = [o for o in outcomes if o.status == PYTHON]
    assert not python, "programs stayed Python:\n" + "\n".join(f"{o}\n{o.case.source}" for o in python[:5])
