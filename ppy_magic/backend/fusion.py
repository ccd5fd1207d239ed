"""Level 4: chains of element-wise float32 ops in one pass, each element computed as eager computes it.

``docs/fusion.md`` gives the facts this rests on: for each op of the fused set
(``FUSED``), ``runtime/ppy_fused.h`` holds the formula eager's CPU kernel uses,
in eager's loop shape, shown identical by ``benchmarks/fusion_exact.py``
(exhaustively for the unary ops). This module finds the chains in a body and
spells each as a C++ function the region calls while nothing can observe its
intermediates (``Out::unobserved``, as level 3's reuse); the function checks the
call's operands and returns an undefined tensor when one check fails, and the
region then runs the chain's ops one by one, as at level 3.

A chain is a run of consecutive statements of one block, each an op of the fused
set, where every value but the last is a temporary read once, by a later op of
the chain (so nothing else can see it); the last one's target is the chain's
result. Its leaves are tensors and Python numbers. Per call: every tensor is a
defined, contiguous, strided float32 CPU tensor of at least one dimension, with
no other dispatch key, none recorded by autograd, all of one shape except the
*row* operands (below) and 0-dim ones (not NaN: eager's loop broadcasts them as
it does a Python number, and so does the pass); a Python float is not NaN; eager's
kernels run AVX512;
and the ops whose body and tail round differently (``kPositionDependent``) split
the elements into the same chunks at this length and thread count.

A row operand (a bias) may have the chain's trailing sizes only, broadcast over
its leading ones: eager's op then loops row by row, whose tails fall elsewhere,
so a leaf may be one only where no op whose element depends on its position (nor
an MKL block op) reads it or a value made from row operands alone. The op's
other elements are the same wherever they are computed, so the fused pass reads
the row at each position's offset within it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..language import ir
from ..language.ir import Kind
from .cpp import NAME, cpp_literal


@dataclass(frozen=True)
class FusedOp:
    struct: str  # ppy::fused::<struct>
    position_dependent: bool  # its float32 body and tail round differently
    block: bool = False  # computed by MKL over a block (exp, tanh of float)
    condition: bool = False  # a comparison: its value is a where's condition, a lane mask in the pass


_ADD, _SUB = FusedOp("Add", False), FusedOp("Sub", False)
_MUL, _DIV = FusedOp("Mul", True), FusedOp("Div", False)
# aten name -> the op, for unary ops of one tensor
_UNARY = {
    "neg": FusedOp("Neg", False),
    "abs": FusedOp("Abs", False),
    "relu": FusedOp("Relu", False),
    "reciprocal": FusedOp("Reciprocal", False),
    "sigmoid": FusedOp("Sigmoid", True),
    "silu": FusedOp("Silu", True),
    "exp": FusedOp("Exp", False, block=True),
    "tanh": FusedOp("Tanh", False, block=True),
}
_GELU_TANH = FusedOp("GeluTanh", True)
# Comparisons (a > b in both of eager's forms: exact) and where (a selection: bits copied).
_COMPARE = {name: FusedOp(name.capitalize(), False, condition=True) for name in ("eq", "ne", "lt", "le", "gt", "ge")}
_WHERE = FusedOp("Where", False)
_POWERS = {2: FusedOp("Square", False), 3: FusedOp("Cube", False)}
# A cast to float32 (x.float(), x.to(torch.float32)): of a float32 value the value itself, of a bfloat16
# leaf its exact widening (a shift), which eager's copy kernel gives alike in its body and tail; float16
# stays out (ppy_fused.h says why).
_WIDEN = FusedOp("Widen", False)

FUSED_SET = (
    "add, sub, rsub with alpha 1; mul; true div; neg, abs, relu, reciprocal, sigmoid, silu, exp, tanh; "
    "gelu(approximate='tanh'); pow(x, 2), pow(x, 3): float32 tensors of one shape and Python numbers; "
    "a row (a bias of the last dimensions) broadcast into add, sub, div and the position-free ops after them; "
    "eq, ne, lt, le, gt, ge as the condition of a where of float32 tensors and numbers; 0-dim float32 tensors "
    "as numbers; casts to float32 (of float32, or of bfloat16 tensors of the chain's shape); a "
    "call of a compiled helper that makes one of these ops (F.silu, x.float())"
)


# An operand: a tensor variable, a number compiled in (float), or a Python number variable.
@dataclass(frozen=True)
class Number:
    value: float | int


@dataclass
class Node:
    stmt: ir.Assign  # the statement of the block (an op, or a call of a helper that makes one op)
    op: FusedOp
    operands: tuple[Any, ...]  # ir.Var (tensor or number) or Number
    call: ir.Call  # the op it makes (a helper's, with the caller's arguments)

    @property
    def target(self) -> ir.Var:
        return self.stmt.targets[0]


@dataclass
class Chain:
    nodes: list[Node]
    name: str = ""  # its C++ function, set when spelled
    tensors: list[ir.Var] = field(default_factory=list)  # tensor leaves, first use first
    numbers: list[ir.Var] = field(default_factory=list)  # Python-number leaves
    rows: set[str] = field(default_factory=set)  # tensor leaves that may be row operands
    widened: set[str] = field(default_factory=set)  # tensor leaves read only by casts to float32

    @property
    def root(self) -> Node:
        return self.nodes[-1]

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted({n.stmt.line for n in self.nodes}))

    def describe(self) -> str:
        ops = ", ".join(n.call.op.name for n in self.nodes)
        where = ", ".join(str(ln) for ln in self.lines)
        return f"line{'s' if len(self.lines) > 1 else ''} {where}: {ops} run as one fused pass"


def _alpha_one(a: Any) -> bool:
    return (isinstance(a, ir.Default) and a.value == 1) or (isinstance(a, ir.Const) and a.value == 1)


def _operand(a: Any) -> Any | str:
    """A chain operand for `a`, or why it cannot be one."""
    if isinstance(a, ir.Var) and a.kind == Kind.TENSOR:
        return a
    if isinstance(a, (ir.WrapNumber, ir.Const, ir.Var)):  # a wrapped number, or a Scalar argument
        v = a.value if isinstance(a, ir.WrapNumber) else a
        if isinstance(v, ir.Const) and v.kind in (Kind.INT, Kind.FLOAT, Kind.BOOL):
            if v.kind == Kind.FLOAT and math.isnan(v.value):
                return "a NaN number (eager's tail for it was not measured)"
            return Number(float(v.value) if v.kind == Kind.FLOAT else int(v.value))
        if isinstance(v, ir.Var) and v.kind in (Kind.INT, Kind.FLOAT, Kind.BOOL):
            return v
    return "an operand that is neither a tensor nor a Python int or float"


def node_of(s: ir.Stmt, helpers: dict[str, ir.Helper] | None = None) -> Node | str | None:
    """The chain node `s` is; a reason when it is an element-wise op that stays out; None otherwise.

    A call of a compiled helper whose body makes one op of its parameters and returns it (``F.silu``
    from torch's source, ``x.float()``, a user's one-line function) is that op with the caller's
    arguments; where the chain does not run, the statement calls the helper as before.
    """
    if not (isinstance(s, ir.Assign) and len(s.targets) == 1):
        return None
    call = s.value
    if isinstance(call, ir.CallFunction):
        call = one_op(call, helpers or {})
    if not isinstance(call, ir.Call):
        return None
    if s.targets[0].kind != Kind.TENSOR:
        return None
    name, overload, args = call.op.name, call.op.overload, call.args
    op: FusedOp | None = None
    raw: tuple[Any, ...] = ()
    if overload == "Tensor" and name in ("add", "sub", "rsub") and len(args) == 3:
        if not _alpha_one(args[2]):
            return f"{name} with an alpha other than 1 is not in the fused set"
        op = _SUB if name != "add" else _ADD
        raw = (args[1], args[0]) if name == "rsub" else (args[0], args[1])
    elif overload == "Tensor" and name in ("mul", "div") and len(args) == 2:
        op, raw = (_MUL if name == "mul" else _DIV), tuple(args)
    elif overload == "" and name in _UNARY and len(args) == 1:
        op, raw = _UNARY[name], tuple(args)
    elif name == "gelu" and overload == "" and len(args) == 2:
        if not (isinstance(args[1], ir.Const) and args[1].value == "tanh"):
            return "gelu's erf form is not in the fused set (only approximate='tanh')"
        op, raw = _GELU_TANH, (args[0],)
    elif name in _COMPARE and overload in ("Tensor", "Scalar") and len(args) == 2:
        op, raw = _COMPARE[name], tuple(args)
    elif name == "where" and overload in ("self", "ScalarSelf", "ScalarOther") and len(args) == 3:
        op, raw = _WHERE, tuple(args)
    elif name == "where" and overload == "Scalar":
        return "a where of two numbers has the default dtype, which may change: not in the fused set"
    elif name == "to" and overload == "dtype" and len(args) == 5:
        dtype, memory_format = args[1], args[4]
        if not (isinstance(dtype, ir.Const) and dtype.value == torch.float32):
            return "a cast to another dtype than float32 is not in the fused set"
        if getattr(memory_format, "value", None) is not None:
            return "a cast with a memory format is not in the fused set"
        op, raw = _WIDEN, (args[0],)
    elif name == "pow" and overload == "Tensor_Scalar" and len(args) == 2:
        e = args[1]
        if not (isinstance(e, ir.Const) and e.kind in (Kind.INT, Kind.FLOAT) and e.value in _POWERS):
            return "pow is fused only for the exponents 2 and 3 (eager's products)"
        op, raw = _POWERS[int(e.value)], (args[0],)
    else:
        return None
    operands = tuple(_operand(a) for a in raw)
    bad = next((o for o in operands if isinstance(o, str)), None)
    if bad is not None:
        return f"{name} takes {bad}"
    if not any(isinstance(o, ir.Var) and o.kind == Kind.TENSOR for o in operands):
        return None
    return Node(s, op, operands, call)  # type: ignore[arg-type]


def one_op(call: ir.CallFunction, helpers: dict[str, ir.Helper]) -> ir.Call | None:
    """The op a helper's call makes, if its body is one op of its parameters and constants returned
    (through helpers of the same shape), with the call's arguments in place of the parameters."""
    h = helpers.get(call.symbol)
    if h is None or len(h.params) != len(call.args) or len(h.body) != 2:
        return None
    made, ret = h.body
    if not (isinstance(made, ir.Assign) and len(made.targets) == 1 and isinstance(ret, ir.Return)):
        return None
    if ret.values != made.targets:
        return None
    bound = {p.name: a for p, a in zip(h.params, call.args, strict=True)}

    def arg(a: Any) -> Any:
        if isinstance(a, ir.Var):
            return bound.get(a.name)  # None: a local of the helper (it made more than one op)
        if isinstance(a, ir.WrapNumber):
            inner = arg(a.value)
            return None if inner is None else ir.WrapNumber(inner)
        return a if isinstance(a, (ir.Const, ir.Default)) else None

    value = made.value
    if not isinstance(value, (ir.Call, ir.CallFunction)):
        return None
    args = tuple(arg(a) for a in value.args)
    if any(a is None for a in args):
        return None
    if isinstance(value, ir.CallFunction):
        return one_op(ir.CallFunction(value.symbol, args), helpers)
    return ir.Call(value.op, args)


