"""One cell (or file) from source to bound regions: front end -> codegen -> build -> bind.

``compile_source`` does all the work that can happen before the code runs and
returns a ``CellBinder``; running the code with the binder active (``run``)
makes each ``@ppy.opt`` decorator return its region as its ``def`` executes.
The magic and the command line both go through here.
"""

from __future__ import annotations

import ast
import concurrent.futures
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import backend, decorator, region
from .binding import Binder, StaysPython, Target, effective_level
from .errors import BuildError, CacheError, CompileError
from .language import frontend, ir, param_kinds
from .language.namespace import Globals, Key, collect_globals, function_key


@dataclass
class CellReport:
    compiled: list[str] = field(default_factory=list)
    python: list[tuple[str, str]] = field(default_factory=list)  # (function, reason)
    build_source: str | None = None  # "memory", "disk" or "build"
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
    # How to compile a function again (node, globals, lines, level): for unannotated parameters, whose
    # kinds the first call the region was not built for may give (respecialise).
    sources: dict[Key, tuple[Any, Globals, list[str], int]] = field(default_factory=dict)

    def find(self, key: Key, fn: Callable, level: int) -> Target | StaysPython:
        spec = self.regions.get(key)
        if spec is None:
            err = self.failures.get(key)
            return StaysPython(err.reason if err else frontend.not_compiled_reason(fn), err.hint if err else None)
        return Target(spec, self.module, self.runtime, level)

    def tell(self, fn: Callable, reason: str, hint: str | None) -> None:
        self.report.stays_python(_shown_name(fn), reason, hint)

    def make(self, target: Target, fn: Callable) -> Any:
        reg = super().make(target, fn)
        key = function_key(fn)
        if target.spec.untyped and key in self.sources and self.cache is not None:
            self.runtime.set_first_call(reg, functools.partial(respecialise, self, reg, target.spec, key, fn))
        return reg


def _shown_name(fn: Callable) -> str:
    """`Cls.method` for a method of a top-level class, the function's name otherwise."""
    name = getattr(fn, "__name__", type(fn).__name__)
    qualname = getattr(fn, "__qualname__", name)
    return qualname if qualname.count(".") == 1 and "<" not in qualname else name


def respecialise(binder: CellBinder, reg: Any, spec: backend.RegionSpec, key: Key, fn: Callable, bound: tuple) -> None:
    """A region's first call, when the region was not built for it: if its unannotated parameters hold
    other kinds than tensors (a float, a dtype, ...), compile the function for those kinds and retarget
    the region to it, so that later calls like this one run compiled (this one runs the Python body)."""
    overrides: dict[str, Any] = {}
    for i in spec.untyped:
        kind = param_kinds.argument_kind(bound[i])
        if kind is None:
            return
        overrides[spec.param_names[i]] = kind
    if all(k == ir.Kind.TENSOR for k in overrides.values()):
        return  # the region's own kinds: the guard failed for another reason
    assert binder.cache is not None
    node, g, lines, level = binder.sources[key]
    try:
        function = frontend.compile_function(node, g, binder.filename, lines, level, overrides=overrides)
        code = backend.generate([function])
        cell = binder.cache.load(backend.module_name("ppy_cell", code.text), code.text)
    except (CompileError, BuildError) as err:
        reg.__dict__["__ppy_first_call__"] = f"not compiled for the first call's kinds: {err}"
        return
    new = region.make_region(binder.runtime, cell.module, code.regions[0], fn, level)
    binder.runtime.retarget(reg, new)
    reg.__ppy_info__ = new.__ppy_info__
    reg.__dict__["__ppy_first_call__"] = f"compiled for the first call's kinds ({', '.join(overrides)})"


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
    sources: dict[Key, tuple[Any, Globals, list[str], int]] = {}
    for node, level in top:
        key = function_key(node)
        try:
            if level_override is not None:
                level = level_override  # -O: the written level does not matter
            function = frontend.compile_decorated(node, g, filename, lines, level, owners.get(node))
            if function is None:
                continue  # level 0: never compiled, not a failure
            functions.append(function)
            if function.untyped and function.owner is None:  # a method's parameters stay as annotated
                sources[key] = (node, g, lines, level)
        except CompileError as err:
            if strict:
                raise err.with_function(node.name) from None
            failures[key] = err
            if level >= 0:  # an invalid level is reported by the decorator's own error when it runs
                owner = owners.get(node)
                report.stays_python(f"{owner.name}.{node.name}" if owner else node.name, err.reason, err.hint)
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
    )
    if not functions:
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
