"""Expressions of the region language: names, attributes, f-strings, tuples, arithmetic.

Truth and comparisons are in ``conditions.py``.

A mixin of ``function.FunctionCompiler``: each ``visit_<Node>`` returns a value (an ``ir`` atom, an
``ir.Tup`` or a ``Static``), emitting the statements that compute it in Python's evaluation order.
What is not an ATen op is an intrinsic (``ir.INTRINSICS``), chosen from the tables in ``values.py``.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from ..torchlib import ops, torch_source
from . import call_values, ir
from .calls import SETTING_ATTRIBUTES
from .ir import Kind
from .module_plan import ABSENT, METHOD, Slot
from .modules import dotted
from .values import (
    FLOAT_BINOPS,
    INT_BINOPS,
    PLAIN_FUNCTION,
    PLAIN_FUNCTION_HINT,
    PY_BINOPS,
    PY_UNARYOPS,
    SYMBOLS,
    CellFunction,
    Closure,
    MaybeBound,
    ModuleValue,
    PendingObject,
    Static,
    TensorMethod,
    Unbound,
    constant,
    describe_node,
    unbound_message,
)

NUMBERS = (*ir.SCALAR_KINDS, Kind.NUMBER)
_MISSING = object()
NUMBER_BINOPS = {
    ast.Add: "number_add",
    ast.Sub: "number_sub",
    ast.Mult: "number_mul",
    ast.Div: "number_truediv",
    ast.FloorDiv: "number_floordiv",
    ast.Mod: "number_mod",
}


class ExpressionCompiler:
    # -- expressions ---------------------------------------------------------------------
    def value(self, node: ast.expr) -> Any:
        v = self.visit(node)
        if isinstance(v, Unbound):
            err = self.error(node, f"'{v.name}' may be unbound here: {v.why}")
            err.unbound = v.name  # a segment's form for a name with no value reads it: Python raises (breaks.py)
            raise err
        if isinstance(v, PendingObject):
            raise self.pending_error(node, v)
        if isinstance(v, MaybeBound):  # bound by a loop that may have run zero times: Python checks
            failing = (ir.Raise("UnboundLocalError", unbound_message(v.name), self.line()),)
            self.emit(ir.If(v.flag, (), failing, self.line()))
            return v.var
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
        if (
            (not hasattr(builtins, node.id) or node.id in self.g.values)
            and not self.adapter
            and not torch_source.is_torch_namespace(self.g.values)  # torch's own names, as an adapter's
        ):
            self.ctx.frozen[node.id] = value
        c = constant(value)
        if c is not None:
            return c
        return Static(value)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        narrowed = self.narrowed_attribute(node)
        return narrowed if narrowed is not None else self.attribute_of(node, self.visit(node.value))

    def narrowed_attribute(self, node: ast.Attribute) -> Any:
        """The value `node` (``self.x``) was narrowed to by ``if self.x is not None:``, or None."""
        key = dotted(node)
        if key is not None and key in self.locals and not isinstance(self.locals[key], Unbound):
            return self.locals[key]
        return None

    def attribute_of(self, node: ast.Attribute, base: Any) -> Any:
        """`node.attr` of `base`, the value `node.value` has."""
        if isinstance(base, PendingObject):  # self.config.block_size: self.config is an object
            base = self.pending_object(node, base)
        elif isinstance(base, Unbound):
            base = self.value(node.value)  # raises: unbound
        if isinstance(base, ModuleValue):
            return self.module_attribute(node, base)
        if isinstance(base, Static):
            setting = SETTING_ATTRIBUTES.get((id(base.value), node.attr))
            if setting is not None:  # read when the region runs, as each call of Python reads it
                return self.intrinsic(setting, Kind.BOOL)
            try:
                attr = getattr(base.value, node.attr)
            except AttributeError:
                raise self.error(node, f"`{ast.unparse(node)}` does not exist") from None
            c = constant(attr)
            return c if c is not None else Static(attr)
        kind = getattr(base, "kind", None)
        if kind == Kind.TENSOR:
            return self.tensor_attribute(node, base)
        value = self.attribute_of_value(node, base)  # devices, dtypes, named tuples, torch.finfo/iinfo
        if value is not None:
            return value
        if isinstance(base, ir.Tup) or kind in ir.SEQUENCE_KINDS:
            return self.list_attribute(node, base)
        raise self.error(node, f"attribute `.{node.attr}` of {ops.describe(base)} is not supported in a region")

    def getattr_call(self, node: ast.Call, args: list, kwargs: dict) -> Any:
        """``getattr(obj, "name"[, default])`` with the name known when compiling: ``obj.name``. Where the
        object the call brought has no such attribute, the default; the object's layout then checks at each
        call that it still has none (``call_values.getattr_finds``). An object compiled in is asked when
        compiling, as its attributes are."""
        name = args[1] if len(args) in (2, 3) and len(node.args) == len(args) and not kwargs else None
        if not (isinstance(name, ir.Const) and name.kind == Kind.STR) or isinstance(node.args[0], ast.Starred):
            raise self.error(node, "getattr() with a name known only at run time is not supported in a region")
        attr = ast.copy_location(ast.Attribute(value=node.args[0], attr=name.value, ctx=ast.Load()), node)
        ast.fix_missing_locations(attr)
        narrowed = self.narrowed_attribute(attr)
        if narrowed is not None:
            return narrowed
        obj = self.pending_object(node, args[0]) if isinstance(args[0], PendingObject) else args[0]
        if len(args) == 3 and isinstance(obj, Static):
            try:
                found = getattr(obj.value, name.value, _MISSING)
            except Exception as exc:  # noqa: BLE001 - Python raises it there
                raise self.error(node, f"getattr() raises {type(exc).__name__} when compiling") from None
            if found is _MISSING:
                return args[2]
        if len(args) == 3 and isinstance(obj, ModuleValue):
            if obj.sample is None:
                raise self.error(node, "getattr() with a default of an object the region reads is not supported")
            finds = call_values.getattr_finds(obj.sample, name.value)
            if finds == ABSENT:
                self.layout(obj.mtype).slot(Slot(name.value, METHOD, "-", origin=ABSENT))
                return args[2]
            if finds != call_values.STORED:
                raise self.error(node, f"getattr({ast.unparse(node.args[0])}, {name.value!r}, ...): {finds}")
        elif len(args) == 3 and not isinstance(obj, Static):
            raise self.error(node, f"getattr() with a default of {ops.describe(obj)} is not supported in a region")
        return self.attribute_of(attr, obj)

    _TENSOR_PROPERTIES = {"T": "numpy_T", "mT": "mT", "H": "matrix_H", "mH": "mH"}  # ATen ops
    _TENSOR_ATTRIBUTES = {  # intrinsics
        "shape": ("tensor_sizes", Kind.INTS),
        "ndim": ("tensor_dim", Kind.INT),
        "dtype": ("tensor_dtype", Kind.DTYPE),
        "device": ("tensor_device", Kind.DEVICE),
        "requires_grad": ("tensor_requires_grad", Kind.BOOL),
        **{f: (f"tensor_{f}", Kind.BOOL) for f in ir.TENSOR_FLAGS},
    }

    def tensor_attribute(self, node: ast.Attribute, t: ir.Atom) -> Any:
        a = node.attr
        if a in self._TENSOR_ATTRIBUTES:
            name, kind = self._TENSOR_ATTRIBUTES[a]
            value = self.intrinsic(name, kind, t)
            return self.sized(value) if a == "shape" else value
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
                parts.append(ir.Const(part.value, Kind.STR))
                continue
            if (
                not isinstance(part, ast.FormattedValue)
                or part.conversion not in (-1, ord("s"))
                or part.format_spec is not None
            ):
                raise self.error(part, "only plain {value} fields are supported in an f-string in a region")
            parts += self.formatted(part, self.value(part.value))
        if all(isinstance(p, ir.Const) for p in parts):
            return ir.Const("".join(p.value for p in parts), Kind.STR)
        return self.intrinsic("str_concat", Kind.STR, *parts)

    def formatted(self, node: ast.AST, v: Any) -> list[Any]:
        """The pieces of str(v) in an f-string: constants as text, runtime values formatted by the region."""
        if isinstance(v, ir.Const):
            return [ir.Const(str(v.value), Kind.STR)]
        if isinstance(v, ir.Tup) and v.structseq is None:
            opening, closing = ("[", "]") if v.is_list else ("(", ",)" if len(v.items) == 1 else ")")
            pieces: list[Any] = [ir.Const(opening, Kind.STR)]
            for i, item in enumerate(v.items):
                if i:
                    pieces.append(ir.Const(", ", Kind.STR))
                if getattr(item, "kind", None) == Kind.STR:  # repr() inside a container
                    raise self.error(node, "formatting a tuple of str in an f-string is not supported in a region")
                pieces += self.formatted(node, item)
            pieces.append(ir.Const(closing, Kind.STR))
            return pieces
        if getattr(v, "kind", None) == Kind.INTS and not v.size:
            raise self.error(
                node,
                "formatting a sequence of ints known only at run time is not supported in a region: "
                "whether Python holds a tuple or a list there is not known when compiling",
                "Format its items, or keep this function Python.",
            )
        if getattr(v, "kind", None) in (Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.STR, Kind.INTS, Kind.DTYPE, Kind.DEVICE):
            return [v]
        if getattr(v, "kind", None) in (Kind.INT_LIST, Kind.FLOAT_LIST):  # a run-time list: "[1, 2]"
            return [v]
        if getattr(v, "kind", None) in (Kind.OPT_INT, Kind.OPT_FLOAT, Kind.OPT_BOOL, Kind.OPT_DTYPE):
            return [v]  # "None" or the value
        raise self.error(node, f"formatting {ops.describe(v)} in an f-string is not supported in a region")

    def visit_Lambda(self, node: ast.Lambda) -> Closure:
        fdef = ast.FunctionDef(
            name="<lambda>", args=node.args, body=[ast.Return(node.body)], decorator_list=[], returns=None
        )
        ast.copy_location(fdef, node)
        ast.copy_location(fdef.body[0], node.body)
        fdef.end_lineno, fdef.end_col_offset = node.end_lineno, node.end_col_offset
        return Closure(fdef, id(self), self.g, self.filename, self.source_lines)

    def visit_Tuple(self, node: ast.Tuple) -> Any:
        return self.display(node, self.display_items(node))

    def display_items(self, node: ast.Tuple) -> list[tuple[bool, ast.expr, Any]]:
        return [
            (isinstance(e, ast.Starred), e, self.value(e.value if isinstance(e, ast.Starred) else e)) for e in node.elts
        ]

    def unpacked_display(self, node: ast.Tuple, want: int) -> Any:
        """`i, j, dtype = *x.shape[-2:], x.dtype`: a display unpacked into `want` names, whose one starred
        run-time sequence of ints holds what the other items leave (its length checked as Python checks the
        whole display's), so its items may sit beside values that are not ints."""
        items = self.display_items(node)
        runtime = [k for k, (star, _e, v) in enumerate(items) if star and getattr(v, "kind", None) == Kind.INTS]
        if len(runtime) != 1:
            return self.display(node, items)
        k = runtime[0]
        before, after = (self.display(node, part).items for part in (items[:k], items[k + 1 :]))
        seq = items[k][2]
        fixed = len(before) + len(after)
        have = self.binop(node, ast.Add(), self.intrinsic("seq_len", Kind.INT, seq), ir.Const(fixed, Kind.INT))
        self.check("check_unpack", have, ir.Const(want, Kind.INT), ir.Const(False, Kind.BOOL))
        middle = [self.intrinsic("seq_item", Kind.INT, seq, ir.Const(i, Kind.INT)) for i in range(want - fixed)]
        return ir.Tup((*before, *middle, *after))

    def display(self, node: ast.Tuple, items: list[tuple[bool, ast.expr, Any]]) -> Any:
        if any(star and getattr(v, "kind", None) == Kind.INTS for star, _e, v in items):
            return self.ints_display(node, items)  # `(*x.shape[:-1], -1, d)`: ints of a run-time length
        out = []
        for star, e, v in items:
            if star and not isinstance(v, ir.Tup):
                raise self.error(e, "`*` of a sequence whose length is only known at run time")
            out.extend(v.items if star else [v])
        return ir.Tup(tuple(out))

    def ints_display(self, node: ast.Tuple, items: list[tuple[bool, ast.expr, Any]]) -> ir.Atom:
        """A tuple display of ints holding a starred run-time sequence: one tuple (not a torch.Size)."""
        pieces: list[Any] = []
        run: list[Any] = []
        for star, e, v in items:
            if star and getattr(v, "kind", None) == Kind.INTS:
                if run:
                    pieces.append(ir.Tup(tuple(run)))
                    run = []
                pieces.append(v)
            elif star and isinstance(v, ir.Tup):
                run.extend(v.items)
            elif star:
                raise self.error(e, "`*` of a sequence whose length is only known at run time")
            else:
                run.append(v)
        if run:
            pieces.append(ir.Tup(tuple(run)))
        out = self.as_ints(node, pieces[0])
        if len(pieces) == 1:  # `(*shape,)`: a tuple of it
            return self.intrinsic("seq_concat", Kind.INTS, out, self.as_ints(node, ir.Tup(())))
        for p in pieces[1:]:
            out = self.intrinsic("seq_concat", Kind.INTS, out, self.as_ints(node, p))
        return out

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
        if type(op) is ast.Mod and getattr(lhs, "kind", None) == Kind.STR:  # "..." % values (python_forms)
            return self.percent_format(node, lhs, rhs)
        symbol = SYMBOLS.get(type(op), type(op).__name__)
        lists = self.list_binop(node, op, lhs, rhs)
        if lists is not None:
            return lists
        if (
            isinstance(lhs, ir.Tup)
            or isinstance(rhs, ir.Tup)
            or getattr(lhs, "kind", None) == Kind.INTS
            or (getattr(rhs, "kind", None) == Kind.INTS and type(op) is ast.Mult)
        ):
            return self.sequence_binop(node, op, lhs, rhs)
        lk, rk = getattr(lhs, "kind", None), getattr(rhs, "kind", None)
        if Kind.NUMBER in (lk, rk) and lk in NUMBERS and rk in NUMBERS:
            return self.number_binop(node, op, lhs, rhs)
        if isinstance(lhs, ir.Const) and isinstance(rhs, ir.Const):
            return self.fold(node, PY_BINOPS[type(op)], lhs, rhs)
        if lk == Kind.TENSOR:
            forward = ops.BINOPS.get(type(op))
            if forward is None:
                raise self.error(node, f"the operator `{symbol}` is not supported in a region")
            if type(op) is ast.Div:  # Tensor.__truediv__ is div
                return self.call_op(node, ops.OpSpec("div"), [lhs, rhs], {}, method=True, display="Tensor /")
            return self.call_op(node, ops.OpSpec(forward[0]), [lhs, rhs], {}, method=True, display=f"Tensor {symbol}")
        if rk == Kind.TENSOR and lk in NUMBERS:
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
        if lk == rk == Kind.STR and type(op) is ast.Add:
            return self.intrinsic("str_concat", Kind.STR, lhs, rhs)
        raise self.error(
            node, f"`{symbol}` on {ops.describe(lhs)} and {ops.describe(rhs)} is not supported in a region"
        )

    def scalar_binop(self, node: ast.AST, op: ast.operator, a: ir.Atom, b: ir.Atom) -> ir.Var:
        t = type(op)
        ints = a.kind in (Kind.INT, Kind.BOOL) and b.kind in (Kind.INT, Kind.BOOL)
        if ints:
            if t in INT_BINOPS:
                if a.kind == b.kind == Kind.BOOL and t in (ast.BitAnd, ast.BitOr, ast.BitXor):
                    return self.intrinsic(INT_BINOPS[t], Kind.BOOL, a, b)
                return self.intrinsic(INT_BINOPS[t], Kind.INT, self.as_int(a), self.as_int(b))
            if t is ast.Div:
                return self.intrinsic("int_truediv", Kind.FLOAT, self.as_int(a), self.as_int(b))
            if t is ast.Pow:
                if isinstance(b, ir.Const) and b.value >= 0:
                    return self.intrinsic("int_pow", Kind.INT, self.as_int(a), self.as_int(b))
                raise self.error(
                    node,
                    "int ** int with an exponent only known at run time may be an int or a float in Python",
                    "Write float(x) ** n or use a constant exponent.",
                )
        elif t in FLOAT_BINOPS:
            return self.intrinsic(FLOAT_BINOPS[t], Kind.FLOAT, self.as_float(a), self.as_float(b))
        raise self.error(
            node, f"`{SYMBOLS.get(t, '?')}` on {ops.describe(a)} and {ops.describe(b)} is not supported in a region"
        )

    def as_int(self, a: ir.Atom) -> ir.Atom:
        if a.kind == Kind.BOOL:
            return (
                ir.Const(int(a.value), Kind.INT) if isinstance(a, ir.Const) else self.intrinsic("to_int", Kind.INT, a)
            )
        return a

    def as_float(self, a: ir.Atom) -> ir.Atom:
        if a.kind == Kind.FLOAT:
            return a
        if isinstance(a, ir.Const):
            return ir.Const(float(a.value), Kind.FLOAT)
        return self.intrinsic("to_float", Kind.FLOAT, a)

    def number_binop(self, node: ast.AST, op: ast.operator, a: ir.Atom, b: ir.Atom) -> ir.Var:
        """Arithmetic where a number of run-time type (t.item()) is involved: Python's rules, decided at run time."""
        name = NUMBER_BINOPS.get(type(op))
        if name is None:
            raise self.error(
                node,
                f"`{SYMBOLS.get(type(op), '?')}` on a number from .item() is not supported in a region",
                "Convert it first: float(t) or int(t).",
            )
        return self.intrinsic(name, Kind.NUMBER, a, b)

    def sequence_binop(self, node: ast.AST, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        if type(op) is ast.Add and isinstance(lhs, ir.Tup) and isinstance(rhs, ir.Tup):
            return ir.Tup(lhs.items + rhs.items, is_list=lhs.is_list)
        if type(op) is ast.Add and all(
            isinstance(v, ir.Tup) or getattr(v, "kind", None) == Kind.INTS for v in (lhs, rhs)
        ):
            for v in (lhs, rhs):  # a list parameter + a tuple fails in Python where the caller passed a list
                self.not_a_list_parameter(node, v, "`+` on a list parameter (or a slice of one)")
            if any(isinstance(v, ir.Tup) and v.is_list for v in (lhs, rhs)):  # list + tuple: a TypeError
                raise self.error(node, "`+` of a list and a run-time tuple of ints is not supported in a region")
            out = self.intrinsic("seq_concat", Kind.INTS, self.as_ints(node, lhs), self.as_ints(node, rhs))
            # a torch.Size on either side makes a torch.Size (Size.__add__ and __radd__)
            return self.sized(out) if getattr(lhs, "size", False) or getattr(rhs, "size", False) else out
        if type(op) is ast.Mult:
            seq, n = (lhs, rhs) if isinstance(lhs, ir.Tup) or getattr(lhs, "kind", None) == Kind.INTS else (rhs, lhs)
            if isinstance(seq, ir.Tup) and isinstance(n, ir.Const) and n.kind in (Kind.INT, Kind.BOOL):
                return ir.Tup(seq.items * int(n.value), is_list=seq.is_list)
            if getattr(n, "kind", None) in (Kind.INT, Kind.BOOL):  # `(1,) * (x.ndim - 1)`: a run-time length
                out = self.intrinsic("seq_repeat", Kind.INTS, self.as_ints(node, seq), self.as_int(n))
                return self.sized(out) if getattr(seq, "size", False) else out  # a torch.Size * n is one
        raise self.error(
            node,
            f"`{SYMBOLS.get(type(op), '?')}` on {ops.describe(lhs)} and {ops.describe(rhs)} "
            "is not supported in a region",
        )

    def as_ints(self, node: ast.AST, v: Any) -> ir.Atom:
        if getattr(v, "kind", None) == Kind.INTS:
            return v
        if getattr(v, "kind", None) == Kind.INT_LIST:
            return self.intrinsic("tuple_from", Kind.INTS, v)
        if isinstance(v, ir.Tup) and all(getattr(i, "kind", None) == Kind.INT for i in v.items):
            return self.intrinsic("ints_make", Kind.INTS, *v.items)
        raise self.error(node, f"expected a sequence of ints, got {ops.describe(v)}")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        if isinstance(node.op, ast.Not):
            return self.truth(node)
        operand = self.value(node.operand)
        if isinstance(operand, ir.Const):
            return self.fold(node, PY_UNARYOPS[type(node.op)], operand)
        kind = getattr(operand, "kind", None)
        if kind == Kind.TENSOR:
            return self.call_op(node, ops.OpSpec(ops.UNARYOPS[type(node.op)]), [operand], {}, method=True)
        if kind == Kind.NUMBER and isinstance(node.op, ast.USub):
            return self.intrinsic("number_neg", Kind.NUMBER, operand)
        if kind in ir.SCALAR_KINDS and isinstance(node.op, ast.USub):
            if kind == Kind.FLOAT:
                return self.intrinsic("float_neg", Kind.FLOAT, operand)
            return self.intrinsic("int_neg", Kind.INT, self.as_int(operand))
        if kind in ir.SCALAR_KINDS and isinstance(node.op, ast.UAdd):
            return operand if kind != Kind.BOOL else self.as_int(operand)
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
