"""What a statement of a function is, for the split (``splitting.py``): where it sits (the statement at a
line, every statement of a body), what it does to control (a `break` leaving it, a `return`, whether a
run always exits), and what it binds, reads or calls. Questions about the AST only: nothing here splits.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .liveness import read, stored, walrus

COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
WORK = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Compare, ast.BoolOp, ast.AugAssign, ast.IfExp)


def statement_at(fn: ast.FunctionDef, line: int) -> ast.stmt | None:
    """The innermost statement of `fn`'s body holding `line`: a simple statement, or a compound one
    whose header (not its body) holds it."""
    found = None
    for body in _blocks(fn):
        for st in body:
            if st.lineno <= line <= (st.end_lineno or st.lineno):
                if isinstance(st, COMPOUND + (ast.Match,)) and _in_a_block(st, line):
                    continue  # a statement of its body holds it
                found = st
    return found


def statements(fn: ast.FunctionDef) -> Iterable[ast.stmt]:
    """Every statement of `fn`'s body, nested ones included (not those of nested defs)."""
    for body in _blocks(fn):
        yield from body


def _in_a_block(st: ast.stmt, line: int) -> bool:
    for block in _child_blocks(st):
        if block and block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno):
            return True
    return isinstance(st, ast.Try) and any(h.lineno <= line for h in st.handlers)


def _blocks(fn: ast.AST) -> Iterable[list[ast.stmt]]:
    """Every statement list of `fn`'s body, nested ones included (not those of nested defs)."""
    stack = [fn.body]
    while stack:
        body = stack.pop()
        yield body
        for st in body:
            if not isinstance(st, SCOPES):
                stack.extend(_child_blocks(st))


def _child_blocks(st: ast.stmt) -> list[list[ast.stmt]]:
    out = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(st, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            out.append(block)
    for h in getattr(st, "handlers", ()):
        out.append(h.body)
    for case in getattr(st, "cases", ()):
        out.append(case.body)
    return out


def nodes_in_scope(st: ast.stmt) -> Iterable[ast.AST]:
    """The statements and expressions of `st`, not those of nested functions or classes."""
    stack = [st]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, SCOPES))


def escapes(st: ast.stmt) -> bool:
    """A `break` or `continue` of `st` leaves it (to a loop around it)."""

    def walk(n: ast.AST, in_loop: bool) -> bool:
        if isinstance(n, (ast.Break, ast.Continue)):
            return not in_loop
        if isinstance(n, SCOPES):
            return False
        if isinstance(n, (ast.For, ast.While, ast.AsyncFor)):
            # The loop's own body may break it; its `else` belongs to the statements around.
            return any(walk(c, True) for c in n.body) or any(walk(c, in_loop) for c in n.orelse)
        return any(walk(c, in_loop) for c in ast.iter_child_nodes(n))

    return walk(st, False)


def has_return(st: ast.stmt) -> bool:
    return any(isinstance(n, ast.Return) for n in nodes_in_scope(st))


def always_exits(stmts: list[ast.stmt]) -> bool:
    """Every path through `stmts` ends in `return` or `raise`."""
    for st in stmts:
        if isinstance(st, (ast.Return, ast.Raise)):
            return True
        if isinstance(st, ast.If) and always_exits(st.body) and always_exits(st.orelse):
            return True
        if isinstance(st, (ast.With, ast.AsyncWith)) and always_exits(st.body):
            return True
        if isinstance(st, ast.Try) and (
            always_exits(st.finalbody)
            or (always_exits(st.body + st.orelse) and all(always_exits(h.body) for h in st.handlers))
        ):
            return True
    return False


def binds(st: ast.stmt, names: list[str]) -> bool:
    """A simple statement (or a compound one's header) that binds one of `names`."""
    if isinstance(st, (ast.For, ast.AsyncFor)):
        return bool(stored([st.target]) & set(names))
    if isinstance(st, (ast.With, ast.AsyncWith)):
        return bool(stored([i.optional_vars for i in st.items if i.optional_vars is not None]) & set(names))
    if isinstance(st, COMPOUND + (ast.Match,)):
        return bool(walrus(getattr(st, "test", None)) & set(names))
    return bool(stored([st]) & set(names))


def reads_any(st: ast.stmt, names: set[str]) -> bool:
    return bool(set(read([st])) & names)


def calls(st: ast.stmt) -> int:
    return sum(isinstance(n, ast.Call) for n in ast.walk(st))


def does_something(st: ast.stmt) -> bool:
    """Whether `st` does work worth a region's call (not just `pass`, a docstring or `y = h`)."""
    return any(isinstance(n, WORK) for n in ast.walk(st))