def find_chains(
    block: tuple[ir.Stmt, ...],
    uses: dict[str, int],
    written: dict[str, int],
    helpers: dict[str, ir.Helper] | None = None,
) -> tuple[list[Chain], list[str]]:
    """The chains of one block (two ops or more), and why the element-wise ops left out of one stay out."""
    chains: list[Chain] = []
    reasons: list[str] = []
    run: list[Node] = []

    def flush() -> None:
        j = len(run) - 1
        while j >= 0:
            k = j
            while k > 0:
                t = run[k - 1].target
                reads = {o.name for n in run[k : j + 1] for o in n.operands if isinstance(o, ir.Var)}
                if uses.get(t.name, 0) == 1 and written.get(t.name, 0) == 1 and t.name in reads:
                    k -= 1
                else:
                    break
            while j >= k and (bad := _last_misplaced(run[k : j + 1])) is not None:
                if k + bad == j:
                    j -= 1  # the chain ends before it
                else:
                    k += bad + 1  # the chain starts after it
            if j - k >= 1:
                chains.append(_leaves(Chain(run[k : j + 1])))
            j = k - 1
        run.clear()

    for s in block:
        node = node_of(s, helpers)
        if isinstance(node, Node):
            run.append(node)
            continue
        if isinstance(node, str):
            reasons.append(f"line {s.line}: {node}")  # type: ignore[union-attr]
        flush()
    flush()
    return chains, reasons


