"""Builtins that consume an iterable in the region language: sum, any, all, min, max, list and tuple.

A mixin of ``function.FunctionCompiler``: each runs over a run-time list, a tuple or a generator
expression as Python runs it (the same order of evaluation, the same errors), with the iteration
of ``iteration.py`` and the comprehension machinery of ``lists.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from typing import Any

from ..torchlib import ops
from . import ir
from .ir import Kind
from .iteration import SequenceIteration, StaticIteration
from .values import Static

CONSUMERS = (sum, any, all, min, max, list, tuple)


class ConsumerCompiler:
    """``sum(xs)``, ``any(xs)``, ``max(xs)``, ``list(xs)``... of an iterable."""

    # -- builtins that consume an iterable -----------------------------------------------------------
    def consume(self, node: ast.Call, fn: Any) -> Any:
        """sum/any/all/min/max/list/tuple of an iterable or a generator expression, as Python runs them."""
        name = fn.__name__
        if fn in (min, max) and len(node.args) > 1:
            if node.keywords:
                raise self.error(node, f"{name}() with keywords is not supported in a region")
            items = tuple(self.value(a) for a in node.args)
            return self.extreme(node, fn, (node, StaticIteration(items), []))
        keywords = {k.arg: k.value for k in node.keywords}
        allowed = {"start"} if fn is sum else set()
        if len(node.args) != 1 or set(keywords) - allowed or any(isinstance(a, ast.Starred) for a in node.args):
            if fn is sum and len(node.args) == 2 and not keywords:
                keywords = {"start": node.args[1]}
            else:
                raise self.error(node, f"{name}() with these arguments is not supported in a region")
        arg = node.args[0]
        if fn in (list, tuple) and not isinstance(arg, ast.GeneratorExp):
            value = self.iterable_value(arg)
            return self.list_of_value(node, value) if fn is list else self.tuple_of_value(node, value)
        source = self.source(arg)
        if fn is sum:
            start = self.value(keywords["start"]) if "start" in keywords else ir.Const(0, Kind.INT)
            return self.sum_of(node, source, start)
        if fn in (any, all):
            return self.any_all(node, source, fn is any)
        if fn in (min, max):
            return self.extreme(node, fn, source)
        made = self.build_list(node, source)
        return made if fn is list else self.tuple_of_value(node, made)

    def list_of_value(self, node: ast.AST, value: Any) -> Any:
        """list(x): a new list."""
        if isinstance(value, ir.Tup):
            return self.make_list(node, value.items)
        kind = getattr(value, "kind", None)
        if kind in ir.LIST_KINDS or kind in (Kind.TENSORS, Kind.INTS):
            return self.intrinsic("list_from", ir.LIST_OF[ir.ITEM_KIND[kind]], value)
        return self.build_list(node, (node, self.to_iteration(node, value), []))

    def tuple_of_value(self, node: ast.AST, value: Any) -> Any:
        """tuple(x): the same items as a tuple."""
        if isinstance(value, ir.Tup):
            return ir.Tup(tuple(value.items))
        kind = getattr(value, "kind", None)
        if kind in (Kind.TENSORS, Kind.INTS):
            if isinstance(value, ir.Var) and value.name in self.param_vars:  # a tuple now, whatever it was
                copy = self.new_var("tuple", kind)
                self.emit(ir.Declare(copy, self.line()))
                self.emit(ir.Move(copy, value, self.line()))
                return copy
            return dataclasses.replace(value, size=False) if getattr(value, "size", False) else value  # not a Size
        if kind in (Kind.TENSOR_LIST, Kind.INT_LIST):
            return self.intrinsic("tuple_from", Kind.TENSORS if kind == Kind.TENSOR_LIST else Kind.INTS, value)
        if kind == Kind.TENSOR or isinstance(value, (SequenceIteration, StaticIteration)):
            return self.tuple_of_value(node, self.list_of_value(node, value))
        raise self.error(node, f"tuple() of {ops.describe(value)} is not supported in a region")

    def sum_of(self, node: ast.AST, source: Any, start: Any) -> Any:
        elt, first, gens = source
        floats = sys.version_info >= (3, 12)  # sum() of floats is compensated (Neumaier) from 3.12 on
        if isinstance(first, StaticIteration) and len(gens) <= 1 and not (gens and gens[0].ifs):
            items: list[Any] = []
            self.each(node, source, items.append)
            acc = start
            for item in items:
                if floats and Kind.FLOAT in (getattr(acc, "kind", None), getattr(item, "kind", None)):
                    raise self.error(node, "sum() of floats is compensated in this Python; not in a region")
                acc = self.binop(node, ast.Add(), acc, item)
            return acc
        at, outer = len(self.body), self.body
        made: list[ir.Var] = []

        def add(value: Any) -> None:
            kinds = (getattr(start, "kind", None), getattr(value, "kind", None))
            if floats and Kind.FLOAT in kinds:
                raise self.error(node, "sum() of floats is compensated in this Python; not in a region")
            if not made:
                kind = _sum_kind(*kinds)
                if kind is None:
                    raise self.error(
                        node,
                        f"sum() of {ops.describe(value)} items from {ops.describe(start)}, over a sequence whose "
                        "length is known only at run time, is not supported in a region"
                        + (": empty, it is the int 0" if kinds[1] == Kind.TENSOR else ""),
                        "Pass a tensor start (sum(xs, start)), or add the items in a loop."
                        if kinds[1] == Kind.TENSOR
                        else None,
                    )
                var = self.new_var("total", kind)
                outer[at:at] = [ir.Declare(var, self.line()), ir.Move(var, start, self.line())]
                made.append(var)
            total = self.binop(node, ast.Add(), made[0], value)
            if getattr(total, "kind", None) != made[0].kind and not (made[0].kind == Kind.NUMBER):
                raise self.error(node, "the running sum changes kind in this sum()")
            self.emit(ir.Move(made[0], total, self.line()))

        self.each(node, source, add)
        return made[0] if made else start

    def any_all(self, node: ast.AST, source: Any, is_any: bool) -> ir.Var:
        """any()/all(): the items' truth in order, stopping at the first that decides."""
        result = self.new_var("any" if is_any else "all", Kind.BOOL)
        done = self.new_var("decided", Kind.BOOL)
        for var, init in ((result, not is_any), (done, False)):
            self.emit(ir.Declare(var, self.line()))
            self.emit(ir.Move(var, ir.Const(init, Kind.BOOL), self.line()))

        def item(value: Any) -> None:
            t = self.truth_of(node, value)
            decide = (ir.Move(result, ir.Const(is_any, Kind.BOOL), self.line()), ir.Move(done, t, self.line()))
            if is_any:
                self.emit(ir.If(t, decide, (), self.line()))
            else:
                self.emit(
                    ir.If(t, (), decide[:1] + (ir.Move(done, ir.Const(True, Kind.BOOL), self.line()),), self.line())
                )

        self.each(node, source, item, stop=done)
        return result

    def extreme(self, node: ast.AST, fn: Any, source: Any) -> Any:
        """min()/max(): the first item, replaced by each later one that compares below (above) it."""
        name = fn.__name__
        op = ast.Lt() if fn is min else ast.Gt()
        elt, first, gens = source
        if isinstance(first, StaticIteration) and not gens:
            items = list(first.items)
            if not items:
                raise self.error(node, f"{name}() arg is an empty sequence, in Python too")
            if all(isinstance(i, ir.Const) for i in items):
                return self.fold(node, fn, *items)
        at, outer = len(self.body), self.body
        made: list[ir.Var] = []
        seen = self.new_var("seen", Kind.BOOL)

        def item(value: Any) -> None:
            kind = getattr(value, "kind", None)
            if not made:
                if kind not in (Kind.TENSOR, Kind.INT, Kind.FLOAT, Kind.NUMBER) or isinstance(value, Static):
                    raise self.error(node, f"{name}() of {ops.describe(value)} is not supported in a region")
                var = self.new_var(name, kind)
                outer[at:at] = [
                    ir.Declare(var, self.line()),
                    ir.Declare(seen, self.line()),
                    ir.Move(seen, ir.Const(False, Kind.BOOL), self.line()),
                ]
                made.append(var)
            best = made[0]
            if kind != best.kind:
                raise self.error(node, f"{name}() of items of different kinds is not supported in a region")
            with self.block() as later:
                better = self.truth_of(node, self.compare(node, op, value, best))
                self.emit(ir.If(better, (ir.Move(best, value, self.line()),), (), self.line()))
            first_one = (ir.Move(best, value, self.line()), ir.Move(seen, ir.Const(True, Kind.BOOL), self.line()))
            self.emit(ir.If(seen, tuple(later.body), first_one, self.line()))

        self.each(node, source, item)
        if not made:
            raise self.error(node, f"{name}() arg is an empty sequence, in Python too")
        n = self.intrinsic("to_int", Kind.INT, seen)
        self.check("check_nonempty", n, ir.Const(f"{name}() arg is an empty sequence", Kind.STR))
        return made[0]


def _sum_kind(start: Kind | None, item: Kind | None) -> Kind | None:
    """The kind of a running sum() from `start` over items of `item` kind, whatever their number."""
    ints = (Kind.INT, Kind.BOOL)
    numbers = (Kind.INT, Kind.BOOL, Kind.FLOAT, Kind.NUMBER)
    if item == Kind.TENSOR:
        return Kind.TENSOR if start == Kind.TENSOR else None
    if start in ints and item in ints:
        return Kind.INT
    if start == Kind.FLOAT and item in (Kind.FLOAT, *ints):
        return Kind.FLOAT
    if start in numbers and item in numbers:
        return Kind.NUMBER
    return None
