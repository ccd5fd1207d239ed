"""Parameter and value kinds, each against eager: every call must run as the region and match bitwise.

dtypes, devices and device strings, `X | None` in every spelling for int/float/bool/dtype/Tensor
(None included), tuple[int, ...] and list[int] sizes, unannotated parameters taking their default's
kind, a float parameter given an int (Python keeps the int; so does the region), str choices,
torch.finfo/iinfo, dtype and device comparisons, named-tuple fields, math.inf and float("-inf");
and these kinds in loops and branches (an X-or-None parameter tested inside a loop, or None first and an
int later, a dtype parameter in a branch and a `while` test). One cell: this file costs one build.
"""

from __future__ import annotations

import pytest
import torch

import ppy_magic
from tests.support.cells import compile_cell
from tests.support.eager import compare_call
from tests.support.outcomes import MATCH, NO_RUN

CELL = """
import math
from typing import Optional, Union

import torch
import torch.nn.functional as F
import ppy


@ppy.opt(3)
def dtype_param(x, dtype: torch.dtype, default: torch.dtype = torch.float64):
    return x.to(dtype), torch.zeros(2, dtype=default), x.sum(dtype=dtype) if dtype.is_floating_point else x.sum()


@ppy.opt(3)
def device_param(x, device: torch.device, other: torch.device = torch.device("cpu")):
    return x.to(device), torch.ones(2, device=other), x.device == device, x.device != other


@ppy.opt(3)
def device_string(x, device: str = "cpu"):
    return torch.zeros(3, device=device) + x, x.to(device=device)


@ppy.opt(3)
def optional_int(x, k: Optional[int] = None):
    if k is not None:
        k = min(k, x.size(-1))
        return torch.topk(x, k).values
    return x


@ppy.opt(3)
def optional_spellings(x, a: int | None = None, b: Union[float, None] = None, c: "bool | None" = None,
                       d: None | torch.dtype = None, w: Optional[torch.Tensor] = None):
    y = x if d is None else x.to(d)
    if a is not None:
        y = y * a
    if b is not None:
        y = y + b
    if c is not None and c:
        y = -y
    if w is not None:
        y = y * w
    return y, torch.sum(x, dtype=d), (5 if a is None else a)


@ppy.opt(3)
def float_given_int(x, gamma: float = 2, alpha: float = 0.25):
    # Python keeps an int an int: x ** 2 of an int tensor stays an int tensor, x ** 2.0 does not
    if gamma > 100:
        raise ValueError(f"gamma {gamma} is too large")
    return x ** gamma, x * (1 - alpha)


@ppy.opt(3)
def sizes(x, shape: tuple[int, ...], dims: list[int] = [0]):
    return x.reshape(shape).sum(dims), len(shape), x.view(*shape).shape


@ppy.opt(3)
def untyped_defaults(x, s=2.0, n=3, flag=True, mode="mean", dt=torch.float64, w=None):
    y = (x * s + n).to(dt) if flag else x.to(dt)
    if w is not None:
        y = y + w
    return F.mse_loss(y, y.detach() * 0.5, reduction=mode)


@ppy.opt(3)
def str_choice(x, t, reduction: str = "mean"):
    return F.cross_entropy(x, t, reduction=reduction)


@ppy.opt(3)
def type_info(x):
    fi = torch.finfo(x.dtype)
    ii = torch.iinfo(torch.int32)
    return x.clamp(min=fi.min, max=fi.max) * fi.eps + fi.tiny, ii.max, torch.finfo(torch.float16).max, fi.bits


@ppy.opt(3)
def dtype_checks(x):
    if x.dtype == torch.float16 or x.dtype in (torch.bfloat16,):
        y = x.float()
    else:
        y = x
    return y, x.is_floating_point(), x.is_complex(), x.ndim, x.numel(), x.device.type == "cpu"


@ppy.opt(3)
def named_fields(x):
    m = x.max(dim=-1)
    s = torch.linalg.slogdet(x[:, :2, :2] @ x[:, :2, :2].mT + torch.eye(2))
    return m.values, m.indices, torch.sort(x, dim=-1).indices, s.logabsdet, torch.topk(x, 2).values


@ppy.opt(0)
def apply_twice(fn, x):
    return fn(fn(x))


@ppy.opt(3)
def closures(x, scale: float):
    act = lambda t: t * torch.sigmoid(t) * scale

    def norm(t, eps=1e-5):
        return t / (t.abs().sum() + eps)

    def block(t, k: float):
        return norm(act(t)) * k  # a nested def calling the body's lambda and nested def

    y = act(x)
    scale = scale * 2  # late binding, as in Python: act reads the new scale
    return y, act(x), norm(x), apply_twice(lambda t: t + scale, x), apply_twice(norm, x), block(x, 3.0)


@ppy.opt(3)
def star_ignored(x, *args, **kwargs):
    return x * 2


@ppy.opt(3)
def star_passed_on(x, *args, **kwargs):
    return F.softmax(x, *args, **kwargs)


@ppy.opt(3)
def first_call_kinds(x, s):
    return x * s


@ppy.opt(3)
def kinds_in_loops(x, k: Optional[int] = None, dtype: torch.dtype = torch.float32, scale: float = 1,
                   w: Optional[torch.Tensor] = None):
    acc = torch.zeros((), dtype=dtype)
    best = None  # None, then an int: an int or None carried through the loop
    for i, row in enumerate(x):
        if k is None or i < k:
            acc = acc + row.sum().to(dtype) * scale
        if w is not None and row.sum() > 0:
            acc = acc + (row * w).sum().to(dtype)
        if best is None or row.max() > x[best].max():
            best = i
    while dtype.is_floating_point and acc.abs() > 10:
        acc = acc / 2
    return acc, (best if best is not None else -1), acc.dtype == dtype


@ppy.opt(3)
def kinds_in_branches(x, dtype: Optional[torch.dtype] = None, eps: Optional[float] = None, n: int = 3):
    out = []
    for i in range(n):
        if dtype is not None and dtype != x.dtype:
            y = x.to(dtype) * i
        else:
            y = x * i
        out.append(y.sum() if eps is None else y.sum() + eps)
        if eps is not None and eps > 1:
            eps = eps / 2
    return torch.stack(out), (0.0 if eps is None else eps)


@ppy.opt(3)
def infinities(x):
    return x.masked_fill(x > 1, math.inf), x.clamp(min=float("-inf"), max=-math.inf * -1), x * float("nan")
"""


