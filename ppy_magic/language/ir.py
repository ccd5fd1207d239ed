"""The region IR: what the front end understood of one function.

Structured code (blocks, ``if``, ``for``) over a few value kinds. Expressions
are already flattened into evaluation order: every operand is an atom (a
``Var`` or a ``Const``), so the C++ makes the same ATen calls in the same order
as eager. Every statement carries the Python line it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .schemas import Overload

# Value kinds. The scalar and tensor letters are also the runtime's parameter codes.
TENSOR = "T"
FLOAT = "f"
INT = "i"
BOOL = "b"
NONE = "N"
STR = "s"
DTYPE = "d"
INTS = "I"  # a sequence of ints known at run time (sizes)
TENSORS = "L"  # a list of tensors
OPT_TENSOR = "O"  # a tensor or None
DEVICE = "D"  # a torch.device read from a tensor
OPAQUE = "o"  # a C++ constant with no Python value to speak of (memory format, layout)
SCALAR_KINDS = (FLOAT, INT, BOOL)
KIND_NAMES = {
    TENSOR: "Tensor",
    FLOAT: "float",
    INT: "int",
    BOOL: "bool",
    NONE: "None",
    STR: "str",
    DTYPE: "torch.dtype",
    INTS: "a sequence of ints",
    TENSORS: "a list of tensors",
    OPT_TENSOR: "Tensor | None",
    DEVICE: "torch.device",
    OPAQUE: "constant",
}
CPP_TYPES = {
    TENSOR: "at::Tensor",
    FLOAT: "double",
    INT: "int64_t",
    BOOL: "bool",
    STR: "std::string",
    DTYPE: "at::ScalarType",
    INTS: "std::vector<int64_t>",
    TENSORS: "std::vector<at::Tensor>",
    OPT_TENSOR: "::std::optional<at::Tensor>",
    DEVICE: "at::Device",
}


@dataclass(frozen=True)
class Var:
    name: str  # unique within the function (the namer's choice)
    kind: str
    temp: bool = False  # a temporary of the flattening, never seen by Python code


@dataclass(frozen=True)
class Const:
    value: Any  # int, float, bool, None, str, torch.dtype; for OPAQUE the C++ text
    kind: str


Atom = Union[Var, Const]


@dataclass(frozen=True)
class Tup:
    """A tuple (or list) known at compile time: its length and each item's kind are static."""

    items: tuple[Any, ...]
    structseq: Any = None  # a torch.return_types type for eager's named tuples


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
    """A list argument spelled out element by element: ints for int[], tensors for Tensor[]."""

    items: tuple[Atom, ...]
    kind: str  # INT or TENSOR


@dataclass(frozen=True)
class IndexItem:
    """One element of ``x[...]``: 'int', 'slice', 'none', 'ellipsis', 'tensor' or 'bool'."""

    what: str
    atoms: tuple[Atom | None, ...] = ()


Arg = Union[Var, Const, WrapNumber, Default, Items]


@dataclass(frozen=True)
class Call:
    """An ATen call: ``at::_ops::<op>::call`` with one argument per schema argument."""

    op: Overload
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Cpp:
    """A C++ expression from a template: ``{0}`` ... stand for the atoms, in order."""

    template: str
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


Expr = Union[Call, Cpp, GetItem, CallFunction]


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
class Raise:
    error: str  # a ppy::PyError name: AssertionError, ValueError, ...
    message: Any  # a str, or a STR atom formatted at run time (an f-string)
    line: int


@dataclass(frozen=True)
class Return:
    values: tuple[Atom, ...]  # flattened; the spec says how they nest
    spec: str  # the runtime's return spec, e.g. "T" or "(TT)"
    line: int


Stmt = Union[Assign, Declare, Move, Effect, SetItem, If, For, Raise, Return]


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any = None
    has_default: bool = False


@dataclass(frozen=True)
class Helper:
    """A function called from regions (an inlined @ppy.opt callee or an adapter), specialised."""

    symbol: str
    params: tuple[Var, ...]
    body: tuple[Stmt, ...]
    result_kinds: tuple[str, ...]
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
    ret: str = "T"
    helpers: tuple[Helper, ...] = ()
    result_types: tuple[Any, ...] = ()  # structseq types named by 'R<k>' in ret
    source_lines: dict[int, str] = field(default_factory=dict, compare=False)
    frozen_globals: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def kinds(self) -> str:
        return "".join(p.kind for p in self.params)
