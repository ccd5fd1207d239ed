"""Values the front end computes with, besides IR atoms, and its compile-time tables.

``Static`` wraps a Python object known at compile time (a module, a function, a
dtype); ``ir.Tup`` is a tuple known at compile time; ``structure_of`` describes a
value for specialising callees. The tables map Python operators and ``math``
functions to their meaning in a region: a Python function for constant folding,
an intrinsic (``ir.INTRINSICS``) for values known only at run time.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
import sys
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import CompileError
from . import ir
from .ir import Kind

ANNOTATIONS = {"Tensor": Kind.TENSOR, "float": Kind.FLOAT, "int": Kind.INT, "bool": Kind.BOOL, "str": Kind.STR}


@dataclass(frozen=True, eq=False)
class Closure:
    """A lambda or a nested def of the function being compiled: inlined where it is called.

    Its free names are read where it is called (Python's late binding) while its owner calls it;
    passed to another function, it takes their values at that call (`env`)."""

    node: ast.FunctionDef  # a lambda is a FunctionDef returning its expression
    owner: int  # id() of the compiler of the function that defined it
    g: Any  # the globals it was defined with
    filename: str
    lines: list[str]
    env: tuple[tuple[str, Any], ...] | None = None

    def free_names(self) -> list[str]:
        """Names its body reads that are neither its parameters nor assigned in it."""
        a = self.node.args
        own = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
        own |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
        body = ast.Module(body=self.node.body, type_ignores=[])
        stored = {n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        read = [n.id for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        return sorted(set(read) - own - stored)


@dataclass(frozen=True)
class KwArgs:
    """A function's **kwargs: the keyword arguments its call gave beyond its parameters, by name."""

    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Static:
    """A Python object known when the function is compiled (a module, a function, a type)."""

    value: Any


@dataclass(frozen=True)
class SliceValue:
    """``slice(start, stop, step)``: an index item, as ``start:stop:step`` is (each bound an int value or None)."""

    bounds: tuple[Any, Any, Any]


class Unsupported(Exception):
    """An adapter reached `unsupported(...)`: the calling function stays Python."""


# ---- compile-time tables ---------------------------------------------------------------------

PY_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
PY_UNARYOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
PY_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
# Comparisons of numbers (and ==/!= of str, dtypes, sequences of ints) known at run time: intrinsics.
COMPARE_INTRINSICS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
# Arithmetic on ints (and bools, as ints) and on floats known at run time: intrinsics with Python's semantics.
INT_BINOPS = {
    ast.Add: "int_add",
    ast.Sub: "int_sub",
    ast.Mult: "int_mul",
    ast.FloorDiv: "int_floordiv",
    ast.Mod: "int_mod",
    ast.BitAnd: "bit_and",
    ast.BitOr: "bit_or",
    ast.BitXor: "bit_xor",
    ast.LShift: "int_lshift",
    ast.RShift: "int_rshift",
}
FLOAT_BINOPS = {
    ast.Add: "float_add",
    ast.Sub: "float_sub",
    ast.Mult: "float_mul",
    ast.Div: "float_truediv",
    ast.FloorDiv: "float_floordiv",
    ast.Mod: "float_mod",
    ast.Pow: "float_pow",
}
SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.MatMult: "@",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}

# math.* on numbers: the kind each returns; the intrinsic is named "math.<name>".
MATH_FUNCTIONS = {
    math.sqrt: Kind.FLOAT,
    math.exp: Kind.FLOAT,
    math.log: Kind.FLOAT,
    math.log2: Kind.FLOAT,
    math.log10: Kind.FLOAT,
    math.sin: Kind.FLOAT,
    math.cos: Kind.FLOAT,
    math.tan: Kind.FLOAT,
    math.tanh: Kind.FLOAT,
    math.atan: Kind.FLOAT,
    math.erf: Kind.FLOAT,
    math.fabs: Kind.FLOAT,
    math.floor: Kind.INT,
    math.ceil: Kind.INT,
}

