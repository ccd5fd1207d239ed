"""Values a statement reads that no region takes, read in Python just before it ("hoists").

``y = self.proj(cache["h"]) + h`` cannot be a region while ``cache`` is a dict; with ``cache["h"]``
read into a name first, the rest of the statement can. ``hoistable`` finds the expression to read
(the largest read-only one around where a compile error points), ``replace`` rewrites the
statement to read the name instead. Reading it a little earlier than written is exact: it only
reads (names, subscripts, ``len``, a mapping's ``get``), the compiled parts before it write no Python
name or container, and where it raises, the driver runs the statement as written
(``splitting._Splitter.hoist``).
"""

from __future__ import annotations

import ast
import copy

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

_PURE_CALLS = frozenset({"len", "isinstance"})
_PURE_METHODS = frozenset({"get", "keys", "values", "items"})


def _pure(n: ast.AST) -> bool:
    """An expression that only reads: names, constants, subscripts, `len`/`isinstance`, a mapping's
    `get`/`keys`/`values`/`items`. Read a little earlier than written, it reads the same (a region writes no
    Python name or container); if it raises, the statement runs as written."""
    if isinstance(n, ast.Name):
        return isinstance(n.ctx, ast.Load)
    if isinstance(n, ast.Constant):
        return True
    if isinstance(n, ast.Subscript):
        return isinstance(n.ctx, ast.Load) and _pure(n.value) and _pure(n.slice)
    if isinstance(n, ast.Slice):
        return all(_pure(p) for p in (n.lower, n.upper, n.step) if p is not None)
    if isinstance(n, ast.Tuple):
        return isinstance(n.ctx, ast.Load) and all(_pure(e) for e in n.elts)
    if isinstance(n, ast.Call) and not n.keywords and all(_pure(a) for a in n.args):
        f = n.func
        if isinstance(f, ast.Name):
            return f.id in _PURE_CALLS
        return isinstance(f, ast.Attribute) and f.attr in _PURE_METHODS and isinstance(f.value, ast.Name)
    return False


_DEFERRED = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom) + COMPREHENSIONS


def hoistable(st: ast.stmt, line: int, col: int) -> ast.expr | None:
    """The largest read-only expression of `st` around the node at `line`:`col` (where a compile error
    points), if `st` may read it just before it runs: evaluated unconditionally, in no comprehension or
    `and`/`or`, `st` binding no name with `:=`; a bare name is no help (its value is what a region refused)."""
    if any(isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) for n in ast.walk(st)):
        return None
    parents: dict[int, ast.AST] = {}
    found = None
    for node in ast.walk(st):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, ast.expr) and (node.lineno, node.col_offset) == (line, col):
            found = node  # the last (innermost) of those starting there
    if found is None or not _pure(found):
        return None
    best = found
    node: ast.AST = found
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, (_DEFERRED, ast.stmt)):
            break
        if isinstance(node, ast.expr) and _pure(node):
            best = node
        elif not isinstance(node, (ast.keyword, ast.expr)):
            break
    scan: ast.AST = best
    while id(scan) in parents:  # nothing around it is evaluated lazily
        scan = parents[id(scan)]
        if isinstance(scan, _DEFERRED):
            return None
    if isinstance(best, (ast.Name, ast.Constant)):
        return None
    return best


def replace(node: ast.AST, names: dict[int, str]) -> ast.AST:
    """`node` with each expression whose id is in `names` replaced by a read of that name; only the nodes on
    the way to them are copied (the others stay the same objects)."""
    if id(node) in names:
        return ast.copy_location(load(names[id(node)]), node)
    new = None
    for field_name, value in ast.iter_fields(node):
        if isinstance(value, list):
            items = [replace(v, names) if isinstance(v, ast.AST) else v for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                new = new or copy.copy(node)
                setattr(new, field_name, items)
        elif isinstance(value, ast.AST):
            item = replace(value, names)
            if item is not value:
                new = new or copy.copy(node)
                setattr(new, field_name, item)
    return new or node


def load(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def store(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Store())


def const(value: object) -> ast.Constant:
    return ast.Constant(value=value)
