"""Random straight-line programs over the op table, each a region compared with eager (hypothesis).

A probe first compiles one tiny function per op form the fuzzer knows (``torch.relu(x)``,
``x.relu()``, ``x * 0.5``, ``2 - x``, ``x @ w``, ``x.sum(dim=-1, keepdim=True)``, ...); the
programs use only the forms whose probe compiled and matched. Hypothesis draws the
programs (shapes with broadcasting, float32/float64/int64, mixed float dtypes, literals on
either side, nested expressions), derandomized so a run is reproducible; they are then
compiled in one batch. A program that stays Python is counted, not failed; a mismatch,
a crash or a failed build fails. ``benchmarks/fuzz.py`` is the large run.
"""

from __future__ import annotations

import os

import pytest

from tests.support.batch import BatchStats, build_failures_text, canonical, run_cases
from tests.support.fuzz import fuzz_forms, generate_programs, probe_fuzz, program_text
from tests.support.outcomes import FAILURES, MATCH, count, reproduction

PROGRAMS = int(os.environ.get("PPY_FUZZ_PROGRAMS", "200"))


@pytest.fixture(scope="module")
def support():
    return probe_fuzz(fuzz_forms())


def test_every_probe_compiles_and_matches_or_stays_python(support):
    bad = [o for o in support.outcomes if o.status in FAILURES]
    assert not bad, "\n".join(str(o) + "\n" + reproduction(o) for o in bad)


def test_the_core_forms_are_supported(support):
    labels = {f.label for f in support.forms}
    assert {"torch.relu({a})", "{a} + {b} [tt]", "{a} * {b} [tl]", "{a} - {b} [lt]", "{a} @ {b}"} <= labels


def test_programs_are_reproducible(support):
    one = [program_text(p) for p in generate_programs(support.forms, 20)]
    two = [program_text(p) for p in generate_programs(support.forms, 20)]
    assert one == two and len(set(one)) > 5
    programs = generate_programs(support.forms, 50)
    assert len({(p.lines, p.params) for p in programs}) == len(programs) == 50


def test_random_programs_match_eager(support):
    programs = generate_programs(support.forms, PROGRAMS, tuple_returns=support.tuple_returns)
    cases = [p.case(f"prog{i}", label=f"program {i}") for i, p in enumerate(programs)]
    stats = BatchStats()
    outcomes = run_cases(cases, prefix="ppy-fuzz", chunk=max(len(cases), 1), stats=stats)
    counts = count(outcomes)
    print(
        f"\nfuzz: {len(programs)} programs ({len({canonical(c.source) for c in cases})} distinct texts) over "
        f"{len(support.forms)} forms: " + ", ".join(f"{k} {v}" for k, v in counts.items())
    )
    bad = [o for o in outcomes if o.status in FAILURES]
    assert not bad, f"{len(bad)} programs differ from eager or crashed:\n" + "\n\n".join(
        f"{o}\n{reproduction(o)}" for o in bad[:5]
    )
    assert not stats.build_failures, "C++ builds failed:\n" + build_failures_text(stats)
    assert counts[MATCH] > 0, "no program compiled: " + "; ".join({o.detail for o in outcomes[:5]})