RAISABLE_ERRORS = {
    "AssertionError",
    "ValueError",
    "ZeroDivisionError",
    "OverflowError",
    "IndexError",
    "TypeError",
    "RuntimeError",
    "UnboundLocalError",
    "NotImplementedError",
}


def unbound_message(name: str) -> str:
    """Python's message for reading a local that is not bound (this interpreter's wording)."""
    if sys.version_info >= (3, 11):
        return f"cannot access local variable '{name}' where it is not associated with a value"
    return f"local variable '{name}' referenced before assignment"


def kind_of_constant(v: Any) -> Kind | None:
    if type(v) is bool:
        return Kind.BOOL
    if type(v) is int:
        return Kind.INT
    if type(v) is float:
        return Kind.FLOAT
    if v is None:
        return Kind.NONE
    if type(v) is str:
        return Kind.STR
    if isinstance(v, torch.dtype):
        return Kind.DTYPE
    if type(v) is torch.device:
        return Kind.DEVICE
    return None


# The torch enum constants (memory formats, layouts) a region may name: constants of kind ENUM.
ENUM_CONSTANTS = frozenset(
    {torch.contiguous_format, torch.channels_last, torch.channels_last_3d, torch.preserve_format, torch.strided}
)


def constant(v: Any) -> ir.Const | ir.Tup | None:
    if isinstance(v, tuple):
        items = [constant(i) for i in v]
        return None if any(i is None for i in items) else ir.Tup(tuple(items))
    if isinstance(v, (torch.memory_format, torch.layout)) and v in ENUM_CONSTANTS:
        return ir.Const(v, Kind.ENUM)
    kind = kind_of_constant(v)
    if kind is None or (kind == Kind.INT and not -(2**63) <= v < 2**63):
        return None
    return ir.Const(v, kind)


# ---- helpers for values ---------------------------------------------------------------------

UNBOUND = object()


@dataclass(frozen=True)
class Unbound:
    name: str
    why: str = "it is not bound on every path to here"
    # It has no value on any path to here (never bound, in a branch not taken, deleted): Python's ``locals()``
    # lacks it. Otherwise it may have one on some paths, of a kind the region does not hold there.
    certain: bool = False


@dataclass(frozen=True)
class MaybeBound:
    """A name a loop binds, after the loop: its last value, if any iteration bound it (`flag`)."""

    name: str
    var: ir.Var
    flag: ir.Var


@dataclass(frozen=True)
class StarredRest:
    """The starred part of an unpacking whose length is known only at run time."""

    value: ir.Var


@dataclass(frozen=True)
class CellFunction:
    """A decorated function defined in the source being compiled (not yet run)."""

    node: ast.FunctionDef


@dataclass(frozen=True)
class TensorMethod:
    receiver: ir.Atom
    name: str


@dataclass(frozen=True)
class ModuleValue:
    """An nn.Module (or a plain object) whose attributes the runtime reads at the call.

    `atom` (kind MODULE) holds what was read; `mtype` (attr_types.ModType) says its class and
    children; `path` is how the source reached it (``self.blocks[0]``), for messages. Compiled at a
    call, `sample` is the object that call brought: attributes the source does not type take their
    kinds from it (checked at every call like any other)."""

    atom: ir.Var
    mtype: Any
    path: str
    sample: Any = dataclasses.field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class OptionalScalar:
    """An attribute that is a number, a str or a tuple of ints, or None: test `is None` to use it."""

    none: ir.Atom  # BOOL: it is None
    value: ir.Atom  # its value where it is not None
    path: str


@dataclass(frozen=True)
class UnionValue:
    """A submodule that is one of several modules, or None: `tag` (INT) says which option it is."""

    tag: ir.Atom
    module: ir.Var  # the module it is (any option's attributes are read through it)
    options: tuple[Any, ...]  # attr_types.ModType, or None
    path: str
    sample: Any = dataclasses.field(default=None, compare=False, hash=False)  # as ModuleValue.sample

    def option(self, i: int) -> Any:
        o = self.options[i]
        return None if o is None else ModuleValue(self.module, o, self.path, self.sample)


