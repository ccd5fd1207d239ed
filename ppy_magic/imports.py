"""``import mymodel`` compiles the file's ``@ppy.opt`` functions, as one ``%%ppy`` cell would.

Installed by ``%load_ext ppy_magic`` (taken off by ``%unload_ext``) and by
``ppy run FILE`` for the file's own imports: a ``sys.meta_path`` finder, placed
just before the normal path finder, asks that finder for the module's spec and
swaps the loader of the user's own source files that use the decorator (a
cheap text test: a line importing ``ppy`` and a decorator line naming
``opt``) for a ``RegionLoader``. Files under site-packages or dist-packages,
the standard library, torch and this package are never touched, nor is any
file that fails the test: those import exactly as before (a plain
``SourceFileLoader``, bytecode cache and all).

A ``RegionLoader`` always compiles from the source text (never from
``__pycache__``, which would skip the compilation): ``pipeline.compile_source``
with the module's namespace, then ``pipeline.run``, so the file is one cell:
one build, cached in memory for the process and on disk across processes.
``importlib.reload`` finds the spec again and compiles the file anew. A
SyntaxError, or a CompileError or BuildError under strict, makes the import
fail as a broken file would (nothing of the module runs); a failed build
leaves the functions Python, and the summary says why. The summary
(``CellReport.summary``, each line naming the module) goes to ``Settings.show``:
stderr under ``ppy run``, the cell's output in a notebook.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import site
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import backend, decorator, pipeline
from .errors import CompileError

# Both must match at the start of a line: an import of `ppy` and a decorator whose last name is `opt`.
_IMPORTS_PPY = re.compile(rb"^[ \t]*(?:import[ \t]+[^\n#]*\bppy\b|from[ \t]+ppy[ \t]+import\b)", re.MULTILINE)
_DECORATES_OPT = re.compile(rb"^[ \t]*@[ \t]*(?:[\w]+[ \t]*\.[ \t]*)*opt\b", re.MULTILINE)
_LIBRARY_PARTS = ("site-packages", "dist-packages")


def to_stderr(summary: str) -> None:
    """Print a module's summary to stderr, as ``ppy run`` prints a file's (nothing when there is nothing to say)."""
    if summary:
        print(summary, file=sys.stderr)


@dataclass
class Settings:
    """How one imported file is compiled, read at each import (so ``%config PpyMagics`` applies to the next one)."""

    cache: backend.Cache
    default_level: int = decorator.DEFAULT_LEVEL  # of a bare @ppy.opt
    strict: bool = False  # a function that cannot be compiled fails the import
    force: bool = False  # rebuild even if cached
    on_build: Callable[[int], None] | None = None  # the build of N regions begins
    show: Callable[[str], None] | None = to_stderr  # the summary, "" when there is nothing to say; None: quiet


def mentions_opt(data: bytes) -> bool:
    """The cheap test: whether a file's text imports ``ppy`` and has a decorator line naming ``opt``."""
    return _DECORATES_OPT.search(data) is not None and _IMPORTS_PPY.search(data) is not None


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def _library_dirs() -> tuple[str, ...]:
    """Directories whose files are not the user's: the standard library, installed packages, torch, this package."""
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    found.update(getattr(site, "getsitepackages", list)())
    found.add(site.getusersitepackages())
    found.add(os.path.dirname(os.path.abspath(__file__)))  # ppy_magic itself (its docstrings say `import ppy`)
    torch = sys.modules.get("torch")
    if getattr(torch, "__file__", None):
        found.add(os.path.dirname(torch.__file__))
    return tuple(sorted({_real(d) for d in found if d}))


def is_users_file(path: str, library: tuple[str, ...] | None = None) -> bool:
    """Whether `path` is one of the user's own files: not installed (site-/dist-packages), not stdlib or torch."""
    real = _real(path)
    parts = real.split(os.sep)
    if any(part in _LIBRARY_PARTS for part in parts):
        return False
    return not any(real == d or real.startswith(d + os.sep) for d in library or _library_dirs())


class RegionLoader(importlib.machinery.SourceFileLoader):
    """Runs a module like a ``%%ppy`` cell: its ``@ppy.opt`` functions and methods become regions."""

    def __init__(self, fullname: str, path: str, settings: Callable[[], Settings]):
        super().__init__(fullname, path)
        self.settings = settings

    def exec_module(self, module: Any) -> None:
        name = module.__name__
        source = self.get_source(name)  # the file's text, decoded as Python decodes it; never the bytecode
        settings = self.settings()
        namespace = module.__dict__
        summary = ""
        try:
            try:
                binder = pipeline.compile_source(
                    source,
                    namespace,
                    self.path,
                    cache=settings.cache,
                    force=settings.force,
                    strict=settings.strict,
                    on_build=settings.on_build,
                    default_level=settings.default_level,
                )
            except CompileError as err:  # under strict: the import fails, naming the module
                raise err.with_function(f"{name}.{err.function}" if err.function else name) from None
            code = compile(source, self.path, "exec", dont_inherit=True)
            try:
                pipeline.run(code, namespace, binder)
            finally:
                summary = named(binder.report.summary(), name)
        finally:
            if settings.show is not None:
                settings.show(summary)


def named(summary: str, module: str) -> str:
    """`summary` with each of its lines (not the indented hints under them) naming the module."""
    return "\n".join(
        f"ppy: {module}: {line[5:]}" if line.startswith("ppy: ") and not line.startswith("ppy:  ") else line
        for line in summary.splitlines()
    )


class RegionFinder:
    """The ``sys.meta_path`` entry: the path finder's spec, with a ``RegionLoader`` for the user's decorated files."""

    def __init__(self, settings: Callable[[], Settings]):
        self.settings = settings
        self._library: tuple[str, ...] | None = None

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        top = fullname.partition(".")[0]
        if top in ("ppy", "ppy_magic", "torch"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not spec.origin:
            return None  # not a source file (an extension, a namespace package, a custom loader): not ours
        if self._library is None:
            self._library = _library_dirs()
        if not is_users_file(spec.origin, self._library):
            return None
        try:
            with open(spec.origin, "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        if not mentions_opt(data):
            return None
        spec.loader = RegionLoader(fullname, spec.origin, self.settings)
        return spec

    def invalidate_caches(self) -> None:
        self._library = None


def install(settings: Callable[[], Settings]) -> RegionFinder:
    """Put a finder just before the path finder in ``sys.meta_path``; ``uninstall`` takes it off."""
    finder = RegionFinder(settings)
    at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(sys.meta_path))
    sys.meta_path.insert(at, finder)
    return finder


def uninstall(finder: RegionFinder) -> None:
    """Take `finder` off ``sys.meta_path``; modules it loaded keep their regions."""
    while finder in sys.meta_path:
        sys.meta_path.remove(finder)
