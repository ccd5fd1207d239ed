"""What names a run of statements reads, binds, and may find unbound: the liveness ``splitting`` cuts by.

``stored``/``read`` name what statements bind and read in the function's own scope (a lambda or a
comprehension reads what it closes over); ``definitely`` is the set of names bound on every path
through statements (``EXITED`` after one that never completes); ``exposed`` the names statements may
read before binding them themselves: a segment's live-ins.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Iterator

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _walk_scope(node: ast.AST) -> Iterable[ast.AST]:
    """The nodes of `node` in its own scope: nested functions, lambdas, classes and comprehensions are
    not entered (their default values and first iterables are), `node` itself included."""
    stack = [ast.Module(body=[node], type_ignores=[]) if isinstance(node, ast.stmt) else node]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child
                stack.extend(child.decorator_list + child.args.defaults + [d for d in child.args.kw_defaults if d])
            elif isinstance(child, ast.Lambda):
                yield child
                stack.extend(child.args.defaults + [d for d in child.args.kw_defaults if d])
            elif isinstance(child, ast.ClassDef):
                yield child
                stack.extend(child.decorator_list + child.bases + [k.value for k in child.keywords])
            elif isinstance(child, COMPREHENSIONS):
                yield child
                stack.append(child.generators[0].iter)
                # A walrus in a comprehension binds in the enclosing function.
                stack.extend(w for w in ast.walk(child) if isinstance(w, ast.NamedExpr))
            else:
                stack.append(child)


def stored(nodes: Iterable[ast.AST]) -> set[str]:
    """Names the statements bind in the function's scope."""
    return set(bindings(nodes))


def _binding_sites(nodes: Iterable[ast.AST]) -> Iterator[tuple[str, ast.AST]]:
    """Each name the statements bind in the function's scope, with the node that binds it (`del` counts)."""
    for node in nodes:
        for n in _walk_scope(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                yield n.id, n
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield n.name, n
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    yield (a.asname or a.name).split(".")[0], n
            elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
                yield n.name, n
            elif isinstance(n, ast.MatchMapping) and n.rest:
                yield n.rest, n


def bindings(nodes: Iterable[ast.AST]) -> Counter:
    """How often the statements bind each name in the function's scope (`del` counts)."""
    return Counter(name for name, _ in _binding_sites(nodes))


def first_bound(nodes: Iterable[ast.AST]) -> dict[str, int]:
    """The first line on which the statements bind each name in the function's scope (``bindings``' view)."""
    out: dict[str, int] = {}
    for name, n in _binding_sites(nodes):
        line = getattr(n, "lineno", 0)
        out[name] = min(out.get(name, line), line)
    return out


def read(nodes: Iterable[ast.AST]) -> Counter:
    """How often each name of the function's scope is read, nested scopes included (a lambda reads what
    it closes over), not the names a nested scope binds itself (a comprehension's target, a lambda's
    parameters)."""
    out: Counter = Counter()

    def visit(n: ast.AST, own: frozenset) -> None:
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Load, ast.Del)):  # `del x` needs x bound
            if n.id not in own:
                out[n.id] += 1
            return
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id not in own:
            out[n.target.id] += 1
        if isinstance(n, COMPREHENSIONS):
            inner = own | stored(g.target for g in n.generators)
            for k, gen in enumerate(n.generators):
                visit(gen.iter, own if k == 0 else inner)  # the first iterable is evaluated outside
                visit(gen.target, inner)
                for cond in gen.ifs:
                    visit(cond, inner)
            for part in (n.key, n.value) if isinstance(n, ast.DictComp) else (n.elt,):
                visit(part, inner)
            return
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in n.args.defaults + [d for d in n.args.kw_defaults if d is not None]:
                visit(d, own)
            for d in getattr(n, "decorator_list", ()):
                visit(d, own)
            inner = own | set(params(n)) | (stored(n.body) if isinstance(n.body, list) else set())
            for part in n.body if isinstance(n.body, list) else [n.body]:
                visit(part, frozenset(inner))
            return
        for child in ast.iter_child_nodes(n):
            visit(child, own)

    for node in nodes:
        visit(node, frozenset())
    return out


