"""The core path end to end: front end, codegen, runtime guards and semantics.

One module-scoped cell holds every function these tests call, so the file
costs one build.
"""

from __future__ import annotations

import ast
import sys
import threading

import pytest
import torch

from ppy_magic import backend, explain
from ppy_magic.errors import CompileError
from ppy_magic.language import frontend, namespace
from tests.support.cells import assert_same, compile_cell, compile_error

CELL = '''
import torch
import ppy

SCALE = 0.5

@ppy.opt(3)
def layer(x, w, b):
    """A dense layer."""
    return torch.relu(x @ w + b)

@ppy.opt(3)
def residual(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x + SCALE * y)

@ppy.opt(2)
def arith(x, y, a: float, n: int):
    t = x * a - y / 2 + n
    u = 2.0 / t + 3 - x
    v = -u * 1.5 + torch.exp(torch.sigmoid(t))
    return torch.div(torch.sub(v, y, alpha=2), 3)

@ppy.opt(1)
def mm(x, w):
    h = torch.matmul(x, w)
    return h

@ppy.opt(3)
def scaled(x, a: float = 2.0):
    return x.mul(a).add(1)

@ppy.opt(3)
def not_compiled(x):
    print(x)
    return x

def main():
    return layer(torch.ones(2, 3), torch.ones(3, 3), torch.zeros(3)).__class__.__name__

RESULT_OF_MAIN = main()
REGION_BOUND_IN_CELL = getattr(layer, "__ppy_region__", False)
'''


@pytest.fixture(scope="module")
def cell():
    ns, report = compile_cell(CELL, filename="<core-cell>")
    return ns, report


def rand(*shape, seed=0, **kw):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, **kw)


# ---- front end -------------------------------------------------------------------


def _compile_one(src: str) -> CompileError:
    return compile_error(src, {"torch": torch})


@pytest.mark.parametrize(
    "body, where, words",
    [
        ("    print(x)\n    return x", "at 3:5", "print(x)"),
        ("    try:\n        pass\n    finally:\n        pass\n    return x", "at 3:5", "`try`"),
        ("    y = {a for a in x}\n    return y", "at 3:9", "set comprehension"),
        ("    return x.frobnicate()", "at 3:12", "frobnicate"),
        ("    return torch.matmul(x, 2)", "at 3:12", "matches no ATen overload"),
        ("    return unknown_thing(x)", "at 3:12", "unknown_thing"),
    ],
)
def test_front_end_reasons_are_located(body, where, words):
    src = f"import torch\ndef f(x):\n{body}\n"
    err = _compile_one(src)
    assert err.reason.startswith(where), err.reason
    assert words in str(err)
    text = str(err)
    assert ".py" not in text.replace("<src>", "") and "ppy_magic/" not in text and "Traceback" not in text
    assert "^" in text  # a caret under the construct


def test_front_end_error_shows_the_source_line():
    err = _compile_one("import torch\ndef f(x):\n    y = x\n    print(y)\n    return y\n")
    lines = str(err).splitlines()
    assert lines[1].strip() == "print(y)"
    assert lines[2].strip() == "^" * len("print(y)")


def test_globals_from_the_source_are_frozen_and_ambiguous_ones_refused():
    tree = ast.parse("import torch\nEPS = 1e-5\nK = 1\nK = 2\nz = compute()\n")
    g = namespace.collect_globals(tree, {})
    assert g.lookup("EPS") == (True, 1e-5)
    assert g.lookup("torch") == (True, torch)
    assert g.lookup("K")[0] is False
    assert g.lookup("z")[0] is False


# ---- codegen ---------------------------------------------------------------------


def test_codegen_returns_an_aten_only_translation_unit(cell):
    _, report = cell
    text = report.cpp
    assert "at::_ops::matmul::call" in text and "at::_ops::relu::call" in text
    assert "torch/extension.h" not in text and "pybind11" not in text
    assert "#include <ATen/ops/matmul_ops.h>" in text


