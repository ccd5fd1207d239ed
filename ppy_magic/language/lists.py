"""Lists of the region language: displays, comprehensions, methods, and the builtins that consume iterables.

A mixin of ``function.FunctionCompiler``. A list is known at compile time (an
``ir.Tup`` with ``is_list``: its length and items are static) until the code
changes it: the first ``append``, ``pop``, item assignment, ``+=`` or change of
length in a loop raises ``RuntimeListNeeded`` with the display that made it, and
the function is compiled again with that display a run-time list (one shared
object in C++, as a Python list is shared by every name bound to it). A
run-time list holds tensors, ints or floats, one kind per list.

A list passed in as a parameter is read, never changed: a body that changes it
stays Python (the region would change a copy, not the caller's list).

Comprehensions and the reductions ``sum``, ``any``, ``all``, ``min``, ``max``
(and ``list``/``tuple`` of an iterable) run the loops of ``loops.py`` with
Python's order of evaluation and short-circuiting.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, NoReturn

from ..torchlib import ops
from . import ir
from .ir import Kind
from .iteration import Iteration, StaticIteration

# Methods of a list a region supports; the mutating ones change a run-time list in place.
LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "clear", "reverse", "copy"})
MUTATING = frozenset({"append", "extend", "insert", "pop", "clear", "reverse"})
# Builtins that consume an iterable (a generator expression among them).


class RuntimeListNeeded(Exception):
    """A list known at compile time changes: compile the function again with it a run-time list."""

    def __init__(self, key: Any, kind: Kind, node: ast.AST):
        super().__init__(key)
        self.key, self.kind, self.node = key, kind, node


class ListMethod:
    """`xs.append` and the like, before the call."""

    def __init__(self, receiver: Any, name: str):
        self.receiver, self.name = receiver, name


class ListCompiler:
    # -- making lists ----------------------------------------------------------------------------------
    def list_key(self, node: ast.AST) -> Any:
        return id(node)

    def make_list(self, node: ast.AST, items: list[Any] | tuple[Any, ...]) -> Any:
        """A new list of `items`, made at `node`: known at compile time unless the code changes it."""
        kind = self.ctx.list_kinds.get(self.list_key(node))
        if kind is None:
            return ir.Tup(tuple(items), is_list=True, origin=self.list_key(node))
        return self.runtime_list(node, list(items), kind)

    def runtime_list(self, node: ast.AST, items: list[Any], kind: Kind) -> ir.Var:
        want = ir.ITEM_KIND[kind]
        for item in items:
            if getattr(item, "kind", None) != want or not isinstance(item, (ir.Var, ir.Const)):
                raise self.error(
                    node,
                    f"this list changes, so it must hold items of one kind, but it holds "
                    f"{ir.KIND_NAMES[want]} and {ops.describe(item)}",
                    "A region keeps a changing list of tensors, of ints or of floats.",
                )
        if not items:
            return self.assign(ir.Intrinsic("list_new", ()), kind, base="list")
        return self.assign(ir.Intrinsic("list_of", tuple(items)), kind, base="list")

    def need_runtime_list(self, node: ast.AST, tup: ir.Tup, added: Any = None) -> NoReturn:
        """`tup`, a list known at compile time, changes (by `added` items): it must be a run-time list."""
        kinds = {getattr(i, "kind", None) for i in tup.items}
        if added is not None:
            kinds |= set(_item_kinds(added))
        kind = kinds.pop() if len(kinds) == 1 else None
        if tup.origin is None or kind not in ir.LIST_OF:
            raise self.error(
                node,
                "a list that changes must hold only tensors, only ints or only floats in a region",
                "Build the list from one kind of item, or keep this function Python.",
            )
        raise RuntimeListNeeded(tup.origin, ir.LIST_OF[kind], node)

    def as_runtime_list(self, node: ast.AST, value: Any, kind: Kind | None = None) -> ir.Atom:
        """A list value as a run-time list: a static one made one (it must then have been made so)."""
        if getattr(value, "kind", None) in ir.LIST_KINDS:
            return value
        if isinstance(value, ir.Tup) and value.is_list:
            if not value.items and kind is not None:
                return self.runtime_list(node, [], kind)
            self.need_runtime_list(node, value)
        raise self.error(node, f"expected a list, got {ops.describe(value)}")

    def visit_List(self, node: ast.List) -> Any:
        return self.make_list(node, self.starred_items(node.elts))

    # -- comprehensions ------------------------------------------------------------------------------
    def visit_ListComp(self, node: ast.ListComp) -> Any:
        return self.build_list(node, self.source(node))

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        raise self.error(
            node,
            "a generator expression is supported in a region only as the argument of "
            "sum(), any(), all(), min(), max(), list() or tuple()",
        )

    def source(self, node: ast.expr) -> tuple[ast.expr, Iteration, list[ast.comprehension]]:
        """An iterable about to be consumed: a comprehension's first iterable is evaluated now, in the
        enclosing scope, as Python does when it creates the generator; a plain iterable is evaluated."""
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            gens = node.generators
            if any(g.is_async for g in gens):
                raise self.error(node, "async comprehensions are not supported in a region")
            return node.elt, self.iteration(gens[0].iter), gens
        it = self.iteration(node)
        return node, it, []

    def each(
        self,
        node: ast.AST,
        source: tuple[ast.expr, Iteration, list[ast.comprehension]],
        on_item: Callable[[Any], None],
        stop: ir.Var | None = None,
    ) -> None:
        """Run `on_item(value)` for every item of `source` (its comprehension's element, evaluated in the
        comprehension's scope). `stop`: a bool that, once true, ends the iteration before the next item."""
        elt, first, gens = source
        saved = dict(self.locals)
        try:
            if not gens:
                self._level(node, first, None, stop, lambda value: on_item(value))
            else:
                self._generators(node, elt, gens, 0, first, on_item, stop)
        finally:
            self.locals = saved  # a comprehension's names are its own

    def _generators(
        self,
        node: ast.AST,
        elt: ast.expr,
        gens: list[ast.comprehension],
        i: int,
        it: Iteration | None,
        on_item: Callable[[Any], None],
        stop: ir.Var | None,
    ) -> None:
        if i == len(gens):
            on_item(self.value(elt))
            return
        gen = gens[i]
        it = it if it is not None else self.iteration(gen.iter)

        def body(value: Any) -> None:
            self.bind_target(gen.target, value)
            self._conditions(gen.ifs, lambda: self._generators(node, elt, gens, i + 1, None, on_item, stop))

        self._level(node, it, gen, stop, body)

    def _level(
        self,
        node: ast.AST,
        it: Iteration,
        gen: ast.comprehension | None,
        stop: ir.Var | None,
        body: Callable[[Any], None],
    ) -> None:
        """One loop of a comprehension: `body(value)` per item."""
        current: list[Any] = []

        def bind(value: Any) -> None:
            current[:] = [value]

        def run() -> None:
            if stop is not None and not isinstance(it, StaticIteration):
                self.emit(ir.If(stop, (ir.Break(self.line()),), (), self.line()))
            body(current[0])

        if isinstance(it, StaticIteration) and stop is not None:
            for item in it.items:  # unrolled: each item only while not stopped
                go = self.intrinsic("not", Kind.BOOL, stop)
                with self.block() as guarded:
                    body(item)
                self.emit(ir.If(go, tuple(guarded.body), (), self.line()))
            return
        self.run_loop(node, it, bind, None, run, set(), [])

    def _conditions(self, ifs: list[ast.expr], rest: Callable[[], None]) -> None:
        if not ifs:
            rest()
            return
        t = self.truth(ifs[0])
        if isinstance(t, ir.Const):
            if t.value:
                self._conditions(ifs[1:], rest)
            return
        with self.block() as then:
            self._conditions(ifs[1:], rest)
        self.emit(ir.If(t, tuple(then.body), (), self.line()))

    def build_list(self, node: ast.AST, source: tuple[ast.expr, Iteration, list[ast.comprehension]]) -> Any:
        """A new list of the items of `source` (a list comprehension, list(iterable))."""
        elt, first, gens = source
        simple = isinstance(first, StaticIteration) and len(gens) <= 1 and not (gens and gens[0].ifs)
        if simple and self.ctx.list_kinds.get(self.list_key(node)) is None:
            items: list[Any] = []
            self.each(node, source, items.append)
            return self.make_list(node, items)
        at = len(self.body)
        outer = self.body
        made: list[ir.Var] = []

        def add(value: Any) -> None:
            kind = ir.LIST_OF.get(getattr(value, "kind", None))
            if not made:
                if kind is None or not isinstance(value, (ir.Var, ir.Const)):
                    raise self.error(
                        node,
                        f"a list built in a loop must hold tensors, ints or floats, not {ops.describe(value)}",
                    )
                var = self.new_var("list", kind)
                outer.insert(at, ir.Assign((var,), ir.Intrinsic("list_new", ()), self.line()))
                made.append(var)
            elif kind != made[0].kind:
                raise self.error(node, "a list built in a loop must hold items of one kind")
            self.emit(ir.Effect(ir.Intrinsic("list_append", (made[0], value)), self.line()))

        self.each(node, source, add)
        return made[0] if made else self.make_list(node, [])

    # -- methods -----------------------------------------------------------------------------------------
    def list_attribute(self, node: ast.Attribute, base: Any) -> ListMethod:
        if node.attr not in LIST_METHODS:
            raise self.error(node, f"`.{node.attr}()` of {ops.describe(base)} is not supported in a region")
        return ListMethod(base, node.attr)

    def list_method_call(self, node: ast.Call, m: ListMethod, args: list, kwargs: dict) -> Any:
        lst, name = m.receiver, m.name
        if kwargs:
            raise self.error(node, f"list.{name}() takes no keyword arguments")
        kind = getattr(lst, "kind", None)
        if isinstance(lst, ir.Tup):
            if not lst.is_list:
                raise self.error(node, f"a tuple has no `.{name}()`")
            if name == "copy":
                return self.make_list(node, lst.items)
            if name in ("clear", "reverse") and not lst.items:
                return ir.Const(None, Kind.NONE)  # nothing changes
            if name == "pop" and not lst.items:
                raise self.error(node, "pop from an empty list fails in Python too")
            added = args[-1] if name in ("append", "insert") else args[0] if name == "extend" and args else None
            if name == "append" and added is not None:
                added = ir.Tup((added,))
            if name == "insert" and added is not None:
                added = ir.Tup((added,))
            self.need_runtime_list(node, lst, added)
        if kind in (Kind.TENSORS, Kind.INTS):
            if name == "copy" or name not in MUTATING:
                return self.list_of_value(node, lst)
            if isinstance(lst, ir.Var) and lst.name in self.param_vars:
                raise self.error(
                    node,
                    f"`.{name}()` would change the caller's list, but a region changes a copy of a list parameter",
                    "Copy it first (xs = list(xs)), or keep this function Python.",
                )
            raise self.error(node, f"a tuple has no `.{name}()`")
        if kind not in ir.LIST_KINDS:
            raise self.error(node, f"`.{name}()` of {ops.describe(lst)} is not supported in a region")
        item = ir.ITEM_KIND[kind]

        def arity(n: int, most: int | None = None) -> None:
            if not n <= len(args) <= (n if most is None else most):
                raise self.error(node, f"list.{name}() takes {n} argument(s), got {len(args)}")

        def of_item(v: Any) -> Any:
            if getattr(v, "kind", None) != item or not isinstance(v, (ir.Var, ir.Const)):
                raise self.error(
                    node, f"{ir.KIND_NAMES[kind]} cannot hold {ops.describe(v)} in a region (one kind of item)"
                )
            return v

        def index(v: Any) -> ir.Atom:
            if getattr(v, "kind", None) not in (Kind.INT, Kind.BOOL):
                raise self.error(node, f"a list index must be an int, got {ops.describe(v)}")
            return self.as_int(v)

        none = ir.Const(None, Kind.NONE)
        if name == "append":
            arity(1)
            self.emit(ir.Effect(ir.Intrinsic("list_append", (lst, of_item(args[0]))), self.line()))
            return none
        if name == "extend":
            arity(1)
            self.emit(ir.Effect(ir.Intrinsic("list_extend", (lst, self.items_of(node, args[0], kind))), self.line()))
            return none
        if name == "insert":
            arity(2)
            self.emit(ir.Effect(ir.Intrinsic("list_insert", (lst, index(args[0]), of_item(args[1]))), self.line()))
            return none
        if name == "pop":
            arity(0, 1)
            i = index(args[0]) if args else ir.Const(-1, Kind.INT)
            return self.intrinsic("list_pop", item, lst, i)
        if name == "copy":
            arity(0)
            return self.intrinsic("list_from", kind, lst)
        arity(0)
        self.emit(ir.Effect(ir.Intrinsic(f"list_{name}", (lst,)), self.line()))
        return none

    def items_of(self, node: ast.AST, value: Any, kind: Kind) -> ir.Atom:
        """What `l.extend(value)` / `l += value` adds to a run-time list of `kind`: a run-time sequence."""
        item = ir.ITEM_KIND[kind]
        got = getattr(value, "kind", None)
        if got == kind or (got in (Kind.TENSORS, Kind.INTS) and ir.ITEM_KIND[got] == item):
            return value
        if isinstance(value, ir.Tup):
            if not value.items:
                return self.runtime_list(node, [], kind)
            return self.runtime_list(node, list(value.items), kind)
        if got == Kind.TENSOR and item == Kind.TENSOR:  # extend iterates: the tensor's rows
            self.check("check_iterable", value)
            return self.call_op(node, ops.OpSpec("unbind"), [value], {}, method=True, display="Tensor.__iter__")
        raise self.error(node, f"cannot add the items of {ops.describe(value)} to {ir.KIND_NAMES[kind]}")

    # -- operators ---------------------------------------------------------------------------------------
    def list_binop(self, node: ast.AST, op: ast.operator, lhs: Any, rhs: Any) -> Any | None:
        """`+` and `*` where a list or a run-time sequence is involved; None if neither is."""
        lk, rk = getattr(lhs, "kind", None), getattr(rhs, "kind", None)
        lists = (*ir.LIST_KINDS, Kind.TENSORS)
        l_list = lk in lists or (isinstance(lhs, ir.Tup) and lhs.is_list)
        r_list = rk in lists or (isinstance(rhs, ir.Tup) and rhs.is_list)
        if not (l_list or r_list):
            return None
        for v in (lhs, rhs):
            self.not_a_list_parameter(node, v, "`+` or `*` on a list parameter (or a slice of one)")
        t = type(op)
        if t is ast.Add and l_list and r_list:
            if isinstance(lhs, ir.Tup) and isinstance(rhs, ir.Tup):
                if lhs.is_list != rhs.is_list:
                    raise self.error(node, "adding a list and a tuple fails in Python too")
                return self.make_list(node, lhs.items + rhs.items) if lhs.is_list else ir.Tup(lhs.items + rhs.items)
            if lk == Kind.TENSORS or rk == Kind.TENSORS:  # run-time tuples
                if lk != rk:
                    raise self.error(node, f"`+` on {ops.describe(lhs)} and {ops.describe(rhs)} is not supported")
                return self.intrinsic("seq_concat", Kind.TENSORS, lhs, rhs)
            kind = lk if lk in ir.LIST_KINDS else rk
            a = self.items_as_list(node, lhs, kind)
            b = self.items_as_list(node, rhs, kind)
            return self.intrinsic("list_concat", kind, a, b)
        if t is ast.Mult:
            seq, n = (lhs, rhs) if l_list else (rhs, lhs)
            if getattr(n, "kind", None) not in (Kind.INT, Kind.BOOL):
                raise self.error(node, f"can't multiply a sequence by {ops.describe(n)}")
            n = self.as_int(n)
            if isinstance(seq, ir.Tup):
                if isinstance(n, ir.Const):
                    return self.make_list(node, seq.items * n.value)
                kinds = {getattr(i, "kind", None) for i in seq.items}
                if len(kinds) != 1 or (kind := kinds.pop()) not in ir.LIST_OF:
                    raise self.error(node, "a list of mixed items repeated a run-time number of times")
                return self.intrinsic(
                    "list_repeat", ir.LIST_OF[kind], self.runtime_list(node, list(seq.items), ir.LIST_OF[kind]), n
                )
            if seq.kind == Kind.TENSORS:
                return self.intrinsic("seq_repeat", Kind.TENSORS, seq, n)
            return self.intrinsic("list_repeat", seq.kind, seq, n)
        raise self.error(node, f"`{type(op).__name__}` on {ops.describe(lhs)} and {ops.describe(rhs)} is not supported")

    def items_as_list(self, node: ast.AST, value: Any, kind: Kind) -> ir.Atom:
        if getattr(value, "kind", None) == kind:
            return value
        if isinstance(value, ir.Tup) and value.is_list:
            return self.runtime_list(node, list(value.items), kind)
        raise self.error(node, f"can only concatenate a list (not {ops.describe(value)}) to a list")

    def list_augassign(self, node: ast.AugAssign, current: Any, rhs: Any) -> Any | None:
        """`l += s` and `l *= n` on a list: in place, the name still bound to the same list."""
        kind = getattr(current, "kind", None)
        is_static = isinstance(current, ir.Tup) and current.is_list
        if not (kind in ir.LIST_KINDS or is_static) or type(node.op) not in (ast.Add, ast.Mult):
            return None
        if is_static:
            if isinstance(node.op, ast.Add) and isinstance(rhs, ir.Tup) and not rhs.items:
                return current  # nothing added
            if isinstance(node.op, ast.Mult) and rhs == ir.Const(1, Kind.INT):
                return current
            self.need_runtime_list(node, current, rhs if isinstance(node.op, ast.Add) else None)
        if isinstance(node.op, ast.Add):
            self.emit(ir.Effect(ir.Intrinsic("list_extend", (current, self.items_of(node, rhs, kind))), self.line()))
        else:
            if getattr(rhs, "kind", None) not in (Kind.INT, Kind.BOOL):
                raise self.error(node, f"can't multiply a sequence by {ops.describe(rhs)}")
            self.emit(ir.Effect(ir.Intrinsic("list_repeat_inplace", (current, self.as_int(rhs))), self.line()))
        return current

    def list_setitem(self, target: ast.Subscript, base: Any, value: Any) -> bool:
        """`l[i] = v` on a list; False if `base` is not one."""
        if isinstance(base, ir.Tup):
            if not base.is_list:
                raise self.error(target, "a tuple does not support item assignment, in Python too")
            self.need_runtime_list(target, base, ir.Tup((value,)))
        kind = getattr(base, "kind", None)
        if kind in (Kind.TENSORS, Kind.INTS):
            if isinstance(base, ir.Var) and base.name in self.param_vars:
                raise self.error(
                    target,
                    "this would change the caller's list, but a region changes a copy of a list parameter",
                    "Copy it first (xs = list(xs)), or keep this function Python.",
                )
            raise self.error(target, "a tuple does not support item assignment, in Python too")
        if kind not in ir.LIST_KINDS:
            return False
        if isinstance(target.slice, ast.Slice):
            raise self.error(target, "assigning to a slice of a list is not supported in a region")
        i = self.value(target.slice)
        if getattr(i, "kind", None) not in (Kind.INT, Kind.BOOL):
            raise self.error(target, f"list indices must be ints, not {ops.describe(i)}")
        if getattr(value, "kind", None) != ir.ITEM_KIND[kind]:
            raise self.error(target, f"{ir.KIND_NAMES[kind]} cannot hold {ops.describe(value)} in a region")
        self.emit(ir.Effect(ir.Intrinsic("list_set", (base, self.as_int(i), value)), self.line()))
        return True


def _item_kinds(value: Any) -> list[Any]:
    if isinstance(value, ir.Tup):
        return [getattr(i, "kind", None) for i in value.items]
    kind = getattr(value, "kind", None)
    if kind in ir.ITEM_KIND:
        return [ir.ITEM_KIND[kind]]
    return [kind]
