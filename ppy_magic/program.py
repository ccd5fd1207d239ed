"""Running a program file as ``__main__`` with its regions bound: ``ppy run FILE`` and ``ppy build --run``."""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from . import backend, imports, pipeline, variants


def main_namespace(path: str, argv: list[str]) -> dict[str, Any]:
    """The namespace of `path` run as ``__main__`` with `argv` (``ppy run``, ``ppy build --run``): a fresh
    ``__main__`` module in ``sys.modules``, its directory first on ``sys.path``."""
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(path))
    main_module = type(sys)("__main__")
    main_module.__dict__.update(
        {
            "__name__": "__main__",
            "__file__": path,
            "__builtins__": builtins,
            "__doc__": None,
            "__package__": None,
            "__spec__": None,
        }
    )
    sys.modules["__main__"] = main_module
    return main_module.__dict__


def run_program(
    source: str,
    path: str,
    namespace: dict[str, Any],
    binder: pipeline.CellBinder,
    *,
    cache: backend.Cache,
    strict: bool = False,
    force: bool = False,
    quiet: bool = True,
) -> None:
    """Run a program compiled like one cell: the files it imports that use ``@ppy.opt`` compile too, each
    as its own cell, and the variants its calls need are built before the calls run them."""
    code = compile(source, path, "exec", dont_inherit=True)  # not this module's __future__ imports
    show = None if quiet else imports.to_stderr
    finder = imports.install(lambda: imports.Settings(cache=cache, strict=strict, force=force, show=show))
    try:
        with variants.blocking():  # a program waits for the variants its calls need, then runs them
            pipeline.run(code, namespace, binder)
    finally:
        imports.uninstall(finder)
