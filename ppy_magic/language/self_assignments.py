"""What ``self.<name> = <expr>`` assigns, read from a method's source: the type of an expression there.

``Env`` types the expressions of one method of a class (literals, parameters with an annotation
or a default, ``config.<field>`` of a dataclass, ``nn`` modules and containers built in place);
``classes.Classes`` walks a class's methods and records each attribute's type from it.
"""

from __future__ import annotations

import ast
import dataclasses
import types
import typing
from typing import Any

import torch
from torch import nn

from .attr_types import (
    NONE,
    PLAIN,
    AttrType,
    ClassRef,
    ModType,
    ParamObject,
    Scalar,
    Unknown,
    annotation_node_type,
    annotation_type,
    is_module_class,
    union,
)
from .ir import Kind
from .namespace import Globals, static_value


def is_self(node: ast.AST, me: str) -> bool:
    return isinstance(node, ast.Name) and node.id == me


def is_self_attr(node: ast.AST, me: str) -> bool:
    return isinstance(node, ast.Attribute) and is_self(node.value, me)


class Env:
    """The types of expressions inside one method of a class (for `self.x = <expr>`)."""

    def __init__(self, classes: Any, g: Globals, me: str, params: dict, defaults: dict, model: Any):
        self.classes = classes
        self.g = g
        self.me = me
        self.params = params
        self.defaults = defaults
        self.model = model

    def type_of(self, e: ast.expr) -> AttrType:
        if isinstance(e, ast.Constant):
            return _constant_type(e.value)
        if isinstance(e, (ast.Tuple, ast.List)):
            items = [self.type_of(i) for i in e.elts]
            if all(i == Scalar(Kind.INT) for i in items):
                return Scalar(Kind.INTS, seq="tuple" if isinstance(e, ast.Tuple) else "list")
            return Unknown("a tuple or list that is not of ints")
        if isinstance(e, ast.IfExp):
            return union([self.type_of(e.body), self.type_of(e.orelse)])
        if isinstance(e, ast.Name):
            return self.name_type(e.id)
        if isinstance(e, ast.Attribute):
            if is_self(e.value, self.me):
                t = self.model.attrs.get(e.attr)
                return t if t is not None else Unknown(f"self.{e.attr} is not known here")
            if isinstance(e.value, ast.Name) and e.value.id in self.params:
                return field_type(self.classes, self.params[e.value.id], e.attr)
            obj = static_value(e, self.g)
            if obj is not None:
                return _constant_type(obj)
            return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")
        if isinstance(e, ast.BinOp):
            a, b = self.type_of(e.left), self.type_of(e.right)
            if isinstance(a, Scalar) and isinstance(b, Scalar) and not a.optional and not b.optional:
                if Kind.TENSOR in (a.kind, b.kind):
                    return Scalar(Kind.TENSOR)
                if a.kind in (Kind.INT, Kind.BOOL) and b.kind in (Kind.INT, Kind.BOOL):
                    return Scalar(Kind.FLOAT) if isinstance(e.op, ast.Div) else Scalar(Kind.INT)
                if {a.kind, b.kind} <= {Kind.INT, Kind.FLOAT, Kind.BOOL}:
                    return Scalar(Kind.FLOAT)
                if a.kind == b.kind == Kind.INTS and isinstance(e.op, ast.Add):
                    return Scalar(Kind.INTS)
            return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")
        if isinstance(e, ast.UnaryOp):
            t = self.type_of(e.operand)
            if isinstance(e.op, ast.Not):
                return Scalar(Kind.BOOL)
            return t
        if isinstance(e, ast.Compare):
            return Scalar(Kind.BOOL)
        if isinstance(e, ast.BoolOp):
            return union([self.type_of(v) for v in e.values])
        if isinstance(e, ast.Call):
            return self.call_type(e)
        if isinstance(e, ast.Subscript):
            return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")
        return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")

    def name_type(self, name: str) -> AttrType:
        if name in self.params:
            arg = self.params[name]
            if arg.annotation is not None:
                t = annotation_node_type(arg.annotation, self.g)
                if not isinstance(t, Unknown):
                    return t
            d = self.defaults.get(name)
            if d is not None and isinstance(d, ast.Constant) and d.value is not None:
                return _constant_type(d.value)
            if d is None:
                return ParamObject(arg)
            return Unknown(f"the parameter '{name}' has no annotation")
        ok, value = self.g.lookup(name)
        if ok:
            return _constant_type(value)
        return Unknown(f"'{name}' is not known before the cell runs")

    def call_type(self, call: ast.Call) -> AttrType:
        f = call.func
        obj = static_value(f, self.g)
        if obj in (int, len):
            return Scalar(Kind.INT)
        if obj is float:
            return Scalar(Kind.FLOAT)
        if obj in (bool, hasattr, isinstance, callable):
            return Scalar(Kind.BOOL)
        if obj is str:
            return Scalar(Kind.STR)
        if obj in (tuple, list) and call.args:
            inner = self.type_of(call.args[0])
            if isinstance(inner, Scalar) and inner.kind == Kind.INTS and not inner.optional:
                return Scalar(Kind.INTS, seq=obj.__name__)
            return Unknown(f"a {obj.__name__} whose items are not known")
        if obj is nn.Parameter or obj is nn.parameter.Buffer:
            return Scalar(Kind.TENSOR)
        if isinstance(obj, types.ModuleType) or (
            isinstance(obj, (types.BuiltinFunctionType, types.FunctionType))
            and getattr(obj, "__module__", "") in ("torch", "torch.functional", "torch._C._VariableFunctions")
        ):
            return Scalar(Kind.TENSOR)
        ref = self.classes.ref_of(f)
        if ref is not None and (ref.obj is None or is_module_class(ref.obj)):
            return self.module_type(ref, call)
        if isinstance(f, ast.Attribute):
            base = self.type_of(f.value) if not isinstance(f.value, ast.Name) or f.value.id != "torch" else None
            if isinstance(base, Scalar) and base.kind == Kind.TENSOR and not base.optional:
                return Scalar(Kind.TENSOR)  # a tensor method: torch.tril(...).view(...)
            if static_value(f.value, self.g) is torch:
                return Scalar(Kind.TENSOR)
        return Unknown(f"`{ast.unparse(call)}` is not known before the cell runs")

    def module_type(self, ref: ClassRef, call: ast.Call) -> AttrType:
        cls = ref.obj
        if cls in (nn.ModuleList, nn.Sequential):
            items = call.args
            if cls is nn.ModuleList and len(items) == 1:
                return self._list_items(ref, items[0])
            if cls is nn.Sequential and len(items) == 1 and isinstance(items[0], ast.Starred):
                return self._list_items(ref, items[0].value)
            if cls is nn.Sequential and len(items) == 1 and _is_call_to(items[0], "OrderedDict", self.g):
                return self._keyed(ref, items[0].args[0] if items[0].args else None)
            if not items and cls is nn.ModuleList:
                return ModType(ref, children=())
            return self._children(ref, [(str(i), a) for i, a in enumerate(items)])
        if cls is nn.ModuleDict:
            if not call.args:
                return ModType(ref, children=())
            return self._keyed(ref, call.args[0])
        if ref.obj is None and not self.classes.is_module(ref):
            return ModType(ref, module=False)
        return ModType(ref)

    def _list_items(self, ref: ClassRef, e: ast.expr) -> AttrType:
        if isinstance(e, (ast.List, ast.Tuple)):
            return self._children(ref, [(str(i), a) for i, a in enumerate(e.elts)])
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            elem = self.type_of(e.elt)
            if isinstance(elem, ModType):
                return ModType(ref, elem=elem)
            return Unknown(f"the items of this {ref.name} are not modules known before the cell runs")
        return Unknown(f"the modules in this {ref.name} are not known before the cell runs")

    def _keyed(self, ref: ClassRef, e: ast.expr | None) -> AttrType:
        if e is None:
            return ModType(ref, children=())
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(e, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in e.keys):
            pairs = [(k.value, v) for k, v in zip(e.keys, e.values, strict=True)]  # type: ignore[union-attr]
        elif isinstance(e, ast.Call) and static_value(e.func, self.g) is dict and not e.args:
            pairs = [(kw.arg, kw.value) for kw in e.keywords if kw.arg is not None]
            if len(pairs) != len(e.keywords):
                return Unknown("the keys of this container are not known before the cell runs")
        elif isinstance(e, (ast.List, ast.Tuple)) and all(
            isinstance(p, ast.Tuple) and len(p.elts) == 2 and isinstance(p.elts[0], ast.Constant) for p in e.elts
        ):
            pairs = [(p.elts[0].value, p.elts[1]) for p in e.elts]  # type: ignore[attr-defined]
        else:
            return Unknown(f"the modules in this {ref.name} are not known before the cell runs")
        return self._children(ref, pairs)

    def _children(self, ref: ClassRef, pairs: list[tuple[str, ast.expr]]) -> AttrType:
        children = []
        for key, value in pairs:
            t = self.type_of(value)
            if not isinstance(t, ModType):
                return Unknown(f"the item '{key}' of this {ref.name} is not a module known before the cell runs")
            children.append((key, t))
        return ModType(ref, children=tuple(children))


