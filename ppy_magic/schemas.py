"""ATen operator schemas, read from PyTorch itself.

Every overload a region may call is described by its ``FunctionSchema`` (from
``torch._C._jit_get_schemas_for_operator``) and is callable from C++ as
``at::_ops::<name>_<overload>::call(...)``, declared in ``ATen/ops/<name>_ops.h``.
Only overloads that header declares are usable: the JIT's own scalar overloads
(``aten::add.int``) have no ATen kernel and are left out.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any

import torch

_TORCH_INCLUDE = os.path.join(os.path.dirname(torch.__file__), "include")


@dataclass(frozen=True)
class SchemaArg:
    name: str
    type: str  # the JIT type as text: "Tensor", "number", "int", "List[int]", "Optional[Tensor]", ...
    kwarg_only: bool
    has_default: bool
    default: Any
    is_write: bool  # annotated Tensor(a!): the op writes into it


@dataclass(frozen=True)
class Overload:
    name: str  # aten op name, e.g. "add"
    overload: str  # overload name, e.g. "Tensor" ("" for the default overload)
    args: tuple[SchemaArg, ...]
    returns: tuple[str, ...]  # JIT types of the results
    text: str  # the schema as PyTorch prints it

    @property
    def cpp_struct(self) -> str:
        return f"{self.name}_{self.overload}" if self.overload else self.name

    @property
    def cpp_call(self) -> str:
        return f"at::_ops::{self.cpp_struct}::call"

    @property
    def header(self) -> str:
        return f"ATen/ops/{self.name}_ops.h"

    @property
    def is_inplace(self) -> bool:
        return bool(self.args) and self.args[0].is_write and not any(a.name == "out" for a in self.args)


@functools.lru_cache(maxsize=None)
def _declared_structs(name: str) -> frozenset[str]:
    """The ``at::_ops`` structs that ``ATen/ops/<name>_ops.h`` declares."""
    path = os.path.join(_TORCH_INCLUDE, "ATen", "ops", f"{name}_ops.h")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return frozenset()
    return frozenset(re.findall(r"struct TORCH_API (\w+) \{", text))


def _arg(a: Any) -> SchemaArg:
    alias = a.alias_info
    return SchemaArg(
        name=a.name,
        type=str(a.type),
        kwarg_only=bool(a.kwarg_only),
        has_default=a.default_value is not None or _optional(str(a.type)),
        default=a.default_value,
        is_write=bool(alias is not None and alias.is_write),
    )


def _optional(jit_type: str) -> bool:
    return jit_type.startswith("Optional[") or jit_type.endswith("?")


@functools.lru_cache(maxsize=None)
def overloads(name: str) -> tuple[Overload, ...]:
    """The ATen overloads of ``aten::<name>`` callable from C++, out= variants excluded."""
    declared = _declared_structs(name)
    found = []
    for schema in torch._C._jit_get_schemas_for_operator(f"aten::{name}"):
        ov = Overload(
            name=name,
            overload=schema.overload_name,
            args=tuple(_arg(a) for a in schema.arguments),
            returns=tuple(str(r.type) for r in schema.returns),
            text=str(schema),
        )
        if ov.cpp_struct not in declared:
            continue
        if any(a.name == "out" or (a.is_write and a.kwarg_only) for a in ov.args):
            continue
        found.append(ov)
    return tuple(found)
