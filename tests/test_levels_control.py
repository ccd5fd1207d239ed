"""Level 3 in code with branches, loops and lists: a temporary is reused only where it is dead.

The first tests read the level-3 plans (no build): a temporary read again in a later
iteration, in a `while` or `for ... in` loop, stored in a list, returned, or read on a
path after `break`/`continue`/`return` is never written into; temporaries made and last
read within one block of a loop or a branch are. The rest build one cell at level 3
(one build) and compare every function with eager, bit for bit, values and strides,
under ``torch.no_grad()`` (where level 3 writes in place), with grad mode on and nothing
requiring grad, under ``torch.inference_mode()``, and with autograd recording; the
profiler shows the in-place writes in loops and branches happening. A module whose
parameter requires grad makes autograd record: its region then passes no hoisted
constant (autograd would save it).
"""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

from ppy_magic import explain
from ppy_magic.backend import levels
from ppy_magic.language import frontend, ir
from ppy_magic.language.namespace import collect_globals
from tests.support.cells import compile_cell, is_region

CELL = """
import torch
import torch.nn as nn
import ppy


@ppy.opt(3)
def read_in_a_later_for(x, n: int):
    t = x * 2
    y = torch.tanh(t)
    for i in range(n):
        y = y + t
    return y


@ppy.opt(3)
def read_in_a_later_while(x, n: int):
    t = x * 2
    y = torch.sigmoid(t)
    k = 0
    while k < n:
        y = y * t
        k += 1
    return y


@ppy.opt(3)
def read_in_a_later_for_each(x, xs: list[torch.Tensor]):
    t = x + 1
    y = torch.exp(t)
    for v in xs:
        y = t * v + y
    return y


@ppy.opt(3)
def read_in_a_comprehension(x, n: int):
    t = x * 3
    y = torch.tanh(t)
    ys = [t * i + y for i in range(n)]
    return torch.stack(ys)


@ppy.opt(3)
def appended_then_used(x, n: int):
    outs = []
    for i in range(n):
        t = x * (i + 1)
        outs.append(t)
        u = torch.tanh(t)
        outs.append(u * 2)
    return torch.stack(outs)


@ppy.opt(3)
def returned_from_a_loop(x, n: int):
    for i in range(n):
        t = x * (i + 2)
        y = torch.sigmoid(t)
        if y.sum() > 1000:
            return t
        x = y - 0.5
    return x


@ppy.opt(3)
def read_after_break(x, n: int):
    k = 0
    y = x
    while True:
        t = y * 2
        if k >= n:
            break
        y = torch.tanh(t)
        k += 1
    return y + t


@ppy.opt(3)
def read_after_continue(x, n: int):
    acc = x * 0
    for i in range(n):
        t = x * (i + 1)
        if i % 2 == 0:
            acc = acc + t
            continue
        acc = torch.relu(t) + acc
    return acc


@ppy.opt(3)
def carried_by_a_loop(x, n: int):
    h = x * 1
    for i in range(n):
        h = torch.tanh(h * 0.9 + 0.1) * 1.1
    return h


@ppy.opt(3)
def in_both_branches(x):
    if x.sum() > 0:
        y = torch.tanh(x * 2) + 1
    else:
        y = torch.sigmoid(x - 1) * 3
    return y


@ppy.opt(3)
def constants_in_loops(x, n: int):
    y = x
    for i in range(0, n, 2):
        y = y * 0.5 + 1.5
    for v in [x, x * 2]:
        y = y + v * 0.25
    return y


@ppy.opt(3)
def list_of_steps(x, n: int):
    h = x
    outs = []
    for i in range(n):
        h = torch.tanh(h * 2 + 1)
        outs.append(h)
    return outs


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, 8))

    @ppy.opt(3)
    def forward(self, x):
        return torch.tanh(self.w * 0.5) * 2 + x
"""

FUNCTIONS = [n.name for n in ast.parse(CELL).body if isinstance(n, ast.FunctionDef)]


def _t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


