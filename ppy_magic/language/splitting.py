"""A function split around the statements a region cannot take ("breaks"): a Python driver and its segments.

``split(fn, breaks)`` keeps the function's signature and lines and turns it into a
*driver*: the statements in ``breaks`` (and the headers of the ``if``/``for``/``while``/
``with``/``try`` that hold one) stay Python, and every maximal run of other statements
becomes one call of a *segment*: a function of the names the run reads (its live-ins)
that returns the names it assigns and the rest of the function reads (its live-outs),
compiled as a region of its own. A run that ends the function on every path is
returned from (``return seg(...)``).

What Python does stays what it does: the driver's own statements are the user's, with
their lines (a traceback names them); the segments make the same ATen calls in the same
order; a tensor, a list or a module crosses as the same object. A name that may be unbound
where a run starts gets a form of the segment per case; one the run binds on some paths only
comes back with whether it has a value, and the driver unbinds it where it has none. A run
stays Python (``Split.python``) where more such names than ``MAX_UNBOUND`` cross, or where it
holds a ``break``/``continue`` of a loop outside it or returns on some paths only.
Nothing here knows what a region can take: the caller says which statements break,
from the located errors of compiling (``breaks.py``).
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field

from . import hoisting
from . import segment_edges as edges
from .liveness import (
    EXITED,
    Exited,
    bindings,
    definitely,
    definitely_one,
    exposed,
    first_bound,
    params,
    read,
    stored,
    walrus,
)
from .statement_facts import (
    COMPOUND,
    always_exits,
    calls,
    does_something,
    escapes,
    has_return,
    nodes_in_scope,
    reads_any,
)

# Names that may be unbound where a run starts, taken by one form of its segment per case (2**n forms).
MAX_UNBOUND = 2
# A statement reading such names between statements that stay Python is a segment of its own only when it
# makes at least this many calls: a region's call costs about as much as a few Python-level calls, and
# a small statement of Python objects (``x = default(x, y)``) is no faster as a region.
ALONE_MIN_CALLS = 4


FRAME_READERS = frozenset({"locals", "vars", "eval", "exec"})


class NotSplittable(Exception):
    """The function as a whole cannot be split (``global``, ``nonlocal``, a read of its frame's names)."""


@dataclass
class Segment:
    """One run of statements compiled as a region: ``def name(ins): <run>; return <outs>``."""

    name: str  # the name the driver calls it by (a free variable of the driver)
    node: ast.FunctionDef
    ins: tuple[str, ...]
    outs: tuple[str, ...]
    returns: bool  # the run ends the function on every path: the driver returns what it returns
    first_line: int
    last_line: int
    # It takes the function's **kwargs as keywords: its other inputs are positional-only (a keyword the call
    # passed on may share a name with one of them); ``python_node`` is it so, as Python runs it.
    keywords: bool = False
    # Names read by the run that have no value where it starts in this form of it (``_Splitter.either``).
    unbound: tuple[str, ...] = ()
    # Names it returns that may have no value where it ends: each returned as ``returned_value`` gives it, and
    # after the others, whether it has one (``"name" in locals()``); the driver unbinds it where not.
    unset: tuple[str, ...] = ()

    def python_node(self) -> ast.FunctionDef:
        if not self.keywords:
            return self.node
        node = copy.copy(self.node)
        node.args = copy.copy(node.args)
        node.args.posonlyargs, node.args.args = node.args.args, []
        return node


HOISTED_PREFIX = "__ppy_value"  # a hoisted value is read into `__ppy_value<statement>_<k>`
HOISTED_NAME = re.compile(rf"{HOISTED_PREFIX}\d+_\d+")


@dataclass
class Split:
    driver: ast.Module  # `factory` of the driver: free variables the segments' names, then the function's own
    segments: list[Segment]
    python: list[tuple[int, int, str]] = field(default_factory=list)  # (first, last, why) of runs left Python
    origins: dict[int, ast.stmt] = field(default_factory=dict)  # id(statement as a segment holds it) -> as written
    hoisted: dict[str, ast.expr] = field(default_factory=dict)  # name a hoisted value is read into -> the value


# -- the split ---------------------------------------------------------------------------------


def split(
    fn: ast.FunctionDef,
    breaks: set[int],
    free: tuple[str, ...] = (),
    prefix: str = "__ppy_part",
    hoists: dict[int, list[ast.expr]] | None = None,
    lifts: dict[int, list[ast.stmt]] | None = None,
    python_runs: dict[tuple[int, int, tuple[str, ...]], str] | None = None,
) -> Split:
    """Split `fn` around the statements whose ``id`` is in `breaks` (see the module's docstring).
    `python_runs`: runs that stay Python in the driver, by (first line, last line, the segment's inputs)."""
    nodes = list(nodes_in_scope(fn))
    # `vars(obj)` reads obj's attributes; `vars()`, `locals()`, `eval` and `exec` read the frame's names, and
    # a segment's or the driver's are not the function's.
    of_an_object = {
        id(n.func)
        for n in nodes
        if isinstance(n, ast.Call) and n.args and isinstance(n.func, ast.Name) and n.func.id == "vars"
    }
    for n in nodes:
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            raise NotSplittable(f"`{'global' if isinstance(n, ast.Global) else 'nonlocal'}` keeps it whole")
        if (
            isinstance(n, ast.Name)
            and n.id in FRAME_READERS
            and isinstance(n.ctx, ast.Load)
            and id(n) not in of_an_object
        ):
            raise NotSplittable(f"`{n.id}()` reads every local name of the function: it keeps it whole")
    return _Splitter(fn, breaks, prefix, hoists or {}, lifts or {}, python_runs or {}).run(free)


class _Splitter:
    def __init__(
        self,
        fn: ast.FunctionDef,
        breaks: set[int],
        prefix: str,
        hoists: dict[int, list[ast.expr]],
        lifts: dict[int, list[ast.stmt]],
        python_runs: dict[tuple[int, int, tuple[str, ...]], str],
    ):
        self.fn = fn
        self.python_runs = python_runs
        self.breaks = breaks
        self.hoists = hoists
        self.lifts = lifts  # id(statement) -> the statements it is written as (``hoisting.lift_call``)
        self.origins: dict[int, ast.stmt] = {}  # id(a statement rewritten to read hoisted values) -> as written
        self.hoisted: dict[str, ast.expr] = {}  # the names hoisted values are read into -> the values
        self.prefix = prefix
        self.locals = set(params(fn)) | stored(fn.body) | stored(s for ss in lifts.values() for s in ss)
        self.reads = read(fn.body) + read(s for ss in lifts.values() for s in ss)
        self.binds = bindings(fn.body) + bindings(s for ss in lifts.values() for s in ss)
        self.first_bound = first_bound(fn.body)
        self.params = set(params(fn))
        self.segments: list[Segment] = []
        self.python: list[tuple[int, int, str]] = []
        self.catching = 0  # inside how many `try`/`with` blocks of the driver
        self._holds: dict[int, bool] = {}

    def run(self, free: tuple[str, ...]) -> Split:
        body, _ = self.block(self.fn.body, set(params(self.fn)), in_loop=False)
        driver = copy.copy(self.fn)
        driver.body = body
        driver.decorator_list = []
        module = factory(driver, [s.name for s in self.segments] + list(free))
        return Split(module, self.segments, self.python, self.origins, self.hoisted)

    def holds_break(self, st: ast.stmt) -> bool:
        """`st` is or holds a break, or a `super()` (which reads the frame's first argument and its class:
        only the driver has both)."""
        key = id(st)
        if key not in self._holds:
            self._holds[key] = any(
                id(n) in self.breaks
                # read in Python first, or written as several statements: the statements around it are too
                or (n is not st and (id(n) in self.hoists or id(n) in self.lifts))
                or isinstance(n, ast.Name)
                and n.id == "super"
                for n in nodes_in_scope(st)
            )
        return self._holds[key]

    def block(self, stmts: list[ast.stmt], bound: set[str], in_loop: bool) -> tuple[list[ast.stmt], set | Exited]:
        out: list[ast.stmt] = []
        run: list[ast.stmt] = []
        run_bound = bound
        guard: tuple[str, list[ast.stmt]] | None = None  # a run after a hoist: its flag, and the run as written

        def flush() -> None:
            nonlocal run, guard
            if run:
                calls = self.segment(run, run_bound, in_loop)
                if guard is None:
                    out.extend(calls)
                else:  # the hoisted values raised: the statements as written raise it where Python does
                    ok, written = guard
                    out.append(ast.copy_location(ast.If(test=hoisting.load(ok), body=calls, orelse=written), run[0]))
            run, guard = [], None

        for st in [s for written in stmts for s in self.lifts.get(id(written), [written])]:
            takes = not self.holds_break(st) and not (in_loop and escapes(st))
            if takes and has_return(st) and not always_exits([st]):
                takes = False  # returns on some paths only: its header stays Python
            if takes and isinstance(st, COMPOUND) and self.binds_while_catching(st):
                takes = False  # it may raise after binding a name the handler reads: its header stays Python
            if takes:
                hoisted = self.hoists.get(id(st))
                if hoisted:
                    flush()
                    rewritten, pre, names = self.hoist(st, hoisted)
                    out.append(pre)
                    bound = bound | set(names)
                    run, run_bound, guard = [rewritten], bound, (names[-1], [st])
                else:
                    if not run:
                        run_bound = bound
                    run.append(st)
                    if guard is not None:
                        guard[1].append(st)
                if always_exits([st]):
                    flush()
                    return out, EXITED
                if self.binds_while_catching(st):
                    flush()  # what it bound reaches the handler even if the next statement raises
            else:
                flush()
                out.append(self.python_statement(st, bound, in_loop))
            after = definitely_one(st, bound)
            if isinstance(after, Exited):
                return out, after
            bound = after
        flush()
        return out, bound

    def hoist(self, st: ast.stmt, exprs: list[ast.expr]) -> tuple[ast.stmt, ast.stmt, list[str]]:
        """`st` with `exprs` (Python-only values: a dict's item, a length) read into names before it:
        (the statement reading the names, the `try` that reads them, [the names..., its success flag])."""
        n = len(self.origins)
        names = [f"{HOISTED_PREFIX}{n}_{k}" for k in range(len(exprs))]
        ok = f"__ppy_read{n}"
        rewritten = hoisting.replace(st, {id(e): name for e, name in zip(exprs, names, strict=True)})
        self.origins[id(rewritten)] = st
        self.hoisted.update(zip(names, exprs, strict=True))
        self.locals |= {*names, ok}
        reads = [ast.Assign(targets=[hoisting.store(name)], value=e) for name, e in zip(names, exprs, strict=True)]
        pre = ast.Try(
            body=reads,
            handlers=[
                ast.ExceptHandler(
                    type=hoisting.load("Exception"),
                    name=None,
                    body=[ast.Assign(targets=[hoisting.store(ok)], value=hoisting.const(False))],
                )
            ],
            orelse=[ast.Assign(targets=[hoisting.store(ok)], value=hoisting.const(True))],
            finalbody=[],
        )
        for node in ast.walk(pre):
            if isinstance(node, (ast.stmt, ast.excepthandler)) or node is pre:
                ast.copy_location(node, st)
        ast.fix_missing_locations(pre)
        return rewritten, pre, [*names, ok]

    def binds_while_catching(self, st: ast.stmt) -> bool:
        """`st`, in a `try` or `with` block (which may catch what it raises), binds a name of the function:
        a segment returns what it bound only if it completes, so one ends there (a compound statement
        is split instead, as its iterations or branches may raise after binding)."""
        return self.catching > 0 and bool(stored([st]) & self.locals)

    def python_statement(self, st: ast.stmt, bound: set[str], in_loop: bool) -> ast.stmt:
        """`st` as the driver runs it: itself, or its header with its blocks split."""
        if not isinstance(st, COMPOUND) or (
            not self.holds_break(st) and not escapes(st) and not has_return(st) and not self.binds_while_catching(st)
        ):
            return st
        catches = isinstance(st, (ast.Try, ast.With, ast.AsyncWith))
        self.catching += catches
        try:
            return self._split_blocks(st, bound, in_loop)
        finally:
            self.catching -= catches

    def _split_blocks(self, st: ast.stmt, bound: set[str], in_loop: bool) -> ast.stmt:
        new = copy.copy(st)
        if isinstance(st, ast.If):
            inner = bound | walrus(st.test)
            new.body = self.block(st.body, inner, in_loop)[0]
            new.orelse = self.block(st.orelse, inner, in_loop)[0] if st.orelse else []
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            new.body = self.block(st.body, bound | stored([st.target]), True)[0]
            new.orelse = self.block(st.orelse, bound, in_loop)[0] if st.orelse else []
        elif isinstance(st, ast.While):
            new.body = self.block(st.body, bound | walrus(st.test), True)[0]
            new.orelse = self.block(st.orelse, bound, in_loop)[0] if st.orelse else []
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            names = stored([i.optional_vars for i in st.items if i.optional_vars is not None])
            new.body = self.block(st.body, bound | names, in_loop)[0]
        elif isinstance(st, ast.Try):
            new.body = self.block(st.body, bound, in_loop)[0]
            new.orelse = self.block(st.orelse, bound, in_loop)[0] if st.orelse else []
            new.finalbody = self.block(st.finalbody, bound, in_loop)[0] if st.finalbody else []
            handlers = []
            for h in st.handlers:
                nh = copy.copy(h)
                nh.body = self.block(h.body, bound | ({h.name} if h.name else set()), in_loop)[0]
                handlers.append(nh)
            new.handlers = handlers
        return new

    def around_unbound(self, run: list[ast.stmt], bound: set[str], in_loop: bool, unbound: set[str]) -> list[ast.stmt]:
        """`run` where it would pass names that may be unbound: the statements reading them stay Python
        (reading one raises there, as in Python), the rest become segments."""
        if not any(reads_any(st, unbound) for st in run):  # a name it may bind, or not: it stays Python
            self.python.append(
                (run[0].lineno, run[-1].end_lineno or run[-1].lineno, f"'{min(unbound)}' may be unbound")
            )
            return run
        out: list[ast.stmt] = []
        piece: list[ast.stmt] = []
        piece_bound = bound
        for st in run:
            if reads_any(st, unbound):
                if piece:
                    out += self.segment(piece, piece_bound, in_loop)
                    piece = []
                if calls(st) >= ALONE_MIN_CALLS:
                    out += self.segment([st], bound, in_loop, alone=True)  # its forms, or Python
                else:
                    why = f"'{sorted(set(read([st])) & unbound)[0]}' may be unbound here"
                    self.python.append((st.lineno, st.end_lineno or st.lineno, why))
                    out.append(st)
            else:
                if not piece:
                    piece_bound = bound
                piece.append(st)
            after = definitely_one(st, bound)
            if isinstance(after, Exited):
                break
            bound = after
        if piece:
            out += self.segment(piece, piece_bound, in_loop)
        return out

    def segment(self, run: list[ast.stmt], bound: set[str], in_loop: bool, alone: bool = False) -> list[ast.stmt]:
        """The driver's call of a new segment for `run`, or `run` itself where it must stay Python. `alone`:
        a statement reading names that may be unbound, which stays Python unless its forms take them."""
        first = run[0].lineno
        returns = always_exits(run)
        inside = read(run)
        assigned = stored(run) & self.locals
        outs: list[str] = []
        if not returns:
            # Live after the run: read elsewhere, or bound elsewhere (a run that binds it on some paths only
            # is given the value it had), or read by the run itself in a loop. A name the function never
            # reads (`_` of `x, _ = pair`) is live nowhere: its value cannot be seen.
            bound_inside = bindings(run)
            for name in sorted(assigned):
                if self.reads[name] and (
                    self.reads[name] > inside[name]
                    or self.binds[name] > bound_inside[name]
                    or (in_loop and inside[name])
                ):
                    outs.append(name)
        own = definitely(run, set())
        passed_through = {o for o in outs if isinstance(own, set) and o not in own}
        needed = (exposed(run, set()) & self.locals) | passed_through
        # A name the run binds and reads, on paths of its own, that nothing before the run binds: it enters the
        # run unbound whatever the path, and the run is a region that checks each read of it (as Python does).
        fresh = {
            n
            for n in needed - passed_through - self.params
            if not in_loop and n in assigned and self.first_bound.get(n, 0) >= first
        }
        needed -= fresh
        unbound = sorted(n for n in needed if n not in bound)
        if not any(does_something(st) for st in run):
            return run  # nothing worth a call: `pass`, a bare name, a docstring
        if len(unbound) > MAX_UNBOUND:  # a form of the segment per case: too many
            if alone:
                self.python.append((first, run[-1].end_lineno or first, f"'{unbound[0]}' may be unbound here"))
                return run
            return self.around_unbound(run, bound, in_loop, set(unbound))
        # Names it returns that may have no value where it ends (unbound where it starts, bound on some of its
        # paths; or bound where it starts, deleted on some of its paths): returned with whether they have one,
        # and the driver unbinds them where they have none.
        after = definitely(run, set(bound))
        unset = tuple(n for n in outs if n not in after) if isinstance(after, set) else ()
        if unbound:
            return [self.either(run, needed, outs, returns, unbound, assigned, unset)]
        return self.segment_call(run, needed, outs, returns, assigned, unset=unset)

    def either(
        self,
        run: list[ast.stmt],
        needed: set[str],
        outs: list[str],
        returns: bool,
        unbound: list[str],
        assigned: set,
        unset: tuple[str, ...],
    ) -> ast.stmt:
        """The call of one form of the segment per case of `unbound` (names that may be unbound where the run
        starts): the driver tries reading each (``try: name`` / ``except NameError``) and calls the form that
        takes the bound ones; in the others the name is a local with no value, whose reads raise
        UnboundLocalError where Python's do."""

        def case(names: list[str], unbound_here: list[str]) -> list[ast.stmt]:
            if not names:
                return self.segment_call(run, needed - set(unbound_here), outs, returns, assigned, unbound_here, unset)
            name, rest = names[0], names[1:]
            test = ast.Try(
                body=[ast.Expr(value=ast.Name(id=name, ctx=ast.Load()))],
                handlers=[
                    ast.ExceptHandler(
                        type=ast.Name(id="NameError", ctx=ast.Load()), name=None, body=case(rest, [*unbound_here, name])
                    )
                ],
                orelse=case(rest, unbound_here),
                finalbody=[],
            )
            return [test]

        (stmt,) = case(unbound, [])
        first, last = run[0].lineno, run[-1].end_lineno or run[-1].lineno
        for n in ast.walk(stmt):
            if isinstance(n, (ast.expr, ast.stmt, ast.excepthandler)) and not hasattr(n, "end_lineno"):
                n.lineno, n.col_offset = first, run[0].col_offset
                n.end_lineno, n.end_col_offset = last, run[-1].end_col_offset or 0
        return stmt

    def segment_call(
        self,
        run: list[ast.stmt],
        needed: set[str],
        outs: list[str],
        returns: bool,
        assigned: set[str],
        unbound_here: list[str] = (),
        unset: tuple[str, ...] = (),
    ) -> list[ast.stmt]:
        """A new segment for `run` taking `needed`, and the driver's statements calling it; or `run` itself
        where no call compiled that segment (``python_runs``). `unbound_here`: names the run reads that have
        no value where it starts in this form (locals of the segment); `unset`: names it returns that may
        have none where it ends (``returned_value``)."""
        first, last = run[0].lineno, run[-1].end_lineno or run[-1].lineno
        params = sorted(needed, key=lambda n: (n != _self_name(self.fn), n))
        star = self.fn.args.kwarg.arg if self.fn.args.kwarg is not None else None
        keywords = star in params and star not in assigned
        ins = tuple(p for p in params if not (keywords and p == star)) + ((star,) if keywords else ())
        why = self.python_runs.get((first, last, ins))
        if why is not None:
            self.python.append((first, last, why))
            return list(run)
        name = f"{self.prefix}{len(self.segments)}"
        body = [edges.declared_unbound(n, run[0]) for n in unbound_here if n not in assigned] + list(run)
        if not returns:
            body.append(ast.Return(value=edges.names_value(outs, unset)))
        # The function's **kwargs, read and not rebound by the run: passed on as keywords (a region takes
        # them by name, a dict it does not); the other inputs are then positional-only (``Segment.keywords``).
        if keywords:
            params.remove(star)
        node = _function_def(
            name=self.fn.name,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=p) for p in params],
                kwonlyargs=[],
                kw_defaults=[],
                defaults=[],
                kwarg=ast.arg(arg=star) if keywords else None,
            ),
            body=body,
            decorator_list=[],
            returns=None,
        )
        _locate(node, self.fn)
        self.segments.append(
            Segment(name, node, tuple(ins), tuple(outs), returns, first, last, keywords, tuple(unbound_here), unset)
        )
        call = ast.Call(
            func=ast.Name(id=name, ctx=ast.Load()),
            args=[ast.Name(id=p, ctx=ast.Load()) for p in params],
            keywords=[ast.keyword(arg=None, value=ast.Name(id=star, ctx=ast.Load()))] if keywords else [],
        )
        flags = [edges.bound_flag(n) for n in unset]
        if returns:
            stmts: list[ast.stmt] = [ast.Return(value=call)]
        elif not outs:
            stmts = [ast.Expr(value=call)]
        elif len(outs) == 1 and not flags:
            stmts = [ast.Assign(targets=[ast.Name(id=outs[0], ctx=ast.Store())], value=call)]
        else:
            target = ast.Tuple(elts=[ast.Name(id=o, ctx=ast.Store()) for o in [*outs, *flags]], ctx=ast.Store())
            stmts = [ast.Assign(targets=[target], value=call)]
            for n, flag in zip(unset, flags, strict=True):
                stmts += edges.unbind_unless(n, flag)
        for stmt in stmts:
            for n in ast.walk(stmt):
                if hasattr(n, "lineno") or isinstance(n, (ast.expr, ast.stmt)):
                    n.lineno, n.col_offset = first, run[0].col_offset
                    n.end_lineno, n.end_col_offset = last, run[-1].end_col_offset or 0
        return stmts


