"""Breaks: a statement a region cannot take runs as Python, the statements around it run as regions.

Each function below holds one or more such statements (a dict, ``.tolist()`` into Python, a ``try``,
``print``-free calls into other libraries, ...). After its calls settle (``tests/support/breaks.py``)
it is split: ``__ppy_driver__`` runs each call, some segments are regions, and every call is eager's
bit for bit: outputs, inputs after the call, random numbers, errors (type, message, and a traceback
naming the user's line), gradients. One cell; its segments build together.
"""

from __future__ import annotations

import ast
import traceback
import warnings

import pytest
import torch

import ppy_magic
from ppy_magic.errors import CompileError
from tests.support.breaks import differences, region_share, settle
from tests.support.cells import compile_cell

FILENAME = "<ppy-breaks>"

CELL = """
import contextlib
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import ppy

SCALE = 3.0
seen = []


def note(*values):
    seen.append(values)


@ppy.opt(3)
def with_dict(x, w):
    h = torch.tanh(x @ w)
    stats = {"mean": h.mean(), "n": h.shape[0]}
    out = h * stats["mean"] + stats["n"]
    return out.relu() * SCALE


@ppy.opt(3)
def tolist_loop(x, k: int):
    top = x.topk(k).indices
    acc = x.sum() * 0
    for i in top.tolist():
        acc = acc + x[i] * 2
    return acc.sigmoid()


@ppy.opt(3)
def try_shape(x, w):
    h = x * 2 + 1
    try:
        y = h @ w
    except RuntimeError:
        y = h.sum(-1, keepdim=True) * 0.5
    return torch.relu(y) + 1


@ppy.opt(3)
def raise_in_region(x, w):
    h = x + 1
    meta = {"rows": h.shape[0]}
    return h @ w + meta["rows"]


@ppy.opt(3)
def raise_in_break(x):
    h = x * 2
    if h.sum() > 1e30:
        return h
    raise ValueError(f"no luck with {len({'a': 1})} of them")


@ppy.opt(3)
def loop_control(x, n: int):
    acc = x * 0
    for i in range(n):
        acc = acc + x.cos() * i
        if {"i": i}["i"] == 2:
            continue
        if i == 4:
            break
        acc = acc * 0.5
    else:
        acc = acc - 1
    return acc


@ppy.opt(3)
def early_return(x):
    h = x.exp()
    if len({"k": h}) == 1 and h.sum() > 0:
        return h.log()
    return h


@ppy.opt(3)
def python_list(x):
    acc = []
    for t in x.unbind(0):
        y = torch.sin(t) * 2
        acc.append(y)
    extra = {"last": acc[-1]}
    acc.append(extra["last"] + 1)
    return torch.stack(acc).sum(0)


@ppy.opt(3)
def inplace_seen(x):
    y = x.clone()
    y.mul_(3)
    seen.append(float(y.sum()))
    y.add_(seen[-1])
    return y


@ppy.opt(3)
def random_ops(x):
    a = torch.rand_like(x) + x
    noise = {"n": torch.randn(3)}
    b = F.dropout(a, 0.5, True) + noise["n"].sum()
    return b * torch.rand(1)


@ppy.opt(3)
def warns(x):
    y = x.to(torch.float64)
    d = {"y": y}
    return torch.nn.functional.softmax(d["y"])


@ppy.opt(3)
def with_block(x, w):
    h = x @ w
    with contextlib.nullcontext():
        y = torch.tanh(h) * 2
        label = str(y.shape)
    return y + len(label)


@ppy.opt(3)
def kinds_from_python(x, flag: bool):
    n = len({"a": 1, "b": 2}) if flag else 2.5
    y = x * n
    return y + n


@ppy.opt(3)
def maybe_unbound(x, flag: bool):
    if flag:
        mask = x > 0
    d = {"x": x}
    z = torch.tanh(x) * 3
    y = d["x"] * 2
    if flag:
        y = y * mask
    return (y + z).sum(0)


@ppy.opt(3)
def unbound_on_a_path(x, cache, cross: bool):
    meta = {"n": x.shape[0]}
    if cache is not None:
        cur = cache * meta["n"]
    if cross:
        y = torch.sigmoid(cur) * x
    else:
        y = torch.tanh(x) * 2
    return y + 1


DEBUG = False
LIMIT = 3


@ppy.opt(3)
def shadowed_in_a_dead_branch(x):
    if DEBUG:
        LIMIT = 10
    return x * LIMIT


@ppy.opt(3)
def unread_name(x, flag: bool):
    if flag:
        y, _ = x.chunk(2)
    else:
        y = x * 2
    note(y.shape[0])
    z = torch.tanh(y) * 3
    note(z.shape[0])
    return (y + z).sum(0)


@ppy.opt(3)
def fresh_name(x, flag: bool):
    note(x.shape[0])
    if flag:
        freqs = x * 2
    y = x + 1
    if flag:
        y = y * freqs
    note(y.shape[0])
    return y


@ppy.opt(3)
def read_before_bound(x, flag: bool):
    note(x.shape[0])
    y = x * freqs
    if flag:
        freqs = x
    return y


@ppy.opt(3)
def sizes_cross(x):
    whole = x.shape
    rest = x.shape[1:]
    plain = tuple(x.shape)
    note(whole, rest, plain)
    return x.sum() * len(plain)


@ppy.opt(3)
def sizes_into_a_region(x, extra):
    shape = x.shape
    note(shape)
    rows = shape[:-1] + extra
    return x.reshape(-1, shape[-1]).sum(0), rows, shape[1:]


@ppy.opt(3)
def iterates_in_python(x, flag: bool):
    rows = iter(x.unbind(0))
    h = torch.tanh(x) * 2
    if flag:
        rows = h.unbind(0)
    return h.sum(0) + next(rows)


@ppy.opt(3)
def device_compiled_in(x, dev):
    y = x.sum(0)
    return y * 2 if dev is not None else y


@ppy.opt(3)
def uses_global_stmt(x):
    global SCALE
    d = {"x": x}
    return d["x"] * SCALE


@ppy.opt(3)
def reads_a_dict(x, w):
    cache = {"h": x @ w, "n": 3}
    y = torch.tanh(cache["h"]) * cache["n"] + len(cache)
    return y.sum(0) * cache.get("scale", 2.0)


@ppy.opt(3)
def missing_key(x):
    d = {"a": x}
    y = x.exp()
    return torch.relu(y) + d[x.shape[0] if False else "b"]


@ppy.opt(3)
def logs_a_loss(x, w):
    h = torch.tanh(x @ w)
    note((h * h).mean().item(), h.sum(-1).amax().item())
    return h * 2


@ppy.opt(3)
def binds_then_raises(x0, x1):
    try:
        x1 = x0 * 0.5
        if x0.sum() > -100:
            raise ValueError("always")
    except ValueError:
        x0 = x1 + x0
    return x0


@ppy.opt(3)
def deletes(x):
    tmp = x * 2
    d = {"t": tmp}
    del tmp
    return d["t"] + 1


@ppy.opt(3)
def deletes_what_python_bound(x, flag: bool):
    s = torch.tanh(x)
    note(s.shape[0])
    s = s + 1
    if flag:
        note(s.shape[0])
        s = s * 2
    p = s.softmax(-1)
    p = p.type_as(s)
    del s
    note(p.shape[0])
    return p * 2


@ppy.opt(3)
def keyword_only(x, *, scale: float = 2.0, shift=None):
    y = torch.relu(x) * scale
    if shift is not None:
        y = y + shift
    return y.sum(0)


@ppy.opt(3)
def rebinds_later(x0, x1):
    t1 = x0.square()
    t3 = t1 * 2
    for row in x1:
        s = str(row.shape)
        t3 = t3 * len(s)
        if not isinstance(t3, list):
            t1 = row.exp() + 1.5
    return t3.sum()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    @ppy.opt(3)
    def forward(self, x):
        h = self.a(x).relu()
        info = {"h": h}
        base = super().__repr__()
        return self.b(info["h"]) + h + len(base) * 0


@ppy.opt(3, strict=True)
def whole_only(x):
    return x * 2


@ppy.opt(3)
def binds_on_some_paths(x, flag: bool, late: bool):
    y = x * 2
    if flag:
        kept = torch.tanh(y)
    if y.sum() > 0:
        positive = y.relu()
    note(y.shape[0])
    z = y + 1
    if flag:
        z = z * kept
    if late:
        z = z + kept
    try:
        z = z + positive
        has_positive = True
    except NameError:
        has_positive = False
    return z, has_positive


@ppy.opt(3)
def asks_locals(x, flag: bool):
    if flag:
        y = x * 2
    if x.sum() > 0:
        z = x + 1
    return x + 1, "y" in locals(), "z" not in locals()


@ppy.opt(3)
def asks_locals_in_a_comprehension(x, flag: bool):
    y = x * 2
    k = len([i for i in range(3) if "y" in locals()])  # the comprehension's own locals: no y, k is 0
    return y * (k + 1)


@ppy.opt(3)
def calls_a_method(x, store):
    k = torch.tanh(x)
    v = x * 2
    if store is not None:
        k, v = store.update(k, v)
    return k.sum(0) + v


@ppy.opt(3)
def asks_locals_and_breaks(x, flag: bool):
    if flag:
        y = x * 2
    note(x.shape[0])
    return x + 1, "y" in locals()
"""


