"""Each tutorial notebook, opened in JupyterLab and run top to bottom from the Run menu.

The notebooks are copied without their outputs into the server's root, so
everything checked here was drawn in this run. The kernel has
PPY_NOTEBOOK_FAST=1, as in tests/test_notebooks.py. Screenshots of each whole
notebook go to the screenshot directory.
"""

from __future__ import annotations

import os

import nbformat
import pytest
from jlab import ROOT, NotebookPage

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