def test_float_constants_are_emitted_exactly():
    for v in (0.1, 1e-300, 2.0**-1074, 1.7976931348623157e308, -0.0):
        lit = backend.codegen.cpp_literal(v, "f")
        assert float.fromhex(lit) == v and str(float.fromhex(lit)) == str(v)
    assert backend.codegen.cpp_literal(float("inf"), "f").endswith("infinity()")


def test_codegen_line_map_points_at_python_lines(cell):
    tree = ast.parse(CELL)
    g = namespace.collect_globals(tree, {})
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "mm")
    code = backend.generate([frontend.compile_function(fn, g, "<c>", CELL.splitlines(), 3)])
    cpp_lines = code.text.splitlines()
    marks = sorted(code.line_map.items())
    assert [CELL.splitlines()[py - 1].strip() for _, (_, py) in marks] == ["h = torch.matmul(x, w)", "return h"]
    for cpp_line, (name, py_line) in marks:
        assert name == "mm" and f"ppy_line = {py_line};" in cpp_lines[cpp_line - 1]


# ---- binding ------------------------------------------------------------------------


def test_cell_binds_regions_by_the_time_their_def_ran(cell):
    ns, report = cell
    assert ns["REGION_BOUND_IN_CELL"] is True
    assert ns["RESULT_OF_MAIN"] == "Tensor"
    assert set(report.compiled) == {"layer", "residual", "arith", "mm", "scaled"}
    assert [name for name, _ in report.python] == ["not_compiled"]
    assert "print(x)" in report.python[0][1]


def test_region_looks_like_the_function(cell):
    import inspect

    ns, _ = cell
    f = ns["layer"]
    assert f.__ppy_region__ is True
    py = f.__wrapped__
    assert f.__name__ == py.__name__ == "layer"
    assert f.__qualname__ == py.__qualname__
    assert f.__doc__ == "A dense layer."
    assert f.__module__ == py.__module__
    assert inspect.signature(f) == inspect.signature(py)
    assert getattr(ns["not_compiled"], "__ppy_region__", False) is False
    assert getattr(py, "__ppy_region__", False) is False


def test_plain_python_leaves_everything_python():
    ns = {"__name__": "plain"}
    exec(compile(CELL, "<plain>", "exec"), ns)
    assert getattr(ns["layer"], "__ppy_region__", False) is False
    assert ns["layer"].__ppy_opt__ == 3  # marked, nothing more
    assert ns["REGION_BOUND_IN_CELL"] is False


# ---- semantics: bitwise equal to eager -------------------------------------------------------


def test_results_are_bitwise_equal_to_eager(cell):
    ns, _ = cell
    x, w, b, y = rand(8, 32), rand(32, 32, seed=1), rand(32, seed=2), rand(8, 32, seed=3)
    cases = [
        ("layer", (x, w, b)),
        ("residual", (x, y)),
        ("arith", (x, y, 0.3, 7)),
        ("mm", (x, w)),
        ("scaled", (x,)),
        ("scaled", (x, 0.1)),
    ]
    for name, args in cases:
        f = ns[name]
        before = f.calls
        assert_same(f(*args), f.__wrapped__(*args))
        assert f.calls == before + 1, name


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32])
def test_dtype_promotion_matches_eager(cell, dtype):
    ns, _ = cell
    f = ns["arith"]
    x = (rand(4, 5) * 10).to(dtype)
    y = (rand(4, 5, seed=1) * 10).to(dtype)
    assert_same(f(x, y, 0.25, 3), f.__wrapped__(x, y, 0.25, 3))
    assert f.fallbacks == 0


def test_gradients_equal_eager(cell):
    ns, _ = cell
    f = ns["arith"]
    x1, y1 = rand(4, 5, requires_grad=True), rand(4, 5, seed=1, requires_grad=True)
    x2, y2 = x1.detach().clone().requires_grad_(), y1.detach().clone().requires_grad_()
    out1, out2 = f(x1, y1, 0.5, 2), f.__wrapped__(x2, y2, 0.5, 2)
    assert_same(out1, out2)
    out1.sum().backward()
    out2.sum().backward()
    assert torch.equal(x1.grad, x2.grad) and torch.equal(y1.grad, y2.grad)
    assert type(out1.grad_fn).__name__ == type(out2.grad_fn).__name__


