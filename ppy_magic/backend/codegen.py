"""Codegen: ``ir.Function``s of one cell -> one C++ translation unit, as data.

The TU includes only ATen headers (the ``_ops.h`` of each op it calls, plus
``ppy_region.h``) and ``Python.h`` for its tiny module init, which exports a
table of region entry points to the runtime through a capsule. This module
writes the statements, the entry points and the TU around them; how each
expression, type and constant is spelled comes from ``cpp.py``. Nothing here
runs a compiler.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..decorator import MAX_LEVEL
from ..language import ir
from ..language.ir import Kind
from ..language.modules import Plan
from . import cpp, fusion, levels
from .cpp import NAME, atom, cpp_literal

__all__ = [
    "ABI_HEADER",
    "NATIVE_HEADER",
    "REGION_HEADER",
    "CellCode",
    "RegionSpec",
    "cpp_by_line",
    "cpp_literal",
    "generate",
]

ABI_HEADER = "ppy_abi.h"
REGION_HEADER = "ppy_region.h"
NATIVE_HEADER = "ppy_native.h"  # included by REGION_HEADER


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


def _decl(var: ir.Var) -> str:
    return f"{cpp.cpp_type(var.kind)} {NAME(var)}{cpp.DECLARED_INIT.get(var.kind, '')};"


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
        if isinstance(e, (ir.Call, ir.Intrinsic, ir.CallFunction)):
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
    elif isinstance(stmt, ir.For):
        for a in (stmt.start, stmt.stop, stmt.step):
            add(a)
    elif isinstance(stmt, ir.ForEach):
        for a in stmt.seqs + tuple(x for x in stmt.starts if x is not None):
            add(a)
    for s in _children(stmt):
        out |= _uses(s)
    return out


_LINE_MARK = re.compile(r"^\s*ppy_line = (\d+);")  # what Emitter.line writes


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
        mark = _LINE_MARK.match(raw)
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


def _children(stmt: ir.Stmt) -> tuple[ir.Stmt, ...]:
    """The statements nested in a branch or a loop."""
    if isinstance(stmt, ir.If):
        return stmt.then + stmt.orelse
    if isinstance(stmt, (ir.For, ir.ForEach, ir.Loop)):
        return stmt.body
    return ()


# Straight-line code polls for interrupts (ppy::poll: a signal pending? other threads waiting for the
# GIL?) before every POLL_EVERY-th ATen call; every loop polls once per iteration.
POLL_EVERY = 8


class Emitter:
    def __init__(
        self,
        fn_name: str,
        source_lines: dict[int, str],
        track_lines: bool,
        helper: bool,
        plan: levels.BodyPlan | None = None,
        symbol: str = "",
    ):
        self.lines: list[str] = []
        self.marks: list[tuple[int, int]] = []
        self.fn_name = fn_name
        self.source_lines = source_lines
        self.track_lines = track_lines
        self.helper = helper
        self.current_line = 0
        self.unpolled = 0  # ATen calls emitted since the last poll
        self.loops = 0  # loops around the statement being emitted (names their counters)
        self.plan = plan or levels.BodyPlan(1)
        self.consts = levels.Constants() if self.plan.level >= 2 else None
        self.notes: list[str] = []  # what the level changed, for explain()
        self.wrapped = 0  # wrapped numbers level 3 made before a reusing op (names them)
        self.headers: set[str] = set()
        self.symbol = symbol  # names the body's fused chains
        self.fused_defs: list[str] = []  # level 4: the C++ functions of its chains, before the body

    def expr(self, e: ir.Expr, line: int) -> str:
        """The C++ of an expression, with this body's level applied (constants, direct calls, flags)."""
        if isinstance(e, ir.Call):
            args = levels.call_args(e, self.consts, line)
            if self.plan.level >= 2 and all(isinstance(a, (ir.Var, ir.Const, ir.Default)) for a in e.args):
                direct = levels.direct_call(e, args, below=self.plan.level >= 3)
                if direct is not None:
                    self.note(f"line {line}: {direct[1]} (checked per call)")
                    self.headers.update(levels.DIRECT_HEADERS)
                    return direct[0]
            if self.plan.level >= 3:
                below = levels.below_autograd_call(e, args)
                if below is not None:
                    self.note(levels.BELOW_AUTOGRAD_NOTE)
                    return below
            return f"{cpp.op_call(e.op)}({', '.join(args)})"
        return cpp.expr(e)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

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
                    if t.temp and t.kind == Kind.TENSOR:
                        temps[t.name] = t
            for name in _uses(s):
                last[name] = i
        frees: dict[int, list[ir.Var]] = {}
        for name, var in temps.items():
            if name in last:
                frees.setdefault(last[name], []).append(var)
        deferred: list[ir.Var] = []  # read last by a chain's op: dropped after the chain
        for i, s in enumerate(stmts):
            if id(s) in self.plan.fused:
                deferred += frees.get(i, ())
                continue
            chain = self.plan.chains.get(id(s))
            if chain is not None:
                self.chain(chain, depth)
                internal = {n.target.name for n in chain.nodes[:-1]}
                for var in deferred + frees.get(i, []):
                    if var.name not in internal:
                        self.out(depth, f"{NAME(var)}.reset();")
                deferred = []
                continue
            self.stmt(s, depth)
            if not isinstance(s, (ir.Return, ir.Raise)):
                for var in frees.get(i, ()):
                    self.out(depth, f"{NAME(var)}.reset();")  # dropped here, as eager drops it

    def poll(self, depth: int) -> None:
        self.out(depth, "ppy::poll(ppy_frame);")
        self.unpolled = 0

    def count_call(self, value: ir.Expr, depth: int) -> None:
        if isinstance(value, (ir.Call, ir.GetItem)):
            if self.unpolled >= POLL_EVERY:
                self.poll(depth)
            self.unpolled += 1

    def loop_body(self, body: tuple[ir.Stmt, ...], depth: int, head: list[str] = ()) -> None:
        """A loop's body: it polls first, then `head` (the iteration's variables), then the statements."""
        self.loops += 1
        self.current_line = 0
        self.poll(depth)
        for text in head:
            self.out(depth, text)
        self.block(body, depth)
        self.loops -= 1
        self.current_line = 0

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        if isinstance(s, (ir.Assign, ir.Effect)):
            self.count_call(s.value, depth)
        if isinstance(s, ir.Assign):
            self.line(depth, s.line)
            site = self.plan.reuse.get(id(s))
            if site is not None:
                self.reuse(s, site, depth)
            elif len(s.targets) == 1 and not isinstance(s.value, ir.CallFunction):
                t = s.targets[0]
                self.out(depth, f"{cpp.cpp_type(t.kind)} {NAME(t)} = {self.expr(s.value, s.line)};")
            else:
                for t in s.targets:
                    self.out(depth, _decl(t))
                tie = ", ".join(NAME(t) for t in s.targets)
                if s.targets:
                    self.out(depth, f"std::tie({tie}) = {self.expr(s.value, s.line)};")
                else:
                    self.out(depth, f"{self.expr(s.value, s.line)};")
        elif isinstance(s, ir.Declare):
            self.out(depth, _decl(s.var))
        elif isinstance(s, ir.Move):
            self.line(depth, s.line)
            self.out(depth, f"{NAME(s.target)} = {atom(s.value)};")
        elif isinstance(s, ir.Effect):
            self.line(depth, s.line)
            self.out(depth, f"{self.expr(s.value, s.line)};")
        elif isinstance(s, ir.SetItem):
            self.line(depth, s.line)
            if s.value.kind == Kind.TENSOR:
                self.out(
                    depth, f"at::indexing::set_item({atom(s.tensor)}, {cpp.index(s.index, s.tensor)}, {atom(s.value)});"
                )
            else:  # Python passes a bool value as an int (THPUtils_unpackIndex)
                kind = Kind.INT if s.value.kind == Kind.BOOL else s.value.kind
                scalar = cpp.scalar(atom(s.value), kind)
                self.out(depth, f"ppy::set_item_scalar({atom(s.tensor)}, {cpp.index(s.index, s.tensor)}, {scalar});")
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
            head: list[str] = []
            if isinstance(s.step, ir.Const) and s.step.value in (1, -1):  # never steps past the int64 range
                up = s.step.value == 1
                cond = f"{v} {'<' if up else '>'} {atom(s.stop)}"
                self.out(depth, f"for (int64_t {v} = {atom(s.start)}; {cond}; {'++' if up else '--'}{v}) {{")
            else:  # counted, as range() counts: an overflowing step is never taken
                k, n = f"ppy_k{self.loops}", f"ppy_n{self.loops}"
                bounds = f"{atom(s.start)}, {atom(s.stop)}, {atom(s.step)}"
                self.out(depth, f"for (int64_t {k} = 0, {n} = ppy::range_len({bounds}); {k} < {n}; ++{k}) {{")
                head.append(f"const int64_t {v} = ppy::range_item({atom(s.start)}, {atom(s.step)}, {k});")
            self.loop_body(s.body, depth + 1, head)
            self.out(depth, "}")
        elif isinstance(s, ir.ForEach):
            self.line(depth, s.line)
            k = f"ppy_k{self.loops}"
            starts = s.starts or (None,) * len(s.seqs)
            conds, items = [], []
            for q, start in zip(s.seqs, starts, strict=True):
                size = f"static_cast<int64_t>({atom(q)}.size())"
                if start is None:
                    conds.append(f"{k} < {size}")
                    items.append(f"{atom(q)}[{k}]")
                else:  # reversed(): from its start down, while still inside the (maybe shrunk) list
                    at = f"{atom(start)} - {k}"
                    conds.append(f"{at} >= 0 && {at} < {size}")
                    items.append(f"{atom(q)}[{at}]")
            self.out(depth, f"for (int64_t {k} = 0; {' && '.join(conds)}; ++{k}) {{")
            head = [f"const int64_t {NAME(s.index)} = {k};"] if s.index is not None else []
            head += [f"{cpp.cpp_type(v.kind)} {NAME(v)} = {item};" for v, item in zip(s.items, items, strict=True)]
            self.loop_body(s.body, depth + 1, head)
            self.out(depth, "}")
        elif isinstance(s, ir.Loop):
            self.line(depth, s.line)
            self.out(depth, "while (true) {")
            self.loop_body(s.body, depth + 1)
            self.out(depth, "}")
        elif isinstance(s, ir.Break):
            self.out(depth, "break;")
        elif isinstance(s, ir.Continue):
            self.out(depth, "continue;")
        elif isinstance(s, ir.Raise):
            self.line(depth, s.line)
            message = json.dumps(s.message) if isinstance(s.message, str) else atom(s.message)
            if ":" in s.error:  # a library's exception class, "module:qualname"
                self.out(depth, f"ppy::raise_custom({json.dumps(s.error)}, {message});")
            else:
                self.out(depth, f"ppy::raise({cpp.python_error(s.error)}, {message});")
        elif isinstance(s, ir.Return):
            self.line(depth, s.line)
            if self.helper:
                self.out(depth, f"return std::make_tuple({', '.join(atom(a) for a in s.values)});")
                return
            moved = {a.name for a in s.values if isinstance(a, ir.Var) and a.name in self.plan.moves}
            for a in s.values:
                if a.kind == Kind.TENSOR and isinstance(a, ir.Var) and a.name in moved:
                    self.out(depth, f"ppy_out->t.emplace_back(std::move({atom(a)}));")
                elif a.kind == Kind.TENSORS and isinstance(a, ir.Var) and a.name in moved:
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}.size()));")
                    self.out(depth, f"for (at::Tensor& ppy_t : {atom(a)}) ppy_out->t.push_back(std::move(ppy_t));")
                elif a.kind == Kind.TENSOR:
                    self.out(depth, f"ppy_out->t.emplace_back({atom(a)});")
                elif a.kind == Kind.FLOAT:
                    self.out(depth, f"ppy_out->f.push_back({atom(a)});")
                elif a.kind in (Kind.INT, Kind.BOOL):
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}));")
                elif a.kind == Kind.INTS:  # a torch.Size
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}.size()));")
                    self.out(depth, f"ppy_out->i.insert(ppy_out->i.end(), {atom(a)}.begin(), {atom(a)}.end());")
                elif a.kind == Kind.TENSORS:
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}.size()));")
                    self.out(depth, f"for (const at::Tensor& ppy_t : {atom(a)}) ppy_out->t.push_back(ppy_t);")
                elif a.kind == Kind.OPT_TENSOR:  # an undefined tensor stands for None
                    self.out(depth, f"ppy_out->t.emplace_back({atom(a)}.has_value() ? *{atom(a)} : at::Tensor());")
                elif a.kind == Kind.NUMBER:
                    self.out(depth, f"ppy::push_number(*ppy_out, {atom(a)});")
                elif a.kind in ir.LIST_KINDS:
                    self.out(depth, f"ppy::push_list(*ppy_out, {atom(a)});")
                else:
                    raise TypeError(f"a region cannot return a value of kind {a.kind!r}")
            self.out(depth, "return;")
        else:
            raise TypeError(s)

    def chain(self, chain: fusion.Chain, depth: int) -> None:
        """Level 4: the chain's fused function while nothing observes, else (or where its checks fail) its ops."""
        name = f"{self.symbol}_fused{len(self.fused_defs)}"
        defs = fusion.chain_cpp(chain, name)
        self.fused_defs.append("\n".join(defs))
        self.note(chain.describe() + " (checked per call, else op by op)")
        first = chain.nodes[0].stmt
        for n in chain.nodes:
            self.count_call(n.stmt.value, depth)
        self.line(depth, first.line)
        t = NAME(chain.root.target)
        self.out(depth, f"at::Tensor {t} = {levels.UNOBSERVED} ? {fusion.call_cpp(chain)} : at::Tensor();")
        self.out(depth, f"if (!{t}.defined()) {{")
        self.out(depth + 1, f"{t} = [&]() -> at::Tensor {{")
        saved = self.current_line
        self.current_line = 0
        for n in chain.nodes:
            self.stmt(n.stmt, depth + 2)
        self.out(depth + 2, f"return {t};")
        self.out(depth + 1, "}();")
        self.out(depth, "}")
        self.current_line = saved

    def reuse(self, s: ir.Assign, site: levels.ReuseSite, depth: int) -> None:
        """Level 3: the op writes into its dead temporary operand when the run-time checks pass."""
        call = s.value
        assert isinstance(call, ir.Call)
        args = levels.call_args(call, self.consts, s.line)
        target = NAME(s.targets[0])
        # A wrapped number is made once, before the op, as eager makes it: not once per check.
        for i, a in enumerate(call.args):
            if isinstance(a, ir.WrapNumber):
                name = f"ppy_w{self.wrapped}"  # ours: never a user's v_ name, unique in the body
                self.wrapped += 1
                self.out(depth, f"const at::Tensor {name} = {args[i]};")
                args[i] = name
        for text in levels.reuse_lines(site, call, args, target):
            self.out(depth, text)
        self.note(levels.reuse_note(site, call, s.line))


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
    if p.kind == Kind.INTS:
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


