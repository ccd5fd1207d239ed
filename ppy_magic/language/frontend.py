"""Front end: the Python source of one ``@ppy.opt`` function -> ``ir.Function``.

The visitor is its own whitelist: each supported AST node has a ``visit_<Node>``;
anything else reaches ``generic_visit`` and becomes a located ``CompileError``.
Expressions evaluate to *values*: runtime atoms (``ir.Var``/``ir.Const``),
tuples known at compile time (``ir.Tup``) or Python objects known at compile
time (``Static``: modules, functions, dtypes). Nested expressions are flattened
into temporaries in Python's evaluation order, so the C++ makes the same ATen
calls in the same order as eager.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import CompileError, debug
from . import ir, ops
from .calls import CallCompiler
from .expressions import ExpressionCompiler
from .namespace import Globals, static_value
from .values import (
    ANNOTATIONS,
    HINTS,
    RAISABLE_ERRORS,
    SYMBOLS,
    UNBOUND,
    StarredRest,
    Unbound,
    Unsupported,
    atoms_of,
    describe_node,
    is_literal,
    location,
    structure_of,
)

# ---- the compiler ------------------------------------------------------------------------


@dataclass
class Context:
    """State shared by a region and every callee compiled into it."""

    helpers: list[ir.Helper] = field(default_factory=list)
    specialised: dict[Any, tuple[str, Any, tuple[str, ...]]] = field(default_factory=dict)
    stack: list[str] = field(default_factory=list)  # callees being compiled, for recursion
    frozen: dict[str, Any] = field(default_factory=dict)
    result_types: list[Any] = field(default_factory=list)
    source_lines: dict[int, str] = field(default_factory=dict)


class FunctionCompiler(ExpressionCompiler, CallCompiler, ast.NodeVisitor):
    """Turns one FunctionDef into statements; raises CompileError otherwise."""

    def __init__(
        self,
        fn: ast.FunctionDef,
        g: Globals,
        filename: str,
        source_lines: list[str],
        ctx: Context,
        *,
        region_name: str,
        adapter: bool = False,
        helper: bool = False,
    ):
        self.fn = fn
        self.g = g
        self.filename = filename
        self.source_lines = source_lines
        self.ctx = ctx
        self.region_name = region_name
        self.adapter = adapter
        self.helper = helper
        self.locals: dict[str, Any] = {}
        self.body: list[ir.Stmt] = []
        self.used: set[str] = set()
        self.returns: list[tuple[str, Any]] = []  # (spec, structure) of each return
        self.terminated = False
        self._stmt: ast.stmt | None = None

    # -- errors ------------------------------------------------------------------
    def error(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        if self.adapter:  # never point into this package's files
            return CompileError(message, None, hint, self.region_name)
        src = self.source_lines[node.lineno - 1] if 0 < node.lineno <= len(self.source_lines) else None
        return CompileError(message, location(node, self.filename), hint, self.region_name, src)

    def visit(self, node: ast.AST) -> Any:
        try:
            return super().visit(node)
        except (CompileError, Unsupported):
            raise
        except ops.ResolveError as exc:
            raise self.error(node, str(exc)) from None
        except Exception as exc:  # a bug here must not hide where the user's code is
            if debug():
                raise
            raise self.error(node, f"cannot compile this ({type(exc).__name__}: {exc})") from None

    def generic_visit(self, node: ast.AST) -> Any:
        hint = HINTS.get(type(node).__name__, "Keep this function to tensor operations, or leave it Python.")
        raise self.error(node, f"{describe_node(node)} is not supported in a region", hint)

    # -- naming and emitting -------------------------------------------------------
    def new_var(self, base: str, kind: str, temp: bool = False) -> ir.Var:
        base = base.strip("_") or "t"
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return ir.Var(name, kind, temp)

    def line(self) -> int:
        node = self._stmt
        return node.lineno if node is not None and not self.adapter else 0

    def emit(self, stmt: ir.Stmt) -> None:
        self.body.append(stmt)

    def assign(self, value: ir.Expr, kind: str, base: str = "t") -> ir.Var:
        var = self.new_var(base, kind, temp=base == "t")
        self.emit(ir.Assign((var,), value, self.line()))
        return var

    def cpp(self, template: str, kind: str, *args: ir.Atom) -> ir.Var:
        return self.assign(ir.Cpp(template, tuple(args)), kind)

    # -- statements -----------------------------------------------------------------
    def compile_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if self.terminated:
                return  # unreachable, as in Python (e.g. after a branch decided at compile time)
            outer, self._stmt = self._stmt, stmt
            try:
                self.visit(stmt)
            finally:
                self._stmt = outer

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # a docstring or a string used as a comment
        if isinstance(node.value, ast.Call) and self._is_effect_call(node.value):
            self.value(node.value)  # an in-place method: evaluated for its effect
            return None
        raise self.error(node, f"{describe_node(node)} is not supported in a region", HINTS["Expr"])

    def _is_effect_call(self, call: ast.Call) -> bool:
        f = call.func
        return isinstance(f, ast.Attribute) and f.attr.endswith("_") and not f.attr.endswith("__")

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.value(node.value)
        for target in node.targets:
            self.bind_target(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.error(node, "a bare annotation is not supported in a region")
        self.bind_target(node.target, self.value(node.value))

    def bind_target(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.locals[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.unpack(target, value)
        elif isinstance(target, ast.Subscript):
            self.setitem(target, value)
        else:
            raise self.error(target, f"assigning to {describe_node(target)} is not supported in a region")

    def unpack(self, target: ast.Tuple | ast.List, value: Any) -> None:
        starred = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
        n = len(target.elts)
        items = self.sequence_items(target, value, n - len(starred), bool(starred))
        if starred and any(isinstance(i, StarredRest) for i in items):  # run-time length: sliced already
            for t, v in zip(target.elts, items):
                self.bind_target(
                    t.value if isinstance(t, ast.Starred) else t, v.value if isinstance(v, StarredRest) else v
                )
        elif starred:
            s = starred[0]
            after = n - s - 1
            head, mid, tail = items[:s], items[s : len(items) - after], items[len(items) - after :]
            for t, v in zip(target.elts[:s], head):
                self.bind_target(t, v)
            self.bind_target(target.elts[s].value, ir.Tup(tuple(mid)))
            for t, v in zip(target.elts[s + 1 :], tail):
                self.bind_target(t, v)
        else:
            for t, v in zip(target.elts, items):
                self.bind_target(t, v)

    def sequence_items(self, node: ast.AST, value: Any, want: int, starred: bool) -> list[Any]:
        """The items of a value being unpacked, checking its length as Python would."""
        if isinstance(value, ir.Tup):
            have = len(value.items)
            if (have < want) or (have > want and not starred):
                raise self.error(node, f"unpacking {have} values into {want} names fails in Python too")
            return list(value.items)
        kind = getattr(value, "kind", None)
        if kind in (ir.INTS, ir.TENSORS):
            size = self.cpp("static_cast<int64_t>({0}.size())", ir.INT, value)
            self.emit(
                ir.Effect(
                    ir.Cpp(f"ppy::check_unpack({{0}}, {want}, {'true' if starred else 'false'})", (size,)), self.line()
                )
            )
            item_kind = ir.INT if kind == ir.INTS else ir.TENSOR
            if not starred:
                return [self.cpp(f"{{0}}[{i}]", item_kind, value) for i in range(want)]
            if kind != ir.INTS:
                raise self.error(node, "starred unpacking of a list of tensors is not supported in a region")
            s = next(i for i, e in enumerate(node.elts) if isinstance(e, ast.Starred))
            after = want - s
            head = [self.cpp(f"{{0}}[{i}]", ir.INT, value) for i in range(s)]
            mid = self.cpp(
                f"ppy::seq_slice({{0}}, c10::optional<int64_t>({s}), "
                f"c10::optional<int64_t>({{1}} - {after}), c10::optional<int64_t>())",
                ir.INTS,
                value,
                size,
            )
            tail = [self.cpp(f"{{0}}[{{1}} - {after - i}]", ir.INT, value, size) for i in range(after)]
            return head + [StarredRest(mid)] + tail
        raise self.error(node, f"cannot unpack {ops.describe(value)} in a region")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        target = node.target
        if isinstance(target, ast.Name):
            current = self.value(target)
            rhs = self.value(node.value)
            self.locals[target.id] = self.augmented(node, current, rhs)
        elif isinstance(target, ast.Subscript):
            base = self.value(target.value)
            index = self.index_items(target.slice)
            current = self.getitem(target, base, index)
            rhs = self.value(node.value)
            self.store_item(target, base, index, self.augmented(node, current, rhs))
        else:
            raise self.error(target, f"augmented assignment to {describe_node(target)} is not supported")

    def augmented(self, node: ast.AugAssign, current: Any, rhs: Any) -> Any:
        if getattr(current, "kind", None) == ir.TENSOR:
            name = ops.INPLACE_BINOPS.get(type(node.op))
            if name is None:
                raise self.error(node, f"`{SYMBOLS.get(type(node.op), '?')}=` on a tensor is not supported")
            self.call_op(
                node, ops.OpSpec(name), [current, rhs], {}, method=True, display=f"Tensor {SYMBOLS[type(node.op)]}="
            )
            return current  # in place: the same tensor
        return self.binop(node, node.op, current, rhs)

    def visit_Return(self, node: ast.Return) -> None:
        value = self.value(node.value) if node.value is not None else ir.Const(None, ir.NONE)
        if self.helper:  # the caller knows the static parts; only runtime atoms cross
            self.returns.append(("helper", structure_of(value)))
            self.emit(ir.Return(tuple(a for a in atoms_of(value) if isinstance(a, ir.Var)), "helper", self.line()))
        else:
            atoms: list[ir.Atom] = []
            spec = self.return_spec(node, value, atoms)
            self.returns.append((spec, structure_of(value)))
            self.emit(ir.Return(tuple(atoms), spec, self.line()))
        self.terminated = True

    def return_spec(self, node: ast.AST, value: Any, atoms: list[ir.Atom]) -> str:
        if isinstance(value, ir.Tup):
            inner = "".join(self.return_spec(node, v, atoms) for v in value.items)
            if value.structseq is not None:
                if value.structseq not in self.ctx.result_types:
                    self.ctx.result_types.append(value.structseq)
                return f"R{self.ctx.result_types.index(value.structseq)}({inner})"
            return f"({inner})"
        kind = getattr(value, "kind", None)
        if kind in (ir.TENSOR, ir.FLOAT, ir.INT, ir.BOOL):
            atoms.append(value)
            return kind
        if kind == ir.NONE:
            return "N"
        if kind == ir.TENSORS:
            atoms.append(value)
            return "V"
        if kind == ir.INTS:
            atoms.append(value)
            return "S"
        raise self.error(
            node, f"a region cannot return {ops.describe(value)}", "Return tensors, numbers, or tuples of them."
        )

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if not (
            isinstance(exc, ast.Call)
            and isinstance(exc.func, ast.Name)
            and exc.func.id in RAISABLE_ERRORS
            and len(exc.args) <= 1
            and not exc.keywords
        ):
            raise self.error(node, 'only `raise ValueError("message")` and the like are supported in a region')
        message = self.message(exc.args[0]) if exc.args else ""
        self.emit(ir.Raise(exc.func.id, message, self.line()))
        self.terminated = True

    def message(self, node: ast.expr) -> Any:
        """An error message: a str, or a string atom built at run time from an f-string."""
        value = self.value(node)
        if isinstance(value, ir.Const) and value.kind == ir.STR:
            return value.value
        if isinstance(value, ir.Var) and value.kind == ir.STR:
            return value
        raise self.error(node, "an error message must be a string")

    def visit_Assert(self, node: ast.Assert) -> None:
        test = self.truth(node.test)
        message = self.message(node.msg) if node.msg is not None else ""
        if isinstance(test, ir.Const):
            if not test.value:
                self.emit(ir.Raise("AssertionError", message, self.line()))
                self.terminated = True
            return
        self.emit(ir.If(test, (), (ir.Raise("AssertionError", message, self.line()),), self.line()))

    def visit_If(self, node: ast.If) -> None:
        narrowed = self.narrowing(node.test)
        test = self.truth(node.test)
        if isinstance(test, ir.Const):  # decided at compile time: only the taken branch exists
            self.compile_body(node.body if test.value else node.orelse)
            return
        self.branch(node, test, node.body, node.orelse, narrowed)

    def narrowing(self, test: ast.expr) -> tuple[str, bool] | None:
        """`x is None` / `x is not None` on a Tensor-or-None name: (name, branch where it is a Tensor)."""
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.left, ast.Name)
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            value = self.locals.get(test.left.id)
            if getattr(value, "kind", None) == ir.OPT_TENSOR:
                return test.left.id, isinstance(test.ops[0], ast.IsNot)
        return None

    def branch(
        self,
        node: ast.AST,
        test: ir.Atom,
        then: list[ast.stmt],
        orelse: list[ast.stmt],
        narrowed: tuple[str, bool] | None = None,
    ) -> None:
        before = dict(self.locals)
        outs = []
        for stmts, which in ((then, True), (orelse, False)):
            self.locals = dict(before)
            saved_body, self.body = self.body, []
            saved_term, self.terminated = self.terminated, False
            if narrowed is not None and narrowed[1] == which:
                opt = self.locals[narrowed[0]]
                self.locals[narrowed[0]] = self.cpp("(*{0})", ir.TENSOR, opt)
            self.compile_body(stmts)
            outs.append((self.body, self.locals, self.terminated))
            self.body, self.terminated = saved_body, saved_term
        (then_body, then_locals, then_term), (else_body, else_locals, else_term) = outs
        merged = self.merge(node, before, [(then_locals, then_term, then_body), (else_locals, else_term, else_body)])
        self.emit(ir.If(test, tuple(then_body), tuple(else_body), self.line()))
        self.locals = merged
        self.terminated = then_term and else_term

    def merge(self, node: ast.AST, before: dict, branches: list[tuple[dict, bool, list]]) -> dict:
        """Locals after branches join: a name bound differently becomes one declared variable."""
        live = [(locs, body) for locs, term, body in branches if not term]
        if not live:
            return dict(before)
        if len(live) == 1:
            return dict(live[0][0])
        names = set().union(*(locs.keys() for locs, _ in live))
        merged = {}
        for name in names:
            vals = [locs.get(name, UNBOUND) for locs, _ in live]
            if all(v is vals[0] or v == vals[0] for v in vals):
                merged[name] = vals[0]
                continue
            if any(v is UNBOUND for v in vals):
                merged[name] = Unbound(name)
                continue
            joined = self.join(node, name, vals, [body for _, body in live])
            merged[name] = joined
        return merged

    def join(self, node: ast.AST, name: str, vals: list, bodies: list[list]) -> Any:
        first = vals[0]
        if isinstance(first, ir.Tup):
            if not all(isinstance(v, ir.Tup) and len(v.items) == len(first.items) for v in vals):
                return Unbound(name, "it is a tuple of different lengths in different branches")
            return ir.Tup(
                tuple(self.join(node, name, [v.items[i] for v in vals], bodies) for i in range(len(first.items)))
            )
        kinds = {getattr(v, "kind", None) for v in vals}
        if len(kinds) > 1 and kinds <= {ir.NONE, ir.TENSOR, ir.OPT_TENSOR}:
            kinds = {ir.OPT_TENSOR}  # a tensor on one path, None on another
        if len(kinds) != 1 or None in kinds or ir.NONE in kinds or ir.OPAQUE in kinds:
            return Unbound(name, "it has different kinds of value in different branches")
        var = self.new_var(name, kinds.pop())
        self.emit(ir.Declare(var, self.line()))
        for v, body in zip(vals, bodies):
            body.append(ir.Move(var, v, self.line()))
        return var

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported in a region")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "a region loops as `for i in range(...)` over one name")
        it = node.iter
        if not (
            isinstance(it, ast.Call)
            and static_value(it.func, self.g) is range
            and not it.keywords
            and 1 <= len(it.args) <= 3
        ):
            raise self.error(
                it,
                "a region can only loop over range(...)",
                "Loop over range(n) with int bounds, or keep this function Python.",
            )
        bounds = [self.value(a) for a in it.args]
        for a, b in zip(it.args, bounds):
            if getattr(b, "kind", None) not in (ir.INT, ir.BOOL):
                raise self.error(a, f"range() needs ints, got {ops.describe(b)}")
        start, stop, step = (
            (ir.Const(0, ir.INT), bounds[0], ir.Const(1, ir.INT))
            if len(bounds) == 1
            else (bounds[0], bounds[1], ir.Const(1, ir.INT))
            if len(bounds) == 2
            else tuple(bounds)
        )
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(it, "range() arg 3 must not be zero")
        if not isinstance(step, ir.Const):
            self.emit(ir.Effect(ir.Cpp("ppy::check_range_step({0})", (step,)), self.line()))
        # Names the body rebinds that already hold values become loop-carried variables.
        assigned = {
            n.id
            for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        carried: dict[str, ir.Var] = {}
        for name in sorted(assigned):
            if name in self.locals and name != node.target.id:
                carried[name] = self.carry(node, name, self.locals[name])
        before = dict(self.locals)
        loop_var = self.new_var(node.target.id, ir.INT)
        saved_body, self.body = self.body, []
        self.locals = dict(before)
        for name, var in carried.items():
            self.locals[name] = var
        self.locals[node.target.id] = loop_var
        self.compile_body(node.body)
        if self.terminated:
            raise self.error(node, "`return` inside a loop is not supported in a region")
        for name, var in carried.items():
            self.store_carried(node, name, var, self.locals.get(name, UNBOUND))
        body, self.body = self.body, saved_body
        self.emit(ir.For(loop_var, start, stop, step, tuple(body), self.line()))
        after = dict(before)
        for name, var in carried.items():
            after[name] = var
        for name in assigned - set(carried):
            after[name] = Unbound(name, "it is only bound inside the loop, which may run zero times")
        after[node.target.id] = Unbound(
            node.target.id, "the loop variable is undefined after a loop that may run zero times"
        )
        self.locals = after

    def carry(self, node: ast.AST, name: str, value: Any) -> Any:
        if isinstance(value, ir.Tup):
            return ir.Tup(tuple(self.carry(node, name, v) for v in value.items))
        kind = getattr(value, "kind", None)
        if kind in (None, ir.NONE, ir.OPAQUE):
            return value  # static: must stay the same through the loop
        var = self.new_var(name, kind)
        self.emit(ir.Declare(var, self.line()))
        self.emit(ir.Move(var, value, self.line()))
        return var

    def store_carried(self, node: ast.AST, name: str, var: Any, value: Any) -> None:
        if isinstance(var, ir.Tup):
            if not (isinstance(value, ir.Tup) and len(value.items) == len(var.items)):
                raise self.error(node, f"'{name}' changes shape inside the loop")
            for a, b in zip(var.items, value.items):
                self.store_carried(node, name, a, b)
            return
        if not isinstance(var, ir.Var):
            if not (value is var or value == var):
                raise self.error(node, f"'{name}' changes a compile-time value inside the loop")
            return
        if getattr(value, "kind", None) != var.kind:
            raise self.error(
                node, f"'{name}' changes kind inside the loop ({ir.KIND_NAMES[var.kind]} -> {ops.describe(value)})"
            )
        if value != var:
            self.emit(ir.Move(var, value, self.line()))


# ---- entry point -------------------------------------------------------------------------------


def _param_kind(compiler: FunctionCompiler, arg: ast.arg, default: ast.expr | None) -> str:
    ann = arg.annotation
    if ann is None:
        if default is not None and isinstance(default, ast.Constant) and default.value is None:
            return ir.OPT_TENSOR
        return ir.TENSOR  # documented: unannotated parameters are tensors
    obj = static_value(ann, compiler.g)
    if obj is torch.Tensor or obj is torch.nn.Parameter:
        return ir.TENSOR
    if obj in (float, int, bool, str):
        return ANNOTATIONS[obj.__name__]
    if obj is list:
        return ir.TENSORS
    text = ast.unparse(ann).replace(" ", "")
    if text in (
        "Tensor|None",
        "torch.Tensor|None",
        "Optional[Tensor]",
        "Optional[torch.Tensor]",
        "typing.Optional[torch.Tensor]",
        "None|torch.Tensor",
        "None|Tensor",
    ):
        return ir.OPT_TENSOR
    if text in (
        "list[torch.Tensor]",
        "List[torch.Tensor]",
        "list[Tensor]",
        "List[Tensor]",
        "tuple[torch.Tensor,...]",
        "Sequence[torch.Tensor]",
    ):
        return ir.TENSORS
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str) and ann.value in ANNOTATIONS:
        return ANNOTATIONS[ann.value]
    raise compiler.error(
        ann,
        f"parameter '{arg.arg}' has an annotation a region does not understand",
        "Annotate parameters as torch.Tensor, float, int, bool, str, torch.Tensor | None or list[torch.Tensor].",
    )


def compile_function(
    fn: ast.FunctionDef, g: Globals, filename: str, source_lines: list[str], level: int
) -> ir.Function:
    ctx = Context()
    comp = FunctionCompiler(fn, g, filename, source_lines, ctx, region_name=fn.name)
    a = fn.args
    if a.vararg or a.kwarg:
        raise comp.error(fn, "*args and **kwargs are not supported in a region", "Name every parameter.")
    if a.kwonlyargs or a.posonlyargs:
        raise comp.error(
            fn,
            "keyword-only and positional-only parameters are not supported in a region",
            "Use plain positional parameters.",
        )
    params = []
    defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(a.args, defaults):
        kind = _param_kind(comp, arg, default)
        value, has_default = None, default is not None
        if has_default:
            if not is_literal(default):
                raise comp.error(default, "a default value must be a literal in a region")
            value = ast.literal_eval(default)
            ok = {ir.FLOAT: float, ir.INT: int, ir.BOOL: bool, ir.STR: str}.get(kind)
            if not ((ok is not None and type(value) is ok) or (kind == ir.OPT_TENSOR and value is None)):
                raise comp.error(
                    default,
                    f"default {value!r} does not match the parameter's annotation",
                    "Give float parameters float defaults (1.0, not 1).",
                )
        var = comp.new_var(arg.arg, kind)
        comp.locals[arg.arg] = var
        params.append(ir.Param(var.name, kind, value, has_default))
    try:
        comp.compile_body(fn.body)
    except Unsupported as exc:
        raise comp.error(fn, str(exc)) from None
    if not comp.terminated:
        raise comp.error(fn, "a region must end with `return`", "Return the result tensor(s).")
    specs = {s for s, _ in comp.returns}
    if len(specs) != 1:
        raise comp.error(
            fn,
            "the function returns different kinds of value on different paths",
            "Return the same structure (e.g. one tensor) everywhere.",
        )
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    lines = {
        ln: source_lines[ln - 1].strip()
        for ln in range(fn.lineno, (fn.end_lineno or fn.lineno) + 1)
        if 0 < ln <= len(source_lines)
    }
    lines.update(ctx.source_lines)
    return ir.Function(
        name=fn.name,
        qualname=fn.name,
        params=tuple(params),
        body=tuple(comp.body),
        level=level,
        filename=filename,
        first_line=first,
        def_line=fn.lineno,
        ret=specs.pop(),
        helpers=tuple(ctx.helpers),
        result_types=tuple(ctx.result_types),
        source_lines=lines,
        frozen_globals=dict(ctx.frozen),
    )
