"""ATen operator schemas, read from PyTorch itself.

Every overload a region may call is described by its ``FunctionSchema`` (from
``torch._C._jit_get_schemas_for_operator``). Only overloads that ATen declares an
entry point for (in the ``ATen/ops/<name>_ops.h`` header torch ships) are usable:
the JIT's own scalar overloads (``aten::add.int``) have no ATen kernel and are left
out. The declared parameter types are kept as data for the backend, which alone
spells the call.
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
    type: str  # the JIT type as text: "Tensor", "Scalar", "int", "List[int]", "Optional[ScalarType]", ...
    kwarg_only: bool
    has_default: bool
    default: Any
    is_write: bool  # annotated Tensor(a!): the op writes into it
    cpp: str = ""  # the parameter type ATen declares for its entry point (backend data)
    size: int | None = None  # N of int[N]: a single int stands for N copies


@dataclass(frozen=True)
class Overload:
    name: str  # aten op name, e.g. "add"
    overload: str  # overload name, e.g. "Tensor" ("" for the default overload)
    args: tuple[SchemaArg, ...]
    returns: tuple[str, ...]  # JIT types of the results
    text: str  # the schema as PyTorch prints it
    return_names: tuple[str, ...] = ()
    cpp_return: str = ""  # the return type ATen declares for its entry point (backend data)

    @property
    def entry(self) -> str:
        """The name ATen declares this overload's entry point under: ``add_Tensor``."""
        return entry_name(self.name, self.overload)

    @property
    def is_inplace(self) -> bool:
        return bool(self.args) and self.args[0].is_write and not any(a.name == "out" for a in self.args)


def header_name(op: str) -> str:
    """The ATen/ops header stem of an op: in-place ``add_`` is declared with ``add``."""
    return op[:-1] if op.endswith("_") and not op.endswith("__") else op


def entry_name(op: str, overload: str) -> str:
    return f"{op}_{overload}" if overload else op


@functools.cache
def _declared_entries(stem: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Entry point name -> (return type, parameter types), as ATen declares them for the ops of `stem`."""
    path = os.path.join(_TORCH_INCLUDE, "ATen", "ops", f"{stem}_ops.h")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return {}
    out = {}
    for m in re.finditer(r"struct TORCH_API (\w+) \{\s*using schema = (.*?) \((.*?)\);", text, re.S):
        out[m.group(1)] = (m.group(2).strip(), tuple(_split_params(m.group(3))))
    return out


def _split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _arg(a: Any, cpp: str) -> SchemaArg:
    alias = a.alias_info
    jit = str(a.real_type)
    return SchemaArg(
        name=a.name,
        type=jit,
        kwarg_only=bool(a.kwarg_only),
        has_default=bool(a.has_default_value()) or _optional(jit),
        default=a.default_value,
        is_write=bool(alias is not None and alias.is_write),
        cpp=cpp,
        size=a.N,
    )


def _optional(jit_type: str) -> bool:
    return jit_type.startswith("Optional[") or jit_type.endswith("?")


@functools.cache
def overloads(name: str) -> tuple[Overload, ...]:
    """The ATen overloads of ``aten::<name>`` callable from C++, out= variants excluded."""
    declared = _declared_entries(header_name(name))
    found = []
    for schema in torch._C._jit_get_schemas_for_operator(f"aten::{name}"):
        entry = entry_name(name, schema.overload_name)
        if entry not in declared:
            continue  # a JIT-only overload (aten::add.int): no ATen kernel
        cpp_ret, cpp_params = declared[entry]
        if len(cpp_params) != len(schema.arguments):
            continue
        args = tuple(_arg(a, cpp) for a, cpp in zip(schema.arguments, cpp_params, strict=True))
        if any(a.name == "out" or (a.is_write and a.kwarg_only) for a in args):
            continue
        if any("Dimname" in a.type or "Generator" in a.type and not a.has_default for a in args):
            continue  # named-tensor overloads; explicit generators
        found.append(
            Overload(
                name=name,
                overload=schema.overload_name,
                args=args,
                returns=tuple(str(r.real_type) for r in schema.returns),
                text=str(schema),
                return_names=tuple(r.name or "" for r in schema.returns),
                cpp_return=cpp_ret,
            )
        )
    return tuple(found)