def t(*shape, dtype=torch.float32, grad=True):
    g = torch.Generator().manual_seed(sum(shape) + 7 * len(shape))
    x = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
    return x.requires_grad_(grad and dtype.is_floating_point)


def ints(*shape):
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randint(-3, 4, shape, generator=g)


CALLS = {
    "dtype_param": [
        ((t(3), torch.float64), {}),
        ((t(3), torch.int32), {}),
        ((t(3), torch.bfloat16), {"default": torch.int8}),
    ],
    "device_param": [
        ((t(3), torch.device("cpu")), {}),
        ((t(3), "cpu"), {"other": "cpu"}),  # a str stays a str: x.device == "cpu" is False in Python
        ((t(3), "cpu:0"), {"other": torch.device("cpu", 0)}),
    ],
    "device_string": [((t(3),), {}), ((t(3), "cpu"), {})],
    "optional_int": [((t(2, 5),), {}), ((t(2, 5), 3), {}), ((t(2, 5), 9), {}), ((t(2, 5),), {"k": None})],
    "optional_spellings": [
        ((t(3),), {}),
        ((t(3), 2, 0.5, True, torch.float64, t(3)), {}),
        ((t(3), None, None, False, None, None), {}),
        ((t(3),), {"c": True, "d": torch.float16}),
    ],
    "float_given_int": [
        ((ints(4),), {}),
        ((ints(4), 2.0), {}),
        ((ints(4), 3, 1), {}),
        ((t(4), 2.5, 0.5), {}),
        ((t(4),), {"gamma": 3}),
    ],
    "sizes": [((t(6), (2, 3)), {}), ((t(6), [3, 2], [1]), {}), ((t(6), torch.Size([6]), []), {})],
    "untyped_defaults": [
        ((t(3),), {}),
        ((t(3), 3, 4, False, "sum", torch.float32, t(3)), {}),
        ((t(3),), {"s": 1, "mode": "none"}),
    ],
    "str_choice": [((t(4, 3), ints(4).abs() % 3), {}), ((t(4, 3), ints(4).abs() % 3, "sum"), {})],
    "type_info": [((t(3),), {}), ((t(3, dtype=torch.float64),), {}), ((t(3, dtype=torch.bfloat16),), {})],
    "dtype_checks": [((t(3),), {}), ((t(3, dtype=torch.float16),), {}), ((ints(3),), {})],
    "named_fields": [((t(2, 3, 4),), {})],
    "infinities": [((t(5),), {})],
    "kinds_in_loops": [
        ((t(4, 3),), {}),
        ((t(4, 3) * 9, 2, torch.float64, 3, t(3)), {}),
        ((t(4, 3),), {"k": None, "scale": 0.5}),
        ((ints(4, 3), None, torch.int64, 2), {}),
        ((t(0, 3),), {}),
    ],
    "kinds_in_branches": [
        ((t(3),), {}),
        ((t(3), torch.float64, 4.0, 2), {}),
        ((t(3), torch.float32, None, 1), {}),
        ((t(3),), {"eps": 1e-3, "n": 0}),
    ],
    "closures": [((t(4), 0.5), {}), ((t(4), 2), {})],
    "star_ignored": [((t(3),), {}), ((t(3), 1, "two"), {"three": 3.0})],
    "star_passed_on": [((t(2, 3),), {})],
}


