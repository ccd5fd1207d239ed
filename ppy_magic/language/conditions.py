"""Truth and comparisons in the region language: tests, and, or, not, comparisons, in, is, conditional expressions.

A mixin of ``function.FunctionCompiler``: a test's truth is taken as the interpreter takes it (each
operand's once, ``and``/``or`` short-circuiting), a chained comparison evaluates each operand once,
and a conditional expression compiles both branches and joins their values.
"""

from __future__ import annotations

import ast
import builtins
import enum
from typing import Any

from ..torchlib import ops
from . import ir
from .expressions import NUMBERS
from .ir import Kind
from .liveness import stored
from .statement_facts import SCOPES
from .values import (
    COMPARE_INTRINSICS,
    PY_COMPARE,
    Closure,
    KwArgs,
    MaybeBound,
    ModuleValue,
    OptionalScalar,
    Static,
    TensorMethod,
    Unbound,
    UnionValue,
    describe_node,
)


class ConditionCompiler:
    """Tests and comparisons: conditions, ``and``/``or``/``not``, ``==``, ``in``, ``is``, ``a if c else b``."""

    def truth(self, node: ast.expr) -> ir.Atom:
        """The truth of a test, as `if`/`while`/`assert`/`not` take it: `a and b` there is bool(a), then
        bool(b) only if needed (each operand's truth taken once, as the interpreter takes it)."""
        if isinstance(node, ast.BoolOp):
            return self.short_circuit(node, isinstance(node.op, ast.And), self.bool_operands(node, self.truth))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.negated(self.truth(node.operand))
        return self.truth_of(node, self.value(node))

    def negated(self, t: ir.Atom) -> ir.Atom:
        """`not t` of a truth: decided when compiling where `t` is."""
        return ir.Const(not t.value, Kind.BOOL) if isinstance(t, ir.Const) else self.intrinsic("not", Kind.BOOL, t)

    def truth_of(self, node: ast.AST, v: Any) -> ir.Atom:
        if isinstance(v, ir.Const):
            return ir.Const(bool(v.value), Kind.BOOL)
        if isinstance(v, ir.Tup):
            return ir.Const(bool(v.items), Kind.BOOL)
        if isinstance(v, Static):
            return ir.Const(bool(v.value), Kind.BOOL)
        if isinstance(v, TensorMethod):  # `x.is_leaf`: an attribute the region does not read
            raise self.error(node, f"the tensor attribute `.{v.name}` is not supported in a region")
        kind = getattr(v, "kind", None)
        if kind == Kind.BOOL:
            return v
        if kind == Kind.INT:
            return self.intrinsic("int_truth", Kind.BOOL, v)
        if kind == Kind.FLOAT:
            return self.intrinsic("float_truth", Kind.BOOL, v)
        if kind in (*ir.SEQUENCE_KINDS, Kind.STR):
            return self.intrinsic("nonempty", Kind.BOOL, v)
        if kind == Kind.TENSOR:  # Tensor.__bool__: aten::is_nonzero, with its errors for 0 or 2+ elements
            return self.call_op(node, ops.OpSpec("is_nonzero"), [v], {}, method=True, display="bool(Tensor)")
        if kind == Kind.NUMBER:
            return self.intrinsic("number_truth", Kind.BOOL, v)
        if kind in ir.HELD_BY:
            raise self.error(
                node,
                f"the truth of a {ir.KIND_NAMES[kind]} value is not supported in a region",
                "Test `x is not None` instead.",
            )
        raise self.error(node, f"the truth of {ops.describe(v)} is not supported in a region")

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """`a and b`, `a or b`: Python's value (an operand) and short-circuit (later operands, and their
        ATen calls, only when the earlier ones leave the result open)."""
        return self.short_circuit(node, isinstance(node.op, ast.And), self.bool_operands(node, self.value))

    def bool_operands(self, node: ast.BoolOp, compile_one: Any) -> list:
        """Thunks compiling each operand of `and`/`or`; a later operand knows what the earlier ones say of
        Tensor-or-None names (`x is not None and x.sum() > 0`: x is a tensor in the second)."""
        is_and = isinstance(node.op, ast.And)

        def operand(i: int) -> Any:
            saved = dict(self.locals)
            for earlier in node.values[:i]:
                self.narrow_on(self.narrowing(earlier), is_and)
            try:
                return compile_one(node.values[i])
            finally:
                self.locals = saved

        return [lambda i=i: operand(i) for i in range(len(node.values))]

    def visit_Compare(self, node: ast.Compare) -> Any:
        """`a < b < c` is `(a < b) and (b < c)` with b evaluated once and c only if a < b holds."""
        in_locals = self.in_locals(node)
        if in_locals is not None:
            return in_locals
        left: list[Any] = [None]

        def part(i: int) -> Any:
            if i == 0:
                left[0] = self.value(node.left)
            right = self.value(node.comparators[i])
            result = self.compare(node, node.ops[i], left[0], right)
            left[0] = right
            return result

        if len(node.ops) == 1:
            return part(0)
        return self.short_circuit(node, True, [lambda i=i: part(i) for i in range(len(node.ops))])

    def in_locals(self, node: ast.Compare) -> ir.Atom | None:
        """``"name" in locals()`` (or ``not in``): whether the function's local `name` has a value here, as
        Python's ``locals()`` answers; decided when compiling where every path to here agrees, else the flag a
        name bound on some paths keeps. None where `node` is not that test."""
        call = node.comparators[0]
        if not (
            len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
            and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "locals"
            and not (call.args or call.keywords)
            and "locals" not in self.locals
            and self.g.lookup("locals") == (True, builtins.locals)
        ):
            return None
        if _in_a_scope_of_its_own(node, self.fn):
            raise self.error(
                node, "`locals()` in a comprehension, a lambda or a nested function is not supported in a region"
            )
        name = node.left.value
        v = self.locals.get(name) if name.isidentifier() else Unbound(name, certain=True)
        if isinstance(v, MaybeBound):
            bound: ir.Atom = v.flag
        elif isinstance(v, Unbound) and not v.certain:
            raise self.error(node, f"whether '{name}' has a value here is not known to the region: {v.why}")
        elif v is None and name not in stored(self.fn.body):  # a global or a closure's name: not a local
            raise self.error(
                node, f"'{name}' is not a local variable of this function; `locals()` of it is not supported"
            )
        else:
            bound = ir.Const(not (v is None or isinstance(v, Unbound)), Kind.BOOL)
        return self.negated(bound) if isinstance(node.ops[0], ast.NotIn) else bound

    def short_circuit(self, node: ast.AST, is_and: bool, operands: list) -> Any:
        """The value of `operands[0]() and/or operands[1]() ...`: each operand is compiled where Python would
        evaluate it (nested branches); the paths' values join into one variable."""
        finals: list[tuple[Any, list]] = []  # (value, the body in which it is the result)
        levels: list[tuple[list, ir.Atom, list, list]] = []  # (outer body, truth, rest, short)
        outer = self.body
        try:
            for i, operand in enumerate(operands):
                v = operand()
                if i == len(operands) - 1:
                    finals.append((v, self.body))
                    break
                t = self.truth_of(node, v)
                if isinstance(t, ir.Const):
                    if t.value != is_and:  # decided: this operand is the value
                        finals.append((v, self.body))
                        break
                    continue
                rest: list[ir.Stmt] = []
                short: list[ir.Stmt] = []
                levels.append((self.body, t, rest, short))
                finals.append((v, short))
                self.body = rest
        finally:
            self.body = outer
        if len(finals) == 1:
            value, body = finals[0]
            if body is outer:
                return value
        joined = self.join(node, "value", [v for v, _ in finals], [b for _, b in finals])
        if isinstance(joined, Unbound):
            raise self.error(node, "the operands of `and`/`or` have different kinds; a region needs one")
        for body, t, rest, short in reversed(levels):
            then, orelse = (rest, short) if is_and else (short, rest)
            body.append(ir.If(t, tuple(then), tuple(orelse), self.line()))
        return joined

    def compare(self, node: ast.AST, op: ast.cmpop, a: Any, b: Any) -> Any:
        t = type(op)
        if t in (ast.Is, ast.IsNot):
            return self.identity(node, t is ast.Is, a, b)
        if t in (ast.In, ast.NotIn):
            return self.membership(node, t is ast.In, a, b)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const):
            return self.fold(node, PY_COMPARE[t], a, b)
        if t in (ast.Eq, ast.NotEq) and _enum_member(a) and _enum_member(b):  # `action == Action.RAISE`
            return ir.Const((a.value == b.value) == (t is ast.Eq), Kind.BOOL)
        ka, kb = getattr(a, "kind", None), getattr(b, "kind", None)
        if ka == Kind.TENSOR or (kb == Kind.TENSOR and ka in NUMBERS):
            if t not in ops.COMPARE_OPS:
                raise self.error(node, f"{describe_node(node)} on tensors is not supported in a region")
            name, swapped = ops.COMPARE_OPS[t]
            if ka == Kind.TENSOR:
                return self.call_op(node, ops.OpSpec(name), [a, b], {}, method=True)
            return self.call_op(node, ops.OpSpec(swapped), [b, a], {}, method=True)
        cmp = COMPARE_INTRINSICS.get(t)
        if Kind.NUMBER in (ka, kb) and ka in NUMBERS and kb in NUMBERS and cmp is not None:
            return self.intrinsic(f"number_{cmp}", Kind.BOOL, a, b)
        if ka in ir.SCALAR_KINDS and kb in ir.SCALAR_KINDS and cmp is not None:
            if ka == kb or {ka, kb} == {Kind.INT, Kind.BOOL}:
                return self.intrinsic(cmp, Kind.BOOL, a, b)
            return self.intrinsic(f"exact_{cmp}", Kind.BOOL, a, b)
        if ka == kb == Kind.STR and t in (ast.Eq, ast.NotEq):
            return self.intrinsic(f"str_{cmp}", Kind.BOOL, a, b)
        if ka == kb and ka in (Kind.DTYPE, Kind.DEVICE) and t in (ast.Eq, ast.NotEq):
            return self.intrinsic(cmp, Kind.BOOL, a, b)
        if {ka, kb} == {Kind.DEVICE, Kind.STR} and t in (ast.Eq, ast.NotEq):
            return ir.Const(t is ast.NotEq, Kind.BOOL)  # a torch.device never equals a str
        if t in (ast.Eq, ast.NotEq) and (isinstance(a, ir.Tup) or isinstance(b, ir.Tup) or ka == Kind.INTS):
            lhs, rhs = self.as_ints(node, a), self.as_ints(node, b)
            return self.intrinsic(cmp, Kind.BOOL, lhs, rhs)
        raise self.error(node, f"comparing {ops.describe(a)} with {ops.describe(b)} is not supported in a region")

    def membership(self, node: ast.AST, is_in: bool, a: Any, b: Any) -> ir.Atom:
        """`a in (b, c)` for ints, bools, strs and dtypes: `a == b or a == c`, stopping at the first that holds
        (floats are left out: Python's `in` tests identity first, and a NaN is equal to itself there); `a in s`
        of an int and a sequence of ints known at run time (`d in x.shape`)."""
        if getattr(b, "kind", None) == Kind.INTS and getattr(a, "kind", None) in (Kind.INT, Kind.BOOL):
            found = self.intrinsic("seq_contains", Kind.BOOL, b, self.as_int(a))
            return found if is_in else self.intrinsic("not", Kind.BOOL, found)
        if isinstance(b, KwArgs) and isinstance(a, ir.Const) and a.kind == Kind.STR:  # a keyword the call passed
            return ir.Const((a.value in dict(b.items)) == is_in, Kind.BOOL)
        if _enum_member(a) and isinstance(b, ir.Tup) and all(_enum_member(i) for i in b.items):
            return ir.Const((a.value in [i.value for i in b.items]) == is_in, Kind.BOOL)
        kinds = (Kind.INT, Kind.BOOL, Kind.STR, Kind.DTYPE)
        if not (
            isinstance(b, ir.Tup)
            and getattr(a, "kind", None) in kinds
            and all(getattr(i, "kind", None) in kinds for i in b.items)
        ):
            raise self.error(node, f"`in` on {ops.describe(a)} and {ops.describe(b)} is not supported in a region")
        if isinstance(a, ir.Const) and all(isinstance(i, ir.Const) for i in b.items):
            return ir.Const((a.value in [i.value for i in b.items]) == is_in, Kind.BOOL)
        tests = [lambda i=i: self.compare(node, ast.Eq(), a, i) for i in b.items]
        found = self.short_circuit(node, False, tests) if tests else ir.Const(False, Kind.BOOL)
        if isinstance(found, ir.Const):
            return ir.Const(bool(found.value) == is_in, Kind.BOOL)
        return found if is_in else self.intrinsic("not", Kind.BOOL, found)

    def identity(self, node: ast.AST, is_: bool, a: Any, b: Any) -> ir.Atom:
        if isinstance(b, ir.Const) and b.kind == Kind.NONE:
            a, b = b, a
        if isinstance(a, ir.Const) and a.kind == Kind.NONE:
            if isinstance(b, OptionalScalar):
                return b.none if is_ else self.intrinsic("not", Kind.BOOL, b.none)
            if isinstance(b, UnionValue):
                if None not in b.options:
                    return ir.Const(not is_, Kind.BOOL)
                none = ir.Const(b.options.index(None), Kind.INT)
                return self.intrinsic("eq" if is_ else "ne", Kind.BOOL, b.tag, none)
            if isinstance(b, ModuleValue):
                return ir.Const(not is_, Kind.BOOL)
            kind = getattr(b, "kind", None)
            if kind in ir.HELD_BY:
                return self.intrinsic("is_none" if is_ else "is_not_none", Kind.BOOL, b)
            if isinstance(b, ir.Const) or kind is not None or isinstance(b, (ir.Tup, Static, Closure)):
                same = isinstance(b, ir.Const) and b.kind == Kind.NONE
                return ir.Const(same == is_, Kind.BOOL)
        if isinstance(a, Static) and isinstance(b, Static):
            return ir.Const((a.value is b.value) == is_, Kind.BOOL)
        tensors = (Kind.TENSOR, Kind.OPT_TENSOR)
        if getattr(a, "kind", None) in tensors and getattr(b, "kind", None) in tensors:
            if a == b:  # one variable
                return ir.Const(is_, Kind.BOOL)
            # One Python object per TensorImpl (PyTorch keeps them paired), so the same object is the same impl.
            same = self.intrinsic("same_tensor", Kind.BOOL, a, b)
            return same if is_ else self.intrinsic("not", Kind.BOOL, same)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and a.kind == b.kind == Kind.DTYPE:
            return ir.Const((a.value is b.value) == is_, Kind.BOOL)
        raise self.error(node, "`is` is supported in a region to compare with None, tensors with tensors")

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        narrowed = self.narrowing(node.test)
        test = self.truth(node.test)
        if isinstance(test, ir.Const):
            return self.value(node.body if test.value else node.orelse)
        narrowed = self.narrowing(node.test)
        results = []
        bodies = []
        for expr, which in ((node.body, True), (node.orelse, False)):
            with self.block() as path:
                self.narrow_on(narrowed, which)
                results.append(self.value(expr))
            bodies.append(path.body)
        joined = self.join(node, "value", results, bodies)
        if isinstance(joined, Unbound):
            raise self.error(node, "the two branches of this conditional expression have different kinds")
        self.emit(ir.If(test, tuple(bodies[0]), tuple(bodies[1]), self.line()))
        return joined


# Where ``locals()`` is a scope's own: a nested def, lambda or class, and a comprehension (which the
# splitting's SCOPES leaves in the function's scope: its names are not read from outside it).
_LOCALS_SCOPES = (*SCOPES, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _in_a_scope_of_its_own(node: ast.AST, fn: ast.FunctionDef) -> bool:
    """Whether `node` is inside a comprehension, lambda, def or class within `fn`: its ``locals()`` are that
    scope's."""
    return any(
        node is inner
        for scope in ast.walk(fn)
        if scope is not fn and isinstance(scope, _LOCALS_SCOPES)
        for inner in ast.walk(scope)
    )


def _enum_member(v: Any) -> bool:
    """A member of an Enum known when compiling whose `==` is Enum's own (identity) or its str/int mixin's:
    comparing two of them has one answer, with no code of the library's run."""
    if not (isinstance(v, Static) and isinstance(v.value, enum.Enum)):
        return False
    return type(v.value).__eq__ in (object.__eq__, str.__eq__, int.__eq__)
