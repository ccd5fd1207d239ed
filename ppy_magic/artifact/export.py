"""``%ppy_export NAME``: an artifact from regions bound in the running kernel, importable as a module.

Its program is rebuilt from what the kernel still knows: each function's source
as it was compiled (from the cell's text in ``linecache``), preceded by the
statements that bind the globals those functions read, with the values the
regions froze at compile time. The directory is written by ``write``.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import sys
import types
from collections.abc import Callable
from typing import Any

from .. import backend, region
from ..backend import RegionSpec
from ..binding import same_value
from ..language.namespace import function_key
from . import load
from .manifest import EXPORTED, ArtifactError, importable_name, region_record
from .write import Written, check_output, check_stem, default_output, extension_path, write_artifact


def regions_in(namespace: dict[str, Any], names: list[str]) -> list[Any]:
    """The regions named (or, with no names, every region bound under its own name in `namespace`)."""
    if not names:
        found = [
            v
            for k, v in namespace.items()
            if getattr(v, "__ppy_region__", False) is True
            and getattr(v, "__name__", None) == k
            and hasattr(v, "__ppy_info__")
        ]
        if not found:
            raise ArtifactError(
                "there is no region in this kernel to export; run a %%ppy cell with @ppy.opt functions first"
            )
        return found
    out = []
    for name in names:
        if name not in namespace:
            raise ArtifactError(f"'{name}' is not defined in this kernel")
        fn = namespace[name]
        if getattr(fn, "__ppy_region__", False) is not True or not hasattr(fn, "__ppy_info__"):
            why = region.explain(fn).reason if callable(fn) else f"it is a {type(fn).__name__}"
            raise ArtifactError(f"'{name}' is not a region ({why}), so it cannot be exported")
        out.append(fn)
    return out


def check_module_name(name: str) -> None:
    """An artifact's module name is a Python identifier of its own (checked before anything else)."""
    if not name.isidentifier() or name in sys.stdlib_module_names:
        raise ArtifactError(
            f"'{name}' cannot be a module name of its own: use a Python identifier that "
            "is not a standard library module"
        )
    check_stem(name, "the module name")


def export_regions(name: str, functions: list[Any], out_dir: str | None = None, *, cache: backend.Cache) -> Written:
    """Write the artifact of regions bound in this process, importable as `name`.

    Its program holds each function's source as it was compiled, and the
    globals those functions read (modules, numbers, importable functions), with
    the values the regions froze at compile time.
    """
    check_module_name(name)
    out_dir = check_output(out_dir or default_output(name))
    header: dict[str, str] = {}  # global name -> the statement that binds it
    values: dict[str, Any] = {}
    chunks: list[tuple[Any, RegionSpec, list[str]]] = []
    runtime_types = {type(fn) for fn in functions}
    if len(runtime_types) != 1:
        raise ArtifactError("these regions were built by different runtimes; export them separately")
    for fn in functions:
        spec = fn.__ppy_info__.spec
        py = fn.__wrapped__
        node, lines = _function_source(py, spec)
        for gname in _free_names(node):
            frozen = gname in spec.frozen_globals
            g = py.__globals__
            if not frozen and (gname not in g):
                continue  # a builtin, or a name the function would not find either
            value = spec.frozen_globals[gname] if frozen else g[gname]
            if gname in values and not same_value(values[gname], value):
                raise ArtifactError(
                    f"the regions disagree on the global '{gname}' ({values[gname]!r} vs "
                    f"{value!r} in '{spec.name}'); export them separately"
                )
            values[gname] = value
            header[gname] = _binding(gname, value, spec.name)
        chunks.append((fn, spec, lines))
    program = [
        f"# Exported from a notebook by %ppy_export: {', '.join(s.name for _, s, _ in chunks)}.",
        f"# `import {name}` binds them as regions loaded from the extensions beside this file.",
        *sorted(header.values(), key=_statement_order),
    ]
    records, extensions = [], {}
    devices_of = {}
    for fn, spec, lines in chunks:
        program += ["", ""]
        first = len(program) + 1
        program += lines
        devices_of[spec.name] = fn.__ppy_info__.device_types
        records.append((spec, first, len(program), fn.__ppy_info__.module_name, fn.__ppy_info__.level))
        extensions[fn.__ppy_info__.module_name] = extension_path(cache, fn.__ppy_info__.module_name)
    program_lines = program + [""]
    regions = [
        region_record(spec, ext, program_lines, first, last, devices_of[spec.name], level)
        for spec, first, last, ext, level in records
    ]
    runtime = _runtime_of(next(iter(runtime_types)))
    written = write_artifact(
        out_dir,
        name,
        "\n".join(program_lines),
        EXPORTED,
        regions,
        extensions,
        (runtime.__name__, extension_path(cache, runtime)),
        {},
    )
    return dataclasses.replace(written, module_name=name)


def _function_source(py: Callable, spec: RegionSpec) -> tuple[ast.FunctionDef, list[str]]:
    code = py.__code__
    text = "".join(linecache.getlines(code.co_filename))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and function_key(node) == function_key(py):
                lines = text.splitlines()[code.co_firstlineno - 1 : node.end_lineno]
                return node, lines
    raise ArtifactError(
        f"the source of '{spec.name}' is no longer available (its cell's text is gone from "
        "this kernel); re-run its %%ppy cell and export again"
    )


def _statement_order(statement: str) -> tuple[int, str]:
    return (0 if statement.startswith("import ") else 1 if statement.startswith("from ") else 2, statement)


def _free_names(node: ast.FunctionDef) -> list[str]:
    """Global names `node` reads: in decorators, annotations and defaults, and in its body."""
    outer: list[ast.AST] = [
        *node.decorator_list,
        *node.args.defaults,
        *[d for d in node.args.kw_defaults if d is not None],
    ]
    args = [
        *node.args.posonlyargs,
        *node.args.args,
        *node.args.kwonlyargs,
        *[a for a in (node.args.vararg, node.args.kwarg) if a is not None],
    ]
    outer += [a.annotation for a in args if a.annotation is not None]
    if node.returns is not None:
        outer.append(node.returns)
    params = {a.arg for a in args}
    local = {
        n.id for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    names: list[str] = []
    for root, skip in [(o, set()) for o in outer] + [(s, params | local) for s in node.body]:
        for n in ast.walk(root):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in skip | set(names):
                names.append(n.id)
    return names


def _binding(gname: str, value: Any, function: str) -> str:
    """The statement that binds `gname` to `value` in the exported program."""
    if isinstance(value, types.ModuleType):
        mod = value.__name__
        return f"import {mod}" if mod == gname else f"import {mod} as {gname}"
    if type(value) in (int, bool):
        return f"{gname} = {value!r}"
    if type(value) is float:
        return (
            f"{gname} = {value!r}"
            if value == value and abs(value) != float("inf")
            else f"{gname} = float({str(value)!r})"
        )
    where = importable_name(value)
    if where is not None:
        mod, attr = where
        return f"from {mod} import {attr}" if attr == gname else f"from {mod} import {attr} as {gname}"
    raise ArtifactError(
        f"'{function}' reads the global '{gname}' (a {type(value).__name__}), which an "
        "exported module cannot recreate; make it a number or a module attribute, or pass it "
        "as an argument"
    )


def _runtime_of(region_type: type) -> types.ModuleType:
    candidates = [backend.loaded_runtime(), *load.IMPORTED.runtimes()]
    for mod in candidates:
        if mod is not None and getattr(mod, "RegionFunction", None) is region_type:
            return mod
    raise ArtifactError("the runtime these regions were built with is not known to this process")
