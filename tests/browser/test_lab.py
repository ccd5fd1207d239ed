"""ppy_magic in JupyterLab 4, in Chromium, as a user sees it.

A new notebook with a ``%%ppy`` cell and ``%ppy_bench``; the dark theme;
saving, restarting and reopening; errors; ``%%ppy -a``. Each test drives the
page with menus, keys and clicks, then checks what is drawn (the DOM,
computed styles) and leaves screenshots (see conftest.py). The first
``%%ppy`` cell of a run builds the region runtime when the build cache is
cold (about a minute on two cores).
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys

import pytest

from .jlab import NotebookPage, bench_rows, visible_bars, write_notebook

LABELS = ("PPy ATen region", "PyTorch eager", "torch.compile")

SETUP = """\
%%ppy
import torch
import ppy

@ppy.opt(3)
def layer(x, w, b):
    return torch.relu(x @ w + b)

@ppy.opt(3)
def residual(x, y):
    return torch.tanh(x + {scale} * y)

g = torch.Generator().manual_seed(0)
x, w, b = torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g), torch.randn(32, generator=g)
"""


def unique_setup() -> str:
    """The setup cell with a constant of its own, so it builds (and shows its live status) on every run."""
    return SETUP.format(scale=f"0.{secrets.randbelow(10**8):08d}")


def micro(text: str) -> float:
    """'2.46 µs' or '0.012 ms' -> µs."""
    number, unit = text.split()
    return float(number) * (1000.0 if unit == "ms" else 1.0)


# -- a new notebook ---------------------------------------------------------------------------------


def test_ppy_cell_and_bench_in_a_new_notebook(notebook: NotebookPage):
    nb = notebook
    nb.new_notebook()
    nb.type_cell(0, "%load_ext ppy_magic")
    nb.run_cell(0)
    nb.type_cell(1, unique_setup())
    # Watch the %%ppy cell's outputs while it builds: one output, its text replaced in place.
    nb.cell(1).evaluate(
        """(cell) => {
            window.__ppySeen = [];
            const area = cell.querySelector('.jp-OutputArea');
            const record = () => window.__ppySeen.push(
                Array.from(area.querySelectorAll('.jp-OutputArea-child')).map(c => c.innerText.trim()));
            new MutationObserver(record).observe(area, {subtree: true, childList: true, characterData: true});
        }"""
    )
    nb.run_cell(1)
    seen = [s for s in nb.page.evaluate("() => window.__ppySeen") if s]
    assert seen, "the %%ppy cell showed nothing"
    assert all(len(s) == 1 for s in seen), f"the build status took more than one output: {seen}"
    assert any(s[0].startswith("ppy: building 2 regions ...") for s in seen), seen
    assert re.match(r"ppy: 2 regions \(layer, residual\) built in [0-9.]+ s", seen[-1][0]), seen[-1]
    nb.screenshot("new-notebook-1-ppy-cell")

    nb.type_cell(2, "%ppy_bench -n 2000 -r 3 layer x w b")
    nb.run_cell(2, timeout=300)
    outputs = nb.outputs(2)
    assert outputs.count() == 1, f"%ppy_bench left {outputs.count()} outputs: {nb.output_texts(2)}"
    bench = outputs.locator(".ppy-bench")
    assert bench.count() == 1, nb.output_texts(2)
    rows = bench_rows(bench)
    assert list(rows) == list(LABELS), rows
    assert rows["PPy ATen region"][-1] == "yes, bitwise"
    assert rows["torch.compile"][-1] == "yes, assert_close"
    assert not low_contrast(nb, bench), low_contrast(nb, bench)  # the light theme too
    nb.screenshot("new-notebook-2-bench", bench)

    # The bars: one per variant, the longest for the slowest best time, labelled with that time.
    best = {label: float(cells[0]) * 1000 for label, cells in rows.items()}  # table: ms/call -> µs
    median = {label: float(cells[1]) * 1000 for label, cells in rows.items()}
    for statistic, expected in (("best round", best), ("median", median), ("best round", best)):
        bench.locator("label").filter(has_text=re.compile(f"^{statistic}$")).click()  # the toggle's buttons
        bars = visible_bars(bench)
        assert [b[0] for b in bars] == list(LABELS), bars
        widest = max(width for _, width, _ in bars)
        slowest = max(expected.values())
        for label, width, value in bars:
            # The table has ms to four places (0.1 µs), the bar's label µs to two.
            assert micro(value) == pytest.approx(expected[label], abs=0.051), (statistic, label, value)
            assert width / widest == pytest.approx(expected[label] / slowest, abs=0.02), (statistic, bars)
        if statistic == "median":
            nb.screenshot("new-notebook-3-median", bench)
    errors = [o for cell in nb.model_outputs() for o in cell if o["output_type"] == "error"]
    assert not errors, errors
    nb.assert_no_console_errors()


# -- saved, restarted, reopened ---------------------------------------------------------------------

FIXED_SETUP = SETUP.format(scale="0.5")


def test_saved_notebook_reopens_with_its_table(notebook: NotebookPage, lab, tmp_path):
    nb = notebook
    write_notebook(
        os.path.join(lab.root, "reopen.ipynb"),
        ["%load_ext ppy_magic", FIXED_SETUP, "%ppy_bench -n 1000 -r 3 --no-compile layer x w b"],
    )
    nb.open("reopen.ipynb")
    nb.run_all(timeout=600)
    assert nb.outputs(2).locator(".ppy-bench").count() == 1, nb.output_texts(2)
    nb.save()
    lab.shutdown_kernels()  # Kernel > Shut Down; the next page load starts a fresh kernel and runs nothing
    nb.open("reopen.ipynb")
    assert [c["count"] for c in nb.cells()] == [1, 2, 3]  # as saved: nothing ran again
    nb.screenshot("reopened")
    assert "Error displaying widget" not in nb.page.inner_text(".jp-Notebook")
    assert nb.page.locator(".jp-Notebook .jupyter-widgets-disconnected").count() == 0
    bench = nb.outputs(2).locator(".ppy-bench")
    assert bench.count() == 1 and bench.is_visible(), nb.output_texts(2)
    assert list(bench_rows(bench)) == list(LABELS)
    assert [b[0] for b in visible_bars(bench)] == list(LABELS[:2])  # torch.compile did not run
    assert nb.outputs(2).count() == 1, f"an empty output was saved beside the table: {nb.output_texts(2)}"
    nb.assert_no_console_errors()

    # A static render of the saved file (what GitHub or a CI artifact shows) has the table too.
    subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "--output-dir", str(tmp_path), nb.path("reopen.ipynb")],
        check=True,
        capture_output=True,
    )
    nb.page.goto(f"file://{tmp_path / 'reopen.html'}")
    static = nb.page.locator(".ppy-bench")
    assert static.count() == 1 and static.is_visible()
    assert list(bench_rows(static)) == list(LABELS)
    assert "model not found" not in nb.page.inner_text("body")
    nb.screenshot("reopened-nbconvert", static)


# -- the dark theme ---------------------------------------------------------------------------------


def test_dark_theme_keeps_every_text_readable(notebook: NotebookPage, lab):
    nb = notebook
    write_notebook(
        os.path.join(lab.root, "dark.ipynb"),
        [
            "%load_ext ppy_magic",
            FIXED_SETUP,
            "%ppy_bench -n 1000 -r 3 --no-compile layer x w b",
            ANNOTATED,
        ],
    )
    lab.set_setting("@jupyterlab/apputils-extension:themes", {"theme": "JupyterLab Dark"})
    try:
        nb.open("dark.ipynb")
        assert nb.page.evaluate("() => document.body.dataset.jpThemeLight") == "false"
        nb.run_all(timeout=600)
        bench = nb.outputs(2).locator(".ppy-bench")
        nb.screenshot("dark-bench", bench)
        best = bench.locator("tr.ppy-best td").first
        assert best.inner_text().strip() in LABELS
        assert nb.contrast(best) >= 4.5
        low = low_contrast(nb, bench) + low_contrast(nb, nb.outputs(3).locator(".ppy-annotate"))
        assert not low, f"text under 4.5:1 in the dark theme: {low}"
        nb.screenshot("dark-annotate", nb.outputs(3).locator(".ppy-annotate"))
    finally:
        lab.set_setting("@jupyterlab/apputils-extension:themes", {"theme": "JupyterLab Light"})


def low_contrast(nb: NotebookPage, root) -> list[tuple[str, float]]:
    """Every element under `root` that draws text of its own, with a contrast under WCAG AA's 4.5:1."""
    assert root.count() == 1
    found = []
    for el in root.locator("*").all():
        own_text = el.evaluate(
            """(e) => e.offsetParent === null ? '' : Array.from(e.childNodes)
                .filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim()"""
        )
        if own_text:
            ratio = nb.contrast(el)
            if ratio < 4.5:
                found.append((own_text[:40], round(ratio, 2)))
    return found


