"""Variants built at a call: kinds from the values a call brings, Python values as guarded constants.

Every function here leaves a kind open (an unannotated parameter, a callable or a module passed in,
a config object, a flag that decides a name's kind): none is built at the cell. The first call runs
Python and builds a variant in the background; after ``ppy_magic.wait()`` the same kinds run the
region, bit for bit eager's (outputs, inputs after the call, errors, gradients), at levels 1 and 3 in
the four autograd modes. A call that brings other kinds or values never runs a variant built for
others: it gets its own. This file builds about a dozen small variants per level.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
import time
import types

import pytest
import torch
from torch import nn

import ppy_magic
from ppy_magic import variants
from ppy_magic.errors import BuildError
from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.modes import MODES, for_mode, mode_context
from tests.support.outcomes import MATCH

CELL = """
import functools
import types
import torch
import torch.nn as nn
import torch.nn.functional as F
import ppy


@ppy.opt(3)
def scaled(x, scale):
    s = 1.0 if scale is None else scale
    return x * s


@ppy.opt(3)
def act_of(x, act):
    return act(x) * 2


@ppy.opt(3)
def with_bias(x, b, flag: bool):
    acc = 0
    if flag:
        acc = acc + b
    return x + acc


@ppy.opt(3)
def power(x, n: int):
    return x * (2 ** n)


@ppy.opt(3)
def widest(x, a: int, b: float):
    return x * max(a, b)


@ppy.opt(3)
def through(x, layer):
    return layer(x).relu()


@ppy.opt(3)
def stack(x, layers):
    for layer in layers:
        x = layer(x)
    return x


@ppy.opt(3)
def from_config(x, cfg):
    y = x * cfg.scale
    if cfg.relu:
        y = y.relu()
    return y.reshape(-1, cfg.width)


@ppy.opt(3)
def by_mode(x, mode):
    if mode == "scale":
        k = 2
    else:
        k = x.mean()
    return x * k


@ppy.opt(3)
def same_code_for_two_modes(x, mode):
    if mode == "c":
        x = x * len({"c": 1})  # no region takes it: `mode` is compiled in, and "c" never called here
    return x + 1


def pick_activation():
    return torch.sigmoid


ACT = pick_activation()  # bound when the cell runs: not known when it compiles
FACTOR = float("1.5")


@ppy.opt(3)
def uses_free_names(x):
    return ACT(x) * FACTOR


class Cfg:
    def __init__(self, width, k):
        self.width = width
        self.k = k


class Scale(nn.Module):
    def __init__(self, config, act_layer=nn.GELU):
        super().__init__()
        self.width = config.width
        self.k = config.k
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, config.width))
        self.act = act_layer()

    @ppy.opt(3)
    def forward(self, x):
        return self.act(x * self.weight) * self.k
"""

LEVELS = (1, 3)
FUNCTIONS = (
    "scaled",
    "act_of",
    "with_bias",
    "power",
    "widest",
    "through",
    "stack",
    "from_config",
    "by_mode",
    "uses_free_names",
)


@pytest.fixture(scope="module")
def cells():
    built = {}
    for level in LEVELS:
        ns, report = compile_cell(CELL, filename=f"<ppy-variants-{level}>", level_override=level)
        built[level] = (ns, report)
    return built


def calls_of(ns: dict) -> list[tuple[str, tuple]]:
    """(function, args) pairs: each source of a kind a call can bring."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=g, requires_grad=True)
    b = torch.randn(4, 6, generator=g, requires_grad=True)
    torch.manual_seed(0)
    lin = nn.Linear(6, 6)
    layers = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])
    return [
        ("scaled", (x, 0.5)),
        ("scaled", (x, 3)),
        ("scaled", (x, None)),
        ("act_of", (x, torch.tanh)),
        ("act_of", (x, functools_partial_gelu())),
        ("with_bias", (x, b, True)),
        ("with_bias", (x, b, False)),
        ("power", (x, 3)),
        ("power", (x, -2)),
        ("widest", (x, 3, 2.5)),
        ("widest", (x, 2, 2.5)),
        ("through", (x, lin)),
        ("stack", (x, layers)),
        ("from_config", (x, types.SimpleNamespace(scale=2.0, relu=True, width=3))),
        ("from_config", (x, types.SimpleNamespace(scale=0.5, relu=False, width=2))),
        ("by_mode", (x, "scale")),
        ("by_mode", (x, "mean")),
        ("uses_free_names", (x,)),
    ]