def literal_type(e: ast.expr) -> AttrType | None:
    """The type of a literal int/float/bool/str (or tuple of ints) class constant, else None."""
    try:
        value = ast.literal_eval(e)
    except ValueError:
        return None
    t = _constant_type(value)
    return None if isinstance(t, Unknown) or t == NONE else t


def _is_call_to(e: ast.expr, name: str, g: Globals) -> bool:
    if not isinstance(e, ast.Call):
        return False
    obj = static_value(e.func, g)
    return getattr(obj, "__name__", None) == name


def _constant_type(value: Any) -> AttrType:
    if value is None:
        return NONE
    if type(value) in PLAIN:
        return Scalar(PLAIN[type(value)])
    if isinstance(value, torch.Tensor):
        return Scalar(Kind.TENSOR)
    if isinstance(value, (tuple, list)) and all(type(v) is int for v in value):
        return Scalar(Kind.INTS, seq=type(value).__name__ if type(value) in (tuple, list) else "")
    return Unknown(f"a {type(value).__name__} value")


def field_type(classes: Any, param: ast.arg, name: str) -> AttrType:
    """`config.<name>` where `config` is a parameter: the field's annotation in a dataclass.

    The parameter's own annotation names the dataclass; without one, every dataclass of the
    source and of the namespace that declares the field must agree on its kind."""
    if param.annotation is not None:
        ref = classes.ref_of(param.annotation)
        if ref is not None:
            found = _dataclass_fields(classes, ref)
            if found is not None:
                return found.get(name, Unknown(f"the dataclass {ref.name} has no field '{name}'"))
    seen: list[AttrType] = []
    for cname in classes.nodes:
        fields = _dataclass_fields(classes, ClassRef(cname))
        if fields and name in fields:
            seen.append(fields[name])
    for value in classes.g.values.values():
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__name__ not in classes.nodes:
            fields = _dataclass_fields(classes, ClassRef(value.__name__, value))
            if fields and name in fields:
                seen.append(fields[name])
    if not seen:
        return Unknown(f"`{param.arg}.{name}` is not a field of a dataclass the region can see")
    kinds = set(seen)
    if len(kinds) != 1:
        return Unknown(f"dataclasses disagree on the kind of the field '{name}'")
    return seen[0]


def _dataclass_fields(classes: Any, ref: ClassRef) -> dict[str, AttrType] | None:
    if ref.obj is not None:
        if not dataclasses.is_dataclass(ref.obj):
            return None
        try:
            hints = typing.get_type_hints(ref.obj)
        except Exception:
            hints = {}
        return {f.name: annotation_type(hints.get(f.name, f.type)) for f in dataclasses.fields(ref.obj)}
    cdef = classes.nodes.get(ref.name)
    if cdef is None or not any(
        static_value(d.func if isinstance(d, ast.Call) else d, classes.g) is dataclasses.dataclass
        for d in cdef.decorator_list
    ):
        return None
    return {
        s.target.id: annotation_node_type(s.annotation, classes.g)
        for s in cdef.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }
