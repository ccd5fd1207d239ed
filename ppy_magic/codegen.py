"""Codegen: ``ir.Function``s of one cell -> one C++ translation unit, as data.

The TU includes only ATen headers (the ``_ops.h`` of each op it calls) and
``Python.h`` for its tiny module init, which exports a table of region entry
points to the runtime through a capsule. Nothing here runs a compiler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import ir

ABI_HEADER = "ppy_abi.h"


@dataclass(frozen=True)
class RegionSpec:
    """What the runtime needs to bind one region of a built TU."""

    index: int
    name: str
    qualname: str
    symbol: str
    kinds: str
    ret: str
    param_names: tuple[str, ...]
    defaults: tuple
    line_notes: dict[int, str]
    first_line: int
    filename: str
    frozen_globals: dict
    cpp: str  # this region's C++ function, for explain()


@dataclass(frozen=True)
class CellCode:
    text: str  # the whole TU
    headers: tuple[str, ...]
    regions: tuple[RegionSpec, ...]
    line_map: dict[int, tuple[str, int]]  # C++ line -> (function, Python line)


def cpp_literal(value: object, kind: str) -> str:
    if kind == ir.BOOL:
        return "true" if value else "false"
    if kind == ir.INT:
        v = int(value)  # type: ignore[arg-type]
        return f"INT64_C({v})" if v != -(2**63) else "INT64_MIN"
    if kind == ir.FLOAT:
        v = float(value)  # type: ignore[arg-type]
        if math.isnan(v):
            return "std::numeric_limits<double>::quiet_NaN()"
        if math.isinf(v):
            return ("-" if v < 0 else "") + "std::numeric_limits<double>::infinity()"
        return v.hex()  # exact: C++17 hexadecimal floating literal
    raise ValueError(f"no C++ literal for kind {kind!r}")


_CPP_SCALAR_TYPES = {ir.FLOAT: "double", ir.INT: "int64_t", ir.BOOL: "bool"}
_ARG_FIELD = {ir.FLOAT: "f", ir.INT: "i", ir.BOOL: "i"}


def _atom(a: ir.Arg, names: dict[str, str]) -> str:
    if isinstance(a, ir.Var):
        return names[a.name]
    if isinstance(a, ir.Const):
        return cpp_literal(a.value, a.kind)
    raise TypeError(a)


def _scalar(a: ir.Var | ir.Const, names: dict[str, str]) -> str:
    expr = _atom(a, names)
    ctype = _CPP_SCALAR_TYPES[a.kind]
    return f"at::Scalar(static_cast<{ctype}>({expr}))"


def _default(d: ir.Default) -> str:
    t, v = d.type, d.value
    if t.startswith("Optional[") and v is None:
        return "::std::nullopt"
    if t.startswith("Optional["):
        t = t[len("Optional["):-1]
    if t == "number":
        kind = ir.BOOL if type(v) is bool else ir.INT if type(v) is int else ir.FLOAT
        return f"at::Scalar(static_cast<{_CPP_SCALAR_TYPES[kind]}>({cpp_literal(v, kind)}))"
    if t == "int":
        return cpp_literal(v, ir.INT)
    if t == "float":
        return cpp_literal(v, ir.FLOAT)
    if t == "bool":
        return cpp_literal(v, ir.BOOL)
    raise ValueError(f"no C++ default for schema type {d.type!r}")


def _call_args(call: ir.Call, names: dict[str, str]) -> list[str]:
    out = []
    for sarg, a in zip(call.op.args, call.args):
        t = sarg.type
        if isinstance(a, ir.Default):
            out.append(_default(a))
        elif isinstance(a, ir.WrapNumber):
            out.append(f"ppy_wrapped_number({_scalar(a.value, names)})")
        elif t.endswith("Tensor"):
            expr = _atom(a, names)
            out.append(f"const_cast<at::Tensor&>({expr})" if sarg.is_write else expr)
        elif t.endswith("number"):
            out.append(_scalar(a, names))  # type: ignore[arg-type]
        else:
            out.append(_atom(a, names))
    return out


def _last_uses(body: tuple[ir.Stmt, ...]) -> dict[int, list[str]]:
    """Statement index -> tensor temporaries whose last use it is (to free them as eager would)."""
    last: dict[str, int] = {}
    for i, stmt in enumerate(body):
        atoms = stmt.value.args if isinstance(stmt, ir.Assign) else stmt.values
        for a in atoms:
            if isinstance(a, ir.WrapNumber):
                a = a.value
            if isinstance(a, ir.Var) and a.kind == ir.TENSOR:
                last[a.name] = i
    out: dict[int, list[str]] = {}
    for name, i in last.items():
        out.setdefault(i, []).append(name)
    return out


def function_cpp(fn: ir.Function, symbol: str) -> tuple[list[str], list[tuple[int, int]]]:
    """C++ lines of one region entry, and (offset, Python line) marks for the line map."""
    names: dict[str, str] = {}
    params = set()
    lines = [f"// {fn.name} ({fn.filename}:{fn.def_line})",
             f"void {symbol}(const ppy::Arg* ppy_args, ppy::Out* ppy_out) {{",
             "  int ppy_line = 0;",
             "  try {"]
    marks: list[tuple[int, int]] = []
    for i, p in enumerate(fn.params):
        cname = f"v_{p.name}"
        names[p.name] = cname
        params.add(p.name)
        if p.kind == ir.TENSOR:
            lines.append(f"    const at::Tensor& {cname} = *ppy_args[{i}].t;")
        else:
            lines.append(f"    const {_CPP_SCALAR_TYPES[p.kind]} {cname} = "
                         f"static_cast<{_CPP_SCALAR_TYPES[p.kind]}>(ppy_args[{i}].{_ARG_FIELD[p.kind]});")
    frees = _last_uses(fn.body)
    current = 0
    for i, stmt in enumerate(fn.body):
        if stmt.line != current:
            current = stmt.line
            marks.append((len(lines), stmt.line))
            src = fn.source_lines.get(stmt.line, "")
            lines.append(f"    ppy_line = {stmt.line};  // {src}" if src else f"    ppy_line = {stmt.line};")
        if isinstance(stmt, ir.Assign):
            cname = f"v_{stmt.target.name}"
            names[stmt.target.name] = cname
            args = ", ".join(_call_args(stmt.value, names))
            lines.append(f"    at::Tensor {cname} = {stmt.value.op.cpp_call}({args});")
        else:
            for v in stmt.values:
                expr = _atom(v, names)
                if isinstance(v, ir.Var) and v.name not in params:
                    expr = f"std::move({expr})"
                lines.append(f"    ppy_out->t.emplace_back({expr});")
            lines.append("    return;")
            continue
        for dead in frees.get(i, ()):
            if dead not in params:
                lines.append(f"    {names[dead]}.reset();")
    lines += ["  } catch (...) {",
              "    ppy_out->line = ppy_line;",
              "    throw;",
              "  }",
              "}"]
    return lines, marks


def generate(functions: list[ir.Function]) -> CellCode:
    headers = sorted({stmt.value.op.header for fn in functions for stmt in fn.body
                      if isinstance(stmt, ir.Assign)})
    head = ["// Generated by ppy_magic: the ATen regions of one cell.",
            "#include <Python.h>",
            "#include <ATen/core/Tensor.h>",
            "#include <ATen/ScalarOps.h>",
            *[f"#include <{h}>" for h in headers],
            f'#include "{ABI_HEADER}"',
            "#include <limits>",
            "",
            "namespace {",
            "",
            "// A Python number where ATen wants a Tensor, exactly as PyTorch's argument parser makes it.",
            "inline at::Tensor ppy_wrapped_number(const at::Scalar& s) {",
            "  at::Tensor t = at::scalar_to_tensor(s);",
            "  t.unsafeGetTensorImpl()->set_wrapped_number(true);",
            "  return t;",
            "}",
            ""]
    lines = list(head)
    line_map: dict[int, tuple[str, int]] = {}
    specs = []
    for index, fn in enumerate(functions):
        symbol = f"ppy_region_{index}_{fn.name}"
        body, marks = function_cpp(fn, symbol)
        base = len(lines)
        for offset, pyline in marks:
            line_map[base + offset + 1] = (fn.name, pyline)
        lines += body + [""]
        notes = {ln: f"ppy region '{fn.qualname}', line {ln}: {src}" for ln, src in fn.source_lines.items()}
        specs.append(RegionSpec(
            index=index, name=fn.name, qualname=fn.qualname, symbol=symbol, kinds=fn.kinds, ret=_ret(fn),
            param_names=tuple(p.name for p in fn.params),
            defaults=tuple(p.default for p in fn.params if p.has_default),
            line_notes=notes, first_line=fn.first_line, filename=fn.filename,
            frozen_globals=dict(fn.frozen_globals), cpp="\n".join(body)))
    entries = ", ".join(f'{{"{s.name}", &{s.symbol}}}' for s in specs) or "{nullptr, nullptr}"
    lines += [f"const ppy::RegionInfo ppy_regions[] = {{{entries}}};",
              f"const ppy::RegionTable ppy_table = {{ppy::kAbiVersion, {len(specs)}, ppy_regions}};",
              "",
              "#define PPY_CAT_(a, b) a##b",
              "#define PPY_CAT(a, b) PPY_CAT_(a, b)",
              "#define PPY_STR_(a) #a",
              "#define PPY_STR(a) PPY_STR_(a)",
              "PyModuleDef ppy_module = {PyModuleDef_HEAD_INIT, PPY_STR(TORCH_EXTENSION_NAME), nullptr, -1, nullptr};",
              "",
              "}  // namespace",
              "",
              "PyMODINIT_FUNC PPY_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) {",
              "  PyObject* m = PyModule_Create(&ppy_module);",
              "  if (!m) return nullptr;",
              "  PyObject* cap = PyCapsule_New(const_cast<ppy::RegionTable*>(&ppy_table), \"ppy.RegionTable\", nullptr);",
              "  if (!cap || PyModule_AddObject(m, \"__ppy_regions__\", cap) < 0) {",
              "    Py_XDECREF(cap);",
              "    Py_DECREF(m);",
              "    return nullptr;",
              "  }",
              "  return m;",
              "}",
              ""]
    return CellCode("\n".join(lines), tuple(headers), tuple(specs), line_map)


def _ret(fn: ir.Function) -> str:
    ret = [s for s in fn.body if isinstance(s, ir.Return)]
    return ret[-1].spec if ret else "N"
