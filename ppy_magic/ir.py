"""The region IR: what the front end understood of one function.

Straight-line code over a few value kinds. Every node is frozen and carries the
Python line it came from, so codegen can map C++ back to the user's source.
Expressions are already in evaluation order once the front end flattened them:
each ``Call`` argument is a ``Var`` or a ``Const``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .schemas import Overload

# Value kinds. A kind letter is also the runtime's parameter/return code.
TENSOR = "T"
FLOAT = "f"
INT = "i"
BOOL = "b"
NONE = "N"
SCALAR_KINDS = (FLOAT, INT, BOOL)
KIND_NAMES = {TENSOR: "Tensor", FLOAT: "float", INT: "int", BOOL: "bool", NONE: "None"}


@dataclass(frozen=True)
class Var:
    name: str  # unique within the function (the namer's choice)
    kind: str


@dataclass(frozen=True)
class Const:
    value: Any  # int, float, bool or None
    kind: str


Atom = Union[Var, Const]


@dataclass(frozen=True)
class WrapNumber:
    """A Python number passed where ATen wants a Tensor: a 0-dim wrapped number, as eager makes."""

    value: Atom


@dataclass(frozen=True)
class Default:
    """An argument left to the schema's default."""

    type: str
    value: Any


Arg = Union[Var, Const, WrapNumber, Default]


@dataclass(frozen=True)
class Call:
    op: Overload
    args: tuple[Arg, ...]  # one per schema argument, in schema order


@dataclass(frozen=True)
class Assign:
    target: Var
    value: Call
    line: int


@dataclass(frozen=True)
class Return:
    values: tuple[Atom, ...]
    spec: str  # the runtime's return spec, e.g. "T" or "(TT)"
    line: int


Stmt = Union[Assign, Return]


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any = None
    has_default: bool = False


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
    source_lines: dict[int, str] = field(default_factory=dict, compare=False)
    frozen_globals: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def kinds(self) -> str:
        return "".join(p.kind for p in self.params)
