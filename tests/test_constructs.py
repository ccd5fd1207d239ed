"""The constructs torch.nn.functional's own code needs, in user code too, each against eager.

warnings.warn (and C++ warnings of the ops) issued as eager issues them; raising RuntimeError and
NotImplementedError; `in` / `not in`; `is` between tensors; f-strings of dtypes, devices, tuples
and lists; float lists for float[] arguments; str + str; isinstance with a tuple of types; calls
made for what they do (a statement); names bound in a branch whose other path raises. One cell:
this file costs one build.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.support.cells import compile_cell
from tests.support.eager import compare_call
from tests.support.outcomes import MATCH

CELL = """
import warnings
import torch
import torch.nn.functional as F
import ppy


@ppy.opt(3)
def warns(x, loud: bool):
    if loud:
        warnings.warn("loud", stacklevel=2)
    warnings.warn(f"shape {x.shape} of {x.dtype}", DeprecationWarning)
    return F.softmax(x) + F.mse_loss(x, x[:1])




@ppy.opt(3)
def raises(x, which: int):
    if which == 1:
        raise RuntimeError(f"runtime {which} on {x.device}")
    if which == 2:
        raise NotImplementedError("not implemented " + str(which))
    if which == 3:
        return F.glu(x.sum())
    return F.interpolate(x, size=3)


@ppy.opt(3)
def membership(x, mode: str, d: int):
    a = x.dim() in (2, 3)
    b = mode not in ("sum", "mean")
    c = d in x.shape
    return a, b, c, mode in ("sum",)


@ppy.opt(3)
def identity(a, b, c=None):
    k = a
    return a is b, a is not b, k is a, c is None, c is a


@ppy.opt(3)
def formats(x, n: int):
    if n > 0:
        raise ValueError(f"{x.dtype} on {x.device}: {(n, 2)} {[n]} {(n,)} {x.shape} {torch.float16}")
    return x


@ppy.opt(3)
def float_list(x, s: float):
    return torch._C._nn.upsample_nearest2d(x, None, [s, 2]), F.interpolate(x, scale_factor=(s, 1.5), mode="bilinear")


@ppy.opt(3)
def concat(x, mode: str):
    if mode != "ok":
        raise ValueError(mode + " is not a valid mode")
    return x


@ppy.opt(3)
def kinds_of(x, n: int, f: float):
    return isinstance(n, (int, float)), isinstance(x, (int, float)), isinstance(f, (str, float)), x


@ppy.opt(3)
def check_shapes(x):
    assert x.dim() == 2, "two dims"
    return x


@ppy.opt(3)
def statements(x):
    check_shapes(x)
    F.relu(x, inplace=True)
    return x


@ppy.opt(3)
def bound_in_branch(x, w=None):
    if w is None:
        raise ValueError("no weight")
    else:
        y = x * w
    return y + w
"""


def t(*shape, grad=True):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


@pytest.fixture(scope="module")
def ns():
    ns, report = compile_cell(CELL, filename="<ppy-constructs>")
    assert not report.python, report.python
    return ns


def same(f, *args, **kwargs):
    status, detail = compare_call(f, args, kwargs)
    assert status == MATCH, detail


def caught(f, *args):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        f(*args)
    return [(w.category, str(w.message)) for w in got]


def test_warnings_are_issued_as_eager_issues_them(ns):
    f = ns["warns"]
    x = t(3, 4)
    for loud in (True, False):
        assert caught(f, x, loud) == caught(f.__wrapped__, x, loud)
        assert (UserWarning, "loud") in caught(f, x, True)
    same(f, x, True)


def test_a_warning_turned_into_an_error_raises_it(ns):
    f = ns["warns"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="loud"):
            f(t(3, 4), True)
    assert f.calls >= 1


OP_WARNING = """
import warnings
import torch
from tests.support.cells import compile_cell
ns, report = compile_cell(
    "import torch\\nimport ppy\\n@ppy.opt(3)\\ndef f(a, b):\\n    return torch.chain_matmul(a, b)\\n",
    filename="<op-warning>",
)
with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    ns["f"](torch.ones(2, 2), torch.ones(2, 2))
assert ns["f"].calls == 1, report.python
print(got[0].category.__name__, str(got[0].message))
"""


def test_warnings_of_the_ops_themselves_reach_python():
    # torch.chain_matmul warns from C++ (TORCH_WARN_ONCE): the first call of a fresh process is a region's
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", OP_WARNING], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("UserWarning torch.chain_matmul is deprecated"), done.stdout


@pytest.mark.parametrize("which", [1, 2, 3, 4])
def test_runtime_error_and_not_implemented_error(ns, which):
    same(ns["raises"], t(2, 3, 4), which)


def test_membership(ns):
    for mode, d in (("sum", 4), ("max", 7)):
        same(ns["membership"], t(3, 4), mode, d)
        same(ns["membership"], t(2, 3, 4, 5), mode, d)


def test_tensor_identity(ns):
    a, b = t(3), t(3)
    f = ns["identity"]
    assert f(a, a, None) == f.__wrapped__(a, a, None) == (True, False, True, True, False)
    assert f(a, b, a) == f.__wrapped__(a, b, a) == (False, True, True, False, True)
    assert f.calls == 2


def test_fstrings_format_dtypes_devices_tuples_and_lists(ns):
    f = ns["formats"]
    same(f, t(2, 3), 4)
    same(f, t(2, 3).double(), 0)
    with pytest.raises(ValueError) as info:
        f(t(2, 3), 5)
    assert str(info.value) == "torch.float32 on cpu: (5, 2) [5] (5,) torch.Size([2, 3]) torch.float16"


def test_float_lists(ns):
    same(ns["float_list"], t(1, 2, 3, 4), 1.5)


def test_str_concatenation(ns):
    same(ns["concat"], t(3), "ok")
    same(ns["concat"], t(3), "bad")


def test_isinstance_with_a_tuple_of_types(ns):
    same(ns["kinds_of"], t(3), 2, 0.5)


def test_calls_made_for_what_they_do(ns):
    same(ns["statements"], t(3, 4, grad=False))
    with pytest.raises(AssertionError, match="two dims"):
        ns["statements"](t(3, grad=False))  # the callee's assert


def test_names_bound_in_a_branch_whose_other_path_raises(ns):
    same(ns["bound_in_branch"], t(3), t(3))
    same(ns["bound_in_branch"], t(3), None)
