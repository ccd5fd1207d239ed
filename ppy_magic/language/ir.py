"""The region IR: what the front end understood of one function.

Structured code (blocks, ``if``, ``for``) over a few value kinds (``Kind``).
Expressions are already flattened into evaluation order: every operand is an
atom (a ``Var`` or a ``Const``), so the C++ makes the same ATen calls in the same
order as eager. Every statement carries the Python line it came from.

The IR says *what* a region computes, never how it is written in C++: a ``Call``
of an ATen overload, an ``Intrinsic`` named in ``INTRINSICS``, constants of a
kind. ``backend/cpp.py`` spells each of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..torchlib.schemas import Overload
from .intrinsics import INTRINSICS as INTRINSICS  # the tables, re-exported: ir.INTRINSICS
from .intrinsics import TENSOR_FLAGS as TENSOR_FLAGS


class Kind(str, Enum):
    """The kind of a value. The letters of the runtime's kinds are its parameter codes."""

    TENSOR = "T"
    FLOAT = "f"
    INT = "i"
    BOOL = "b"
    NONE = "N"
    STR = "s"
    DTYPE = "d"
    INTS = "I"  # a sequence of ints known at run time (sizes)
    SIZE = "Z"  # a parameter holding exactly a torch.Size (its variable is INTS, a Size in Python: Var.size)
    TENSORS = "L"  # a list of tensors
    OPT_TENSOR = "O"  # a tensor or None
    DEVICE = "D"  # a torch.device (read from a tensor, or a parameter)
    ENUM = "o"  # a torch enum constant with no arithmetic: a memory format or a layout
    OPT_INT = "J"  # an int or None
    OPT_FLOAT = "G"  # a float or None
    OPT_BOOL = "C"  # a bool or None
    OPT_DTYPE = "E"  # a torch.dtype or None
    INT_OR_FLOAT = "F"  # a parameter holding an int or a float (the body is compiled for each; Param.parts)
    DEVICE_OR_STR = "V"  # a parameter holding a device string or a torch.device (likewise)
    MODULE = "M"  # an nn.Module (or plain object) whose attributes the runtime read at the call
    MODULES = "m"  # the modules of a ModuleList or Sequential of one class, read at the call
    NUMBER = "n"  # a Python int, float or bool whose type a tensor's dtype decides at run time (t.item())
    TENSOR_LIST = "l"  # a Python list of tensors: mutable, shared by every name bound to it
    INT_LIST = "j"  # a Python list of ints
    FLOAT_LIST = "g"  # a Python list of floats
    CONSTANT = "K"  # a parameter specialised to the value of the call a variant was built for: compared, not passed
    NUMBERS = "q"  # what x.tolist() gives: its items as Python numbers (for `for` and len() only, never a parameter)
    GRAD_MODE = "w"  # the grad mode a `with torch.no_grad():` block set, restored when it is left (never a value)
    AUTOCAST = "a"  # the autocast state a `with torch.autocast(...)` block set, restored likewise (never a value)

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


