"""The region language beyond single ops: Python constructs compile exactly, or stay Python with a located reason.

All compiled functions live in one cell (one build); each test compares a
region with its own Python body on the same inputs.
"""

from __future__ import annotations

import pytest
import torch

import ppy_magic
from ppy_magic import variants
from tests.support.cells import assert_same, compile_cell, compile_error

CELL = """
import math
import torch
import torch.nn.functional as F
import ppy

EPS = 1e-5
SCALE = 2

@ppy.opt(3)
def unpack_sizes(x):
    B, T, C = x.size()
    *lead, last = x.shape
    n = B * T + C // 3 - C % 3
    return x.reshape(B * T, C) * n, lead[0] + last, x.new_zeros(B, last).sum()

@ppy.opt(3)
def layout_flags(x):
    if x.is_nested or x.is_sparse or x.is_quantized or x.is_mkldnn or x.is_meta or x.is_xpu or x.is_mps:
        return x, False
    return x * 2 if x.is_cpu else x, x.is_cpu

@ppy.opt(3)
def unpack_display(x):
    i, j, dt = *x.shape[1:], x.dtype  # a run-time sequence beside a value that is not an int
    return x.to(dt).sum() * i - j

@ppy.opt(3)
def math_on_numbers(x, a: float, k: int):
    s = math.sqrt(a) + math.log(a + 1.0) + math.pi + k / 4 + float(k) ** 2 + abs(-k) + min(a, 3.0)
    return x * s + math.floor(a) - math.ceil(-a) + int(a * 10) // 3

@ppy.opt(3)
def indexing(x, m, idx):
    a = x[:, None, ..., ::2]
    b = x[..., -1]
    c = x[m]
    d = x[idx, 1:]
    y = x.clone()
    y[0, 1:3] = 0.5
    y[:, -1] = x[:, 0]
    y[m] += 1.0
    return a, b, c, d, y

@ppy.opt(3)
def returns(x):
    return (x, (x + 1, x.sum())), torch.max(x, 1), x.shape, x.dim(), x.dtype is not None, x.device, x.dtype

@ppy.opt(3)
def tensor_lists(xs: list, dim: int):
    parts = torch.split(torch.cat(xs, dim), 2, dim)
    q, k = torch.chunk(xs[0], 2, 0)
    return torch.stack([q, k]), parts, len(parts)

@ppy.opt(3)
def branches(x, flag: bool, mode: str, n: int, bias=None):
    if flag:
        y = x.relu()
    elif n > 2:
        y = x * n
    else:
        y = -x
    y = y + 1 if mode == "add" else y * 2
    if bias is not None:
        y = y + bias
    if x.dim() == 2 and x.size(0) > 1:
        y = y.t()
    return y

@ppy.opt(3)
def loops(x, w, n_layers: int):
    for i in range(n_layers):
        x = torch.tanh(x @ w) + i
    total = 0
    for j in range(1, n_layers * 2, 2):
        total = total + j
    return x, total

@ppy.opt(3)
def checks(x, n: int):
    assert x.dim() == 2, "expected a matrix"
    assert n >= 0
    return x * n

@ppy.opt(3)
def inplace_ops(x, y):
    z = x.clone()
    z.add_(y)
    z += 2
    z *= y
    z.clamp_(min=-1.0, max=1.0)
    return z

@ppy.opt(3)
def operators(x, y, k: int):
    a = x // 2 + x % 3 + x ** 2 + 2 ** x + 1 / x + 5 - x
    b = (x > 0) & (y < 1) | ~(x == y) ^ (x != 0)
    c = (k << 2) + (k >> 1) + (k & 3) + (k | 4) + (k ^ 5)
    return a, b, c, x >= y, 0.5 <= x

@ppy.opt(3)
def builtin_names(input, min: float, max: float):
    return torch.clamp(input, min=min, max=max)

@ppy.opt(3)
def dtypes(x, y):
    return (x.float() + y.to(torch.float64), x.type_as(y), x.to(dtype=torch.int32), x.T, x.mT,
            torch.zeros(2, 3, dtype=x.dtype))

@ppy.opt(3)
def helper(x, w):
    return x @ w * SCALE + EPS

@ppy.opt(3)
def calls_helper(x, w):
    h = helper(x, w)
    return helper(h, w) + F.relu(h)

@ppy.opt(3)
def functional(x, t, w):
    a = F.softmax(x, dim=-1) + F.log_softmax(x, dim=1, dtype=torch.float64).float()
    b = F.cross_entropy(x, t) + F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1)
    c = F.gelu(x, approximate="tanh") + F.silu(x) + F.embedding(t, w).sum()
    d = F.dropout(x, p=0.0, training=True)
    return a, b, c, d

@ppy.opt(3)
def norm_one(x, w, b):
    return F.layer_norm(x, (x.size(-1),), w, b).float()

@ppy.opt(3)
def norm_two(x, w, b):
    return F.layer_norm(x * 2, (x.size(-1),), w, b, 1e-6).float()

@ppy.opt(3)
def recursive(x, n: int):
    return recursive(x, n - 1)

@ppy.opt(3)
def data_dependent(x):
    if x.sum() > 0:
        return x
    return -x

@ppy.opt(3)
def while_loop(x):
    while x.sum() > 0:
        x = x - 1
    return x

@ppy.opt(3)
def kinds_differ(x, flag: bool):
    if flag:
        y = x
    else:
        y = 1.0
    return x * y
"""


