"""What a loop iterates, resolved before the loop as Python evaluates it.

A ``range``; sequences known only at run time (lists, tuples, a tensor's rows as
``Tensor.__iter__`` makes them with ``unbind(0)``), stepped together by ``zip``,
counted by ``enumerate`` and walked backwards by ``reversed``; or a tuple known at
compile time, whose items a loop body is compiled for one by one. A mixin of
``function.FunctionCompiler``, used by ``loops.py`` and by comprehensions.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from typing import Any

from ..torchlib import ops
from . import ir
from .ir import Kind
from .namespace import static_value
from .values import ModuleValue


@dataclass(frozen=True)
class RangeIteration:
    start: ir.Atom
    stop: ir.Atom
    step: ir.Atom
    reverse: bool = False
    last: ir.Atom | None = None  # reversed: the index of the last item (len - 1), computed before the loop


@dataclass(frozen=True)
class SequenceIteration:
    """Run-time sequences stepped together; `shape` builds each iteration's value from their items:
    ("item", j) | ("index", start) | ("tuple", (shape, ...)). `starts`: for each sequence walked
    backwards (reversed()), the index of its first item (len - 1 when reversed() was called)."""

    seqs: tuple[ir.Atom, ...]
    shape: Any
    starts: tuple[ir.Atom | None, ...] = ()

    @property
    def firsts(self) -> tuple[ir.Atom | None, ...]:
        return self.starts or (None,) * len(self.seqs)


@dataclass(frozen=True)
class StaticIteration:
    items: tuple[Any, ...]


Iteration = RangeIteration | SequenceIteration | StaticIteration


class IterationCompiler:
    """``for ... in <node>``: the iteration of a loop or a comprehension."""

    def repeat_iteration(self, node: ast.Call) -> StaticIteration:
        """``itertools.repeat(x, n)`` iterated where it is made (``tuple(repeat(x, n))``, torch's ``_ntuple``):
        `x`, `n` times, for a count known when compiling."""
        keywords = {k.arg: k.value for k in node.keywords}
        args = [*node.args, *([keywords.pop("times")] if "times" in keywords else [])]
        if keywords or len(args) != 2 or any(isinstance(a, ast.Starred) for a in args):
            raise self.error(node, "itertools.repeat() in a region takes an object and a count")
        obj, times = self.value(args[0]), self.value(args[1])
        if not (isinstance(times, ir.Const) and times.kind in (Kind.INT, Kind.BOOL)):
            raise self.error(node, "itertools.repeat() in a region needs a count known when compiling")
        return StaticIteration((obj,) * max(int(times.value), 0))

    def iteration(self, node: ast.expr, runtime: bool = False) -> Iteration:
        """What `for ... in node` iterates, evaluated as Python evaluates it (once, before the loop):
        zip(), enumerate() and reversed() evaluate their arguments, then take an iterator of each.
        `runtime`: never unrolled (the loop breaks or continues)."""
        fn = static_value(node.func, self.g) if isinstance(node, ast.Call) else None
        if fn is range and not node.keywords:
            return self.range_iteration(node)
        if fn is itertools.repeat:
            return self.repeat_iteration(node)
        if fn not in (zip, enumerate, reversed) or any(isinstance(a, ast.Starred) for a in node.args):
            return self.value_iteration(node, self.value(node), runtime)
        if fn is enumerate:
            keywords = {k.arg: k.value for k in node.keywords}
            if not 1 <= len(node.args) + len(keywords) <= 2 or set(keywords) - {"start"} or not node.args:
                raise self.error(node, "enumerate() takes an iterable and a start")
            arg = self.iterable_value(node.args[0], runtime)
            start_node = node.args[1] if len(node.args) == 2 else keywords.get("start")
            start = self.value(start_node) if start_node is not None else ir.Const(0, Kind.INT)
            if getattr(start, "kind", None) not in (Kind.INT, Kind.BOOL):
                raise self.error(node, f"enumerate() needs an int start in a region, got {ops.describe(start)}")
            part = self.to_iteration(node, arg, runtime)
            return self.enumerate_iteration(node, part, self.as_int(start))
        if node.keywords and not (fn is zip and _zip_default(node.keywords)):
            raise self.error(node, f"{fn.__name__}() with keywords is not supported in a region")
        args = [self.iterable_value(a, runtime) for a in node.args]
        if fn is zip:
            parts = [self.to_iteration(a_node, a, runtime) for a_node, a in zip(node.args, args, strict=True)]
            return self.zip_iterations(node, parts)
        if len(args) != 1:
            raise self.error(node, f"reversed expected 1 argument, got {len(args)}")
        return self.reversed_iteration(node, args[0], runtime)

    def iterable_value(self, node: ast.expr, runtime: bool = False) -> Any:
        """An argument of zip()/enumerate()/reversed(): an iteration if it is one of those calls (made now,
        as Python makes it), else its value."""
        if isinstance(node, ast.Call) and static_value(node.func, self.g) in (
            zip,
            enumerate,
            reversed,
            range,
            itertools.repeat,
        ):
            return self.iteration(node, runtime)
        return self.value(node)

    def to_iteration(self, node: ast.AST, value: Any, runtime: bool = False) -> Iteration:
        if isinstance(value, (RangeIteration, SequenceIteration, StaticIteration)):
            return value
        return self.value_iteration(node, value, runtime)

    def value_iteration(self, node: ast.AST, value: Any, runtime: bool = False) -> Iteration:
        if isinstance(value, ModuleValue):  # zip/enumerate/reversed of a ModuleList or Sequential
            kind, found = self.module_items(node, value)
            if kind == "static" and not runtime:
                return StaticIteration(tuple(found))
            what = (
                "in a loop with break or continue"
                if kind == "static"
                else "here: its modules are known only at the call (zip() and enumerate() of them are)"
            )
            raise self.error(
                node,
                f"reversed(), zip() or enumerate() of {value.path} is not supported {what}; "
                f"write `for m in {value.path}:` and count with a variable of your own",
            )
        if isinstance(value, ir.Tup):
            if runtime:
                return SequenceIteration((self.runtime_sequence(node, value.items),), ("item", 0))
            return StaticIteration(tuple(value.items))
        kind = getattr(value, "kind", None)
        if kind == Kind.TENSOR:  # Tensor.__iter__: TypeError for a 0-d tensor, else iter(self.unbind(0))
            self.check("check_iterable", value)
            rows = self.call_op(node, ops.OpSpec("unbind"), [value], {}, method=True, display="Tensor.__iter__")
            return SequenceIteration((rows,), ("item", 0))
        if kind == Kind.NUMBERS:  # x.tolist(): a TypeError if x was 0-d; known 1-d, else its items are lists
            self.iterable_numbers(node, value)
        if kind in (*ir.SEQUENCE_KINDS, Kind.NUMBERS):
            return SequenceIteration((value,), ("item", 0))
        raise self.error(node, f"iterating over {ops.describe(value)} is not supported in a region")

    def range_iteration(self, node: ast.Call) -> RangeIteration:
        if not 1 <= len(node.args) <= 3:
            raise self.error(node, f"range expected 1 to 3 arguments, got {len(node.args)}")
        bounds = []
        for a in node.args:
            b = self.value(a)
            kind = getattr(b, "kind", None)
            if kind == Kind.NUMBER:
                b = self.intrinsic("number_index", Kind.INT, b)
            elif kind not in (Kind.INT, Kind.BOOL):
                raise self.error(a, f"range() needs ints, got {ops.describe(b)}")
            bounds.append(self.as_int(b))
        one, zero = ir.Const(1, Kind.INT), ir.Const(0, Kind.INT)
        if len(bounds) == 1:
            start, stop, step = zero, bounds[0], one
        elif len(bounds) == 2:
            start, stop, step = bounds[0], bounds[1], one
        else:
            start, stop, step = bounds
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(node, "range() arg 3 must not be zero")
        if not isinstance(step, ir.Const):
            self.check("check_range_step", step)
        return RangeIteration(start, stop, step)

    def zip_iterations(self, node: ast.AST, parts: list[Iteration]) -> Iteration:
        if all(isinstance(p, StaticIteration) for p in parts):
            n = min((len(p.items) for p in parts), default=0)
            return StaticIteration(tuple(ir.Tup(tuple(p.items[k] for p in parts)) for k in range(n)))
        seqs: list[ir.Atom] = []
        starts: list[ir.Atom | None] = []
        shapes = []
        for p in parts:
            p = self.as_sequence_iteration(node, p)
            offset = len(seqs)
            seqs += p.seqs
            starts += p.firsts
            shapes.append(_shift(p.shape, offset))
        return SequenceIteration(tuple(seqs), ("tuple", tuple(shapes)), tuple(starts))

    def enumerate_iteration(self, node: ast.AST, part: Iteration, start: ir.Atom) -> Iteration:
        if isinstance(part, StaticIteration) and isinstance(start, ir.Const):
            return StaticIteration(
                tuple(ir.Tup((ir.Const(start.value + k, Kind.INT), item)) for k, item in enumerate(part.items))
            )
        p = self.as_sequence_iteration(node, part)
        return SequenceIteration(p.seqs, ("tuple", (("index", start), p.shape)), p.starts)

    def reversed_iteration(self, node: ast.AST, arg: Any, runtime: bool = False) -> Iteration:
        if getattr(arg, "kind", None) == Kind.TENSOR:
            # Tensor.__reversed__ is flip(0) (the tensor itself if 0-d, which iter() then refuses)
            self.check("check_iterable", arg)
            flipped = self.call_op(node, ops.OpSpec("flip"), [arg, ir.Const(0, Kind.INT)], {}, method=True)
            return self.value_iteration(node, flipped)
        if isinstance(arg, RangeIteration) and not arg.reverse:
            n = self.intrinsic("range_len", Kind.INT, arg.start, arg.stop, arg.step)
            last = self.intrinsic("int_sub", Kind.INT, n, ir.Const(1, Kind.INT))
            return RangeIteration(arg.start, arg.stop, arg.step, True, last)
        if isinstance(arg, (RangeIteration, SequenceIteration, StaticIteration)):
            raise self.error(node, "reversed() of an iterator (zip, enumerate, reversed) fails in Python too")
        if isinstance(arg, ir.Tup):
            return self.value_iteration(node, ir.Tup(tuple(reversed(arg.items))), runtime)
        if isinstance(arg, ModuleValue):
            modules = self.value_iteration(node, arg, runtime)
            assert isinstance(modules, StaticIteration)
            return StaticIteration(tuple(reversed(modules.items)))
        if getattr(arg, "kind", None) == Kind.NUMBERS:  # a 0-d tensor's number is "not reversible", not "not iterable"
            raise self.error(node, "reversed() of x.tolist() is not supported in a region; iterate x.flip(0).tolist()")
        part = self.value_iteration(node, arg)
        (seq,) = part.seqs  # a list's reverse iterator starts at its last item, as it is when reversed() runs
        n = self.intrinsic("seq_len", Kind.INT, seq)
        return SequenceIteration(
            part.seqs, part.shape, (self.intrinsic("int_sub", Kind.INT, n, ir.Const(1, Kind.INT)),)
        )

    def as_sequence_iteration(self, node: ast.AST, part: Iteration) -> SequenceIteration:
        if isinstance(part, SequenceIteration):
            return part
        if isinstance(part, StaticIteration):
            return SequenceIteration((self.runtime_sequence(node, part.items),), ("item", 0))
        raise self.error(node, "zip() or enumerate() of range() is not supported in a region; index instead")

    def runtime_sequence(self, node: ast.AST, items: tuple[Any, ...]) -> ir.Atom:
        """A tuple known at compile time as a run-time one (its items must be of one kind)."""
        kinds = {getattr(i, "kind", None) for i in items}
        if len(kinds) != 1 or not isinstance(items[0], (ir.Var, ir.Const)) or kinds.pop() not in ir.LIST_OF:
            raise self.error(
                node,
                "a loop with break or continue, or zip() of a run-time sequence, over a tuple whose items "
                "are not all tensors, all ints or all floats is not supported in a region",
            )
        return self.intrinsic("list_of", ir.LIST_OF[items[0].kind], *items)


def _zip_default(keywords: list[ast.keyword]) -> bool:
    """`zip(..., strict=False)`: zip as it is by default (strict=True checks lengths when the shortest ends)."""
    return (
        len(keywords) == 1
        and keywords[0].arg == "strict"
        and isinstance(keywords[0].value, ast.Constant)
        and keywords[0].value.value is False
    )


def _shift(shape: Any, offset: int) -> Any:
    if shape[0] == "item":
        return ("item", shape[1] + offset)
    if shape[0] == "tuple":
        return ("tuple", tuple(_shift(s, offset) for s in shape[1]))
    return shape