# -- errors -----------------------------------------------------------------------------------------


def test_errors_are_short_and_name_the_right_cell(notebook: NotebookPage, lab):
    nb = notebook
    write_notebook(
        os.path.join(lab.root, "errors.ipynb"),
        [
            "%load_ext ppy_magic",
            FIXED_SETUP,
            ("%%ppy\n@ppy.opt(3)\ndef broken(x):\n    return torch.relu(x +)\n", ["raises-exception"]),
            (
                "%%ppy\n@ppy.opt(3)\ndef mismatch(x, w):\n    return x @ w\n\nmismatch(x, torch.randn(5, 5))",
                ["raises-exception"],
            ),
            ("layer(x, torch.randn(3, 3), b)", ["raises-exception"]),
        ],
    )
    nb.open("errors.ipynb")
    cells = nb.run_all(timeout=600)
    assert [c["count"] for c in cells] == [1, 2, 3, 4, 5]
    outputs = nb.model_outputs()

    syntax = nb.output_texts(2)
    nb.screenshot("error-syntax", nb.cell(2))
    assert len(syntax) == 1, f"a SyntaxError should show once, alone: {syntax}"
    assert syntax[0].strip().startswith("Cell In[3], line 4"), syntax[0]  # as IPython shows one in a plain cell
    assert syntax[0].rstrip().endswith("SyntaxError: invalid syntax"), syntax[0]
    assert "Traceback" not in syntax[0] and "ppy_magic" not in syntax[0], syntax[0]

    for index, where in ((3, "mismatch"), (4, "layer")):
        nb.screenshot(f"error-in-region-{where}", nb.cell(index))
        (error,) = [o for o in outputs[index] if o["output_type"] == "error"]
        shown = nb.outputs(index).last.inner_text()
        assert error["ename"] == "RuntimeError" and "cannot be multiplied" in error["evalue"]
        assert f"Cell In[{index + 1}]" in shown, f"cell [{index + 1}] shows:\n{shown}"
        assert re.findall(r"Cell In\[(\d+)\]", shown) == [str(index + 1)], shown
        if where == "mismatch" or ipython_shows_notes():  # a %%ppy cell shows the note on any IPython
            assert f"ppy region '{where}'" in shown, shown
        assert "ppy_magic" not in shown.replace("ppy_magic.explain", ""), shown  # no frames of the package
        assert len(shown.splitlines()) <= 20, shown
    nb.assert_no_console_errors()