@pytest.fixture(scope="module")
def cell():
    return compile_cell(CELL, filename="<language-cell>")


def rand(*shape, seed=0, **kw):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), **kw)


def same(f, *args):
    before = (f.calls, f.fallbacks)
    assert_same(f(*args), f.__wrapped__(*args))
    assert (f.calls, f.fallbacks) == (before[0] + 1, before[1]), f.last_fallback_reason


def test_everything_meant_to_compile_compiled(cell):
    _, report = cell
    stayed = dict(report.python)
    assert set(stayed) == {"recursive", "kinds_differ"}, stayed


def test_branches_and_loops_on_tensor_values(cell):
    ns, _ = cell
    for x in (rand(3), -rand(3).abs(), torch.zeros(2)):
        same(ns["data_dependent"], x)
    same(ns["while_loop"], rand(4).abs() * 3)
    same(ns["while_loop"], -rand(4).abs())


def test_sizes_unpacking_and_int_arithmetic(cell):
    ns, _ = cell
    same(ns["unpack_sizes"], rand(2, 3, 7))
    same(ns["unpack_display"], rand(2, 3, 7))
    same(ns["layout_flags"], rand(2, 3))
    assert ns["layout_flags"](rand(2, 3))[1] is True
    assert ns["layout_flags"](rand(2, 3, device="meta"))[1] is False  # Python's body: meta is not built for
    for f in (ns["unpack_sizes"], ns["unpack_display"]):
        for bad in (rand(2, 3), rand(1, 2, 3, 4)):  # Python's own unpacking error, same type and message
            with pytest.raises(ValueError) as region:
                f(bad)
            with pytest.raises(ValueError) as eager:
                f.__wrapped__(bad)
            assert str(region.value) == str(eager.value)


def test_math_on_numbers(cell):
    ns, _ = cell
    f = ns["math_on_numbers"]
    for a, k in ((2.5, 3), (0.1, -7), (100.0, 0)):
        same(f, rand(3), a, k)
    with pytest.raises(ValueError, match="math domain error"):
        f(rand(3), -2.0, 1)


def test_indexing_and_item_assignment(cell):
    ns, _ = cell
    x = rand(4, 6)
    same(ns["indexing"], x, x[:, 0] > 0, torch.tensor([0, 2, 3]))


def test_tuple_namedtuple_and_size_returns(cell):
    ns, _ = cell
    f = ns["returns"]
    same(f, rand(3, 4))
    out = f(rand(3, 4))
    assert type(out[1]) is torch.return_types.max and type(out[2]) is torch.Size
    assert out[5] == torch.device("cpu") and out[6] is torch.float32  # torch's own dtype object
    assert f(rand(3, 4).double())[6] is torch.float64