def _last_misplaced(nodes: list[Node]) -> int | None:
    """The last node that cannot be in a chain of exactly `nodes`: a comparison that is not a where's
    condition there (the chain computes float32 alone), or a where whose condition is not one of them."""
    made = {n.target.name: n for n in nodes}
    bad = None
    for i, n in enumerate(nodes):
        if n.op.condition:
            reads = [
                (m.op, at)
                for m in nodes
                for at, o in enumerate(m.operands)
                if isinstance(o, ir.Var) and o.name == n.target.name
            ]
            if i == len(nodes) - 1 or any(op is not _WHERE or at != 0 for op, at in reads):
                bad = i
        elif n.op is _WHERE:
            cond = n.operands[0]
            if not (isinstance(cond, ir.Var) and cond.name in made and made[cond.name].op.condition):
                bad = i
    return bad


def _leaves(chain: Chain) -> Chain:
    made = {n.target.name for n in chain.nodes}
    for n in chain.nodes:
        for o in n.operands:
            if not isinstance(o, ir.Var) or o.name in made:
                continue
            into = chain.tensors if o.kind == Kind.TENSOR else chain.numbers
            if all(v.name != o.name for v in into):
                into.append(o)
    # A leaf only casts read may be bfloat16 (widened block by block), with the chain's shape.
    readers = {v.name: [n.op for n in chain.nodes if any(o == v for o in n.operands)] for v in chain.tensors}
    chain.widened = {name for name, ops in readers.items() if all(op is _WIDEN for op in ops)}
    chain.rows = _row_leaves(chain) - chain.widened
    return chain