@dataclass(frozen=True)
class PendingObject:
    """`self.config`, an __init__ parameter stored as it is: a plain object if the region reads its
    attributes (``self.config.block_size``), of a kind not known before the cell runs otherwise."""

    module: ModuleValue  # the module it is an attribute of
    name: str
    origin: Any  # attr_types.ParamObject
    path: str


@dataclass(frozen=True)
class BoundMethod:
    """`self.name` where `name` is a compiled method of the module's class (or its forward)."""

    module: ModuleValue
    name: str


def is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return False


def structure_of(value: Any) -> Any:
    """A hashable description of a value: static parts exactly, runtime atoms by kind."""
    if isinstance(value, ModuleValue):
        return ("module", value.mtype)
    if isinstance(value, OptionalScalar):
        return ("optional", structure_of(value.none), structure_of(value.value))
    if isinstance(value, UnionValue):
        return ("union", structure_of(value.tag), value.options)
    if isinstance(value, ir.Tup):
        return ("tuple", tuple(structure_of(v) for v in value.items), value.structseq, value.is_list)
    if isinstance(value, KwArgs):
        return ("kwargs", tuple((k, structure_of(v)) for k, v in value.items))
    if isinstance(value, Closure):
        env = tuple((k, structure_of(v)) for k, v in value.env or ())
        return ("closure", id(value.node), env, _Identity(value, value.node))
    if isinstance(value, ir.Var):
        return ("var", value.kind, value.size)
    if isinstance(value, ir.Const):
        return ("const", value.kind, repr(value.value))
    if isinstance(value, Static):
        return ("static", id(value.value), _Identity(value.value, value.value))
    return ("other", repr(value))


class _Identity:
    """A Python object in a structure, equal to another only where `key` is the same object: a value known
    when compiling (its own key), a closure (the key its def: the same code, whatever else it holds)."""

    def __init__(self, value: Any, key: Any) -> None:
        self.value, self.key = value, key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.key is self.key

    def __hash__(self) -> int:
        return id(self.key)


def runtime_structure(structure: Any) -> Any:
    """A structure with its constants of a run-time kind (ints, floats, ...) as values known at run time."""
    tag = structure[0]
    if tag == "tuple":
        return ("tuple", tuple(runtime_structure(s) for s in structure[1]), *structure[2:])
    if tag == "const" and structure[1] not in (Kind.NONE, Kind.ENUM, Kind.DTYPE, Kind.STR):
        return ("var", structure[1], False)
    return structure


def atoms_of(value: Any) -> list:
    if isinstance(value, ir.Tup):
        return [a for v in value.items for a in atoms_of(v)]
    if isinstance(value, KwArgs):
        return [a for _, v in value.items for a in atoms_of(v)]
    if isinstance(value, Closure):
        return [a for _, v in value.env or () for a in atoms_of(v)]
    if isinstance(value, ModuleValue):
        return [value.atom]
    if isinstance(value, OptionalScalar):
        return [value.none, value.value]
    if isinstance(value, UnionValue):
        return [value.tag, value.module]
    return [value]


def kinds_of(structure: Any) -> tuple[Kind, ...]:
    tag = structure[0]
    if tag == "module":
        return (Kind.MODULE,)
    if tag == "optional":
        return kinds_of(structure[1]) + kinds_of(structure[2])
    if tag == "union":
        return kinds_of(structure[1]) + (Kind.MODULE,)
    if tag == "tuple":
        return tuple(k for s in structure[1] for k in kinds_of(s))
    if tag in ("kwargs", "closure"):
        return tuple(k for _, s in structure[1 if tag == "kwargs" else 2] for k in kinds_of(s))
    if tag == "var":
        return (structure[1],)
    return ()