def _on_device(x, device):
    m = torch.ones(x.shape, device=device, dtype=torch.bool).triu(1)
    return x.masked_fill(m, 0.0), device


def test_a_device_passed_in_is_a_constant_ops_take_and_a_region_returns():
    f = ppy_magic.compile(_on_device)
    with variants.blocking():
        for _ in range(2):
            same(f, rand(3, 4), torch.device("cpu"))
        for _ in range(3):  # a str names the device too: what Python returns (the str), a variant at a time
            assert_same(f(rand(3, 4), "cpu"), _on_device(rand(3, 4), "cpu"))
    text = str(ppy_magic.explain(f))
    assert "device == device(type='cpu') (compiled in)" in text and "break" not in text, text


def test_tensor_list_parameters(cell):
    ns, _ = cell
    same(ns["tensor_lists"], [rand(4, 3), rand(4, 3, seed=1)], 1)
    same(ns["tensor_lists"], (rand(4, 3), rand(2, 3, seed=1)), 0)


@pytest.mark.parametrize(
    "flag, mode, n, bias",
    [(True, "add", 0, None), (False, "add", 5, None), (False, "mul", 1, "bias"), (True, "mul", 3, "bias")],
)
def test_branches(cell, flag, mode, n, bias):
    ns, _ = cell
    x = rand(3, 3)
    same(ns["branches"], x, flag, mode, n, rand(3) if bias else None)
    same(ns["branches"], rand(1, 3), flag, mode, n, None)


def test_loops_with_bounds_known_at_call_time(cell):
    ns, _ = cell
    for n in (0, 1, 3):
        same(ns["loops"], rand(2, 4), rand(4, 4, seed=1) * 0.3, n)


def test_assert_raises_assertion_error_like_python(cell):
    ns, _ = cell
    f = ns["checks"]
    same(f, rand(2, 2), 3)
    for args in ((rand(3), 1), (rand(2, 2), -1)):
        with pytest.raises(AssertionError) as region:
            f(*args)
        with pytest.raises(AssertionError) as eager:
            f.__wrapped__(*args)
        assert str(region.value) == str(eager.value)


def test_inplace_ops_have_eager_semantics(cell):
    ns, _ = cell
    same(ns["inplace_ops"], rand(3, 3), rand(3, 3, seed=1))
    leaf = rand(3, requires_grad=True)
    f = ns["inplace_ops"]
    # z is a clone, so autograd is fine; gradients must match
    a, b = leaf.detach().clone().requires_grad_(), leaf.detach().clone().requires_grad_()
    f(a, rand(3, seed=2)).sum().backward()
    f.__wrapped__(b, rand(3, seed=2)).sum().backward()
    assert torch.equal(a.grad, b.grad)


def test_operators(cell):
    ns, _ = cell
    same(ns["operators"], rand(3, 4) + 2, rand(3, 4, seed=1), 13)


def test_parameters_named_like_builtins(cell):
    ns, _ = cell
    same(ns["builtin_names"], rand(5), -0.5, 0.25)


def test_dtype_arguments_and_conversions(cell):
    ns, _ = cell
    same(ns["dtypes"], rand(3, 4).double(), rand(3, 4, seed=1))
    same(ns["dtypes"], rand(3, 4).half(), rand(3, 4, seed=1).bfloat16())


def test_calls_to_other_regions_and_frozen_globals(cell):
    from ppy_magic import explain

    ns, _ = cell
    same(ns["calls_helper"], rand(2, 3), rand(3, 3, seed=1))
    info = explain(ns["helper"])
    assert info.frozen_globals == {"SCALE": 2, "EPS": 1e-5}


def test_functional_adapters(cell):
    ns, _ = cell
    x, t, w = rand(4, 5), torch.tensor([0, 4, 2, 1]), rand(5, 3, seed=1)
    same(ns["functional"], x, t, w)
    xg, xg2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    f = ns["functional"]
    sum(o.sum() for o in f(xg, t, w)).backward()
    sum(o.sum() for o in f.__wrapped__(xg2, t, w)).backward()
    assert torch.equal(xg.grad, xg2.grad)


