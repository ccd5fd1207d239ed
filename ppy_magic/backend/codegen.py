"""Codegen: ``ir.Function``s of one cell -> one C++ translation unit, as data.

The TU includes only ATen headers (the ``_ops.h`` of each op it calls, plus
``ppy_region.h``) and ``Python.h`` for its tiny module init, which exports a
table of region entry points to the runtime through a capsule. Nothing here
runs a compiler.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import torch

from ..language import ir

ABI_HEADER = "ppy_abi.h"
REGION_HEADER = "ppy_region.h"


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
    frozen_globals: dict[str, Any]  # global name -> the value compiled in
    cpp: str  # this region's C++ (helpers and entry), for explain()
    result_types: tuple[type, ...] = ()  # the torch.return_types named tuples it returns


@dataclass(frozen=True)
class CellCode:
    text: str  # the whole TU
    headers: tuple[str, ...]
    regions: tuple[RegionSpec, ...]
    line_map: dict[int, tuple[str, int]]  # C++ line -> (function, Python line)


# ---- literals -----------------------------------------------------------------------------

_DTYPE_NAMES = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.bool: "Bool",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
    torch.complex32: "ComplexHalf",
}


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
    if kind == ir.STR:
        return "std::string(" + json.dumps(value) + ")"
    if kind == ir.DTYPE:
        return f"at::ScalarType::{_DTYPE_NAMES[value]}"  # type: ignore[index]
    if kind == ir.OPAQUE:
        return str(value)
    raise ValueError(f"no C++ literal for kind {kind!r}")


_SCALAR_CPP = {ir.FLOAT: "double", ir.INT: "int64_t", ir.BOOL: "bool"}
_PLACEHOLDER = re.compile(r"\{(\d+)\}")


class Namer:
    """C++ names for IR variables: never a keyword, never clashing with ours."""

    def __call__(self, var: ir.Var) -> str:
        return f"v_{var.name}"


NAME = Namer()


def atom(a: Any) -> str:
    if isinstance(a, ir.Var):
        return NAME(a)
    if isinstance(a, ir.Const):
        if a.kind == ir.NONE:
            return "::std::nullopt"
        return cpp_literal(a.value, a.kind)
    raise TypeError(f"not an atom: {a!r}")


def _scalar(a: Any) -> str:
    kind = a.kind if a.kind in _SCALAR_CPP else ir.FLOAT
    return f"at::Scalar(static_cast<{_SCALAR_CPP[kind]}>({atom(a)}))"


def _strip(cpp: str) -> str:
    """The base C++ type of a parameter type (``const std::optional<T>&`` -> ``T``)."""
    t = cpp.replace("const ", "").replace("&", "").strip()
    for opt in ("::std::optional<", "std::optional<", "c10::optional<"):
        if t.startswith(opt):
            return t[len(opt) : -1].strip()
    if t == "at::OptionalIntArrayRef":
        return "at::IntArrayRef"
    if t == "at::OptionalSymIntArrayRef":
        return "c10::SymIntArrayRef"
    return t


def _ints(expr_items: list[str]) -> str:
    return "at::IntArrayRef{" + ", ".join(expr_items) + "}"


def _convert(base: str, a: Any, write: bool) -> str:
    """C++ for an atom (or Items) passed as a parameter of C++ type `base`."""
    if isinstance(a, ir.Items):
        if a.kind == ir.INT:
            arr = _ints([f"static_cast<int64_t>({atom(i)})" for i in a.items])
            return f"c10::fromIntArrayRefSlow({arr})" if "SymInt" in base else arr
        return "at::TensorList{" + ", ".join(atom(i) for i in a.items) + "}"
    if base == "at::Tensor":
        return f"const_cast<at::Tensor&>({atom(a)})" if write else atom(a)
    if base == "at::Scalar":
        return _scalar(a)
    if base in ("int64_t", "c10::SymInt"):
        return f"static_cast<int64_t>({atom(a)})"
    if base == "double":
        return f"static_cast<double>({atom(a)})"
    if base in ("c10::string_view", "::std::string_view", "std::string_view"):
        return f"c10::string_view({atom(a)})"
    if base in ("at::IntArrayRef",):
        return f"at::IntArrayRef({atom(a)})"
    if base == "c10::SymIntArrayRef":
        return f"c10::fromIntArrayRefSlow(at::IntArrayRef({atom(a)}))"
    if base in ("at::TensorList", "at::ITensorListRef"):
        return f"at::TensorList({atom(a)})"
    if base == "at::Device" and a.kind == ir.STR:
        return f"at::Device({atom(a)})"
    return atom(a)


def _default(base: str, v: Any) -> str:
    if v is None:
        return "::std::nullopt"
    if base == "at::Scalar":
        kind = ir.BOOL if type(v) is bool else ir.INT if type(v) is int else ir.FLOAT
        return f"at::Scalar(static_cast<{_SCALAR_CPP[kind]}>({cpp_literal(v, kind)}))"
    if base in ("int64_t", "c10::SymInt"):
        return cpp_literal(v, ir.INT)
    if base == "double":
        return cpp_literal(float(v), ir.FLOAT)
    if base == "bool":
        return cpp_literal(v, ir.BOOL)
    if base in ("c10::string_view", "::std::string_view", "std::string_view"):
        return f"c10::string_view({json.dumps(v)})"
    if base in ("at::IntArrayRef", "c10::SymIntArrayRef"):
        items = [cpp_literal(i, ir.INT) for i in (v if isinstance(v, (list, tuple)) else [v])]
        if not items:
            return f"{base}{{}}"
        return f"c10::fromIntArrayRefSlow({_ints(items)})" if "SymInt" in base else _ints(items)
    if base in ("at::MemoryFormat", "at::Layout", "at::ScalarType") and type(v) is int:
        return f"static_cast<{base}>({v})"
    raise ValueError(f"no C++ default for {base} = {v!r}")


def call_args(call: ir.Call) -> list[str]:
    out = []
    for sarg, a in zip(call.op.args, call.args):
        base = _strip(sarg.cpp)
        if isinstance(a, ir.Default):
            out.append(_default(base, a.value))
        elif isinstance(a, ir.WrapNumber):
            out.append(f"ppy::wrapped_number({_scalar(a.value)})")
        elif isinstance(a, ir.Const) and a.kind == ir.NONE:
            out.append("::std::nullopt")
        else:
            out.append(_convert(base, a, sarg.is_write))
    return out


def _index(items: tuple[ir.IndexItem, ...], tensor: Any) -> str:
    parts = []
    for it in items:
        if it.what == "list":
            values = ", ".join(f"static_cast<int64_t>({atom(a)})" for a in it.atoms)
            parts.append(f"at::indexing::TensorIndex(ppy::index_list({atom(tensor)}, {{{values}}}))")
        elif it.what == "int":
            parts.append(f"at::indexing::TensorIndex(static_cast<int64_t>({atom(it.atoms[0])}))")
        elif it.what == "bool":
            parts.append(f"at::indexing::TensorIndex(static_cast<bool>({atom(it.atoms[0])}))")
        elif it.what == "tensor":
            parts.append(f"at::indexing::TensorIndex({atom(it.atoms[0])})")
        elif it.what == "none":
            parts.append("at::indexing::TensorIndex(at::indexing::None)")
        elif it.what == "ellipsis":
            parts.append("at::indexing::TensorIndex(at::indexing::Ellipsis)")
        else:
            bounds = [
                "::std::optional<c10::SymInt>()"
                if b is None
                else f"::std::optional<c10::SymInt>(static_cast<int64_t>({atom(b)}))"
                for b in it.atoms
            ]
            parts.append(f"at::indexing::TensorIndex(at::indexing::Slice({', '.join(bounds)}))")
    return "{" + ", ".join(parts) + "}"


def expr(e: ir.Expr) -> str:
    if isinstance(e, ir.Call):
        return f"{e.op.cpp_call}({', '.join(call_args(e))})"
    if isinstance(e, ir.Cpp):
        return _PLACEHOLDER.sub(lambda m: atom(e.args[int(m.group(1))]), e.template)
    if isinstance(e, ir.GetItem):
        return f"at::indexing::get_item({atom(e.tensor)}, {_index(e.index, e.tensor)})"
    if isinstance(e, ir.CallFunction):
        return f"{e.symbol}({', '.join(['ppy_line'] + [atom(a) for a in e.args])})"
    raise TypeError(e)


def _decl(var: ir.Var) -> str:
    ctype = ir.CPP_TYPES[var.kind]
    init = {
        ir.FLOAT: " = 0.0",
        ir.INT: " = 0",
        ir.BOOL: " = false",
        ir.DTYPE: " = at::ScalarType::Undefined",
        ir.DEVICE: " = at::Device(at::kCPU)",
    }.get(var.kind, "")
    return f"{ctype} {NAME(var)}{init};"


# ---- statements ---------------------------------------------------------------------------------


def _uses(stmt: ir.Stmt) -> set[str]:
    """Names of variables a statement reads (deeply)."""
    out: set[str] = set()

    def add(a: Any) -> None:
        if isinstance(a, ir.Var):
            out.add(a.name)
        elif isinstance(a, ir.WrapNumber):
            add(a.value)
        elif isinstance(a, ir.Items):
            for i in a.items:
                add(i)

    def add_expr(e: Any) -> None:
        if isinstance(e, ir.Call) or isinstance(e, (ir.Cpp, ir.CallFunction)):
            for a in e.args:
                add(a)
        elif isinstance(e, ir.GetItem):
            add(e.tensor)
            for it in e.index:
                for a in it.atoms:
                    add(a)

    if isinstance(stmt, (ir.Assign, ir.Effect)):
        add_expr(stmt.value)
    elif isinstance(stmt, ir.Move):
        add(stmt.value)
    elif isinstance(stmt, ir.SetItem):
        add(stmt.tensor)
        add(stmt.value)
        for it in stmt.index:
            for a in it.atoms:
                add(a)
    elif isinstance(stmt, ir.Return):
        for a in stmt.values:
            add(a)
    elif isinstance(stmt, ir.Raise):
        add(stmt.message)
    elif isinstance(stmt, ir.If):
        add(stmt.cond)
        for s in stmt.then + stmt.orelse:
            out |= _uses(s)
    elif isinstance(stmt, ir.For):
        for a in (stmt.start, stmt.stop, stmt.step):
            add(a)
        for s in stmt.body:
            out |= _uses(s)
    return out


class Emitter:
    def __init__(self, fn_name: str, source_lines: dict[int, str], track_lines: bool, helper: bool):
        self.lines: list[str] = []
        self.marks: list[tuple[int, int]] = []
        self.fn_name = fn_name
        self.source_lines = source_lines
        self.track_lines = track_lines
        self.helper = helper
        self.current_line = 0

    def out(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def line(self, depth: int, line: int) -> None:
        if not self.track_lines or not line or line == self.current_line:
            return
        self.current_line = line
        self.marks.append((len(self.lines), line))
        src = self.source_lines.get(line, "")
        self.out(depth, f"ppy_line = {line};" + (f"  // {src}" if src else ""))

    def block(self, stmts: tuple[ir.Stmt, ...], depth: int) -> None:
        last: dict[str, int] = {}
        temps: dict[str, ir.Var] = {}
        for i, s in enumerate(stmts):
            if isinstance(s, ir.Assign):
                for t in s.targets:
                    if t.temp and t.kind == ir.TENSOR:
                        temps[t.name] = t
            for name in _uses(s):
                last[name] = i
        frees: dict[int, list[ir.Var]] = {}
        for name, var in temps.items():
            if name in last:
                frees.setdefault(last[name], []).append(var)
        for i, s in enumerate(stmts):
            self.stmt(s, depth)
            if not isinstance(s, (ir.Return, ir.Raise)):
                for var in frees.get(i, ()):
                    self.out(depth, f"{NAME(var)}.reset();")  # dropped here, as eager drops it

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        if isinstance(s, ir.Assign):
            self.line(depth, s.line)
            if len(s.targets) == 1 and not isinstance(s.value, ir.CallFunction):
                t = s.targets[0]
                self.out(depth, f"{ir.CPP_TYPES[t.kind]} {NAME(t)} = {expr(s.value)};")
            else:
                for t in s.targets:
                    self.out(depth, _decl(t))
                tie = ", ".join(NAME(t) for t in s.targets)
                if s.targets:
                    self.out(depth, f"std::tie({tie}) = {expr(s.value)};")
                else:
                    self.out(depth, f"{expr(s.value)};")
        elif isinstance(s, ir.Declare):
            self.out(depth, _decl(s.var))
        elif isinstance(s, ir.Move):
            self.line(depth, s.line)
            self.out(depth, f"{NAME(s.target)} = {atom(s.value)};")
        elif isinstance(s, ir.Effect):
            self.line(depth, s.line)
            self.out(depth, f"{expr(s.value)};")
        elif isinstance(s, ir.SetItem):
            self.line(depth, s.line)
            if s.value.kind == ir.TENSOR:
                self.out(
                    depth, f"at::indexing::set_item({atom(s.tensor)}, {_index(s.index, s.tensor)}, {atom(s.value)});"
                )
            else:  # Python passes a bool value as an int (THPUtils_unpackIndex)
                kind = ir.INT if s.value.kind == ir.BOOL else s.value.kind
                scalar = f"at::Scalar(static_cast<{_SCALAR_CPP[kind]}>({atom(s.value)}))"
                self.out(depth, f"ppy::set_item_scalar({atom(s.tensor)}, {_index(s.index, s.tensor)}, {scalar});")
        elif isinstance(s, ir.If):
            self.line(depth, s.line)
            self.out(depth, f"if ({atom(s.cond)}) {{")
            saved = self.current_line
            self.block(s.then, depth + 1)
            if s.orelse:
                self.out(depth, "} else {")
                self.current_line = saved
                self.block(s.orelse, depth + 1)
            self.out(depth, "}")
            self.current_line = 0
        elif isinstance(s, ir.For):
            self.line(depth, s.line)
            v = NAME(s.var)
            step = atom(s.step)
            cond = (
                f"{v} < {atom(s.stop)}"
                if isinstance(s.step, ir.Const) and s.step.value > 0
                else f"{v} > {atom(s.stop)}"
                if isinstance(s.step, ir.Const)
                else f"({step} > 0 ? {v} < {atom(s.stop)} : {v} > {atom(s.stop)})"
            )
            self.out(depth, f"for (int64_t {v} = {atom(s.start)}; {cond}; {v} += {step}) {{")
            self.current_line = 0
            self.block(s.body, depth + 1)
            self.out(depth, "}")
            self.current_line = 0
        elif isinstance(s, ir.Raise):
            self.line(depth, s.line)
            message = json.dumps(s.message) if isinstance(s.message, str) else atom(s.message)
            self.out(depth, f"ppy::raise(ppy::PyError::{s.error}, {message});")
        elif isinstance(s, ir.Return):
            self.line(depth, s.line)
            if self.helper:
                self.out(depth, f"return std::make_tuple({', '.join(atom(a) for a in s.values)});")
                return
            for a in s.values:
                if a.kind == ir.TENSOR:
                    self.out(depth, f"ppy_out->t.emplace_back({atom(a)});")
                elif a.kind == ir.FLOAT:
                    self.out(depth, f"ppy_out->f.push_back({atom(a)});")
                elif a.kind in (ir.INT, ir.BOOL):
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}));")
                elif a.kind == ir.INTS:  # a torch.Size
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}.size()));")
                    self.out(depth, f"ppy_out->i.insert(ppy_out->i.end(), {atom(a)}.begin(), {atom(a)}.end());")
                elif a.kind == ir.TENSORS:
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}.size()));")
                    self.out(depth, f"for (const at::Tensor& ppy_t : {atom(a)}) ppy_out->t.push_back(ppy_t);")
            self.out(depth, "return;")
        else:
            raise TypeError(s)


def _param_decl(p: ir.Param, i: int) -> str:
    n = f"v_{p.name}"
    if p.kind == ir.TENSOR:
        return f"const at::Tensor& {n} = *ppy_args[{i}].t;"
    if p.kind == ir.OPT_TENSOR:
        return (
            f"const ::std::optional<at::Tensor> {n} = ppy_args[{i}].none ? ::std::optional<at::Tensor>() "
            f": ::std::optional<at::Tensor>(*ppy_args[{i}].t);"
        )
    if p.kind == ir.TENSORS:
        return f"const std::vector<at::Tensor>& {n} = *ppy_args[{i}].tl;"
    if p.kind == ir.STR:
        return f"const std::string {n} = ppy_args[{i}].s;"
    field = "f" if p.kind == ir.FLOAT else "i"
    ctype = _SCALAR_CPP[p.kind]
    return f"const {ctype} {n} = static_cast<{ctype}>(ppy_args[{i}].{field});"


def _helper_cpp(h: ir.Helper, source_lines: dict[int, str]) -> list[str]:
    ret = "std::tuple<" + ", ".join(ir.CPP_TYPES[k] for k in h.result_kinds) + ">"
    params = ["int& ppy_line"] + [
        (
            f"const {ir.CPP_TYPES[p.kind]}& {NAME(p)}"
            if p.kind in (ir.TENSOR, ir.TENSORS, ir.INTS, ir.STR, ir.OPT_TENSOR)
            else f"{ir.CPP_TYPES[p.kind]} {NAME(p)}"
        )
        for p in h.params
    ]
    em = Emitter(h.symbol, source_lines, h.track_lines, helper=True)
    em.out(0, f"[[maybe_unused]] {ret} {h.symbol}({', '.join(params)}) {{")
    em.out(1, "(void)ppy_line;")
    em.block(h.body, 1)
    em.out(0, "}")
    return em.lines


def function_cpp(fn: ir.Function, symbol: str) -> tuple[list[str], list[tuple[int, int]]]:
    """C++ lines of one region (its helpers, then its entry) and (offset, Python line) marks."""
    lines: list[str] = []
    for h in fn.helpers:
        lines += _helper_cpp(h, fn.source_lines) + [""]
    em = Emitter(fn.name, fn.source_lines, True, helper=False)
    # No file name here: the same source must give the same TU (and cache key) in any kernel or directory.
    em.out(0, f"// {fn.name} (line {fn.def_line})")
    em.out(0, f"void {symbol}(const ppy::Arg* ppy_args, ppy::Out* ppy_out) {{")
    em.out(1, "int ppy_line = 0;")
    em.out(1, "try {")
    for i, p in enumerate(fn.params):
        em.out(2, _param_decl(p, i))
    em.block(fn.body, 2)
    em.out(1, "} catch (const ppy::Raise& e) {")
    em.out(2, "ppy_out->error = e.kind;")
    em.out(2, "ppy_out->message = e.message;")
    em.out(2, "ppy_out->line = ppy_line;")
    em.out(1, "} catch (...) {")
    em.out(2, "ppy_out->line = ppy_line;")
    em.out(2, "throw;")
    em.out(1, "}")
    em.out(0, "}")
    base = len(lines)
    return lines + em.lines, [(base + off, ln) for off, ln in em.marks]


def _headers(functions: list[ir.Function]) -> list[str]:
    found = set()

    def walk(stmts: tuple) -> None:
        for s in stmts:
            value = getattr(s, "value", None)
            if isinstance(value, ir.Call):
                found.add(value.op.header)
            if isinstance(s, ir.If):
                walk(s.then)
                walk(s.orelse)
            elif isinstance(s, ir.For):
                walk(s.body)

    for fn in functions:
        walk(fn.body)
        for h in fn.helpers:
            walk(h.body)
    return sorted(found)


def generate(functions: list[ir.Function]) -> CellCode:
    headers = _headers(functions)
    head = [
        "// Generated by ppy_magic: the ATen regions of one cell.",
        # First: gcc uses the prelude's precompiled form (prelude.py, build.py) only before other code.
        '#include "ppy_prelude.h"',
        "#include <Python.h>",
        f'#include "{REGION_HEADER}"',
        *[f"#include <{h}>" for h in headers],
        "#include <limits>",
        "#include <tuple>",
        "",
        "namespace {",
        "",
    ]
    lines = list(head)
    line_map: dict[int, tuple[str, int]] = {}
    specs = []
    for index, fn in enumerate(functions):
        # Each region's helpers are named per region; a namespace per region keeps two regions
        # specialising the same callee (or two definitions of one name) apart.
        symbol = f"ppy_region_{index}_{fn.name}"
        body, marks = function_cpp(fn, symbol)
        lines.append(f"namespace ppy_r{index} {{")
        base = len(lines)
        for offset, pyline in marks:
            line_map[base + offset + 1] = (fn.name, pyline)
        lines += body + [f"}}  // namespace ppy_r{index}", ""]
        notes = {ln: f"ppy region '{fn.qualname}', line {ln}: {src}" for ln, src in fn.source_lines.items()}
        specs.append(
            RegionSpec(
                index=index,
                name=fn.name,
                qualname=fn.qualname,
                symbol=symbol,
                kinds=fn.kinds,
                ret=fn.ret,
                param_names=tuple(p.name for p in fn.params),
                defaults=tuple(p.default for p in fn.params if p.has_default),
                line_notes=notes,
                first_line=fn.first_line,
                filename=fn.filename,
                frozen_globals=dict(fn.frozen_globals),
                cpp="\n".join(body),
                result_types=fn.result_types,
            )
        )
    entries = ", ".join(f'{{"{s.name}", &ppy_r{s.index}::{s.symbol}}}' for s in specs) or "{nullptr, nullptr}"
    lines += [
        f"const ppy::RegionInfo ppy_regions[] = {{{entries}}};",
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
        '  PyObject* cap = PyCapsule_New(const_cast<ppy::RegionTable*>(&ppy_table), "ppy.RegionTable", nullptr);',
        '  if (!cap || PyModule_AddObject(m, "__ppy_regions__", cap) < 0) {',
        "    Py_XDECREF(cap);",
        "    Py_DECREF(m);",
        "    return nullptr;",
        "  }",
        "  return m;",
        "}",
        "",
    ]
    return CellCode("\n".join(lines), tuple(headers), tuple(specs), line_map)