def _row_leaves(chain: Chain) -> set[str]:
    """The tensor leaves that may be broadcast rows: every op reading a value that may then be smaller
    than the chain's shape (a row, or made from rows alone) computes each element where it lies.

    Where a position-dependent op reads a value made from leaves that could each be a row, the first of
    them (in the order the chain reads them) is taken to have the chain's shape: `sigmoid(h + b)`
    fuses with `b` a row, `sigmoid(b + h)` only where both have one shape.
    """
    by_target = {n.target.name: n for n in chain.nodes}
    order = [v.name for v in chain.tensors]
    rows = set(order)

    def small(name: str) -> bool:  # may be smaller than the chain's shape at some call
        node = by_target.get(name)
        if node is None:
            return name in rows
        return all(small(o.name) for o in node.operands if isinstance(o, ir.Var) and o.kind == Kind.TENSOR)

    def leaves_under(name: str) -> set[str]:
        node = by_target.get(name)
        if node is None:
            return {name}
        return {leaf for o in node.operands if isinstance(o, ir.Var) for leaf in leaves_under(o.name)}

    changed = True
    while changed:
        changed = False
        for n in chain.nodes:
            if not (n.op.position_dependent or n.op.block):
                continue
            for o in n.operands:
                if isinstance(o, ir.Var) and o.kind == Kind.TENSOR and small(o.name):
                    under = leaves_under(o.name)
                    rows.discard(next(name for name in order if name in under))
                    changed = True
    return rows


# ---- spelling ---------------------------------------------------------------------------------------------


def _float_literal(v: float | int) -> str:
    return f"static_cast<float>({cpp_literal(v, Kind.FLOAT if isinstance(v, float) else Kind.INT)})"


