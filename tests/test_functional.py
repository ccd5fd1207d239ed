"""Every public function of torch.nn.functional and torch.functional, called from a region and compared with eager.

The probes (tests/support/functional_probes.py) call each public name the way user code does,
with the options that matter (pad modes, pooling with indices, interpolate modes, loss
reductions and weights, dropout in training and not); one cell, so this file costs one
build. A probe that compiles must match eager bitwise, gradients included; one that
stays Python must say where and why. The static table (``ppy_magic.functional_coverage``)
must list every public name and agree with the probes.
"""

from __future__ import annotations

import re
import types

import pytest
import torch

import ppy_magic
from ppy_magic.torchlib import coverage, torch_source
from tests.support import functional_probes as fp
from tests.support.batch import python_outcome
from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import FAILURES, MATCH, PYTHON

# Public names of torch.nn.functional whose every probe compiled and matched when this floor was set (128 of 133).
COMPILED_FLOOR = 128


@pytest.fixture(scope="module")
def compiled_probes():
    ns, report = compile_cell(fp.CELL, filename="<functional-probes>")
    results = {}
    for probe, (_, calls) in fp.PROBES.items():
        f = ns[probe]
        outcomes = []
        for make in calls:
            args, kwargs = make()
            outcomes.append(compare_call(f, args, kwargs) if is_region(f) else python_outcome(f, report))
        results[probe] = outcomes
    return ns, results


@pytest.fixture(scope="module")
def probes(compiled_probes):
    return compiled_probes[1]


def test_no_probe_differs_from_eager(probes):
    bad = [f"{p}: {s}: {d}" for p, outs in probes.items() for s, d in outs if s in FAILURES]
    assert not bad, "\n".join(bad)


def test_probes_that_stay_python_say_where_and_why(probes):
    located = re.compile(r"^at \d+:\d+: ")
    bad = [f"{p}: {d}" for p, outs in probes.items() for s, d in outs if s == PYTHON and not located.match(d)]
    assert not bad, "\n".join(bad)
    leaked = [f"{p}: {d}" for p, outs in probes.items() for s, d in outs if s == PYTHON and ".py" in d]
    assert not leaked, "\n".join(leaked)


def test_enough_of_torch_nn_functional_compiles(probes):
    per_name: dict[str, set] = {}
    for probe, (name, _) in fp.PROBES.items():
        per_name.setdefault(name, set()).update(s for s, _ in probes[probe])
    compiled = sorted(n for n, s in per_name.items() if n.startswith("F.") and s == {MATCH})
    print(f"\ntorch.nn.functional: {len(compiled)} public names compile and match: {', '.join(compiled)}")
    assert len(compiled) >= COMPILED_FLOOR, compiled


def test_the_table_lists_every_public_function():
    import torch.nn.functional as F

    entries = ppy_magic.functional_coverage()
    names = {e.name for e in entries}
    for name in ("F.relu6", "F.interpolate", "F.cross_entropy", "F.conv2d", "F.pad", "F.scaled_dot_product_attention"):
        assert name in names
    # every public function of F is listed, but for the helpers F imports from elsewhere
    functions = (types.FunctionType, types.BuiltinFunctionType)
    public = {n for n in dir(F) if not n.startswith("_") and isinstance(getattr(F, n), functions)}
    left_out = public - {n[2:] for n in names}
    assert left_out == set(coverage.nn_functional.NOT_FUNCTIONAL), left_out
    for e in entries:
        assert e.status in (coverage.BINDING, coverage.SOURCE, coverage.ADAPTER, coverage.PYTHON)
        assert e.detail
    assert all(e.compiles for e in entries if e.status != coverage.PYTHON)


def test_every_public_function_has_a_probe():
    probed = {name for name, _ in fp.PROBES.values()}
    entries = coverage.functional_coverage() + coverage.torch_functional_coverage()
    missing = [e.name for e in entries if e.compiles and e.name not in probed]
    assert not missing, missing


def test_every_adapter_name_is_unique_and_registered():
    from ppy_magic.torchlib import adapters

    defs, _ = adapters.definitions()
    for _target, name in adapters.FUNCTIONS.values():
        assert name in defs, name
    for name in adapters.METHODS.values():
        assert name in defs, name
    assert adapters.lookup(torch.nn.functional.interpolate) == "interpolate"


def test_what_the_table_says_compiles_from_torchs_source_does(compiled_probes):
    """A name the table gives as torch's source, whose probes compiled, is in its region as the def parsed from
    the installed torch's file (not a restatement of ours, which would be "<adapter>")."""
    ns, results = compiled_probes
    table = {e.name: e for e in coverage.functional_coverage() + coverage.torch_functional_coverage()}
    checked, wrong = 0, []
    for probe, (name, _) in fp.PROBES.items():
        entry = table.get(name)
        if entry is None or entry.status != coverage.SOURCE or {s for s, _ in results[probe]} != {MATCH}:
            continue
        if "; restated" in entry.detail:  # an adapter may take this probe's call: not every probe shows it
            continue
        sources = ppy_magic.explain(ns[probe]).torch_sources
        file = entry.detail[len("torch's source (") :].split(":")[0]
        module, attr = name.split(".", 1)
        called = torch_source.name_of(getattr(torch.nn.functional if module == "F" else torch, attr))  # F._threshold
        if not any(s.startswith(f"{called} ({file}:") for s in sources):
            wrong.append(f"{probe}: {name} not compiled from {file}: {sources}")
        checked += 1
    assert not wrong, "\n".join(wrong)
    assert checked >= 80, checked  # the names no adapter restates


def test_every_restatement_says_why_torchs_source_is_not_enough():
    from ppy_magic.torchlib import adapters

    restated = [name for target, name in adapters.FUNCTIONS.values() if torch_source.holds(target)]
    assert restated and all(adapters.RESTATED[name] for name in restated), adapters.RESTATED
    for e in coverage.functional_coverage():
        if e.status == coverage.SOURCE and adapters.lookup(getattr(torch.nn.functional, e.name[2:])) is not None:
            assert "; restated (" in e.detail and "where" in e.detail, e