SCALAR_KINDS = (Kind.FLOAT, Kind.INT, Kind.BOOL)
KIND_NAMES = {
    Kind.TENSOR: "Tensor",
    Kind.FLOAT: "float",
    Kind.INT: "int",
    Kind.BOOL: "bool",
    Kind.NONE: "None",
    Kind.STR: "str",
    Kind.DTYPE: "torch.dtype",
    Kind.INTS: "a sequence of ints",
    Kind.SIZE: "torch.Size",
    Kind.TENSORS: "a list of tensors",
    Kind.OPT_TENSOR: "Tensor | None",
    Kind.DEVICE: "torch.device",
    Kind.ENUM: "constant",
    Kind.OPT_INT: "int | None",
    Kind.OPT_FLOAT: "float | None",
    Kind.OPT_BOOL: "bool | None",
    Kind.OPT_DTYPE: "torch.dtype | None",
    Kind.INT_OR_FLOAT: "float",  # an int is a float in typing: Python keeps it an int, and so does the region
    Kind.DEVICE_OR_STR: "torch.device",  # or a device string, kept a str
    Kind.MODULE: "a module",
    Kind.MODULES: "a list of modules",
    Kind.NUMBER: "a number (t.item())",
    Kind.TENSOR_LIST: "a list of tensors",
    Kind.INT_LIST: "a list of ints",
    Kind.FLOAT_LIST: "a list of floats",
    Kind.CONSTANT: "a value the variant was specialised for",
    Kind.NUMBERS: "a list of numbers (x.tolist())",
    Kind.GRAD_MODE: "a grad mode",
    Kind.AUTOCAST: "an autocast state",
}
# Parameters that hold one of two kinds, told apart at run time: the kinds (the first when the
# runtime's selector is set). Their functions are compiled once per combination (function.translate).
VARIANTS = {Kind.INT_OR_FLOAT: (Kind.INT, Kind.FLOAT), Kind.DEVICE_OR_STR: (Kind.STR, Kind.DEVICE)}
# The kinds of "X or None" and what they hold when not None.
OPTIONAL_OF = {
    Kind.TENSOR: Kind.OPT_TENSOR,
    Kind.INT: Kind.OPT_INT,
    Kind.FLOAT: Kind.OPT_FLOAT,
    Kind.BOOL: Kind.OPT_BOOL,
    Kind.DTYPE: Kind.OPT_DTYPE,
}
HELD_BY = {opt: kind for kind, opt in OPTIONAL_OF.items()}
# The run-time lists and what they hold; sequences of any kind (lists, and tuples of a length
# known only at run time) and their items.
LIST_OF = {Kind.TENSOR: Kind.TENSOR_LIST, Kind.INT: Kind.INT_LIST, Kind.FLOAT: Kind.FLOAT_LIST}
LIST_KINDS = tuple(LIST_OF.values())
ITEM_KIND = {
    Kind.TENSOR_LIST: Kind.TENSOR,
    Kind.INT_LIST: Kind.INT,
    Kind.FLOAT_LIST: Kind.FLOAT,
    Kind.TENSORS: Kind.TENSOR,
    Kind.INTS: Kind.INT,
}
SEQUENCE_KINDS = tuple(ITEM_KIND)
# The runtime's return-spec letter of each kind a region can return ("(...)" nests a tuple, "[...]" a list of
# a length known at compile time, "R<k>(...)" is a named tuple).
RETURN_CODES = {
    Kind.TENSOR: "T",
    Kind.FLOAT: "f",
    Kind.INT: "i",
    Kind.BOOL: "b",
    Kind.NONE: "N",
    Kind.TENSORS: "V",
    Kind.INTS: "S",
    Kind.NUMBER: "n",
    Kind.OPT_TENSOR: "O",
    Kind.TENSOR_LIST: "l",
    Kind.INT_LIST: "j",
    Kind.FLOAT_LIST: "g",
    Kind.DEVICE: "D",
    Kind.DTYPE: "d",
}
PLAIN_INTS_RETURN = "Y"  # Kind.INTS that is a plain tuple in Python (tuple(x.shape)); "S" is a torch.Size
HELPER_RETURN = "helper"  # the spec of a helper's return: the runtime atoms, as a tuple


@dataclass(frozen=True)
class Var:
    name: str  # unique within the function (the namer's choice)
    kind: Kind
    temp: bool = False  # a temporary of the flattening, never seen by Python code
    # INTS only: the value is a torch.Size in Python (a tensor's sizes), not a tuple or a list: what
    # str() of it and returning it give. Not part of the variable's identity.
    size: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Const:
    value: Any  # int, float, bool, None, str, torch.dtype, torch.memory_format, torch.layout
    kind: Kind


Atom = Var | Const


@dataclass(frozen=True)
class Tup:
    """A tuple (or list) known at compile time: its length and each item's kind are static."""

    items: tuple[Any, ...]
    structseq: Any = None  # a torch.return_types type for eager's named tuples
    # a Python list (returned as one, and str() of it says so); never changed, or it would be a run-time list
    is_list: bool = False
    origin: Any = field(default=None, compare=False)  # the front end's key of the list display that made it


@dataclass(frozen=True)
class WrapNumber:
    """A Python number passed where ATen wants a Tensor: a 0-dim wrapped number, as eager makes."""

    value: Atom


@dataclass(frozen=True)
class Default:
    """An argument left to the schema's default."""

    value: Any


@dataclass(frozen=True)
class Items:
    """A list argument spelled out element by element: ints for int[], floats for float[], tensors for Tensor[]."""

    items: tuple[Atom, ...]
    kind: Kind  # INT, FLOAT or TENSOR


@dataclass(frozen=True)
class IndexItem:
    """One element of ``x[...]``: 'int', 'slice', 'none', 'ellipsis', 'tensor', 'bool', 'list' (of ints
    known at compile time) or 'ints' (a run-time list of ints)."""

    what: str
    atoms: tuple[Atom | None, ...] = ()


Arg = Var | Const | WrapNumber | Default | Items


@dataclass(frozen=True)
class Call:
    """An ATen call of one overload, with one argument per schema argument."""

    op: Overload
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Intrinsic:
    """An operation of the language that is not an ATen op: one of ``INTRINSICS``, on atoms."""

    name: str
    args: tuple[Atom, ...]


