"""Each tutorial notebook, opened in JupyterLab and run top to bottom from the Run menu.

The notebooks are copied without their outputs into the server's root, so
everything checked here was drawn in this run. The kernel has
PPY_NOTEBOOK_FAST=1, as in tests/test_notebooks.py. Screenshots of each whole
notebook go to the screenshot directory.
"""

from __future__ import annotations

import os
import shutil

import nbformat
import pytest

from .jlab import ROOT, NotebookPage, visible_bars

NOTEBOOKS = sorted(n for n in os.listdir(os.path.join(ROOT, "notebooks")) if n.endswith(".ipynb"))
BROKEN = ("Error displaying widget", "Javascript Error", "model not found", "<IPython.core.display")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_tutorial_runs_top_to_bottom_in_the_browser(name, notebook: NotebookPage, lab):
    nb = nbformat.read(os.path.join(ROOT, "notebooks", name), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, os.path.join(lab.root, name))

    page = notebook
    page.open(name)
    cells = page.run_all(timeout=900)
    counts = [c["count"] for c in cells if c["type"] == "code"]
    assert counts == list(range(1, len(counts) + 1)), f"not every cell ran, in order: {counts}"
    page.screenshot_notebook(name.removesuffix(".ipynb"))

    for index, outputs in enumerate(page.model_outputs()):
        errors = [o for o in outputs if o["output_type"] == "error"]
        tags = outputs[0]["tags"] if outputs else []
        if "raises-exception" in tags:
            assert errors, f"cell {index} is there to show an error and shows none"
        else:
            assert not errors, f"cell {index}: {errors[0]['ename']}: {errors[0]['evalue']}"
    text = page.page.inner_text(".jp-Notebook")
    assert not [b for b in BROKEN if b in text], [b for b in BROKEN if b in text]
    assert not page.empty_outputs(), f"empty outputs in cells {page.empty_outputs()}"
    page.assert_no_console_errors()


def test_stored_benchmarking_notebook_reads_well_as_opened(notebook: NotebookPage, lab):
    """As a reader first sees it: the stored notebook, not run, not trusted (JupyterLab sanitizes its HTML)."""
    name = "02_benchmarking.ipynb"
    shutil.copy(os.path.join(ROOT, "notebooks", name), os.path.join(lab.root, f"stored-{name}"))
    page = notebook
    page.open(f"stored-{name}")
    trusted = page.page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code')"
        ".map(c => c.model.trusted)"
    )
    assert trusted and not any(trusted)  # never run or signed here: its HTML is sanitized
    page.screenshot_notebook("stored-02")
    text = page.page.inner_text(".jp-Notebook")
    assert not [b for b in BROKEN if b in text], [b for b in BROKEN if b in text]
    benches = page.page.locator(".jp-Notebook .ppy-bench")
    assert benches.count() == 3
    for i in range(3):
        bench = benches.nth(i)
        labels = [
            tr.locator("td").first.inner_text().strip() for tr in bench.locator("table").first.locator("tbody tr").all()
        ]
        assert labels == ["PPy ATen region", "PyTorch eager", "torch.compile"], labels
        bars = visible_bars(bench)  # the best round's, painted
        assert len(bars) == 3 and max(width for _, width, _ in bars) > 100, bars
    charts = page.page.locator(".jp-Notebook .jp-OutputArea-output img")
    assert charts.count() == 2 and all(c.bounding_box()["height"] > 100 for c in charts.all())
    assert not page.empty_outputs()
    page.assert_no_console_errors()
