"""Forms public code uses that regions translate natively, each against eager bit for bit.

NumPy's keyword names (`axis=`, `keepdims=`, `x1=`...) wherever PyTorch's argument parser takes
them; `torch.tensor(...)` of numbers, sequences and tensors (dtype inference, the default
dtype, `dtype=`/`device=`/`requires_grad=`, its warning and errors); legacy typed constructors;
`range(...)` and lists as indices; `torch.numel`; `Tensor.type(...)`; `Tensor.tolist()` in `for`
and `len()`; `:=`; `callable()`; messages made with `%` and `str.format`; grad-mode and autocast blocks. One
cell: this file costs one build.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

import pytest
import torch

from ppy_magic.language import constructors
from tests.support.cells import compile_cell, compile_error, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import MATCH

CELL = """
import torch
import ppy


@ppy.opt(3)
def numpy_names(x):
    a = x.sum(1, keepdims=True), torch.sum(x, axis=1), x.mean(axis=-1, keepdims=True)
    b = x.max(axis=1, keepdims=True), torch.min(x, axis=0), x.amax(axis=1), x.argmax(axis=1)
    c = (x > 0).any(axis=1), (x > 0).all(axis=1, keepdims=True), x.logsumexp(axis=1), x.prod(axis=0)
    d = x.std(axis=1), x.var(axis=1, keepdims=True), torch.std(x, axis=1, keepdims=True, correction=0)
    e = torch.add(x, x2=x), torch.sum(a=x), torch.sum(x=x, axis=0), x.size(axis=1), x.softmax(axis=-1)
    f = x.cumsum(axis=0), torch.cat([x, x], axis=1), x.unsqueeze(axis=0), torch.var_mean(x, axis=1)
    return a, b, c, d, e, f


@ppy.opt(3)
def tensors(x, n: int, f: float, b: bool, dt: torch.dtype):
    a = torch.tensor([1.0, 2.5, -0.0])
    c = torch.tensor([[1, 2], [3, n]]), torch.tensor([True, False]), torch.tensor([n, f, b]), torch.tensor([b, n])
    h = torch.tensor(f), torch.tensor(n), torch.tensor(b), torch.tensor([]), torch.tensor([[], []]), torch.tensor(())
    i = torch.tensor([n, 2], dtype=torch.float16), torch.tensor([f], dtype=dt), torch.tensor((1, 2), device=x.device)
    j = torch.tensor([f, 1.0], requires_grad=True), torch.tensor([1.5], device="cpu")
    j = j + (torch.tensor([[b]], dtype=torch.int32),)
    k = torch.tensor(x.shape), torch.tensor(x.sum().item()), torch.tensor(x), torch.tensor(x, dtype=torch.float64)
    return a, c, h, i, j, k, x * a[1]


@ppy.opt(3)
def tensor_errors(n: int, which: int):
    if which == 0:
        return torch.tensor([n, 1], dtype=torch.int8)
    if which == 1:
        return torch.tensor([n], requires_grad=True)
    if which == 2:
        return torch.tensor([n, -1], dtype=torch.uint8)
    return torch.tensor([float(n)], dtype=torch.int64)


@ppy.opt(3)
def legacy(n: int, f: float):
    a = torch.BoolTensor([True, False, n]), torch.LongTensor([1, n]), torch.FloatTensor([[f, 2], [3, n]])
    b = torch.DoubleTensor((f,)), torch.IntTensor([]), torch.Tensor([n, f]), torch.ByteTensor([n])
    b = b + (torch.HalfTensor([f]),)
    return a, b


@ppy.opt(3)
def indexes(x, n: int):
    i = (0, 1)
    a = x[range(2)], x[range(1, n)], x[[0, 2]], x[[]], x[i], x[range(n), 0], x[:, range(0, 4, 2)]
    return a, x[range(n - 1, -1, -1)], torch.numel(x), torch.numel(input=x[0])


@ppy.opt(3)
def types(x, dt: torch.dtype):
    if x.type() != "torch.FloatTensor":
        raise TypeError("not a float tensor: " + x.type())
    a = x.type(torch.float64), x.type("torch.DoubleTensor"), x.type(torch.IntTensor), x.type(dt)
    return a, x.type(torch.float32) is x, x.type(dtype=torch.int64), x.type("torch.FloatTensor") is x


@ppy.opt(3)
def bad_type(x):
    y = x * 2
    return y.type("torch.Foo")


@ppy.opt(3)
def lists(x):
    total = 0.0
    for v in x.flatten().tolist():
        total = total + v
    vals = x.view(-1).tolist()
    n = 0
    for i, v in enumerate(vals):
        if v > 0:
            n = n + i
    return total, len(vals), len(x.tolist()), n, isinstance(vals, list)


@ppy.opt(3)
def tolist_len(x):
    return len(x.tolist()), x * 2


