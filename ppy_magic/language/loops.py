"""Loops of the region language: ``while``, ``for`` over anything Python iterates, ``break``, ``continue``, ``else``.

A mixin of ``function.FunctionCompiler``. What a loop iterates is resolved first
(``iteration``): a ``range``, sequences known only at run time (lists, tuples, a
tensor's rows as ``Tensor.__iter__`` makes them with ``unbind(0)``), stepped
together by ``zip`` and counted by ``enumerate``, or a tuple known at compile
time, whose items the body is compiled for one by one (unrolled). A run-time
loop compiles its body once: a name it rebinds that was bound before becomes a
loop-carried variable, stored wherever an iteration ends (its end, ``continue``,
``break``); its kind must hold on every path, except that a name may widen once
(None -> Tensor-or-None, int/float/bool -> a number of run-time type), which
compiles the loop again. ``break`` leaves through a flag when the loop has an
``else``. Every loop polls for interrupts (the backend's part).

Comprehensions and reductions (``lists.py``) iterate with the same machinery.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..torchlib import ops
from . import ir
from .ir import Kind
from .iteration import Iteration, RangeIteration, SequenceIteration, StaticIteration
from .namespace import static_value
from .values import MaybeBound, ModuleValue, Static, Unbound


class _Widen(Exception):
    """A carried name needs a wider kind: compile the loop again with it."""

    def __init__(self, token: object, name: str, kind: Kind):
        super().__init__(name)
        self.token, self.name, self.kind = token, name, kind


@dataclass
class LoopFrame:
    token: object  # identifies the loop across its attempts
    carried: dict[str, Any]  # name -> its loop-carried variable(s)
    broke: ir.Var | None  # set before `break` when the loop has an `else`
    breaks: int = 0
    # Names first bound inside the loop: where an iteration ends with one bound, its value is kept
    # (and a flag set), so that after the loop it holds the last value, or is unbound as in Python.
    inner: set[str] = field(default_factory=set)
    kept: dict[str, tuple[ir.Var, ir.Var]] = field(default_factory=dict)  # name -> (value, bound flag)
    lost: set[str] = field(default_factory=set)  # inner names a variable cannot keep (kinds differ)
    before: list[ir.Stmt] = field(default_factory=list)  # their declarations, emitted before the loop
    line: int = 0


_ITEM_KIND = {**ir.ITEM_KIND, Kind.NUMBERS: Kind.NUMBER}  # and x.tolist()'s numbers, which only loops read


def stored_names(stmts: list[ast.stmt] | list[ast.expr]) -> set[str]:
    """Names bound by these statements, not counting nested comprehension scopes."""
    out: set[str] = set()

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        for child in ast.iter_child_nodes(node):
            walk(child)

    for s in stmts:
        walk(s)
    return out


def _jumps(stmts: list[ast.stmt], kinds: tuple[type, ...]) -> bool:
    """Whether `stmts` contain one of these jumps for the loop they are the body of (not a nested loop's)."""

    def walk(node: ast.AST) -> bool:
        if isinstance(node, kinds):
            return True
        if isinstance(node, (ast.For, ast.While)):
            return any(walk(s) for s in node.orelse)  # a nested loop's else belongs to this one
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        return any(walk(c) for c in ast.iter_child_nodes(node))

    return any(walk(s) for s in stmts)


class LoopCompiler:
    # -- statements --------------------------------------------------------------------------------
    def visit_While(self, node: ast.While) -> None:
        test = self._static_truth(node.test)
        if test is not None and not test:
            self.compile_body(node.orelse)  # never entered: the else runs
            return

        def head() -> None:
            if test is None:
                t = self.truth(node.test)
                if isinstance(t, ir.Const):
                    if not t.value:
                        self.emit(ir.Break(self.line()))
                        self.terminated = True
                    return
                self.emit(ir.If(t, (), (ir.Break(self.line()),), self.line()))

        self.run_loop(
            node,
            None,
            lambda _value: None,
            head,
            node.body,
            stored_names(node.body) | stored_names([node.test]),  # `while (n := n - 1) > 0:` rebinds n
            node.orelse,
            endless=test is not None,
        )

    def _static_truth(self, test: ast.expr) -> bool | None:
        """The truth of a loop test known without compiling it (a constant), else None."""
        if isinstance(test, ast.Constant):
            return bool(test.value)
        return None

    def visit_For(self, node: ast.For) -> None:
        # break/continue need a run-time loop: tuples known at compile time become run-time sequences
        runtime = _jumps(node.body, (ast.Break, ast.Continue))
        fn = static_value(node.iter.func, self.g) if isinstance(node.iter, ast.Call) else None
        module_loop = self.module_loop_sources(node) if fn in (zip, enumerate) else None
        if module_loop is not None and not module_loop.static:  # lists of modules known only at the call
            self.for_module_lists(node, module_loop)
            return
        if module_loop is not None:
            it = self.module_iteration(node, module_loop, runtime)
        elif fn in (range, zip, enumerate, reversed):
            it = self.iteration(node.iter, runtime)
        else:
            value = self.value(node.iter)
            if isinstance(value, ModuleValue):  # a ModuleList, a Sequential
                self.for_modules(node, value)
                return
            it = self.value_iteration(node.iter, value, runtime)
        assigned = stored_names(node.body) | stored_names([node.target])
        self.run_loop(
            node, it, lambda value: self.bind_target(node.target, value), None, node.body, assigned, node.orelse
        )

    def visit_Break(self, node: ast.Break) -> None:
        frame = self.loops[-1]
        self.store_all_carried(node, frame)
        if frame.broke is not None:
            self.emit(ir.Move(frame.broke, ir.Const(True, Kind.BOOL), self.line()))
        frame.breaks += 1
        self.emit(ir.Break(self.line()))
        self.terminated = True

    def visit_Continue(self, node: ast.Continue) -> None:
        self.store_all_carried(node, self.loops[-1])
        self.emit(ir.Continue(self.line()))
        self.terminated = True

    # -- one loop ------------------------------------------------------------------------------------
    def run_loop(
        self,
        node: ast.stmt | ast.expr,
        it: Iteration | None,
        bind: Callable[[Any], None],
        head: Callable[[], None] | None,
        stmts: list[ast.stmt] | Callable[[], None],
        assigned: set[str],
        orelse: list[ast.stmt],
        *,
        endless: bool = False,
    ) -> None:
        """Compile a loop: each iteration binds its value (`bind`), runs `head` (a while loop's test)
        and then the body (`stmts`, or a function compiling it); `orelse` runs unless a `break` left.
        `assigned`: the names the body binds. `endless`: only `break` (or return) leaves it."""
        body = stmts if callable(stmts) else (lambda: self.compile_body(stmts))
        if isinstance(it, StaticIteration):
            self.unrolled_loop(it, bind, body, orelse)
            return
        has_break = not callable(stmts) and _jumps(stmts, (ast.Break,))
        token = object()
        widen: dict[str, Kind] = {}
        for _ in range(16):
            mark = (len(self.body), dict(self.locals), len(self.returns), self.terminated)
            try:
                self._loop_once(node, it, bind, head, body, assigned, orelse, endless, has_break, token, widen)
                return
            except _Widen as w:
                if w.token is not token or widen.get(w.name) == w.kind:
                    raise
                del self.body[mark[0] :]
                self.locals, self.terminated = mark[1], mark[3]
                del self.returns[mark[2] :]
                widen[w.name] = w.kind
        raise self.error(node, "the kinds of this loop's variables do not settle")

    def _loop_once(
        self,
        node: ast.AST,
        it: RangeIteration | SequenceIteration | None,
        bind: Callable[[Any], None],
        head: Callable[[], None] | None,
        body: Callable[[], None],
        assigned: set[str],
        orelse: list[ast.stmt],
        endless: bool,
        has_break: bool,
        token: object,
        widen: dict[str, Kind],
    ) -> None:
        before = dict(self.locals)
        carried = {
            name: self.carry(node, name, before[name], widen.get(name))
            for name in sorted(assigned)
            if name in before and not isinstance(before[name], (Unbound, MaybeBound))
        }
        broke = None
        if has_break and orelse:
            broke = self.new_var("broke", Kind.BOOL)
            self.emit(ir.Declare(broke, self.line()))
            self.emit(ir.Move(broke, ir.Const(False, Kind.BOOL), self.line()))
        line = self.line()
        # names first bound in the loop are kept for after it only if code outside the loop reads them
        inner = (assigned - set(carried)) & _read_outside(self.fn, node)
        frame = LoopFrame(token, carried, broke, inner=inner, line=line)
        for name in frame.inner:  # bound by an earlier loop, maybe: this one keeps its value in the same place
            if isinstance(before.get(name), MaybeBound):
                frame.kept[name] = (before[name].var, before[name].flag)
        self.loops.append(frame)
        try:
            with self.block({**before, **carried}) as loop:
                value, make = self.loop_variables(node, it, line)
                if value is not None:
                    bind(value)
                if head is not None:
                    head()
                if not self.terminated:
                    body()
                if not self.terminated:
                    self.store_all_carried(node, frame)
        finally:
            self.loops.pop()
        for stmt in frame.before:
            self.emit(stmt)
        self.emit(make(tuple(loop.body)))
        after = {**before, **carried}
        for name in sorted(assigned - set(carried)):
            if name in frame.kept and name not in frame.lost:
                after[name] = MaybeBound(name, *frame.kept[name])
            else:
                after[name] = Unbound(name, "it is only bound inside the loop, which may run zero times")
        self.locals = after
        self.terminated = endless and frame.breaks == 0
        if orelse and not self.terminated:
            if broke is None:
                self.compile_body(orelse)
            else:
                self.branch(node, self.intrinsic("not", Kind.BOOL, broke), orelse, [])

    def loop_variables(
        self, node: ast.AST, it: RangeIteration | SequenceIteration | None, line: int
    ) -> tuple[Any, Callable[[tuple[ir.Stmt, ...]], ir.Stmt]]:
        """The value an iteration binds (made at the top of the body) and how to build the IR loop."""
        if it is None:
            return None, lambda body: ir.Loop(body, line)
        if isinstance(it, RangeIteration):
            if not it.reverse:
                var = self.new_var("i", Kind.INT)
                return var, lambda body: ir.For(var, it.start, it.stop, it.step, body, line)
            # reversed(range(...)): the same items counted down, as range.__reversed__ gives them
            k = self.new_var("k", Kind.INT)
            last, minus_one = it.last, ir.Const(-1, Kind.INT)
            value = self.intrinsic("range_item", Kind.INT, it.start, it.step, k)
            return value, lambda body: ir.For(k, last, minus_one, minus_one, body, line)
        items = tuple(self.new_var("item", _ITEM_KIND[q.kind]) for q in it.seqs)
        index = self.new_var("k", Kind.INT) if _uses_index(it.shape) else None

        def build(shape: Any) -> Any:
            tag = shape[0]
            if tag == "item":
                return items[shape[1]]
            if tag == "index":
                start = shape[1]
                if isinstance(start, ir.Const) and start.value == 0:
                    return index
                return self.intrinsic("int_add", Kind.INT, index, start)
            return ir.Tup(tuple(build(s) for s in shape[1]))

        value = build(it.shape)
        return value, lambda body: ir.ForEach(items, it.seqs, index, body, line, it.starts)

    def unrolled_loop(
        self, it: StaticIteration, bind: Callable[[Any], None], body: Callable[[], None], orelse: list[ast.stmt]
    ) -> None:
        """A loop over a tuple known at compile time: the body compiled once per item, in order."""
        for item in it.items:
            bind(item)
            body()
            if self.terminated:
                return
        self.compile_body(orelse)

    # -- loop-carried variables --------------------------------------------------------------------------
    def carry(self, node: ast.AST, name: str, value: Any, widen: Kind | None = None) -> Any:
        if isinstance(value, ir.Tup):
            return ir.Tup(
                tuple(self.carry(node, name, v) for v in value.items), value.structseq, value.is_list, value.origin
            )
        kind = getattr(value, "kind", None)
        if widen is not None:
            kind = widen
        elif kind in (None, Kind.NONE, Kind.ENUM) or isinstance(value, Static):
            return value  # static: must stay the same through the loop
        var = self.new_var(name, kind)
        self.emit(ir.Declare(var, self.line()))
        self.emit(ir.Move(var, value, self.line()))
        if isinstance(value, ir.Var) and value.name in self.param_vars:
            self.param_vars.add(var.name)
        return self.sized(var) if getattr(value, "size", False) else var

    def store_all_carried(self, node: ast.AST, frame: LoopFrame) -> None:
        """Where an iteration ends (its end, `continue`, `break`): the carried names' values into their
        variables, and the values of names bound inside the loop into the variables that keep them."""
        for name, var in frame.carried.items():
            self.store_carried(node, frame, name, var, self.locals.get(name, Unbound(name)))
        for name in sorted(frame.inner - frame.lost):
            value = self.locals.get(name)
            if value is None or isinstance(value, Unbound):
                continue  # not bound in this iteration (yet): an earlier iteration's value stays
            maybe = value if isinstance(value, MaybeBound) else None  # bound by a loop inside this one
            if maybe is not None:
                value = maybe.var
            kind = getattr(value, "kind", None)
            if name not in frame.kept:
                if not isinstance(value, (ir.Var, ir.Const)) or kind in (None, Kind.NONE, Kind.ENUM):
                    frame.lost.add(name)
                    continue
                var, flag = self.new_var(name, kind), self.new_var(f"{name}_bound", Kind.BOOL)
                frame.before += [
                    ir.Declare(var, frame.line),
                    ir.Declare(flag, frame.line),
                    ir.Move(flag, ir.Const(False, Kind.BOOL), frame.line),
                ]
                frame.kept[name] = (var, flag)
            var, flag = frame.kept[name]
            if not isinstance(value, (ir.Var, ir.Const)) or not fits(var.kind, value):
                frame.lost.add(name)
                continue
            keep = (ir.Move(var, value, self.line()), ir.Move(flag, ir.Const(True, Kind.BOOL), self.line()))
            if maybe is None:
                self.body.extend(keep)
            else:
                self.emit(ir.If(maybe.flag, keep, (), self.line()))

    def store_carried(self, node: ast.AST, frame: LoopFrame, name: str, var: Any, value: Any) -> None:
        if isinstance(value, Unbound):
            raise self.error(node, f"'{name}' may be unbound at the end of an iteration: {value.why}")
        if isinstance(var, ir.Tup):
            if not (isinstance(value, ir.Tup) and len(value.items) == len(var.items)):
                if var.is_list and var.origin is not None:
                    self.need_runtime_list(node, var, value)
                raise self.error(node, f"'{name}' changes shape inside the loop")
            for a, b in zip(var.items, value.items, strict=True):
                self.store_carried(node, frame, name, a, b)
            return
        kind = getattr(value, "kind", None)
        if not isinstance(var, ir.Var):
            if value is var or value == var:
                return
            if isinstance(var, ir.Const) and var.kind == Kind.NONE and (kind in ir.OPTIONAL_OF or kind in ir.HELD_BY):
                raise _Widen(frame.token, name, ir.OPTIONAL_OF.get(kind, kind))  # None, then an X: an X or None
            raise self.error(node, f"'{name}' changes a compile-time value inside the loop")
        widened = _widened(var.kind, value)
        if widened is not None:
            raise _Widen(frame.token, name, widened)
        if not fits(var.kind, value):
            raise self.error(
                node, f"'{name}' changes kind inside the loop ({ir.KIND_NAMES[var.kind]} -> {ops.describe(value)})"
            )
        if getattr(var, "size", False) and not getattr(value, "size", False):
            raise self.error(node, f"'{name}' is a torch.Size before the loop and a tuple or a list inside it")
        if value != var:
            self.emit(ir.Move(var, value, self.line()))


NUMBERS = (Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.NUMBER)


def fits(kind: Kind, value: Any) -> bool:
    """Whether a variable of `kind` can hold `value` exactly (a C++ assignment converts it)."""
    got = getattr(value, "kind", None)
    if got == kind:
        return True
    if kind in ir.HELD_BY:  # an X or None holds an X, or None
        return got == ir.HELD_BY[kind] or (got == Kind.NONE and isinstance(value, ir.Const))
    return kind == Kind.NUMBER and got in NUMBERS


def _widened(kind: Kind, value: Any) -> Kind | None:
    """The kind a variable of `kind` must widen to, to hold `value` too (None: it fits, or nothing does)."""
    got = getattr(value, "kind", None)
    if fits(kind, value):
        return None
    if kind in ir.OPTIONAL_OF and got in (ir.OPTIONAL_OF[kind], Kind.NONE):
        return ir.OPTIONAL_OF[kind]  # an X, then None: an X or None
    if kind in NUMBERS and got in NUMBERS:
        return Kind.NUMBER
    return None


def _read_outside(fn: ast.AST, loop: ast.AST) -> set[str]:
    """Names the function reads outside `loop` (the statement or comprehension)."""
    out: set[str] = set()

    def walk(node: ast.AST) -> None:
        if node is loop:
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(fn)
    return out


def _uses_index(shape: Any) -> bool:
    return shape[0] == "index" or (shape[0] == "tuple" and any(_uses_index(s) for s in shape[1]))
