"""PyTorch's OpInfo database, differentially: every sample of every entry as a region vs eager.

For each OpInfo entry (op + variant) the first samples (float32 on the CPU; another dtype
where the op has no float32) become one generated ``@ppy.opt(3)`` function each, per form
the op is called in (``torch.f(...)``, ``x.f(...)``, an operator); identical bodies share
one compiled function. An entry counts when every one of its functions compiled and
matched eager bitwise, gradients included. ``benchmarks/opinfo_coverage.py`` prints the
whole table. The harness itself is checked first, with fake regions, so that a
difference it should see cannot pass unnoticed.
"""

from __future__ import annotations

import itertools
import os

import pytest
import torch

from tests.support.batch import build_failures_text
from tests.support.eager import compare_call
from tests.support.opinfo import plan_opinfo, run_opinfo
from tests.support.outcomes import CRASH, MATCH, MISMATCH, NO_RUN, NONDETERMINISTIC, reproduction
from tests.support.source import Inexpressible, Params

# Entries that count: 625 measured when this floor was set (the seed core: 18); raise it as coverage
# grows (the target is 150).
COUNT_FLOOR = 620
# Of the entries named nn.functional.*: 114 of 118 measured (the issue asks for 95%).
NN_FUNCTIONAL_SHARE = 0.95
SAMPLES_PER_ENTRY = int(os.environ.get("PPY_OPINFO_SAMPLES", "8"))


# ---- the harness can see every kind of difference ---------------------------------------------------------


class FakeRegion:
    """Stands in for a RegionFunction: `region` is what "the region" does, `eager` what the body does."""

    def __init__(self, region, eager, *, runs: bool = True, falls_back: bool = False):
        self._region = region
        self.__wrapped__ = eager
        self.runs, self.falls_back = runs, falls_back
        self.calls = self.fallbacks = 0
        self.last_fallback_reason = None

    def __call__(self, *args, **kwargs):
        if self.falls_back:
            self.fallbacks += 1
            self.last_fallback_reason = "a guard failed"
            return self.__wrapped__(*args, **kwargs)
        if self.runs:
            self.calls += 1
        return self._region(*args, **kwargs)


def _x(*shape, grad=False):
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def _raise(exc):
    raise exc


_EAGER_CALLS = itertools.count()  # a different result on every call

HARNESS_CASES = {
    "same": (lambda x: x * 2, lambda x: x * 2, MATCH),
    "same NaN": (lambda x: x / 0 * 0, lambda x: x / 0 * 0, MATCH),
    "value": (lambda x: x * 2, lambda x: x * 2 + 1e-3, MISMATCH),
    "sign of zero": (lambda x: x * 0, lambda x: (x * 0).abs(), MISMATCH),
    "dtype": (lambda x: x.double(), lambda x: x, MISMATCH),
    "shape": (lambda x: x.reshape(-1), lambda x: x, MISMATCH),
    "strides": (lambda x: x.t().contiguous(), lambda x: x.t(), MISMATCH),
    "a copy instead of a view": (lambda x: x.view(-1).clone(), lambda x: x.view(-1), MISMATCH),
    "requires_grad": (lambda x: x.detach(), lambda x: x * 1, MISMATCH),
    "gradient": (lambda x: x * 2, lambda x: x + x.detach(), MISMATCH),
    "tuple vs list": (lambda x: [x], lambda x: (x,), MISMATCH),
    "namedtuple type": (lambda x: tuple(torch.max(x, 0)), lambda x: torch.max(x, 0), MISMATCH),
    "python scalar": (lambda x: 1, lambda x: 1.0, MISMATCH),
    "exception message": (lambda x: _raise(RuntimeError("a")), lambda x: _raise(RuntimeError("b")), MISMATCH),
    "exception type": (lambda x: _raise(ValueError("a")), lambda x: _raise(RuntimeError("a")), MISMATCH),
    "same exception": (lambda x: _raise(RuntimeError("a")), lambda x: _raise(RuntimeError("a")), MATCH),
    "in-place on an input": (lambda x: x.detach().add_(1), lambda x: x.detach() + 1, MISMATCH),
    "random numbers": (lambda x: x + torch.rand(()), lambda x: x + torch.rand(()), MATCH),
    "generator consumption": (lambda x: x + torch.rand(2)[0], lambda x: x + torch.rand(()), MISMATCH),
    "eager differs from itself": (lambda x: x, lambda x: x + next(_EAGER_CALLS), NONDETERMINISTIC),
}


@pytest.mark.parametrize("name", list(HARNESS_CASES))
def test_the_harness_sees_differences(name):
    region, eager, want = HARNESS_CASES[name]
    status, detail = compare_call(FakeRegion(region, eager), (_x(3, 2, grad=True),))
    assert status == want, detail