@dataclass(frozen=True)
class GetItem:
    tensor: Atom
    index: tuple[IndexItem, ...]


@dataclass(frozen=True)
class CallFunction:
    """A call of another compiled function (an inlined @ppy.opt function or an adapter)."""

    symbol: str
    args: tuple[Atom, ...]


Expr = Call | Intrinsic | GetItem | CallFunction


@dataclass(frozen=True)
class Assign:
    """Declare `targets` and set them from `value` (several targets: a tuple result)."""

    targets: tuple[Var, ...]
    value: Expr
    line: int


@dataclass(frozen=True)
class Declare:
    var: Var
    line: int


@dataclass(frozen=True)
class Move:
    """Set an already declared variable (a merge point of `if` or a loop-carried value)."""

    target: Var
    value: Atom
    line: int


@dataclass(frozen=True)
class Effect:
    """Evaluate for its effect only (in-place ops, item assignment)."""

    value: Expr
    line: int


@dataclass(frozen=True)
class SetItem:
    tensor: Atom
    index: tuple[IndexItem, ...]
    value: Atom
    line: int


@dataclass(frozen=True)
class If:
    cond: Atom
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    line: int


@dataclass(frozen=True)
class For:
    var: Var
    start: Atom
    stop: Atom
    step: Atom
    body: tuple[Stmt, ...]
    line: int


@dataclass(frozen=True)
class ForEach:
    """Iterate over sequences in step, as Python's iterators (and zip) do: the k-th items of every
    sequence, while k is below the length of each; a list's length is read again before each step,
    so items appended meanwhile are visited. `index` is k (or None). A sequence with a start in
    `starts` is walked backwards from it, as ``reversed()`` walks a list: item start - k, while
    that is still inside the list."""

    items: tuple[Var, ...]
    seqs: tuple[Atom, ...]
    index: Var | None
    body: tuple[Stmt, ...]
    line: int
    starts: tuple[Atom | None, ...] = ()  # one per sequence, or () if every one is walked forwards


@dataclass(frozen=True)
class Loop:
    """Repeat `body` until a Break (or a Return or Raise) leaves it: a `while` loop with its test inside."""

    body: tuple[Stmt, ...]
    line: int


@dataclass(frozen=True)
class Break:
    line: int


@dataclass(frozen=True)
class Continue:
    line: int


@dataclass(frozen=True)
class Raise:
    error: str  # AssertionError, ValueError, ... (values.RAISABLE_ERRORS), or another class as module:qualname
    message: Any  # a str, or a STR atom formatted at run time (an f-string)
    line: int


@dataclass(frozen=True)
class Return:
    values: tuple[Atom, ...]  # flattened; the spec says how they nest
    spec: str  # the runtime's return spec, e.g. "T" or "(TT)" (RETURN_CODES), or HELPER_RETURN
    line: int


Stmt = Assign | Declare | Move | Effect | SetItem | If | For | ForEach | Loop | Break | Continue | Raise | Return


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    default: Any = None
    has_default: bool = False
    # A VARIANTS parameter's variables: (the selector: BOOL, its value as the first kind, as the second).
    parts: tuple[Var, ...] = ()


@dataclass(frozen=True)
class Helper:
    """A function called from regions (an inlined @ppy.opt callee or an adapter), specialised."""

    symbol: str
    params: tuple[Var, ...]
    body: tuple[Stmt, ...]
    result_kinds: tuple[Kind, ...]
    track_lines: bool  # False for adapters: errors point at the caller's line


@dataclass(frozen=True)
class Function:
    name: str
    qualname: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    level: int
    filename: str
    first_line: int  # line of the first decorator: the function's co_firstlineno
    def_line: int
    ret: str = "T"  # the runtime's return spec
    helpers: tuple[Helper, ...] = ()
    result_types: tuple[Any, ...] = ()  # structseq types named by 'R<k>' in ret
    source_lines: dict[int, str] = field(default_factory=dict, compare=False)
    frozen_globals: dict[str, Any] = field(default_factory=dict, compare=False)
    extras: int = 0  # *args (1) and **kwargs (2) the body never reads: the runtime ignores what they would hold
    constants: tuple = ()  # per parameter, the value a CONSTANT one was compiled for (empty: none is)
    specialised_reads: tuple[tuple[str, int], ...] = ()  # (what, line): values compiled in (0: the parameter)
    torch_sources: tuple[str, ...] = ()  # torch functions compiled from torch's own source (torch_source.py)
    owner: str | None = None  # a method: the name of its class
    plan: Any = None  # what the runtime reads of module parameters (module_plan.Plan), or None

    @property
    def kinds(self) -> str:
        """The runtime's parameter codes, one letter per parameter."""
        return "".join(p.kind.value for p in self.params)
