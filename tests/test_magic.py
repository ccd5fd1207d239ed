"""The magics as a notebook user drives them: options, %config, fallback visibility, life cycle.

Everything runs in the one shared shell (conftest's `ip`); options changed here
are put back. Two cells build (one at the configured default level with -v, one
with -O 3); the rest build nothing.
"""

from __future__ import annotations

import ast
import re
import warnings

import pytest
import torch
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import ppy_magic
from ppy_magic import pipeline
from ppy_magic.language import frontend, namespace
from ppy_magic.region import PpyFallbackWarning
from tests.support.cells import assert_same

OPTIONS = ("strict", "verbose", "cache_dir", "show_build_status", "default_level", "warn_fallback")


def run(ip, text: str):
    """Run `text` as a notebook cell; return (ExecutionResult, everything the user sees)."""
    with capture_output(display=True) as cap:
        result = ip.run_cell(text)
    shown = [cap.stdout, cap.stderr] + [o.data.get("text/plain", "") for o in cap.outputs]
    return result, "\n".join(shown)


def magics(ip):
    return ip.magics_manager.registry["PpyMagics"]


def ppy_configurables(ip) -> list:
    return [c for c in ip.configurables if type(c).__name__ == "PpyMagics"]


# ---- options ------------------------------------------------------------------------------------


def test_help_documents_every_option(ip):
    doc = ip.find_cell_magic("ppy").__doc__
    assert "%%ppy [-f] [--strict] [-v] [-a] [-O LEVEL]" in doc
    for flag in ("-f, --force", "--strict", "-v, --verbose", "-a, --annotate", "-O LEVEL"):
        assert flag in doc
    with capture_output() as cap:
        ip.run_line_magic("pinfo", "%%ppy")
    assert "-O LEVEL" in cap.stdout and "%config PpyMagics" in cap.stdout


