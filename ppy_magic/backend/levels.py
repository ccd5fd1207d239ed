"""Optimisation levels: what levels 2 and 3 change in a region's C++, decided per function body.

Every level makes the same ATen computations in the same order as eager, so
every level's results are bitwise eager's; the levels differ in the work around
those computations.

- Level 1 is the straight translation: each Python number passed where ATen
  wants a tensor becomes a fresh 0-dim wrapped number per call, as eager makes it.
- Level 2 does once what does not change between calls: constant ``at::Scalar``
  arguments, int lists and strings become function-local statics; wrapped numbers
  of constant Python numbers are built once too, and passed while the runtime
  says nothing outside the region can see its intermediate tensors
  (``Out::unobserved``: autograd is not recording, no dispatch mode, transform or
  autocast is active), so no autograd graph or mode ever keeps one. Results are
  moved into the runtime's result vector, not copied. Where eager's own composite
  would call ``mm`` (``x @ w`` of two matrices) or ``addmm`` (``F.linear`` of a
  matrix with a bias), the region calls it directly, checking the same condition.
- Level 3 adds, while ``Out::unobserved`` holds, the reuse of dead temporaries:
  an element-wise op (``reuse.py``'s allow-list) whose operand is a temporary the
  region made with a functional op (a plain ``Tensor`` result: no alias
  annotation), made in the same block (no branch or loop boundary between) and
  read nowhere else in the function (``SAFE_REUSE_RULE``: a rule that is safe by
  construction in code with branches and loops, not a liveness analysis over
  the control-flow graph), writes its result
  into it (in-place overload, or ``out=``) when the run-time checks of
  ``ppy_region.h`` pass (unshared, dtype and shape of the result, layout, no
  operand recorded by autograd);
  otherwise the ordinary op runs. Those writes skip the Autograd and
  ADInplaceOrView kernels when no profiler is attached (``ppy::write_into``).

This module decides (``plan_body``) and spells the level-specific C++;
``codegen`` asks it while it writes statements.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..language import ir
from ..language.ir import Kind
from . import cpp, fusion
from .reuse import Reuse, reuse_for

UNOBSERVED = "ppy_unobserved"  # C++ name of the entry's copy of Out::unobserved
DIRECT = "ppy_direct"  # ... and of "unobserved and no profiler": write_into may skip the dispatcher's entry


def describe(level: int) -> str:
    return {
        1: "level 1: the straight translation (a fresh wrapped number per call for each Python number)",
        2: "level 2: constants built once per region, results moved, mm/addmm where eager's composite calls them",
        3: "level 3: level 2, and while autograd is not recording dead temporaries reused in place and "
        "element-wise ops past the autograd kernel",
        4: "level 4: level 3, and while autograd is not recording chains of element-wise float32 ops fused into "
        "one pass, each element computed as eager's kernel computes it (checked per call, else op by op)",
    }.get(level, f"level {level}")


# ---- analysis ---------------------------------------------------------------------------------

# Values that hold no variable: constants, defaults, messages.
_NO_VARS = (ir.Const, ir.Default, str, int, float, bool, type(None))


def _atoms_of(a: Any) -> Iterator[ir.Var]:
    if isinstance(a, ir.Var):
        yield a
    elif isinstance(a, ir.WrapNumber):
        yield from _atoms_of(a.value)
    elif isinstance(a, ir.Items):
        for i in a.items:
            yield from _atoms_of(i)
    elif not isinstance(a, _NO_VARS):
        raise TypeError(f"levels: an operand it cannot read: {a!r}")


def _expr_vars(e: Any) -> Iterator[ir.Var]:
    if isinstance(e, (ir.Call, ir.Intrinsic, ir.CallFunction)):
        for a in e.args:
            yield from _atoms_of(a)
    elif isinstance(e, ir.GetItem):
        yield from _atoms_of(e.tensor)
        for it in e.index:
            for a in it.atoms:
                yield from _atoms_of(a)
    else:
        raise TypeError(f"levels: an expression it cannot read: {e!r}")


def _own_reads(s: ir.Stmt) -> Iterator[ir.Var]:
    """The variables a statement reads itself, its nested blocks left out (one per occurrence).

    Every kind of statement is named here: a new one fails loudly rather than being
    taken to read nothing (level 3's liveness rests on seeing every read).
    """
    if isinstance(s, (ir.Assign, ir.Effect)):
        yield from _expr_vars(s.value)
    elif isinstance(s, ir.Move):
        yield from _atoms_of(s.value)
    elif isinstance(s, ir.SetItem):
        yield from _atoms_of(s.tensor)
        yield from _atoms_of(s.value)
        for it in s.index:
            for a in it.atoms:
                yield from _atoms_of(a)
    elif isinstance(s, ir.Return):
        for a in s.values:
            yield from _atoms_of(a)
    elif isinstance(s, ir.Raise):
        yield from _atoms_of(s.message)
    elif isinstance(s, ir.If):
        yield from _atoms_of(s.cond)
    elif isinstance(s, ir.For):
        for a in (s.start, s.stop, s.step):
            yield from _atoms_of(a)
    elif isinstance(s, ir.ForEach):
        for a in s.seqs + tuple(s.starts):
            yield from _atoms_of(a)
    elif not isinstance(s, (ir.Declare, ir.Loop, ir.Break, ir.Continue)):
        raise TypeError(f"levels: a statement it cannot read: {s!r}")


def _nested(s: ir.Stmt) -> tuple[tuple[ir.Stmt, ...], ...]:
    """The blocks nested in a statement: a branch's two, a loop's body."""
    if isinstance(s, ir.If):
        return (s.then, s.orelse)
    if isinstance(s, (ir.For, ir.ForEach, ir.Loop)):
        return (s.body,)
    return ()


def _stmt_vars(s: ir.Stmt) -> Iterator[ir.Var]:
    """Every variable a statement reads, its nested blocks included (one per occurrence)."""
    yield from _own_reads(s)
    for block in _nested(s):
        for t in block:
            yield from _stmt_vars(t)


def _blocks(stmts: tuple[ir.Stmt, ...]) -> Iterator[tuple[ir.Stmt, ...]]:
    """A body and every block nested in it, at any depth."""
    yield stmts
    for s in stmts:
        for block in _nested(s):
            yield from _blocks(block)


def _written(stmts: tuple[ir.Stmt, ...]) -> collections.Counter:
    """How many statements bind each variable (declare, set, or iterate with it)."""
    out: collections.Counter = collections.Counter()
    for block in _blocks(stmts):
        for s in block:
            if isinstance(s, ir.Assign):
                out.update(t.name for t in s.targets)
            elif isinstance(s, (ir.Declare, ir.Move)):
                out[(s.var if isinstance(s, ir.Declare) else s.target).name] += 1
            elif isinstance(s, ir.For):
                out[s.var.name] += 1
            elif isinstance(s, ir.ForEach):
                out.update(v.name for v in s.items + ((s.index,) if s.index is not None else ()))
    return out


def fresh_tensor(call: ir.Call) -> bool:
    """The op returns one new tensor: its schema's result is a plain ``Tensor`` (no alias annotation)."""
    return call.op.text.rsplit("->", 1)[-1].strip() == "Tensor" and not call.op.is_inplace


@dataclass(frozen=True)
class ReuseSite:
    """One op of level 3 that may write into the dead temporary at argument `position`."""

    entry: Reuse
    position: int
    temp: ir.Var
    made_by: str  # the op that made the temporary, for explain()
    made_at: int  # its line


@dataclass
class BodyPlan:
    """Level-specific decisions for one function body (a region's entry or a helper)."""

    level: int
    reuse: dict[int, ReuseSite] = field(default_factory=dict)  # id(Assign) -> site
    moves: set[str] = field(default_factory=set)  # tensor variables returned by move (level 2+)
    chains: dict[int, fusion.Chain] = field(default_factory=dict)  # id(the chain's last Assign) -> chain (level 4)
    fused: set[int] = field(default_factory=set)  # id(Assign) of the other ops of chains: emitted with their last
    fusion_notes: list[str] = field(default_factory=list)  # why element-wise ops stay out of chains


# What level 3 takes for "dead", in code with branches and loops. Not a liveness analysis
# over the control-flow graph: a rule that is safe by construction. An op S may write into
# its operand t when
#   (a) t is the one target of an Assign A of a functional op with a fresh result, in the
#       same block as S and before it (no branch or loop boundary between them);
#   (b) nothing else binds t: no other Assign, Declare, Move, loop variable;
#   (c) S is the only read of t in the whole body: once, counting every block, loop
#       header, condition, list operation, call and return.
# Then every run of S reads the value A made in the same run of the block: A precedes S
# there, nothing else sets t, and t is declared in that block, so a later iteration of an
# enclosing loop declares a new t and runs A again before S. After S nothing reads t (S is
# its only read and runs once per run of the block), whatever path follows: a later
# iteration, a break, a continue, a return. A value carried to a later iteration, stored in
# a list, returned, or read on any other path is read by another statement, so (c) keeps it.
# What this gives up: a temporary read before a branch and last read in both arms of it.
SAFE_REUSE_RULE = (
    "a temporary is reused only where it was made in the same block, before the op, and the op is its only "
    "reader in the whole function (not carried to a later iteration, stored in a list, returned or read on "
    "another path)"
)


def plan_body(stmts: tuple[ir.Stmt, ...], level: int, helpers: tuple[ir.Helper, ...] = ()) -> BodyPlan:
    """What the level changes in one body; `helpers` are its region's (level 4 sees through one-op ones)."""
    plan = BodyPlan(level)
    if level < 2:
        return plan
    uses = collections.Counter(v.name for s in stmts for v in _stmt_vars(s))
    written = _written(stmts)
    # Results: a local tensor that occurs once in its return statement (params are references, not locals).
    # The return ends the call, so whatever path reaches it, nothing reads the variable afterwards.
    assigned = {t.name for b in _blocks(stmts) for s in b if isinstance(s, ir.Assign) for t in s.targets}
    declared = {s.var.name for b in _blocks(stmts) for s in b if isinstance(s, ir.Declare)}
    for b in _blocks(stmts):
        for s in b:
            if isinstance(s, ir.Return):
                count = collections.Counter(a.name for a in s.values if isinstance(a, ir.Var))
                plan.moves |= {
                    a.name
                    for a in s.values
                    if isinstance(a, ir.Var)
                    and a.kind in (Kind.TENSOR, Kind.TENSORS)
                    and count[a.name] == 1
                    and (a.name in assigned or a.name in declared)
                }
    if level < 3:
        return plan
    if level >= 4:
        _plan_chains(plan, stmts, uses, written, {h.symbol: h for h in helpers})
    for block in _blocks(stmts):
        made: dict[str, ir.Assign] = {}  # temporaries made in this block by a functional op, (a) and (b)
        for s in block:
            if not isinstance(s, ir.Assign):
                continue
            if isinstance(s.value, ir.Call) and len(s.targets) == 1:
                site = _site(s.value, made, uses)
                if site is not None:
                    plan.reuse[id(s)] = site
            one = len(s.targets) == 1 and s.targets[0].kind == Kind.TENSOR and written[s.targets[0].name] == 1
            if one and isinstance(s.value, ir.Call) and fresh_tensor(s.value):
                made[s.targets[0].name] = s
    return plan


def _plan_chains(
    plan: BodyPlan,
    stmts: tuple[ir.Stmt, ...],
    uses: collections.Counter,
    written: collections.Counter,
    helpers: dict[str, ir.Helper],
):
    """Level 4: the fused chains of every block (``fusion``), where eager's kernels are the ones restated."""
    if not fusion.available():
        plan.fusion_notes.append(
            f"eager runs {fusion.capability()} kernels here; the fused formulas are AVX512's: nothing fuses"
        )
        return
    for block in _blocks(stmts):
        chains, reasons = fusion.find_chains(block, uses, written, helpers)
        plan.fusion_notes += reasons
        for c in chains:
            plan.chains[id(c.root.stmt)] = c
            plan.fused |= {id(n.stmt) for n in c.nodes[:-1]}


def _site(call: ir.Call, made: dict[str, ir.Assign], uses: collections.Counter) -> ReuseSite | None:
    entry = reuse_for(call.op.name, call.op.overload)
    if entry is None:
        return None
    for position, (sarg, a) in enumerate(zip(call.op.args, call.args, strict=True)):
        if sarg.name not in entry.candidates or not isinstance(a, ir.Var) or a.kind != Kind.TENSOR:
            continue
        maker = made.get(a.name)
        if maker is None or uses[a.name] != 1:
            continue  # not made here, or read elsewhere too (c): a view, a return, a later op or iteration
        op = maker.value.op  # type: ignore[union-attr]
        return ReuseSite(entry, position, a, op.name, maker.line)
    return None


# ---- spelling ---------------------------------------------------------------------------------


@dataclass
class Constants:
    """The statics one function body declares (level 2+), in order of first use."""

    decls: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _names: dict[tuple[str, str], str] = field(default_factory=dict)

    def _name(self, key: tuple[str, str], decl: str, note: str) -> str:
        if key not in self._names:
            name = f"ppy_c{len(self._names)}"  # ppy_k/ppy_n count loops
            self._names[key] = name
            self.decls.append(decl.format(name=name))
            self.notes.append(note)
        return self._names[key]

    def wrapped(self, value: ir.Const, where: str) -> str:
        """A wrapped number built once; passed while nothing can observe it, a fresh one otherwise."""
        s = cpp.scalar(cpp.atom(value), value.kind)
        name = self._name(
            ("wrapped", s),
            "static const at::Tensor& {name} = ppy::constant_number(" + s + ");",
            f"the wrapped number {value.value!r} ({where}) is built once (passed while autograd is not recording)",
        )
        return f"({UNOBSERVED} ? {name} : ppy::wrapped_number({s}))"

    def scalar(self, text: str, shown: object) -> str:
        decl = "static const at::Scalar {name} = " + text + ";"
        return self._name(("scalar", text), decl, f"the Scalar {shown!r} is built once")

    def ints(self, items: list[str], shown: object) -> str:
        name = self._name(
            ("ints", ",".join(items)),
            "static constexpr int64_t {name}[] = {{" + ", ".join(items) + "}};",
            f"the int list {shown!r} is built once",
        )
        return f"at::IntArrayRef({name})"

    def string(self, value: str) -> str:
        import json

        name = self._name(
            ("str", value),
            "static const std::string {name} = " + json.dumps(value) + ";",
            f"the string {value!r} is built once",
        )
        return name


def call_args(call: ir.Call, consts: Constants | None, line: int) -> list[str]:
    """``cpp.call_args``, with constants taken from `consts` (level 2+)."""
    if consts is None:
        return cpp.call_args(call)
    where = f"{call.op.name}, line {line}"
    out = []
    for sarg, a, text in zip(call.op.args, call.args, cpp.call_args(call), strict=True):
        base = cpp.base_type(sarg.cpp)
        if isinstance(a, ir.WrapNumber) and isinstance(a.value, ir.Const):
            out.append(consts.wrapped(a.value, where))
        elif base == "at::Scalar" and isinstance(a, (ir.Const, ir.Default)) and text.startswith("at::Scalar("):
            out.append(consts.scalar(text, a.value))
        elif base in ("at::IntArrayRef",) and _const_ints(a) is not None and not text.startswith("c10::"):
            values = _const_ints(a)
            out.append(consts.ints([cpp.cpp_literal(v, Kind.INT) for v in values], list(values)) if values else text)
        elif base in cpp.STRING_VIEWS and isinstance(a, ir.Const) and a.kind == Kind.STR:
            out.append(f"c10::string_view({consts.string(a.value)})")
        else:
            out.append(text)
    return out


def _const_ints(a: Any) -> tuple[int, ...] | None:
    if isinstance(a, ir.Items) and a.kind == Kind.INT and all(isinstance(i, ir.Const) for i in a.items):
        return tuple(int(i.value) for i in a.items)
    if isinstance(a, ir.Default) and isinstance(a.value, (list, tuple)) and all(type(v) is int for v in a.value):
        return tuple(a.value)
    return None


def direct_call(call: ir.Call, args: list[str], below: bool = False) -> tuple[str, str] | None:
    """Level 2: ``(C++ expression, note)`` calling ``mm``/``addmm`` where eager's composite would, else None.

    ``matmul`` of two matrices is ``mm`` (ATen's ``_matmul_impl``); ``linear`` of a matrix
    with a bias is ``addmm(bias, input, weight.t())`` (ATen's ``linear``). The condition
    is checked per call and the composite runs otherwise. With `below` (level 3),
    ``mm`` is called as ``ppy::call_below`` calls an op of level 3's list.
    """
    name, overload = call.op.name, call.op.overload
    if name == "matmul" and overload == "" and len(args) == 2:
        a, b = args
        cond = f"{a}.dim() == 2 && {b}.dim() == 2"
        plain = f"{cpp.op_call(call.op)}({a}, {b})"
        mm = f"ppy::call_below<at::_ops::mm>({DIRECT}, {a}, {b})" if below else f"at::_ops::mm::call({a}, {b})"
        return f"(({cond}) ? {mm} : {plain})", "matmul of two matrices calls mm"
    if name == "linear" and overload == "" and len(args) == 3:
        bias = call.args[2]
        if isinstance(bias, ir.Default) or (isinstance(bias, ir.Const) and bias.kind == Kind.NONE):
            return None  # no bias: linear is matmul + nothing, left to the composite
        x, w, b = args
        optional = isinstance(bias, ir.Var) and bias.kind == Kind.OPT_TENSOR
        has_bias = f"{b}.has_value() && " if optional else ""
        bias_t = f"(*{b})" if optional else b
        cond = f"{has_bias}{x}.dim() == 2 && {w}.dim() == 2"
        direct = f"at::_ops::addmm::call({bias_t}, {x}, at::_ops::t::call({w}), 1, 1)"
        plain = f"{cpp.op_call(call.op)}({x}, {w}, {b})"
        return f"(({cond}) ? {direct} : {plain})", "linear of a matrix with a bias calls addmm"
    return None


DIRECT_HEADERS = ("ATen/ops/mm_ops.h", "ATen/ops/addmm_ops.h", "ATen/ops/t_ops.h")

BELOW_AUTOGRAD_NOTE = (
    "functional element-wise ops (level 3's list) and mm go straight to the backend kernel, past the Autograd "
    "and ADInplaceOrView kernels, while autograd is not recording, no operand requires grad and no profiler "
    "is attached (ppy::call_below)"
)


def below_autograd_call(call: ir.Call, args: list[str]) -> str | None:
    """Level 3: ``ppy::call_below`` of a functional op on level 3's list, or None.

    Only functional overloads with a fresh result (no alias annotation): for them
    ADInplaceOrView is a fallthrough, and with nothing requiring grad the Autograd
    kernel only redispatches, so skipping both gives the backend kernel's result,
    as eager gets it. ``ppy_region.h`` decides per call.
    """
    if reuse_for(call.op.name, call.op.overload) is None or not fresh_tensor(call):
        return None
    struct = cpp.op_call(call.op).removesuffix("::call")
    return f"ppy::call_below<{struct}>({DIRECT}, {', '.join(args)})"


def reuse_lines(site: ReuseSite, call: ir.Call, args: list[str], target: str) -> list[str]:
    """Level 3: C++ lines that set `target` from `call`, into the dead temporary when the checks pass."""
    entry = site.entry
    names = [a.name for a in call.op.args]
    by_name = dict(zip(names, args, strict=True))
    temp = args[site.position]
    checks = [UNOBSERVED, f"ppy::reusable({temp})"]
    checks += [f"ppy::fits({temp}, {by_name[t]})" for t in entry.tensors if by_name[t] != temp]
    promoted = ", ".join(by_name[p] for p in entry.promote)
    checks.append(f"ppy::result_dtype({promoted}) == {temp}.scalar_type()")
    operands = ", ".join(by_name[t] for t in entry.tensors)
    checks.append(f"ppy::grad_free({operands})")
    keys = f"ppy::keys_of({operands})"
    if entry.inplace_struct is not None and names[site.position] == "self" and site.position == 0:
        write = f"ppy::write_into<at::_ops::{entry.inplace_struct}>({DIRECT}, {keys}, {', '.join(args)});"
    else:
        write = f"ppy::write_into<at::_ops::{entry.out_struct}>({DIRECT}, {keys}, {', '.join(args)}, {temp});"
    return [
        f"at::Tensor {target};",
        f"if ({' && '.join(checks)}) {{",
        f"  {write}",
        f"  {target} = std::move({temp});",
        "} else {",
        f"  {target} = {cpp.op_call(call.op)}({', '.join(args)});",
        "}",
    ]


def reuse_note(site: ReuseSite, call: ir.Call, line: int) -> str:
    how = "in place" if site.entry.inplace_struct and site.position == 0 else "with out="
    return (
        f"line {line}: {call.op.name} writes {how} into the result of {site.made_by} (line {site.made_at}) "
        "when autograd is not recording and it is unshared, same dtype and shape"
    )