def chain_cpp(chain: Chain, name: str) -> list[str]:
    """The C++ function of one chain: its result, or an undefined tensor where a per-call check fails."""
    chain.name = name
    params = [f"const at::Tensor& ppy_in{i}" for i in range(len(chain.tensors))]
    params += [f"{'double' if v.kind == Kind.FLOAT else 'int64_t'} ppy_num{i}" for i, v in enumerate(chain.numbers)]
    tensor_index = {v.name: i for i, v in enumerate(chain.tensors)}
    number_index = {v.name: i for i, v in enumerate(chain.numbers)}
    out = [f"// {chain.describe()}"]
    out.append(f"static at::Tensor {name}({', '.join(params)}) {{")
    rows = [i for i, v in enumerate(chain.tensors) if v.name in chain.rows]
    widened = [i for i, v in enumerate(chain.tensors) if v.name in chain.widened]
    full = [i for i in range(len(chain.tensors)) if i not in rows and i not in widened]
    # Leaves that may be 0-dim (read as a Python number is): any but a lone leaf of the chain's shape,
    # which is the chain's shape itself.
    scalars = full if len(full) > 1 else []
    out.append("  if (!ppy::fused::capability_matches()) return at::Tensor();")
    if len(full) > 1:  # the chain's shape: a leaf that is never a row (the first with a shape), else the widest
        candidates = ", ".join(f"&ppy_in{i}" for i in full)
        lead = f"ppy::fused::first_shaped({{{candidates}}})"
    elif full:
        lead = f"ppy_in{full[0]}"
    elif widened:
        lead = f"ppy_in{widened[0]}"
    else:
        candidates = ", ".join(f"&ppy_in{i}" for i in rows)
        lead = f"ppy::fused::widest({{{candidates}}})"
    out.append(f"  const at::Tensor& ppy_lead = {lead};")
    if full or not widened:
        out.append("  if (!ppy::fused::operand_fits(ppy_lead)) return at::Tensor();")
    for i in scalars:
        out.append(f"  if (!ppy::fused::full_or_scalar(ppy_in{i}, ppy_lead.sizes())) return at::Tensor();")
    for i in rows:
        out.append(f"  if (!ppy::fused::row_fits(ppy_in{i}, ppy_lead.sizes())) return at::Tensor();")
    for i in widened:
        out.append(f"  if (!ppy::fused::widenable(ppy_in{i}, ppy_lead.sizes())) return at::Tensor();")
    for i, v in enumerate(chain.numbers):
        if v.kind == Kind.FLOAT:
            out.append(f"  if (std::isnan(ppy_num{i})) return at::Tensor();")
    out.append("  const int64_t n = ppy_lead.numel();")
    dependent = [nd.op for nd in chain.nodes if nd.op.position_dependent]
    grains = list(dict.fromkeys(f"ppy::fused::grain_of<ppy::fused::{op.struct}>(n)" for op in dependent))
    out.append(f"  const int64_t grain = {grains[0] if grains else 'at::internal::GRAIN_SIZE'};")
    for g in grains[1:]:
        out.append(f"  if (!ppy::fused::same_chunks(n, grain, {g})) return at::Tensor();")
    out.append("  at::Tensor ppy_result = at::empty(ppy_lead.sizes(), ppy_lead.options().dtype(at::kFloat));")
    out.append("  float* o = ppy_result.data_ptr<float>();")
    for i in range(len(chain.tensors)):
        if i not in widened:
            out.append(f"  const float* p{i} = ppy_in{i}.const_data_ptr<float>();")
    for i in rows:
        out.append(f"  const int64_t period{i} = ppy_in{i}.numel();")
    for i in scalars:  # a 0-dim leaf: a block of its value, read at every block
        out.append(f"  alignas(64) float z{i}[ppy::fused::kBlock];")
        out.append(f"  const bool scalar{i} = ppy_in{i}.dim() == 0;")
        out.append(f"  if (scalar{i}) ppy::fused::fill_scalar(z{i}, ppy_in{i});")
    for i in range(len(chain.numbers)):
        out.append(f"  const ppy::fused::Bcast b{i}{{static_cast<float>(ppy_num{i})}};")
    out.append("  ppy::fused::for_each_block(n, grain, ppy::fused::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {")
    for i in rows:  # a row operand's elements at this block's positions, repeated where it is broadcast
        out.append(f"    alignas(64) float r{i}[ppy::fused::kBlock];")
        out.append(f"    const float* q{i} = ppy::fused::row_at(r{i}, p{i}, period{i}, n, i, nv + nt);")
    for i in scalars:
        out.append(f"    const float* q{i} = scalar{i} ? z{i} : p{i} + i;")
    for i in widened:  # a cast leaf's values at this block's positions, as float32 (bfloat16 widened)
        out.append(f"    alignas(64) float w{i}[ppy::fused::kBlock];")
        out.append(f"    const float* q{i} = ppy::fused::widen_at(w{i}, ppy_in{i}, i, nv + nt);")
    moved = {*rows, *scalars, *widened}
    out += ["    " + line for line in _passes(chain, tensor_index, number_index, moved)]
    out.append("  });")
    out.append("  return ppy_result;")
    out.append("}")
    return out


