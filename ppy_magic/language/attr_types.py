"""The static types of attribute values (``self.<name>``): a scalar kind, a module type, a union, unknown.

``ClassRef`` names a class by module and qualified name; ``ModType`` is a module value's type (its
class and, for containers built with known children, those children); ``annotation_type`` reads
a Python annotation, ``annotation_node_type`` one written in source. ``classes.py`` infers them
from a class's source.
"""

from __future__ import annotations

import ast
import types
import typing
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .ir import Kind
from .namespace import Globals, static_value

# ---- static types ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassRef:
    """A class instances are checked against: one that exists now (``obj``: torch.nn, an earlier cell),
    or one the source being compiled defines (``cell``: its name and lines, created when the source runs)."""

    name: str
    obj: Any = None
    cell: tuple[int, int] | None = None  # first and last line of the ClassDef

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Scalar:
    """A plain attribute: a tensor, a number, a str, a tuple of ints; `optional`: or None."""

    kind: Kind
    optional: bool = False
    seq: str = ""  # INTS: "tuple" or "list" where only that one is right, "" for either


NONE = Scalar(Kind.NONE)


@dataclass(frozen=True)
class ModType:
    """The static type of a module (or plain object) value."""

    cls: ClassRef | None  # None: a plain object of any class (a config), read attribute by attribute
    children: tuple[tuple[str, Any], ...] | None = None  # a container with known children, in order
    elem: ModType | None = None  # a ModuleList / Sequential of one class, any length
    module: bool = True  # an nn.Module (attributes also in _parameters, _buffers, _modules)
    origin: ParamObject | None = None  # a plain object: the parameter it came from (its fields' kinds)
    # values compiled into the code that reads it, which give instances of one class layouts (and code) of their
    # own: an einops layer's pattern and axis lengths (einops_forms.layer_operation)
    constants: tuple = ()

    def describe(self) -> str:
        if self.cls is None:
            return "an object"
        if self.elem is not None:
            return f"{self.cls.name} of {self.elem.describe()}"
        return self.cls.name


@dataclass(frozen=True)
class Union:
    """An attribute that is one of several modules, or None (`None` among the options)."""

    options: tuple[ModType | None, ...]


@dataclass(frozen=True)
class Unknown:
    why: str


@dataclass(frozen=True)
class ParamObject:
    """An __init__ parameter stored as it is (``self.config = config``): an object whose fields
    (``self.config.block_size``) have the kinds a dataclass declares."""

    arg: ast.arg

    def as_type(self) -> ModType:
        return ModType(None, module=False, origin=self)


AttrType = Scalar | ModType | Union | Unknown | ParamObject

# ---- annotations ---------------------------------------------------------------------------------

PLAIN = {int: Kind.INT, float: Kind.FLOAT, bool: Kind.BOOL, str: Kind.STR, torch.Tensor: Kind.TENSOR}
PLAIN_NAMES = {"int": Kind.INT, "float": Kind.FLOAT, "bool": Kind.BOOL, "str": Kind.STR, "Tensor": Kind.TENSOR}


def annotation_type(ann: Any, exact: bool = False) -> AttrType:
    """The attribute type a Python annotation (an object, as ``typing`` evaluates it) says.

    Class bodies do not always tell a tuple from a list (torch annotates a tuple ``list[int]``):
    only an `exact` one (a restatement's declaration) makes the region insist on one of them."""
    if ann in PLAIN:
        return Scalar(PLAIN[ann])
    if ann is nn.Parameter:
        return Scalar(Kind.TENSOR)
    if ann is type(None) or ann is None:
        return NONE
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        parts = [annotation_type(a, exact) for a in args]
        return union(parts)
    if origin in (tuple, list) and args and all(a is int for a in args if a is not Ellipsis):
        return Scalar(Kind.INTS, seq=origin.__name__ if exact else "")
    if origin is typing.Literal and args and all(type(a) is str for a in args):
        return Scalar(Kind.STR)
    if isinstance(ann, type) and issubclass(ann, nn.Module):
        return ModType(ClassRef(ann.__name__, ann))
    return Unknown(f"its annotation {ann!r} is not a kind a region knows")


def annotation_node_type(node: ast.expr, g: Globals) -> AttrType:
    """The attribute type an annotation in the source says (``int``, ``float | None``, ``tuple[int, ...]``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return Unknown("its annotation is not valid Python")
    if isinstance(node, ast.Name) and node.id in PLAIN_NAMES and node.id not in g.values:
        return Scalar(PLAIN_NAMES[node.id])
    if isinstance(node, ast.Constant) and node.value is None:
        return NONE
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return union([annotation_node_type(node.left, g), annotation_node_type(node.right, g)])
    if isinstance(node, ast.Subscript):
        base = static_value(node.value, g)
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base is typing.Optional:
            return union([annotation_node_type(inner[0], g), NONE])
        if base is typing.Union:
            return union([annotation_node_type(e, g) for e in inner])
        if base in (tuple, list, typing.Tuple, typing.List):  # noqa: UP006 - the objects, not annotations
            ints = all(
                (isinstance(e, ast.Constant) and e.value is Ellipsis) or annotation_node_type(e, g) == Scalar(Kind.INT)
                for e in inner
            )
            return Scalar(Kind.INTS) if ints else Unknown("a tuple that is not of ints")
    value = static_value(node, g)
    if value is not None:
        return annotation_type(value)
    return Unknown(f"its annotation `{ast.unparse(node)}` is not a kind a region knows")


def union(parts: list[AttrType]) -> AttrType:
    """What an attribute is when it may be any of `parts` (assigned in several places)."""
    unknown = next((p for p in parts if isinstance(p, Unknown)), None)
    if unknown is not None:
        return unknown
    objects = [p for p in parts if isinstance(p, ParamObject)]
    if objects:
        return objects[0] if all(p == objects[0] for p in parts) else Unknown("it is assigned different objects")
    flat: list[Any] = []
    for p in parts:
        flat += list(p.options) if isinstance(p, Union) else [p]
    scalars = {p for p in flat if isinstance(p, Scalar) and p != NONE}
    has_none = any(p == NONE or p is None for p in flat)
    mods = [p for p in flat if isinstance(p, ModType)]
    if scalars and mods:
        return Unknown("it is a module in one place and a value in another")
    if mods:
        options: list[ModType | None] = []
        for m in mods:
            if m not in options:
                options.append(m)
        if has_none:
            options.append(None)
        return options[0] if len(options) == 1 else Union(tuple(options))
    kinds = {s.kind for s in scalars}
    optional = has_none or any(s.optional for s in scalars)
    if not kinds:
        return NONE
    if len(kinds) > 1:
        return Unknown(f"it is {' or '.join(sorted(k.name.lower() for k in kinds))} in different places")
    seqs = {s.seq for s in scalars}
    return Scalar(kinds.pop(), optional, seqs.pop() if len(seqs) == 1 else "")


def is_module_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, nn.Module)
