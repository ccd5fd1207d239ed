"""Indexing in the region language: tensors (ATen's indexing), tuples and sequences of ints or tensors.

A mixin of ``function.FunctionCompiler``. ``x[...]`` on a tensor becomes an
``ir.GetItem``/``ir.SetItem`` whose items say what each index is; a tuple known at
compile time is indexed at compile time; a sequence known only at run time is
indexed by intrinsics with Python's bounds checks.
"""

from __future__ import annotations

import ast
from typing import Any

from ..torchlib import ops
from . import ir
from .ir import Kind
from .namespace import static_value
from .values import KwArgs, ModuleValue, SliceValue, Static


class IndexCompiler:
    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.value(node.value)
        if isinstance(base, ir.Tup):
            return self.tuple_index(node, base)
        if isinstance(base, KwArgs):
            return self.keyword_index(node, base)
        if isinstance(base, Static) and _is_type_form(base.value):
            return self.type_form(node, base.value)
        if isinstance(base, ModuleValue):  # a ModuleList, Sequential or ModuleDict
            if isinstance(node.slice, ast.Slice):
                raise self.error(node, "slicing modules is not supported in a region")
            return self.module_index(node, base, self.value(node.slice))
        kind = getattr(base, "kind", None)
        if kind in ir.SEQUENCE_KINDS:
            return self.sequence_index(node, base)
        if kind != Kind.TENSOR:
            raise self.error(node, f"indexing {ops.describe(base)} is not supported in a region")
        return self.getitem(node, base, self.index_items(node.slice))

    def type_form(self, node: ast.Subscript, base: Any) -> Static:
        """``list[int]``, ``Optional[Tensor]``: a type known when compiling (torch.jit.annotate's first argument)."""

        def python(v: Any) -> Any:
            if isinstance(v, (Static, ir.Const)):
                return v.value
            if isinstance(v, ir.Tup) and not v.is_list:
                return tuple(python(i) for i in v.items)
            raise self.error(node, f"the type {ast.unparse(node)} is not known when compiling")

        try:
            return Static(base[python(self.value(node.slice))])
        except TypeError as err:
            raise self.error(node, f"the type {ast.unparse(node)} is not a type: {err}") from None

    def keyword_index(self, node: ast.Subscript, base: KwArgs) -> Any:
        """``kwargs[name]`` of a function's ``**kwargs`` with a name known when compiling: the call's value."""
        key = self.value(node.slice) if not isinstance(node.slice, ast.Slice) else None
        if not (isinstance(key, ir.Const) and key.kind == Kind.STR):
            raise self.error(node, "indexing **kwargs needs a str key known when compiling")
        for name, value in base.items:
            if name == key.value:
                return value
        raise self.error(node, f"the call passed no keyword {key.value!r} (a KeyError in Python)")

    def tuple_index(self, node: ast.Subscript, base: ir.Tup) -> Any:
        idx = self.value(node.slice) if not isinstance(node.slice, ast.Slice) else None
        if isinstance(node.slice, ast.Slice):
            parts = [
                self.value(p) if p is not None else ir.Const(None, Kind.NONE)
                for p in (node.slice.lower, node.slice.upper, node.slice.step)
            ]
            if all(isinstance(p, ir.Const) for p in parts):
                items = base.items[slice(*(p.value for p in parts))]
                return self.make_list(node, items) if base.is_list else ir.Tup(items)
            if base.is_list:
                return self.sequence_index(node, self.as_runtime_list(node, base))
            return self.sequence_index(node, self.as_ints(node, base))
        if isinstance(idx, ir.Const) and idx.kind == Kind.INT and -len(base.items) <= idx.value < len(base.items):
            return base.items[idx.value]
        if getattr(idx, "kind", None) in (Kind.INT, Kind.BOOL):
            # an index known only at run time (or out of range): the items as a run-time sequence, which
            # raises IndexError as Python does
            kinds = {getattr(i, "kind", None) for i in base.items}
            kind = kinds.pop() if len(kinds) == 1 else None
            if base.is_list and kind in ir.LIST_OF:
                seq = self.intrinsic("list_of", ir.LIST_OF[kind], *base.items)
                return self.intrinsic("seq_get", kind, seq, self.as_int(idx))
            if not base.is_list and kind in (Kind.INT, Kind.TENSOR):
                tup = Kind.INTS if kind == Kind.INT else Kind.TENSORS
                seq = self.intrinsic("tuple_from", tup, self.intrinsic("list_of", ir.LIST_OF[kind], *base.items))
                return self.intrinsic("seq_get", kind, seq, self.as_int(idx))
        if isinstance(idx, ir.Const) and idx.kind == Kind.INT:
            raise self.error(node, f"{'list' if base.is_list else 'tuple'} index out of range, in Python too")
        raise self.error(
            node,
            "indexing a tuple whose items have different kinds needs an index known at compile time",
        )

    def sequence_index(self, node: ast.Subscript, base: ir.Atom) -> Any:
        """`s[i]` and `s[a:b:c]` of a list or a run-time tuple, with Python's bounds and errors."""
        if isinstance(node.slice, ast.Slice):
            parts = []
            for p in (node.slice.lower, node.slice.upper, node.slice.step):
                v = self.value(p) if p is not None else ir.Const(None, Kind.NONE)
                if getattr(v, "kind", None) not in (Kind.INT, Kind.BOOL, Kind.NONE):
                    raise self.error(node, "slice bounds must be ints or None")
                parts.append(self.as_int(v) if v.kind == Kind.BOOL else v)
            part = self.intrinsic("seq_slice", base.kind, base, *parts)
            if isinstance(base, ir.Var) and base.name in self.param_vars:
                self.param_vars.add(part.name)  # a list or a tuple, as the parameter is
            return self.sized(part) if getattr(base, "size", False) else part  # a slice of a torch.Size is one
        idx = self.value(node.slice)
        if getattr(idx, "kind", None) not in (Kind.INT, Kind.BOOL):
            raise self.error(node.slice, f"sequence indices must be ints, not {ops.describe(idx)}")
        return self.intrinsic("seq_get", ir.ITEM_KIND[base.kind], base, self.as_int(idx))

    def index_items(self, sl: ast.expr) -> tuple[ir.IndexItem, ...]:
        elts: list[Any] = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        if not isinstance(sl, (ast.Tuple, ast.Slice)) and not self.is_range(sl):
            whole = self.value(sl)
            # a tuple is the index's items (`i = (0, 1); x[i]` is x[0, 1]); anything else is one item
            elts = [(sl, v) for v in whole.items] if isinstance(whole, ir.Tup) and not whole.is_list else [(sl, whole)]
        items = []
        for e in elts:
            e, given = e if isinstance(e, tuple) else (e, None)
            if self.is_range(e):  # x[range(n)]: the range's ints, a Long index tensor
                items.append(self.range_index(e))
                continue
            if isinstance(e, ast.Slice):
                values = [(p, self.value(p) if p is not None else None) for p in (e.lower, e.upper, e.step)]
                items.append(self.slice_item(values))
                continue
            v = self.value(e) if given is None else given
            if isinstance(v, SliceValue):  # slice(a, b): as a:b
                items.append(self.slice_item([(e, b) for b in v.bounds]))
                continue
            if isinstance(v, Static) and v.value is Ellipsis:
                items.append(ir.IndexItem("ellipsis"))
            elif isinstance(v, ir.Const) and v.kind == Kind.NONE:
                items.append(ir.IndexItem("none"))
            elif getattr(v, "kind", None) == Kind.INT:
                items.append(ir.IndexItem("int", (v,)))
            elif getattr(v, "kind", None) == Kind.BOOL:
                items.append(ir.IndexItem("bool", (v,)))
            elif getattr(v, "kind", None) == Kind.TENSOR:
                items.append(ir.IndexItem("tensor", (v,)))
            elif isinstance(v, ir.Tup) and all(getattr(i, "kind", None) == Kind.INT for i in v.items):
                items.append(ir.IndexItem("list", tuple(v.items)))  # x[:, [0, -1]]: a Long index tensor
            elif getattr(v, "kind", None) == Kind.INT_LIST:
                items.append(ir.IndexItem("ints", (v,)))  # a run-time list of ints: a Long index tensor too
            else:
                raise self.error(
                    e,
                    f"indexing a tensor with {ops.describe(v)} is not supported in a region",
                    "Index with ints, slices, None, ..., or tensors.",
                )
        return tuple(items)

    def slice_item(self, bounds: list[tuple[ast.AST, Any]]) -> ir.IndexItem:
        parts = []
        for p, v in bounds:
            if v is not None and not (
                getattr(v, "kind", None) in (Kind.INT, Kind.BOOL) or (isinstance(v, ir.Const) and v.kind == Kind.NONE)
            ):
                raise self.error(p, f"slice bounds must be ints or None, got {ops.describe(v)}")
            parts.append(None if v is None or (isinstance(v, ir.Const) and v.kind == Kind.NONE) else v)
        return ir.IndexItem("slice", tuple(parts))

    def is_range(self, e: ast.expr) -> bool:
        return isinstance(e, ast.Call) and not e.keywords and static_value(e.func, self.g) is range

    def getitem(self, node: ast.AST, base: ir.Atom, index: tuple[ir.IndexItem, ...]) -> ir.Var:
        return self.assign(ir.GetItem(base, index), Kind.TENSOR)

    def setitem(self, target: ast.Subscript, value: Any) -> None:
        base = self.value(target.value)
        if self.list_setitem(target, base, value):
            return
        if getattr(base, "kind", None) != Kind.TENSOR:
            raise self.error(target, "only tensors support item assignment in a region")
        self.store_item(target, base, self.index_items(target.slice), value)

    def store_item(self, node: ast.AST, base: ir.Atom, index: tuple[ir.IndexItem, ...], value: Any) -> None:
        kind = getattr(value, "kind", None)
        if kind not in (Kind.TENSOR, Kind.FLOAT, Kind.INT, Kind.BOOL):
            raise self.error(node, f"assigning {ops.describe(value)} into a tensor is not supported in a region")
        self.emit(ir.SetItem(base, index, value, self.line()))


def _is_type_form(value: Any) -> bool:
    """A class or a typing form (``Optional``, ``Union``, ``list[int]``): what a subscript makes a type of."""
    return isinstance(value, type) or type(value).__module__ in ("typing", "types")
