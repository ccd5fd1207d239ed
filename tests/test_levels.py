"""Optimisation levels: what each level writes, and that level 3 never writes where anyone could look.

The first tests read the generated C++ and the level plans (no build). The rest build
one cell at levels 1, 2 and 3 (three builds) and call its functions under the modes
that switch level 3's reuse on (no grad; grad mode on with no input requiring grad)
and off (autograd recording, forward AD, vmap, autocast, a dispatch mode, a
profiler): every result equals eager bit for bit, no argument, view of an argument
or earlier result is ever written, and the profiler shows the in-place writes
happening exactly where the plan says.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import linecache
import textwrap

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.utils._python_dispatch import TorchDispatchMode

from ppy_magic import backend, explain, pipeline
from ppy_magic.backend import levels
from ppy_magic.language import frontend, ir
from ppy_magic.language.namespace import collect_globals

CELL = """
import math
import torch
import torch.nn.functional as F
import ppy


@ppy.opt(3)
def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


@ppy.opt(3)
def layer(x, w, b):
    return torch.relu(x @ w + b)


@ppy.opt(3)
def linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


@ppy.opt(3)
def of_an_argument(x):
    return torch.tanh(x) * 2


@ppy.opt(3)
def view_of_an_argument(x):
    v = x.view(-1)
    return torch.sigmoid(v + 1)


@ppy.opt(3)
def returned_view(x):
    t = x * 2
    v = t[0]
    return v, torch.tanh(t)


@ppy.opt(3)
def returned_temporary(x):
    t = x + 1
    return t, t * 3


@ppy.opt(3)
def used_in_a_loop(x, n: int):
    t = x * 2
    y = x
    for i in range(n):
        y = y + t
    return y


@ppy.opt(3)
def carried_through_a_loop(x, n: int):
    y = x * 1.5
    for i in range(n):
        y = torch.tanh(y) * 2 + 1
    return y


@ppy.opt(3)
def list_elements(xs: list[torch.Tensor]):
    return torch.tanh(xs[0]) + xs[1]


@ppy.opt(3)
def expanded_argument(x, b):
    e = b.expand(4, 8)
    return torch.relu(x * 2) + e


@ppy.opt(3)
def written_by_the_user(x):
    t = x * 2
    t.add_(1)
    return torch.tanh(t)


@ppy.opt(3)
def contiguous_alias(x):
    t = x.contiguous()
    return torch.tanh(t) * 2


@ppy.opt(3)
def broadcast_into(x, b):
    return torch.sigmoid(x * 2) * b


@ppy.opt(3)
def grows(x, y):
    return (x * 2) + y


@ppy.opt(3)
def promotes(x, y):
    return (x * 2) + y


@ppy.opt(3)
def both_temporaries(x):
    return (x * 2) * (x + 1)


@ppy.opt(3)
def where_chain(x, c):
    return torch.where(c, torch.exp(x), x) * 0.5


@ppy.opt(3)
def scaled(x):
    return x * 0.5