CALLS = {
    "read_in_a_later_for": lambda: (_t(4, 8), 3),
    "read_in_a_later_while": lambda: (_t(4, 8), 3),
    "read_in_a_later_for_each": lambda: (_t(4, 8), [_t(4, 8, seed=1), _t(8, seed=2)]),
    "read_in_a_comprehension": lambda: (_t(4, 8), 3),
    "appended_then_used": lambda: (_t(4, 8), 3),
    "returned_from_a_loop": lambda: (_t(4, 8), 4),
    "read_after_break": lambda: (_t(4, 8), 3),
    "read_after_continue": lambda: (_t(4, 8), 5),
    "carried_by_a_loop": lambda: (_t(4, 8), 4),
    "in_both_branches": lambda: (_t(4, 8),),
    "constants_in_loops": lambda: (_t(4, 8), 5),
    "list_of_steps": lambda: (_t(4, 8), 3),
}
# Where level 3 writes in place on these inputs under no_grad (the profiler names in-place ops).
WRITES = {
    "read_in_a_later_for_each",  # t * v + y: the product, never t
    "read_in_a_comprehension",  # t * i + y: the product, never t or y
    "appended_then_used",  # u * 2
    "read_after_continue",  # relu(t) + acc: relu's result, never t
    "carried_by_a_loop",
    "in_both_branches",
    "constants_in_loops",
    "list_of_steps",
}


def test_every_function_has_inputs():
    assert sorted(FUNCTIONS) == sorted(CALLS)


# ---- the plans, no build ------------------------------------------------------------------------------


def _ir(source: str) -> dict:
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    g = collect_globals(tree, {})
    nodes = {n.name: n for n, _ in frontend.decorated_functions(tree, g)[0] if n.name in CALLS}  # not methods
    return {name: frontend.compile_function(n, g, "<levels>", source.splitlines(), 3) for name, n in nodes.items()}


def _reused(fn: ir.Function) -> list[str]:
    """The temporaries level 3 plans to reuse, as 'op<-maker', in every block of the body."""
    plan = levels.plan_body(fn.body, 3)
    calls = {
        id(s): s.value.op.name
        for block in levels._blocks(fn.body)
        for s in block
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call)
    }
    return sorted(f"{calls[k]}<-{site.made_by}" for k, site in plan.reuse.items())


@pytest.fixture(scope="module")
def plans():
    return {name: _reused(fn) for name, fn in _ir(CELL).items()}


@pytest.mark.parametrize(
    "name",
    ["read_in_a_later_for", "read_in_a_later_while", "read_in_a_later_for_each", "appended_then_used"],
)
def test_a_temporary_read_later_in_a_loop_or_stored_in_a_list_is_not_reused(plans, name):
    # t is read by the first op and again inside a loop (or appended, then read): never written into.
    assert not any(r.endswith("<-mul") and r.startswith(("tanh", "sigmoid")) for r in plans[name]), plans[name]
    assert not any(r.endswith("<-add") and r.startswith("exp") for r in plans[name]), plans[name]


def test_what_is_dead_within_a_block_of_a_loop_or_a_branch_is_reused(plans):
    assert plans["carried_by_a_loop"] == ["add<-mul", "mul<-tanh", "tanh<-add"]
    assert plans["in_both_branches"] == ["add<-tanh", "mul<-sigmoid", "sigmoid<-sub", "tanh<-mul"]
    assert plans["appended_then_used"] == ["mul<-tanh"]  # u * 2; never t, which the list holds
    assert plans["read_in_a_comprehension"] == ["add<-mul"]  # t * i + y; never t or y, read every iteration
    assert plans["read_in_a_later_for_each"] == ["add<-mul"]  # t * v + y; never t
    assert plans["read_after_continue"] == ["add<-relu"]  # relu(t) + acc; never t, read on both paths
    # t is read by the branch, by the return and by sigmoid/tanh: not dead at any of them.
    assert plans["returned_from_a_loop"] == []
    assert plans["read_after_break"] == []


def test_every_statement_kind_is_read_or_refused():
    """Liveness rests on seeing every read: a statement the analysis does not know fails loudly."""

    class Unknown:
        pass

    with pytest.raises(TypeError, match="cannot read"):
        list(levels._stmt_vars(Unknown()))  # type: ignore[arg-type]
    for kind in ir.Stmt.__args__:  # every statement of the IR is one the analysis names
        assert kind.__name__ in levels._own_reads.__code__.co_names, kind


def test_constants_and_loop_counters_have_different_names():
    from ppy_magic.backend import codegen

    text = codegen.generate([_ir(CELL)["constants_in_loops"]]).regions[0].cpp
    assert "ppy::constant_number" in text and "ppy_k0" in text  # a counted loop and a loop over a list
    assert "static const at::Tensor& ppy_k" not in text and "static const at::Scalar ppy_k" not in text