def rebuild(structure: Any, runtime: Any) -> Any:
    tag = structure[0]
    if tag == "module":
        return ModuleValue(next(runtime), structure[1], "the module")
    if tag == "optional":
        return OptionalScalar(rebuild(structure[1], runtime), rebuild(structure[2], runtime), "the value")
    if tag == "union":
        return UnionValue(rebuild(structure[1], runtime), next(runtime), structure[2], "the module")
    if tag == "tuple":
        return ir.Tup(tuple(rebuild(s, runtime) for s in structure[1]), structure[2], structure[3])
    if tag == "kwargs":
        return KwArgs(tuple((k, rebuild(s, runtime)) for k, s in structure[1]))
    if tag == "static":
        return Static(structure[2].value)
    if tag == "closure":  # a nested def a helper returned, with the values its free names had there
        c = structure[3].value
        return Closure(
            c.node, c.owner, c.g, c.filename, c.lines, tuple((k, rebuild(s, runtime)) for k, s in structure[2])
        )
    if tag == "var":
        var = next(runtime)
        return dataclasses.replace(var, size=True) if structure[2] else var
    if tag == "const":
        kind, text = structure[1], structure[2]
        # our own repr: of a literal, or of a torch dtype / enum constant ("torch.float32", "torch.channels_last")
        value = eval(text, {"torch": torch}) if kind in (Kind.DTYPE, Kind.ENUM) else ast.literal_eval(text)
        return ir.Const(value, kind)
    raise CompileError("a helper returned a value that cannot cross a call")


PLAIN_FUNCTION = "`{name}` is a Python function, not a torch operator or a @ppy.opt function"
PLAIN_FUNCTION_HINT = "Decorate it with @ppy.opt so the region can call it, or keep this function Python."

HINTS = {
    "Expr": "A region has no side effects: assign the value, or call an in-place method like x.add_(y).",
    "Try": "Exceptions cannot be caught inside a region; handle them around the call.",
    "With": "Context managers are not supported in a region; put the `with` around the call.",
    "Lambda": "Define the computation inline instead of as a lambda.",
    "SetComp": "Sets are not supported in a region; use a list.",
    "DictComp": "Dicts are not supported in a region.",
    "Yield": "Generators cannot be regions.",
    "Global": "A region cannot rebind globals; return the value instead.",
    "Nonlocal": "A region cannot rebind outer variables; return the value instead.",
    "FunctionDef": "Define helper functions at the top level of the cell, decorated @ppy.opt.",
    "JoinedStr": "f-strings are not supported in a region.",
}


def describe_node(node: ast.AST) -> str:
    names = {
        "Expr": "a bare expression statement",
        "While": "`while`",
        "For": "`for`",
        "Try": "`try`",
        "With": "`with`",
        "Lambda": "`lambda`",
        "ListComp": "a list comprehension",
        "SetComp": "a set comprehension",
        "DictComp": "a dict comprehension",
        "GeneratorExp": "a generator expression",
        "Yield": "`yield`",
        "YieldFrom": "`yield from`",
        "Global": "`global`",
        "Nonlocal": "`nonlocal`",
        "If": "`if`",
        "IfExp": "a conditional expression",
        "Subscript": "indexing",
        "Attribute": "an attribute",
        "AugAssign": "augmented assignment",
        "Compare": "a comparison",
        "BoolOp": "`and`/`or`",
        "Tuple": "a tuple",
        "List": "a list",
        "Dict": "a dict",
        "Set": "a set",
        "Await": "`await`",
        "Assert": "`assert`",
        "Raise": "`raise`",
        "Delete": "`del`",
        "Import": "`import`",
        "ImportFrom": "`import`",
        "FunctionDef": "a nested function",
        "AsyncFunctionDef": "a nested function",
        "ClassDef": "a class",
        "JoinedStr": "an f-string",
        "Starred": "`*` unpacking",
        "NamedExpr": "`:=`",
        "AnnAssign": "an annotated assignment",
        "Slice": "a slice",
        "Break": "`break`",
        "Continue": "`continue`",
        "Match": "`match`",
    }
    if isinstance(node, ast.UnaryOp):
        symbol = {ast.Not: "not", ast.Invert: "~", ast.USub: "-", ast.UAdd: "+"}[type(node.op)]
        return f"the unary operator `{symbol}`"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return f"the call statement `{ast.unparse(node)}`"
    return names.get(type(node).__name__, f"`{type(node).__name__}`")
