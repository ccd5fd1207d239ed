"""The control-flow constructs of the language, one by one: each region against eager, and what stays Python.

Truth of tensors (eager's is_nonzero, its errors included), and/or with Python's values and
short-circuit, while/for with break, continue, else and return inside, iteration over ranges,
tensors, lists, zip/enumerate/reversed and tuples known at compile time, lists as values
(methods, indexing, aliasing, comprehensions, reductions), numbers from .item()/float()/int().
Every call is compared bit for bit with eager by tests/support/eager.py (outputs, errors,
gradients). The refusals need no build: each is a located reason. This file costs one build.
"""

from __future__ import annotations

import pytest
import torch

import ppy_magic
from tests.support.cells import compile_cell, compile_error
from tests.support.eager import compare_call
from tests.support.outcomes import MATCH

CELL = """
import torch
import ppy


@ppy.opt(3)
def truth(x, y):
    a = 1.0 if x.sum() > 0 else -1.0
    b = x or y
    c = x.max() > 0 and y
    d = not (x < y).all()
    e = 0 < x.sum() < 5
    return a, b, c, d, e


@ppy.opt(3)
def conversions(x):
    v = x.sum().item()
    return v, float(x.sum()), int(x.sum()), bool(x.sum() > 0), v * 2 + 1, v > 0.5, -v, abs(v)


@ppy.opt(3)
def item_of(x):
    return x.item()


@ppy.opt(3)
def number_arithmetic(x, y):
    a = x.item()
    b = y.item()
    return (
        a + b, a - 1, a * 2.5, a / 3, a // 2, a % 3, b - True, -a, abs(b),
        a < b, a == 2, a >= 1.5, b != 0, 0.5 < a <= 3, float(a), int(b), bool(a),
        x * a, a - y, max(a, b) if a > b else b,
    )


@ppy.opt(3)
def and_or_values(n: int, f: float, flag: bool):
    return n or f, n and f, flag or n, (n > 2) and (f < 1.0)


@ppy.opt(3)
def membership(x, mode: str, k: int):
    if mode in ("mean", "sum"):
        x = x * 2
    if k not in (1, 2, 3):
        x = x + 1
    return x, k in (5, 6), mode not in ("max",)


@ppy.opt(3)
def while_else(x, limit: int):
    k = 0
    while x.abs().max() > 1e-3:
        x = x / 2
        k += 1
        if k >= limit:
            break
    else:
        x = x * 0
    return x, k


@ppy.opt(3)
def for_continue_return(x):
    total = x.new_zeros(())
    for i, row in enumerate(x):
        if row.sum() < 0:
            continue
        if i > 2:
            return total * 100
        total = total + row.sum()
    return total


@ppy.opt(3)
def nested_break(x):
    found = -1
    for i in range(x.size(0)):
        for j in range(x.size(1)):
            if x[i, j] > 1.5:
                found = i * x.size(1) + j
                break
        if found >= 0:
            break
    return found


@ppy.opt(3)
def iterate_everything(x, xs: list[torch.Tensor]):
    acc = x.clone()
    for v in (x, 2.0, 3):
        acc = acc * v
    for a, b in zip(xs, reversed(xs)):
        acc = acc + a * b
    for k, row in enumerate(x, 1):
        acc = acc + row.sum() * k
    for r in reversed(x):
        acc = acc - r
    for i in reversed(range(1, 7, 2)):
        acc = acc * i
    return acc


@ppy.opt(3)
def list_methods(x):
    ys = []
    zs = ys
    zs.append(x)
    ys.extend([x * 2, x * 3])
    ys.insert(-1, x - 1)
    ys.insert(100, x + 1)
    last = ys.pop()
    first = ys.pop(0)
    ys[-1] = last
    ys += [first]
    copy = ys.copy()
    copy.reverse()
    more = ys + copy
    ys *= 2
    return len(zs), ys[1:-1:2], more[::-1], len(ys), torch.stack(copy)


@ppy.opt(3)
def lists_of_numbers(x, n: int):
    sizes = [d for d in x.shape]
    sizes.append(n)
    halves = [s / 2 for s in sizes if s > 1]
    doubled = [2 * s for s in range(n)] * 2
    return sizes, halves, doubled, sum(sizes), max(sizes), min(halves) if halves else 0.0


@ppy.opt(3)
def comprehensions_and_reductions(xs: list[torch.Tensor]):
    pairs = [a * b for a in xs for b in xs if a.sum() > b.sum()]
    biggest = max(x.abs().max() for x in xs)
    smallest = min(x.sum() for x in xs)
    return (
        len(pairs),
        biggest,
        smallest,
        any(x.sum() > 0 for x in xs),
        all(x.numel() > 1 for x in xs),
        sum((x.sum() for x in xs), torch.zeros(())),
        tuple(x.t() for x in xs),
    )


@ppy.opt(3)
def find_first(x, thr: float):
    for i, row in enumerate(x):
        if row.sum() > thr:
            return i, row
    return -1, x[0]


@ppy.opt(3)
def scaled_rows(x, s: float):
    return [r * s for r in x]


@ppy.opt(3)
def uses_helpers(x, thr: float):
    i, row = find_first(x, thr)
    v = x.sum().item()
    ys = scaled_rows(x, v)
    ys.append(row)
    return i, row, len(ys), ys[-2], scaled_rows(x, thr)


@ppy.opt(3)
def bound_in_loops(x, thr: float):
    for i in range(x.size(0)):
        last = x[i]
        if x[i] > thr:
            break
    for j in range(2):
        for k in range(x.size(0)):
            inner = k * j
    return i, last, x[:i], inner


@ppy.opt(3)
def names_reused_by_loops(x, n: int, m: int):
    for t in range(n):
        y = x * t
    for t in range(m):
        y = x + t
    return t, y


@ppy.opt(3)
def none_then_tensor(xs: list[torch.Tensor]):
    best = None
    for x in xs:
        if best is None or x.sum() > best.sum():
            best = x
    return best


@ppy.opt(3)
def int_then_float(x, n: int):
    total = 0
    for i in range(n):
        total = total + x[i].item()
    return total


@ppy.opt(3)
def lazy_assert(x, n: int):
    assert x.sum() > -100, f"too small for {n}"
    assert n >= 0, f"negative n: {n}"
    return x * n


@ppy.opt(3)
def truth_error(x):
    return bool(x)


@ppy.opt(3)
def float_error(x):
    return float(x)


@ppy.opt(3)
def index_error(x):
    ys = [x]
    return ys[3]


@ppy.opt(3)
def empty_max(x):
    return max(t for t in x if t > 100)


@ppy.opt(3)
def pop_empty(x):
    ys = [x]
    ys.pop()
    return ys.pop()


@ppy.opt(3)
def bound_on_some_paths(x, flag: bool, n: int):
    if flag:
        mask = x > 0
        size = x.shape
    elif n > 2:
        size = x.shape
    y = x * 2
    if flag:
        y = y * mask
    if n > 0:
        return y, size
    return y * 3, x.shape


@ppy.opt(3)
def read_while_unbound(x, flag: bool):
    if flag:
        z = x + 1
    return z * 2
"""