"""

FUNCTIONS = [n.name for n in ast.parse(CELL).body if isinstance(n, ast.FunctionDef)]


def _t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# name -> argument makers (fresh tensors each call)
CALLS = {
    "gelu": lambda: (_t(8, 32),),
    "layer": lambda: (_t(8, 32), _t(32, 32, seed=1), _t(32, seed=2)),
    "linear_gelu": lambda: (_t(8, 32), _t(16, 32, seed=1), _t(16, seed=2)),
    "of_an_argument": lambda: (_t(4, 8),),
    "view_of_an_argument": lambda: (_t(4, 8),),
    "returned_view": lambda: (_t(4, 8),),
    "returned_temporary": lambda: (_t(4, 8),),
    "used_in_a_loop": lambda: (_t(4, 8), 3),
    "carried_through_a_loop": lambda: (_t(4, 8), 3),
    "list_elements": lambda: ([_t(4, 8), _t(4, 8, seed=1)],),
    "expanded_argument": lambda: (_t(4, 8), _t(8, seed=1)),
    "written_by_the_user": lambda: (_t(4, 8),),
    "contiguous_alias": lambda: (_t(4, 8),),
    "broadcast_into": lambda: (_t(4, 8), _t(8, seed=1)),
    "grows": lambda: (_t(1, 8), _t(4, 8, seed=1)),  # the result is larger than the temporary
    "promotes": lambda: (_t(4, 8), _t(4, 8, dtype=torch.float64, seed=1)),  # the result is float64
    "both_temporaries": lambda: (_t(4, 8),),
    "where_chain": lambda: (_t(4, 8), _t(4, 8, seed=1) > 0),
    "scaled": lambda: (_t(4, 8),),
}

# Where level 3 writes into a temporary in place on these inputs (the profiler names in-place ops).
REUSES = {
    "gelu",
    "layer",
    "linear_gelu",
    "of_an_argument",
    "view_of_an_argument",
    "carried_through_a_loop",
    "list_elements",
    "expanded_argument",
    "contiguous_alias",
    "broadcast_into",
    "both_temporaries",
    "where_chain",
}


def test_every_function_has_inputs():
    assert sorted(FUNCTIONS) == sorted(CALLS)


# ---- the plans and the C++, no build ------------------------------------------------------------------


def _ir(source: str, level: int):
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    g = collect_globals(tree, {})
    nodes = {n.name: n for n, _ in frontend.decorated_functions(tree, g)[0]}
    return {name: frontend.compile_function(n, g, "<levels>", source.splitlines(), level) for name, n in nodes.items()}


def _reused(fn) -> list[str]:
    """The temporaries level 3 plans to reuse, as 'op<-maker'."""
    plan = levels.plan_body(fn.body, 3)
    calls = {
        id(s): s.value.op.name
        for block in levels._blocks(fn.body)
        for s in block
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
    }
    return sorted(f"{calls[k]}<-{site.made_by}" for k, site in plan.reuse.items())


def test_the_plan_reuses_only_single_use_temporaries_of_functional_ops():
    fns = _ir(CELL, 3)
    assert _reused(fns["gelu"]) == sorted(["mul<-pow", "add<-mul", "mul<-add", "tanh<-mul", "add<-tanh", "mul<-mul"])
    assert _reused(fns["layer"]) == ["add<-matmul", "relu<-add"]
    assert _reused(fns["linear_gelu"]) == ["gelu<-linear"]
    assert _reused(fns["of_an_argument"]) == ["mul<-tanh"]  # never x itself
    assert _reused(fns["view_of_an_argument"]) == ["sigmoid<-add"]  # never v, a view of x
    for name in ("returned_view", "returned_temporary", "used_in_a_loop", "written_by_the_user", "scaled"):
        assert _reused(fns[name]) == [], name  # used twice, in another block, written by the user, an argument
    assert _reused(fns["list_elements"]) == ["add<-tanh"]  # never xs[0] or xs[1]
    assert _reused(fns["contiguous_alias"]) == ["mul<-tanh"]  # contiguous() may return x itself: never reused
    assert _reused(fns["carried_through_a_loop"]) == ["add<-mul", "mul<-tanh"]  # within one iteration


def test_levels_write_different_code_and_explain_says_what():
    from ppy_magic.backend import codegen

    texts = {}
    for level in (1, 2, 3):
        fn = _ir(CELL, level)["gelu"]
        code = codegen.generate([fn])
        texts[level] = code.regions[0].cpp
        notes = code.regions[0].level_notes
    assert "ppy::wrapped_number" in texts[1] and "static const" not in texts[1] and "write_into" not in texts[1]
    assert "ppy::constant_number" in texts[2] and "write_into" not in texts[2]
    assert "ppy::constant_number" in texts[3] and "write_into" in texts[3]
    assert notes[1] == ()
    assert any("wrapped number 0.5" in n for n in notes[2]) and not any("writes" in n for n in notes[2])
    assert sum("writes" in n for n in notes[3]) == 6
    layer = codegen.generate([_ir(CELL, 2)["layer"]]).regions[0]
    assert "at::_ops::mm::call" in layer.cpp and any("calls mm" in n for n in layer.level_notes[2])
    # Level 3 only: functional ops of the list, and mm, may go past the autograd kernel.
    assert "ppy::call_below<" not in texts[1] + texts[2] + layer.cpp
    assert "ppy::call_below<at::_ops::" in texts[3] and any("ppy::call_below" in n for n in notes[3])
    layer3 = codegen.generate([_ir(CELL, 3)["layer"]]).regions[0]
    assert "ppy::call_below<at::_ops::mm>(ppy_direct, " in layer3.cpp


def test_with_a_profiler_attached_level_3_calls_go_through_the_dispatcher(cells):
    """Past the autograd kernel only while nothing observes: a profiler sees each op, as in eager."""
    args = CALLS["layer"]()
    with torch.no_grad(), torch.profiler.profile() as prof:
        out = cells[3]["layer"](*args)
    assert _same(out, cells[3]["layer"].__wrapped__(*args))
    names = [e.name for e in prof.events()]
    assert "aten::mm" in names, names


# ---- built: one cell at each level ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cells():
    out = {}
    for level in (1, 2, 3):
        ns = {"__name__": "__ppy_levels__"}
        filename = f"<ppy-levels-{level}>"
        linecache.cache[filename] = (len(CELL), None, CELL.splitlines(True), filename)
        binder = pipeline.compile_source(CELL, ns, filename, cache=backend.shared_cache(), level_override=level)
        pipeline.run(compile(CELL, filename, "exec"), ns, binder)
        missing = [n for n in FUNCTIONS if not getattr(ns[n], "__ppy_region__", False)]
        assert not missing, binder.report.summary()
        out[level] = ns
    return out


def _bits(t: torch.Tensor) -> torch.Tensor:
    views = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16}
    return t.contiguous().view(views[t.dtype]) if t.dtype in views else t


def _flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat(x)]
    return []


def _same(r, e) -> bool:
    rs, es = _flat(r), _flat(e)
    return len(rs) == len(es) and all(
        a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.requires_grad == b.requires_grad
        and torch.equal(_bits(a), _bits(b))
        for a, b in zip(rs, es, strict=True)
    )


def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.detach().clone().requires_grad_(v.requires_grad)
    if isinstance(v, list):
        return [_clone(x) for x in v]
    return v


MODES = {
    "no_grad": torch.no_grad,
    "grad mode, nothing requires grad": torch.enable_grad,
    "inference_mode": torch.inference_mode,
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("level", [1, 2, 3])
def test_results_equal_eager_and_nothing_visible_is_written(cells, level, mode):
    ns = cells[level]
    with MODES[mode]():
        for name, make in CALLS.items():
            f = ns[name]
            args = make()
            before = _clone(args)
            versions = [t._version for t in _flat(args) if not t.is_inference()]
            expected = f.__wrapped__(*_clone(args))
            first = f(*args)
            kept = _clone(first)
            second = f(*args)  # a second call must not write into the first call's results
            assert _same(first, expected) and _same(second, expected), f"{name} at level {level} under {mode}"
            assert _same(first, kept), f"{name}: a later call wrote into an earlier result"
            assert _same(args, before), f"{name}: an argument (or a view of one) was written"
            assert versions == [t._version for t in _flat(args) if not t.is_inference()], name
            assert f.fallbacks == 0, f.last_fallback_reason


def _aten_ops(f, args) -> list[str]:
    with torch.profiler.profile() as prof:
        f(*args)
    return [e.name for e in prof.events()]


def _requiring_grad(a):
    if isinstance(a, list):
        return [_requiring_grad(x) for x in a]
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.detach().requires_grad_()
    return a


def _inplace(ops: list[str]) -> collections.Counter:
    return collections.Counter(op for op in ops if op.endswith("_") and op != "aten::copy_")


@pytest.mark.parametrize("name", list(CALLS))
def test_level_3_writes_in_place_exactly_where_planned(cells, name):
    """With a profiler attached the writes go through the dispatcher, so the profiler names them."""
    args = CALLS[name]()
    with torch.no_grad():
        extra = _inplace(_aten_ops(cells[3][name], args)) - _inplace(_aten_ops(cells[1][name], args))
    if name in REUSES:
        assert extra, f"{name}: level 3 made no in-place write"
    else:
        assert not extra, f"{name}: level 3 wrote in place although nothing may be reused: {extra}"
    with torch.enable_grad():
        grad_args = [_requiring_grad(a) for a in args]
        recording = _inplace(_aten_ops(cells[3][name], grad_args)) - _inplace(_aten_ops(cells[1][name], grad_args))
    assert not recording, f"{name}: level 3 wrote in place while autograd was recording"


def test_level_3_reuses_when_the_checks_pass_and_not_otherwise(cells):
    with torch.no_grad():
        ops = _aten_ops(cells[3]["broadcast_into"], CALLS["broadcast_into"]())
        assert "aten::sigmoid_" in ops and "aten::mul_" in ops  # b broadcasts into the temporary
        ops = _aten_ops(cells[3]["grows"], CALLS["grows"]())
        assert "aten::add_" not in ops and "aten::add" in ops  # the result is larger than x * 2
        ops = _aten_ops(cells[3]["promotes"], CALLS["promotes"]())
        assert "aten::add_" not in ops  # float32 + float64 is float64
        x = CALLS["gelu"]()[0]
        ops = _aten_ops(cells[3]["gelu"], (x.t(),))  # a transposed input: the temporaries follow its layout
        assert "aten::tanh_" not in ops


def test_autograd_recording_runs_level_2_code(cells):
    x = _t(8, 32).requires_grad_()
    ops = _aten_ops(cells[3]["gelu"], (x,))
    assert "aten::tanh" in ops and "aten::tanh_" not in ops
    y1 = cells[3]["gelu"](x)
    e = cells[3]["gelu"].__wrapped__(x)
    assert _same(y1, e)
    (g,) = torch.autograd.grad(y1.sum(), x)
    (ge,) = torch.autograd.grad(e.sum(), x)
    assert torch.equal(g, ge)
    # The wrapped numbers autograd saves are fresh per call, as in eager: no hoisted constant is ever saved.
    s1, s2 = cells[3]["scaled"](x), cells[3]["scaled"](x)
    assert s1.grad_fn._saved_other.data_ptr() != s2.grad_fn._saved_other.data_ptr()


class Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", ["gelu", "layer", "broadcast_into"])
def test_a_dispatch_mode_sees_the_ops_eager_makes(cells, name):
    """A Python dispatch mode sees eager's ops: the region runs its Python body under one (a region may pick
    another overload of the same op, e.g. rsub.Tensor of a wrapped number for `1 - x`), and says why."""
    args = CALLS[name]()
    f = cells[3][name]
    before = f.fallbacks
    with torch.no_grad():
        with Recorder() as region:
            r = f(*args)
        with Recorder() as eager:
            e = f.__wrapped__(*args)
    assert _same(r, e) and region.seen == eager.seen
    assert f.fallbacks == before + 1 and f.last_fallback_reason == "a TorchDispatchMode is active"


@pytest.mark.parametrize(
    "context",
    ["forward AD", "vmap", "autocast", "profiler"],
)
def test_transforms_and_modes_run_the_ordinary_ops(cells, context):
    f = cells[3]["gelu"]
    x = _t(4, 8)
    if context == "forward AD":
        tangent = _t(4, 8, seed=3)
        with fwAD.dual_level():
            out = fwAD.unpack_dual(f(fwAD.make_dual(x, tangent)))
            exp = fwAD.unpack_dual(f.__wrapped__(fwAD.make_dual(x, tangent)))
        assert _same(out.primal, exp.primal) and _same(out.tangent, exp.tangent)
    elif context == "vmap":
        assert _same(torch.func.vmap(f)(x), torch.func.vmap(f.__wrapped__)(x))
    elif context == "autocast":
        layer = cells[3]["layer"]
        args = CALLS["layer"]()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            assert _same(layer(*args), layer.__wrapped__(*args))
    else:
        with torch.no_grad(), torch.profiler.profile():
            assert _same(f(x), f.__wrapped__(x))


def test_eager_composites_call_mm_and_addmm_as_level_2_assumes():
    x, w, b = _t(8, 32), _t(16, 32, seed=1), _t(16, seed=2)
    with torch.profiler.profile() as prof:
        torch.nn.functional.linear(x, w, b)
        x @ w.t()
    parents = {(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in prof.events()}
    assert ("aten::addmm", "aten::linear") in parents and ("aten::t", "aten::linear") in parents
    assert ("aten::mm", "aten::matmul") in parents


def test_explain_shows_each_level(cells):
    text = str(explain(cells[3]["gelu"]))
    assert "compiled at level 3" in text and "<- this region" in text
    assert "tanh writes in place into the result of mul" in text
    assert "the wrapped number 0.5" in text
    text1 = str(explain(cells[1]["layer"]))
    assert "compiled at level 1" in text1 and "matmul of two matrices calls mm" in text1


def test_argument_handling_is_unchanged_by_levels(cells):
    # Optional tensors and defaults go through the same runtime path at every level.
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        for level in (1, 3):
            f = cells[level]["list_elements"]
            xs = CALLS["list_elements"]()[0]
            assert _same(f(xs), f.__wrapped__(xs))


def test_the_magic_documents_the_levels(ip):
    doc = ip.find_cell_magic("ppy").__doc__
    for words in ("1: the straight translation", "2: work done once", "3 (the default)", "explain(f)"):
        assert words in doc, words