@pytest.fixture(scope="module")
def cell():
    ns, report = compile_cell(CELL, filename=FILENAME)
    return ns, report


def x44():
    return torch.randn(4, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)


CASES = {
    "with_dict": lambda: (x44(), torch.randn(4, 4)),
    "tolist_loop": lambda: (torch.randn(6, requires_grad=True), 3),
    "try_shape": lambda: (x44(), torch.randn(3, 3)),  # the matmul fails: the handler runs
    "raise_in_region": lambda: (x44(), torch.randn(3, 3)),
    "raise_in_break": lambda: (x44(),),
    "loop_control": lambda: (x44(), 6),
    "early_return": lambda: (x44(),),
    "python_list": lambda: (x44(),),
    "inplace_seen": lambda: (torch.randn(4, 4),),
    "random_ops": lambda: (torch.randn(3),),
    "warns": lambda: (torch.randn(2, 3),),
    "with_block": lambda: (x44(), torch.randn(4, 4)),
    "kinds_from_python": lambda: (x44(), True),
    "maybe_unbound": lambda: (x44(), True),
    "unread_name": lambda: (x44(), True),
    "unbound_on_a_path": lambda: (x44(), None, False),  # `cur` has no value: the form without it is a region
    "sizes_cross": lambda: (x44(),),
    "sizes_into_a_region": lambda: (x44(), (2,)),
    "iterates_in_python": lambda: (x44(), False),  # the run after the break passes an iterator on: Python
    "fresh_name": lambda: (x44(), True),
    "read_before_bound": lambda: (x44(), True),  # UnboundLocalError, as in Python
    "reads_a_dict": lambda: (x44(), torch.randn(4, 4)),
    "logs_a_loss": lambda: (x44(), torch.randn(4, 4)),
    "binds_then_raises": lambda: (x44(), torch.randn(4, 4)),
    "deletes": lambda: (x44(),),
    "rebinds_later": lambda: (x44(), torch.randn(3, 4)),  # a run binds t1 only on some paths: it is passed t1
    "binds_on_some_paths": lambda: (x44(), True, False),
    "calls_a_method": lambda: (x44(), Store()),
}