INNER = "__ppy_function__"  # the name `factory` gives the function: its own name in its body stays a global


def factory(fn: ast.FunctionDef, names: list[str]) -> ast.Module:
    """`def __ppy_outer__(<names>): def __ppy_function__(...): <fn's body>; return it`: compiled, its code's
    only function is `fn`'s, with `names` as its free variables (the segments it calls, the cells it closes
    over). Named apart, so that the function's own name in its body is the global it is in Python."""
    fn = copy.copy(fn)
    fn.name = INNER
    outer = _function_def(
        name="__ppy_outer__",
        args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=[fn, ast.Return(value=ast.Name(id=INNER, ctx=ast.Load()))],
        decorator_list=[],
        returns=None,
    )
    _locate(outer, fn)
    return ast.Module(body=[outer], type_ignores=[])


def _self_name(fn: ast.FunctionDef) -> str | None:
    return fn.args.args[0].arg if fn.args.args else None


def _locate(node: ast.stmt, fn: ast.FunctionDef) -> None:
    """Nodes made here take the def's line (an error there is no statement's); the user's keep theirs."""
    node.lineno, node.col_offset = fn.lineno, fn.col_offset
    node.end_lineno, node.end_col_offset = fn.lineno, fn.col_offset
    ast.fix_missing_locations(node)


def _function_def(**fields) -> ast.FunctionDef:
    if "type_params" in ast.FunctionDef._fields:  # Python 3.12+
        fields["type_params"] = []
    return ast.FunctionDef(**fields)