def ipython_shows_notes() -> bool:
    """Whether this IPython prints an exception's notes (PEP 678) under its traceback (newer ones do).

    Asked of IPython's traceback formatter alone: an InteractiveShell made here would be the process's
    shell, and the other test files' shell could not start after it.
    """
    from IPython.core import ultratb

    err = RuntimeError("boom")
    err.add_note("the note")
    try:
        raise err
    except RuntimeError as raised:
        shown = ultratb.AutoFormattedTB().structured_traceback(RuntimeError, raised, raised.__traceback__)
    return "the note" in "\n".join(shown)


# -- %%ppy -a ---------------------------------------------------------------------------------------

ANNOTATED = """\
%%ppy -a
import numpy as np

@ppy.opt(3)
def scaled(x, w):
    h = x @ w
    return torch.relu(h) * 0.5

@ppy.opt(3)
def to_numpy(x):
    return np.asarray(x)
"""


def test_annotate_shows_each_line_compiled_or_python(notebook: NotebookPage, lab):
    nb = notebook
    write_notebook(
        os.path.join(lab.root, "annotate.ipynb"),
        [
            "%load_ext ppy_magic",
            FIXED_SETUP,
            ANNOTATED,
            "scaled(x, w).shape",
            "import ppy_magic\n\nppy_magic.annotate(scaled)",
        ],
    )
    nb.open("annotate.ipynb")
    nb.run_all(timeout=600)
    view = nb.outputs(2).locator(".ppy-annotate")
    assert view.count() == 1, nb.output_texts(2)
    nb.screenshot("annotate-closed", view)
    lines = view.locator(".ppy-line")
    by_text = {ln.locator(".ppy-source").inner_text().strip(): ln for ln in lines.all()}
    compiled = by_text["h = x @ w"]
    assert "ppy-compiled" in compiled.get_attribute("class")
    calls = compiled.locator(".ppy-calls")
    assert not calls.is_visible()
    compiled.locator(".ppy-source").click()  # expands to the at:: calls the line became
    assert calls.is_visible() and re.search(r"at::\w*::matmul\b", calls.inner_text()), calls.inner_text()
    relu = by_text["return torch.relu(h) * 0.5"].locator(".ppy-calls").text_content()
    assert re.search(r"at::\w*::relu\b", relu) and re.search(r"at::\w*::mul", relu), relu
    python = by_text["return np.asarray(x)"]
    assert "ppy-python" in python.get_attribute("class")
    assert "np" in view.inner_text() and "stays Python" in view.inner_text()
    nb.screenshot("annotate-open", view)
    # ppy_magic.annotate(f) after a call: the same view, with the region's guard fallbacks so far.
    later = nb.outputs(4).locator(".ppy-annotate")
    assert later.count() == 1 and "fallbacks" in later.inner_text()
    nb.assert_no_console_errors()
