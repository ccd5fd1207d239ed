"""One cell (or file) from source to bound regions: front end -> codegen -> build -> bind.

``compile_source`` does all the work that can happen before the code runs and
returns a ``CellBinder``; running the code with the binder active (``run``)
makes each ``@ppy.opt`` decorator return its region as its ``def`` executes.
The magic and the command line both go through here.
"""

from __future__ import annotations

import ast
import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import backend, breaks, decorator, region, variants
from .binding import Binder, StaysPython, Target, effective_level
from .errors import BuildError, CacheError, CompileError
from .language import frontend
from .language.function import ignored_extras
from .language.namespace import Key, collect_globals, function_key, opt_strict


@dataclass
class CellReport:
    compiled: list[str] = field(default_factory=list)
    python: list[tuple[str, str]] = field(default_factory=list)  # (function, reason)
    at_call: list[str] = field(default_factory=list)  # functions not compiled at the cell, tried again at calls
    build_source: str | None = None  # "memory", "disk", "artifact" or "build"
    build_seconds: float = 0.0
    module_name: str | None = None
    notes: list[str] = field(default_factory=list)
    cpp: str | None = None
    hints: dict[tuple[str, str], str] = field(default_factory=dict)  # (function, reason) -> what to do

    def stays_python(self, name: str, reason: str, hint: str | None = None) -> None:
        if (name, reason) in self.python:
            return
        self.python.append((name, reason))
        if hint:
            self.hints[(name, reason)] = hint

    def summary(self) -> str:
        lines = []
        if self.compiled:
            how = {
                "memory": "already built in this session",
                "disk": "loaded from the disk cache",
                "artifact": "loaded from the artifact",
                "build": "built",
            }.get(self.build_source or "", self.build_source or "")
            lines.append(
                f"ppy: {len(self.compiled)} region{'s' if len(self.compiled) != 1 else ''} "
                f"({', '.join(self.compiled)}) {how} in {self.build_seconds:.2f} s"
            )
        for name, reason in self.python:
            lines.append(f"ppy: '{name}' stays Python: {reason}")
            if (name, reason) in self.hints:
                lines.append(f"ppy:     {self.hints[(name, reason)]}")
            if name in self.at_call:
                lines.append(
                    "ppy:     (for now: its first call compiles it again, with the values it brings, and what "
                    "still cannot be a region runs as Python between regions)"
                )
        lines += [f"ppy: note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class CellBinder(Binder):
    """Hands each decorated function of the cell its region from the cell's build when its ``def`` runs."""

    regions: dict[Key, backend.RegionSpec]
    failures: dict[Key, CompileError]
    report: CellReport
    module: Any = None
    runtime: Any = None
    strict: bool = False
    cache: backend.Cache | None = None
    # How to compile each function again, for the values of a call no variant takes (``variants``).
    sources: dict[Key, variants.Source] = field(default_factory=dict)
    at_call: set[Key] = field(default_factory=set)  # not compiled at the cell: compiled at calls

    def find(self, key: Key, fn: Callable, level: int) -> Target | StaysPython:
        spec = self.regions.get(key)
        if spec is None and key in self.at_call and self.runtime is not None:
            return Target(None, None, self.runtime, level, ignored_extras(self.sources[key].node))
        if spec is None:
            err = self.failures.get(key)
            return StaysPython(err.reason if err else frontend.not_compiled_reason(fn), err.hint if err else None)
        return Target(spec, self.module, self.runtime, level)

    def tell(self, fn: Callable, reason: str, hint: str | None) -> None:
        self.report.stays_python(_shown_name(fn), reason, hint)

    def make(self, target: Target, fn: Callable) -> Any:
        reg = super().make(target, fn)
        source = self.sources.get(function_key(fn))
        if target.spec is None and source is not None and source.cell_error is not None:
            reg.__dict__["__ppy_reason__"] = source.cell_error.reason
        if source is not None and self.cache is not None:
            hook = variants.Variants(source, fn, self.cache, self.runtime)
            hook.around = breaks.Splitter(source, fn, self.cache, self.runtime)
            self.runtime.set_miss(reg, hook)
            if source.bind_in_python and source.cell_error is not None:  # a region cannot bind its arguments
                hook.around.bind_in_python(reg, source.cell_error)
        return reg


def _shown_name(fn: Callable) -> str:
    """`Cls.method` for a method of a top-level class, the function's name otherwise."""
    name = getattr(fn, "__name__", type(fn).__name__)
    qualname = getattr(fn, "__qualname__", name)
    return qualname if qualname.count(".") == 1 and "<" not in qualname else name


def compile_source(
    source: str,
    namespace: dict[str, Any],
    filename: str,
    *,
    cache: backend.Cache,
    force: bool = False,
    strict: bool = False,
    on_build: Callable[[int], None] | None = None,
    default_level: int = decorator.DEFAULT_LEVEL,
    level_override: int | None = None,
) -> CellBinder:
    """Compile every top-level ``@ppy.opt`` function of `source`; build them as one module.

    A function that cannot be compiled stays Python and the report says why
    (with ``strict``, the first such function raises its CompileError instead).
    A SyntaxError propagates: the source would not run either. ``default_level``
    is the level of a bare ``@ppy.opt``; ``level_override`` (``-O``) replaces
    every written level.
    """
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    g = collect_globals(tree, namespace)
    top, nested = frontend.decorated_functions(tree, g, default_level)
    owners = frontend.method_owners(tree)
    report = CellReport()
    functions, failures = [], {}
    sources: dict[Key, variants.Source] = {}
    at_call: set[Key] = set()
    for node, level in top:
        key = function_key(node)
        owner = owners.get(node)
        shown = f"{owner.name}.{node.name}" if owner else node.name
        try:
            if level_override is not None:
                level = level_override  # -O: the written level does not matter
            function = frontend.compile_decorated(node, g, filename, lines, level, owner)
            if function is None:
                continue  # level 0: never compiled, not a failure
            functions.append(function)
            sources[key] = variants.Source(node, g, filename, lines, level, owner)
        except CompileError as err:
            if strict or opt_strict(node, g):  # one region of the whole function, or the reason why not
                raise err.with_function(node.name) from None
            failures[key] = err
            signature_only = frontend.refused_for_its_signature_only(node, g, filename, lines, owner)
            if level > 0 and (signature_only or _may_compile_at_call(node, g, filename, lines, owner)):
                sources[key] = variants.Source(node, g, filename, lines, level, owner, err, signature_only)
                at_call.add(key)
                report.at_call.append(shown)
            if level >= 0:  # an invalid level is reported by the decorator's own error when it runs
                report.stays_python(shown, err.reason, err.hint)
    for node, level in nested:
        key = function_key(node)
        if level >= 0 and effective_level(level, default_level, level_override) == 0:
            continue  # never compiled: not a failure
        err = frontend.not_top_level(node, filename, lines)
        if strict:
            raise err
        failures[key] = err
        report.stays_python(node.name, err.reason, err.hint)

    binder = CellBinder(
        filename,
        {},
        failures,
        report,
        strict=strict,
        default_level=default_level,
        level_override=level_override,
        cache=cache,
        sources=sources,
        at_call=at_call,
    )
    if not functions:
        if at_call:  # only the runtime: every function here is compiled at its calls
            try:
                binder.runtime = backend.load_runtime(cache)
                binder.runtime.set_fallback_hook(region.FALLBACKS)
            except BuildError:
                report.at_call.clear()
                binder.at_call.clear()
        return binder
    code = backend.generate(functions)
    report.cpp = code.text
    name = backend.module_name("ppy_cell", code.text)
    t0 = time.perf_counter()
    try:
        announce = (lambda: on_build(len(functions))) if on_build else None
        if backend.build_jobs() > 1:  # the runtime and the cell (with its prelude) build side by side
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                runtime_future = pool.submit(backend.load_runtime, cache)
                cell = cache.load(name, code.text, force=force, on_build=announce)
                runtime = runtime_future.result()
        else:  # short of memory: one compiler at a time
            runtime = backend.load_runtime(cache)
            cell = cache.load(name, code.text, force=force, on_build=announce)
        runtime.set_fallback_hook(region.FALLBACKS)
    except BuildError as err:
        if strict:
            raise
        reason = str(err) if isinstance(err, CacheError) else f"the C++ build failed: {err}"
        for fn in functions:
            report.python.append((fn.qualname, reason))
            failures[(fn.name, fn.first_line)] = CompileError(reason)
        located = backend.located_errors(err.log, code.line_map)  # the compiler's errors, at Python lines
        report.notes += located or ([_first_lines(err.log)] if err.log else [])
        return binder
    finally:
        report.notes += cache.notes
        cache.notes.clear()
    report.build_source = cell.source
    report.build_seconds = time.perf_counter() - t0
    report.module_name = cell.name
    report.compiled = [fn.qualname for fn in functions]
    binder.module = cell.module
    binder.runtime = runtime
    binder.regions = {(s.name, s.first_line): s for s in code.regions}
    return binder


def _may_compile_at_call(node: Any, g: Any, filename: str, lines: list[str], owner: Any) -> bool:
    """Whether a function the cell could not compile may compile for a call's values: it passes the
    whole-function rules, so only its body's kinds and values stood in the way."""
    try:
        frontend.check_function(node, g, filename, lines, owner)
    except CompileError:
        return False
    return True


def _first_lines(text: str, n: int = 20) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[:n])


def run(code: Any, namespace: dict[str, Any], binder: CellBinder) -> None:
    """Execute compiled code with `binder` active."""
    token = decorator.activate(binder)
    try:
        exec(code, namespace)
    finally:
        decorator.deactivate(token)
