"""Compiling a source like a ``%%ppy`` cell, the front end's error for a source, and "same as eager" as an assert."""

from __future__ import annotations

import ast
import linecache
from typing import Any

from ppy_magic.bench.compare import same_as_eager


def compile_cell(source: str, namespace: dict | None = None, filename: str = "<ppy-test>", **kw):
    """Compile and run `source` like a %%ppy cell; return (namespace, report)."""
    from ppy_magic import backend, pipeline

    ns = {"__name__": "__ppy_test__"} if namespace is None else namespace
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    binder = pipeline.compile_source(source, ns, filename, cache=backend.shared_cache(), **kw)
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    return ns, binder.report


def headers_gcc_reads(module_name: str) -> list[str]:
    """The headers gcc reads compiling a built module's C++ again, with the flags ninja used for it,
    one per line of ``-H``: a line ``! FILE`` says it used the precompiled header FILE."""
    import os
    import shlex
    import subprocess

    from ppy_magic import backend

    bdir = backend.shared_cache().build_dir(module_name)
    with open(os.path.join(bdir, "build.ninja"), encoding="utf-8") as fh:
        ninja = dict(line.split(" = ", 1) for line in fh.read().splitlines() if " = " in line)
    assert "-Werror=invalid-pch" in ninja["cflags"]  # a rejected PCH fails loudly, never silently slow
    command = shlex.split(ninja["cxx"]) + shlex.split(ninja["cflags"]) + ["-H", "-fsyntax-only", "main.cpp"]
    done = subprocess.run(command, cwd=bdir, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr.splitlines()


def compile_error(src: str, namespace: dict | None = None):
    """The CompileError the front end raises for the last function of `src` (which must not compile)."""
    import pytest

    from ppy_magic.errors import CompileError
    from ppy_magic.language import frontend
    from ppy_magic.language.namespace import collect_globals

    tree = ast.parse(src)
    g = collect_globals(tree, namespace or {})
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef)][-1]
    with pytest.raises(CompileError) as info:
        frontend.compile_function(fn, g, "<src>", src.splitlines(), 3)
    return info.value


def is_region(f: Any) -> bool:
    return getattr(f, "__ppy_region__", False) is True


def assert_same(got: Any, want: Any) -> None:
    """`got` is the same as eager's `want`, bit for bit (``ppy_magic.bench.compare.same_as_eager``)."""
    difference = same_as_eager(got, want)
    assert difference is None, difference