class Store:
    """An object whose method a region cannot call: `calls_a_method` breaks at `store.update(k, v)`."""

    def update(self, k, v):
        return k + 1, v * 3


def _settled(ns, name):
    f = ns[name]
    settle(f, lambda: _quiet(f, CASES[name]()))
    return f


def _quiet(f, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return f(*args)
        except Exception as exc:  # noqa: BLE001 - compared with eager's
            return exc


@pytest.fixture(scope="module")
def settled(cell):
    ns, _ = cell
    for name in CASES:  # first calls: every segment's build queued together
        _quiet(ns[name], CASES[name]())
    ppy_magic.wait(timeout=900)
    return {name: _settled(ns, name) for name in CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_split_and_bitwise_eager(settled, name):
    f = settled[name]
    assert f.__ppy_driver__ is not None, ppy_magic.explain(f)
    assert f.__ppy_region__ is True, ppy_magic.explain(f)
    assert "cannot compile this (" not in str(ppy_magic.explain(f))
    for _ in range(2):
        assert differences(f, CASES[name]()) == []


def test_the_other_kinds_of_a_call_get_their_own_segment_variants(settled):
    f = settled["kinds_from_python"]
    settle(f, lambda: f(x44(), False))
    for flag in (True, False):
        assert differences(f, (x44(), flag)) == []


def test_a_name_the_function_never_reads_does_not_keep_a_run_python(settled):
    """`_` of `y, _ = pair`, bound on one path only, need not cross into the runs after it."""
    text = str(ppy_magic.explain(settled["unread_name"]))
    assert "may be unbound" not in text, text
    segments = [line for line in text.splitlines() if line.strip().startswith("segment at")]
    assert segments and all(": region (" in line for line in segments), text
    assert "Python at" not in text, text


def test_a_name_only_the_run_binds_is_not_passed_in_and_its_reads_are_checked(settled):
    f = settled["fresh_name"]
    text = str(ppy_magic.explain(f))
    assert "may be unbound" not in text and "Python at" not in text, text
    for flag in (True, False):
        assert differences(f, (x44(), flag)) == []
    with pytest.raises(UnboundLocalError):
        settled["read_before_bound"](x44(), True)


def test_a_name_unbound_on_some_paths_is_passed_where_bound_and_a_region_reads_none_where_not(settled):
    """`cur` is bound only when a cache is given: the run reading it has a form for each case (the driver
    tries the name), each a region; where a path reads it unbound, Python raises UnboundLocalError there."""
    f = settled["unbound_on_a_path"]
    settle(f, lambda: (f(x44(), torch.randn(4, 4), True), f(x44(), torch.randn(4, 4), False)))
    text = str(ppy_magic.explain(f))
    forms = [line for line in text.splitlines() if line.strip().startswith("segment at lines 150-154")]
    assert len(forms) == 2 and all(": region (" in line for line in forms), text
    assert sum("where 'cur' has no value" in line for line in forms) == 1, text
    assert "may be unbound" not in text, text
    for cache, cross in ((None, False), (torch.randn(4, 4), True), (torch.randn(4, 4), False)):
        assert differences(f, (x44(), cache, cross)) == []
    calls = sum(p.calls for p in f.__ppy_parts__)
    f(x44(), None, False)
    f(x44(), torch.randn(4, 4), True)
    assert sum(p.calls for p in f.__ppy_parts__) > calls + 2  # both forms ran as regions
    with pytest.raises(UnboundLocalError, match="'cur'") as info:
        f(x44(), None, True)
    assert any(fr.lineno == 151 for fr in traceback.extract_tb(info.tb) if fr.filename == FILENAME)
    assert differences(f, (x44(), None, True)) == []


def test_a_name_bound_only_in_a_branch_decided_when_compiling_is_still_a_local(cell):
    """`LIMIT = 10` under `if DEBUG:` (False) makes LIMIT a local of the function, unbound where it is read:
    Python raises UnboundLocalError; a region must not read the global instead."""
    ns, _ = cell
    f = ns["shadowed_in_a_dead_branch"]
    for _ in range(3):
        with pytest.raises(UnboundLocalError):
            f(torch.randn(3))
        ppy_magic.wait(timeout=600)
    with pytest.raises(UnboundLocalError):
        f.__wrapped__(torch.randn(3))


def test_sizes_cross_into_python_as_what_python_has_there(cell, settled):
    """x.shape and its slices are torch.Size; tuple(x.shape) is a tuple (it printed as torch.Size once)."""
    ns, _ = cell
    f = settled["sizes_cross"]
    x = x44()
    ns["seen"].clear()
    f.__wrapped__(x)
    before = ppy_magic.explain(f)
    f(x)
    after = ppy_magic.explain(f)
    want, got = ns["seen"]
    assert [type(v) for v in got] == [type(v) for v in want] == [torch.Size, torch.Size, tuple]
    assert [repr(v) for v in got] == [repr(v) for v in want]
    assert after.fallbacks == before.fallbacks and after.calls > before.calls  # the regions returned them


def test_a_size_crosses_into_a_region_as_a_size_and_a_tuple_is_not_taken_for_one(settled):
    """`shape` (a torch.Size) is an input of the run after the break: the region takes it, and what it makes
    of it (`shape[:-1] + extra`, a slice) is a torch.Size as in Python. A plain tuple where the region took a
    Size runs the segment's Python body (its `+` makes a tuple)."""
    f = settled["sizes_into_a_region"]
    text = str(ppy_magic.explain(f))
    assert "Size, which a region does not take" not in text, text
    (part,) = [p for p in f.__dict__["__ppy_split__"].parts if "shape" in p.segment.ins]
    assert part.status().startswith("region ("), text
    calls = part.region.calls
    assert differences(f, (x44(), (2,))) == []
    got = f(x44(), (2,))
    assert type(got[1]) is torch.Size and type(got[2]) is torch.Size
    assert part.region.calls > calls
    values = {"x": x44(), "extra": (2,)}
    fallbacks = part.region.fallbacks
    for shape in (torch.Size([4, 4]), (4, 4)):
        out = part.region(*[values.get(n, shape) for n in part.segment.ins])
        assert type(out[1]) is type(shape) and out[1] == (4, 2)
    assert part.region.fallbacks == fallbacks + 1  # the tuple's call ran the Python body


def test_a_run_no_region_takes_the_values_of_runs_in_the_driver_not_through_a_region_each_call(settled):
    """The run after `iter(...)` rebinds `rows` on one path only, so it is passed the iterator, which no region
    takes: once a call showed it, the run's statements are the driver's own (a region's call that always fell
    back paid a miss each time)."""
    f = settled["iterates_in_python"]
    split = f.__dict__["__ppy_split__"]
    assert not any("rows" in p.segment.ins for p in split.parts), ppy_magic.explain(f)
    text = str(ppy_magic.explain(f))
    assert "Python at lines 221-223: " in text and "iterator" in text, text
    fallbacks = sum(p.fallbacks for p in f.__ppy_parts__)
    for _ in range(3):
        assert differences(f, CASES["iterates_in_python"]()) == []
    assert sum(p.fallbacks for p in f.__ppy_parts__) == fallbacks


def test_a_device_compiled_in_is_the_same_device_at_the_next_call_not_the_same_object(cell):
    """`x.device` is a new torch.device each time: the region specialised to cpu takes every call's."""
    ns, _ = cell
    f = ns["device_compiled_in"]
    x = x44()
    settle(f, lambda: f(x, x.device))
    fallbacks, calls = f.fallbacks, f.calls
    for _ in range(3):
        assert differences(f, (x44(), x.device)) == []
    assert f.fallbacks == fallbacks and f.calls > calls, ppy_magic.explain(f)


def test_a_loop_without_a_break_stays_in_cpp_and_one_with_a_break_runs_its_body_as_regions(settled):
    lines = {p.segment.first_line for p in settled["loop_control"].__dict__["__ppy_split__"].parts}
    text = CELL.splitlines()
    body = next(n for n, t in enumerate(text, 1) if "acc = acc + x.cos() * i" in t)
    assert body in lines  # the loop is Python (it holds a break), its body's first statement a region
    whole = settled["python_list"].__dict__["__ppy_split__"]
    loop = next(n for n, t in enumerate(text, 1) if "for t in x.unbind(0):" in t)
    assert any(p.segment.first_line <= loop <= p.segment.last_line for p in whole.parts)  # one region holds it


def test_explain_and_annotate_show_each_break_with_its_line_and_reason(settled):
    f = settled["with_dict"]
    text = CELL.splitlines()
    line = next(n for n, t in enumerate(text, 1) if 'stats = {"mean"' in t)
    shown = str(ppy_magic.explain(f))
    assert f"break at line {line}: a dict is not supported in a region" in shown
    marks = {ln.number: ln for ln in ppy_magic.annotate(f).functions[0].lines}
    assert marks[line].kind == "python" and "dict" in marks[line].reason
    assert marks[line - 1].kind == "compiled" and marks[line - 1].cpp  # h = torch.tanh(x @ w)
    assert marks[line + 2].kind == "compiled"  # return out.relu() * SCALE
    assert "P |" in str(ppy_magic.annotate(f)) and "runs as Python: a dict" in str(ppy_magic.annotate(f))


def test_a_run_deleting_a_name_bound_before_it_leaves_it_unbound_from_the_first_call(cell):
    # transformers' Longformer: `del attn_scores` in a run between breaks. The run returned the name it had
    # deleted: UnboundLocalError in its Python form, a break at the `del` in its region's.
    ns, _ = cell
    f = ns["deletes_what_python_bound"]
    for call in range(8):  # the first calls run the segments as Python, the later ones their regions
        for flag in (False, True):
            x = x44()
            assert torch.equal(f(x, flag), f.__wrapped__(x, flag)), f"call {call}"
        ppy_magic.wait(timeout=900)
    shown = str(ppy_magic.explain(f))
    assert "s (if bound)" in shown and "may be unbound" not in shown, shown
    line = next(n for n, t in enumerate(CELL.splitlines(), 1) if t.strip() == "del s")
    run = next(p for p in f.__dict__["__ppy_split__"].parts if p.segment.first_line <= line <= p.segment.last_line)
    assert run.region.__ppy_region__ and run.region.calls > 0, shown


def test_a_break_at_a_method_call_names_the_method_as_written(settled):
    f = settled["calls_a_method"]
    line = next(n for n, t in enumerate(CELL.splitlines(), 1) if "store.update(k, v)" in t)
    shown = str(ppy_magic.explain(f))
    assert f"break at line {line}: `store.update` is not supported in a region" in shown, shown
    assert "__ppy" not in shown, shown  # not the name a hoist read it into


def test_an_error_in_a_region_and_in_a_break_is_eagers_and_names_the_users_line(settled):
    text = CELL.splitlines()
    for name, marker in (("raise_in_region", "return h @ w +"), ("raise_in_break", "raise ValueError")):
        f = settled[name]
        args = CASES[name]()
        with pytest.raises(Exception) as got:
            f(*args)
        with pytest.raises(Exception) as want:
            f.__wrapped__(*args)
        assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
        frames = traceback.extract_tb(got.tb)
        line = next(n for n, t in enumerate(text, 1) if marker in t)
        assert (frames[-1].filename, frames[-1].lineno) == (FILENAME, line), frames


def test_a_value_no_region_takes_is_read_in_python_and_the_rest_of_its_statement_compiled(settled):
    f = settled["reads_a_dict"]
    text = CELL.splitlines()
    line = next(n for n, t in enumerate(text, 1) if 'y = torch.tanh(cache["h"])' in t)
    shown = str(ppy_magic.explain(f))
    assert "read in Python just before" in shown and "cache['h']" in shown, shown
    part = next(p for p in f.__dict__["__ppy_split__"].parts if p.segment.first_line == line)
    assert part.region.__ppy_region__, shown
    assert region_share(f, CASES["reads_a_dict"]()) >= 0.6


def test_a_value_read_early_that_raises_raises_where_python_does(cell):
    ns, _ = cell
    f = ns["missing_key"]
    x = x44()
    for _ in range(3):
        with pytest.raises(KeyError) as got:
            f(x)
        ppy_magic.wait(timeout=600)
    with pytest.raises(KeyError) as want:
        f.__wrapped__(x)
    assert str(got.value) == str(want.value)
    assert traceback.extract_tb(got.tb)[-1].lineno == traceback.extract_tb(want.tb)[-1].lineno
    assert differences(f, (x,)) == []


def test_a_call_no_region_makes_has_its_arguments_computed_in_regions(settled):
    f = settled["logs_a_loss"]
    split = f.__dict__["__ppy_split__"]
    lifted = [p for p in split.parts if any(o.startswith("__ppy_arg") for o in p.segment.outs)]
    assert lifted and all(p.region.__ppy_region__ for p in lifted), ppy_magic.explain(f)
    assert region_share(f, CASES["logs_a_loss"]()) >= 0.9


def test_a_try_around_a_region_catches_its_error(settled):
    f = settled["try_shape"]
    x, w = CASES["try_shape"]()
    assert differences(f, (x, w)) == []
    assert differences(f, (x, torch.randn(4, 2))) == []  # the matmul succeeds: no handler


def test_an_in_place_op_of_a_region_is_seen_by_the_python_around_it(cell, settled):
    ns, _ = cell
    f = settled["inplace_seen"]
    x = torch.randn(4, 4)
    ns["seen"].clear()
    got = f(x)
    want = f.__wrapped__(x)
    assert ns["seen"][0] == ns["seen"][1] and torch.equal(got, want)


def test_a_region_holding_values_of_its_own_kinds_falls_back_like_any(settled):
    class Sub(torch.Tensor):
        pass

    f = settled["with_dict"]
    x, w = CASES["with_dict"]()
    before = [p.fallbacks for p in f.__ppy_parts__]
    got = f(x.detach().as_subclass(Sub), w)
    assert torch.equal(got, f.__wrapped__(x.detach().as_subclass(Sub), w))
    assert sum(p.fallbacks for p in f.__ppy_parts__) > sum(before)


def test_most_aten_calls_run_in_regions(settled):
    for name in ("with_dict", "python_list", "loop_control", "with_block", "reads_a_dict"):
        assert region_share(settled[name], CASES[name]()) >= 0.5, name


def test_what_cannot_be_split_stays_python_and_says_why(cell):
    ns, _ = cell
    f = ns["uses_global_stmt"]
    x = torch.randn(3)
    assert torch.equal(f(x), f.__wrapped__(x))
    ppy_magic.wait(timeout=600)
    assert f.__ppy_driver__ is None and not f.__ppy_region__


def test_a_method_with_super_is_split_and_exact(cell):
    ns, _ = cell
    net = ns["Net"]()
    x = torch.randn(2, 4)
    settle(type(net).forward, lambda: net(x))
    forward = type(net).forward
    assert forward.__ppy_driver__ is not None and forward.__ppy_region__
    assert torch.equal(net(x), forward.__wrapped__(net, x))


def test_keyword_only_parameters_are_bound_by_the_driver_and_the_body_is_a_region(cell):
    ns, _ = cell
    f = ns["keyword_only"]
    assert f.__ppy_driver__ is not None and not f.__ppy_region__  # split at the cell, built at its first call
    settle(f, lambda: f(x44(), scale=3.0))
    assert f.__ppy_region__ and "keyword-only" in str(ppy_magic.explain(f))
    for kwargs in ({"scale": 3.0}, {}, {"shift": torch.ones(4)}):
        got, want = f(x44(), **kwargs), f.__wrapped__(x44(), **kwargs)
        assert torch.equal(got, want)
    with pytest.raises(TypeError) as got:
        f(x44(), 3.0)
    with pytest.raises(TypeError) as want:
        f.__wrapped__(x44(), 3.0)
    assert str(got.value) == str(want.value)


def test_strict_refuses_a_function_with_breaks():
    src = "import torch\nimport ppy\n\n@ppy.opt(3, strict=True)\ndef f(x):\n    d = {'x': x}\n    return d['x'] * 2\n"
    with pytest.raises(CompileError, match="dict"):
        compile_cell(src, filename="<ppy-breaks-strict>")
    with pytest.raises(CompileError, match="dict"):
        compile_cell(src.replace(", strict=True", ""), filename="<ppy-breaks-strict2>", strict=True)


def test_the_decorator_checks_strict():
    import ppy

    with pytest.raises(TypeError, match="strict must be True or False"):
        ppy.opt(3, strict="yes")


def test_a_run_binding_a_name_on_some_paths_is_a_region_and_the_driver_unbinds_it_where_python_has_none(settled):
    """`kept` (a branch on a parameter) and `positive` (a branch on a tensor's value) are bound on some paths
    of the run before the break and read after it: the run is a region that returns whether each has a
    value (``"kept" in locals()``, as Python reads it), and the driver unbinds the name where it has none:
    the code after the break sees what Python's would, an UnboundLocalError at its line (or caught by its
    `except NameError`) included."""
    f = settled["binds_on_some_paths"]
    text = str(ppy_magic.explain(f))
    lines = CELL.splitlines()
    first = next(
        n for n, t in enumerate(lines, 1) if t.strip() == "def binds_on_some_paths(x, flag: bool, late: bool):"
    )
    assert "may be unbound" not in text and f"Python at lines {first + 1}" not in text, text
    runs = [p for p in f.__dict__["__ppy_split__"].parts if p.segment.first_line == first + 1]
    assert runs and set(runs[0].segment.unset) == {"kept", "positive"}, text
    assert all(p.status().startswith("region (") for p in runs if p.region.calls), text
    assert "kept (if bound)" in text and "positive (if bound)" in text, text
    for flag in (True, False):
        for sign in (1.0, -1.0):
            calls = sum(p.region.calls for p in runs)
            x = (x44().detach().abs() * sign).requires_grad_()
            assert differences(f, (x, flag, False)) == []
            ppy_magic.wait(timeout=900)
            out = f(x, flag, False)
            assert out[1] is (sign > 0)
            assert sum(p.region.calls for p in runs) > calls, ppy_magic.explain(f)  # the run ran as a region
    with pytest.raises(UnboundLocalError, match="'kept'") as info:
        f(x44(), False, True)
    read = next(n for n, t in enumerate(lines, 1) if t.strip() == "z = z + kept")
    assert any(fr.lineno == read for fr in traceback.extract_tb(info.tb) if fr.filename == FILENAME)
    assert differences(f, (x44(), False, True)) == []


def test_locals_in_a_region_is_the_functions_and_a_function_reading_it_is_never_split(cell):
    """`"y" in locals()` compiles where it asks the function's own names: decided when compiling, or read
    from the flag of a name bound on some paths; in a comprehension it asks the comprehension's (no `y`),
    and the region refuses it there. A function that reads locals() (or vars, eval, exec) is never split: a
    segment's or the driver's names are not the function's, so it is a region whole or runs as Python."""
    ns, _ = cell
    whole, split, inner = (ns[n] for n in ("asks_locals", "asks_locals_and_breaks", "asks_locals_in_a_comprehension"))
    for flag in (True, False):
        for sign in (1.0, -1.0):
            x = (x44().detach().abs() * sign).requires_grad_()
            for f in (whole, split, inner):
                settle(f, lambda f=f, x=x, flag=flag: f(x, flag))
                assert differences(f, (x, flag)) == []
    assert whole.__ppy_region__ is True and whole.__ppy_driver__ is None, ppy_magic.explain(whole)
    for f in (split, inner):
        assert f.__ppy_region__ is False and f.__ppy_driver__ is None, ppy_magic.explain(f)
    assert "`locals()` in a comprehension" in ppy_magic.explain(inner).reason


@pytest.mark.parametrize(
    ("body", "whole"),
    [
        ("return x, 'y' in locals()", True),
        ("return vars()", True),
        ("f = vars\n    return f(x)", True),
        ("return eval('x + 1')", True),
        ("return vars(x)", False),  # an object's attributes: not the frame's names
    ],
)
def test_only_code_reading_the_frame_keeps_a_function_from_being_split(body, whole):
    from ppy_magic.language import splitting

    fn = ast.parse(f"def f(x):\n    {body}").body[0]
    if whole:
        with pytest.raises(splitting.NotSplittable, match="reads every local name"):
            splitting.split(fn, set())
    else:
        assert splitting.split(fn, set()).segments
