"""The plan of what the runtime reads of module parameters at a call, before any operator runs.

Per module class met (a ``Layout``), which attributes to read (``Slot``s), where (an attribute, a
key or a position in ``_modules``) and of which kind; ``Plan`` is a region's layouts, frozen from the
``LayoutBuilder``s its compile filled. ``backend/runtime/module_plan.h`` reads them; ``modules.py``
compiles the code that uses what was read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from .attr_types import ClassRef, ModType
from .ir import Kind

# How a slot is found: an attribute, a key or a position in _modules, the length of _modules
# (a check), all of _modules (a list), or a method the region runs inline (a check: the class's
# is the one compiled, and the instance __dict__ does not hide it).
ATTRIBUTE, KEY, POSITION, LENGTH, ALL, METHOD = "a", "k", "p", "n", "l", "x"
ABSENT = "absent"  # a METHOD slot's origin: the attribute is not there (getattr's default was compiled in)
SCALAR_CODES = {
    Kind.TENSOR: "T",
    Kind.FLOAT: "f",
    Kind.INT: "i",
    Kind.BOOL: "b",
    Kind.STR: "s",
    Kind.INTS: "I",
    Kind.NONE: "N",
}
READS = {  # the intrinsic that reads a slot of each kind (optional ones: the value once not None)
    Kind.TENSOR: "attr_tensor",
    Kind.FLOAT: "attr_float",
    Kind.INT: "attr_int",
    Kind.BOOL: "attr_bool",
    Kind.STR: "attr_str",
    Kind.INTS: "attr_ints",
}


@dataclass(frozen=True)
class ModuleLoop:
    """A `for` over lists of modules that zip()/enumerate() combine (see module_loop_sources)."""

    sources: list[ast.expr]  # the module expressions, in zip's order
    values: tuple[Any, ...]  # what they read (ModuleValues)
    items: tuple[tuple[str, Any], ...]  # what iterating each gives (module_items), read once
    start: ast.expr | None  # enumerate's start, if written
    counted: bool  # enumerate(...)
    zipped: bool  # zip(...)

    @property
    def static(self) -> bool:
        """Every list of modules is known from __init__: the loop is unrolled."""
        return all(kind == "static" for kind, _ in self.items)


@dataclass(frozen=True)
class Slot:
    name: str
    how: str
    kind: str  # SCALAR_CODES, or 'M' a module, 'U' one of several, 'm' a list of modules, '-' a check
    optional: bool = False
    subs: tuple[int, ...] = ()  # layouts: of the module, of each option (-1: None), of the list's items
    pos: int = 0  # a position; for a method, the first line of the def compiled
    origin: str = ""  # a method: "torch" (restated), "" (the region's own file) or the file of the def
    value: Any = field(default=None, compare=False)  # kind 'K': the value compiled in, compared at each call


@dataclass(frozen=True)
class Layout:
    """What is read of one kind of module: its class (checked exactly) and its slots."""

    cls: ClassRef | None  # None: a plain object of any class
    module: bool
    inline: bool  # its forward runs inline: no hooks allowed
    keyed: bool  # a ModuleList: its keys are "0".."n-1"
    name: str
    slots: tuple[Slot, ...]


@dataclass(frozen=True)
class Plan:
    params: tuple[int, ...]  # the layout of each parameter; -1 where it is not a module
    layouts: tuple[Layout, ...]

    def classes(self) -> list[ClassRef]:
        return [lay.cls for lay in self.layouts if lay.cls is not None]


@dataclass
class LayoutBuilder:
    index: int
    mtype: ModType
    slots: list[Slot] = field(default_factory=list)
    where: dict[tuple[str, str], int] = field(default_factory=dict)
    inline: bool = False

    def slot(self, slot: Slot) -> int:
        key = (slot.how, slot.name)
        if key in self.where:
            have = self.slots[self.where[key]]
            if have != slot:
                raise ValueError(f"{slot.name} read as two kinds")  # a bug: one attribute has one type
            return self.where[key]
        self.where[key] = len(self.slots)
        self.slots.append(slot)
        return self.where[key]

    def freeze(self) -> Layout:
        m = self.mtype
        keyed = m.cls is not None and m.cls.obj is nn.ModuleList  # looked up by str(index)
        return Layout(m.cls, m.module, self.inline, keyed, m.describe(), tuple(self.slots))


def freeze_plan(builders: list[LayoutBuilder], params: list[int]) -> Plan | None:
    if not builders:
        return None
    return Plan(tuple(params), tuple(b.freeze() for b in builders))
