"""What global names mean when a function is compiled, and which functions are decorated.

Resolved before the cell runs: the namespace it runs in plus the top-level
statements of the source whose value is known beforehand (imports of known
modules, literal constants).
"""

from __future__ import annotations

import ast
import builtins
import copy
import types
from dataclasses import dataclass, field
from typing import Any

from ..decorator import DEFAULT_LEVEL, MAX_LEVEL

Key = tuple[str, int]  # a function's name and first line, decorators included: (co_name, co_firstlineno)


def function_key(fn: Any) -> Key:
    """How a decorated function is recognised when its ``def`` runs: its name and its first line,
    decorators included. The same for the ``ast`` node (before the source runs) and for the function
    object (its code's ``co_name``, ``co_firstlineno``); ``("", 0)`` for an object without code."""
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return fn.name, min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    code = getattr(fn, "__code__", None)
    return (code.co_name, code.co_firstlineno) if code is not None else ("", 0)


@dataclass
class Globals:
    """What global names mean at compile time.

    ``values`` comes from the namespace the cell or file runs in plus the
    top-level statements of the source itself whose value is known before they
    run (``import torch``, ``EPS = 1e-5``); a name bound any other way is
    ``unknown`` and cannot be frozen into a region.
    """

    values: dict[str, Any]
    unknown: set[str] = field(default_factory=set)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # decorated defs of the source
    plain_functions: set[str] = field(default_factory=set)  # undecorated defs of the source
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)  # top-level classes of the source
    cache: dict[str, Any] = field(default_factory=dict)  # what the front end derives once per source
    # Top-level packages whose functions and classes compile from their source without a decorator
    # (``ppy_magic.compile``: the library a model comes from). Empty for a cell: only @ppy.opt compiles.
    reach: frozenset[str] = frozenset()
    # A decorator's wrapper's closure cells over a module's globals (``closure_globals``): their values by name.
    cells: tuple[tuple[str, Any], ...] = ()

    def closure_key(self) -> tuple[int, ...]:
        """Tells apart one def compiled under two closures (the same wrapper around two functions)."""
        return tuple(id(v) for _, v in self.cells)

    def reaches(self, obj: Any) -> bool:
        """Whether `obj` (a function or a class) is code this compile takes from its source undecorated."""
        module = getattr(obj, "__module__", None)
        return bool(self.reach) and isinstance(module, str) and module.split(".")[0] in self.reach

    def lookup(self, name: str) -> tuple[bool, Any]:
        if name in self.unknown:
            return False, None
        if name in self.values:
            return True, self.values[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None


def is_opt_decorator(node: ast.expr, g: Globals) -> bool:
    from .. import decorator

    target = node.func if isinstance(node, ast.Call) else node
    return static_value(target, g) is decorator.opt


def static_value(node: ast.expr, g: Globals) -> Any:
    """The object a dotted name (``ppy.opt``, ``torch.nn.functional``) refers to, or None."""
    if isinstance(node, ast.Name):
        ok, value = g.lookup(node.id)
        return value if ok else None
    if isinstance(node, ast.Attribute):
        base = static_value(node.value, g)
        if isinstance(base, (types.ModuleType, type)):
            return getattr(base, node.attr, None)
    return None


def opt_level(fn: ast.FunctionDef | ast.AsyncFunctionDef, g: Globals, default: int = DEFAULT_LEVEL) -> int | None:
    """The level of a ``@ppy.opt(...)`` decorator on `fn`, or None if it has none.

    Levels that are not an int literal are checked when the decorator runs (-1 here).
    """
    for dec in fn.decorator_list:
        if not is_opt_decorator(dec, g):
            continue
        level_kw = [k.value for k in dec.keywords if k.arg == "level"] if isinstance(dec, ast.Call) else []
        if not isinstance(dec, ast.Call) or (not dec.args and not level_kw):
            return default  # bare @ppy.opt, @ppy.opt() or @ppy.opt(strict=True)
        arg = dec.args[0] if dec.args else level_kw[0]
        if isinstance(arg, ast.Constant) and type(arg.value) is int and 0 <= arg.value <= MAX_LEVEL:
            return arg.value
        return -1
    return None


def opt_strict(fn: ast.FunctionDef | ast.AsyncFunctionDef, g: Globals) -> bool:
    """Whether `fn`'s ``@ppy.opt(..., strict=True)`` asks for one region of the whole function (no breaks)."""
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and is_opt_decorator(dec, g):
            return any(
                k.arg == "strict" and isinstance(k.value, ast.Constant) and k.value.value is True for k in dec.keywords
            )
    return False


def collect_globals(tree: ast.Module, namespace: dict[str, Any]) -> Globals:
    """Global names as a function compiled from `tree` will see them.

    A name the source binds at top level exactly once, by an import of a known
    module or a literal int/float/bool/str assignment, has that value; a name it
    binds any other way (or twice) is unknown: its value is not known before the
    cell runs. Other names come from `namespace`.
    """
    bindings: dict[str, list[tuple[bool, Any]]] = {}
    functions: dict[str, ast.FunctionDef] = {}
    classes: dict[str, ast.ClassDef] = {}

    def bind(name: str, value: Any, known: bool) -> None:
        bindings.setdefault(name, []).append((known, value))

    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                mod = _import_known(alias.name if alias.asname else name)
                bind(name, mod, mod is not None)
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            mod = _import_known(stmt.module)
            for alias in stmt.names:
                if mod is not None and hasattr(mod, alias.name):
                    value = getattr(mod, alias.name)
                else:
                    value = _import_known(f"{stmt.module}.{alias.name}")
                bind(alias.asname or alias.name, value, value is not None)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                value = ast.literal_eval(stmt.value)
            except ValueError:
                value = None
            bind(stmt.targets[0].id, value, type(value) in (int, float, bool, str))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(stmt.name, None, False)
            if isinstance(stmt, ast.FunctionDef):
                functions.setdefault(stmt.name, stmt)
                if len(bindings[stmt.name]) > 1:
                    functions.pop(stmt.name, None)
            elif isinstance(stmt, ast.ClassDef):
                classes.setdefault(stmt.name, stmt)
        else:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bind(node.id, None, False)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bind(node.name, None, False)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        bind(alias.asname or alias.name.split(".")[0], None, False)
    values = dict(namespace)
    unknown: set[str] = set()
    for name, seen in bindings.items():
        if len(seen) == 1 and seen[0][0]:
            values[name] = seen[0][1]
        else:
            values.pop(name, None)
            unknown.add(name)
    g = Globals(values, unknown)
    g.functions = {n: f for n, f in functions.items() if opt_level(f, g) is not None}
    g.classes = {n: c for n, c in classes.items() if len(bindings[n]) == 1}  # a name bound once: this class
    g.plain_functions = {n for n in functions if n not in g.functions}
    return g


_library: dict[tuple[int, frozenset[str]], tuple[dict, Globals]] = {}


def library_globals(namespace: dict[str, Any], reach: frozenset[str]) -> Globals:
    """The globals of a module that has run (every name has its value), once per module and reach."""
    key = (id(namespace), reach)
    found = _library.get(key)
    if found is not None and found[0] is namespace:
        return found[1]
    g = collect_globals(ast.Module(body=[], type_ignores=[]), namespace)
    g.reach = reach
    _library[key] = (namespace, g)
    return g


def closure_globals(g: Globals, cells: dict[str, Any]) -> Globals:
    """`g` with a function's closure cells over it (``source.closure_values``): what its free names mean.
    One object per globals and cell values (a callee's helpers are keyed by it: the same wrapper's code
    around two functions is two functions)."""
    if not cells:
        return g
    key = (id(g), tuple((name, id(v)) for name, v in cells.items()))
    found = _closures.get(key)
    if found is not None and found[0] is g and all(a is b for a, b in zip(found[1], cells.values(), strict=True)):
        return found[2]
    out = copy.copy(g)
    out.values = {**g.values, **cells}
    out.unknown = g.unknown - cells.keys()
    out.cache = {}
    out.cells = tuple(cells.items())
    _closures[key] = (g, tuple(cells.values()), out)  # holds the values: their ids stay theirs
    return out


_closures: dict[tuple, tuple[Globals, tuple, Globals]] = {}


_IMPORTABLE_ROOTS = {"torch", "math", "ppy", "ppy_magic", "operator"}


def _import_known(name: str) -> types.ModuleType | None:
    """Import a module a function may refer to, if that is safe to do at compile time."""
    import importlib
    import sys

    if name in sys.modules:
        return sys.modules[name]
    if name.split(".")[0] not in _IMPORTABLE_ROOTS:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