def test_grad_modes_and_autocast_behave_as_eager(cell):
    ns, _ = cell
    f = ns["layer"]
    x, w, b = rand(8, 32, requires_grad=True), rand(32, 32, seed=1), rand(32, seed=2)
    with torch.no_grad():
        assert_same(f(x, w, b), f.__wrapped__(x, w, b))
        assert not f(x, w, b).requires_grad
    with torch.inference_mode():
        r = f(x, w, b)
        assert r.is_inference() and torch.equal(r, f.__wrapped__(x, w, b))
    mm = ns["mm"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r, e = f(x, w, b), f.__wrapped__(x, w, b)
        r2, e2 = mm(x, w), mm.__wrapped__(x, w)
    assert_same(r, e)
    assert r2.dtype == e2.dtype == torch.bfloat16  # autocast reached the region's matmul
    assert_same(r2, e2)


# ---- guards and fallback -------------------------------------------------------------------


class Sub(torch.Tensor):
    pass


class Override:
    def __init__(self, t):
        self.t = t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return "override"


def test_guard_failures_run_the_python_body_and_are_counted(cell):
    ns, _ = cell
    f = ns["mm"]
    x, w = rand(2, 3), rand(3, 4)
    start = f.fallbacks
    r = f(x.as_subclass(Sub), w)
    assert type(r) is Sub and f.fallbacks == start + 1
    assert "subclass" in f.last_fallback_reason
    assert f(Override(x), w) == "override"
    assert f.fallbacks == start + 2
    with torch.device("meta"):
        r = f(x, w)
    assert f.fallbacks == start + 3 and "TorchFunctionMode" in f.last_fallback_reason
    r = f(x.to("meta"), w.to("meta"))
    assert r.device.type == "meta" and "device type" in f.last_fallback_reason
    assert f.fallbacks == start + 4
    info = explain(f)
    assert info.is_region and info.fallbacks == start + 4
    assert any("subclass" in reason for reason in info.fallback_reasons)


def test_scalar_kinds_are_guarded(cell):
    ns, _ = cell
    f = ns["arith"]
    x, y = rand(3), rand(3, seed=1)
    start, calls = f.fallbacks, f.calls
    # an int in a float parameter: Python keeps it an int, and so does the region (compiled for both)
    assert_same(f(x, y, 2, 1), f.__wrapped__(x, y, 2, 1))
    assert f.fallbacks == start and f.calls == calls + 1
    assert_same(f(x, y, 2.0, True), f.__wrapped__(x, y, 2.0, True))  # bool is not an int parameter
    assert f.fallbacks == start + 1 and "int" in f.last_fallback_reason


def test_nn_parameter_runs_as_a_region(cell):
    ns, _ = cell
    f = ns["layer"]
    w = torch.nn.Parameter(rand(32, 32))
    x, b = rand(8, 32), rand(32)
    start = (f.calls, f.fallbacks)
    assert_same(f(x, w, b), f.__wrapped__(x, w, b))
    assert (f.calls, f.fallbacks) == (start[0] + 1, start[1])


def test_arity_and_keywords(cell):
    ns, _ = cell
    f = ns["scaled"]
    x = rand(3)
    assert_same(f(x=x, a=0.5), f.__wrapped__(x, 0.5))
    calls = f.calls
    assert_same(f(a=0.5, x=x), f.__wrapped__(x, 0.5))
    assert f.calls == calls + 1
    with pytest.raises(TypeError) as err:
        f()
    with pytest.raises(TypeError) as err_py:
        f.__wrapped__()
    assert str(err.value) == str(err_py.value)
    with pytest.raises(TypeError):
        f(x, 0.5, 3)
    with pytest.raises(TypeError):
        f(x, b=1.0)


def test_exceptions_have_eager_type_message_and_a_line_note(cell):
    ns, _ = cell
    f = ns["layer"]
    x, w, b = rand(8, 31), rand(32, 32), rand(32)
    with pytest.raises(RuntimeError) as eager:
        f.__wrapped__(x, w, b)
    with pytest.raises(RuntimeError) as region:
        f(x, w, b)
    assert type(region.value) is type(eager.value)
    assert str(region.value) == str(eager.value)
    notes = getattr(region.value, "__notes__", [])
    assert any("'layer'" in n and "return torch.relu(x @ w + b)" in n for n in notes), notes
    line = CELL.splitlines().index("    return torch.relu(x @ w + b)") + 1
    assert any(f"line {line}" in n for n in notes)


def test_a_region_call_makes_no_python_level_call(cell):
    ns, _ = cell
    f = ns["layer"]
    x, w, b = rand(8, 32), rand(32, 32), rand(32)
    f(x, w, b)
    events = []

    def profile(frame, event, arg):
        events.append((event, getattr(arg, "__name__", None) or frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        f(x, w, b)
    finally:
        sys.setprofile(None)
    # only the profiler's own removal shows up; no Python frame, no torch binding call
    assert [e for e in events if e[1] != "setprofile"] == [], events
    events.clear()
    sys.setprofile(profile)
    try:
        f.__wrapped__(x, w, b)
    finally:
        sys.setprofile(None)
    assert any(e[0] == "call" for e in events)  # the check itself can see Python calls


def test_threads_share_a_region(cell):
    ns, _ = cell
    f = ns["layer"]
    x, w, b = rand(64, 32), rand(32, 32), rand(32)
    want = f.__wrapped__(x, w, b)
    results, errors = [], []

    def work():
        try:
            for _ in range(50):
                results.append(torch.equal(f(x, w, b), want))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 400 and all(results)


def test_the_same_source_under_another_file_name_is_a_cache_hit(cell):
    # a cell's file name changes with the execution count; the module must not
    _, report = cell
    _, again = compile_cell(CELL, filename="<core-cell-run-again-in-another-kernel>")
    assert again.module_name == report.module_name
    assert again.build_source == "memory"


def test_the_public_names():
    import ppy_magic

    assert sorted(ppy_magic.__all__) == sorted(
        [
            "BuildError",
            "CompileError",
            "PpyArtifactWarning",
            "PpyError",
            "PpyFallbackWarning",
            "__version__",
            "annotate",
            "compile",
            "explain",
            "functional_coverage",
            "load_ipython_extension",
            "supported_ops",
            "toolchain_ready",
            "unload_ipython_extension",
            "wait",
        ]
    )
    for name in ppy_magic.__all__:
        assert hasattr(ppy_magic, name), name
    ops = ppy_magic.supported_ops()
    for name in (
        "torch.matmul",
        "torch.add",
        "F.gelu",
        "F.softmax",
        "F.layer_norm",
        "Tensor.view",
        "Tensor.split",
        "Tensor.float",
        "torch.linalg.vector_norm",
        "torch.special.erf",
    ):
        assert name in ops, name
    assert len(ops) > 500


def test_the_runtime_refuses_a_return_spec_it_cannot_build(cell):
    from ppy_magic import backend

    ns, report = cell
    runtime = backend.load_runtime(backend.shared_cache())
    module = backend.shared_cache().memory[report.module_name]
    args = (ns["mm"].__wrapped__, module, 0, "TT", "R0(TT)", 1, ("x", "w"), (), {})
    with pytest.raises(ValueError, match="result type"):
        runtime.RegionFunction(*args, ())  # a named tuple return without its type
    with pytest.raises(ValueError, match="bad return spec"):
        runtime.RegionFunction(*args[:4], "T?", *args[5:], ())
    ok = runtime.RegionFunction(*args[:4], "R0(TT)", *args[5:], (torch.return_types.max,))
    assert ok is not None