def params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return names


class Exited:
    """The set of names definitely bound after a statement that never completes: every name."""

    def __and__(self, other):
        return other

    __rand__ = __and__


EXITED = Exited()


def definitely(stmts: list[ast.stmt], bound: set[str] | Exited) -> set[str] | Exited:
    """The names bound on every path through `stmts`, given those bound before."""
    for st in stmts:
        if isinstance(bound, Exited):
            return bound
        bound = definitely_one(st, bound)
    return bound


def walrus(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)}


def definitely_one(st: ast.stmt, bound: set[str]) -> set[str] | Exited:
    if isinstance(st, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
        return EXITED
    if isinstance(st, ast.If):
        b = bound | walrus(st.test)
        return definitely(st.body, set(b)) & definitely(st.orelse, set(b))
    if isinstance(st, (ast.For, ast.AsyncFor)):  # the body may not run; where it runs, it may delete
        return (bound | walrus(st.iter)) - deleted(st)
    if isinstance(st, ast.While):
        return (bound | walrus(st.test)) - deleted(st)
    if isinstance(st, (ast.With, ast.AsyncWith)):
        names = stored([i.optional_vars for i in st.items if i.optional_vars is not None])
        items = set().union(*(walrus(i.context_expr) for i in st.items))
        return definitely(st.body, bound | names | items)
    if isinstance(st, ast.Try):
        # Past the `try`, either its body and `else` ran to the end or a handler did (whose name is unbound).
        after = definitely(st.body + st.orelse, set(bound))
        raised = bound - deleted(*st.body)  # a handler runs after part of the body: what it deleted is gone
        for h in st.handlers:
            handled = definitely(h.body, raised | ({h.name} if h.name else set()))
            after = after & (handled - {h.name} if isinstance(handled, set) else handled)
        return definitely(st.finalbody, after)
    if isinstance(st, ast.Match):
        return (bound | walrus(st.subject)) - deleted(st)
    if isinstance(st, ast.Delete):
        return bound - stored([st])
    if isinstance(st, ast.AugAssign):
        return set(bound)
    if isinstance(st, ast.AnnAssign) and st.value is None:
        return set(bound)
    return bound | stored([st])


def deleted(*stmts: ast.stmt) -> set[str]:
    """The names a `del` anywhere in `stmts` unbinds (not in nested scopes: their names are their own)."""
    return stored([n for st in stmts for n in _walk_scope(st) if isinstance(n, ast.Delete)])


def exposed(stmts: list[ast.stmt], bound: set[str]) -> set[str]:
    """Names `stmts` may read before binding them themselves (`bound`: bound by the statements before)."""
    out: set[str] = set()
    for st in stmts:
        out |= _exposed(st, bound)
        after = definitely_one(st, bound)
        if isinstance(after, Exited):
            break
        bound = after
    return out


def _exposed(st: ast.stmt, bound: set[str]) -> set[str]:
    def reads(*nodes: ast.AST | None) -> set[str]:
        return set(read(n for n in nodes if n is not None)) - bound

    if isinstance(st, ast.If):
        return reads(st.test) | exposed(st.body, bound | walrus(st.test)) | exposed(st.orelse, bound)
    if isinstance(st, (ast.For, ast.AsyncFor)):
        inner = bound | stored([st.target])
        return reads(st.iter) | exposed(st.body, inner) | exposed(st.orelse, bound)
    if isinstance(st, ast.While):
        return reads(st.test) | exposed(st.body, bound) | exposed(st.orelse, bound)
    if isinstance(st, (ast.With, ast.AsyncWith)):
        names = stored([i.optional_vars for i in st.items if i.optional_vars is not None])
        return reads(*[i.context_expr for i in st.items]) | exposed(st.body, bound | names)
    if isinstance(st, ast.Try):
        out = exposed(st.body, bound) | exposed(st.orelse, bound) | exposed(st.finalbody, bound)
        for h in st.handlers:
            out |= reads(h.type) | exposed(h.body, bound | ({h.name} if h.name else set()))
        return out
    return set(read([st])) - bound
