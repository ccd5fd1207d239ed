"""Python values a region reads from tensors and types: devices, dtypes, torch.finfo/iinfo, named-tuple fields.

A mixin of ``function.FunctionCompiler``, reached from ``visit_Attribute`` and
from calls of ``torch.finfo``/``torch.iinfo``. What is known when the function
compiles is folded there (``torch.finfo(torch.float16).max`` is a constant); what
is known only at run time (the dtype of a tensor) becomes a choice among the
values Python itself computes for each dtype, so the numbers are torch's own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import torch

from ..torchlib import ops
from . import ir
from .ir import Kind
from .values import RAISABLE_ERRORS, Static, constant


@dataclass(frozen=True)
class TypeInfo:
    """``torch.finfo(dtype)`` or ``torch.iinfo(dtype)`` of a dtype known only at run time."""

    which: Any  # torch.finfo or torch.iinfo
    dtype: ir.Atom


def _dtypes(floating: bool) -> list[torch.dtype]:
    found = []
    for name in dir(torch):
        d = getattr(torch, name)
        if isinstance(d, torch.dtype) and d not in found:
            try:
                (torch.finfo if floating else torch.iinfo)(d)
            except (TypeError, RuntimeError):
                continue
            found.append(d)
    return found


_FINFO_FIELDS = {"bits": Kind.INT, "eps": Kind.FLOAT, "max": Kind.FLOAT, "min": Kind.FLOAT, "tiny": Kind.FLOAT}
_FINFO_FIELDS.update({"smallest_normal": Kind.FLOAT, "resolution": Kind.FLOAT})
_IINFO_FIELDS = {"bits": Kind.INT, "max": Kind.INT, "min": Kind.INT}

# torch.dtype attributes: the intrinsic that reads each from a dtype known at run time
_DTYPE_ATTRIBUTES = {
    "is_floating_point": "dtype_is_floating_point",
    "is_complex": "dtype_is_complex",
    "is_signed": "dtype_is_signed",
    "itemsize": "dtype_itemsize",
}


class PyValueCompiler:
    def attribute_of_value(self, node: ast.Attribute, base: Any) -> Any:
        """`base.attr` for a value that is not a tensor (None when this mixin does not know it)."""
        a = node.attr
        if isinstance(base, ir.Const) and base.kind in (Kind.DTYPE, Kind.ENUM):
            try:
                value = getattr(base.value, a)
            except AttributeError:
                raise self.error(node, f"`{ast.unparse(node)}` does not exist") from None
            c = constant(value)
            return c if c is not None else Static(value)
        if isinstance(base, ir.Tup) and base.structseq is not None:
            fields = getattr(base.structseq, "__match_args__", ())
            if a in fields:
                return base.items[fields.index(a)]
            raise self.error(node, f"`{base.structseq.__name__}` has no field `{a}`")
        kind = getattr(base, "kind", None)
        if kind == Kind.DEVICE:
            if a == "type":
                return self.intrinsic("device_type", Kind.STR, base)
            if a == "index":
                return self.intrinsic("device_index", Kind.OPT_INT, base)
        if kind == Kind.DTYPE and a in _DTYPE_ATTRIBUTES:
            result = Kind.INT if a == "itemsize" else Kind.BOOL
            return self.intrinsic(_DTYPE_ATTRIBUTES[a], result, base)
        if isinstance(base, TypeInfo):
            return self.type_info_field(node, base)
        return None

    # -- torch.finfo / torch.iinfo -------------------------------------------------------------
    def type_info_call(self, node: ast.Call, which: Any, args: list, kwargs: dict) -> Any:
        dtype = args[0] if len(args) == 1 and not kwargs else kwargs.get("type") if len(kwargs) == 1 else None
        if dtype is None or (args and kwargs):
            raise self.error(node, f"torch.{which.__name__}() takes a dtype in a region", "Pass the dtype: x.dtype.")
        if isinstance(dtype, ir.Const) and dtype.kind == Kind.DTYPE:
            try:
                return Static(which(dtype.value))  # folded: its fields are constants
            except TypeError as exc:
                raise self.error(node, f"this fails in Python too: TypeError: {exc}") from None
        if getattr(dtype, "kind", None) != Kind.DTYPE:
            raise self.error(node, f"torch.{which.__name__}() of {ops.describe(dtype)} is not supported in a region")
        floating = which is torch.finfo
        known = _dtypes(floating)
        is_known = self.membership(node, True, dtype, ir.Tup(tuple(ir.Const(d, Kind.DTYPE) for d in known)))
        other = "iinfo" if floating else "finfo"
        kind = "a floating point" if floating else "an integer"
        self.emit(
            ir.If(
                is_known,
                (),
                (
                    ir.Raise(
                        "TypeError",
                        f"torch.{which.__name__}() requires {kind} input type. "
                        f"Use torch.{other} to handle 'torch.{which.__name__}'",
                        self.line(),
                    ),
                ),
                self.line(),
            )
        )
        return TypeInfo(which, dtype)

    def type_info_field(self, node: ast.Attribute, info: TypeInfo) -> Any:
        floating = info.which is torch.finfo
        fields = _FINFO_FIELDS if floating else _IINFO_FIELDS
        kind = fields.get(node.attr)
        if kind is None:
            raise self.error(node, f"`torch.{info.which.__name__}(...).{node.attr}` is not supported in a region")
        out = self.new_var(node.attr, kind)
        self.emit(ir.Declare(out, self.line()))
        # Each dtype's value is torch's own (computed here, in Python); the region picks by dtype.
        chain: tuple[ir.Stmt, ...] = ()
        for d in reversed(_dtypes(floating)):
            try:
                then: ir.Stmt = ir.Move(out, ir.Const(getattr(info.which(d), node.attr), kind), self.line())
            except Exception as exc:  # torch itself fails for this dtype: the region fails the same way
                name = type(exc).__name__
                if name not in RAISABLE_ERRORS:
                    raise self.error(node, f"`{node.attr}` raises {name} in torch for {d}") from None
                then = ir.Raise(name, str(exc), self.line())
            with self.block() as test:
                same = self.intrinsic("eq", Kind.BOOL, info.dtype, ir.Const(d, Kind.DTYPE))
            chain = (*test.body, ir.If(same, (then,), chain, self.line()))
        for stmt in chain:
            self.emit(stmt)
        return out