def test_the_harness_notices_a_region_that_did_not_run():
    status, detail = compare_call(FakeRegion(torch.relu, torch.relu, falls_back=True), (_x(3),))
    assert status == NO_RUN and "a guard failed" in detail
    status, _ = compare_call(FakeRegion(torch.relu, torch.relu, runs=False), (_x(3),))
    assert status == NO_RUN


def test_values_are_written_as_exact_literals():
    params = Params()
    text = params.literal(
        [1, -2.5, float("nan"), -float("inf"), None, True, torch.float64, "mean", (3,), torch.Size([2, 1]), 0.1]
    )
    assert text == "[1, -2.5, math.nan, -math.inf, None, True, torch.float64, 'mean', (3,), (2, 1), 0.1]"
    value = eval(text, {"math": __import__("math"), "torch": torch})  # noqa: S307 - our own literal
    assert value[-1] == 0.1 and value[6] is torch.float64
    assert params.index((slice(None, 3), None, Ellipsis, slice(1, None, 2))) == ":3, None, ..., 1::2"
    xs = [torch.ones(1), torch.zeros(1)]
    assert params.literal(xs) == "x0" and params.decls == ["x0: list"] and params.values[0] == xs
    with pytest.raises(Inexpressible):
        params.literal(object())


def test_an_opinfo_entry_becomes_one_function_per_sample_and_form():
    from torch.testing._internal.common_methods_invocations import op_db

    add = next(op for op in op_db if op.name == "add" and not op.variant_test_name)
    (plan,) = plan_opinfo([add], cap=3)
    assert plan.key == "add" and plan.samples == 3 and set(plan.forms) == {"function", "method"}
    first = plan.forms["function"][0]
    assert "return torch.add(x0" in first.source and first.source.startswith("@ppy.opt(3)\ndef ")
    assert "return x0.add(" in plan.forms["method"][0].source
    getitem = next(op for op in op_db if op.name == "__getitem__")
    (plan,) = plan_opinfo([getitem], cap=2)
    assert [c.source.splitlines()[-1].strip() for c in plan.forms["operator"]] == [
        "return x0[[1, 2]]",
        "return x0[0:3]",
    ]


# ---- the database --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def opinfo_run():
    torch.manual_seed(0)
    run = run_opinfo(cap=SAMPLES_PER_ENTRY)
    totals = run.totals()
    print("\nOpInfo: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    print(
        f"OpInfo: {run.stats.builds} builds, {run.stats.functions} distinct functions, "
        f"{run.stats.compile_seconds:.0f} s compiling, {run.stats.run_seconds:.0f} s running"
    )
    print("OpInfo entries that count: " + ", ".join(run.counting))
    return run


def _report(run, statuses) -> str:
    bad = [o for o in run.outcomes if o.status in statuses]
    lines = [str(o) for o in bad[:30]]
    for o in bad[:3]:
        lines += ["", "reproduction:", reproduction(o)]
    return "\n".join(lines)


def test_no_opinfo_sample_differs_from_eager(opinfo_run):
    totals = opinfo_run.totals()
    assert totals["mismatches"] == 0, "MISMATCH: regions differ from eager\n" + _report(opinfo_run, [MISMATCH])


def test_no_opinfo_sample_crashes_or_skips_its_region(opinfo_run):
    totals = opinfo_run.totals()
    assert not opinfo_run.stats.build_failures, "C++ builds failed:\n" + build_failures_text(opinfo_run.stats)
    assert totals["crashes"] == 0 and totals["no-run"] == 0, _report(opinfo_run, [CRASH, NO_RUN])


def test_opinfo_coverage_floor(opinfo_run):
    counting = opinfo_run.counting
    assert len(counting) >= COUNT_FLOOR, (
        f"{len(counting)} OpInfo entries count, fewer than the floor {COUNT_FLOOR}: " + ", ".join(counting)
    )
    assert {"add", "mul", "matmul"} <= set(counting)


def test_nn_functional_share(opinfo_run):
    named = [e.key for e in opinfo_run.entries if e.key.startswith("nn.functional.")]
    counting = [k for k in opinfo_run.counting if k.startswith("nn.functional.")]
    if not named:
        pytest.skip("no nn.functional entries in this run")
    missing = sorted(set(named) - set(counting))
    assert len(counting) >= NN_FUNCTIONAL_SHARE * len(named), (
        f"{len(counting)} of {len(named)} nn.functional entries count; not: " + ", ".join(missing)
    )


def test_every_entry_is_accounted_for(opinfo_run):
    # An entry either counts, or says why not: nothing is silently dropped.
    silent = [e.key for e in opinfo_run.entries if not e.counts and not e.first_reason and not e.failures]
    assert not silent, silent
    keys = [e.key for e in opinfo_run.entries]
    assert len(set(keys)) == len(keys)
