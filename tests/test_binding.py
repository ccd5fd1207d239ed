"""The binder base the cell's and the artifact's binders share: which function gets which region.

No compiler: the regions come from a fake runtime whose ``RegionFunction`` only
remembers its function, so these tests cost no build.
"""

from __future__ import annotations

import math
import types

import pytest
import torch

from ppy_magic import backend, binding, decorator, pipeline
from ppy_magic.errors import CompileError

FILENAME = "<binding-test>"
SOURCE = """\
import ppy

K = 0.5


@ppy.opt(3)
def scaled(x):
    return x * K


@ppy.opt(0)
def never(x):
    return x


@ppy.opt
def bare(x):
    return x


@ppy.opt(3)
def failed(x):
    return x
"""


class FakeRegion:
    def __init__(
        self,
        fn,
        module,
        index,
        kinds,
        ret,
        mask,
        names,
        defaults,
        notes,
        result_types,
        check_unobserved=False,
        extras=0,
    ) -> None:
        self.fn, self.index = fn, index
        self.__ppy_region__ = True


FAKE_RUNTIME = types.SimpleNamespace(RegionFunction=FakeRegion)
FAKE_MODULE = types.ModuleType("ppy_cell_fake")


def spec(name: str, first_line: int, frozen: dict) -> backend.RegionSpec:
    return backend.RegionSpec(
        index=0,
        name=name,
        qualname=name,
        symbol=f"ppy_{name}",
        kinds="T",
        ret="T",
        param_names=("x",),
        defaults=(),
        line_notes={},
        first_line=first_line,
        filename=FILENAME,
        frozen_globals=frozen,
        cpp="",
    )


def run(k: object = 0.5, **binder_options) -> tuple[dict, pipeline.CellBinder]:
    """Run SOURCE with a cell binder whose only region is `scaled`, compiled with K = 0.5."""
    failure = CompileError("a reason from the front end", None, "a hint")
    binder = pipeline.CellBinder(
        FILENAME,
        {("scaled", 6): spec("scaled", 6, {"K": 0.5})},
        {("failed", 21): failure},
        pipeline.CellReport(),
        module=FAKE_MODULE,
        runtime=FAKE_RUNTIME,
        **binder_options,
    )
    ns: dict = {"__name__": "binding_test"}
    pipeline.run(compile(SOURCE.replace("K = 0.5", f"K = {k!r}"), FILENAME, "exec"), ns, binder)
    return ns, binder


def test_a_region_is_bound_as_its_def_runs():
    ns, binder = run()
    assert isinstance(ns["scaled"], FakeRegion) and ns["scaled"].fn.__name__ == "scaled"
    assert ns["scaled"].__wrapped__ is ns["scaled"].fn and ns["scaled"].__ppy_info__.level == 3
    assert binder.bound == [ns["scaled"]]
    assert ns["failed"].__ppy_reason__ == "a reason from the front end"
    assert ("failed", "a reason from the front end") in binder.report.python
    assert binder.report.hints[("failed", "a reason from the front end")] == "a hint"


def test_functions_of_another_file_are_not_the_binders():
    binder = pipeline.CellBinder(FILENAME, {}, {}, pipeline.CellReport())

    def elsewhere(x):
        return x

    assert binder.bind(elsewhere, 3) is elsewhere
    assert not hasattr(elsewhere, "__ppy_reason__") and binder.report.python == []


def test_level_zero_stays_python_and_only_minus_o_0_is_reported():
    ns, binder = run()
    assert ns["never"].__ppy_reason__ == "ppy.opt(0): never compiled"
    assert "never" not in [name for name, _ in binder.report.python]
    ns, binder = run(default_level=0)
    assert ns["bare"].__ppy_reason__.startswith("a bare @ppy.opt has the default level, 0")
    assert isinstance(ns["scaled"], FakeRegion)  # its written level wins over the default
    ns, binder = run(level_override=0)
    assert not any(isinstance(ns[f], FakeRegion) for f in ("scaled", "never", "bare", "failed"))
    assert ns["scaled"].__ppy_reason__ == "-O 0 leaves every function of the cell Python"
    assert [name for name, _ in binder.report.python] == ["scaled", "never", "bare", "failed"]


@pytest.mark.parametrize("k", [0.25, -0.5, 1, True, "0.5"])
def test_a_global_that_changed_since_compiling_leaves_the_function_python(k):
    ns, binder = run(k)
    assert not isinstance(ns["scaled"], FakeRegion)
    reason = "global 'K' changed between compiling and running the cell, so the compiled value would be wrong"
    assert ns["scaled"].__ppy_reason__ == reason and ("scaled", reason) in binder.report.python
    assert binder.bound == []


@pytest.mark.parametrize(
    "then, now, same",
    [
        (0.5, 0.5, True),
        (math.nan, float("nan"), True),  # NaN matches NaN
        (0.0, -0.0, False),  # bit for bit: a product's sign would differ
        (1, True, False),
        (1, 1.0, False),
        (2**70, 2**70, True),
        (torch, torch, True),
        (torch.sin, torch.cos, False),
        ([1], [1], False),  # not a number: only the same object holds
    ],
)
def test_a_frozen_global_holds_when_it_is_the_same_object_or_the_same_number_bit_for_bit(then, now, same):
    assert binding.same_value(then, now) is same


def test_a_callable_that_takes_no_attributes_stays_python_without_an_error():
    binder = pipeline.CellBinder(FILENAME, {}, {}, pipeline.CellReport())
    assert binder.bind(len, None) is len
    assert binder.report.python == [("len", "it was not found among the cell's top-level functions")]


def test_the_default_level_is_the_decorators():
    assert pipeline.CellBinder(FILENAME, {}, {}, pipeline.CellReport()).default_level == decorator.DEFAULT_LEVEL
