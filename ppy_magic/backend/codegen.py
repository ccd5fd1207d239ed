"""Codegen: ``ir.Function``s of one cell -> one C++ translation unit, as data.

The TU includes only ATen headers (the ``_ops.h`` of each op it calls, plus
``ppy_region.h``) and ``Python.h`` for its tiny module init, which exports a
table of region entry points to the runtime through a capsule. This module
writes the entry points, their parameters and the TU around the bodies that
``statements.Emitter`` writes; how each expression, type and constant is
spelled comes from ``cpp.py``. Nothing here runs a compiler.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..decorator import MAX_LEVEL
from ..language import ir
from ..language.ir import Kind
from ..language.module_plan import Plan
from . import cpp, levels, prelude
from .cpp import NAME, cpp_literal
from .prelude import REGION_HEADER
from .statements import LINE_MARK, Emitter, declare_constants, nested_statements

__all__ = [
    "CellCode",
    "RegionSpec",
    "cpp_by_line",
    "cpp_literal",
    "generate",
]


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
    extras: int = 0  # arguments beyond the parameters the call may pass and the region ignores: 1 *args, 2 **kwargs
    constants: tuple = ()  # per parameter: the value a 'K' one was specialised for (ir.Function.constants)
    specialised_reads: tuple[tuple[str, int], ...] = ()  # what was compiled in, and where (explain, annotate)
    torch_sources: tuple[str, ...] = ()  # torch functions compiled from torch's own source, not restated
    owner: str | None = None  # a method: its class's name
    plan: Plan | None = None  # a method: what the runtime reads of its module parameters
    opt_level: int = 1  # the optimisation level its C++ was written at
    # What each level changes in this region (constants hoisted, temporaries reused), for explain().
    level_notes: dict[int, tuple[str, ...]] = field(default_factory=dict)
    fused_lines: tuple[int, ...] = ()  # level 4: the Python lines of its fused chains


@dataclass(frozen=True)
class CellCode:
    text: str  # the whole TU
    headers: tuple[str, ...]
    regions: tuple[RegionSpec, ...]
    line_map: dict[int, tuple[str, int]]  # C++ line -> (function, Python line)


def cpp_by_line(cpp_text: str) -> dict[int, list[str]]:
    """The C++ statements of a region (``RegionSpec.cpp``) under each Python line, read from its line marks.

    The statements after a line's mark, up to the next mark, are what that
    line became (a line marked again later, after a branch, gets those too).
    Braces, interrupt polls and the entry's closing handlers, the same in
    every region, are left out. ``annotate`` shows these under each compiled line.
    """
    out: dict[int, list[str]] = {}
    current: list[str] | None = None
    for raw in cpp_text.splitlines():
        text = raw.strip()
        mark = LINE_MARK.match(raw)
        if mark:
            current = out.setdefault(int(mark.group(1)), [])
        elif text.startswith("} catch"):
            current = None
        elif (
            current is not None
            and text.strip("{} ")
            and text not in ("} else {", "return;")
            and not text.startswith("ppy::poll(")
        ):
            current.append(text)
    return out


def _param_decl(p: ir.Param, i: int) -> str:
    arg = f"ppy_args[{i}]"
    if p.kind == Kind.INT_OR_FLOAT:  # is it an int, its value as an int, as a float (the body is compiled per type)
        is_int, as_int, as_float = p.parts
        return (
            f"const bool {NAME(is_int)} = {arg}.variant; const int64_t {NAME(as_int)} = {arg}.i; "
            f"const double {NAME(as_float)} = {arg}.f;"
        )
    if p.kind == Kind.DEVICE_OR_STR:  # a device string, or a torch.device (likewise)
        is_str, as_str, as_device = p.parts
        return (
            f'const bool {NAME(is_str)} = {arg}.variant; const std::string {NAME(as_str)} = {arg}.s ? {arg}.s : ""; '
            f"const at::Device {NAME(as_device)} = {arg}.device;"
        )
    if p.kind == Kind.CONSTANT:  # compiled in; the runtime compared the argument with it
        return f"// {p.name}: specialised, compared at the call"
    n = f"v_{p.name}"
    if p.kind in ir.HELD_BY and p.kind != Kind.OPT_TENSOR:  # an optional number or dtype
        ctype = cpp.cpp_type(p.kind)
        held = cpp.cpp_type(ir.HELD_BY[p.kind])
        value = f"{arg}.f" if p.kind == Kind.OPT_FLOAT else f"{arg}.i"
        return f"const {ctype} {n} = {arg}.none ? {ctype}() : {ctype}(static_cast<{held}>({value}));"
    if p.kind == Kind.DTYPE:
        return f"const at::ScalarType {n} = static_cast<at::ScalarType>({arg}.i);"
    if p.kind == Kind.DEVICE:
        return f"const at::Device {n} = {arg}.device;"
    if p.kind in (Kind.INTS, Kind.SIZE):
        return f"const std::vector<int64_t>& {n} = *{arg}.ints;"
    ctype = cpp.cpp_type(p.kind)
    if p.kind == Kind.TENSOR:
        return f"const {ctype}& {n} = *ppy_args[{i}].t;"
    if p.kind == Kind.OPT_TENSOR:
        return f"const {ctype} {n} = ppy_args[{i}].none ? {ctype}() : {ctype}(*ppy_args[{i}].t);"
    if p.kind == Kind.TENSORS:
        return f"const {ctype}& {n} = *ppy_args[{i}].tl;"
    if p.kind == Kind.STR:
        return f"const {ctype} {n} = ppy_args[{i}].s;"
    if p.kind == Kind.MODULE:
        return f"{ctype} {n} = ppy_args[{i}].m;"
    field = "f" if p.kind == Kind.FLOAT else "i"
    return f"const {ctype} {n} = static_cast<{ctype}>(ppy_args[{i}].{field});"


def _helper_cpp(h: ir.Helper, source_lines: dict[int, str], level: int, helpers: tuple[ir.Helper, ...] = ()) -> Emitter:
    ret = "std::tuple<" + ", ".join(cpp.cpp_type(k) for k in h.result_kinds) + ">"
    params = ["ppy::Frame& ppy_frame"] + [
        (
            f"const {cpp.cpp_type(p.kind)}& {NAME(p)}"
            if p.kind in cpp.BY_REFERENCE
            else f"{cpp.cpp_type(p.kind)} {NAME(p)}"
        )
        for p in h.params
    ]
    em = Emitter(
        h.symbol,
        source_lines,
        h.track_lines,
        helper=True,
        plan=levels.plan_body(h.body, level, helpers),
        symbol=h.symbol,
    )
    em.out(0, f"[[maybe_unused]] {ret} {h.symbol}({', '.join(params)}) {{")
    em.out(1, "int& ppy_line = ppy_frame.line;")
    em.out(1, "(void)ppy_line;")
    if level >= 2:
        em.out(1, f"[[maybe_unused]] const bool {levels.UNOBSERVED} = ppy_frame.unobserved;")
        em.out(1, f"[[maybe_unused]] const bool {levels.DIRECT} = ppy_frame.direct;")
    start = len(em.lines)
    em.block(h.body, 1)
    em.out(0, "}")
    declare_constants(em, start, 1)
    return em


@dataclass(frozen=True)
class FunctionCode:
    lines: list[str]
    marks: list[tuple[int, int]]  # (offset in lines, Python line)
    notes: tuple[str, ...]  # what the level changed, for explain()
    headers: frozenset[str]
    fused: bool = False  # level 4 fused a chain: the TU needs fusion's header and flags
    fused_lines: tuple[int, ...] = ()  # the Python lines of the entry's chains (annotate marks them)


def function_cpp(fn: ir.Function, symbol: str) -> FunctionCode:
    """C++ lines of one region (its helpers, then its entry) at the function's level."""
    level = max(1, min(fn.level, MAX_LEVEL))
    fused: list[str] = []  # level 4: the chains' functions, first
    lines: list[str] = []
    notes: list[str] = []
    headers: set[str] = set()
    for h in fn.helpers:
        hem = _helper_cpp(h, fn.source_lines, level, fn.helpers)
        fused += hem.fused_defs
        lines += hem.lines + [""]
        notes += [f"{n} (in {h.symbol})" for n in hem.notes]
        notes += [f"{n} (in {h.symbol})" for n in (hem.consts.notes if hem.consts else [])]
        headers |= hem.headers
    em = Emitter(
        fn.name, fn.source_lines, True, helper=False, plan=levels.plan_body(fn.body, level, fn.helpers), symbol=symbol
    )
    # No file name here: the same source must give the same TU (and cache key) in any kernel or directory.
    em.out(0, f"// {fn.name} (line {fn.def_line}, {levels.describe(level)})")
    em.out(0, f"void {symbol}(const ppy::Arg* ppy_args, ppy::Out* ppy_out) {{")
    em.out(1, "ppy::Frame ppy_frame(ppy_out->gil_released);")
    em.out(1, "int& ppy_line = ppy_frame.line;")
    if level >= 2:
        # The flags the level's code reads; helpers read them from the frame.
        unobserved, direct = levels.UNOBSERVED, levels.DIRECT
        em.out(1, f"[[maybe_unused]] const bool {unobserved} = ppy_frame.unobserved = ppy_out->unobserved;")
        em.out(1, f"[[maybe_unused]] const bool {direct} = ppy_frame.direct = {unobserved} && ppy::unprofiled();")
    consts_at = len(em.lines)
    em.out(1, "try {")
    for i, p in enumerate(fn.params):
        em.out(2, _param_decl(p, i))
    em.block(fn.body, 2)
    em.out(1, "} catch (const ppy::Raise& e) {")
    em.out(2, "ppy_out->error = e.kind;")
    em.out(2, "ppy_out->message = e.message;")
    em.out(2, "ppy_out->line = ppy_line;")
    em.out(1, "} catch (const ppy::PythonError&) {")
    em.out(2, "ppy_out->error = ppy::PyError::Pending;")
    em.out(2, "ppy_out->line = ppy_line;")
    em.out(1, "} catch (...) {")
    em.out(2, "ppy_out->line = ppy_line;")
    em.out(2, "throw;")
    em.out(1, "}")
    em.out(0, "}")
    declare_constants(em, consts_at, 1)
    fused += em.fused_defs
    head = [line for text in fused for line in (*text.split("\n"), "")]
    lines = head + lines
    base = len(lines)
    notes = (em.consts.notes if em.consts else []) + em.notes + notes
    if em.plan.moves:
        notes.append("results are moved into the result list, not copied")
    notes += em.plan.fusion_notes
    return FunctionCode(
        lines + em.lines,
        [(base + off, ln) for off, ln in em.marks],
        tuple(notes),
        frozenset(headers | em.headers),
        fused=bool(fused),
        fused_lines=tuple(sorted({ln for c in em.plan.chains.values() for ln in c.lines})),
    )


