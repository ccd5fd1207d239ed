"""A numbered catalogue of bad input, as a notebook user meets it.

Each case asserts the message the user sees (what happened, and what to do)
and that nothing is lost: the namespace, the other functions of the cell, the
built modules in the cache. docs/troubleshooting.md follows these
numbers.

Builds are the slow part, so the cases share a few cells: CELL_COMPILE holds
every function the compiler refuses (one build, for the one that compiles),
CELL_RUNTIME the regions the runtime cases call (one build), CELL_RAISES a
region bound before the cell fails (one build). Everything else builds nothing.
"""

from __future__ import annotations

import concurrent.futures
import os
import re

import numpy as np
import pytest
import torch
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import ppy_magic
from ppy_magic import backend
from tests.support.cells import assert_same


def run(ip, text: str):
    """Run `text` as a notebook cell; return (ExecutionResult, everything the user sees)."""
    with capture_output(display=True) as cap:
        result = ip.run_cell(text)
    shown = [cap.stdout, cap.stderr]
    shown += [o.data.get("text/plain", "") for o in cap.outputs]
    return result, "\n".join(shown)


def stays_python_line(shown: str, name: str) -> str:
    """The summary line saying why `name` stays Python, plus its hint line if any."""
    lines = shown.splitlines()
    for k, line in enumerate(lines):
        if line.startswith(f"ppy: '{name}' stays Python: "):
            hint = lines[k + 1] if k + 1 < len(lines) and lines[k + 1].startswith("ppy:     ") else ""
            return line + "\n" + hint
    raise AssertionError(f"no 'stays Python' line for {name!r} in:\n{shown}")


def cache_files() -> set[str]:
    return {name for name, _ in backend.shared_cache().entries()}


def no_traceback(shown: str) -> None:
    assert "Traceback" not in shown and "ppy_magic/" not in shown, shown


# ---- the compile-time catalogue: one cell --------------------------------------------------

CELL_COMPILE = """%%ppy
import contextlib
import numpy as np
import torch
import ppy


def helper(x):
    return x + 1


@ppy.opt(3)
def fine(x):
    return torch.relu(x) + 1


@ppy.opt(3)
def uses_print(x):
    print("x has shape", tuple(x.shape))
    return x + 1


@ppy.opt(3)
def uses_match(x):
    match x.dim():
        case 1:
            return x / 2
        case _:
            return x


@ppy.opt(3)
def uses_try(x):
    try:
        y = x + 1
    except RuntimeError:
        y = x
    return y


@ppy.opt(3)
def uses_with(x):
    with contextlib.suppress(KeyError):
        y = x + 1
    return y


@ppy.opt(3)
def uses_lambda(x):
    inc = lambda v: v + 1
    return inc(x)


@ppy.opt(3)
def uses_comprehension(x):
    parts = {k: x * k for k in range(3)}
    return torch.stack([parts[0], parts[1], parts[2]])


@ppy.opt(3)
def uses_yield(x):
    yield x + 1


@ppy.opt(3)
def uses_global(x):
    global LAST_INPUT
    LAST_INPUT = x
    return x + 1


@ppy.opt(3)
def uses_numpy(x):
    y = np.tanh(x)
    return torch.as_tensor(y)


@ppy.opt(3)
def uses_helper(x):
    return helper(x) * 2


@ppy.opt(3)
def calls_itself(x):
    return calls_itself(x - 1)


@ppy.opt(3)
def star_args(*xs):
    return xs[0] + 1


@ppy.opt(3)
def star_kwargs(x, **options):
    return x + 1


@ppy.opt(3)
def keyword_only(x, *, scale: float = 2.0):
    return x * scale


@ppy.opt(3)
def tensor_default(x, y=None):
    return x


@ppy.opt(3)
def in_place(x):
    return x.add_(1)


@ppy.opt(3)
def uses_shell(x):
    !echo hello
    return x


class Model:
    @ppy.opt(3)
    def method(self, x):
        return x + 1


def make_nested():
    @ppy.opt(3)
    def nested(x):
        return x + 1
    return nested


nested = make_nested()


@ppy.opt(3)
async def asynchronous(x):
    return x + 1


@ppy.opt
def bare(x):
    return x * 3
"""


