"""Shared test setup: one build cache per test session, a real IPython shell.

The helpers the tests share (compiling a cell, comparing with eager, the differential
suites' machinery) live in ``tests/support/``.

C++ builds are the slow part of the suite, so every test shares one cache
directory (also inherited by subprocesses) and tests put many functions in one
cell. Tests that must build from a cold cache use their own directory.
"""

from __future__ import annotations

import os
import tempfile

# Before anything imports ppy_magic: the session's cache, inherited by subprocesses.
if not os.environ.get("PPY_TEST_KEEP_CACHE"):
    os.environ["PPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="ppy-test-cache-")

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def cache_dir() -> str:
    return os.environ["PPY_CACHE_DIR"]


@pytest.fixture(scope="session")
def ip():
    """A real InteractiveShell with the extension loaded."""
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "ppy_magic")
    return shell


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist (``--dist loadgroup``): each file's tests run on one worker, where its cells build
    once in that worker's cache; a file that names a parameter in ``XDIST_SPREAD`` (a model) runs each
    value's tests on one worker instead, so that one long file is not one worker's whole run."""
    for item in items:
        group = item.nodeid.split("::")[0]
        spread = getattr(getattr(item, "module", None), "XDIST_SPREAD", None)
        callspec = getattr(item, "callspec", None)
        if spread and callspec is not None and spread in callspec.params:
            value = callspec.params[spread]
            group += f"[{getattr(value, 'name', value)}]"
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_sessionfinish(session, exitstatus) -> None:
    """With PPY_TORCH_SOURCE_REPORT=FILE, each process appends how its regions took torch's functions:
    from torch's source, or by the adapter and why (torchlib/torch_source.py). Read across a whole
    run it says which restatements no test needed."""
    path = os.environ.get("PPY_TORCH_SOURCE_REPORT")
    if not path:
        return
    import json

    from ppy_magic.torchlib import torch_source

    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"compiled": sorted(torch_source.compiled), "fallbacks": torch_source.fallbacks}) + "\n")
