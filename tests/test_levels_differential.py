"""The differential suites at levels 1, 3 and 4, with and without autograd recording and under inference_mode.

Model code (the cells of tests/test_models.py and tests/test_models_functional.py), the model code with control flow
(tests/test_control_models.py: loops, branches, lists), random programs (the
fuzzer's forms, and the control-flow fuzz of tests/support/control_fuzz.py) and
the OpInfo entries of element-wise ops (the ops
level 3 may run in place, and their neighbours; as OpInfo writes them, and with the
op's first operand made in the region, ``x0.clone()``, so that level 3 may write
into it) are compiled at level 1 and at level 3 (``-O``) and compared with eager,
bitwise, values and strides, in each mode:

- autograd recording: the inputs as the suites make them (most require grad);
- grad mode on, nothing requiring grad: level 3 reuses temporaries with grad mode on;
- ``torch.no_grad()``; ``torch.inference_mode()``.

No mismatch, crash or fallback is allowed in any mode. Costs: two builds per suite
(one per level); the modes rerun the same regions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re

import pytest
import torch

from tests.support import batch, cells, control_fuzz, eager, fuzz, opinfo, outcomes
from tests.support.modes import MODES, for_mode, mode_context
from tests.support.outcomes import FAILURES, MATCH, PYTHON, Case

LEVELS = (1, 3, 4)  # 4: fused chains where eager runs AVX512 (level 3 elsewhere)
PROGRAMS = int(os.environ.get("PPY_LEVELS_PROGRAMS", "120"))
CONTROL_PROGRAMS = int(os.environ.get("PPY_LEVELS_CONTROL_PROGRAMS", "120"))
OPINFO_SAMPLES = int(os.environ.get("PPY_LEVELS_OPINFO_SAMPLES", "4"))
# OpInfo entries: the ops level 3 may write in place, and element-wise ops around them.
OPINFO_NAMES = {
    "add",
    "sub",
    "mul",
    "div",
    "true_divide",
    "rsub",
    "pow",
    "neg",
    "abs",
    "reciprocal",
    "square",
    "maximum",
    "minimum",
    "clamp",
    "clamp_min",
    "clamp_max",
    "where",
    "addcmul",
    "addcdiv",
    "lerp",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "erf",
    "nn.functional.relu",
    "nn.functional.silu",
    "nn.functional.gelu",
    "nn.functional.softplus",
    "nn.functional.leaky_relu",
    "nn.functional.elu",
    "nn.functional.hardtanh",
    "matmul",
    "mm",
    "nn.functional.linear",
    "floor_divide",
    "remainder",
    "atan2",
}


@contextlib.contextmanager
def at_level(level: int):
    """While active, the differential harness compiles every source at `level` (``%%ppy -O level``)."""
    original = batch.compile_cell
    batch.compile_cell = functools.partial(original, level_override=level)
    try:
        yield
    finally:
        batch.compile_cell = original


def failures_of(results) -> list[str]:
    return [f"{o}\n{outcomes.reproduction(o)}" for o in results if o.status in FAILURES]


# ---- model code ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_cells():
    from tests import test_models

    built = {}
    for level in LEVELS:
        ns, report = cells.compile_cell(test_models.CELL, filename=f"<ppy-levels-models-{level}>", level_override=level)
        failed = next((r for _, r in report.python if r.startswith(batch.BUILD_FAILED)), None)
        assert failed is None, failed
        built[level] = ns
    return test_models, built


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_model_code_matches_eager(model_cells, level, mode):
    test_models, built = model_cells
    ns = built[level]
    bad, ran = [], 0
    with mode_context(mode):
        for name, calls in test_models.CALLS.items():
            f = ns[name]
            if not cells.is_region(f):
                assert name in test_models.CONTROL_FLOW, f"{name} stayed Python: {f.__ppy_reason__}"
                continue
            for i, make in enumerate(calls):
                args, kwargs = make()
                args, kwargs = for_mode(args, mode), for_mode(kwargs, mode)
                status, detail = eager.compare_call(f, args, kwargs, grad=mode == "recording")
                ran += status == MATCH
                if status in FAILURES:
                    bad.append(f"{name} (call {i}): {status}: {detail}")
    assert not bad, f"level {level}, {mode}:\n" + "\n".join(bad)
    assert ran >= 50, ran


# ---- model code calling torch.nn.functional, and model code with control flow ------------------------------


def built_at_levels(source: str, tag: str) -> dict[int, dict]:
    """`source` compiled once per level; none of its functions may stay Python at any level."""
    built = {}
    for level in LEVELS:
        ns, report = cells.compile_cell(source, filename=f"<ppy-levels-{tag}-{level}>", level_override=level)
        assert not report.python, report.summary()
        built[level] = ns
    return built


def mismatches(ns: dict, calls: dict, mode: str, with_kwargs: bool) -> tuple[list[str], int]:
    """Every call of every function of `calls` (makers of `(args, kwargs)`, or of args alone) against eager in
    `mode`: what did not match, and how many calls ran."""
    bad, ran = [], 0
    with mode_context(mode):
        for name, makers in calls.items():
            for i, make in enumerate(makers):
                args, kwargs = make() if with_kwargs else (make(), {})
                args, kwargs = for_mode(args, mode), for_mode(kwargs, mode)
                status, detail = eager.compare_call(ns[name], args, kwargs, grad=mode == "recording")
                ran += 1
                if status != MATCH:
                    bad.append(f"{name} (call {i}): {status}: {detail}")
    return bad, ran


@pytest.fixture(scope="module")
def functional_model_cells():
    from tests import test_models_functional

    return test_models_functional, built_at_levels(test_models_functional.CELL, "functional-models")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_functional_model_code_matches_eager(functional_model_cells, level, mode):
    # Losses and blocks made of adapters (batch norm in training, dropout, pooling, pad): level 3 reuses
    # temporaries inside them, and a batch norm in training writes its running statistics.
    test_models_functional, built = functional_model_cells
    bad, ran = mismatches(built[level], test_models_functional.CALLS, mode, with_kwargs=True)
    assert not bad, f"level {level}, {mode}:\n" + "\n".join(bad)
    assert ran >= 30, ran


@pytest.fixture(scope="module")
def control_model_cells():
    from tests import test_control_models

    return test_control_models, built_at_levels(test_control_models.CELL, "control-models")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_control_flow_model_code_matches_eager(control_model_cells, level, mode):
    test_control_models, built = control_model_cells
    bad, ran = mismatches(built[level], test_control_models.CALLS, mode, with_kwargs=False)
    assert not bad, f"level {level}, {mode}:\n" + "\n".join(bad)
    assert ran >= 60, ran


# ---- random programs --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def programs():
    support = fuzz.probe_fuzz(fuzz.fuzz_forms())
    progs = fuzz.generate_programs(support.forms, PROGRAMS, tuple_returns=support.tuple_returns)
    return [p.case(f"lvprog{i}", label=f"program {i}") for i, p in enumerate(progs)]


@pytest.fixture(scope="module")
def program_pools():
    return {level: {} for level in LEVELS}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_random_programs_match_eager(programs, program_pools, level, mode):
    cases = [dataclasses.replace(c, args=for_mode(c.args, mode), grad=mode == "recording") for c in programs]
    stats = batch.BatchStats()
    with at_level(level), mode_context(mode):
        results = batch.run_cases(
            cases, prefix=f"ppy-levels-fuzz-{level}", chunk=max(len(cases), 1), stats=stats, pool=program_pools[level]
        )
    bad = failures_of(results)
    assert not bad, f"level {level}, {mode}: {len(bad)} programs differ or crashed:\n" + "\n\n".join(bad[:5])
    assert not stats.build_failures, batch.build_failures_text(stats)
    assert outcomes.count(results)[MATCH] >= len(cases) // 2


@pytest.fixture(scope="module")
def control_programs():
    programs = control_fuzz.generate(CONTROL_PROGRAMS)
    return [p.case(f"lvctl{i}", label=f"control program {i}") for i, p in enumerate(programs)]


@pytest.fixture(scope="module")
def control_pools():
    return {level: {} for level in LEVELS}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_random_control_flow_programs_match_eager(control_programs, control_pools, level, mode):
    cases = [
        dataclasses.replace(c, args=for_mode(c.args, mode), grad=c.grad and mode == "recording")
        for c in control_programs
    ]
    stats = batch.BatchStats()
    with at_level(level), mode_context(mode):
        prefix, pool = f"ppy-levels-control-{level}", control_pools[level]
        results = batch.run_cases(cases, prefix=prefix, chunk=max(len(cases), 1), stats=stats, pool=pool)
    bad = failures_of(results)
    assert not bad, f"level {level}, {mode}: {len(bad)} programs differ or crashed:\n" + "\n\n".join(bad[:5])
    assert not stats.build_failures, batch.build_failures_text(stats)
    python = [o for o in results if o.status == PYTHON]
    assert not python, "programs stayed Python:\n" + "\n".join(f"{o}\n{o.case.source}" for o in python[:5])


# ---- OpInfo: element-wise ops ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ("recording", "no_grad", "inference_mode"))
@pytest.mark.parametrize("level", LEVELS)
def test_elementwise_opinfo_samples_match_eager(level, mode):
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if op.name in OPINFO_NAMES]
    torch.manual_seed(0)
    with at_level(level), mode_context(mode):
        run = opinfo.run_opinfo(ops, cap=OPINFO_SAMPLES)
    totals = run.totals()
    bad = failures_of(run.outcomes)
    assert not bad, f"level {level}, {mode}:\n" + "\n\n".join(bad[:5])
    assert not run.stats.build_failures, batch.build_failures_text(run.stats)
    assert len(run.counting) >= 30, (totals, run.counting)


def on_a_temporary(case: Case) -> Case:
    """The case with its first tensor operand replaced by ``x0.clone()``: a temporary level 3 may write into."""
    lines = case.source.rstrip().splitlines()
    lines[-1] = re.sub(r"\bx0\b", "x0.clone()", lines[-1], count=1)
    source = "\n".join(lines).replace(f"def {case.name}(", f"def {case.name}_t(", 1) + "\n"
    return dataclasses.replace(case, name=case.name + "_t", source=source)


@pytest.fixture(scope="module")
def opinfo_temporary_cases():
    from torch.testing._internal.common_methods_invocations import op_db

    plans = opinfo.plan_opinfo([op for op in op_db if op.name in OPINFO_NAMES], cap=OPINFO_SAMPLES)
    return [on_a_temporary(c) for p in plans for cases in p.forms.values() for c in cases if isinstance(c, Case)]


@pytest.fixture(scope="module")
def opinfo_pools():
    return {level: {} for level in LEVELS}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_elementwise_opinfo_samples_on_a_temporary_match_eager(opinfo_temporary_cases, opinfo_pools, level, mode):
    """OpInfo's samples with the op's first operand made in the region: level 3 writes into it where it may."""
    cases = [
        dataclasses.replace(c, args=for_mode(c.args, mode), grad=c.grad and mode == "recording")
        for c in opinfo_temporary_cases
    ]
    stats = batch.BatchStats()
    with at_level(level), mode_context(mode):
        results = batch.run_cases(cases, prefix=f"ppy-levels-optemp-{level}", stats=stats, pool=opinfo_pools[level])
    bad = failures_of(results)
    assert not bad, f"level {level}, {mode}: {len(bad)} samples differ or crashed:\n" + "\n\n".join(bad[:5])
    assert not stats.build_failures, batch.build_failures_text(stats)
    assert outcomes.count(results)[MATCH] >= 150, outcomes.count(results)
