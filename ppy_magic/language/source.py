"""The source of code that has already run: a function's ``def`` and its class, read from its file.

``ppy_magic.compile`` and the callees a region compiles from other files start from
objects, not from a cell: a function's code object names its file and first line, and
the file (``linecache``, which also holds a notebook cell's lines) parsed once gives
the ``def`` with its real line numbers and the class around it.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import types
from typing import Any

_trees: dict[str, tuple[str, ast.Module, list[str]]] = {}  # filename -> (its text, its tree, its lines)
_index: dict[int, dict[tuple[str, int], tuple[ast.AST, ast.ClassDef | None]]] = {}  # id(tree) -> its defs


def file_tree(filename: str) -> tuple[ast.Module, list[str]] | None:
    """The parsed file and its lines, or None when its source is not available or does not parse."""
    lines = [ln.rstrip("\n") for ln in linecache.getlines(filename)]
    if not lines:
        return None
    text = "\n".join(lines)
    found = _trees.get(filename)
    if found is not None and found[0] == text:
        return found[1], found[2]
    try:
        tree = ast.parse(text, filename)
    except SyntaxError:
        return None
    if found is not None:
        _index.pop(id(found[1]), None)
    _trees[filename] = (text, tree, lines)
    return tree, lines


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def definition(fn: types.FunctionType) -> tuple[ast.FunctionDef, str, list[str]] | None:
    """The ``def`` of `fn` (decorators included), its file and the file's lines."""
    found = located(fn.__code__)
    if found is None:
        return None
    node, _owner, filename, lines = found
    return node, filename, lines


def located(code: types.CodeType) -> tuple[ast.FunctionDef, ast.ClassDef | None, str, list[str]] | None:
    """The ``def`` a code object was compiled from, the class whose body holds it (if one does), the file
    and its lines."""
    parsed = file_tree(code.co_filename)
    if parsed is None:
        return None
    tree, lines = parsed
    index = _index.get(id(tree))
    if index is None:
        index = _index[id(tree)] = {}
        for node, owner in _defs(tree, None):
            index.setdefault((node.name, _first_line(node)), (node, owner))
    found = index.get((code.co_name, code.co_firstlineno))
    if found is None or not isinstance(found[0], ast.FunctionDef):
        return None
    return found[0], found[1], code.co_filename, lines


def _defs(node: ast.AST, owner: ast.ClassDef | None):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield child, owner
            yield from _defs(child, None)
        elif isinstance(child, ast.ClassDef):
            yield from _defs(child, child)
        else:
            yield from _defs(child, owner)


def cell_value(c: types.CellType) -> Any:
    """What a closure cell holds (None for an empty one)."""
    try:
        return c.cell_contents
    except ValueError:  # an empty cell
        return None


def holds_wrapped(wrapper: types.FunctionType, inner: Any) -> bool:
    """`wrapper` holds `inner` (its ``__wrapped__``) in a closure cell: a decorator's wrapper calling it."""
    return inner is not None and any(cell_value(c) is inner for c in wrapper.__closure__ or ())


def innermost(f: Any) -> Any:
    """The function under a chain of decorators' wrappers (`f` itself when it is none)."""
    while isinstance(f, types.FunctionType) and holds_wrapped(f, getattr(f, "__wrapped__", None)):
        f = f.__wrapped__
    return f


def closure_values(fn: Any) -> dict[str, Any] | None:
    """The values of `fn`'s closure cells by name (a decorator's wrapper: the function it wraps, the
    decorator's arguments), for a function that is not a generator or coroutine and whose cells all hold a
    value; None otherwise. Compiled in like a library's globals: a region compiled through the wrapper is
    checked at each call to be for this very function object, whose cells a library does not rebind."""
    if not isinstance(fn, types.FunctionType) or fn.__code__.co_flags & (0x20 | 0x80 | 0x100 | 0x200):
        return None
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell: its name is bound later (or never)
            return None
    return out


def is_plain(fn: Any) -> bool:
    """A Python function whose body is all its behaviour: no closure cells beyond zero-argument
    ``super()``'s ``__class__`` (a cell's value could change after compiling), not a generator or coroutine."""
    if not isinstance(fn, types.FunctionType):
        return False
    code = fn.__code__
    if code.co_flags & (0x20 | 0x80 | 0x100 | 0x200):  # generator, coroutine, iterable coroutine, async generator
        return False
    return all(name == "__class__" for name in code.co_freevars)


def short_path(filename: str) -> str:
    """`torch/nn/modules/conv.py`: a file named from the import path entry it is under (else its base name)."""
    path = os.path.realpath(filename)
    bases = [os.path.realpath(b) for b in sys.path if b and os.path.isdir(b)]
    for base in sorted(bases, key=len, reverse=True):
        if path.startswith(base + os.sep):
            return os.path.relpath(path, base)
    return os.path.basename(filename)
