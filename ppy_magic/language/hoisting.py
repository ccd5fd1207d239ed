"""Values a statement reads that no region takes, read in Python just before it ("hoists").

``y = self.proj(cache["h"]) + h`` cannot be a region while ``cache`` is a dict; with ``cache["h"]``
read into a name first, the rest of the statement can. ``hoistable`` finds the expression to read
(the largest read-only one around where a compile error points), ``replace`` rewrites the
statement to read the name instead. Reading it a little earlier than written is exact: it only
reads (names, attributes, subscripts, ``len``, a mapping's ``get``), the compiled parts before it write no
Python name or container, and where it raises, the driver runs the statement as written
(``splitting._Splitter.hoist``).
"""

from __future__ import annotations

import ast
import copy

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

_PURE_CALLS = frozenset({"len", "isinstance"})
_PURE_METHODS = frozenset({"get", "keys", "values", "items"})


def _pure(n: ast.AST) -> bool:
    """An expression that only reads: names, attributes, constants, subscripts, `len`/`isinstance`, a mapping's
    `get`/`keys`/`values`/`items`. Read a little earlier than written, it reads the same (a region writes no
    Python name or container); if it raises, the statement runs as written."""
    if isinstance(n, ast.Name):
        return isinstance(n.ctx, ast.Load)
    if isinstance(n, ast.Constant):
        return True
    if isinstance(n, ast.Attribute):  # `self.config.name`: an object's attribute (a config's property too)
        return isinstance(n.ctx, ast.Load) and _pure(n.value) and not isinstance(n.value, ast.Constant)
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


def lift_call(st: ast.stmt, n: int) -> list[ast.stmt] | None:
    """A statement calling what no region can (a library function, a logger), written as Python evaluates
    it: the callee read into a name, then each argument that does work into a name of its own, then the
    call of those names (``x = lib.f(a @ b, k=t.sum())`` -> ``c = lib.f; a0 = a @ b; a1 = t.sum();
    x = c(a0, k=a1)``). The arguments' statements can be regions; only the call stays Python. None
    where the statement is no such call, or nothing of it can be taken."""
    call = st.value if isinstance(st, (ast.Expr, ast.Assign, ast.Return)) else None
    if not isinstance(call, ast.Call) or not _chain(call.func):
        return None
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    if any(isinstance(x, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) for x in ast.walk(st)):
        return None
    if isinstance(st, ast.Assign) and not all(isinstance(t, ast.Name) for t in st.targets):
        return None  # a target with a subscript or attribute is evaluated after the call: keep it whole
    values = list(call.args) + [k.value for k in call.keywords]
    if not any(_works(v) for v in values):
        return None
    out: list[ast.stmt] = []
    callee = f"__ppy_call{n}"
    out.append(_assign(callee, call.func, st))
    names = {}
    for k, v in enumerate(values):
        if _works(v):
            names[id(v)] = f"__ppy_arg{n}_{k}"
            out.append(_assign(names[id(v)], v, st))
    args = [load(names[id(a)]) if id(a) in names else a for a in call.args]
    keywords = [
        ast.keyword(arg=kw.arg, value=load(names[id(kw.value)]) if id(kw.value) in names else kw.value)
        for kw in call.keywords
    ]
    new_call = ast.copy_location(ast.Call(func=load(callee), args=args, keywords=keywords), call)
    last = copy.copy(st)
    last.value = new_call
    ast.fix_missing_locations(last)
    out.append(last)
    return out


def _chain(node: ast.expr) -> bool:
    """A name, or attributes of one: reading it has no effect worth ordering (`np.linalg.norm`, `log.info`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _works(node: ast.expr) -> bool:
    """An argument that computes something (not a name or a constant, which the call reads as cheaply)."""
    return not isinstance(node, (ast.Name, ast.Constant))


def _assign(name: str, value: ast.expr, at: ast.stmt) -> ast.Assign:
    out = ast.Assign(targets=[store(name)], value=value)
    ast.copy_location(out, at)
    ast.fix_missing_locations(out)
    return out
