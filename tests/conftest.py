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
