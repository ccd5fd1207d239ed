"""%ppy_bench: measurement as data (fake clock), the DataFrame contract, rendering, the magic's options and errors.

Most tests use fake variants that advance a fake clock, so their numbers are
exact and need no compiler; one cell builds a real region, and one test runs
the real torch.compile (tens of seconds on a CPU).
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from ppy_magic.bench import measure as bench
from ppy_magic.bench import report

LABELS = ["PPy ATen region", "PyTorch eager", "torch.compile"]
COLUMNS = ["best_ms", "median_ms", "iqr_ms", "speedup_vs_eager", "first_call_s", "matches_eager"]


# -- fakes -----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeRegion:
    """Stands in for a RegionFunction: the flag, __wrapped__ and the counters bench reads."""

    __ppy_region__ = True

    def __init__(self, body, clock: Clock, cost: float, out=None):
        self.__wrapped__ = body
        self.__qualname__ = body.__qualname__
        self.clock, self.cost = clock, cost
        self.out = out or body.__wrapped_math__
        self.calls = self.fallbacks = 0
        self.last_fallback_reason = None
        self.seen: set[tuple[int, ...]] = set()

    def __call__(self, *args):
        self.calls += 1
        self.seen.add(tuple(map(id, args)))
        self.clock.now += self.cost
        return self.out(*args)


def layer_math(x, w, b):
    return torch.relu(x @ w + b)


def eager_layer(clock: Clock, cost: float):
    def layer(x, w, b):
        clock.now += cost
        return layer_math(x, w, b)

    layer.__wrapped_math__ = layer_math
    return layer


def fake_compile(clock: Clock, first_cost: float, cost: float, out=layer_math):
    calls = []

    def compile_fn(fn):
        def compiled(*args):
            clock.now += first_cost if not calls else cost
            calls.append(1)
            return out(*args)

        return compiled

    compile_fn.calls = calls
    return compile_fn


@pytest.fixture
def xwb():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g), torch.randn(32, generator=g)


def run_fake(xwb, *, region_cost=2.5e-6, eager_cost=3.5e-6, compile_fn=None, options=None, region_out=None):
    clock = Clock()
    region = FakeRegion(eager_layer(clock, eager_cost), clock, region_cost, out=region_out)
    compile_fn = compile_fn or fake_compile(clock, 1.25, 14e-6)
    options = options or bench.BenchOptions(number=1000, repeat=3, warmup=10)
    result = bench.measure(region, xwb, options, arg_names=["x", "w", "b"], timer=clock, compile_fn=compile_fn)
    return result, region


# -- measurement ------------------------------------------------------------------------------


def test_fake_clock_gives_exact_figures(xwb):
    result, region = run_fake(xwb)
    assert [v.label for v in result.variants] == LABELS
    assert result[bench.REGION].per_call_s == pytest.approx((2.5e-6,) * 3)
    assert result[bench.EAGER].best_s == pytest.approx(3.5e-6)
    assert result[bench.COMPILE].best_s == pytest.approx(14e-6)
    assert result[bench.COMPILE].first_call_s == pytest.approx(1.25)  # the compile is not in the per-call time
    assert result.speedup_vs_eager(bench.REGION) == pytest.approx(1.4)
    assert result.fastest == bench.REGION
    # one check call, the warm-up, then the rounds; no fallbacks
    assert result.region_calls == 1 + 10 + 3 * 1000 and result.region_fallbacks == 0
    assert all(v.matches_eager for v in result.variants)


def test_rounds_are_interleaved_and_inputs_never_copied(xwb):
    clock = Clock()
    order = []

    def tracer(label, cost):
        def fn(x, w, b):
            if not order or order[-1] != label:
                order.append(label)
            clock.now += cost
            return layer_math(x, w, b)

        return fn

    eager = tracer("eager", 1e-6)
    eager.__wrapped_math__ = layer_math
    region = FakeRegion(eager, clock, 1e-6, out=tracer("region", 0.0))
    bench.measure(region, xwb, bench.BenchOptions(number=5, repeat=3, warmup=0, compile=False), timer=clock)
    # eager's reference call, the region's check, then the two alternate round by round
    assert order[-6:] == ["region", "eager"] * 3
    assert region.seen == {tuple(map(id, xwb))}


def test_cuda_tensors_are_synchronized_around_each_round(xwb, monkeypatch):
    syncs = []
    monkeypatch.setattr(bench, "_on_cuda", lambda a: True)  # this machine has no GPU
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(1))
    run_fake(xwb, options=bench.BenchOptions(number=4, repeat=3, warmup=0))
    assert len(syncs) == 1 + 3 * 3 * 2  # after torch.compile's first call; before and after each round


def test_statistics_over_rounds():
    v = bench.VariantTiming("x", per_call_s=(4e-6, 1e-6, 3e-6, 2e-6, 5e-6))
    assert v.best_s == 1e-6 and v.median_s == 3e-6
    assert v.iqr_s == pytest.approx(2e-6)
    assert bench.VariantTiming("x", per_call_s=(1e-6,)).iqr_s == 0.0
    assert bench.VariantTiming("x", skipped="why").best_s is None


@pytest.mark.parametrize(
    "kwargs, flag",
    [
        ({"number": 0}, "--number"),
        ({"repeat": -1}, "--repeat"),
        ({"repeat": 0}, "--repeat"),
        ({"threads": 0}, "--threads"),
    ],
)
def test_options_reject_empty_runs(kwargs, flag):
    with pytest.raises(bench.BenchUsageError, match=flag):
        bench.BenchOptions(**kwargs)


def test_threads_are_set_and_restored(xwb):
    seen = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:

        def f(x):
            seen.append(torch.get_num_threads())
            return x + 1

        bench.measure(f, xwb[:1], bench.BenchOptions(number=3, repeat=1, warmup=0, compile=False))
        assert set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_function_that_is_not_a_region_gets_a_row_saying_why(xwb):
    clock = Clock()
    result = bench.measure(
        eager_layer(clock, 3e-6), xwb, bench.BenchOptions(number=10, repeat=2, compile=False), timer=clock
    )
    region = result[bench.REGION]
    assert not region.ran and "not an ATen region" in region.skipped and "@ppy.opt" in region.skipped
    assert result[bench.EAGER].best_s == pytest.approx(3e-6)
    assert result[bench.COMPILE].skipped == "not measured (--no-compile)"
    assert result.region_calls is None


def test_a_failing_torch_compile_gets_a_row_and_the_others_are_measured(xwb):
    def no_compiler(fn):
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore detail")

    result, _ = run_fake(xwb, compile_fn=no_compiler)
    row = result[bench.COMPILE]
    assert row.skipped == "torch.compile failed: RuntimeError: InvalidCxxCompiler: No working C++ compiler found"
    assert result[bench.REGION].ran and result[bench.EAGER].ran
    df = report.to_frame(result)
    assert math.isnan(df.loc["torch.compile", "best_ms"]) and df.loc["torch.compile", "matches_eager"] is None
    assert "torch.compile    not run: torch.compile failed: RuntimeError" in report.to_text(result)


def test_outputs_that_differ_from_eager_are_reported(xwb):
    off_by_one_ulp = lambda x, w, b: torch.nextafter(layer_math(x, w, b), torch.tensor(math.inf))  # noqa: E731
    clock = Clock()
    loose = fake_compile(clock, 0.5, 1e-5, out=lambda x, w, b: layer_math(x, w, b) + 1e-3)
    result, _ = run_fake(xwb, region_out=off_by_one_ulp, compile_fn=loose)
    assert result[bench.REGION].matches_eager is False and "output.values: " in result[bench.REGION].check
    assert result[bench.COMPILE].matches_eager is False and "differs from eager" in result[bench.COMPILE].check
    assert "NO: differs from eager" in report.to_text(result)
    # torch.compile is compared with assert_close, so a last-bit difference passes there
    result, _ = run_fake(xwb, compile_fn=fake_compile(Clock(), 0.5, 1e-5, out=off_by_one_ulp))
    assert result[bench.COMPILE].matches_eager is True


def test_the_region_is_compared_with_the_one_comparator(xwb):
    # Each rule of same_as_eager has its own test in test_compare.py; here: the bench uses it, sign of zero included.
    def negative_zeros(x, w, b):  # eager's relu gives 0.0 where this gives -0.0: equal as numbers, not as bits
        out = layer_math(x, w, b)
        return torch.where(out == 0, torch.tensor(-0.0), out)

    result, _ = run_fake(xwb, region_out=negative_zeros)
    assert result[bench.REGION].matches_eager is False
    assert result[bench.REGION].check.startswith("differs from eager: output.values: ")
    assert "-0.0 vs eager's 0.0" in result[bench.REGION].check


def test_grad_times_forward_and_backward_on_leaves_made_once(xwb):
    result, region = run_fake(xwb, options=bench.BenchOptions(number=20, repeat=2, warmup=0, grad=True))
    assert all(v.matches_eager for v in result.variants)  # outputs and gradients
    assert all(a.requires_grad for a in result.arguments)
    assert len(region.seen) == 1  # the same argument objects in every call: no clone/detach per call
    assert not any(t.requires_grad for t in xwb)  # the user's tensors are left alone


def test_grad_with_nothing_to_differentiate_is_a_usage_error():
    ints = torch.arange(6)
    with pytest.raises(bench.BenchUsageError, match="no argument is a floating-point"):
        bench.measure(lambda t: t + 1, [ints], bench.BenchOptions(number=1, repeat=1, grad=True))
    with pytest.raises(bench.BenchUsageError, match="no output of"):
        bench.measure(lambda t: t.argmax(), [torch.ones(3)], bench.BenchOptions(number=1, repeat=1, grad=True))


def test_eager_errors_stop_the_run_before_other_variants(xwb):
    x, w, _ = xwb
    clock = Clock()
    region = FakeRegion(eager_layer(clock, 1e-6), clock, 1e-6)
    with pytest.raises(bench.EagerError) as info:
        bench.measure(
            region,
            (x, x, w[0]),
            bench.BenchOptions(number=1, repeat=1),
            timer=clock,
            compile_fn=lambda fn: pytest.fail("compiled after eager failed"),
        )
    assert isinstance(info.value.error, RuntimeError) and "cannot be multiplied" in str(info.value.error)
    assert region.calls == 0
    frames = []
    tb = info.value.error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert frames == [__file__, __file__]  # from the user's function (layer -> layer_math) down; none of bench's


def test_split_line_keeps_expressions_whole():
    from ppy_magic.jupyter.bench import split_line

    assert split_line("-n 10 f x[0] torch.ones(2, 3) 'a b' (x + 1) -x") == [
        "-n",
        "10",
        "f",
        "x[0]",
        "torch.ones(2, 3)",
        "'a b'",
        "(x + 1)",
        "-x",
    ]
    assert split_line("   ") == []


# -- rendering -----------------------------------------------------------------------------


def test_dataframe_contract(xwb):
    result, _ = run_fake(xwb)
    df = report.BenchReport(result).df
    assert list(df.index) == LABELS and list(df.columns) == COLUMNS
    assert df.loc["PPy ATen region", "best_ms"] == pytest.approx(0.0025)
    assert df.loc["PyTorch eager", "median_ms"] == pytest.approx(0.0035)
    assert df.loc["torch.compile", "iqr_ms"] == pytest.approx(0.0, abs=1e-12)
    assert df.loc["PyTorch eager", "speedup_vs_eager"] == pytest.approx(1.0)
    assert df.loc["torch.compile", "speedup_vs_eager"] == pytest.approx(0.25)
    assert df.loc["torch.compile", "first_call_s"] == pytest.approx(1.25)
    assert math.isnan(df.loc["PPy ATen region", "first_call_s"])
    assert df["matches_eager"].tolist() == [True, True, True]
    meta = report.BenchReport(result).metadata
    assert meta == df.attrs
    assert meta["torch_version"] == torch.__version__ and meta["device"] == "cpu" and meta["threads"] == 1
    assert [(a["expression"], a["shape"], a["dtype"]) for a in meta["arguments"]] == [
        ("x", (8, 32), "float32"),
        ("w", (32, 32), "float32"),
        ("b", (32,), "float32"),
    ]
    assert (meta["number"], meta["repeat"], meta["region_fallbacks"]) == (1000, 3, 0)


def test_text_table_with_fake_timer(xwb):
    result, _ = run_fake(xwb)
    lines = report.to_text(result).splitlines()
    assert (
        lines[0] == "layer(x: float32[8, 32], w: float32[32, 32], b: float32[32]) · cpu · 1 thread · forward · "
        f"torch {torch.__version__}"
    )
    assert lines[1].split() == [
        "variant",
        "best",
        "ms/call",
        "median",
        "IQR",
        "vs",
        "eager",
        "first",
        "call",
        "matches",
        "eager",
    ]
    assert lines[2].split() == ["PPy", "ATen", "region", "0.0025", "0.0025", "0.0000", "1.40×", "yes,", "bitwise"]
    assert lines[3].split() == ["PyTorch", "eager", "0.0035", "0.0035", "0.0000", "1.00×", "reference"]
    assert lines[4].split() == [
        "torch.compile",
        "0.0140",
        "0.0140",
        "0.0000",
        "0.25×",
        "1.2",
        "s",
        "yes,",
        "assert_close",
    ]
    assert lines[5] == (
        "The region takes 2.50 µs per call, 1.40× faster than eager (3.50 µs). torch.compile takes "
        "14.00 µs per call, 5.6× the region's time; its first call (compiling) took 1.2 s."
    )
    assert lines[6].startswith("Method: 3 rounds of 1,000 calls per variant, interleaved round by round")


def test_html_highlights_the_best_row_and_draws_bars(xwb):
    result, _ = run_fake(xwb)
    html = report.to_html(result)
    rows = html.split("<tr")
    region_row = next(r for r in rows if "PPy ATen region</td><td style='padding:2px" in r)
    assert "class='ppy-best'" in region_row and report._BEST in region_row and "0.0025" in region_row
    assert sum(report._BEST in r for r in rows) == 1
    # Bars of the best round: 14 µs the longest (320 px), 3.5 µs a quarter of it, from one edge.
    best = html[html.index("class='ppy-bars ppy-bars-best'") : html.index("class='ppy-bars ppy-bars-median'")]
    assert "data-label='torch.compile' data-value='14.00 µs' style='width:320px" in best
    assert "data-label='PyTorch eager' data-value='3.50 µs' style='width:80px" in best
    assert "Method:" in html and "The region takes 2.50 µs per call" in html


def test_html_takes_its_colours_from_the_theme(xwb):
    result, _ = run_fake(xwb)
    html = report.to_html(result)
    assert "var(--jp-success-color1" in report._BEST and "color-mix(" in report._BEST
    assert "var(--jp-content-font-color2)" in html  # the method note
    # A fixed colour only as the fallback inside var(), or just before the same property from the theme
    # (what a sanitizer that drops var() keeps).
    for prop, value, rest in re.findall(r"(background|color):([^;']+)([^']*)", html):
        if "var(" not in value and "color-mix(" not in value and value not in ("transparent", "inherit"):
            assert rest.startswith(f";{prop}:var(") or rest.startswith(f";{prop}:color-mix("), (prop, value, rest)


def test_html_toggles_best_and_median_with_radio_buttons_and_no_script(xwb):
    result, _ = run_fake(xwb)
    spread = dataclasses.replace(result[bench.COMPILE], per_call_s=(14e-6, 16e-6, 20e-6))
    result = dataclasses.replace(result, variants=result.variants[:2] + (spread,))
    html = report.to_html(result, uid="ppy-bench-t")
    assert "<script" not in html
    assert "id='ppy-bench-t'" in html and "name='ppy-bench-t' value='best' checked" in html
    assert "name='ppy-bench-t' value='median' style=" in html
    assert "#ppy-bench-t .ppy-pick-median:checked~.ppy-bars-median{display:table!important}" in html
    median = html[html.index("class='ppy-bars ppy-bars-median'") :]
    assert "data-label='torch.compile' data-value='16.00 µs' style='width:320px" in median
    assert "data-label='PPy ATen region' data-value='2.50 µs' style='width:50px" in median  # 2.5/16 of 320
    # Without the <style> (GitHub, an untrusted notebook) the toggle and the median bars stay hidden.
    assert "class='ppy-toggle' style='display:none" in html
    assert "class='ppy-bars ppy-bars-median' style='border-collapse:collapse;margin:0;display:none'" in html
    assert report.to_html(result) != report.to_html(result)  # a fresh id for each output: toggles stay apart


def test_display_bundle_is_html_and_text_that_survive_a_reopened_notebook(xwb):
    result, _ = run_fake(xwb)
    bundle = report.BenchReport(result)._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}  # no widget view: its model is gone after a restart
    assert bundle["text/plain"] == report.to_text(result)
    assert bundle["text/html"].startswith("<div class='ppy-bench' id='ppy-bench-")
    assert "PPy ATen region" in bundle["text/html"] and "Method:" in bundle["text/html"]


def test_rendering_is_a_leaf():
    """measure returns data; report and widget render it; only the magic puts a widget on a report."""
    import ast
    import pathlib

    import ppy_magic

    package = pathlib.Path(ppy_magic.__file__).parent

    def imports(path: pathlib.Path) -> set[str]:
        """Every module and name an import statement of `path` mentions, lazy imports included."""
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= {getattr(node, "module", None) or ""} | {a.name for a in node.names}
        return found

    measure, rendered = imports(package / "bench" / "measure.py"), imports(package / "bench" / "report.py")
    assert not any("widget" in name for name in measure | rendered), measure | rendered
    assert not any("jupyter" in name or "IPython" in name for name in measure), measure
    users = [p for p in package.rglob("*.py") if any("widget" in n for n in imports(p)) and p.name != "widget.py"]
    assert [p.relative_to(package).as_posix() for p in users] == ["jupyter/bench.py"]


def test_progress_is_a_widget_in_a_kernel_text_in_a_terminal_and_nothing_when_quiet(ip, capsys):
    from ppy_magic.bench import widget

    class KernelShell:
        kernel = object()

    with capture_output(display=True) as out:
        bar = widget.progress(KernelShell(), "%ppy_bench f", 5, compiling=False, quiet=False)
        assert isinstance(bar, widget.Progress)
        bar.update(2, 5, "round 3 of 5")
        assert bar.bar.value == 2 and bar.stage.value == "%ppy_bench f: round 3 of 5"
        assert bar.finish("%ppy_bench f: stopped")  # takes the bar's place
    shown, replaced = out.outputs  # the bar, then its replacement: an update of the same output
    assert replaced.update and replaced.transient["display_id"] == shown.transient["display_id"]
    assert replaced.data == {"text/plain": "%ppy_bench f: stopped"}
    parts = [bar.box, bar.bar, bar.stage, bar.box.layout, bar.bar.layout, bar.bar.style, bar.stage.style]
    assert all(w.comm is None for w in parts)  # closed: nothing of it left in the kernel or the saved notebook
    capsys.readouterr()
    text = widget.progress(object(), "%ppy_bench f", 5, compiling=True, quiet=False)
    assert "tens of seconds" in capsys.readouterr().out
    assert text.finish("anything") is False  # a terminal: the caller prints the result itself
    widget.progress(KernelShell(), "%ppy_bench f", 5, compiling=True, quiet=True)
    assert capsys.readouterr().out == ""


# -- the magic, on plain functions (no build) ---------------------------------------------------------


@pytest.fixture
def plain(ip):
    ip.run_cell(
        "import torch\n"
        "def plain_layer(x, w, b):\n"
        "    return torch.relu(x @ w + b)\n"
        "bx, bw, bb = torch.randn(8, 32), torch.randn(32, 32), torch.randn(32)\n"
    )
    return ip


QUICK = "-n 20 -r 2 --no-compile"


@pytest.mark.parametrize(
    "line, words",
    [
        ("-n 0 plain_layer bx bw bb", "--number"),
        ("-r -1 plain_layer bx bw bb", "--repeat"),
        ("--threads 0 plain_layer bx bw bb", "--threads"),
        ("--bogus plain_layer bx bw bb", "unrecognized arguments: --bogus"),
        ("-n ten plain_layer bx bw bb", "invalid int value"),
        ("", "FUNC"),
        ("plain_layr bx bw bb", "FUNC 'plain_layr'"),
        ("plain_layer bx bw undefined_b", "ARG 'undefined_b'"),
        ("plain_layer bx bw (bb +)", "ARG '(bb +)'"),
        ("bx bw", "FUNC 'bx' is a Tensor, not a function"),
        ("--grad plain_layer bx.long() bw.long() bb.long()", "--grad: no argument"),
    ],
)
def test_magic_bad_input_is_a_usage_error_naming_it(plain, line, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        plain.run_line_magic("ppy_bench", line)


def test_magic_wrong_arguments_show_eagers_error_once(plain):
    with pytest.raises(RuntimeError, match="cannot be multiplied") as info:
        plain.run_line_magic("ppy_bench", f"{QUICK} plain_layer bx bx bb")
    shown = "\n".join(info.value._render_traceback_())
    assert "return torch.relu(x @ w + b)" in shown and "bench.py" not in shown and "magic.py" not in shown
    assert shown.count("cannot be multiplied") == 1 and "nothing was timed" in shown
    with capture_output() as out:
        plain.run_cell(f"%ppy_bench {QUICK} plain_layer bx bw")
    assert out.stdout.count("missing 1 required positional argument: 'b'") == 1


def test_magic_options_reach_the_measurement(plain):
    # an elementwise op on 8x32: too small to use the second thread (a matmul would, slowly, on 2 busy cores)
    plain.run_cell(
        "threads_seen = set()\ndef add_one(x):\n    threads_seen.add(torch.get_num_threads())\n    return x + 1\n"
    )
    r = plain.run_line_magic("ppy_bench", "-o -q -n 7 -r 3 --threads 2 --no-compile add_one bx")
    assert isinstance(r, report.BenchReport)
    meta = r.metadata
    assert (meta["number"], meta["repeat"], meta["threads"], meta["grad"]) == (7, 3, 2, False)
    assert plain.user_ns["threads_seen"] == {2}
    assert len(r.result[bench.EAGER].per_call_s) == 3
    assert meta["skipped"]["torch.compile"] == "not measured (--no-compile)"
    assert torch.get_num_threads() == 1


def test_magic_evaluates_expressions_as_arguments(plain):
    r = plain.run_line_magic("ppy_bench", f"-o -q {QUICK} plain_layer bx[:2] torch.ones(32, 32) (bb * 2)")
    assert [a["shape"] for a in r.metadata["arguments"]] == [(2, 32), (32, 32), (32,)]
    assert [a["expression"] for a in r.metadata["arguments"]] == ["bx[:2]", "torch.ones(32, 32)", "(bb * 2)"]


def test_magic_without_o_displays_the_report_and_q_silences_the_header(plain):
    with capture_output(display=True) as out:
        assert plain.run_line_magic("ppy_bench", f"{QUICK} plain_layer bx bw bb") is None
    assert "%ppy_bench plain_layer: timing 2 rounds" in out.stdout
    (shown,) = out.outputs
    assert set(shown.data) == {"text/html", "text/plain"}
    assert "PyTorch eager" in shown.data["text/plain"]
    with capture_output(display=True) as out:
        plain.run_line_magic("ppy_bench", f"-q {QUICK} plain_layer bx bw bb")
    assert out.stdout == "" and len(out.outputs) == 1


def test_magic_in_a_kernel_puts_the_result_where_the_progress_bar_was(plain, monkeypatch):
    monkeypatch.setattr(plain, "kernel", object(), raising=False)  # what makes the bar a widget
    with capture_output(display=True) as out:
        plain.run_line_magic("ppy_bench", f"{QUICK} plain_layer bx bw bb")
    bar, result = out.outputs  # one output in the notebook: the bar, then the result in its place
    assert "application/vnd.jupyter.widget-view+json" in bar.data
    assert result.update and result.transient["display_id"] == bar.transient["display_id"]
    assert set(result.data) == {"text/html", "text/plain"} and "PyTorch eager" in result.data["text/plain"]
    with capture_output(display=True) as out:
        returned = plain.run_line_magic("ppy_bench", f"-o {QUICK} plain_layer bx bw bb")
    bar, line = out.outputs  # -o: a line saying what happened, never an empty output
    assert line.update and line.data["text/plain"].startswith("%ppy_bench plain_layer: timed in ")
    assert list(returned.df.index) == LABELS


def test_magic_help_documents_the_options(ip):
    doc = ip.find_line_magic("ppy_bench").__doc__
    for word in (
        "-n NUMBER",
        "-r REPEAT",
        "--threads",
        "--grad",
        "--no-compile",
        "-o",
        "-q",
        "FUNC",
        "ARG",
        "PPy ATen region",
        "PyTorch eager",
        "torch.compile",
        "first_call_s",
        "matches_eager",
    ):
        assert word in doc, word


# -- a real region (one build) and the real torch.compile ----------------------------------------------


@pytest.fixture(scope="module")
def region_ns(ip):
    with capture_output() as built:
        ip.run_cell(
            "%%ppy\n"
            "import torch, ppy\n"
            "@ppy.opt(3)\n"
            "def bench_layer(x, w, b):\n"
            "    return torch.relu(x @ w + b)\n"
            "@ppy.opt(3)\n"
            "def bench_scaled(x, s: float):\n"
            "    return torch.tanh(x * s)\n"
            "g = torch.Generator().manual_seed(0)\n"
            "rx, rw, rb = (torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g),\n"
            "              torch.randn(32, generator=g))\n"
            "class Sub(torch.Tensor):\n"
            "    pass\n"
            "sx = rx.as_subclass(Sub)\n"
        )
    assert getattr(ip.user_ns["bench_layer"], "__ppy_region__", False), built.stdout + built.stderr
    return ip


def test_real_region_matches_eager_bitwise_without_fallbacks(region_ns):
    r = region_ns.run_line_magic("ppy_bench", f"-o -q {QUICK} bench_layer rx rw rb")
    assert r.df.loc["PPy ATen region", "matches_eager"] is True
    assert r.result[bench.REGION].check == bench.BITWISE
    assert r.metadata["region_calls"] == 1 + 300 + 2 * 20 and r.metadata["region_fallbacks"] == 0
    r = region_ns.run_line_magic("ppy_bench", f"-o -q --grad {QUICK} bench_layer rx rw rb")
    assert r.df["matches_eager"].tolist()[:2] == [True, True] and r.metadata["grad"] is True


def test_real_region_fallbacks_are_counted_and_named(region_ns):
    # a tensor subclass: no variant takes it (a bool for `s` would get a variant of its own, built first)
    r = region_ns.run_line_magic("ppy_bench", f"-o -q {QUICK} bench_scaled sx 2.0")
    assert r.metadata["region_fallbacks"] == 1 + 300 + 2 * 20
    assert r.metadata["last_fallback_reason"] == "a tensor argument is a subclass of torch.Tensor"
    assert "ran its Python body on 341 of 341 calls" in report.to_text(r.result)


def test_a_variant_the_arguments_need_is_built_before_measuring(region_ns):
    """A bool for `s: float`: %ppy_bench builds its variant first (not in the background), then measures it."""
    r = region_ns.run_line_magic("ppy_bench", f"-o -q {QUICK} bench_scaled rx True")
    assert r.metadata["region_fallbacks"] == 0
    assert r.df.loc["PPy ATen region", "matches_eager"] is True


@pytest.mark.slow
def test_real_torch_compile_row(region_ns):
    try:
        r = region_ns.run_line_magic("ppy_bench", "-o -q -n 200 -r 2 bench_layer rx rw rb")
        # Other shapes, as a size sweep runs them: dynamo recompiles the same code, and its cached
        # entries must find their compiled functions in the globals they were compiled with.
        again = [
            region_ns.run_line_magic("ppy_bench", f"-o -q -n 50 -r 2 bench_layer (rx[:1].repeat({n}, 1)) rw rb")
            for n in (64, 256)
        ]
    finally:
        torch._dynamo.reset()  # else dynamo's weakref callbacks print a KeyError at interpreter exit
    row = r.df.loc["torch.compile"]
    assert row["matches_eager"] is True and row["first_call_s"] > 0 and row["best_ms"] > 0
    assert r.result[bench.COMPILE].check == "close (torch.testing.assert_close)"
    for other in again:
        assert not other.metadata["skipped"], other.metadata["skipped"]
        assert other.df.loc["torch.compile", "matches_eager"] is True


def test_the_eager_row_runs_no_region_even_through_callees(ip):
    from ppy_magic.bench import measure as bench

    ip.run_cell("""%%ppy
import torch, ppy

@ppy.opt(3)
def inner_for_bench(x):
    return x * 2

@ppy.opt(3)
def outer_for_bench(x):
    return inner_for_bench(x) + 1
""")
    outer, inner = ip.user_ns["outer_for_bench"], ip.user_ns["inner_for_bench"]
    assert outer.__ppy_region__ and inner.__ppy_region__
    eager = bench.pure_python(outer)
    before = inner.calls
    x = torch.randn(3)
    assert torch.equal(eager(x), outer.__wrapped__(x))
    assert inner.calls == before + 1  # only __wrapped__'s call went through the region
    assert eager.__name__ == "outer_for_bench" and eager.__code__ is outer.__wrapped__.__code__
    assert bench.pure_python(outer).__globals__ is eager.__globals__  # one copy: see _plain_scope
