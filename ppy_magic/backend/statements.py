"""One body's statements as C++: ``Emitter`` writes a region's (or helper's) statements at its level.

It spells each ``ir`` statement with ``cpp.py``'s expressions, applies the body's level plan
(``levels.BodyPlan``: constants, direct calls, in-place reuse, fused chains) and records the line
marks ``annotate`` and error locations read. ``codegen`` puts the bodies into one translation unit.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..language import ir
from ..language.ir import Kind
from . import cpp, fusion, levels
from .cpp import NAME, atom


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
    for s in nested_statements(stmt):
        out |= _uses(s)
    return out


LINE_MARK = re.compile(r"^\s*ppy_line = (\d+);")  # what Emitter.line writes


def nested_statements(stmt: ir.Stmt) -> tuple[ir.Stmt, ...]:
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
                elif a.kind == Kind.DEVICE:  # its type, then its index
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}.type()));")
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}.index()));")
                elif a.kind == Kind.DTYPE:
                    self.out(depth, f"ppy_out->i.push_back(static_cast<int64_t>({atom(a)}));")
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


def declare_constants(em: Emitter, at: int, depth: int) -> None:
    """Level 2+: the body's statics, inserted before its first statement (line marks shift with them)."""
    if not em.consts or not em.consts.decls:
        return
    decls = ["  " * depth + d for d in em.consts.decls]
    em.lines[at:at] = decls
    em.marks = [(off + len(decls) if off >= at else off, ln) for off, ln in em.marks]