# ---- built at level 3 -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cell():
    ns, report = compile_cell(CELL, {"__name__": "__ppy_levels_control__"}, "<ppy-levels-control>")
    missing = [n for n in [*FUNCTIONS, "Scale"] if n != "Scale" and not is_region(ns[n])]
    assert not missing, report.summary()
    assert is_region(ns["Scale"].forward), report.summary()
    return ns


def _flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat(x)]
    return []


def _same(r, e) -> bool:
    rs, es = _flat(r), _flat(e)
    return (
        type(r) is type(e)
        and len(rs) == len(es)
        and all(
            a.dtype == b.dtype
            and a.shape == b.shape
            and a.stride() == b.stride()
            and a.requires_grad == b.requires_grad
            and torch.equal(a, b)
            for a, b in zip(rs, es, strict=True)
        )
    )


def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.detach().clone().requires_grad_(v.requires_grad)
    if isinstance(v, list):
        return [_clone(x) for x in v]
    return v


def _requiring_grad(v):
    if isinstance(v, list):
        return [_requiring_grad(x) for x in v]
    return v.detach().requires_grad_() if isinstance(v, torch.Tensor) else v


MODES = {
    "no_grad": torch.no_grad,
    "grad mode, nothing requires grad": torch.enable_grad,
    "inference_mode": torch.inference_mode,
    "recording": torch.enable_grad,
}


@pytest.mark.parametrize("mode", list(MODES))
def test_every_function_equals_eager_in_every_mode(cell, mode):
    with MODES[mode]():
        for name, make in CALLS.items():
            f = cell[name]
            args = make()
            if mode == "recording":
                args = tuple(_requiring_grad(a) for a in args)
            before = _clone(args)
            expected = f.__wrapped__(*_clone(args))
            first = f(*args)
            kept = _clone(first)
            second = f(*args)
            assert _same(first, expected) and _same(second, expected), f"{name} under {mode}"
            assert _same(first, kept), f"{name}: a later call wrote into an earlier result"
            assert _same(args, before), f"{name}: an argument was written"
            assert f.fallbacks == 0, f.last_fallback_reason


def _inplace(f, args) -> list[str]:
    with torch.profiler.profile() as prof:
        f(*args)
    # fill_ makes a wrapped number of a run-time Python number (x * (i + 1)), at every level and in eager.
    return [e.name for e in prof.events() if e.name.endswith("_") and e.name not in ("aten::copy_", "aten::fill_")]


@pytest.mark.parametrize("name", list(CALLS))
def test_in_place_writes_happen_in_loops_and_branches_only_where_planned(cell, name):
    with torch.no_grad():
        writes = _inplace(cell[name], CALLS[name]())
    assert bool(writes) == (name in WRITES), f"{name}: {writes}"


def test_a_parameter_that_requires_grad_keeps_hoisted_constants_out_of_the_graph(cell):
    """Grad mode on, the input not requiring grad, the module's parameter requiring it: autograd records."""
    model = cell["Scale"]()
    x = _t(4, 8)
    eager = cell["Scale"]()
    eager.forward = cell["Scale"].forward.__wrapped__.__get__(eager)
    r1, r2, e = model(x), model(x), eager(x)
    assert _same(r1, e) and _same(r2, e)
    # mul saves its other operand, the wrapped number 0.5: a fresh one per call, as in eager.
    saved = [out.grad_fn.next_functions[0][0] for out in (r1, r2)]
    while saved[0].name() != "MulBackward0" or not hasattr(saved[0], "_saved_other"):
        saved = [s.next_functions[0][0] for s in saved]
    assert saved[0]._saved_other.data_ptr() != saved[1]._saved_other.data_ptr()
    (g,) = torch.autograd.grad(r1.sum(), model.w)
    (ge,) = torch.autograd.grad(e.sum(), eager.w)
    assert torch.equal(g, ge)
    assert type(model).forward.fallbacks == 0


def test_explain_names_the_rule_and_the_writes_in_a_loop(cell):
    text = str(explain(cell["carried_by_a_loop"]))
    assert "writes in place into the result of" in text
    assert "made in the same block" in text