@ppy.opt(3)
def forms(x, n: int, s: str):
    if (d := x.dim()) > 1:
        y = x * d
    else:
        y = x
    k = 3
    while (k := k - 1) > 0:
        y = y + k
    if n == 1:
        raise ValueError("bad %d for %s in %r and %s%%" % (n, s, n, x.shape))
    if n == 2:
        raise TypeError("{} {name} {}".format(n, d, name=s))
    if n == 3:
        raise RuntimeError("only %s" % s)
    if n == 4:
        raise IndexError("{0}: {1}, {0}".format(s, x.dtype))
    return y, callable(x), callable(torch.relu), callable(n), callable(None), callable(lambda v: v)


@ppy.opt(3)
def grad_modes(x, b: bool):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = x * 3
    with torch.set_grad_enabled(b):
        w = x * 4
    with torch.no_grad(), torch.enable_grad():
        v = x * 5
    return y, z, w, v, y.requires_grad, z.requires_grad, w.requires_grad


@ppy.opt(3)
def grad_exits(x, n: int):
    for i in range(3):
        with torch.no_grad():
            if i == n:
                break
            if n == 7:
                raise ValueError("raised in a no_grad block")
            if n < 0:
                return x * 2
            x = x + 1
    return x * x


@ppy.opt(3)
def grad_switch(x, b: bool):
    torch.set_grad_enabled(b)
    return x * 2


