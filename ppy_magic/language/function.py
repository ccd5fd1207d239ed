"""The compiler of one function: its state, naming and emitting, errors, nested blocks.

``FunctionCompiler`` is an ``ast.NodeVisitor`` that is its own whitelist: each
supported node has a ``visit_<Node>`` (statements in ``statements.py``,
expressions in ``expressions.py`` and ``indexing.py``, calls in ``calls.py``);
anything else reaches ``generic_visit`` and becomes a located ``CompileError``.
Expressions evaluate to *values*: runtime atoms (``ir.Var``/``ir.Const``),
tuples known at compile time (``ir.Tup``) or Python objects known at compile
time (``Static``). Nested expressions are flattened into temporaries in Python's
evaluation order, so a region makes the same ATen calls in the same order as
eager. A callee (another ``@ppy.opt`` function, an adapter) is compiled by a new
compiler of the same class, sharing the region's ``Context``.

``translate`` runs a compiler over a function the front door (``frontend.py``)
has already accepted.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import CompileError, Location, debug
from . import ir, ops
from .calls import CallCompiler
from .expressions import ExpressionCompiler
from .indexing import IndexCompiler
from .ir import Kind
from .lists import ListCompiler, RuntimeListNeeded
from .loops import LoopCompiler, LoopFrame, _Widen
from .modules import LayoutBuilder, ModuleCompiler, freeze_plan
from .namespace import Globals, function_key, static_value
from .statements import StatementCompiler
from .values import ANNOTATIONS, HINTS, ModuleValue, Unsupported, describe_node, is_literal

# ---- located errors ------------------------------------------------------------------------------


def location(node: ast.AST, filename: str, lines: Sequence[str] = ()) -> Location:
    """Where `node` is, with the span a caret marks: the whole node, or the rest of its first line
    when it spans several lines (a `def`, a `while`)."""
    end = None
    if getattr(node, "end_lineno", None) == node.lineno:
        end = getattr(node, "end_col_offset", None)
    elif 0 < node.lineno <= len(lines):
        end = len(lines[node.lineno - 1].rstrip())
    return Location(filename, node.lineno, node.col_offset, end)


def located_error(
    node: ast.AST,
    message: str,
    hint: str | None,
    *,
    filename: str,
    lines: Sequence[str],
    function: str | None,
) -> CompileError:
    """A CompileError at `node`: ``at L:C:``, the source line and a caret under the node."""
    src = lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else None
    return CompileError(message, location(node, filename, lines), hint, function, src)


# ---- the compiler ------------------------------------------------------------------------------


@dataclass
class Context:
    """State shared by a region and every callee compiled into it."""

    helpers: list[ir.Helper] = field(default_factory=list)
    specialised: dict[Any, tuple[str, Any, tuple[Kind, ...]]] = field(default_factory=dict)
    stack: list[str] = field(default_factory=list)  # callees being compiled, for recursion
    frozen: dict[str, Any] = field(default_factory=dict)
    result_types: list[Any] = field(default_factory=list)
    source_lines: dict[int, str] = field(default_factory=dict)
    classes: Any = None  # classes.Classes of the region's source
    layouts: list[LayoutBuilder] = field(default_factory=list)  # what the runtime reads of modules
    layout_index: dict[Any, LayoutBuilder] = field(default_factory=dict)
    root: Any = None  # the region's own definition (recursion)
    filename: str = ""  # the region's source file
    list_kinds: dict[Any, Kind] = field(default_factory=dict)  # list displays that must be run-time lists


@dataclass
class Block:
    """What a nested block left: its statements, its locals, and whether it ended in return/raise."""

    body: list[ir.Stmt] = field(default_factory=list)
    locals: dict[str, Any] = field(default_factory=dict)
    terminated: bool = False


class FunctionCompiler(
    StatementCompiler,
    LoopCompiler,
    ListCompiler,
    ExpressionCompiler,
    IndexCompiler,
    CallCompiler,
    ModuleCompiler,
    ast.NodeVisitor,
):
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
        self.loops: list[LoopFrame] = []  # the loops around the statement being compiled
        self.runtime_returns = False  # a helper whose paths return a constant and a value of one kind
        # variables holding a list parameter or a slice of one: a list or a tuple, as the caller passed it
        self.param_vars: set[str] = set()

    @property
    def classes(self) -> Any:
        return self.ctx.classes

    # -- errors ------------------------------------------------------------------
    def error(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        if self.adapter:  # never point into this package's files
            return CompileError(message, None, hint, self.region_name)
        return located_error(
            node, message, hint, filename=self.filename, lines=self.source_lines, function=self.region_name
        )

    def visit(self, node: ast.AST) -> Any:
        try:
            return super().visit(node)
        except (CompileError, Unsupported, RuntimeListNeeded, _Widen):
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
    def new_var(self, base: str, kind: Kind, temp: bool = False) -> ir.Var:
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

    def assign(self, value: ir.Expr, kind: Kind, base: str = "t") -> ir.Var:
        var = self.new_var(base, kind, temp=base == "t")
        self.emit(ir.Assign((var,), value, self.line()))
        return var

    def intrinsic(self, name: str, kind: Kind, *args: ir.Atom) -> ir.Var:
        """A temporary of `kind` set from intrinsic `name` (one of ``ir.INTRINSICS``)."""
        return self.assign(ir.Intrinsic(name, tuple(args)), kind)

    def check(self, name: str, *args: ir.Atom) -> None:
        """Run intrinsic `name` for its effect: a check that raises as Python would."""
        self.emit(ir.Effect(ir.Intrinsic(name, tuple(args)), self.line()))

    # -- blocks ------------------------------------------------------------------------
    @contextmanager
    def block(self, locals: dict[str, Any] | None = None) -> Iterator[Block]:
        """A nested block (a branch, a loop body, the lazy side of `and`): its statements go into a
        new body and its names bind in a copy of the locals (or of `locals`); the enclosing body,
        locals and `terminated` come back afterwards. The Block says what the nested one left."""
        saved = (self.body, self.locals, self.terminated)
        out = Block()
        self.body, self.locals, self.terminated = out.body, dict(self.locals if locals is None else locals), False
        try:
            yield out
        finally:
            out.body, out.locals, out.terminated = self.body, self.locals, self.terminated
            self.body, self.locals, self.terminated = saved

    def compile_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if self.terminated:
                return  # unreachable, as in Python (e.g. after a branch decided at compile time)
            outer, self._stmt = self._stmt, stmt
            try:
                self.visit(stmt)
            finally:
                self._stmt = outer


# ---- one function -> ir.Function ------------------------------------------------------------------

_OPTIONAL_TENSOR = frozenset(
    {
        "Tensor|None",
        "torch.Tensor|None",
        "Optional[Tensor]",
        "Optional[torch.Tensor]",
        "typing.Optional[torch.Tensor]",
        "None|torch.Tensor",
        "None|Tensor",
    }
)
_TENSOR_LIST = frozenset(
    {
        "list[torch.Tensor]",
        "List[torch.Tensor]",
        "list[Tensor]",
        "List[Tensor]",
        "tuple[torch.Tensor,...]",
        "Sequence[torch.Tensor]",
    }
)
_DEFAULT_TYPES = {Kind.FLOAT: float, Kind.INT: int, Kind.BOOL: bool, Kind.STR: str}


def _param_kind(compiler: FunctionCompiler, arg: ast.arg, default: ast.expr | None) -> Kind:
    ann = arg.annotation
    if ann is None:
        if default is not None and isinstance(default, ast.Constant) and default.value is None:
            return Kind.OPT_TENSOR
        return Kind.TENSOR  # documented: unannotated parameters are tensors
    obj = static_value(ann, compiler.g)
    if obj is torch.Tensor or obj is torch.nn.Parameter:
        return Kind.TENSOR
    if obj in (float, int, bool, str):
        return ANNOTATIONS[obj.__name__]
    if obj is list:
        return Kind.TENSORS
    text = ast.unparse(ann).replace(" ", "")
    if text in _OPTIONAL_TENSOR:
        return Kind.OPT_TENSOR
    if text in _TENSOR_LIST:
        return Kind.TENSORS
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str) and ann.value in ANNOTATIONS:
        return ANNOTATIONS[ann.value]
    raise compiler.error(
        ann,
        f"parameter '{arg.arg}' has an annotation a region does not understand",
        "Annotate parameters as torch.Tensor, float, int, bool, str, torch.Tensor | None or list[torch.Tensor].",
    )


def classes_of(g: Globals, filename: str, source_lines: list[str]) -> Any:
    """The class models of one source, made once (``classes.Classes``)."""
    from .classes import Classes

    found = g.cache.get("classes")
    if found is None:
        found = g.cache["classes"] = Classes(g, filename, source_lines)
    return found


def translate(
    fn: ast.FunctionDef,
    g: Globals,
    filename: str,
    source_lines: list[str],
    level: int,
    owner: ast.ClassDef | None = None,
) -> ir.Function:
    """The IR of a function the front door accepted (plain positional parameters, no decorators
    but @ppy.opt, not async, no generator); CompileError if its body is outside the language.
    A method (`owner` is its class) reads its first parameter's attributes through the plan.

    A list the body changes is learnt while compiling (``RuntimeListNeeded``): the function is
    compiled again with that list made a run-time list from the start."""
    list_kinds: dict[Any, Kind] = {}
    while True:
        try:
            return _translate(fn, g, filename, source_lines, level, owner, list_kinds)
        except RuntimeListNeeded as need:
            if need.key in list_kinds or len(list_kinds) > 256:
                raise located_error(
                    need.node,
                    "this list holds items of different kinds",
                    "A region keeps a changing list of tensors, of ints or of floats.",
                    filename=filename,
                    lines=source_lines,
                    function=fn.name,
                ) from None
            list_kinds[need.key] = need.kind


def _translate(
    fn: ast.FunctionDef,
    g: Globals,
    filename: str,
    source_lines: list[str],
    level: int,
    owner: ast.ClassDef | None,
    list_kinds: dict,
) -> ir.Function:
    from .classes import ClassRef, ModType

    ctx = Context(classes=classes_of(g, filename, source_lines), root=fn, filename=filename, list_kinds=list_kinds)
    comp = FunctionCompiler(fn, g, filename, source_lines, ctx, region_name=fn.name)
    a = fn.args
    params = []
    param_layouts = []
    defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    for i, (arg, default) in enumerate(zip(a.args, defaults, strict=True)):
        if owner is not None and i == 0:
            ref = ClassRef(owner.name, None, (owner.lineno, owner.end_lineno or owner.lineno))
            model = ctx.classes.model(ref)
            if model.problem:
                raise comp.error(owner, f"the methods of {owner.name} cannot be compiled: {model.problem}")
            if default is not None:
                raise comp.error(default, f"'{arg.arg}' is the instance: it cannot have a default")
            var = comp.new_var(arg.arg, Kind.MODULE)
            mtype = ModType(ref, module=model.module)
            comp.locals[arg.arg] = ModuleValue(var, mtype, arg.arg)
            params.append(ir.Param(var.name, Kind.MODULE))
            param_layouts.append(comp.layout(mtype).index)
            continue
        param_layouts.append(-1)
        kind = _param_kind(comp, arg, default)
        value, has_default = None, default is not None
        if has_default:
            if not is_literal(default):
                raise comp.error(default, "a default value must be a literal in a region")
            value = ast.literal_eval(default)
            ok = _DEFAULT_TYPES.get(kind)
            if not ((ok is not None and type(value) is ok) or (kind == Kind.OPT_TENSOR and value is None)):
                raise comp.error(
                    default,
                    f"default {value!r} does not match the parameter's annotation",
                    "Give float parameters float defaults (1.0, not 1).",
                )
        var = comp.new_var(arg.arg, kind)
        comp.locals[arg.arg] = var
        if kind == Kind.TENSORS:
            comp.param_vars.add(var.name)
        params.append(ir.Param(var.name, kind, value, has_default))
    try:
        comp.compile_body(fn.body)
    except Unsupported as exc:
        raise comp.error(fn, str(exc)) from None
    if not comp.terminated:
        raise comp.error(fn, "a region must end with `return`", "Return the result tensor(s).")
    specs = {s for s, _ in comp.returns} or {ir.RETURN_CODES[Kind.NONE]}  # no return: it never returns
    if len(specs) != 1:
        raise comp.error(
            fn,
            "the function returns different kinds of value on different paths",
            "Return the same structure (e.g. one tensor) everywhere.",
        )
    lines = {
        ln: source_lines[ln - 1].strip()
        for ln in range(fn.lineno, (fn.end_lineno or fn.lineno) + 1)
        if 0 < ln <= len(source_lines)
    }
    lines.update(ctx.source_lines)
    return ir.Function(
        name=fn.name,
        qualname=f"{owner.name}.{fn.name}" if owner is not None else fn.name,
        params=tuple(params),
        body=tuple(comp.body),
        level=level,
        filename=filename,
        first_line=function_key(fn)[1],
        def_line=fn.lineno,
        ret=specs.pop(),
        helpers=tuple(ctx.helpers),
        result_types=tuple(ctx.result_types),
        source_lines=lines,
        frozen_globals=dict(ctx.frozen),
        owner=owner.name if owner is not None else None,
        plan=freeze_plan(ctx.layouts, param_layouts),
    )