def _headers(functions: list[ir.Function]) -> list[str]:
    found = set()

    def walk(stmts: tuple) -> None:
        for s in stmts:
            value = getattr(s, "value", None)
            if isinstance(value, ir.Call):
                found.add(cpp.op_header(value.op))
            walk(nested_statements(s))

    for fn in functions:
        walk(fn.body)
        for h in fn.helpers:
            walk(h.body)
    return sorted(found)


def generate(functions: list[ir.Function]) -> CellCode:
    # Each region's helpers are named per region; a namespace per region keeps two regions
    # specialising the same callee (or two definitions of one name) apart.
    codes = [function_cpp(fn, f"ppy_region_{index}_{fn.name}") for index, fn in enumerate(functions)]
    headers = sorted(set(_headers(functions)).union(*(c.headers for c in codes)))
    fused = any(c.fused for c in codes)
    head = [
        "// Generated by ppy_magic: the ATen regions of one cell.",
        # First: gcc uses the prelude's precompiled form (prelude.py, build.py) only before other code.
        # A TU with fused chains has other flags (toolchain.FUSED_CFLAGS) and its own prelude.
        prelude.FUSED_INCLUDE_LINE if fused else prelude.INCLUDE_LINE,
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
    for index, (fn, code) in enumerate(zip(functions, codes, strict=True)):
        symbol = f"ppy_region_{index}_{fn.name}"
        body, marks = code.lines, code.marks
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
                extras=fn.extras,
                constants=fn.constants,
                specialised_reads=fn.specialised_reads,
                torch_sources=fn.torch_sources,
                owner=fn.owner,
                plan=fn.plan,
                opt_level=max(1, min(fn.level, MAX_LEVEL)),
                fused_lines=code.fused_lines,
                level_notes={
                    lv: code.notes if lv == fn.level else function_cpp(dataclasses.replace(fn, level=lv), symbol).notes
                    for lv in range(1, MAX_LEVEL + 1)
                },
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
