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
import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError, Location, debug
from ..torchlib import ops
from . import ir, param_kinds, source
from .autocast import AutocastCompiler
from .callees import CalleeCompiler
from .calls import CallCompiler
from .conditions import ConditionCompiler
from .constructors import ConstructorCompiler
from .consumers import ConsumerCompiler
from .expressions import ExpressionCompiler
from .grad_modes import GradModeCompiler
from .indexing import IndexCompiler
from .ir import Kind
from .iteration import IterationCompiler
from .lists import ListCompiler, RuntimeListNeeded
from .loops import LoopCompiler, LoopFrame, _Widen
from .module_plan import LayoutBuilder, freeze_plan
from .modules import ModuleCompiler
from .namespace import Globals, function_key
from .python_forms import PythonFormCompiler
from .pyvalues import PyValueCompiler
from .statements import StatementCompiler
from .values import HINTS, KwArgs, ModuleValue, Static, Unsupported, constant, describe_node

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
    shown_file: str | None = None,
) -> CompileError:
    """A CompileError at `node`: ``at L:C:`` (``at FILE:L:C:`` with `shown_file`), the source line and a caret."""
    src = lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else None
    loc = dataclasses.replace(location(node, filename, lines), shown_file=shown_file)
    return CompileError(message, loc, hint, function, src)


# ---- the compiler ------------------------------------------------------------------------------


@dataclass
class Context:
    """State shared by a region and every callee compiled into it."""

    helpers: list[ir.Helper] = field(default_factory=list)
    specialised: dict[Any, tuple[str, Any, tuple[Kind, ...]]] = field(default_factory=dict)
    stack: list[tuple] = field(default_factory=list)  # (def, closure) of callees being compiled
    frozen: dict[str, Any] = field(default_factory=dict)
    result_types: list[Any] = field(default_factory=list)
    source_lines: dict[int, str] = field(default_factory=dict)
    classes: Any = None  # classes.Classes of the region's source
    layouts: list[LayoutBuilder] = field(default_factory=list)  # what the runtime reads of modules
    layout_index: dict[Any, LayoutBuilder] = field(default_factory=dict)
    root: Any = None  # the region's own definition (recursion)
    filename: str = ""  # the region's source file
    list_kinds: dict[Any, Kind] = field(default_factory=dict)  # list displays that must be run-time lists
    call: Any = None  # call_values.CallValues: compiled at a call, what its values said
    specialised_reads: set[tuple[str, int]] = field(default_factory=set)  # (what, line) read as a constant
    torch_sources: set[str] = field(default_factory=set)  # torch functions compiled from torch's own source
    grad_enabling: bool = False  # a block may turn grad mode on (grad_modes.py): built at level 1
    autocasting: bool = False  # an autocast block sets autocast state (autocast.py): built at level 1 too

    def checkpoint(self) -> tuple:
        """What a callee's compile adds to the region, to take back (``restore``) if it fails and another
        way is tried (torch's source, then its restatement): its helpers, what it read of modules, ...."""
        layouts = [(b, len(b.slots), dict(b.where), b.inline) for b in self.layouts]
        sets = (set(self.specialised_reads), set(self.torch_sources))
        maps = (dict(self.specialised), dict(self.frozen), dict(self.source_lines), dict(self.list_kinds))
        flags = (self.grad_enabling, self.autocasting)
        return len(self.helpers), len(self.result_types), layouts, dict(self.layout_index), sets, maps, flags

    def restore(self, saved: tuple) -> None:
        helpers, results, layouts, index, sets, maps, flags = saved
        del self.helpers[helpers:], self.result_types[results:]
        for b, n, where, inline in layouts:
            del b.slots[n:]
            b.where, b.inline = where, inline
        self.layouts[:] = [b for b, *_ in layouts]
        for mine, old in zip(
            (self.layout_index, self.specialised, self.frozen, self.source_lines, self.list_kinds),
            (index, *maps),
            strict=True,
        ):
            mine.clear()
            mine.update(old)
        for mine, old in zip((self.specialised_reads, self.torch_sources), sets, strict=True):
            mine.clear()
            mine.update(old)
        self.grad_enabling, self.autocasting = flags


@dataclass
class Block:
    """What a nested block left: its statements, its locals, and whether it ended in return/raise."""

    body: list[ir.Stmt] = field(default_factory=list)
    locals: dict[str, Any] = field(default_factory=dict)
    terminated: bool = False


