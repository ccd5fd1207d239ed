"""Random programs with Python-only statements (tests/support/break_fuzz.py): split functions against eager.

control_fuzz's programs with breaks drawn in (dict round trips, ``.tolist()``, ``try``/``except``
with bodies that raise, ``with``, helpers defined outside the cell, ``isinstance``, ``del``, a list
shared between the parts, early ``return``/``raise``/``break``/``continue`` next to them). One cell
holds the batch; every program is called until its split settles (``ppy_magic.wait()`` between the
rounds), each call compared with eager (outputs, errors), the last one fully (inputs after the call,
gradients too). ``python -m benchmarks.fuzz --breaks`` is the large run.
"""

from __future__ import annotations

import os

import torch

from tests.support import break_fuzz

PROGRAMS = int(os.environ.get("PPY_FUZZ_BREAKS_PROGRAMS", "150"))


def test_programs_are_reproducible_distinct_and_hold_every_kind_of_break():
    one = [p.lines for p in break_fuzz.generate(30, seed=3)]
    assert one == [p.lines for p in break_fuzz.generate(30, seed=3)]
    programs = break_fuzz.generate(100)
    assert len({(p.lines, p.params) for p in programs}) == 100
    kinds = {k for p in programs for k in p.inserted}
    assert kinds == set(break_fuzz.KINDS), set(break_fuzz.KINDS) - kinds
    text = "\n".join("\n".join(p.lines) for p in programs)
    for construct in ("{", ".tolist()", "try:", "except", "with contextlib", "helper_", "isinstance(", "del "):
        assert construct in text, construct
    for construct in ("acc.append(", "torch.stack(acc)", "return", "raise ValueError", "break", "continue"):
        assert construct in text, construct
    sure = {"dict", "tolist", "try", "helper"}  # one of these in every program: a break there
    assert all(set(p.inserted) & sure for p in programs), [p.inserted for p in programs if not set(p.inserted) & sure]
    # left out on request, and still a break in every program
    without = break_fuzz.generate(30, exclude=("del", "dict"))
    assert not any(k in ("del", "dict") for p in without for k in p.inserted)
    assert all(p.inserted for p in without)


def test_programs_run_in_eager_or_raise_only_their_own_error():
    programs = break_fuzz.generate(60, seed=5)
    errors = [break_fuzz.eager_error(p) for p in programs]
    raised = [e for e in errors if e is not None]
    assert all(type(e) is ValueError and str(e).startswith(break_fuzz.OURS) for e in raised), raised
    assert len(raised) < len(programs) // 2, f"{len(raised)} of {len(programs)} programs raise in eager"


def test_random_programs_with_breaks_split_and_match_eager():
    torch.set_num_threads(1)
    figures = break_fuzz.run(PROGRAMS, batch=max(PROGRAMS, 1))
    print(f"\nbreaks fuzz: {PROGRAMS} programs\n{figures.text()}")
    assert figures.programs == PROGRAMS
    bad = [r for r in figures.results if r.status in (break_fuzz.MISMATCH, break_fuzz.CRASH)]
    assert not bad, f"{len(bad)} programs differ from eager or crashed:\n" + "\n\n".join(
        f"{r}\n" + "\n".join(r.breaks) + f"\n{r.reproduction()}" for r in bad[:5]
    )
    assert not figures.internal, "a break's reason is a compiler bug:\n" + "\n\n".join(
        f"{r}\n{r.reproduction()}" for r in figures.internal[:5]
    )
    assert figures.split >= 0.8 * figures.programs, (
        f"only {figures.split} of {figures.programs} programs are split with a region:\n"
        + "\n\n".join(f"{r}\n" + "\n".join(r.breaks) for r in figures.results if r.form != break_fuzz.SPLIT)[:4000]
    )
    assert figures.ran_regions >= 0.5 * figures.programs, f"{figures.ran_regions} compared calls ran a region"