@pytest.fixture(scope="module")
def ns():
    namespace, report = compile_cell(CELL, filename="<control-cell>")
    stayed = dict(report.python)
    assert not stayed, stayed
    return namespace


def rand(*shape, seed=0, **kw):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), **kw)


CALLS = {
    "truth": [
        (rand(3), rand(3, seed=1)),
        (-rand(3).abs(), rand(3, seed=1)),
        (torch.zeros(()), torch.ones(())),
        (torch.ones(()), torch.zeros(())),
        (rand(3, requires_grad=True), rand(3, seed=1, requires_grad=True)),
    ],
    "conversions": [(rand(3),), (torch.tensor([1, 2, 3]),), (torch.tensor([True, False]),)],
    "number_arithmetic": [
        (torch.tensor(3), torch.tensor(-2)),
        (torch.tensor(2.0), torch.tensor(True)),
        (torch.tensor(True), torch.tensor(7.25, dtype=torch.float64)),
        (torch.tensor(-7), torch.tensor(0)),
        (rand(()), rand((), seed=1)),
    ],
    "item_of": [(torch.tensor(True),), (torch.tensor([7]),), (rand(1, dtype=torch.float64),), (rand(2),)],
    "and_or_values": [(0, 1.5, True), (3, 0.0, False), (2, 2.0, False)],
    "membership": [(rand(2), "sum", 2), (rand(2), "max", 5), (rand(2), "", 0)],
    "while_else": [(rand(4) * 8, 100), (rand(4) * 8, 3), (torch.zeros(2), 5)],
    "for_continue_return": [(rand(6, 2),), (rand(2, 3),), (rand(0, 3),), (rand(5, 2, requires_grad=True),)],
    "nested_break": [(rand(3, 4),), (torch.zeros(2, 2),)],
    "iterate_everything": [(rand(3, 3), [rand(3, seed=1), rand(3, seed=2), rand(3, seed=3)]), (rand(1, 2), [])],
    "list_methods": [(rand(3, requires_grad=True),)],
    "lists_of_numbers": [(rand(3, 1, 4), 3), (rand(()), 0)],
    "comprehensions_and_reductions": [([rand(2, 2), rand(2, 2, seed=1), rand(2, 2, seed=2)],), ([rand(1, 1)],)],
    "find_first": [(rand(4, 3), 0.5), (rand(2, 2), 100.0)],
    "scaled_rows": [(rand(3, 2), 2.0)],
    "uses_helpers": [(rand(4, 3), 0.5), (rand(4, 3, dtype=torch.float64), 100.0), (torch.arange(6).view(3, 2), 1.0)],
    "names_reused_by_loops": [(rand(2), 3, 2), (rand(2), 3, 0), (rand(2), 0, 2), (rand(2), 0, 0)],
    "bound_in_loops": [(rand(5), 0.5), (rand(3), 100.0), (rand(0), 0.0)],
    "none_then_tensor": [([rand(3), rand(3, seed=1), rand(3, seed=2)],), ([],)],
    "int_then_float": [(rand(4), 3), (rand(4), 0), (torch.tensor([1, 2, 3]), 3)],
    "lazy_assert": [(rand(3), 2), (rand(3) - 200, 2), (rand(3), -1)],
    "truth_error": [(rand(3),), (torch.zeros(0),), (torch.ones(()),)],
    "float_error": [(rand(2),), (torch.ones(()),)],
    "index_error": [(rand(2),)],
    "empty_max": [(rand(3),), (torch.tensor([1.0, 200.0, 300.0]),)],
    "pop_empty": [(rand(2),)],
    # bound, unbound and read (UnboundLocalError), unbound and never read; a Size on both paths that bind it
    "bound_on_some_paths": [(rand(3), True, 1), (rand(3), False, 3), (rand(3), False, 1), (rand(3), False, 0)],
    "read_while_unbound": [(rand(3), True), (rand(3), False)],
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_matches_eager_bit_for_bit(ns, name):
    for args in CALLS[name]:
        status, detail = compare_call(ns[name], args, {})
        assert status == MATCH, f"{name}{tuple(a.shape if hasattr(a, 'shape') else a for a in args)}: {detail}"


def test_a_name_bound_on_some_paths_is_checked_where_it_is_read(ns):
    f = ns["read_while_unbound"]
    assert f.__ppy_region__ and "__ppy_split__" not in f.__dict__
    with pytest.raises(UnboundLocalError, match="cannot access local variable 'z'"):
        f(rand(3), False)
    assert ppy_magic.explain(f).fallbacks == 0  # raised by the region, as Python raises it
    _, size = ns["bound_on_some_paths"](rand(3), False, 3)
    assert type(size) is torch.Size


def test_results_have_python_types(ns):
    v, f, i, b, w, gt, neg, ab = ns["conversions"](torch.tensor([1, 2, 3]))
    assert (type(v), type(f), type(i), type(b), type(w)) == (int, float, int, bool, int)
    assert type(ns["conversions"](rand(3))[0]) is float
    for x, kind in ((torch.tensor(True), bool), (torch.tensor(3), int), (torch.tensor(2.5), float)):
        assert type(ns["item_of"](x)) is kind and ns["item_of"](x) == x.item()
    assert ns["item_of"](torch.tensor(1 + 2j)) == 1 + 2j  # returned as it is; arithmetic on it stays eager's
    sizes, halves, doubled, *_ = ns["lists_of_numbers"](rand(3, 1, 4), 2)
    assert type(sizes) is list and sizes == [3, 1, 4, 2] and halves == [1.5, 2.0, 1.0]
    assert type(ns["list_methods"](rand(3))[1]) is list
    assert ns["int_then_float"](torch.tensor([1, 2]), 2) == 3 and type(ns["int_then_float"](rand(3), 0)) is int


def test_the_truth_of_a_tensor_raises_like_eager(ns):
    for x, words in ((rand(3), "more than one value"), (torch.zeros(0), "no values")):
        with pytest.raises(RuntimeError, match=f"Boolean value of Tensor with {words} is ambiguous"):
            ns["truth_error"](x)


def test_explain_shows_loops_and_branches_readably(ns):
    text = ppy_magic.explain(ns["while_else"]).cpp
    assert "while (true) {" in text and "ppy::poll(ppy_frame);" in text
    assert "// while x.abs().max() > 1e-3:" in text and "break;" in text
    assert "at::_ops::is_nonzero::call(" in text  # the truth of a tensor, as eager takes it
    text = ppy_magic.explain(ns["iterate_everything"]).cpp
    assert "for (int64_t" in text and "// for a, b in zip(xs, reversed(xs)):" in text


REFUSED = [
    (
        "    if x.sum() > 0:\n        y = x\n    else:\n        y = 1.0\n    return y",
        "at 8:12",
        "different kinds",
    ),
    ("    xs.append(x)\n    return x", "at 4:5", "would change the caller's list"),
    ("    xs[0] = x\n    return x", "at 4:5", "caller's list"),
    ("    return xs[1:]", "at 4:5", "whether the caller passed a list or a tuple"),
    ("    ys = xs\n    return ys + [x]", "at 5:12", "whether the caller passed a list or a tuple"),
    ("    ys = [x, 1]\n    ys.append(x)\n    return ys", "at 5:5", "only tensors, only ints or only floats"),
    ("    ys = list(xs)\n    return sum(ys)", "at 5:12", "the int 0"),
    ("    y = x\n    for i in range(3):\n        y = 'a'\n    return x", "at 5:5", "changes kind"),
    ("    for k in {'a': 1}:\n        pass\n    return x", "at 4:14", "dict"),
    ("    v = x.sum().item()\n    return v << 2", "at 5:12", "Convert it first"),
    ("    ys = []\n    ys.append(x)\n    ys.append(1)\n    return ys", "at 6:5", "cannot hold"),
]


@pytest.mark.parametrize("body, where, words", REFUSED)
def test_what_cannot_be_exact_stays_python_with_a_located_reason(body, where, words):
    src = f"import torch\n\ndef f(x, xs: list[torch.Tensor]):\n{body}\n"
    err = compile_error(src, {"torch": torch})
    assert err.reason.startswith(where), err.reason
    assert words in str(err), str(err)