def functools_partial_gelu():
    """One partial object for every call: a callable is compiled in and compared by identity."""
    return GELU_TANH


GELU_TANH = functools.partial(torch.nn.functional.gelu, approximate="tanh")


def test_nothing_is_built_at_the_cell_and_each_is_tried_again_at_its_call(cells):
    """`scaled` is the exception: its unannotated `scale` is a tensor at the cell; other kinds get variants."""
    for _level, (ns, report) in cells.items():
        at_call = set(FUNCTIONS) - {"scaled"}
        assert at_call <= set(report.at_call)
        assert "Scale.forward" in report.at_call
        assert "scaled" in report.compiled
        for name in at_call:
            assert not is_region(ns[name]), name
        assert "first call compiles it again" in report.summary()


@pytest.mark.parametrize("level", LEVELS)
def test_every_source_of_a_kind_is_a_region_after_its_first_call(cells, level):
    ns, _ = cells[level]
    cases = calls_of(ns)
    for name, args in cases:  # the first calls: Python, each asking for its variant
        ns[name](*args)
    assert ppy_magic.wait(timeout=600)
    for name, args in cases:
        f = ns[name]
        assert is_region(f), (name, ppy_magic.explain(f))
        status, why = compare_call(f, args)
        assert status == MATCH, (name, args[1:], why, str(ppy_magic.explain(f)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", LEVELS)
def test_variants_match_eager_in_every_autograd_mode(cells, level, mode):
    ns, _ = cells[level]
    cases = calls_of(ns)
    for name, args in cases:
        ns[name](*args)
    assert ppy_magic.wait(timeout=600)
    for name, args in cases:
        args = tuple(for_mode(a, mode) for a in args)
        with mode_context(mode):
            status, why = compare_call(ns[name], args, grad=mode == "recording")
        assert status == MATCH, (name, mode, why)


def test_a_value_is_a_constant_only_where_it_decides(cells):
    """`flag` decides a name's kind: a constant. `scale` only flows into the multiplication: one variant
    for every float. `n` of `2 ** n` is an int or a float by its sign: a constant."""
    ns, _ = cells[3]
    x = torch.randn(3)
    for s in (0.5, 0.25, 1.5):
        ns["scaled"](x, s)
        ppy_magic.wait()
    floats = [r for r in ns["scaled"].__dict__["__ppy_variant_records__"] if "scale: float" in " ".join(r.specialised)]
    assert len(floats) == 1
    for flag in (True, False):
        ns["with_bias"](x, x, flag)
    ns["power"](x, 3)
    ppy_magic.wait()
    text = str(ppy_magic.explain(ns["with_bias"]))
    assert "flag == True (compiled in)" in text and "flag == False (compiled in)" in text
    assert "n == 3 (compiled in)" in str(ppy_magic.explain(ns["power"]))
    annotated = str(ppy_magic.annotate(ns["with_bias"]))  # %%ppy -a marks the lines the flag decides
    flag_line = next(ln for ln in annotated.splitlines() if "if flag:" in ln)
    assert "specialised" in flag_line, annotated
    assert "specialised" not in next(ln for ln in annotated.splitlines() if "return x + acc" in ln)


def test_two_values_whose_code_is_the_same_get_a_variant_each(cells):
    """`mode` decides a branch only a value compiled in lets compile, so it is compiled in; for "a" and "f"
    the branch is dropped and the C++ is the same, but each variant's guard compares its own value: "f"
    needs a variant of its own, or every call with it would miss and run Python."""
    ns, _ = cells[3]
    f = ns["same_code_for_two_modes"]
    x = torch.randn(4)
    for mode in ("a", "f"):
        f(x, mode)
        ppy_magic.wait()
    text = str(ppy_magic.explain(f))
    assert "mode == 'a' (compiled in)" in text and "mode == 'f' (compiled in)" in text, text
    for mode in ("f", "a", "f"):
        calls, fallbacks = f.calls, f.fallbacks
        assert torch.equal(f(x, mode), x + 1)
        assert (f.calls, f.fallbacks) == (calls + 1, fallbacks), text


def test_a_guard_failure_never_runs_a_wrong_variant(cells):
    ns, _ = cells[3]
    x, b = torch.randn(5), torch.randn(5)
    f = ns["with_bias"]
    for flag in (True, False, True, False):  # a flag flipped between calls
        f(x, b, flag)
    ppy_magic.wait()
    for flag in (True, False, False, True):
        calls = f.calls
        assert torch.equal(f(x, b, flag), x + b if flag else x + 0)
        assert f.calls == calls + 1
    act = ns["act_of"]  # a different callable passed
    act(x, torch.sigmoid)
    assert torch.equal(act(x, torch.relu), torch.relu(x) * 2)
    ppy_magic.wait()
    for fn in (torch.sigmoid, torch.relu, torch.tanh):
        assert torch.equal(act(x, fn), fn(x) * 2)


def test_a_free_name_read_at_the_call_is_guarded(cells):
    """ACT and FACTOR are bound when the cell runs: the variant reads them then, and checks at each call that
    they are still the objects it compiled in; rebinding one gets a new variant, never a stale result."""
    ns, _ = cells[3]
    f = ns["uses_free_names"]
    x = torch.randn(4)
    f(x)
    ppy_magic.wait()
    calls = f.calls
    assert torch.equal(f(x), torch.sigmoid(x) * 1.5)
    assert f.calls == calls + 1
    ns["FACTOR"] = 2.5
    assert torch.equal(f(x), torch.sigmoid(x) * 2.5)  # the old variant's guard fails: Python, right
    ppy_magic.wait()
    calls = f.calls
    assert torch.equal(f(x), torch.sigmoid(x) * 2.5)
    assert f.calls == calls + 1
    ns["FACTOR"] = 1.5


def test_a_module_compiled_at_its_call_and_an_attribute_changed_to_another_kind(cells):
    ns, report = cells[3]
    torch.manual_seed(0)
    m = ns["Scale"](ns["Cfg"](4, 2))
    e = ns["Scale"](ns["Cfg"](4, 2))
    e.load_state_dict(m.state_dict())
    x = torch.randn(3, 4)
    m(x)
    ppy_magic.wait()
    forward = type(m).forward
    calls = forward.calls
    y = m(x)
    assert forward.calls == calls + 1
    assert torch.equal(y, forward.__wrapped__(e, x))
    y.sum().backward()
    forward.__wrapped__(e, x).sum().backward()
    assert torch.equal(m.weight.grad, e.weight.grad)
    m.k = e.k = 2.5  # an int attribute becomes a float: never the int variant
    assert torch.equal(m(x), forward.__wrapped__(e, x))
    ppy_magic.wait()
    calls = forward.calls
    assert torch.equal(m(x), forward.__wrapped__(e, x))
    assert forward.calls == calls + 1
    assert len(forward.__ppy_variants__) == 2
    other = ns["Scale"](ns["Cfg"](4, 2), act_layer=nn.Tanh)  # another class under self.act: its own variant
    assert torch.equal(other(x), forward.__wrapped__(other, x))
    ppy_magic.wait()
    calls = forward.calls
    assert torch.equal(other(x), forward.__wrapped__(other, x))
    assert forward.calls == calls + 1


def test_the_variant_limit_names_what_changed(cells, monkeypatch):
    ns, _ = cells[1]
    monkeypatch.setattr(variants.settings, "max_variants", 2)
    f = ns["power"]
    x = torch.randn(3)
    for n in (0, 1, 4, 5):
        assert torch.equal(f(x, n), x * (2**n))
        ppy_magic.wait()
    assert len(f.__ppy_variants__) <= 3  # power(x, 3) and power(x, -2) of the other tests may be built already
    reason = ppy_magic.explain(f).reason or ""
    assert "max_variants" in reason and "'n'" in reason and "Annotate" in reason, reason
    assert torch.equal(f(x, 6), x * 64)  # past the limit: Python, right


def _fresh_cell(tag: str) -> dict:
    src = f"""
import torch
import ppy

@ppy.opt(3)
def fresh_{tag}(x, k):
    return x * k + {len(tag)}
"""
    ns, _ = compile_cell(src, filename=f"<ppy-variants-fresh-{tag}>")
    return ns


@pytest.mark.parametrize("error", [BuildError("the compiler was killed"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_background_build_leaves_a_working_function(monkeypatch, error):
    tag = "b" if isinstance(error, BuildError) else "k"
    ns = _fresh_cell(tag)
    f = ns[f"fresh_{tag}"]
    cache = f.__dict__  # the hook is on the region; its cache is the shared one

    def failing_load(self, name, text, **kw):
        raise error

    monkeypatch.setattr(type(variants.backend.shared_cache()), "load", failing_load)
    x = torch.randn(3)
    assert torch.equal(f(x, 2.0), x * 2.0 + 1)
    ppy_magic.wait()
    assert len(f.__ppy_variants__) == 1  # the cell's (a tensor `k`): the float's never landed
    calls = f.calls
    assert torch.equal(f(x, 2.0), x * 2.0 + 1)
    assert f.calls == calls  # Python, and right
    text = str(ppy_magic.explain(f))
    assert "failed" in text, text
    assert cache.get("__ppy_call_reason__")


@pytest.mark.slow
def test_a_background_build_whose_compiler_is_killed(monkeypatch, tmp_path):
    """SIGKILL of the compiler of a background build: the function keeps working in Python and says why."""
    monkeypatch.setenv("PPY_CACHE_DIR", str(tmp_path))
    from ppy_magic import backend

    cache = backend.Cache(str(tmp_path))
    src = """
import torch
import ppy

@ppy.opt(3)
def killed(x, k):
    return (x * k).sin().cos()
"""
    import linecache

    linecache.cache["<ppy-killed>"] = (len(src), None, src.splitlines(True), "<ppy-killed>")
    from ppy_magic import pipeline

    ns = {"__name__": "__killed__"}
    binder = pipeline.compile_source(src, ns, "<ppy-killed>", cache=cache)
    pipeline.run(compile(src, "<ppy-killed>", "exec"), ns, binder)
    f = ns["killed"]
    x = torch.randn(4)
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set():
            out = subprocess.run(["pgrep", "-f", "cc1plus"], capture_output=True, text=True).stdout.split()
            for pid in [p for p in out if p.isdigit() and _descends_from(int(p), os.getpid())]:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    try:
        assert torch.equal(f(x, 2.0), (x * 2.0).sin().cos())
        assert ppy_magic.wait(timeout=300)
    finally:
        stop.set()
        t.join()
    assert len(f.__ppy_variants__) == 1  # the cell's: the float's build was killed
    assert torch.equal(f(x, 2.0), (x * 2.0).sin().cos())
    assert "failed" in str(ppy_magic.explain(f))


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process `pid` is a descendant of `ancestor` (only this test's own compilers are killed)."""
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def test_a_kernel_interrupt_while_a_build_runs_in_the_background():
    """SIGINT (the notebook's "interrupt kernel") while a variant builds: the interrupted code stops as
    Python would; the build goes on, lands, and the function is a region."""
    ns = _fresh_cell("i")
    f = ns["fresh_i"]
    x = torch.randn(3)
    assert torch.equal(f(x, 0.25), x * 0.25 + 1)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            while True:  # the user's code, busy while the build runs
                time.sleep(0.01)
    finally:
        timer.cancel()
    assert ppy_magic.wait(timeout=600)
    calls = f.calls
    assert torch.equal(f(x, 0.25), x * 0.25 + 1)
    assert f.calls == calls + 1


def test_a_plain_call_never_waits_for_the_build():
    ns = _fresh_cell("w")
    f = ns["fresh_w"]
    x = torch.randn(3)
    t0 = time.perf_counter()
    f(x, 1.5)
    assert time.perf_counter() - t0 < 2.0  # the build (seconds) runs in the background
    assert ppy_magic.wait(timeout=600)
    assert is_region(f)


def test_blocking_builds_at_the_call_and_runs_the_region():
    ns = _fresh_cell("z")
    f = ns["fresh_z"]
    x = torch.randn(3)
    with variants.blocking():
        calls = f.calls
        assert torch.equal(f(x, 3), x * 3 + 1)
        assert f.calls == calls + 1  # the call itself ran the new variant
