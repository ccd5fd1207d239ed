"""What a parameter's annotation (or its default) says about the values it holds: its kind.

An annotation is evaluated when the function compiles, with the names it uses
resolved like any global (``torch.Tensor``, ``Optional`` from ``typing``, ...),
into the typing object Python would build, and classified from that object:
every spelling of one type is one kind (``Optional[int]``, ``Union[int, None]``,
``int | None``, ``None | int`` and ``"int | None"`` all hold an int or None). Only
names, attributes, subscripts, ``|``, tuples, ``...``, ``None`` and strings are
evaluated; anything else is not understood.
"""

from __future__ import annotations

import ast
import collections.abc
import types
import typing
from typing import Any

import torch

from .ir import OPTIONAL_OF, Kind
from .namespace import Globals, static_value
from .values import PY_BINOPS

# A float-annotated parameter (or one with a float default) can hold an int as well: Python keeps
# the value's type. Such a parameter is compiled for both (translate() compiles the body per type).
# Likewise a torch.device parameter given a device string: a str is not a torch.device in Python.
INT_OR_FLOAT = Kind.INT_OR_FLOAT
DEVICE = Kind.DEVICE_OR_STR

_SIMPLE = {
    torch.Tensor: Kind.TENSOR,
    torch.nn.Parameter: Kind.TENSOR,
    int: Kind.INT,
    bool: Kind.BOOL,
    str: Kind.STR,
    torch.dtype: Kind.DTYPE,
    torch.device: Kind.DEVICE_OR_STR,
    torch.Size: Kind.INTS,
}
_SEQUENCES = (list, tuple, collections.abc.Sequence, typing.List, typing.Tuple, typing.Sequence)  # noqa: UP006


class NotUnderstood(Exception):
    """The annotation is not one a region understands."""


def evaluate(node: ast.expr, g: Globals) -> Any:
    """The typing object an annotation denotes, built from statically known names only."""
    if isinstance(node, ast.Constant):
        if node.value is None or node.value is Ellipsis:
            return node.value
        if isinstance(node.value, str):  # a forward reference: "torch.Tensor | None"
            try:
                inner = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                raise NotUnderstood from None
            return evaluate(inner, g)
        raise NotUnderstood
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = static_value(node, g)
        if value is None:
            raise NotUnderstood
        return value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = evaluate(node.left, g), evaluate(node.right, g)
        return typing.Union[left, right]  # noqa: UP007 - the object `left | right` denotes
    if isinstance(node, ast.Subscript):
        base = evaluate(node.value, g)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        params = tuple(evaluate(a, g) for a in args)
        try:
            return base[params if len(params) > 1 else params[0]]
        except TypeError:
            raise NotUnderstood from None
    raise NotUnderstood


def classify(tp: Any) -> Kind | str:
    """The kind of the values of type `tp` (``INT_OR_FLOAT`` for a float), or NotUnderstood."""
    if tp is float:
        return INT_OR_FLOAT
    if tp in _SIMPLE:
        return _SIMPLE[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is list or tp is typing.List:  # noqa: UP006 - a bare list: of tensors, as regions always took it
        return Kind.TENSORS
    if origin in (typing.Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        if set(present) <= {int, float} and float in present:
            return INT_OR_FLOAT if len(present) == len(args) else Kind.OPT_FLOAT
        if len(present) == 1 and len(args) == 2:  # X | None
            inner = classify(present[0])
            inner = Kind.FLOAT if inner == INT_OR_FLOAT else inner
            if inner in OPTIONAL_OF:
                return OPTIONAL_OF[inner]
        raise NotUnderstood
    if origin in _SEQUENCES:
        items = [a for a in args if a is not Ellipsis]
        if items and all(a is int for a in items):
            return Kind.INTS
        if items and all(a in (torch.Tensor, torch.nn.Parameter) for a in items):
            return Kind.TENSORS
    raise NotUnderstood


def annotation_kind(node: ast.expr, g: Globals) -> Kind | str:
    """The kind of a parameter annotated `node`; NotUnderstood if a region cannot take it."""
    return classify(evaluate(node, g))


def default_kind(value: Any) -> Kind | str | None:
    """The kind an unannotated parameter takes from its default, or None."""
    if value is None:
        return Kind.OPT_TENSOR  # documented: an unannotated parameter defaulting to None is a Tensor or None
    if type(value) is float:
        return INT_OR_FLOAT
    for t, kind in ((bool, Kind.BOOL), (int, Kind.INT), (str, Kind.STR)):
        if type(value) is t:
            return kind
    if isinstance(value, torch.dtype):
        return Kind.DTYPE
    if isinstance(value, torch.device):
        return Kind.DEVICE_OR_STR
    if isinstance(value, tuple) and value and all(type(v) is int for v in value):
        return Kind.INTS
    return None


# The arithmetic a default may hold (lower=1.0 / 8), as values.PY_BINOPS computes it.
_ARITHMETIC = {op: PY_BINOPS[op] for op in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)}


def default_value(node: ast.expr, g: Globals) -> tuple[bool, Any]:
    """A parameter's default known when the function compiles: a literal, a dtype, a torch.device(...)."""
    try:
        return True, ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # -math.inf
        ok, v = default_value(node.operand, g)
        return (True, -v) if ok and type(v) in (int, float) else (False, None)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:  # lower=1.0 / 8 (F.rrelu)
        (ok_a, a), (ok_b, b) = default_value(node.left, g), default_value(node.right, g)
        if ok_a and ok_b and type(a) in (int, float) and type(b) in (int, float):
            try:
                return True, _ARITHMETIC[type(node.op)](a, b)  # as Python computed it when the def ran
            except (ArithmeticError, ValueError):
                return False, None
        return False, None
    if isinstance(node, (ast.Name, ast.Attribute)):
        v = static_value(node, g)
        if isinstance(v, (torch.dtype, float, int, bool, str)) and not isinstance(v, type):
            return True, v
    if (
        isinstance(node, ast.Call)
        and static_value(node.func, g) is torch.device
        and not node.keywords
        and all(isinstance(a, ast.Constant) for a in node.args)
    ):
        try:
            return True, torch.device(*(a.value for a in node.args))
        except (RuntimeError, TypeError):
            return False, None
    if isinstance(node, ast.Call) and static_value(node.func, g) is float and len(node.args) == 1:  # float("inf")
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            try:
                return True, float(arg.value)
            except ValueError:
                return False, None
    return False, None


# What a default must be for each kind (INT_OR_FLOAT: an int or a float).
def default_fits(kind: Kind | str, value: Any) -> bool:
    if value is None:
        return kind in OPTIONAL_OF.values()
    if kind == INT_OR_FLOAT:
        return type(value) in (int, float)
    if kind in (Kind.OPT_FLOAT,):
        return type(value) is float
    want = {
        Kind.INT: (int,),
        Kind.OPT_INT: (int,),
        Kind.BOOL: (bool,),
        Kind.OPT_BOOL: (bool,),
        Kind.STR: (str,),
        Kind.DTYPE: (torch.dtype,),
        Kind.OPT_DTYPE: (torch.dtype,),
        Kind.DEVICE_OR_STR: (torch.device, str),
    }.get(kind)
    if want is not None:
        return type(value) in want
    if kind == Kind.INTS:
        return isinstance(value, (tuple, list)) and all(type(v) is int for v in value)
    if kind == Kind.SIZE:
        return type(value) is torch.Size
    return False
