"""Expressions of the region language: names, attributes, arithmetic, comparisons, indexing.

A mixin of ``frontend.FunctionCompiler``: each ``visit_<Node>`` returns a value
(an ``ir`` atom, an ``ir.Tup`` or a ``Static``), emitting the statements that
compute it in Python's evaluation order.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from . import ir, ops
from .values import (
    CPP_COMPARE,
    PLAIN_FUNCTION,
    PLAIN_FUNCTION_HINT,
    PY_BINOPS,
    PY_COMPARE,
    PY_UNARYOPS,
    SYMBOLS,
    CellFunction,
    Static,
    TensorMethod,
    Unbound,
    constant,
    describe_node,
)


class ExpressionCompiler:
    # -- expressions ---------------------------------------------------------------------
    def value(self, node: ast.expr) -> Any:
        v = self.visit(node)
        if isinstance(v, Unbound):
            raise self.error(node, f"'{v.name}' may be unbound here: {v.why}")
        return v

    def visit_Constant(self, node: ast.Constant) -> Any:
        c = constant(node.value)
        if c is None:
            if node.value is Ellipsis:
                return Static(Ellipsis)
            raise self.error(node, f"the constant {node.value!r} is not supported in a region")
        return c

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in self.locals:
            return self.locals[node.id]
        if node.id in self.g.functions:  # another @ppy.opt function of the same source
            return Static(CellFunction(self.g.functions[node.id]))
        ok, value = self.g.lookup(node.id)
        if not ok and node.id in self.g.plain_functions:
            raise self.error(node, PLAIN_FUNCTION.format(name=node.id), PLAIN_FUNCTION_HINT)
        if not ok:
            raise self.error(
                node,
                f"name '{node.id}' is not known when the region is compiled",
                "Define it before the function: a module, or an int/float/bool/str constant.",
            )
        if not hasattr(builtins, node.id) or node.id in self.g.values:
            if not self.adapter:
                self.ctx.frozen[node.id] = value
        c = constant(value)
        if c is not None:
            return c
        return Static(value)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.value(node.value)
        if isinstance(base, Static):
            try:
                attr = getattr(base.value, node.attr)
            except AttributeError:
                raise self.error(node, f"`{ast.unparse(node)}` does not exist") from None
            c = constant(attr)
            return c if c is not None else Static(attr)
        kind = getattr(base, "kind", None)
        if kind == ir.TENSOR:
            return self.tensor_attribute(node, base)
        raise self.error(node, f"attribute `.{node.attr}` of {ops.describe(base)} is not supported in a region")

    _TENSOR_PROPERTIES = {"T": "numpy_T", "mT": "mT", "H": "matrix_H", "mH": "mH"}

    def tensor_attribute(self, node: ast.Attribute, t: ir.Atom) -> Any:
        a = node.attr
        if a == "shape":
            return self.cpp("{0}.sizes().vec()", ir.INTS, t)
        if a == "ndim":
            return self.cpp("static_cast<int64_t>({0}.dim())", ir.INT, t)
        if a == "dtype":
            return self.cpp("{0}.scalar_type()", ir.DTYPE, t)
        if a == "device":
            return self.cpp("{0}.device()", ir.DEVICE, t)
        if a == "requires_grad":
            return self.cpp("{0}.requires_grad()", ir.BOOL, t)
        if a == "is_cuda":
            return self.cpp("{0}.is_cuda()", ir.BOOL, t)
        if a in self._TENSOR_PROPERTIES:
            return self.call_op(
                node, ops.OpSpec(self._TENSOR_PROPERTIES[a]), [t], {}, method=True, display=f"Tensor.{a}"
            )
        return TensorMethod(t, a)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        """An f-string (for error messages): formatted as Python's str() would, at run time if needed."""
        parts: list[Any] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(ir.Const(part.value, ir.STR))
                continue
            if (
                not isinstance(part, ast.FormattedValue)
                or part.conversion not in (-1, ord("s"))
                or part.format_spec is not None
            ):
                raise self.error(part, "only plain {value} fields are supported in an f-string in a region")
            v = self.value(part.value)
            if isinstance(v, ir.Const) and v.kind != ir.DTYPE:
                parts.append(ir.Const(str(v.value), ir.STR))
            elif getattr(v, "kind", None) in (ir.INT, ir.FLOAT, ir.BOOL, ir.STR, ir.INTS):
                parts.append(v)
            else:
                raise self.error(part, f"formatting {ops.describe(v)} in an f-string is not supported in a region")
        if all(isinstance(p, ir.Const) for p in parts):
            return ir.Const("".join(p.value for p in parts), ir.STR)
        template = " + ".join(f"ppy::py_str({{{i}}})" for i in range(len(parts)))
        return self.cpp(f"(std::string() + {template})", ir.STR, *parts)

    def visit_Tuple(self, node: ast.Tuple) -> ir.Tup:
        return ir.Tup(tuple(self.starred_items(node.elts)))

    def visit_List(self, node: ast.List) -> ir.Tup:
        return ir.Tup(tuple(self.starred_items(node.elts)))

    def starred_items(self, elts: list[ast.expr]) -> list[Any]:
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.value(e.value)
                if not isinstance(v, ir.Tup):
                    raise self.error(e, "`*` of a sequence whose length is only known at run time")
                out.extend(v.items)
            else:
                out.append(self.value(e))
        return out

    # arithmetic
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        lhs = self.value(node.left)
        rhs = self.value(node.right)
        return self.binop(node, node.op, lhs, rhs)

    def binop(self, node: ast.AST, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        symbol = SYMBOLS.get(type(op), type(op).__name__)
        if isinstance(lhs, ir.Tup) or isinstance(rhs, ir.Tup) or getattr(lhs, "kind", None) == ir.INTS:
            return self.sequence_binop(node, op, lhs, rhs)
        lk, rk = getattr(lhs, "kind", None), getattr(rhs, "kind", None)
        if isinstance(lhs, ir.Const) and isinstance(rhs, ir.Const):
            return self.fold(node, PY_BINOPS[type(op)], lhs, rhs)
        if lk == ir.TENSOR:
            forward = ops.BINOPS.get(type(op))
            if forward is None:
                raise self.error(node, f"the operator `{symbol}` is not supported in a region")
            if type(op) is ast.Div:  # Tensor.__truediv__ is div
                return self.call_op(node, ops.OpSpec("div"), [lhs, rhs], {}, method=True, display="Tensor /")
            return self.call_op(node, ops.OpSpec(forward[0]), [lhs, rhs], {}, method=True, display=f"Tensor {symbol}")
        if rk == ir.TENSOR and lk in ir.SCALAR_KINDS:
            reflected = ops.BINOPS.get(type(op), (None, None))[1]
            if reflected == "rdiv":  # torch/_tensor.py: __rdiv__ is self.reciprocal() * other
                recip = self.call_op(node, ops.OpSpec("reciprocal"), [rhs], {}, method=True)
                return self.call_op(node, ops.OpSpec("mul"), [recip, lhs], {}, method=True)
            if reflected == "rfloordiv":
                return self.call_op(node, ops.OpSpec("floor_divide"), [lhs, rhs], {}, display="//")
            if reflected == "rremainder":
                return self.call_op(node, ops.OpSpec("remainder"), [lhs, rhs], {}, display="%")
            if reflected == "rpow":
                return self.call_op(node, ops.OpSpec("pow"), [lhs, rhs], {}, display="**")
            if reflected is not None:
                return self.call_op(
                    node, ops.OpSpec(reflected), [rhs, lhs], {}, method=True, display=f"{symbol} Tensor"
                )
        if lk in ir.SCALAR_KINDS and rk in ir.SCALAR_KINDS:
            return self.scalar_binop(node, op, lhs, rhs)
        raise self.error(
            node, f"`{symbol}` on {ops.describe(lhs)} and {ops.describe(rhs)} is not supported in a region"
        )

    def scalar_binop(self, node: ast.AST, op: ast.operator, a: ir.Atom, b: ir.Atom) -> ir.Var:
        t = type(op)
        ints = a.kind in (ir.INT, ir.BOOL) and b.kind in (ir.INT, ir.BOOL)
        if ints:
            ia, ib = self.as_int(a), self.as_int(b)
            table = {
                ast.Add: "ppy::py_add({0}, {1})",
                ast.Sub: "ppy::py_sub({0}, {1})",
                ast.Mult: "ppy::py_mul({0}, {1})",
                ast.FloorDiv: "ppy::py_floordiv({0}, {1})",
                ast.Mod: "ppy::py_mod({0}, {1})",
                ast.BitAnd: "({0} & {1})",
                ast.BitOr: "({0} | {1})",
                ast.BitXor: "({0} ^ {1})",
                ast.LShift: "ppy::py_lshift({0}, {1})",
                ast.RShift: "ppy::py_rshift({0}, {1})",
            }
            if t in table:
                if a.kind == b.kind == ir.BOOL and t in (ast.BitAnd, ast.BitOr, ast.BitXor):
                    return self.cpp(table[t], ir.BOOL, a, b)
                return self.cpp(table[t], ir.INT, ia, ib)
            if t is ast.Div:
                return self.cpp("ppy::py_int_truediv({0}, {1})", ir.FLOAT, ia, ib)
            if t is ast.Pow:
                if isinstance(b, ir.Const) and b.value >= 0:
                    return self.cpp("ppy::py_pow({0}, {1})", ir.INT, ia, ib)
                raise self.error(
                    node,
                    "int ** int with an exponent only known at run time may be an int or a float in Python",
                    "Write float(x) ** n or use a constant exponent.",
                )
        else:
            fa, fb = self.as_float(a), self.as_float(b)
            table = {
                ast.Add: "({0} + {1})",
                ast.Sub: "({0} - {1})",
                ast.Mult: "({0} * {1})",
                ast.Div: "ppy::py_truediv({0}, {1})",
                ast.FloorDiv: "ppy::py_ffloordiv({0}, {1})",
                ast.Mod: "ppy::py_fmod({0}, {1})",
                ast.Pow: "ppy::py_fpow({0}, {1})",
            }
            if t in table:
                return self.cpp(table[t], ir.FLOAT, fa, fb)
        raise self.error(
            node, f"`{SYMBOLS.get(t, '?')}` on {ops.describe(a)} and {ops.describe(b)} is not supported in a region"
        )

    def as_int(self, a: ir.Atom) -> ir.Atom:
        if a.kind == ir.BOOL:
            return (
                ir.Const(int(a.value), ir.INT)
                if isinstance(a, ir.Const)
                else self.cpp("static_cast<int64_t>({0})", ir.INT, a)
            )
        return a

    def as_float(self, a: ir.Atom) -> ir.Atom:
        if a.kind == ir.FLOAT:
            return a
        if isinstance(a, ir.Const):
            return ir.Const(float(a.value), ir.FLOAT)
        return self.cpp("static_cast<double>({0})", ir.FLOAT, a)

    def sequence_binop(self, node: ast.AST, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        if type(op) is ast.Add and isinstance(lhs, ir.Tup) and isinstance(rhs, ir.Tup):
            return ir.Tup(lhs.items + rhs.items)
        if type(op) is ast.Add and all(
            isinstance(v, ir.Tup) or getattr(v, "kind", None) == ir.INTS for v in (lhs, rhs)
        ):
            return self.cpp("ppy::seq_concat({0}, {1})", ir.INTS, self.as_ints(node, lhs), self.as_ints(node, rhs))
        if type(op) is ast.Mult and isinstance(lhs, ir.Tup) and isinstance(rhs, ir.Const) and rhs.kind == ir.INT:
            return ir.Tup(lhs.items * rhs.value)
        raise self.error(
            node,
            f"`{SYMBOLS.get(type(op), '?')}` on {ops.describe(lhs)} and {ops.describe(rhs)} "
            "is not supported in a region",
        )

    def as_ints(self, node: ast.AST, v: Any) -> ir.Atom:
        if getattr(v, "kind", None) == ir.INTS:
            return v
        if isinstance(v, ir.Tup) and all(getattr(i, "kind", None) == ir.INT for i in v.items):
            fmt = "std::vector<int64_t>{" + ", ".join(f"{{{i}}}" for i in range(len(v.items))) + "}"
            return self.cpp(fmt, ir.INTS, *v.items)
        raise self.error(node, f"expected a sequence of ints, got {ops.describe(v)}")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            t = self.truth_of(node, operand)
            return ir.Const(not t.value, ir.BOOL) if isinstance(t, ir.Const) else self.cpp("(!{0})", ir.BOOL, t)
        if isinstance(operand, ir.Const):
            return self.fold(node, PY_UNARYOPS[type(node.op)], operand)
        kind = getattr(operand, "kind", None)
        if kind == ir.TENSOR:
            return self.call_op(node, ops.OpSpec(ops.UNARYOPS[type(node.op)]), [operand], {}, method=True)
        if kind in ir.SCALAR_KINDS and isinstance(node.op, ast.USub):
            if kind == ir.FLOAT:
                return self.cpp("(-{0})", ir.FLOAT, operand)
            return self.cpp("ppy::py_neg({0})", ir.INT, self.as_int(operand))
        if kind in ir.SCALAR_KINDS and isinstance(node.op, ast.UAdd):
            return operand if kind != ir.BOOL else self.as_int(operand)
        raise self.error(node, f"{describe_node(node)} on {ops.describe(operand)} is not supported in a region")

    def fold(self, node: ast.AST, fn: Any, *consts: ir.Const) -> Any:
        try:
            value = fn(*(c.value for c in consts))
        except Exception as exc:
            raise self.error(node, f"this constant expression fails in Python: {type(exc).__name__}: {exc}") from None
        c = constant(value)
        if c is None:
            raise self.error(node, f"the constant {value!r} is not supported in a region")
        return c

    # truth and comparisons
    def truth(self, node: ast.expr) -> ir.Atom:
        return self.truth_of(node, self.value(node))

    def truth_of(self, node: ast.AST, v: Any) -> ir.Atom:
        if isinstance(v, ir.Const):
            return ir.Const(bool(v.value), ir.BOOL)
        if isinstance(v, ir.Tup):
            return ir.Const(bool(v.items), ir.BOOL)
        if isinstance(v, Static):
            return ir.Const(bool(v.value), ir.BOOL)
        kind = v.kind
        if kind == ir.BOOL:
            return v
        if kind == ir.INT:
            return self.cpp("({0} != 0)", ir.BOOL, v)
        if kind == ir.FLOAT:
            return self.cpp("({0} != 0.0)", ir.BOOL, v)
        if kind in (ir.INTS, ir.TENSORS, ir.STR):
            return self.cpp("(!{0}.empty())", ir.BOOL, v)
        if kind == ir.OPT_TENSOR:
            raise self.error(
                node,
                "the truth of a Tensor-or-None value is not supported in a region",
                "Test `x is not None` instead.",
            )
        raise self.error(
            node,
            "branching on a tensor's value is not supported in a region",
            "Branch on shapes, parameters or `is None`; or keep this function Python.",
        )

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        # Python's `and`/`or` return an operand; a region supports them on bools (and constants).
        first = self.value(node.values[0])
        if isinstance(first, ir.Const):
            v = first
            for i, sub in enumerate(node.values):
                v = self.value(sub) if i else first
                if not isinstance(v, ir.Const):
                    if getattr(v, "kind", None) != ir.BOOL:
                        raise self.error(sub, "`and`/`or` are supported on bools in a region")
                    return v
                if (isinstance(node.op, ast.And) and not v.value) or (isinstance(node.op, ast.Or) and v.value):
                    return v
            return v
        if getattr(first, "kind", None) != ir.BOOL:
            raise self.error(node.values[0], "`and`/`or` are supported on bools in a region")
        # Short-circuit with an `if`, so the right side's ATen calls run only when Python runs them.
        out = self.new_var("cond", ir.BOOL)
        self.emit(ir.Declare(out, self.line()))
        self.emit(ir.Move(out, first, self.line()))
        self.short_circuit(node, out, node.values[1:])
        return out

    def short_circuit(self, node: ast.BoolOp, out: ir.Var, rest: list[ast.expr]) -> None:
        if not rest:
            return
        saved, self.body = self.body, []
        v = self.value(rest[0])
        if getattr(v, "kind", None) != ir.BOOL:
            raise self.error(rest[0], "`and`/`or` are supported on bools in a region")
        self.emit(ir.Move(out, v, self.line()))
        self.short_circuit(node, out, rest[1:])
        inner, self.body = self.body, saved
        if isinstance(node.op, ast.And):
            self.emit(ir.If(out, tuple(inner), (), self.line()))
        else:
            self.emit(ir.If(out, (), tuple(inner), self.line()))

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.value(comp)
            part = self.compare(node, op, left, right)
            if result is None:
                result = part
            elif isinstance(result, ir.Const):
                result = part if result.value else result
            elif isinstance(part, ir.Const):
                result = result if part.value else part
            else:
                result = self.cpp("({0} && {1})", ir.BOOL, result, part)
            left = right
        return result

    def compare(self, node: ast.AST, op: ast.cmpop, a: Any, b: Any) -> Any:
        t = type(op)
        if t in (ast.Is, ast.IsNot):
            return self.identity(node, t is ast.Is, a, b)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const):
            return self.fold(node, PY_COMPARE[t], a, b)
        ka, kb = getattr(a, "kind", None), getattr(b, "kind", None)
        if ka == ir.TENSOR or (kb == ir.TENSOR and ka in ir.SCALAR_KINDS):
            if t not in ops.COMPARE_OPS:
                raise self.error(node, f"{describe_node(node)} on tensors is not supported in a region")
            name, swapped = ops.COMPARE_OPS[t]
            if ka == ir.TENSOR:
                return self.call_op(node, ops.OpSpec(name), [a, b], {}, method=True)
            return self.call_op(node, ops.OpSpec(swapped), [b, a], {}, method=True)
        if ka in ir.SCALAR_KINDS and kb in ir.SCALAR_KINDS and t in CPP_COMPARE:
            if ka == kb or {ka, kb} == {ir.INT, ir.BOOL}:
                return self.cpp(f"({{0}} {CPP_COMPARE[t]} {{1}})", ir.BOOL, a, b)
            return self.cpp(f"(ppy::exact({{0}}) {CPP_COMPARE[t]} ppy::exact({{1}}))", ir.BOOL, a, b)
        if ka == kb == ir.STR and t in (ast.Eq, ast.NotEq):
            return self.cpp(f"(std::string({{0}}) {CPP_COMPARE[t]} std::string({{1}}))", ir.BOOL, a, b)
        if ka == ir.DTYPE and kb == ir.DTYPE and t in (ast.Eq, ast.NotEq):
            return self.cpp(f"({{0}} {CPP_COMPARE[t]} {{1}})", ir.BOOL, a, b)
        if t in (ast.Eq, ast.NotEq) and (isinstance(a, ir.Tup) or isinstance(b, ir.Tup) or ka == ir.INTS):
            lhs, rhs = self.as_ints(node, a), self.as_ints(node, b)
            return self.cpp(f"({{0}} {CPP_COMPARE[t]} {{1}})", ir.BOOL, lhs, rhs)
        raise self.error(node, f"comparing {ops.describe(a)} with {ops.describe(b)} is not supported in a region")

    def identity(self, node: ast.AST, is_: bool, a: Any, b: Any) -> ir.Atom:
        if isinstance(b, ir.Const) and b.kind == ir.NONE:
            a, b = b, a
        if isinstance(a, ir.Const) and a.kind == ir.NONE:
            kind = getattr(b, "kind", None)
            if kind == ir.OPT_TENSOR:
                return self.cpp("(!{0}.has_value())" if is_ else "{0}.has_value()", ir.BOOL, b)
            if isinstance(b, ir.Const) or kind is not None or isinstance(b, (ir.Tup, Static)):
                same = isinstance(b, ir.Const) and b.kind == ir.NONE
                return ir.Const(same == is_, ir.BOOL)
        if isinstance(a, Static) and isinstance(b, Static):
            return ir.Const((a.value is b.value) == is_, ir.BOOL)
        raise self.error(node, "`is` is supported in a region only to compare with None")

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        test = self.truth(node.test)
        if isinstance(test, ir.Const):
            return self.value(node.body if test.value else node.orelse)
        results = []
        bodies = []
        for expr in (node.body, node.orelse):
            saved, self.body = self.body, []
            results.append(self.value(expr))
            bodies.append(self.body)
            self.body = saved
        joined = self.join(node, "value", results, bodies)
        if isinstance(joined, Unbound):
            raise self.error(node, "the two branches of this conditional expression have different kinds")
        self.emit(ir.If(test, tuple(bodies[0]), tuple(bodies[1]), self.line()))
        return joined

    # indexing
    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.value(node.value)
        if isinstance(base, ir.Tup):
            return self.tuple_index(node, base)
        kind = getattr(base, "kind", None)
        if kind in (ir.INTS, ir.TENSORS):
            return self.sequence_index(node, base)
        if kind != ir.TENSOR:
            raise self.error(node, f"indexing {ops.describe(base)} is not supported in a region")
        return self.getitem(node, base, self.index_items(node.slice))

    def tuple_index(self, node: ast.Subscript, base: ir.Tup) -> Any:
        idx = self.value(node.slice) if not isinstance(node.slice, ast.Slice) else None
        if isinstance(node.slice, ast.Slice):
            parts = [
                self.value(p) if p is not None else ir.Const(None, ir.NONE)
                for p in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            if all(isinstance(p, ir.Const) for p in parts):
                return ir.Tup(base.items[slice(*(p.value for p in parts))])
            return self.sequence_index(node, self.as_ints(node, base))
        if isinstance(idx, ir.Const) and idx.kind == ir.INT:
            try:
                return base.items[idx.value]
            except IndexError:
                raise self.error(node, "tuple index out of range") from None
        if getattr(idx, "kind", None) == ir.INT and all(getattr(i, "kind", None) == ir.INT for i in base.items):
            return self.cpp("ppy::seq_index({0}, {1})", ir.INT, self.as_ints(node, base), idx)
        raise self.error(node, "indexing a tuple needs an int index known at compile time")

    def sequence_index(self, node: ast.Subscript, base: ir.Atom) -> Any:
        item = ir.INT if base.kind == ir.INTS else ir.TENSOR
        if isinstance(node.slice, ast.Slice):
            parts = []
            for p in (node.slice.lower, node.slice.upper, node.slice.step):
                v = self.value(p) if p is not None else ir.Const(None, ir.NONE)
                if getattr(v, "kind", None) not in (ir.INT, ir.NONE):
                    raise self.error(node, "slice bounds must be ints or None")
                parts.append(v)
            if base.kind != ir.INTS:
                raise self.error(node, "slicing a list of tensors is not supported in a region")
            opt = [
                "c10::optional<int64_t>()"
                if isinstance(p, ir.Const) and p.value is None
                else f"c10::optional<int64_t>({{{i + 1}}})"
                for i, p in enumerate(parts)
            ]
            args = [p for p in parts if not (isinstance(p, ir.Const) and p.value is None)]
            # renumber the placeholders of the parts that are present
            k = 1
            fmt = []
            for o in opt:
                if "{" in o:
                    fmt.append(f"c10::optional<int64_t>({{{k}}})")
                    k += 1
                else:
                    fmt.append(o)
            return self.cpp("ppy::seq_slice({0}, " + ", ".join(fmt) + ")", ir.INTS, base, *args)
        idx = self.value(node.slice)
        if getattr(idx, "kind", None) != ir.INT:
            raise self.error(node.slice, "a sequence index must be an int")
        if item == ir.INT:
            return self.cpp("ppy::seq_index({0}, {1})", ir.INT, base, idx)
        n = self.cpp("static_cast<int64_t>({0}.size())", ir.INT, base)
        self.emit(
            ir.If(
                self.cpp("({0} < -{1} || {0} >= {1})", ir.BOOL, idx, n),
                (ir.Raise("IndexError", "tuple index out of range", self.line()),),
                (),
                self.line(),
            )
        )
        return self.cpp("{0}[{1} < 0 ? {1} + {2} : {1}]", ir.TENSOR, base, idx, n)

    def index_items(self, sl: ast.expr) -> tuple[ir.IndexItem, ...]:
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        items = []
        for e in elts:
            if isinstance(e, ast.Slice):
                parts = []
                for p in (e.lower, e.upper, e.step):
                    v = self.value(p) if p is not None else None
                    if v is not None and not (
                        getattr(v, "kind", None) in (ir.INT, ir.BOOL) or (isinstance(v, ir.Const) and v.kind == ir.NONE)
                    ):
                        raise self.error(p, f"slice bounds must be ints or None, got {ops.describe(v)}")
                    parts.append(None if v is None or (isinstance(v, ir.Const) and v.kind == ir.NONE) else v)
                items.append(ir.IndexItem("slice", tuple(parts)))
                continue
            v = self.value(e)
            if isinstance(v, Static) and v.value is Ellipsis:
                items.append(ir.IndexItem("ellipsis"))
            elif isinstance(v, ir.Const) and v.kind == ir.NONE:
                items.append(ir.IndexItem("none"))
            elif getattr(v, "kind", None) == ir.INT:
                items.append(ir.IndexItem("int", (v,)))
            elif getattr(v, "kind", None) == ir.BOOL:
                items.append(ir.IndexItem("bool", (v,)))
            elif getattr(v, "kind", None) == ir.TENSOR:
                items.append(ir.IndexItem("tensor", (v,)))
            elif isinstance(v, ir.Tup) and v.items and all(getattr(i, "kind", None) == ir.INT for i in v.items):
                items.append(ir.IndexItem("list", tuple(v.items)))  # x[:, [0, -1]]: a Long index tensor
            else:
                raise self.error(
                    e,
                    f"indexing a tensor with {ops.describe(v)} is not supported in a region",
                    "Index with ints, slices, None, ..., or tensors.",
                )
        return tuple(items)

    def getitem(self, node: ast.AST, base: ir.Atom, index: tuple[ir.IndexItem, ...]) -> ir.Var:
        return self.assign(ir.GetItem(base, index), ir.TENSOR)

    def setitem(self, target: ast.Subscript, value: Any) -> None:
        base = self.value(target.value)
        if getattr(base, "kind", None) != ir.TENSOR:
            raise self.error(target, "only tensors support item assignment in a region")
        self.store_item(target, base, self.index_items(target.slice), value)

    def store_item(self, node: ast.AST, base: ir.Atom, index: tuple[ir.IndexItem, ...], value: Any) -> None:
        kind = getattr(value, "kind", None)
        if kind not in (ir.TENSOR, ir.FLOAT, ir.INT, ir.BOOL):
            raise self.error(node, f"assigning {ops.describe(value)} into a tensor is not supported in a region")
        self.emit(ir.SetItem(base, index, value, self.line()))