class FunctionCompiler(
    StatementCompiler,
    LoopCompiler,
    IterationCompiler,
    ListCompiler,
    ConsumerCompiler,
    ExpressionCompiler,
    ConditionCompiler,
    IndexCompiler,
    CallCompiler,
    CalleeCompiler,
    ConstructorCompiler,
    PythonFormCompiler,
    GradModeCompiler,
    AutocastCompiler,
    PyValueCompiler,
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
        # a helper: the positions of its returned atoms that hold one of those on some path (the caller's
        # variables bound to them are list parameters too)
        self.list_returns: set[int] = set()
        self.capturing: set[int] = set()  # closures taking their free names' values now (calls.passed_on)

    @property
    def classes(self) -> Any:
        return self.ctx.classes

    # -- errors ------------------------------------------------------------------
    def error(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        if self.adapter:  # never point into this package's files
            return CompileError(message, None, hint, self.region_name)
        # a line of another file than the region's (a library's, torch's): the message names that file
        shown = source.short_path(self.filename) if self.ctx.filename not in ("", self.filename) else None
        return located_error(
            node,
            message,
            hint,
            filename=self.filename,
            lines=self.source_lines,
            function=self.region_name,
            shown_file=shown,
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

    def sized(self, var: ir.Var) -> ir.Var:
        """`var`, known to be a torch.Size in Python (see ir.Var.size)."""
        return dataclasses.replace(var, size=True)

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
            except CompileError as err:
                if not self.helper and getattr(err, "statement", None) is None:
                    err.statement = stmt  # the innermost statement of the function itself (``breaks``)
                raise
            finally:
                self._stmt = outer


# ---- one function -> ir.Function ------------------------------------------------------------------

# A function's parameters of two kinds (ir.VARIANTS: a number, a device) are compiled for both, nested:
# at most this many, so the body is compiled at most 2**MAX_VARIANTS times; others take their second
# kind only (a float; a torch.device): a value of the first kind runs the Python body, exactly.
MAX_VARIANTS = 3


def _param(
    compiler: FunctionCompiler, arg: ast.arg, default: ast.expr | None, overrides: dict[str, Kind]
) -> tuple[Kind | str, Any, bool]:
    """A parameter's kind, its default and whether it has one."""
    has_default = default is not None
    value = None
    if arg.arg in overrides:  # a call said, whatever the source says (call_values.CallValues.kinds)
        # The runtime binds the function's own defaults; this one is only the count's placeholder if not literal.
        _ok, value = param_kinds.default_value(default, compiler.g) if has_default else (False, None)
        return overrides[arg.arg], value, has_default
    if has_default:
        ok, value = param_kinds.default_value(default, compiler.g)
        if not ok:
            raise compiler.error(default, "a default value must be a literal, a dtype or a torch.device in a region")
    ann = arg.annotation
    if ann is None:
        if not has_default:  # a tensor, unless the first call said otherwise (pipeline.respecialise)
            return overrides.get(arg.arg, Kind.TENSOR), None, False
        kind = param_kinds.default_kind(value)
        if kind is None:
            raise compiler.error(
                default, f"the default {value!r} does not say what parameter '{arg.arg}' holds; annotate it"
            )
        return kind, value, True
    try:
        kind = param_kinds.annotation_kind(ann, compiler.g)
    except param_kinds.NotUnderstood:
        raise compiler.error(
            ann,
            f"parameter '{arg.arg}' has an annotation a region does not understand",
            "Annotate parameters as torch.Tensor, float, int, bool, str, torch.dtype, torch.device, "
            "tuple[int, ...], list[torch.Tensor], or any of them | None.",
        ) from None
    if has_default and not param_kinds.default_fits(kind, value):
        raise compiler.error(default, f"default {value!r} does not match the parameter's annotation")
    return kind, value, has_default


def _compile_per_variant(comp: FunctionCompiler, body: list[ast.stmt], variants: list) -> None:
    """The body, once per combination of the kinds its two-kind parameters hold, chosen at run time by
    what each holds: Python keeps an int an int in a float parameter, a str a str in a device one."""
    if not variants:
        comp.compile_body(body)
        return
    (name, selector, first, second), rest = variants[0], variants[1:]
    paths = []
    for value in (first, second):
        with comp.block() as path:
            comp.locals[name] = value
            _compile_per_variant(comp, body, rest)
        paths.append(path)
    comp.emit(ir.If(selector, tuple(paths[0].body), tuple(paths[1].body), 0))
    comp.terminated = paths[0].terminated and paths[1].terminated


def translate(
    fn: ast.FunctionDef,
    g: Globals,
    filename: str,
    source_lines: list[str],
    level: int,
    owner: ast.ClassDef | None = None,
    overrides: dict[str, Kind] | None = None,
    call: Any = None,
) -> ir.Function:
    """The IR of a function the front door accepted (plain positional parameters, no decorators
    but @ppy.opt, not async, no generator); CompileError if its body is outside the language.
    A method (`owner` is its class) reads its first parameter's attributes through the plan.
    `call` (``call_values.CallValues``): compiled at a call, the kinds, constants and objects it brought.

    Two-kind parameters (ir.VARIANTS) are compiled for both kinds; where the body is outside the
    language for one of them (`min(a, 3.0)` of an int `a` may be an int or a float), the function is
    compiled for their second kind only, and a value of the first kind runs the Python body."""
    overrides = dict(overrides or {})
    if call is not None:
        overrides.update(call.kinds)
    try:
        return _translate(fn, g, filename, source_lines, level, owner, overrides, MAX_VARIANTS, call)
    except CompileError:
        return _translate(fn, g, filename, source_lines, level, owner, overrides, 0, call)


def names_read(fn: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(ast.Module(body=fn.body, type_ignores=[])) if isinstance(n, ast.Name)}


def ignored_extras(fn: ast.FunctionDef) -> int:
    """What a region of `fn` does with a call's extra arguments: 1 ignores extra positional ones (*args its
    body never reads), 2 extra keywords (**kwargs likewise); 4 takes extra keywords into a **kwargs its body
    reads, each variant those of the call it was built for (``call_values.CallValues.keywords``). A read
    *args is empty in the region: calls passing some run Python."""
    read = names_read(fn)
    a = fn.args
    return (
        (1 if a.vararg is not None and a.vararg.arg not in read else 0)
        | (2 if a.kwarg is not None and a.kwarg.arg not in read else 0)
        | (4 if a.kwarg is not None and a.kwarg.arg in read else 0)
    )


def classes_of(g: Globals, filename: str, source_lines: list[str]) -> Any:
    """The class models of one source, made once (``classes.Classes``)."""
    from .classes import Classes

    found = g.cache.get("classes")
    if found is None:
        found = g.cache["classes"] = Classes(g, filename, source_lines)
    return found


def _translate(
    fn: ast.FunctionDef,
    g: Globals,
    filename: str,
    source_lines: list[str],
    level: int,
    owner: ast.ClassDef | None,
    overrides: dict[str, Kind],
    max_variants: int,
    call: Any = None,
) -> ir.Function:
    """One attempt at most `max_variants` two-kind parameters. A list the body changes is learnt while
    compiling (``RuntimeListNeeded``): the function is compiled again with that list made a run-time list
    from the start."""
    list_kinds: dict[Any, Kind] = {}
    while True:
        try:
            return _translate_once(
                fn, g, filename, source_lines, level, owner, overrides, max_variants, list_kinds, call
            )
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


def _translate_once(
    fn: ast.FunctionDef,
    g: Globals,
    filename: str,
    source_lines: list[str],
    level: int,
    owner: ast.ClassDef | None,
    overrides: dict[str, Kind],
    max_variants: int,
    list_kinds: dict,
    call: Any = None,
) -> ir.Function:
    from .attr_types import ClassRef, ModType
    from .call_values import object_type

    ctx = Context(
        classes=classes_of(g, filename, source_lines), root=fn, filename=filename, list_kinds=list_kinds, call=call
    )
    comp = FunctionCompiler(fn, g, filename, source_lines, ctx, region_name=fn.name)
    a = fn.args
    params = []
    variants: list[tuple[str, ir.Var, ir.Var, ir.Var]] = []  # (name, selector, as the first kind, the second)
    param_layouts = []
    defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    constants: list[Any] = []  # per parameter: the value of a CONSTANT one
    samples = call.samples if call is not None else {}
    # Extra keywords into a **kwargs the body reads: parameters after the function's own, named by them.
    keywords = tuple(call.keywords) if call is not None and a.kwarg is not None else ()
    declared = list(zip(a.args, defaults, strict=True))
    for i, (arg, default) in enumerate(declared + [(ast.arg(arg=k), None) for k in keywords]):
        extra = i >= len(declared)
        constants.append(None)
        if call is not None and arg.arg in call.constants:  # compiled in, compared at each call
            value = call.constants[arg.arg]
            c = constant(value)
            comp.locals[arg.arg] = c if c is not None else Static(value)
            constants[-1] = value
            params.append(ir.Param(arg.arg, Kind.CONSTANT, None, default is not None))
            param_layouts.append(-1)
            ctx.specialised_reads.add((arg.arg, 0))
            continue
        if arg.arg in samples and not (owner is not None and i == 0):  # a module or a plain object passed in
            sample = samples[arg.arg]
            mtype = object_type(sample)
            var = comp.new_var(arg.arg, Kind.MODULE)
            comp.locals[arg.arg] = ModuleValue(var, mtype, arg.arg, sample)
            params.append(ir.Param(var.name, Kind.MODULE, None, default is not None))
            param_layouts.append(comp.layout(mtype).index)
            continue
        if owner is not None and i == 0:
            me = samples.get(arg.arg)
            if me is not None and g.reaches(type(me)):  # ppy_magic.compile: the instance's own class, as it is
                ref = ClassRef(type(me).__name__, type(me))
            else:
                ref = ClassRef(owner.name, None, (owner.lineno, owner.end_lineno or owner.lineno))
            model = ctx.classes.model(ref)
            if model.problem:
                raise comp.error(owner, f"the methods of {owner.name} cannot be compiled: {model.problem}")
            if default is not None:
                raise comp.error(default, f"'{arg.arg}' is the instance: it cannot have a default")
            var = comp.new_var(arg.arg, Kind.MODULE)
            mtype = ModType(ref, module=model.module)
            comp.locals[arg.arg] = ModuleValue(var, mtype, arg.arg, samples.get(arg.arg))
            params.append(ir.Param(var.name, Kind.MODULE))
            param_layouts.append(comp.layout(mtype).index)
            continue
        param_layouts.append(-1)
        kind, value, has_default = _param(comp, arg, default, overrides)
        if kind in ir.VARIANTS and len(variants) < max_variants and not extra:
            first_kind, second_kind = ir.VARIANTS[kind]
            first = comp.new_var(arg.arg, first_kind)  # first: the parameter's own name, for keywords
            parts = (comp.new_var(f"{arg.arg}_is_{first_kind.name.lower()}", Kind.BOOL), first)
            parts += (comp.new_var(arg.arg, second_kind),)
            variants.append((arg.arg, *parts))
            params.append(ir.Param(first.name, kind, value, has_default, parts))
            continue
        if kind in ir.VARIANTS:
            kind = ir.VARIANTS[kind][1]
        var = comp.new_var(arg.arg, kind) if kind != Kind.SIZE else comp.sized(comp.new_var(arg.arg, Kind.INTS))
        if extra and var.name != arg.arg:  # the runtime finds an extra keyword's parameter by its name
            raise comp.error(fn, f"the keyword '{arg.arg}' passed into **{a.kwarg.arg} cannot name a parameter")
        comp.locals[arg.arg] = var
        if kind in (Kind.TENSORS, Kind.INTS):  # the runtime takes a list or a tuple for either
            comp.param_vars.add(var.name)
        params.append(ir.Param(var.name, kind, value, has_default))
    # *args and **kwargs: ignored when the body never reads them (the call may pass anything there);
    # otherwise the region is for calls that pass none (others run the Python body) and they are empty.
    extras = ignored_extras(fn)
    read = names_read(fn)
    for star, empty in ((a.vararg, ir.Tup(())), (a.kwarg, KwArgs(()))):
        if star is not None and star.arg in read:
            comp.locals[star.arg] = empty
    if keywords and a.kwarg.arg in read:  # the body sees them in **kwargs only
        comp.locals[a.kwarg.arg] = KwArgs(tuple((k, comp.locals.pop(k)) for k in keywords))
    elif keywords:
        raise comp.error(fn, "the call passes extra keywords, which the body ignores")  # not reached: extras & 2
    try:
        _compile_per_variant(comp, fn.body, variants)
    except Unsupported as exc:
        raise comp.error(fn, str(exc)) from None
    except CompileError as err:
        if not any(star is not None and star.arg in read for star in (a.vararg, a.kwarg)):
            raise
        hint = "The region is built for calls that pass nothing in *args and **kwargs; name what it reads."
        again = CompileError(err.message, err.loc, hint, err.function, err._source_line)
        for what in ("statement", "uses"):  # where it points (breaks)
            if hasattr(err, what):
                setattr(again, what, getattr(err, what))
        raise again from None
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
        level=min(level, 1) if ctx.grad_enabling or ctx.autocasting else level,
        filename=filename,
        first_line=function_key(fn)[1],
        def_line=fn.lineno,
        ret=specs.pop(),
        helpers=tuple(ctx.helpers),
        result_types=tuple(ctx.result_types),
        source_lines=lines,
        frozen_globals=dict(ctx.frozen),
        extras=extras,
        owner=owner.name if owner is not None else None,
        plan=freeze_plan(ctx.layouts, param_layouts),
        constants=tuple(constants) if Kind.CONSTANT in {p.kind for p in params} else (),
        specialised_reads=tuple(sorted(ctx.specialised_reads)),
        torch_sources=tuple(sorted(ctx.torch_sources)),
    )