@pytest.mark.parametrize(
    "flags,words",
    [
        ("--bogus", "unrecognized arguments: --bogus"),
        ("-O 7", "LEVEL must be 0 (leave every function Python) to 4, got '7'"),
        ("-O fast", "LEVEL must be 0 (leave every function Python) to 4, got 'fast'"),
        ("-O", "argument -O: expected one argument"),
    ],
)
def test_bad_options_are_a_usage_error_without_traceback(ip, flags, words):
    result, shown = run(ip, f"%%ppy {flags}\nran_with_bad_flags = 1\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert f"UsageError: %%ppy {flags}: " in shown and words in shown and "see %%ppy? for the options" in shown
    assert "Traceback" not in shown
    assert "ran_with_bad_flags" not in ip.user_ns


def test_config_lists_every_option_with_its_help(ip):
    with capture_output() as cap:
        ip.run_line_magic("config", "")
    assert "PpyMagics" in cap.stdout.split()
    with capture_output() as cap:
        ip.run_line_magic("config", "PpyMagics")
    text = cap.stdout
    for name, kind in zip(OPTIONS, ("Bool", "Bool", "Unicode", "Bool", "Int", "Bool"), strict=True):
        assert f"PpyMagics.{name}=<{kind}>" in text
    for words in (
        "Raise instead of leaving a function Python",
        "generated C++ and the build command",
        "Where built extensions are cached",
        "live 'building ...' line",
        "level of a bare @ppy.opt",
        "Warn once per function and reason",
    ):
        assert words in text


def test_default_level_is_checked(ip):
    from traitlets import TraitError

    with pytest.raises(TraitError, match="default_level must be 0 .never compile. to 4, got 5"):
        magics(ip).default_level = 5
    assert magics(ip).default_level == 3


def test_the_default_level_decides_what_a_bare_decorator_means():
    tree = ast.parse(
        "import ppy\n@ppy.opt\ndef a(x):\n    return x\n@ppy.opt()\ndef b(x):\n    return x\n"
        "@ppy.opt(1)\ndef c(x):\n    return x\n"
    )
    g = namespace.collect_globals(tree, {})
    top, _ = frontend.decorated_functions(tree, g, default_level=2)
    assert [(node.name, level) for node, level in top] == [("a", 2), ("b", 2), ("c", 1)]
    assert pipeline.effective_level(None, 2, None) == 2
    assert pipeline.effective_level(1, 2, None) == 1
    assert pipeline.effective_level(1, 2, 0) == 0


def test_profile_config_applies_when_the_extension_loads(ip):
    """`c.PpyMagics.x = ...` in a profile: the magics are created with parent=shell, so they read it."""
    try:
        ip.config.PpyMagics.default_level = 0
        ip.config.PpyMagics.strict = True
        ip.run_line_magic("reload_ext", "ppy_magic")
        assert magics(ip).default_level == 0 and magics(ip).strict is True
        result, shown = run(ip, "%%ppy\nimport ppy\n@ppy.opt\ndef bare_at_zero(x):\n    return x + 1\n")
        assert result.success, shown
        fn = ip.user_ns["bare_at_zero"]
        assert not getattr(fn, "__ppy_region__", False)
        assert "default level, 0 (PpyMagics.default_level)" in str(ppy_magic.explain(fn))
        result, shown = run(
            ip, "%%ppy\nimport ppy\nstrict_from_config = 1\n@ppy.opt(2)\ndef s(x):\n    print(x)\n    return x\n"
        )
        assert isinstance(result.error_in_exec, ppy_magic.CompileError)
        assert "strict_from_config" not in ip.user_ns
    finally:
        for name in ("default_level", "strict"):
            ip.config.PpyMagics.pop(name, None)
        ip.run_line_magic("reload_ext", "ppy_magic")
    assert magics(ip).default_level == 3 and magics(ip).strict is False


def test_config_magic_sets_an_option_for_every_cell(ip):
    try:
        ip.run_line_magic("config", "PpyMagics.strict = True")
        assert magics(ip).strict is True
        cell = "%%ppy\nimport ppy\n@ppy.opt(2)\ndef s(x):\n    try:\n        pass\n    finally:\n"
        cell += "        pass\n    return x\n"
        result, shown = run(ip, cell)
        assert isinstance(result.error_in_exec, ppy_magic.CompileError)
        assert "'s' cannot be compiled: at 5:5: `try` is not supported in a region" in shown
    finally:
        ip.run_line_magic("config", "PpyMagics.strict = False")
    assert magics(ip).strict is False


# ---- cells that build ----------------------------------------------------------------------------

LEVELS_CELL = """%%ppy -v
import torch
import ppy


@ppy.opt
def at_default(x):
    return x * 2


@ppy.opt(1)
def at_one(x):
    return x - 1


@ppy.opt(0)
def never(x):
    return x + 5


@ppy.opt(3)
def prints(x):
    print(x)
    return x


at_default(torch.ones(2))
"""


@pytest.fixture(scope="module")
def levels(ip):
    """LEVELS_CELL run with `%config PpyMagics.default_level = 2`."""
    ip.run_line_magic("config", "PpyMagics.default_level = 2")
    try:
        result, shown = run(ip, LEVELS_CELL)
    finally:
        ip.run_line_magic("config", "PpyMagics.default_level = 3")
    assert result.success, shown
    # Later cells rebind these names; tests keep using this cell's objects.
    return result, shown, {k: ip.user_ns[k] for k in ("at_default", "at_one", "never", "prints")}


def test_default_level_is_used_for_a_bare_decorator(levels):
    _, _, ns = levels
    assert ns["at_default"].__ppy_region__ and ns["at_default"].__ppy_info__.level == 2
    assert ns["at_one"].__ppy_region__ and ns["at_one"].__ppy_info__.level == 1
    assert not getattr(ns["never"], "__ppy_region__", False)
    assert ppy_magic.explain(ns["never"]).reason == "ppy.opt(0): never compiled"
    x = torch.randn(3)
    assert_same(ns["at_default"](x), x * 2)
    assert_same(ns["at_one"](x), x - 1)


def test_summary_says_what_compiled_and_what_to_do_about_the_rest(levels):
    _, shown, _ = levels
    assert "ppy: 2 regions (at_default, at_one)" in shown
    line = next(k for k, text in enumerate(LEVELS_CELL.splitlines(), 1) if "print(x)" in text)
    assert (
        f"ppy: 'prints' stays Python: at {line}:5: the call statement `print(x)` is not supported in a region"
    ) in shown
    assert "\nppy:     A region has no side effects" in shown  # the hint, under the reason
    assert "'never'" not in shown  # opt(0) is what the user asked for, not a problem


def test_last_expression_is_shown_like_a_plain_cell(levels, ip):
    result, _, _ = levels
    assert_same(result.result, torch.full((2,), 2.0))
    result, shown = run(ip, "%%ppy\nat_default(torch.ones(1));\n")
    assert result.success and result.result is None and "Out[" not in shown


def test_verbose_shows_the_cpp_and_the_build_command(levels):
    _, shown, ns = levels
    module = ns["at_default"].__ppy_info__.module_name
    assert "ppy: -v: generated C++:" in shown
    assert "at::_ops::mul" in shown and "// at_default (" in shown
    assert f"ppy: -v: module {module}: " in shown and f"{module}.so" in shown
    assert "ppy: -v: build commands" in shown
    assert "-O2" in shown and " -c " in shown and " -shared " in shown  # compile and link lines


def test_level_override_compiles_every_function_at_that_level(ip, levels):
    text = LEVELS_CELL.replace("%%ppy -v", "%%ppy -O 3").replace("print(x)\n    ", "")
    result, shown = run(ip, text)
    assert result.success, shown
    ns = ip.user_ns
    for name in ("at_default", "at_one", "never", "prints"):  # opt(0) too: -O wins
        assert ns[name].__ppy_region__ and ns[name].__ppy_info__.level == 3, name
    assert_same(ns["never"](torch.ones(2)), torch.full((2,), 6.0))


def test_level_zero_leaves_the_whole_cell_python(ip, levels):
    result, shown = run(ip, LEVELS_CELL.replace("%%ppy -v", "%%ppy -O 0"))
    assert result.success, shown
    for name in ("at_default", "at_one", "never", "prints"):
        fn = ip.user_ns[name]
        assert not getattr(fn, "__ppy_region__", False), name
        assert f"ppy: '{name}' stays Python: -O 0 leaves every function of the cell Python" in shown


def test_strict_names_the_function_and_line_and_keeps_everything(ip, levels):
    _, _, ns = levels
    region_before = ns["at_one"]
    ip.user_ns["kept_before_strict"] = kept = object()
    ip.user_ns["region_before_strict"] = region_before
    result, shown = run(
        ip,
        "%%ppy --strict\nimport ppy\nstrict_ran = 1\n\n@ppy.opt(3)\ndef fine_one(x):\n"
        "    return x + 1\n\n@ppy.opt(3)\ndef strict_bad(x):\n    print(x)\n    return x\n",
    )
    assert isinstance(result.error_in_exec, ppy_magic.CompileError)
    assert (
        "CompileError: 'strict_bad' cannot be compiled: at 11:5: the call statement `print(x)` "
        "is not supported in a region"
    ) in shown
    assert "        print(x)\n        ^^^^^^^^" in shown  # the line and a caret under the construct
    assert "A region has no side effects" in shown  # what to do
    assert "--strict: the cell did not run, so nothing it defines changed" in shown
    assert "Traceback" not in shown
    assert "strict_ran" not in ip.user_ns and "fine_one" not in ip.user_ns
    assert ip.user_ns["kept_before_strict"] is kept and ip.user_ns["region_before_strict"] is region_before
    assert_same(region_before(torch.ones(2)), torch.zeros(2))


def test_a_syntax_error_shows_once_as_in_a_plain_cell(ip):
    result, shown = run(ip, "%%ppy\nimport ppy\n\n@ppy.opt(3)\ndef broken(x):\n    return (x +\n")
    assert isinstance(result.error_in_exec, SyntaxError)  # the cell failed: a Run All stops here
    assert shown.count("SyntaxError") == 1, shown
    assert "line 6" in shown and "return (x +" in shown
    assert "Traceback" not in shown and "ppy_magic" not in shown and "AlreadyShown" not in shown, shown


def test_tracebacks_name_the_cell_by_its_own_number(ip):
    # IPython 9 counts a cell before running it: the number must be the cell's, not the next one's.
    for text in ("%%ppy\nraise ValueError('from the cell')\n", "%%ppy\nimport ppy\n\ndef f(\n"):
        with capture_output(display=True) as cap:
            result = ip.run_cell(text, store_history=True)
        shown = cap.stdout + cap.stderr
        assert result.execution_count is not None and not result.success
        assert re.findall(r"Cell In\[(\d+)\]", shown) == [str(result.execution_count)], shown


def test_annotate_marks_each_line_compiled_or_python(ip, levels):
    ip.run_line_magic("config", "PpyMagics.default_level = 2")  # as `levels` built it: no new build
    try:
        with capture_output(display=True) as cap:
            result = ip.run_cell(LEVELS_CELL.replace("%%ppy -v", "%%ppy -a"))
    finally:
        ip.run_line_magic("config", "PpyMagics.default_level = 3")
    assert result.success
    (shown,) = [o for o in cap.outputs if "text/html" in o.data]
    text, html = shown.data["text/plain"], shown.data["text/html"]

    def line(code: str) -> int:
        return next(k for k, t in enumerate(LEVELS_CELL.splitlines(), 1) if t.strip() == code)

    assert "at_default: ATen region" in text and "at_one: ATen region" in text
    assert f"{line('return x * 2'):5d} C |     return x * 2\n" in text
    assert re.search(r"\n +\|     at::Tensor \w+ = at::_ops::mul_\w+::call\(", text), text
    assert f"{line('print(x)'):5d} P |     print(x)" in text
    assert "prints: stays Python" in text and "the call statement `print(x)` is not supported" in text
    assert "never: stays Python" in text and "ppy.opt(0): never compiled" in text
    assert f"{line('def at_one(x):'):5d}   | def at_one(x):" in text  # the def line is neither
    assert "<details class='ppy-line ppy-compiled'" in html and "class='ppy-calls'" in html
    assert "class='ppy-line ppy-python'" in html and "var(--jp-success-color1" in html


def test_annotate_shows_the_fallbacks_so_far(levels):
    _, _, ns = levels
    f = ns["at_one"]
    f(torch.ones(2).as_subclass(Sub))
    text = str(ppy_magic.annotate(f))
    counts = re.search(r"at_one: ATen region · ([\d,]+) calls? as region, ([\d,]+) fallbacks? to Python", text)
    assert counts and counts.groups() == (f"{f.calls:,}", f"{f.fallbacks:,}"), text
    assert re.search(r"\d+ x a tensor argument is a subclass of torch.Tensor", text), text
    plain = str(ppy_magic.annotate(len))
    assert "stays Python" in plain and "not decorated with @ppy.opt" in plain and "not available" in plain


# ---- fallbacks are visible ----------------------------------------------------------------------------


class Sub(torch.Tensor):
    pass


def test_fallbacks_are_counted_per_function_with_the_last_reason(levels):
    _, _, ns = levels
    f = ns["at_one"]
    calls, fallbacks = f.calls, f.fallbacks
    f(torch.ones(2))
    f(torch.ones(2).as_subclass(Sub))
    f(torch.ones(2).as_subclass(Sub))
    assert (f.calls, f.fallbacks) == (calls + 1, fallbacks + 2)
    assert f.last_fallback_reason == "a tensor argument is a subclass of torch.Tensor"
    info = ppy_magic.explain(f)
    assert info.fallbacks == f.fallbacks and info.calls == f.calls
    assert info.fallback_reasons["a tensor argument is a subclass of torch.Tensor"] >= 2
    text = str(info)
    assert f"fallbacks to Python: {f.fallbacks} (last: a tensor argument is a subclass of torch.Tensor)" in text
    assert "x a tensor argument is a subclass of torch.Tensor" in text
    other = ppy_magic.explain(ns["at_default"]).fallback_reasons
    assert "a tensor argument is a subclass of torch.Tensor" not in other  # per function


def test_warn_fallback_warns_once_per_function_and_reason(ip, levels):
    _, _, ns = levels
    f, g = ns["at_one"], ns["at_default"]
    sub = torch.ones(2).as_subclass(Sub)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        f(sub)  # the option is off: counted, not warned
        assert not seen
        try:
            ip.run_line_magic("config", "PpyMagics.warn_fallback = True")
            for _ in range(3):
                f(sub)  # already seen while off: still warned, once
                g(sub)
            with torch.device("meta"):
                f(torch.ones(2))
                f(torch.ones(2))
        finally:
            ip.run_line_magic("config", "PpyMagics.warn_fallback = False")
        f(torch.ones(1).as_subclass(Sub))
        with torch.device("meta"):
            f(torch.ones(2))
    ours = [w for w in seen if issubclass(w.category, PpyFallbackWarning)]
    messages = sorted(str(w.message) for w in ours)
    assert messages == sorted(
        [
            "ppy region 'at_one' ran as Python: a tensor argument is a subclass of torch.Tensor. "
            "ppy_magic.explain(f) shows its fallbacks.",
            "ppy region 'at_default' ran as Python: a tensor argument is a subclass of torch.Tensor. "
            "ppy_magic.explain(f) shows its fallbacks.",
            "ppy region 'at_one' ran as Python: a TorchFunctionMode is active. "
            "ppy_magic.explain(f) shows its fallbacks.",
        ]
    )
    assert all(w.filename == __file__ for w in ours)  # points at the caller's line


# ---- the extension's life cycle --------------------------------------------------------------------


def test_load_twice_registers_once(ip):
    before = magics(ip)
    with capture_output():
        ip.run_line_magic("load_ext", "ppy_magic")
    ppy_magic.load_ipython_extension(ip)
    assert magics(ip) is before
    assert ppy_configurables(ip) == [before]
    assert ip.find_cell_magic("ppy").__self__ is before


def test_unload_and_reload_keep_bound_regions_working(ip, levels):
    _, _, ns = levels
    region = ns["at_one"]
    try:
        ip.run_line_magic("unload_ext", "ppy_magic")
        assert ip.find_cell_magic("ppy") is None and ip.find_line_magic("ppy_cache") is None
        assert "PpyMagics" not in ip.magics_manager.registry and not ppy_configurables(ip)
        result, shown = run(ip, "%%ppy\nafter_unload = 1\n")
        assert isinstance(result.error_in_exec, UsageError) and "Cell magic `%%ppy` not found" in shown
        assert_same(region(torch.ones(2)), torch.zeros(2))
    finally:
        ip.run_line_magic("load_ext", "ppy_magic")
    first = magics(ip)
    ip.run_line_magic("reload_ext", "ppy_magic")
    assert magics(ip) is not first and ppy_configurables(ip) == [magics(ip)]
    assert ip.find_cell_magic("ppy").__self__ is magics(ip)
    calls = region.calls
    assert_same(region(torch.ones(2)), torch.zeros(2))
    assert region.calls == calls + 1
    result, shown = run(ip, "%%ppy\nafter_reload = 1\n")
    assert result.success and ip.user_ns["after_reload"] == 1


def test_ppy_cache_rejects_an_unknown_action(ip):
    result, shown = run(ip, "%ppy_cache wipe")
    assert isinstance(result.error_in_exec, UsageError)
    assert "%ppy_cache: unknown action 'wipe'; use 'info', 'prune' or 'clear'" in shown