def cell_line(cell: str, text: str) -> int:
    """The line number (1 = the %%ppy line) of the first line of `cell` containing `text`."""
    return next(k for k, line in enumerate(cell.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def refused(ip):
    ip.user_ns["kept_from_before"] = kept = object()
    before = cache_files()
    result, shown = run(ip, CELL_COMPILE)
    assert result.success, shown
    return {"ns": ip.user_ns, "shown": shown, "kept": kept, "cache_before": before}


def test_00_the_refusing_cell_loses_nothing(refused):
    ns = refused["ns"]
    assert ns["kept_from_before"] is refused["kept"]
    assert ns["fine"].__ppy_region__ and ns["bare"].__ppy_region__
    compiled = re.search(r"ppy: \d+ regions? \(([^)]*)\)", refused["shown"])
    assert compiled and {"fine", "bare"} <= set(compiled.group(1).split(", ")), refused["shown"]
    assert refused["cache_before"] <= cache_files()
    x = torch.randn(4)
    assert_same(ns["fine"](x), torch.relu(x) + 1)


UNSUPPORTED = [
    # (case, function, words the user must see, the construct's line)
    ("02a", "uses_print", ["call statement", "print(", "not supported", "no side effects"], 'print("x has'),
    ("02b", "uses_match", ["`match`", "not supported"], "match x.dim()"),
    ("02c", "uses_try", ["`try`", "not supported", "handle them around the call"], "try:"),
    (
        "02d",
        "uses_with",
        ["only `with torch.no_grad():`", "keep other context managers outside"],
        "contextlib.suppress",
    ),
    ("02f", "uses_comprehension", ["dict comprehension", "not supported"], "parts = {"),
    ("02g", "uses_yield", ["generator cannot be a region", "keep a generator as Python"], "def uses_yield"),
    ("02h", "uses_global", ["`global`", "not supported", "return the value instead"], "global LAST_INPUT"),
    ("03a", "uses_numpy", ["`np.tanh`", "torch operators"], "np.tanh"),
    ("06a", "star_args", ["tuple index out of range", "nothing in *args"], "return xs[0]"),
    ("06c", "keyword_only", ["keyword-only", "plain positional parameters"], "def keyword_only"),
    ("22", "calls_itself", ["cannot call itself", "keep a recursive function as Python"], "calls_itself(x - 1)"),
    ("11b", "uses_shell", ["system('echo hello')", "not supported"], "echo hello"),
    ("05b", "nested", ["only top-level functions", "Move the function to the top level"], "def nested"),
    ("05c", "asynchronous", ["async function cannot be a region", "Remove `async`"], "async def"),
    ("05d", "uses_yield", ["generator cannot be a region", "keep a generator as Python"], "def uses_yield"),
]


@pytest.mark.parametrize("case,name,words,where", UNSUPPORTED, ids=[c[0] + "-" + c[1] for c in UNSUPPORTED])
def test_02_to_06_unsupported_code_stays_python_with_a_located_reason(refused, case, name, words, where):
    """The cell's output names the function, the line, what is unsupported and what to do instead."""
    shown = stays_python_line(refused["shown"], name)
    for word in words:
        assert word.lower() in shown.lower(), (word, shown)
    line = cell_line(CELL_COMPILE, where)
    assert re.search(rf"at {line}:\d+: ", shown), (line, shown)
    fn = refused["ns"][name]
    assert not getattr(fn, "__ppy_region__", False)
    assert f"at {line}:" in str(ppy_magic.explain(fn))  # explain() repeats the reason


@pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")  # numpy 2 on a torch.Tensor
def test_02_unsupported_functions_still_run_as_python(refused, capsys):
    ns = refused["ns"]
    x = torch.tensor([1.0, 2.0])
    assert_same(ns["uses_print"](x), x + 1)
    assert "x has shape (2,)" in capsys.readouterr().out
    assert_same(ns["uses_try"](x), x + 1)
    assert_same(ns["uses_with"](x), x + 1)
    assert_same(ns["uses_lambda"](x), x + 1)
    assert_same(ns["uses_comprehension"](x), torch.stack([x * 0, x * 1, x * 2]))
    assert_same(next(ns["uses_yield"](x)), x + 1)
    assert_same(ns["uses_global"](x), x + 1)
    assert ns["LAST_INPUT"] is x
    assert_same(ns["uses_numpy"](x), torch.as_tensor(np.tanh(x)))
    assert_same(ns["star_args"](x), x + 1)
    assert_same(ns["keyword_only"](x, scale=3.0), x * 3.0)
    assert_same(ns["Model"]().method(x), x + 1)
    assert_same(ns["nested"](x), x + 1)


def test_05a_a_method_of_a_top_level_class_is_a_region(refused):
    """A method of a class at the top of the cell compiles; the instance's attributes are read per call."""
    model = refused["ns"]["Model"]
    assert model.__dict__["method"].__ppy_region__ is True
    assert "Model.method" in refused["shown"]
    x = torch.tensor([1.0, 2.0])
    assert_same(model().method(x), x + 1)


def test_03b_a_plain_python_helper(refused):
    """A region calls torch operators only: a call to the user's own Python function keeps the
    caller Python, and the message says that is what `helper` is."""
    fn = refused["ns"]["uses_helper"]
    x = torch.randn(2)
    assert_same(fn(x), (x + 1) * 2)
    if getattr(fn, "__ppy_region__", False):
        return  # the language learned to inline helpers
    shown = stays_python_line(refused["shown"], "uses_helper")
    assert f"at {cell_line(CELL_COMPILE, 'helper(x) * 2')}:" in shown and "helper" in shown, shown
    assert "Python function" in shown and "@ppy.opt" in shown, (
        f"say that `helper` is a plain Python function, and that decorating it would let the region call it:\n{shown}"
    )


def test_04a_bare_decorator_compiles_at_the_default_level(refused):
    bare = refused["ns"]["bare"]
    assert bare.__ppy_region__ and bare.__ppy_info__.level == 3
    x = torch.randn(3)
    assert_same(bare(x), x * 3)


def test_06d_a_tensor_parameter_defaulting_to_none(refused):
    """Decision: literal int/float/bool defaults compile (test 14); any other default keeps the
    function Python with a reason about that parameter, unless the language accepts it."""
    fn = refused["ns"]["tensor_default"]
    x = torch.randn(2)
    if getattr(fn, "__ppy_region__", False):
        assert_same(fn(x), x)
        assert_same(fn(x, x * 2), x)
        return
    shown = stays_python_line(refused["shown"], "tensor_default")
    assert "default" in shown and "None" in shown, shown
    assert "float" not in shown, f"the hint must fit a tensor parameter, not a float one:\n{shown}"
    assert_same(fn(x), x)


def test_20_in_place_op_on_a_leaf_that_requires_grad_gives_eagers_error(refused):
    fn = refused["ns"]["in_place"]
    if not getattr(fn, "__ppy_region__", False):  # in-place ops are outside the language: a clear reason
        shown = stays_python_line(refused["shown"], "in_place")
        assert "add_" in shown and "op table" in shown, shown
    leaf = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError) as eager:
        in_place_eager(leaf)
    with pytest.raises(RuntimeError) as ours:
        fn(leaf)
    assert str(ours.value) == str(eager.value)
    assert "leaf Variable that requires grad" in str(ours.value)
    plain = torch.zeros(2)
    assert_same(fn(plain), torch.ones(2))


def in_place_eager(x):
    return x.add_(1)


# ---- cells that fail before, while, or after they run ----------------------------------------------


def test_01_syntax_error_in_a_cell_shows_pythons_message_and_runs_nothing(ip):
    result, shown = run(ip, "%%ppy\nsyntax_marker = 1\ndef broken(:\n    return 1\n")
    assert isinstance(result.error_in_exec, Exception)
    assert "SyntaxError" in shown and "line 3" in shown and "def broken(:" in shown, shown
    no_traceback(shown)
    assert "syntax_marker" not in ip.user_ns


def test_04b_a_string_level_raises_where_the_decorator_is_written(ip):
    result, shown = run(
        ip, '%%ppy\nimport ppy\nbefore_bad_level = 1\n@ppy.opt("3")\ndef s(x):\n    return x\nafter_bad_level = 1\n'
    )
    assert isinstance(result.error_in_exec, TypeError)
    assert "ppy.opt(level): level must be an int from 0 to 4, got str '3'; write @ppy.opt(3)" in shown
    assert "line 4" in shown and '@ppy.opt("3")' in shown
    assert "decorator.py" not in shown, "the user's line, not our code, is the story"
    assert ip.user_ns["before_bad_level"] == 1 and "after_bad_level" not in ip.user_ns


@pytest.mark.parametrize("value, on", [(None, False), ("", False), ("0", False), ("1", True), ("yes", True)])
def test_ppy_debug_is_one_switch(ip, monkeypatch, value, on):
    """PPY_DEBUG=1 keeps this package's frames in a cell's traceback (and lets the front end's own errors out)."""
    from ppy_magic.errors import debug

    if value is None:
        monkeypatch.delenv("PPY_DEBUG", raising=False)
    else:
        monkeypatch.setenv("PPY_DEBUG", value)
    assert debug() is on
    result, shown = run(ip, '%%ppy\nimport ppy\n@ppy.opt("3")\ndef debug_switch(x):\n    return x\n')
    assert isinstance(result.error_in_exec, TypeError) and "line 3" in shown
    assert ("decorator.py" in shown) is on, shown


CELL_RAISES = """%%ppy
import torch
import ppy


@ppy.opt(3)
def bound_before_error(x):
    return x - 1


value_before_error = bound_before_error(torch.ones(2))


@ppy.opt(9)
def bad_level(x):
    return x


never_assigned = 1
"""


def test_04c_and_09_a_cell_that_raises_keeps_what_it_bound(ip):
    """09: a cell that raises after its regions were bound keeps them (as Python keeps the defs
    that ran); 04c: @ppy.opt(9) is such an error, raised at its own line."""
    ppy_magic.wait(timeout=600)  # earlier cells' variants, building in the background, land before counting
    before = cache_files()
    result, shown = run(ip, CELL_RAISES)
    assert isinstance(result.error_in_exec, ValueError)
    assert "ppy.opt(level): level must be from 0 (never compile) to 4, got 9; write @ppy.opt(4)" in shown
    assert f"line {cell_line(CELL_RAISES, '@ppy.opt(9)')}" in shown and "decorator.py" not in shown, shown
    assert "1 region (bound_before_error)" in shown, "the build summary is shown even though the cell failed"
    ns = ip.user_ns
    assert ns["bound_before_error"].__ppy_region__
    assert_same(ns["value_before_error"], torch.zeros(2))
    assert_same(ns["bound_before_error"](torch.ones(3)), torch.zeros(3))
    assert "bad_level" not in ns and "never_assigned" not in ns
    assert before <= cache_files() and len(cache_files() - before) <= 1


def test_10_an_empty_cell_is_ipythons_usage_error_and_a_blank_one_runs(ip):
    result, shown = run(ip, "%%ppy\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "%%ppy is a cell magic, but the cell body is empty." in shown
    no_traceback(shown)
    result, shown = run(ip, "%%ppy\n\n   \n")
    assert result.success
    assert "ppy: nothing to compile in this cell; it ran as plain Python" in shown


# ---- the runtime catalogue: one cell of regions ---------------------------------------------------

CELL_RUNTIME = """%%ppy
import torch
import ppy


@ppy.opt(3)
def mm(x, w):
    y = x @ w
    return torch.relu(y)


@ppy.opt(3)
def ew(x, y):
    z = x * y
    return torch.tanh(z + 1)


@ppy.opt(3)
def scaled(x, s: float = 2.0):
    return x * s


@ppy.opt(3)
def twice(x):
    return x + 1


first_twice = twice
first_result = twice(torch.ones(2))


@ppy.opt(3)
def twice(x):
    return x * 10


timed = %time mm(torch.ones(2, 3), torch.ones(3, 4))
echoed = !echo ppy-shell
"""


@pytest.fixture(scope="module")
def regions(ip):
    result, shown = run(ip, CELL_RUNTIME)
    assert result.success, shown
    ns = ip.user_ns
    for name in ("mm", "ew", "scaled", "twice", "first_twice"):
        assert ns[name].__ppy_region__, (name, shown)
    return ns


def counters(f):
    return f.calls, f.fallbacks


def same_outcome(f, *args, **kwargs):
    """Call the region and its Python body; they must agree on result or exception type and message."""
    try:
        eager, eager_exc = f.__wrapped__(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - compared below
        eager, eager_exc = None, exc
    try:
        ours, ours_exc = f(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001
        ours, ours_exc = None, exc
    if eager_exc is not None or ours_exc is not None:
        assert type(ours_exc) is type(eager_exc), (ours_exc, eager_exc)
        assert str(ours_exc) == str(eager_exc)
        return ours_exc
    if isinstance(eager, torch.Tensor) and (eager.is_meta or eager.is_sparse):
        assert type(ours) is type(eager) and ours.layout == eager.layout and ours.device == eager.device
        assert ours.shape == eager.shape and ours.dtype == eager.dtype
        if eager.is_sparse:
            assert torch.equal(ours.to_dense(), eager.to_dense())
        return ours
    assert_same(ours, eager)
    assert type(ours) is type(eager)
    return ours


def test_07_unannotated_parameters_are_tensors_and_a_number_falls_back(regions):
    """Decision: an unannotated parameter holds a torch.Tensor unless the region's first call gave it
    another kind (tests/test_kinds.py). Once the region ran for tensors, a non-tensor there runs the
    Python body (eager's result), counted, with the reason kept."""
    ew = regions["ew"]
    same_outcome(ew, torch.randn(3), torch.randn(3))  # the first call: tensors
    calls, fallbacks = counters(ew)
    same_outcome(ew, 2.0, torch.randn(3))
    assert ew.fallbacks == fallbacks + 1 and ew.calls == calls
    assert ew.last_fallback_reason == "an argument is not a torch.Tensor"
    assert "an argument is not a torch.Tensor" in str(ppy_magic.explain(ew))


def test_08_a_function_defined_twice_is_two_regions_each_used_in_turn(regions):
    assert_same(regions["first_result"], torch.ones(2) + 1)
    assert regions["first_twice"] is not regions["twice"]
    assert_same(regions["twice"](torch.ones(2)), torch.full((2,), 10.0))
    assert_same(regions["first_twice"](torch.ones(2)), torch.full((2,), 2.0))


def test_11_ipython_syntax_in_a_cell_works(regions):
    assert_same(regions["timed"], torch.relu(torch.ones(2, 3) @ torch.ones(3, 4)))
    assert list(regions["echoed"]) == ["ppy-shell"]


def test_12_wrong_arity_is_pythons_type_error(regions):
    mm = regions["mm"]
    _, fallbacks = counters(mm)
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    err = same_outcome(mm, x)
    assert isinstance(err, TypeError) and "mm() missing 1 required positional argument: 'w'" in str(err)
    err = same_outcome(mm, x, w, w)
    assert isinstance(err, TypeError) and "takes 2 positional arguments but 3 were given" in str(err)
    assert mm.fallbacks > fallbacks and mm.last_fallback_reason == "arity differs from the compiled signature"


def test_13_keyword_arguments_run_the_region_and_wrong_ones_are_pythons_error(regions):
    mm = regions["mm"]
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    calls, fallbacks = counters(mm)
    assert_same(mm(x=x, w=w), torch.relu(x @ w))
    assert_same(mm(x, w=w), torch.relu(x @ w))
    assert counters(mm) == (calls + 2, fallbacks)
    err = same_outcome(mm, x, weight=w)
    assert isinstance(err, TypeError) and "unexpected keyword argument 'weight'" in str(err)
    assert mm.last_fallback_reason == "keyword arguments do not match the signature"


def test_14_defaults_and_scalar_kinds(regions):
    scaled = regions["scaled"]
    x = torch.randn(3)
    calls, fallbacks = counters(scaled)
    assert_same(scaled(x), x * 2.0)
    assert_same(scaled(x, 0.5), x * 0.5)
    assert counters(scaled) == (calls + 2, fallbacks)
    same_outcome(scaled, x, 3)  # an int in a float parameter: kept an int, as Python does, in the region
    assert counters(scaled) == (calls + 3, fallbacks)


@pytest.mark.parametrize(
    "bad", [[1.0, 2.0, 3.0], None, np.ones((2, 3), dtype=np.float32)], ids=["list", "None", "ndarray"]
)
def test_15_a_non_tensor_where_a_tensor_is_expected_is_eagers_error(regions, bad):
    mm = regions["mm"]
    _, fallbacks = counters(mm)
    err = same_outcome(mm, bad, torch.randn(3, 4))
    assert isinstance(err, TypeError) and "unsupported operand type(s) for @" in str(err)
    assert mm.fallbacks == fallbacks + 1
    assert mm.last_fallback_reason == "an argument is not a torch.Tensor"


def test_16_nn_parameter_runs_as_a_region(regions):
    mm = regions["mm"]
    w = torch.nn.Parameter(torch.randn(3, 4))
    x = torch.randn(2, 3)
    calls, fallbacks = counters(mm)
    out = mm(x, w)
    assert counters(mm) == (calls + 1, fallbacks)
    assert_same(out, torch.relu(x @ w))
    out.sum().backward()
    grad = w.grad.clone()
    w.grad = None
    torch.relu(x @ w).sum().backward()
    assert torch.equal(grad, w.grad)


class MyTensor(torch.Tensor):
    pass


class Logged:
    """Not a tensor, but torch functions accept it through __torch_function__."""

    def __init__(self, t):
        self.t = t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args = [a.t if isinstance(a, Logged) else a for a in args]
        return func(*args, **(kwargs or {}))

    def __mul__(self, other):
        return torch.mul(self, other)


@pytest.mark.parametrize(
    "make,reason",
    [
        (lambda t: t.as_subclass(MyTensor), "a tensor argument is a subclass of torch.Tensor"),
        (Logged, "an argument is not a torch.Tensor"),
    ],
    ids=["subclass", "torch_function"],
)
def test_17_subclass_and_torch_function_fall_back_counted(regions, make, reason):
    ew = regions["ew"]
    _, fallbacks = counters(ew)
    out = same_outcome(ew, make(torch.randn(3)), torch.randn(3))
    assert isinstance(out, torch.Tensor)
    assert ew.fallbacks == fallbacks + 1 and ew.last_fallback_reason == reason
    assert ppy_magic.explain(ew).fallback_reasons[reason] >= 1


def test_18_an_active_torch_function_mode_falls_back(regions):
    mm = regions["mm"]
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    with torch.device("meta"):
        out = same_outcome(mm, x, w)
    assert out.device.type == "cpu"  # the mode changes factories only; eager's result
    assert mm.last_fallback_reason == "a TorchFunctionMode is active"


def _kinds():
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    big = torch.randn(2, 3, 4, 5)
    return {
        "meta": (x.to("meta"), w.to("meta")),
        "sparse": (x.to_sparse(), w),
        "complex": (x.to(torch.complex64), w.to(torch.complex64)),
        "bf16": (x.bfloat16(), w.bfloat16()),
        "fp16": (x.half(), w.half()),
        "int": (torch.arange(6).reshape(2, 3), torch.arange(12).reshape(3, 4)),
        "mixed": (x, w.double()),
        "0-dim": (torch.tensor(2.0), torch.tensor(3.0)),
        "empty": (torch.ones(0, 3), w),
        "non-contiguous": (torch.randn(3, 2).t(), w[:, ::1].t().contiguous().t()),
        "channels-last": (big.to(memory_format=torch.channels_last), big.transpose(2, 3)),
    }


@pytest.mark.parametrize("kind", list(_kinds()))
@pytest.mark.parametrize("fn", ["mm", "ew"])
def test_19_unusual_tensors_give_eagers_result_or_error(regions, fn, kind):
    a, b = _kinds()[kind]
    if fn == "ew":
        b = a.clone() if not a.is_sparse else a  # same shape, same kind
    same_outcome(regions[fn], a, b)
    if kind == "meta":
        assert regions[fn].last_fallback_reason == "a tensor is on a device type the region was not built for"


def test_21_a_shape_mismatch_is_eagers_error_plus_the_python_line(regions, ip):
    mm = regions["mm"]
    a, b = torch.randn(2, 3), torch.randn(4, 5)
    err = same_outcome(mm, a, b)
    assert isinstance(err, RuntimeError)
    assert str(err) == "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"
    line = cell_line(CELL_RUNTIME, "y = x @ w")
    assert err.__notes__ == [f"ppy region 'mm', line {line}: y = x @ w"]
    # In a cell, the user sees the message, the note and their own frames only.
    ip.user_ns.update(a_bad=a, b_bad=b)
    result, shown = run(ip, "%%ppy\nout = mm(a_bad, b_bad)\n")
    assert isinstance(result.error_in_exec, RuntimeError)
    assert "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)" in shown
    assert f"ppy region 'mm', line {line}: y = x @ w" in shown
    assert "ppy_magic/" not in shown


def test_23_eight_threads_calling_one_region_get_eagers_results(regions):
    mm = regions["mm"]
    gen = torch.Generator().manual_seed(0)
    # Small inputs keep the GIL; large ones (>= 65536 elements) release it during the region.
    inputs = [(torch.randn(8, 32, generator=gen), torch.randn(32, 32, generator=gen)) for _ in range(8)]
    inputs += [(torch.randn(300, 300, generator=gen), torch.randn(300, 300, generator=gen)) for _ in range(8)]
    expected = [torch.relu(x @ w) for x, w in inputs]

    def work(k: int) -> list[bool]:  # every thread calls every input twice, each starting elsewhere
        order = [(k + j) % len(inputs) for j in range(len(inputs))] * 2
        return [torch.equal(mm(*inputs[j]), expected[j]) for j in order]

    calls = mm.calls
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(work, range(8)))
    assert all(all(o) for o in outcomes)
    assert mm.calls == calls + sum(len(o) for o in outcomes)


def test_24_nothing_was_lost_along_the_way(regions, ip):
    """After every failing cell above, the regions and modules built earlier are all still there."""
    files = cache_files()
    for name in ("mm", "ew", "scaled", "twice"):
        module = regions[name].__ppy_info__.module_name
        assert module + backend.EXT_SUFFIX in files
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    calls = regions["mm"].calls
    assert_same(regions["mm"](x, w), torch.relu(x @ w))
    assert regions["mm"].calls == calls + 1
    assert os.path.isdir(backend.shared_cache().root)