@ppy.opt(3)
def autocasts(x, w, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        z = torch.nn.functional.linear(x, w, b)
        with torch.autocast("cpu", enabled=False):
            u = x @ w
            e = y.float() @ w
        v = torch.mm(u, w)
    with torch.autocast(device_type="cpu"), torch.no_grad():
        s = torch.matmul(x, w) + 1
    with torch.amp.autocast("cpu", torch.float16, True, False):
        h = x @ w
    return y, z, u, e, v, s, h, y.dtype == torch.bfloat16, u.dtype == torch.float32


@ppy.opt(3)
def autocast_exits(x, w, n: int):
    for i in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if i == n:
                break
            if n == 7:
                raise ValueError("raised in an autocast block")
            if n == 8:
                x = x @ w[:1]
            if n < 0:
                return x @ w
            if n == 5:
                continue
            x = (x @ w).float()
    return x * 2


@ppy.opt(3)
def autocast_args(x, w, dt: torch.dtype, on: bool, cache: bool):
    with torch.autocast("cpu", dtype=dt, enabled=on, cache_enabled=cache):
        y = x @ w
    return y, x @ w


@ppy.opt(3)
def autocast_cached(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return x @ w


@ppy.opt(3)
def autocast_enabled_int(x, w, dt: torch.dtype, n: int):
    with torch.autocast("cpu", dtype=dt, enabled=n):
        y = x @ w
    return y


@ppy.opt(3)
def autocast_cache_int(x, n: int):
    with torch.autocast("cpu", cache_enabled=n):
        y = x * 2
    return y


@ppy.opt(3)
def autocast_devices(x, n: int):
    if n == 0:
        with torch.autocast("foo"):
            x = x * 2
    if n == 1:
        with torch.autocast(3):
            x = x * 3
    if n == 2:
        with torch.autocast("meta"):
            x = x * 4
    if n == 3:
        with torch.autocast("meta", dtype=torch.bfloat16):
            x = x * 5
    if n == 4:
        with torch.autocast("cpu:0", dtype=torch.float32):
            x = x @ x.T
    if n == 5:
        with torch.autocast("cpu", enabled=None):
            x = x * 6
    if n == 6:
        with torch.autocast("cpu", torch.float64, 1.0, None):
            x = x @ x.T
    return x
"""


def t(*shape, grad=True, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g).to(dtype).requires_grad_(grad and dtype.is_floating_point)


@pytest.fixture(scope="module")
def ns():
    ns, report = compile_cell(CELL, filename="<ppy-native-forms>")
    assert not report.python, report.python
    return ns


def same(f, *args, grad=True):
    assert is_region(f)
    status, detail = compare_call(f, args, grad=grad)
    assert status == MATCH, detail


def test_numpy_keyword_names(ns):
    same(ns["numpy_names"], t(3, 4))


def test_numpy_keyword_names_are_taken_where_pytorch_takes_them():
    head = "import torch\nimport ppy\n@ppy.opt(3)\n"
    for body in ("x.sum(1, axis=1)", "torch.sum(x, dim=1, axis=1)", "x.norm(axis=1)", "x.sum(input=x)"):
        err = compile_error(head + f"def f(x):\n    return {body}\n")
        assert "at 5:" in str(err), (body, str(err))


def test_torch_tensor(ns):
    f = ns["tensors"]
    for n, fl, b in ((3, 2.5, True), (-7, -0.0, False)):
        for dt in (torch.float64, torch.bfloat16, torch.int32):
            same(f, t(2, 3), n, fl, b, dt)
            same(f, t(2, 3, grad=False), n, fl, b, dt)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # read when the region runs, as eager reads it
    try:
        same(f, t(2, 3), 1, 1.5, True, torch.float32)
    finally:
        torch.set_default_dtype(previous)


def test_torch_tensor_of_a_tensor_warns_as_eager_does(ns):
    f = ns["tensors"]
    x = t(2, 3)

    def caught(g):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            g(x, 1, 1.0, True, torch.float64)
        return [(w.category, str(w.message)) for w in got]

    assert caught(f) == caught(f.__wrapped__)
    assert caught(f)[0][1].startswith("To copy construct from a tensor")


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_torch_tensor_errors(ns, which):
    for n in (300, 5, -1):
        same(ns["tensor_errors"], n, which)


def test_legacy_typed_constructors(ns):
    for n, fl in ((3, 2.5), (0, -1.25), (-1, 1e10)):
        same(ns["legacy"], n, fl)
    err = compile_error("import torch\nimport ppy\n@ppy.opt(3)\ndef f(n: int):\n    return torch.FloatTensor(n, 2)\n")
    assert "uninitialised" in err.message
    assert torch.FloatTensor in constructors.LEGACY_TYPES


def test_ranges_and_lists_as_indices(ns):
    same(ns["indexes"], t(3, 4), 3)
    same(ns["indexes"], t(3, 4), 2)
    same(ns["indexes"], t(5, 4, 2), 4)


def test_tensor_type(ns):
    same(ns["types"], t(2, 3), torch.float16)
    same(ns["types"], t(2, 3, dtype=torch.int64), torch.float16)  # the raise path, with x.type() in its message
    same(ns["bad_type"], t(2, 3))


def test_tolist_in_for_and_len(ns):
    for x in (t(5), t(0), t(4, dtype=torch.int32), (t(4) > 0), t(3, dtype=torch.float64), t(2, 2)):
        same(ns["lists"], x)
    same(ns["tolist_len"], t(3, 2))  # len() of a list of lists: its rows


def test_iterating_tolist_of_a_tensor_of_unknown_dimensions_is_refused():
    """Its items are numbers for a 1-d tensor and lists for more dimensions: a region has no kind for both."""
    err = compile_error(
        "import torch\n\ndef f(x):\n    s = 0.0\n    for v in x.tolist():\n        s = s + v\n    return s\n"
    )
    assert "1-d for certain" in err.reason and err.loc.line == 5


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_walrus_callable_and_formatted_messages(ns, n):
    same(ns["forms"], t(2, 3), n, "mode")
    same(ns["forms"], t(3), n, "x")


def test_grad_mode_blocks(ns):
    f = ns["grad_modes"]
    for b in (True, False):
        same(f, t(2, 3), b)
        with torch.no_grad():
            same(f, t(2, 3), b)
            assert not torch.is_grad_enabled()
        assert torch.is_grad_enabled()


def test_grad_mode_is_restored_on_every_way_out(ns):
    f = ns["grad_exits"]
    for n in (1, 5, 7, -1):
        same(f, t(2), n)
        assert torch.is_grad_enabled()
        with torch.no_grad():
            same(f, t(2), n)
        assert torch.is_grad_enabled()


def test_set_grad_enabled_as_a_statement_lasts_past_the_call(ns):
    f = ns["grad_switch"]
    try:
        for b in (False, True):
            torch.set_grad_enabled(True)
            got = f(t(2), b)
            region_mode = torch.is_grad_enabled()
            torch.set_grad_enabled(True)
            want = f.__wrapped__(t(2), b)
            assert region_mode == torch.is_grad_enabled() == b
            assert got.requires_grad == want.requires_grad and torch.equal(got, want)
    finally:
        torch.set_grad_enabled(True)
    assert f.calls == 2


def autocast_state():
    return torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), torch.is_autocast_cache_enabled()


DEFAULT_AUTOCAST = (False, torch.bfloat16, True)


def test_autocast_blocks(ns):
    x, w, b = t(4, 8), t(8, 8), t(8)
    same(ns["autocasts"], x, w, b)
    assert autocast_state() == DEFAULT_AUTOCAST
    r = ns["autocasts"](x, w, b)
    assert r[0].dtype == r[1].dtype == torch.bfloat16 and r[2].dtype == torch.float32 and r[6].dtype == torch.float16
    with torch.autocast("cpu", dtype=torch.float16):  # nested in an eager block: its state is saved and restored
        same(ns["autocasts"], x, w, b)
        assert autocast_state() == (True, torch.float16, True)
    assert autocast_state() == DEFAULT_AUTOCAST


def test_autocast_is_restored_on_every_way_out(ns):
    f = ns["autocast_exits"]
    for n in (1, 5, 7, 8, -1, 9):
        same(f, t(2, 3), t(3, 3), n)
        assert autocast_state() == DEFAULT_AUTOCAST
        with torch.autocast("cpu", dtype=torch.float16, cache_enabled=False):
            same(f, t(2, 3), t(3, 3), n)
            assert autocast_state() == (True, torch.float16, False)
    assert autocast_state() == DEFAULT_AUTOCAST


def test_autocast_arguments(ns):
    f = ns["autocast_args"]
    for dt in (torch.bfloat16, torch.float16, torch.float64):
        for on in (True, False):
            for cache in (True, False):
                same(f, t(2, 3), t(3, 3), dt, on, cache)
                assert autocast_state() == DEFAULT_AUTOCAST
    g = ns["autocast_enabled_int"]
    for dt in (torch.bfloat16, torch.float32):  # enabled=1: a TypeError, unless the dtype's warning disabled it
        for n in (0, 1):
            same(g, t(2, 3), t(3, 3), dt, n)
            assert autocast_state() == DEFAULT_AUTOCAST


def test_autocast_unsupported_dtype_warns_as_eager_does(ns):
    f = ns["autocast_args"]

    def caught(g):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            g(t(2, 3), t(3, 3), torch.float32, True, True)
        return [(w.category, str(w.message)) for w in got]

    assert caught(f) == caught(f.__wrapped__)
    assert caught(f)[0][1].startswith("In CPU autocast, but the target dtype is not supported. Disabling autocast.")


def test_autocast_cache_is_cleared_as_eager_clears_it(ns):
    """The cast cache keeps a leaf weight's bf16 copy until the nesting of autocast blocks (enabled or
    not) returns to 0: called twice, the second call sees the weight's update, unless an outer block
    that leaves the cache on holds the stale copy."""
    f = ns["autocast_cached"]

    def twice(g, outer):
        x, w = t(2, 3), t(3, 3)
        with outer() if outer else contextlib.nullcontext():
            first = g(x, w)
            with torch.no_grad():
                w.add_(1.0)
            second = g(x, w)
        return first, second

    outers = [None] + [
        functools.partial(torch.autocast, "cpu", enabled=on, cache_enabled=cache)
        for on in (True, False)
        for cache in (True, False)
    ]
    calls, fallbacks = f.calls, f.fallbacks
    for outer in outers:
        (r1, r2), (e1, e2) = twice(f, outer), twice(f.__wrapped__, outer)
        assert torch.equal(r1, e1) and torch.equal(r2, e2)
        assert torch.equal(r1, r2) == (outer is not None and outer.keywords["cache_enabled"])  # the stale copy
        assert autocast_state() == DEFAULT_AUTOCAST
    assert (f.calls, f.fallbacks) == (calls + 2 * len(outers), fallbacks)


def test_autocast_non_bool_cache_enabled_leaves_state_as_eager_does(ns):
    """torch.set_autocast_cache_enabled refuses an int last in __enter__: the other settings stay made."""
    f = ns["autocast_cache_int"]

    def leaked(g):
        with pytest.raises(TypeError) as exc:
            g(t(2), 1)
        state = (*autocast_state(), torch.autocast_decrement_nesting(), str(exc.value))
        torch.set_autocast_enabled("cpu", False)
        torch.clear_autocast_cache()
        return state

    calls = f.calls
    assert leaked(f) == leaked(f.__wrapped__) == (True, torch.bfloat16, True, 0, "enabled must be a bool (got int)")
    assert f.calls == calls + 1 and autocast_state() == DEFAULT_AUTOCAST


def test_autocast_device_and_argument_errors_raise_as_eager_does(ns):
    for n in range(8):
        same(ns["autocast_devices"], t(3, 3), n)
        assert autocast_state() == DEFAULT_AUTOCAST


@pytest.mark.parametrize(
    "block, reason",
    [
        ("torch.cpu.amp.autocast()", "FutureWarning"),
        ("torch.cuda.amp.autocast()", "FutureWarning"),
        ("torch.autocast('cuda')", "only CPU autocast"),
        ("torch.autocast(d)", "known only at run time"),
        ("torch.autocast('cpu') as a", "as name"),
        ("torch.autocast('cpu', dtype='bf16')", "dtype="),
        ("torch.autocast('cpu', enabled=x)", "enabled="),
        ("torch.autocast('cpu', foo=1)", "unexpected"),
    ],
)
def test_autocast_forms_that_stay_python_with_a_reason(block, reason):
    src = f"import torch\nimport ppy\n@ppy.opt(3)\ndef f(x, d: str):\n    with {block}:\n        return x * 2\n"
    err = compile_error(src)
    assert reason in err.message and "at 5:" in str(err), err.message
