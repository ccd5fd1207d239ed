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
from ppy_magic.language import coverage
from tests.support import functional_probes as fp
from tests.support.batch import python_outcome
from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import FAILURES, MATCH, PYTHON

# Public names of torch.nn.functional whose every probe compiled and matched when this floor was set (128 of 133).
COMPILED_FLOOR = 128


@pytest.fixture(scope="module")
def probes():
    ns, report = compile_cell(fp.CELL, filename="<functional-probes>")
    results = {}
    for probe, (_, calls) in fp.PROBES.items():
        f = ns[probe]
        outcomes = []
        for make in calls:
            args, kwargs = make()
            outcomes.append(compare_call(f, args, kwargs) if is_region(f) else python_outcome(f, report))
        results[probe] = outcomes
    return results


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
        assert e.status in (coverage.BINDING, coverage.ADAPTER, coverage.PYTHON)
        assert e.detail
    assert all(e.compiles for e in entries if e.status != coverage.PYTHON)


def test_every_public_function_has_a_probe():
    probed = {name for name, _ in fp.PROBES.values()}
    entries = coverage.functional_coverage() + coverage.torch_functional_coverage()
    missing = [e.name for e in entries if e.compiles and e.name not in probed]
    assert not missing, missing


def test_every_adapter_name_is_unique_and_registered():
    from ppy_magic.language import adapters

    defs, _ = adapters.definitions()
    for _target, name in adapters.FUNCTIONS.values():
        assert name in defs, name
    for name in adapters.METHODS.values():
        assert name in defs, name
    assert adapters.lookup(torch.nn.functional.interpolate) == "interpolate"