def _helper_cpp(h: ir.Helper, source_lines: dict[int, str], level: int) -> Emitter:
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
        h.symbol, source_lines, h.track_lines, helper=True, plan=levels.plan_body(h.body, level), symbol=h.symbol
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
    _declare_constants(em, start, 1)
    return em


def _declare_constants(em: Emitter, at: int, depth: int) -> None:
    """Level 2+: the body's statics, inserted before its first statement (line marks shift with them)."""
    if not em.consts or not em.consts.decls:
        return
    decls = ["  " * depth + d for d in em.consts.decls]
    em.lines[at:at] = decls
    em.marks = [(off + len(decls) if off >= at else off, ln) for off, ln in em.marks]


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
        hem = _helper_cpp(h, fn.source_lines, level)
        fused += hem.fused_defs
        lines += hem.lines + [""]
        notes += [f"{n} (in {h.symbol})" for n in hem.notes]
        notes += [f"{n} (in {h.symbol})" for n in (hem.consts.notes if hem.consts else [])]
        headers |= hem.headers
    em = Emitter(fn.name, fn.source_lines, True, helper=False, plan=levels.plan_body(fn.body, level), symbol=symbol)
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
    _declare_constants(em, consts_at, 1)
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
            walk(_children(s))

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
        # A TU with fused chains has other flags (fusion.CFLAGS) and includes its header instead.
        fusion.INCLUDE_LINE if fused else '#include "ppy_prelude.h"',
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