def test_regions_of_one_cell_share_callees_without_clashing(cell):
    ns, _ = cell
    x, w, b = rand(3, 4), rand(4, seed=1), rand(4, seed=2)
    same(ns["norm_one"], x, w, b)
    same(ns["norm_two"], x, w, b)


def test_random_ops_consume_the_generator_like_eager(cell):
    ns, _ = cell
    f = ns["functional"]
    x, t, w = rand(4, 5), torch.tensor([0, 4, 2, 1]), rand(5, 3, seed=1)
    torch.manual_seed(3)
    a = f(x, t, w)
    after_region = torch.rand(1)
    torch.manual_seed(3)
    e = f.__wrapped__(x, t, w)
    after_eager = torch.rand(1)
    assert_same(a, e)
    assert torch.equal(after_region, after_eager)


def test_what_stays_python_says_where_and_why(cell):
    _, report = cell
    reasons = dict(report.python)
    assert "itself" in reasons["recursive"]
    assert "different kinds" in reasons["kinds_differ"] or "may be unbound" in reasons["kinds_differ"]
    lines = CELL.splitlines()
    for reason in reasons.values():
        assert reason.startswith("at "), reason
        line = int(reason[3:].split(":")[0])
        assert 0 < line <= len(lines)
        assert "ppy_magic" not in reason and ".py" not in reason


@pytest.mark.parametrize(
    "body, where, words",
    [
        ("    for i in range(3):\n        del x\n    return x", "at 5:9", "`del`"),
        ("    y = f'{x}'\n    return x", "at 4:9", "f-string"),
        ("    return x.tolist()", "at 4:5", "tolist"),  # its numbers serve `for` and len() only
        ("    return {'a': x}", "at 4:12", "dict"),
        ("    for i in 'abc':\n        pass\n    return x", "at 4:14", "iterating over str"),
        ("    y = torch.einsum(x, [0, 1])\n    return y", "at 4:9", "sublist"),
        ("    return x.frobnicate()", "at 4:12", "frobnicate"),
        ("    if x.dim() == 2 and x.is_leaf:\n        return x\n    return x", "at 4:25", "attribute `.is_leaf`"),
        ("    k = None if x.dim() > 5 else 3\n    return isinstance(k, int)", "at 5:12", "decided by the value"),
    ],
)
def test_compile_errors_are_located_and_say_what_to_do(body, where, words):
    err = compile_error(f"import torch\nimport torch.nn.functional as F\ndef f(x):\n{body}\n")
    text = str(err)
    assert err.reason.startswith(where), err.reason
    assert words in text, text
    assert ".py" not in text and "Traceback" not in text


METHOD_CELL = """
import torch
import ppy

@ppy.opt(3)
def receiver_is_self(x, cond, y):
    # where.self's schema is (condition, self, other): the receiver binds to `self`
    return x.where(cond, y), x.polygamma(2), torch.where(cond, x, y)

@ppy.opt(3)
def enum_and_device_arguments(x):
    return (x.float(memory_format=torch.contiguous_format),
            x.to("cpu", torch.float64, memory_format=torch.preserve_format), x[[1, 2]], x[:, [0, -1]])

@ppy.opt(3)
def factories(x):
    return (torch.zeros(2, 3, device="cpu", dtype=torch.float64) + torch.arange(0, 3, device=x.device),
            torch.ones_like(x, dtype=torch.int64))
"""


def test_methods_bind_their_receiver_to_self_and_enums_resolve():
    ns, report = compile_cell(METHOD_CELL, filename="<method-cell>")
    assert report.compiled == ["receiver_is_self", "enum_and_device_arguments", "factories"], report.python
    x, y = rand(4, 4), rand(4, 4, seed=1)
    same(ns["receiver_is_self"], x, x > 0, y)
    same(ns["enum_and_device_arguments"], x)
    same(ns["factories"], x)
