"""Shared test setup: one build cache per test session, a real IPython shell.

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


def python_wrapper(directory, name: str = "python") -> str:
    """`directory/name`: a script that runs this interpreter, for a PATH with no compiler on it.

    Not a symlink to ``sys.executable``: a virtualenv's python linked from another
    directory starts without the virtualenv (no torch, no ppy_magic).
    """
    import shlex
    import sys

    path = os.path.join(str(directory), name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    os.chmod(path, 0o755)
    return path


def compile_cell(source: str, namespace: dict | None = None, filename: str = "<ppy-test>", **kw):
    """Compile and run `source` like a %%ppy cell; return (namespace, report)."""
    import linecache

    from ppy_magic import backend, pipeline

    ns = {"__name__": "__ppy_test__"} if namespace is None else namespace
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    binder = pipeline.compile_source(source, ns, filename, cache=backend.shared_cache(), **kw)
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    return ns, binder.report


def compile_error(src: str, namespace: dict | None = None):
    """The CompileError the front end raises for the last function of `src` (which must not compile)."""
    import ast

    from ppy_magic.errors import CompileError
    from ppy_magic.language import frontend
    from ppy_magic.language.namespace import collect_globals

    tree = ast.parse(src)
    g = collect_globals(tree, namespace or {})
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef)][-1]
    with pytest.raises(CompileError) as info:
        frontend.compile_function(fn, g, "<src>", src.splitlines(), 3)
    return info.value


def assert_same(region_out, eager_out):
    """Bitwise equality with eager: values, dtype, shape, device, requires_grad, grad_fn presence."""
    if isinstance(eager_out, torch.Tensor):
        assert isinstance(region_out, torch.Tensor), type(region_out)
        assert region_out.dtype == eager_out.dtype
        assert region_out.shape == eager_out.shape
        assert region_out.device == eager_out.device
        assert region_out.requires_grad == eager_out.requires_grad
        assert (region_out.grad_fn is None) == (eager_out.grad_fn is None)
        assert torch.equal(region_out, eager_out) or (
            region_out.dtype.is_floating_point
            and torch.equal(region_out.isnan(), eager_out.isnan())
            and torch.equal(region_out.nan_to_num(), eager_out.nan_to_num())
        )
    elif isinstance(eager_out, (tuple, list)):
        assert type(region_out) is type(eager_out)
        assert len(region_out) == len(eager_out)
        for r, e in zip(region_out, eager_out):
            assert_same(r, e)
    else:
        assert type(region_out) is type(eager_out) and region_out == eager_out