@pytest.fixture(scope="module")
def cell():
    ns, report = compile_cell(CELL, filename="<ppy-kinds>")
    return ns, report


def test_every_function_compiles(cell):
    _, report = cell
    assert not report.python, report.python
    assert sorted(report.compiled) == sorted([*CALLS, "first_call_kinds"])


def test_args_passed_on_run_the_python_body_when_given(cell):
    ns, _ = cell
    f = ns["star_passed_on"]
    fallbacks = f.fallbacks
    assert compare_call(f, (t(2, 3), 0))[0] == NO_RUN  # the region is for calls without them
    assert f.fallbacks == fallbacks + 1


def test_unannotated_parameters_take_the_kinds_of_the_first_call(cell):
    ns, _ = cell
    f = ns["first_call_kinds"]
    x = t(3)
    f(x, 2.0)  # the first call, with a float: the Python body runs, and a variant is built for it
    ppy_magic.wait()
    assert len(f.__ppy_variants__) == 2  # the cell's (tensors), and the float's (an int or a float)
    for s in (3.0, 4, 0.5):
        assert compare_call(f, (x, s))[0] == MATCH
    assert compare_call(f, (ints(3), 2))[0] == MATCH
    assert compare_call(f, (x, t(3)))[0] == MATCH  # the cell's variant still takes tensors
    g = ns["closures"]  # ran with its annotated kinds first: nothing built at a call
    assert "__ppy_variant_records__" not in g.__dict__


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_call_runs_as_the_region_and_matches_eager(cell, name):
    ns, _ = cell
    bad = []
    for i, (args, kwargs) in enumerate(CALLS[name]):
        status, detail = compare_call(ns[name], args, kwargs)
        if status != MATCH:
            bad.append(f"call {i}: {status}: {detail}")
    assert not bad, "\n".join(bad)


def test_a_float_parameter_keeps_an_int_an_int(cell):
    ns, _ = cell
    f = ns["float_given_int"]
    as_int, as_float = f(ints(4), 2), f(ints(4), 2.0)
    assert as_int[0].dtype == torch.int64 and as_float[0].dtype == torch.float32
    for gamma, text in ((200, "gamma 200 is too large"), (200.0, "gamma 200.0 is too large")):
        with pytest.raises(ValueError) as info:
            f(ints(4), gamma)
        assert str(info.value) == text
        assert compare_call(f, (ints(4), gamma))[0] == MATCH


def test_guards_send_other_kinds_to_python(cell):
    ns, _ = cell
    f = ns["optional_int"]
    fallbacks = f.fallbacks
    with pytest.raises(TypeError):  # a bool is not an int-or-None: the Python body runs, and torch refuses it
        f(t(2, 5), True)
    assert f.fallbacks == fallbacks + 1
    g = ns["dtype_param"]
    with pytest.raises(Exception):  # noqa: B017 - eager's own error for a str dtype
        g(t(3), "float32")
    assert "dtype" in g.last_fallback_reason