def _passes(chain: Chain, tensor_index: dict[str, int], number_index: dict[str, int], moved: set[int]) -> list[str]:
    """The block body: register passes (map) between the block ops, each value stored where it must be."""
    by_target = {n.target.name: n for n in chain.nodes}
    root = chain.root.target.name
    # Stored values: the root, each block op's result, and the operand of each block op made in the chain.
    stored: dict[str, str] = {}
    buffers = 0
    for n in chain.nodes:
        needs = [n.target.name] if n.op.block else []
        needs += [o.name for o in n.operands if n.op.block and isinstance(o, ir.Var) and o.name in by_target]
        for name in needs:
            if name not in stored:
                stored[name] = "o + i" if name == root else f"m{buffers}"
                if name != root:
                    buffers += 1
    stored[root] = "o + i"
    lines = [f"alignas(64) float m{b}[ppy::fused::kBlock];" for b in range(buffers)]

    def leaf(o: Any, args: list[str]) -> str:
        """The lambda's parameter for a leaf (adding it to `args`), or a constant."""
        if isinstance(o, Number):
            return f"T({_float_literal(o.value)})"
        if o.name in tensor_index:
            src = _leaf_at(tensor_index[o.name], moved)
        elif o.name in number_index:
            src = f"b{number_index[o.name]}"
        else:  # a stored value of the chain
            src = f"static_cast<const float*>({stored[o.name]})"
        if src not in args:
            args.append(src)
        return f"a{args.index(src)}"

    def value(o: Any, args: list[str], top: bool) -> str:
        if isinstance(o, ir.Var) and o.name in by_target and (top or o.name not in stored):
            n = by_target[o.name]
            return f"ppy::fused::{n.op.struct}::apply({', '.join(value(x, args, False) for x in n.operands)})"
        return leaf(o, args)

    for n in chain.nodes:
        name = n.target.name
        if n.op.block:
            (operand,) = n.operands
            src = stored[operand.name] if operand.name in stored else _leaf_at(tensor_index[operand.name], moved)
            lines.append(f"ppy::fused::{n.op.struct}::block({stored[name]}, {src}, nv + nt);")
        elif name in stored:
            args: list[str] = []
            body = value(n.target, args, True)
            params = ", ".join(f"auto a{k}" for k in range(len(args)))
            lines.append(f"ppy::fused::map({stored[name]}, nv, nt, [&]({params}) {{")
            lines.append("  using T = decltype(a0);")
            lines.append(f"  return {body};")
            lines.append(f"}}, {', '.join(args)});")
    return lines


def _leaf_at(k: int, moved: set[int]) -> str:
    """Tensor leaf k at the block's positions: its data, or (a row, a 0-dim leaf) the block made for it."""
    return f"q{k}" if k in moved else f"p{k} + i"


def call_cpp(chain: Chain) -> str:
    """The region's call of a chain's function (an undefined tensor where its checks fail)."""
    args = [NAME(v) for v in chain.tensors]
    args += [f"static_cast<{'double' if v.kind == Kind.FLOAT else 'int64_t'}>({NAME(v)})" for v in chain.numbers]
    return f"{chain.name}({', '.join(args)})"


def capability() -> str:
    return torch.backends.cpu.get_cpu_capability()


def available() -> bool:
    """Whether this machine's eager kernels are the ones ``ppy_fused.h`` restates (x86-64, AVX512)."""
    return capability() == "AVX512"
