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
import builtins
import math
import operator
import os
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from . import adapters, ir, ops
from .decorator import MAX_LEVEL
from .errors import CompileError, Location

_ANNOTATIONS = {"Tensor": ir.TENSOR, "float": ir.FLOAT, "int": ir.INT, "bool": ir.BOOL, "str": ir.STR}
_DTYPES = {v for v in vars(torch).values() if isinstance(v, torch.dtype)}


@dataclass(frozen=True)
class Static:
    """A Python object known when the function is compiled (a module, a function, a type)."""

    value: Any


class Unsupported(Exception):
    """An adapter reached `unsupported(...)`: the calling function stays Python."""


# ---- globals -------------------------------------------------------------------------------


@dataclass
class Globals:
    """What global names mean at compile time.

    ``values`` comes from the namespace the cell or file runs in plus the
    top-level statements of the source itself whose value is known before they
    run (``import torch``, ``EPS = 1e-5``); a name bound any other way is
    ``unknown`` and cannot be frozen into a region.
    """

    values: dict[str, Any]
    unknown: set[str] = field(default_factory=set)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # decorated defs of the source
    plain_functions: set[str] = field(default_factory=set)  # undecorated defs of the source

    def lookup(self, name: str) -> tuple[bool, Any]:
        if name in self.unknown:
            return False, None
        if name in self.values:
            return True, self.values[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None


def _is_opt_decorator(node: ast.expr, g: Globals) -> bool:
    from . import decorator

    target = node.func if isinstance(node, ast.Call) else node
    return _static_value(target, g) is decorator.opt


def _static_value(node: ast.expr, g: Globals) -> Any:
    """The object a dotted name (``ppy.opt``, ``torch.nn.functional``) refers to, or None."""
    if isinstance(node, ast.Name):
        ok, value = g.lookup(node.id)
        return value if ok else None
    if isinstance(node, ast.Attribute):
        base = _static_value(node.value, g)
        if isinstance(base, (types.ModuleType, type)):
            return getattr(base, node.attr, None)
    return None


def opt_level(fn: ast.FunctionDef | ast.AsyncFunctionDef, g: Globals, default: int = MAX_LEVEL) -> int | None:
    """The level of a ``@ppy.opt(...)`` decorator on `fn`, or None if it has none.

    Levels that are not an int literal are checked when the decorator runs (-1 here).
    """
    for dec in fn.decorator_list:
        if not _is_opt_decorator(dec, g):
            continue
        if not isinstance(dec, ast.Call) or (not dec.args and not dec.keywords):
            return default  # bare @ppy.opt or @ppy.opt()
        arg = dec.args[0] if dec.args else dec.keywords[0].value
        if isinstance(arg, ast.Constant) and type(arg.value) is int and 0 <= arg.value <= MAX_LEVEL:
            return arg.value
        return -1
    return None


def collect_globals(tree: ast.Module, namespace: dict[str, Any]) -> Globals:
    """Global names as a function compiled from `tree` will see them.

    A name the source binds at top level exactly once, by an import of a known
    module or a literal int/float/bool/str assignment, has that value; a name it
    binds any other way (or twice) is unknown: its value is not known before the
    cell runs. Other names come from `namespace`.
    """
    bindings: dict[str, list[tuple[bool, Any]]] = {}
    functions: dict[str, ast.FunctionDef] = {}

    def bind(name: str, value: Any, known: bool) -> None:
        bindings.setdefault(name, []).append((known, value))

    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                mod = _import_known(alias.name if alias.asname else name)
                bind(name, mod, mod is not None)
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            mod = _import_known(stmt.module)
            for alias in stmt.names:
                if mod is not None and hasattr(mod, alias.name):
                    value = getattr(mod, alias.name)
                else:
                    value = _import_known(f"{stmt.module}.{alias.name}")
                bind(alias.asname or alias.name, value, value is not None)
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
              and isinstance(stmt.targets[0], ast.Name)):
            try:
                value = ast.literal_eval(stmt.value)
            except ValueError:
                value = None
            bind(stmt.targets[0].id, value, type(value) in (int, float, bool, str))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(stmt.name, None, False)
            if isinstance(stmt, ast.FunctionDef):
                functions.setdefault(stmt.name, stmt)
                if len(bindings[stmt.name]) > 1:
                    functions.pop(stmt.name, None)
        else:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bind(node.id, None, False)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bind(node.name, None, False)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        bind(alias.asname or alias.name.split(".")[0], None, False)
    values = dict(namespace)
    unknown: set[str] = set()
    for name, seen in bindings.items():
        if len(seen) == 1 and seen[0][0]:
            values[name] = seen[0][1]
        else:
            values.pop(name, None)
            unknown.add(name)
    g = Globals(values, unknown)
    g.functions = {n: f for n, f in functions.items() if opt_level(f, g) is not None}
    g.plain_functions = {n for n in functions if n not in g.functions}
    return g


_IMPORTABLE_ROOTS = {"torch", "math", "ppy", "ppy_magic", "operator"}


def _import_known(name: str) -> types.ModuleType | None:
    """Import a module a function may refer to, if that is safe to do at compile time."""
    import importlib
    import sys

    if name in sys.modules:
        return sys.modules[name]
    if name.split(".")[0] not in _IMPORTABLE_ROOTS:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# ---- compile-time tables ---------------------------------------------------------------------

_PY_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
              ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
              ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_PY_UNARYOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                ast.Invert: operator.invert}
_PY_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
               ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not}
_CPP_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.FloorDiv: "//",
            ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&",
            ast.BitOr: "|", ast.BitXor: "^"}

# math.* on numbers: C++ template (with CPython's error checks) and result kind.
_MATH = {
    math.sqrt: ("ppy::math_checked({0}, std::sqrt({0}))", ir.FLOAT),
    math.exp: ("ppy::math_checked({0}, std::exp({0}))", ir.FLOAT),
    math.log: ("ppy::math_log({0})", ir.FLOAT),
    math.log2: ("ppy::math_log2({0})", ir.FLOAT),
    math.log10: ("ppy::math_log10({0})", ir.FLOAT),
    math.sin: ("ppy::math_checked({0}, std::sin({0}))", ir.FLOAT),
    math.cos: ("ppy::math_checked({0}, std::cos({0}))", ir.FLOAT),
    math.tan: ("ppy::math_checked({0}, std::tan({0}))", ir.FLOAT),
    math.tanh: ("std::tanh({0})", ir.FLOAT),
    math.atan: ("std::atan({0})", ir.FLOAT),
    math.erf: ("std::erf({0})", ir.FLOAT),
    math.fabs: ("std::fabs({0})", ir.FLOAT),
    math.floor: ("ppy::math_floor({0})", ir.INT),
    math.ceil: ("ppy::math_ceil({0})", ir.INT),
}

_ERRORS = {"AssertionError", "ValueError", "ZeroDivisionError", "OverflowError", "IndexError", "TypeError"}


def _kind_of_constant(v: Any) -> str | None:
    if type(v) is bool:
        return ir.BOOL
    if type(v) is int:
        return ir.INT
    if type(v) is float:
        return ir.FLOAT
    if v is None:
        return ir.NONE
    if type(v) is str:
        return ir.STR
    if isinstance(v, torch.dtype):
        return ir.DTYPE
    return None


def _const(v: Any) -> ir.Const | ir.Tup | None:
    if isinstance(v, tuple):
        items = [_const(i) for i in v]
        return None if any(i is None for i in items) else ir.Tup(tuple(items))
    kind = _kind_of_constant(v)
    if kind is None or (kind == ir.INT and not -(2**63) <= v < 2**63):
        return None
    return ir.Const(v, kind)


def _loc(node: ast.AST, filename: str) -> Location:
    end = getattr(node, "end_col_offset", None) if getattr(node, "end_lineno", None) == node.lineno else None
    return Location(filename, node.lineno, node.col_offset, end)


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


class FunctionCompiler(ast.NodeVisitor):
    """Turns one FunctionDef into statements; raises CompileError otherwise."""

    def __init__(self, fn: ast.FunctionDef, g: Globals, filename: str, source_lines: list[str],
                 ctx: Context, *, region_name: str, adapter: bool = False, helper: bool = False):
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
        return CompileError(message, _loc(node, self.filename), hint, self.region_name, src)

    def visit(self, node: ast.AST) -> Any:
        try:
            return super().visit(node)
        except (CompileError, Unsupported):
            raise
        except ops.ResolveError as exc:
            raise self.error(node, str(exc)) from None
        except Exception as exc:  # a bug here must not hide where the user's code is
            if os.environ.get("PPY_DEBUG", "") not in ("", "0"):
                raise
            raise self.error(node, f"cannot compile this ({type(exc).__name__}: {exc})") from None

    def generic_visit(self, node: ast.AST) -> Any:
        hint = _HINTS.get(type(node).__name__, "Keep this function to tensor operations, or leave it Python.")
        raise self.error(node, f"{_describe(node)} is not supported in a region", hint)

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
        raise self.error(node, f"{_describe(node)} is not supported in a region", _HINTS["Expr"])

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
            raise self.error(target, f"assigning to {_describe(target)} is not supported in a region")

    def unpack(self, target: ast.Tuple | ast.List, value: Any) -> None:
        starred = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
        n = len(target.elts)
        items = self.sequence_items(target, value, n - len(starred), bool(starred))
        if starred and any(isinstance(i, _Starred) for i in items):  # run-time length: sliced already
            for t, v in zip(target.elts, items):
                self.bind_target(t.value if isinstance(t, ast.Starred) else t,
                                 v.value if isinstance(v, _Starred) else v)
        elif starred:
            s = starred[0]
            after = n - s - 1
            head, mid, tail = items[:s], items[s:len(items) - after], items[len(items) - after:]
            for t, v in zip(target.elts[:s], head):
                self.bind_target(t, v)
            self.bind_target(target.elts[s].value, ir.Tup(tuple(mid)))
            for t, v in zip(target.elts[s + 1:], tail):
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
            self.emit(ir.Effect(ir.Cpp(f"ppy::check_unpack({{0}}, {want}, {'true' if starred else 'false'})",
                                       (size,)), self.line()))
            item_kind = ir.INT if kind == ir.INTS else ir.TENSOR
            if not starred:
                return [self.cpp(f"{{0}}[{i}]", item_kind, value) for i in range(want)]
            if kind != ir.INTS:
                raise self.error(node, "starred unpacking of a list of tensors is not supported in a region")
            s = next(i for i, e in enumerate(node.elts) if isinstance(e, ast.Starred))
            after = want - s
            head = [self.cpp(f"{{0}}[{i}]", ir.INT, value) for i in range(s)]
            mid = self.cpp(f"ppy::seq_slice({{0}}, c10::optional<int64_t>({s}), "
                           f"c10::optional<int64_t>({{1}} - {after}), c10::optional<int64_t>())", ir.INTS,
                           value, size)
            tail = [self.cpp(f"{{0}}[{{1}} - {after - i}]", ir.INT, value, size) for i in range(after)]
            return head + [_Starred(mid)] + tail
        raise self.error(node, f"cannot unpack {ops.describe(value)} in a region")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        target = node.target
        if isinstance(target, ast.Name):
            current = self.load_name(target)
            rhs = self.value(node.value)
            self.locals[target.id] = self.augmented(node, current, rhs)
        elif isinstance(target, ast.Subscript):
            base = self.value(target.value)
            index = self.index_items(target.slice)
            current = self.getitem(target, base, index)
            rhs = self.value(node.value)
            self.store_item(target, base, index, self.augmented(node, current, rhs))
        else:
            raise self.error(target, f"augmented assignment to {_describe(target)} is not supported")

    def augmented(self, node: ast.AugAssign, current: Any, rhs: Any) -> Any:
        if getattr(current, "kind", None) == ir.TENSOR:
            name = ops.INPLACE_BINOPS.get(type(node.op))
            if name is None:
                raise self.error(node, f"`{_SYMBOLS.get(type(node.op), '?')}=` on a tensor is not supported")
            self.call_op(node, ops.OpSpec(name), [current, rhs], {}, method=True,
                         display=f"Tensor {_SYMBOLS[type(node.op)]}=")
            return current  # in place: the same tensor
        return self.binop(node, node.op, current, rhs)

    def visit_Return(self, node: ast.Return) -> None:
        value = self.value(node.value) if node.value is not None else ir.Const(None, ir.NONE)
        if self.helper:  # the caller knows the static parts; only runtime atoms cross
            self.returns.append(("helper", _structure(value)))
            self.emit(ir.Return(tuple(a for a in _atoms_of(value) if isinstance(a, ir.Var)), "helper",
                                self.line()))
        else:
            atoms: list[ir.Atom] = []
            spec = self.return_spec(node, value, atoms)
            self.returns.append((spec, _structure(value)))
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
        raise self.error(node, f"a region cannot return {ops.describe(value)}",
                         "Return tensors, numbers, or tuples of them.")

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if not (isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) and exc.func.id in _ERRORS
                and len(exc.args) <= 1 and not exc.keywords):
            raise self.error(node, "only `raise ValueError(\"message\")` and the like are supported in a region")
        message = self.message(exc.args[0]) if exc.args else ""
        self.emit(ir.Raise(exc.func.id, message, self.line()))
        self.terminated = True

    def message(self, node: ast.expr) -> str:
        value = self.value(node)
        if isinstance(value, ir.Const) and value.kind == ir.STR:
            return value.value
        raise self.error(node, "an error message must be a string known at compile time")

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
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
                and isinstance(test.ops[0], (ast.Is, ast.IsNot)) and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None):
            value = self.locals.get(test.left.id)
            if getattr(value, "kind", None) == ir.OPT_TENSOR:
                return test.left.id, isinstance(test.ops[0], ast.IsNot)
        return None

    def branch(self, node: ast.AST, test: ir.Atom, then: list[ast.stmt], orelse: list[ast.stmt],
               narrowed: tuple[str, bool] | None = None) -> None:
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
            vals = [locs.get(name, _UNBOUND) for locs, _ in live]
            if all(v is vals[0] or v == vals[0] for v in vals):
                merged[name] = vals[0]
                continue
            if any(v is _UNBOUND for v in vals):
                merged[name] = _Unbound(name)
                continue
            joined = self.join(node, name, vals, [body for _, body in live])
            merged[name] = joined
        return merged

    def join(self, node: ast.AST, name: str, vals: list, bodies: list[list]) -> Any:
        first = vals[0]
        if isinstance(first, ir.Tup):
            if not all(isinstance(v, ir.Tup) and len(v.items) == len(first.items) for v in vals):
                return _Unbound(name, "it is a tuple of different lengths in different branches")
            return ir.Tup(tuple(self.join(node, name, [v.items[i] for v in vals], bodies)
                                for i in range(len(first.items))))
        kinds = {getattr(v, "kind", None) for v in vals}
        if len(kinds) != 1 or None in kinds or ir.NONE in kinds or ir.OPAQUE in kinds:
            return _Unbound(name, "it has different kinds of value in different branches")
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
        if not (isinstance(it, ast.Call) and _static_value(it.func, self.g) is range and not it.keywords
                and 1 <= len(it.args) <= 3):
            raise self.error(it, "a region can only loop over range(...)",
                             "Loop over range(n) with int bounds, or keep this function Python.")
        bounds = [self.value(a) for a in it.args]
        for a, b in zip(it.args, bounds):
            if getattr(b, "kind", None) not in (ir.INT, ir.BOOL):
                raise self.error(a, f"range() needs ints, got {ops.describe(b)}")
        start, stop, step = ((ir.Const(0, ir.INT), bounds[0], ir.Const(1, ir.INT)) if len(bounds) == 1 else
                             (bounds[0], bounds[1], ir.Const(1, ir.INT)) if len(bounds) == 2 else tuple(bounds))
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(it, "range() arg 3 must not be zero")
        if not isinstance(step, ir.Const):
            self.emit(ir.Effect(ir.Cpp("ppy::check_range_step({0})", (step,)), self.line()))
        # Names the body rebinds that already hold values become loop-carried variables.
        assigned = {n.id for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
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
            self.store_carried(node, name, var, self.locals.get(name, _UNBOUND))
        body, self.body = self.body, saved_body
        self.emit(ir.For(loop_var, start, stop, step, tuple(body), self.line()))
        after = dict(before)
        for name, var in carried.items():
            after[name] = var
        for name in assigned - set(carried):
            after[name] = _Unbound(name, "it is only bound inside the loop, which may run zero times")
        after[node.target.id] = _Unbound(node.target.id, "the loop variable is undefined after a loop "
                                                         "that may run zero times")
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
            raise self.error(node, f"'{name}' changes kind inside the loop "
                                   f"({ir.KIND_NAMES[var.kind]} -> {ops.describe(value)})")
        if value != var:
            self.emit(ir.Move(var, value, self.line()))

    # -- expressions ---------------------------------------------------------------------
    def value(self, node: ast.expr) -> Any:
        v = self.visit(node)
        if isinstance(v, _Unbound):
            raise self.error(node, f"'{v.name}' may be unbound here: {v.why}")
        return v

    def atom(self, node: ast.expr, value: Any = None) -> ir.Atom:
        value = self.value(node) if value is None else value
        if isinstance(value, (ir.Var, ir.Const)):
            return value
        raise self.error(node, f"{ops.describe(value) if not isinstance(value, Static) else 'this'} "
                               "cannot be used as a value in a region")

    def visit_Constant(self, node: ast.Constant) -> Any:
        c = _const(node.value)
        if c is None:
            if node.value is Ellipsis:
                return Static(Ellipsis)
            raise self.error(node, f"the constant {node.value!r} is not supported in a region")
        return c

    def load_name(self, node: ast.Name) -> Any:
        return self.value(node)

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in self.locals:
            return self.locals[node.id]
        if node.id in self.g.functions:  # another @ppy.opt function of the same source
            return Static(CellFunction(self.g.functions[node.id]))
        ok, value = self.g.lookup(node.id)
        if not ok and node.id in self.g.plain_functions:
            raise self.error(node, _PLAIN_FUNCTION.format(name=node.id), _PLAIN_FUNCTION_HINT)
        if not ok:
            raise self.error(node, f"name '{node.id}' is not known when the region is compiled",
                             "Define it before the function: a module, or an int/float/bool/str constant.")
        if not hasattr(builtins, node.id) or node.id in self.g.values:
            if not self.adapter:
                self.ctx.frozen[node.id] = value
        c = _const(value)
        if c is not None:
            return c
        return Static(value)

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.value(node.value)
        if isinstance(base, Static):
            try:
                attr = getattr(base.value, node.attr)
            except AttributeError:
                raise self.error(node, f"`{ast.unparse(node)}` does not exist") from None
            c = _const(attr)
            return c if c is not None else Static(attr)
        kind = getattr(base, "kind", None)
        if kind == ir.TENSOR:
            return self.tensor_attribute(node, base)
        raise self.error(node, f"attribute `.{node.attr}` of {ops.describe(base)} is not supported in a region")

    _TENSOR_PROPERTIES = {"T": "numpy_T", "mT": "mT", "H": "matrix_H", "mH": "mH"}

    def tensor_attribute(self, node: ast.Attribute, t: ir.Atom) -> Any:
        a = node.attr
        if a == "shape":
            return self.cpp("{0}.sizes().vec()", ir.INTS, t)
        if a == "ndim":
            return self.cpp("static_cast<int64_t>({0}.dim())", ir.INT, t)
        if a == "dtype":
            return self.cpp("{0}.scalar_type()", ir.DTYPE, t)
        if a == "requires_grad":
            return self.cpp("{0}.requires_grad()", ir.BOOL, t)
        if a == "is_cuda":
            return self.cpp("{0}.is_cuda()", ir.BOOL, t)
        if a in self._TENSOR_PROPERTIES:
            return self.call_op(node, ops.OpSpec(self._TENSOR_PROPERTIES[a]), [t], {}, method=True,
                                display=f"Tensor.{a}")
        return _Method(t, a)

    def visit_Tuple(self, node: ast.Tuple) -> ir.Tup:
        return ir.Tup(tuple(self.starred_items(node.elts)))

    def visit_List(self, node: ast.List) -> ir.Tup:
        return ir.Tup(tuple(self.starred_items(node.elts)))

    def starred_items(self, elts: list[ast.expr]) -> list[Any]:
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.value(e.value)
                if not isinstance(v, ir.Tup):
                    raise self.error(e, "`*` of a sequence whose length is only known at run time")
                out.extend(v.items)
            else:
                out.append(self.value(e))
        return out

    # arithmetic
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        lhs = self.value(node.left)
        rhs = self.value(node.right)
        return self.binop(node, node.op, lhs, rhs)

    def binop(self, node: ast.AST, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        symbol = _SYMBOLS.get(type(op), type(op).__name__)
        if isinstance(lhs, ir.Tup) or isinstance(rhs, ir.Tup) or getattr(lhs, "kind", None) == ir.INTS:
            return self.sequence_binop(node, op, lhs, rhs)
        lk, rk = getattr(lhs, "kind", None), getattr(rhs, "kind", None)
        if isinstance(lhs, ir.Const) and isinstance(rhs, ir.Const):
            return self.fold(node, _PY_BINOPS[type(op)], lhs, rhs)
        if lk == ir.TENSOR:
            forward = ops.BINOPS.get(type(op))
            if forward is None:
                raise self.error(node, f"the operator `{symbol}` is not supported in a region")
            if type(op) is ast.Div:  # Tensor.__truediv__ is div
                return self.call_op(node, ops.OpSpec("div"), [lhs, rhs], {}, method=True, display="Tensor /")
            return self.call_op(node, ops.OpSpec(forward[0]), [lhs, rhs], {}, method=True,
                                display=f"Tensor {symbol}")
        if rk == ir.TENSOR and lk in ir.SCALAR_KINDS:
            reflected = ops.BINOPS.get(type(op), (None, None))[1]
            if reflected == "rdiv":  # torch/_tensor.py: __rdiv__ is self.reciprocal() * other
                recip = self.call_op(node, ops.OpSpec("reciprocal"), [rhs], {}, method=True)
                return self.call_op(node, ops.OpSpec("mul"), [recip, lhs], {}, method=True)
            if reflected == "rfloordiv":
                return self.call_op(node, ops.OpSpec("floor_divide"), [lhs, rhs], {}, display="//")
            if reflected == "rremainder":
                return self.call_op(node, ops.OpSpec("remainder"), [lhs, rhs], {}, display="%")
            if reflected == "rpow":
                return self.call_op(node, ops.OpSpec("pow"), [lhs, rhs], {}, display="**")
            if reflected is not None:
                return self.call_op(node, ops.OpSpec(reflected), [rhs, lhs], {}, method=True,
                                    display=f"{symbol} Tensor")
        if lk in ir.SCALAR_KINDS and rk in ir.SCALAR_KINDS:
            return self.scalar_binop(node, op, lhs, rhs)
        raise self.error(node, f"`{symbol}` on {ops.describe(lhs)} and {ops.describe(rhs)} is not supported "
                               "in a region")

    def scalar_binop(self, node: ast.AST, op: ast.operator, a: ir.Atom, b: ir.Atom) -> ir.Var:
        t = type(op)
        ints = a.kind in (ir.INT, ir.BOOL) and b.kind in (ir.INT, ir.BOOL)
        if ints:
            ia, ib = self.as_int(a), self.as_int(b)
            table = {ast.Add: "ppy::py_add({0}, {1})", ast.Sub: "ppy::py_sub({0}, {1})",
                     ast.Mult: "ppy::py_mul({0}, {1})", ast.FloorDiv: "ppy::py_floordiv({0}, {1})",
                     ast.Mod: "ppy::py_mod({0}, {1})", ast.BitAnd: "({0} & {1})", ast.BitOr: "({0} | {1})",
                     ast.BitXor: "({0} ^ {1})", ast.LShift: "ppy::py_lshift({0}, {1})",
                     ast.RShift: "ppy::py_rshift({0}, {1})"}
            if t in table:
                if a.kind == b.kind == ir.BOOL and t in (ast.BitAnd, ast.BitOr, ast.BitXor):
                    return self.cpp(table[t], ir.BOOL, a, b)
                return self.cpp(table[t], ir.INT, ia, ib)
            if t is ast.Div:
                return self.cpp("ppy::py_int_truediv({0}, {1})", ir.FLOAT, ia, ib)
            if t is ast.Pow:
                if isinstance(b, ir.Const) and b.value >= 0:
                    return self.cpp("ppy::py_pow({0}, {1})", ir.INT, ia, ib)
                raise self.error(node, "int ** int with an exponent only known at run time may be an int or a "
                                       "float in Python", "Write float(x) ** n or use a constant exponent.")
        else:
            fa, fb = self.as_float(a), self.as_float(b)
            table = {ast.Add: "({0} + {1})", ast.Sub: "({0} - {1})", ast.Mult: "({0} * {1})",
                     ast.Div: "ppy::py_truediv({0}, {1})", ast.FloorDiv: "ppy::py_ffloordiv({0}, {1})",
                     ast.Mod: "ppy::py_fmod({0}, {1})", ast.Pow: "ppy::py_fpow({0}, {1})"}
            if t in table:
                return self.cpp(table[t], ir.FLOAT, fa, fb)
        raise self.error(node, f"`{_SYMBOLS.get(t, '?')}` on {ops.describe(a)} and {ops.describe(b)} is not "
                               "supported in a region")

    def as_int(self, a: ir.Atom) -> ir.Atom:
        if a.kind == ir.BOOL:
            return ir.Const(int(a.value), ir.INT) if isinstance(a, ir.Const) else \
                self.cpp("static_cast<int64_t>({0})", ir.INT, a)
        return a

    def as_float(self, a: ir.Atom) -> ir.Atom:
        if a.kind == ir.FLOAT:
            return a
        if isinstance(a, ir.Const):
            return ir.Const(float(a.value), ir.FLOAT)
        return self.cpp("static_cast<double>({0})", ir.FLOAT, a)

    def sequence_binop(self, node: ast.AST, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        if type(op) is ast.Add and isinstance(lhs, ir.Tup) and isinstance(rhs, ir.Tup):
            return ir.Tup(lhs.items + rhs.items)
        if type(op) is ast.Add and all(isinstance(v, ir.Tup) or getattr(v, "kind", None) == ir.INTS
                                       for v in (lhs, rhs)):
            return self.cpp("ppy::seq_concat({0}, {1})", ir.INTS, self.as_ints(node, lhs), self.as_ints(node, rhs))
        if type(op) is ast.Mult and isinstance(lhs, ir.Tup) and isinstance(rhs, ir.Const) and rhs.kind == ir.INT:
            return ir.Tup(lhs.items * rhs.value)
        raise self.error(node, f"`{_SYMBOLS.get(type(op), '?')}` on {ops.describe(lhs)} and {ops.describe(rhs)} "
                               "is not supported in a region")

    def as_ints(self, node: ast.AST, v: Any) -> ir.Atom:
        if getattr(v, "kind", None) == ir.INTS:
            return v
        if isinstance(v, ir.Tup) and all(getattr(i, "kind", None) == ir.INT for i in v.items):
            fmt = "std::vector<int64_t>{" + ", ".join(f"{{{i}}}" for i in range(len(v.items))) + "}"
            return self.cpp(fmt, ir.INTS, *v.items)
        raise self.error(node, f"expected a sequence of ints, got {ops.describe(v)}")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            t = self.truth_of(node, operand)
            return ir.Const(not t.value, ir.BOOL) if isinstance(t, ir.Const) else self.cpp("(!{0})", ir.BOOL, t)
        if isinstance(operand, ir.Const):
            return self.fold(node, _PY_UNARYOPS[type(node.op)], operand)
        kind = getattr(operand, "kind", None)
        if kind == ir.TENSOR:
            return self.call_op(node, ops.OpSpec(ops.UNARYOPS[type(node.op)]), [operand], {}, method=True)
        if kind in ir.SCALAR_KINDS and isinstance(node.op, ast.USub):
            if kind == ir.FLOAT:
                return self.cpp("(-{0})", ir.FLOAT, operand)
            return self.cpp("ppy::py_neg({0})", ir.INT, self.as_int(operand))
        if kind in ir.SCALAR_KINDS and isinstance(node.op, ast.UAdd):
            return operand if kind != ir.BOOL else self.as_int(operand)
        raise self.error(node, f"{_describe(node)} on {ops.describe(operand)} is not supported in a region")

    def fold(self, node: ast.AST, fn: Any, *consts: ir.Const) -> Any:
        try:
            value = fn(*(c.value for c in consts))
        except Exception as exc:
            raise self.error(node, f"this constant expression fails in Python: {type(exc).__name__}: {exc}") \
                from None
        c = _const(value)
        if c is None:
            raise self.error(node, f"the constant {value!r} is not supported in a region")
        return c

    # truth and comparisons
    def truth(self, node: ast.expr) -> ir.Atom:
        return self.truth_of(node, self.value(node))

    def truth_of(self, node: ast.AST, v: Any) -> ir.Atom:
        if isinstance(v, ir.Const):
            return ir.Const(bool(v.value), ir.BOOL)
        if isinstance(v, ir.Tup):
            return ir.Const(bool(v.items), ir.BOOL)
        if isinstance(v, Static):
            return ir.Const(bool(v.value), ir.BOOL)
        kind = v.kind
        if kind == ir.BOOL:
            return v
        if kind == ir.INT:
            return self.cpp("({0} != 0)", ir.BOOL, v)
        if kind == ir.FLOAT:
            return self.cpp("({0} != 0.0)", ir.BOOL, v)
        if kind in (ir.INTS, ir.TENSORS, ir.STR):
            return self.cpp("(!{0}.empty())", ir.BOOL, v)
        if kind == ir.OPT_TENSOR:
            raise self.error(node, "the truth of a Tensor-or-None value is not supported in a region",
                             "Test `x is not None` instead.")
        raise self.error(node, "branching on a tensor's value is not supported in a region",
                         "Branch on shapes, parameters or `is None`; or keep this function Python.")

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        # Python's `and`/`or` return an operand; a region supports them on bools (and constants).
        first = self.value(node.values[0])
        if isinstance(first, ir.Const):
            v = first
            for i, sub in enumerate(node.values):
                v = self.value(sub) if i else first
                if not isinstance(v, ir.Const):
                    if getattr(v, "kind", None) != ir.BOOL:
                        raise self.error(sub, "`and`/`or` are supported on bools in a region")
                    return v
                if (isinstance(node.op, ast.And) and not v.value) or (isinstance(node.op, ast.Or) and v.value):
                    return v
            return v
        if getattr(first, "kind", None) != ir.BOOL:
            raise self.error(node.values[0], "`and`/`or` are supported on bools in a region")
        # Short-circuit with an `if`, so the right side's ATen calls run only when Python runs them.
        out = self.new_var("cond", ir.BOOL)
        self.emit(ir.Declare(out, self.line()))
        self.emit(ir.Move(out, first, self.line()))
        self.short_circuit(node, out, node.values[1:])
        return out

    def short_circuit(self, node: ast.BoolOp, out: ir.Var, rest: list[ast.expr]) -> None:
        if not rest:
            return
        saved, self.body = self.body, []
        v = self.value(rest[0])
        if getattr(v, "kind", None) != ir.BOOL:
            raise self.error(rest[0], "`and`/`or` are supported on bools in a region")
        self.emit(ir.Move(out, v, self.line()))
        self.short_circuit(node, out, rest[1:])
        inner, self.body = self.body, saved
        if isinstance(node.op, ast.And):
            self.emit(ir.If(out, tuple(inner), (), self.line()))
        else:
            self.emit(ir.If(out, (), tuple(inner), self.line()))

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.value(comp)
            part = self.compare(node, op, left, right)
            if result is None:
                result = part
            elif isinstance(result, ir.Const):
                result = part if result.value else result
            elif isinstance(part, ir.Const):
                result = result if part.value else part
            else:
                result = self.cpp("({0} && {1})", ir.BOOL, result, part)
            left = right
        return result

    def compare(self, node: ast.AST, op: ast.cmpop, a: Any, b: Any) -> Any:
        t = type(op)
        if t in (ast.Is, ast.IsNot):
            return self.identity(node, t is ast.Is, a, b)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const):
            return self.fold(node, _PY_COMPARE[t], a, b)
        ka, kb = getattr(a, "kind", None), getattr(b, "kind", None)
        if ka == ir.TENSOR or (kb == ir.TENSOR and ka in ir.SCALAR_KINDS):
            if t not in ops.COMPARE_OPS:
                raise self.error(node, f"{_describe(node)} on tensors is not supported in a region")
            name, swapped = ops.COMPARE_OPS[t]
            if ka == ir.TENSOR:
                return self.call_op(node, ops.OpSpec(name), [a, b], {}, method=True)
            return self.call_op(node, ops.OpSpec(swapped), [b, a], {}, method=True)
        if ka in ir.SCALAR_KINDS and kb in ir.SCALAR_KINDS and t in _CPP_COMPARE:
            if ka == kb or {ka, kb} == {ir.INT, ir.BOOL}:
                return self.cpp(f"({{0}} {_CPP_COMPARE[t]} {{1}})", ir.BOOL, a, b)
            return self.cpp(f"(ppy::exact({{0}}) {_CPP_COMPARE[t]} ppy::exact({{1}}))", ir.BOOL, a, b)
        if ka == kb == ir.STR and t in (ast.Eq, ast.NotEq):
            return self.cpp(f"(std::string({{0}}) {_CPP_COMPARE[t]} std::string({{1}}))", ir.BOOL, a, b)
        if ka == ir.DTYPE and kb == ir.DTYPE and t in (ast.Eq, ast.NotEq):
            return self.cpp(f"({{0}} {_CPP_COMPARE[t]} {{1}})", ir.BOOL, a, b)
        if t in (ast.Eq, ast.NotEq) and (isinstance(a, ir.Tup) or isinstance(b, ir.Tup) or ka == ir.INTS):
            lhs, rhs = self.as_ints(node, a), self.as_ints(node, b)
            return self.cpp(f"({{0}} {_CPP_COMPARE[t]} {{1}})", ir.BOOL, lhs, rhs)
        raise self.error(node, f"comparing {ops.describe(a)} with {ops.describe(b)} is not supported in a region")

    def identity(self, node: ast.AST, is_: bool, a: Any, b: Any) -> ir.Atom:
        if isinstance(b, ir.Const) and b.kind == ir.NONE:
            a, b = b, a
        if isinstance(a, ir.Const) and a.kind == ir.NONE:
            kind = getattr(b, "kind", None)
            if kind == ir.OPT_TENSOR:
                return self.cpp("(!{0}.has_value())" if is_ else "{0}.has_value()", ir.BOOL, b)
            if isinstance(b, ir.Const) or kind is not None or isinstance(b, (ir.Tup, Static)):
                same = isinstance(b, ir.Const) and b.kind == ir.NONE
                return ir.Const(same == is_, ir.BOOL)
        if isinstance(a, Static) and isinstance(b, Static):
            return ir.Const((a.value is b.value) == is_, ir.BOOL)
        raise self.error(node, "`is` is supported in a region only to compare with None")

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        test = self.truth(node.test)
        if isinstance(test, ir.Const):
            return self.value(node.body if test.value else node.orelse)
        results = []
        bodies = []
        for expr in (node.body, node.orelse):
            saved, self.body = self.body, []
            results.append(self.value(expr))
            bodies.append(self.body)
            self.body = saved
        joined = self.join(node, "value", results, bodies)
        if isinstance(joined, _Unbound):
            raise self.error(node, "the two branches of this conditional expression have different kinds")
        self.emit(ir.If(test, tuple(bodies[0]), tuple(bodies[1]), self.line()))
        return joined

    # indexing
    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.value(node.value)
        if isinstance(base, ir.Tup):
            return self.tuple_index(node, base)
        kind = getattr(base, "kind", None)
        if kind in (ir.INTS, ir.TENSORS):
            return self.sequence_index(node, base)
        if kind != ir.TENSOR:
            raise self.error(node, f"indexing {ops.describe(base)} is not supported in a region")
        return self.getitem(node, base, self.index_items(node.slice))

    def tuple_index(self, node: ast.Subscript, base: ir.Tup) -> Any:
        idx = self.value(node.slice) if not isinstance(node.slice, ast.Slice) else None
        if isinstance(node.slice, ast.Slice):
            parts = [self.value(p) if p is not None else ir.Const(None, ir.NONE)
                     for p in (node.slice.lower, node.slice.upper, node.slice.step)]
            if all(isinstance(p, ir.Const) for p in parts):
                return ir.Tup(base.items[slice(*(p.value for p in parts))])
            return self.sequence_index(node, self.as_ints(node, base))
        if isinstance(idx, ir.Const) and idx.kind == ir.INT:
            try:
                return base.items[idx.value]
            except IndexError:
                raise self.error(node, "tuple index out of range") from None
        if getattr(idx, "kind", None) == ir.INT and all(getattr(i, "kind", None) == ir.INT for i in base.items):
            return self.cpp("ppy::seq_index({0}, {1})", ir.INT, self.as_ints(node, base), idx)
        raise self.error(node, "indexing a tuple needs an int index known at compile time")

    def sequence_index(self, node: ast.Subscript, base: ir.Atom) -> Any:
        item = ir.INT if base.kind == ir.INTS else ir.TENSOR
        if isinstance(node.slice, ast.Slice):
            parts = []
            for p in (node.slice.lower, node.slice.upper, node.slice.step):
                v = self.value(p) if p is not None else ir.Const(None, ir.NONE)
                if getattr(v, "kind", None) not in (ir.INT, ir.NONE):
                    raise self.error(node, "slice bounds must be ints or None")
                parts.append(v)
            if base.kind != ir.INTS:
                raise self.error(node, "slicing a list of tensors is not supported in a region")
            opt = ["c10::optional<int64_t>()" if isinstance(p, ir.Const) and p.value is None else
                   f"c10::optional<int64_t>({{{i + 1}}})" for i, p in enumerate(parts)]
            args = [p for p in parts if not (isinstance(p, ir.Const) and p.value is None)]
            # renumber the placeholders of the parts that are present
            k = 1
            fmt = []
            for o in opt:
                if "{" in o:
                    fmt.append(f"c10::optional<int64_t>({{{k}}})")
                    k += 1
                else:
                    fmt.append(o)
            return self.cpp("ppy::seq_slice({0}, " + ", ".join(fmt) + ")", ir.INTS, base, *args)
        idx = self.value(node.slice)
        if getattr(idx, "kind", None) != ir.INT:
            raise self.error(node.slice, "a sequence index must be an int")
        if item == ir.INT:
            return self.cpp("ppy::seq_index({0}, {1})", ir.INT, base, idx)
        n = self.cpp("static_cast<int64_t>({0}.size())", ir.INT, base)
        self.emit(ir.If(self.cpp("({0} < -{1} || {0} >= {1})", ir.BOOL, idx, n),
                        (ir.Raise("IndexError", "tuple index out of range", self.line()),), (), self.line()))
        return self.cpp("{0}[{1} < 0 ? {1} + {2} : {1}]", ir.TENSOR, base, idx, n)

    def index_items(self, sl: ast.expr) -> tuple[ir.IndexItem, ...]:
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        items = []
        for e in elts:
            if isinstance(e, ast.Slice):
                parts = []
                for p in (e.lower, e.upper, e.step):
                    v = self.value(p) if p is not None else None
                    if v is not None and not (getattr(v, "kind", None) in (ir.INT, ir.BOOL) or
                                              (isinstance(v, ir.Const) and v.kind == ir.NONE)):
                        raise self.error(p, f"slice bounds must be ints or None, got {ops.describe(v)}")
                    parts.append(None if v is None or (isinstance(v, ir.Const) and v.kind == ir.NONE) else v)
                items.append(ir.IndexItem("slice", tuple(parts)))
                continue
            v = self.value(e)
            if isinstance(v, Static) and v.value is Ellipsis:
                items.append(ir.IndexItem("ellipsis"))
            elif isinstance(v, ir.Const) and v.kind == ir.NONE:
                items.append(ir.IndexItem("none"))
            elif getattr(v, "kind", None) == ir.INT:
                items.append(ir.IndexItem("int", (v,)))
            elif getattr(v, "kind", None) == ir.BOOL:
                items.append(ir.IndexItem("bool", (v,)))
            elif getattr(v, "kind", None) == ir.TENSOR:
                items.append(ir.IndexItem("tensor", (v,)))
            else:
                raise self.error(e, f"indexing a tensor with {ops.describe(v)} is not supported in a region",
                                 "Index with ints, slices, None, ..., or tensors.")
        return tuple(items)

    def getitem(self, node: ast.AST, base: ir.Atom, index: tuple[ir.IndexItem, ...]) -> ir.Var:
        return self.assign(ir.GetItem(base, index), ir.TENSOR)

    def setitem(self, target: ast.Subscript, value: Any) -> None:
        base = self.value(target.value)
        if getattr(base, "kind", None) != ir.TENSOR:
            raise self.error(target, "only tensors support item assignment in a region")
        self.store_item(target, base, self.index_items(target.slice), value)

    def store_item(self, node: ast.AST, base: ir.Atom, index: tuple[ir.IndexItem, ...], value: Any) -> None:
        kind = getattr(value, "kind", None)
        if kind not in (ir.TENSOR, ir.FLOAT, ir.INT, ir.BOOL):
            raise self.error(node, f"assigning {ops.describe(value)} into a tensor is not supported in a region")
        self.emit(ir.SetItem(base, index, value, self.line()))

    # calls
    def visit_Call(self, node: ast.Call) -> Any:
        func = self.value(node.func)
        args = self.starred_items(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(kw.value, "`**kwargs` in a call is not supported in a region")
            kwargs[kw.arg] = self.value(kw.value)
        if isinstance(func, _Method):
            return self.method_call(node, func, args, kwargs)
        if isinstance(func, Static):
            return self.static_call(node, func.value, args, kwargs)
        raise self.error(node.func, f"calling {ops.describe(func)} is not supported in a region")

    def method_call(self, node: ast.Call, m: _Method, args: list, kwargs: dict) -> Any:
        t, name = m.receiver, m.name
        if name == "size":
            if not args and not kwargs:
                return self.cpp("{0}.sizes().vec()", ir.INTS, t)
            d = args[0] if args else kwargs.get("dim")
            if getattr(d, "kind", None) == ir.INT and len(args) + len(kwargs) == 1:
                return self.cpp("{0}.size({1})", ir.INT, t, d)
        if name == "dim" and not args and not kwargs:
            return self.cpp("static_cast<int64_t>({0}.dim())", ir.INT, t)
        if name == "numel" and not args and not kwargs:
            return self.cpp("{0}.numel()", ir.INT, t)
        adapter = adapters.METHODS.get(name)
        if adapter is not None:
            return self.call_adapter(node, adapter, [t] + args, kwargs)
        spec = ops.method_spec(name)
        if spec is None:
            raise self.error(node.func, f"Tensor method `.{name}()` is not supported in a region",
                             "ppy_magic.supported_ops() lists what regions can call.")
        return self.call_op(node, spec, [t] + args, kwargs, method=True, display=f"Tensor.{name}")

    def static_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        display = ast.unparse(node.func)
        if fn is adapters.unsupported:
            raise Unsupported(self.message(node.args[0]) if node.args else "unsupported")
        if fn in _MATH:
            return self.math_call(node, fn, args, kwargs)
        if fn in (len, int, float, bool, abs, min, max, isinstance):
            return self.builtin_call(node, fn, args, kwargs)
        name = adapters.lookup(fn)
        if name is not None:
            return self.call_adapter(node, name, args, kwargs)
        callee = self.callee_def(fn)
        if callee is not None:
            return self.call_user(node, callee, args, kwargs)
        spec = ops.function_spec(fn)
        if spec is not None:
            return self.call_op(node, spec, args, kwargs, method=False, display=display)
        if isinstance(fn, types.FunctionType) and not fn.__module__.startswith("torch"):
            raise self.error(node.func, _PLAIN_FUNCTION.format(name=display), _PLAIN_FUNCTION_HINT)
        raise self.error(node.func, f"`{display}` is not supported in a region",
                         "Regions call torch operators and other @ppy.opt functions; "
                         "ppy_magic.supported_ops() lists the operators.")

    def math_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        if kwargs or len(args) != 1 or getattr(args[0], "kind", None) not in ir.SCALAR_KINDS:
            raise self.error(node, f"math.{fn.__name__} takes one number in a region")
        if isinstance(args[0], ir.Const):
            return self.fold(node, fn, args[0])
        template, kind = _MATH[fn]
        return self.cpp(template, kind, self.as_float(args[0]))

    def builtin_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        if kwargs:
            raise self.error(node, f"{fn.__name__}() with keywords is not supported in a region")
        if fn is isinstance and len(args) == 2 and isinstance(args[1], Static):
            want = args[1].value
            kinds = {int: (ir.INT, ir.BOOL), float: (ir.FLOAT,), bool: (ir.BOOL,), torch.Tensor: (ir.TENSOR,),
                     tuple: (), list: ()}
            if want in kinds:
                v = args[0]
                if isinstance(v, ir.Tup):
                    return ir.Const(want in (tuple, list), ir.BOOL)
                return ir.Const(getattr(v, "kind", None) in kinds[want], ir.BOOL)
        if len(args) == 1:
            v = args[0]
            kind = getattr(v, "kind", None)
            if isinstance(v, ir.Const) and fn is not len:
                return self.fold(node, fn, v)
            if fn is len:
                if isinstance(v, ir.Tup):
                    return ir.Const(len(v.items), ir.INT)
                if kind == ir.TENSOR:
                    return self.cpp("ppy::checked_len_dim0({0})", ir.INT, v)
                if kind in (ir.INTS, ir.TENSORS):
                    return self.cpp("static_cast<int64_t>({0}.size())", ir.INT, v)
            if fn is float and kind in (ir.INT, ir.BOOL, ir.FLOAT):
                return self.as_float(v)
            if fn is int and kind in (ir.INT, ir.BOOL):
                return self.as_int(v)
            if fn is int and kind == ir.FLOAT:
                return self.cpp("ppy::math_trunc({0})", ir.INT, v)
            if fn is bool and kind in ir.SCALAR_KINDS + (ir.INTS,):
                return self.truth_of(node, v)
            if fn is abs and kind == ir.FLOAT:
                return self.cpp("std::fabs({0})", ir.FLOAT, v)
            if fn is abs and kind in (ir.INT, ir.BOOL):
                return self.cpp("({0} < 0 ? ppy::py_neg({0}) : {0})", ir.INT, self.as_int(v))
        if fn in (min, max) and len(args) >= 2:
            kinds = {getattr(a, "kind", None) for a in args}
            if len(kinds) == 1 and kinds.pop() in (ir.INT, ir.FLOAT):
                if all(isinstance(a, ir.Const) for a in args):
                    return self.fold(node, fn, *args)
                out = args[0]
                pick = "<" if fn is min else ">"
                for a in args[1:]:  # Python keeps the first of equal values
                    out = self.cpp(f"({{1}} {pick} {{0}} ? {{1}} : {{0}})", out.kind, out, a)
                return out
        raise self.error(node, f"{fn.__name__}() with these arguments is not supported in a region")

    def call_op(self, node: ast.AST, spec: ops.OpSpec, args: list, kwargs: dict, method: bool = False,
                display: str | None = None) -> Any:
        overload, bound = ops.resolve(spec, args, kwargs, method=method, display=display or spec.aten)
        kinds = ops.result_kinds(overload)
        if kinds is None:
            raise self.error(node, f"{display or spec.aten} returns {', '.join(overload.returns)}, "
                                   "which a region cannot represent exactly")
        call = ir.Call(overload, bound)
        if overload.is_inplace:
            self.emit(ir.Effect(call, self.line()))
            return bound[0]  # in-place ops return self: the same tensor
        if len(kinds) == 1:
            return self.assign(call, kinds[0])
        targets = tuple(self.new_var("t", k) for k in kinds)
        self.emit(ir.Assign(targets, call, self.line()))
        return ir.Tup(targets, ops.result_type(overload))

    # callees: other @ppy.opt functions and adapters, compiled as specialised C++ helpers
    def callee_def(self, fn: Any) -> tuple[ast.FunctionDef, Globals, str, list[str]] | None:
        if isinstance(fn, CellFunction):
            return fn.node, self.g, self.filename, self.source_lines
        target = getattr(fn, "__wrapped__", fn) if getattr(fn, "__ppy_region__", False) else fn
        if isinstance(target, types.FunctionType) and getattr(target, "__ppy_opt__", 0):
            import inspect
            import textwrap

            try:
                lines, start = inspect.getsourcelines(target)
            except (OSError, TypeError):
                return None
            src = textwrap.dedent("".join(lines))
            tree = ast.parse(src)
            node = tree.body[0]
            ast.increment_lineno(node, start - 1)
            g = collect_globals(ast.Module(body=[], type_ignores=[]), target.__globals__)
            import linecache

            file_lines = [ln.rstrip("\n") for ln in linecache.getlines(target.__code__.co_filename)]
            return node, g, target.__code__.co_filename, file_lines
        return None

    def call_user(self, node: ast.Call, callee: tuple, args: list, kwargs: dict) -> Any:
        fdef, g, filename, lines = callee
        return self.call_helper(node, fdef, g, filename, lines, args, kwargs, adapter=False)

    def call_adapter(self, node: ast.AST, name: str, args: list, kwargs: dict) -> Any:
        defs, lines = adapters.definitions()
        g = Globals(dict(adapters.namespace()))
        return self.call_helper(node, defs[name], g, "<adapter>", lines, args, kwargs, adapter=True)

    def call_helper(self, node: ast.AST, fdef: ast.FunctionDef, g: Globals, filename: str, lines: list[str],
                    args: list, kwargs: dict, adapter: bool) -> Any:
        who = fdef.name
        if not adapter and (who in self.ctx.stack or who == self.region_name):
            raise self.error(node, f"'{who}' calls itself; recursion is not supported in a region")
        params = fdef.args
        if params.vararg or params.kwarg or params.kwonlyargs or params.posonlyargs:
            raise self.error(node, f"calling '{who}': only plain positional parameters are supported")
        names = [a.arg for a in params.args]
        if len(args) > len(names):
            raise self.error(node, f"{who}() takes {len(names)} arguments but {len(args)} were given")
        defaults = dict(zip(names[len(names) - len(params.defaults):], params.defaults))
        bound: dict[str, Any] = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise self.error(node, f"{who}() got an unexpected or repeated argument '{k}'")
            bound[k] = v
        for n in names:
            if n not in bound:
                if n not in defaults:
                    raise self.error(node, f"{who}() missing required argument '{n}'")
                c = _const(ast.literal_eval(defaults[n])) if _literal(defaults[n]) else None
                if c is None:
                    raise self.error(node, f"the default of '{n}' in {who}() is not a literal")
                bound[n] = c
        key = (id(fdef), tuple((n, _structure(bound[n])) for n in names))
        if key not in self.ctx.specialised:
            self.ctx.specialised[key] = self.specialise(node, fdef, g, filename, lines, names, bound, adapter)
        symbol, structure, kinds = self.ctx.specialised[key]
        runtime_args = tuple(a for n in names for a in _atoms_of(bound[n]) if isinstance(a, ir.Var))
        targets = tuple(self.new_var("r", k) for k in kinds)
        self.emit(ir.Assign(targets, ir.CallFunction(symbol, runtime_args), self.line()))
        it = iter(targets)
        return _rebuild(structure, it)

    def specialise(self, node: ast.AST, fdef: ast.FunctionDef, g: Globals, filename: str, lines: list[str],
                   names: list[str], bound: dict, adapter: bool) -> tuple[str, Any, tuple[str, ...]]:
        sub = FunctionCompiler(fdef, g, filename, lines, self.ctx, region_name=self.region_name, adapter=adapter,
                               helper=True)
        params: list[ir.Var] = []
        for n in names:
            sub.locals[n] = sub.rename_params(bound[n], n, params)
        self.ctx.stack.append(fdef.name)
        try:
            sub.compile_body(fdef.body)
        except Unsupported:
            raise
        except CompileError as err:
            if adapter:
                raise self.error(node, err.message, err.hint) from None
            raise
        finally:
            self.ctx.stack.pop()
        if not sub.terminated:
            sub.emit(ir.Return((), "helper", sub.line()))
            sub.returns.append(("helper", _structure(ir.Const(None, ir.NONE))))
        structures = {s for _, s in sub.returns}
        if len(structures) != 1:
            raise self.error(node, f"'{fdef.name}' returns different kinds of value on different paths")
        structure = structures.pop()
        kinds = _kinds_of(structure)
        symbol = f"ppy_fn_{len(self.ctx.helpers)}_{fdef.name.strip('_')}"
        body = tuple(sub.body)
        self.ctx.helpers.append(ir.Helper(symbol, tuple(params), body, kinds, not adapter))
        if not adapter:
            for ln in range(fdef.lineno, (fdef.end_lineno or fdef.lineno) + 1):
                if 0 < ln <= len(lines):
                    self.ctx.source_lines.setdefault(ln, lines[ln - 1].strip())
        return symbol, structure, kinds

    def rename_params(self, value: Any, name: str, params: list[ir.Var]) -> Any:
        """A helper's view of an argument: runtime atoms become its parameters, the rest stays static."""
        if isinstance(value, ir.Tup):
            return ir.Tup(tuple(self.rename_params(v, name, params) for v in value.items), value.structseq)
        if isinstance(value, ir.Var):
            var = self.new_var(name, value.kind)
            params.append(var)
            return var
        return value


# ---- helpers for values ---------------------------------------------------------------------

_UNBOUND = object()


@dataclass(frozen=True)
class _Unbound:
    name: str
    why: str = "it is not bound on every path to here"


@dataclass(frozen=True)
class _Starred:
    """The starred part of an unpacking whose length is known only at run time."""

    value: ir.Var


@dataclass(frozen=True)
class CellFunction:
    """A decorated function defined in the source being compiled (not yet run)."""

    node: ast.FunctionDef


@dataclass(frozen=True)
class _Method:
    receiver: ir.Atom
    name: str


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return False


def _structure(value: Any) -> Any:
    """A hashable description of a value: static parts exactly, runtime atoms by kind."""
    if isinstance(value, ir.Tup):
        return ("tuple", tuple(_structure(v) for v in value.items), value.structseq)
    if isinstance(value, ir.Var):
        return ("var", value.kind)
    if isinstance(value, ir.Const):
        return ("const", value.kind, repr(value.value))
    if isinstance(value, Static):
        return ("static", id(value.value))
    return ("other", repr(value))


def _atoms_of(value: Any) -> list:
    if isinstance(value, ir.Tup):
        return [a for v in value.items for a in _atoms_of(v)]
    return [value]


def _kinds_of(structure: Any) -> tuple[str, ...]:
    tag = structure[0]
    if tag == "tuple":
        return tuple(k for s in structure[1] for k in _kinds_of(s))
    if tag == "var":
        return (structure[1],)
    return ()


def _rebuild(structure: Any, runtime: Any) -> Any:
    tag = structure[0]
    if tag == "tuple":
        return ir.Tup(tuple(_rebuild(s, runtime) for s in structure[1]), structure[2])
    if tag == "var":
        return next(runtime)
    if tag == "const":
        return ir.Const(ast.literal_eval(structure[2]) if structure[1] != ir.DTYPE else
                        eval(structure[2], {"torch": torch}), structure[1])  # noqa: S307 - our own repr
    raise CompileError("a helper returned a value that cannot cross a call")


_PLAIN_FUNCTION = "`{name}` is a Python function, not a torch operator or a @ppy.opt function"
_PLAIN_FUNCTION_HINT = "Decorate it with @ppy.opt so the region can call it, or keep this function Python."

_HINTS = {
    "Expr": "A region has no side effects: assign the value, or call an in-place method like x.add_(y).",
    "While": "`while` loops are not supported in a region; loop over range(n), or keep this function Python.",
    "For": "Loop over range(n) with int bounds, or keep this function Python.",
    "Try": "Exceptions cannot be caught inside a region; handle them around the call.",
    "With": "Context managers are not supported in a region; put the `with` around the call.",
    "Lambda": "Define the computation inline instead of as a lambda.",
    "ListComp": "Comprehensions are not supported in a region; write the items out or keep this function Python.",
    "GeneratorExp": "Comprehensions are not supported in a region.",
    "Yield": "Generators cannot be regions.",
    "Global": "A region cannot rebind globals; return the value instead.",
    "Nonlocal": "A region cannot rebind outer variables; return the value instead.",
    "FunctionDef": "Define helper functions at the top level of the cell, decorated @ppy.opt.",
    "JoinedStr": "f-strings are not supported in a region.",
}


def _describe(node: ast.AST) -> str:
    names = {"Expr": "a bare expression statement", "While": "`while`", "For": "`for`", "Try": "`try`",
             "With": "`with`", "Lambda": "`lambda`", "ListComp": "a list comprehension",
             "SetComp": "a set comprehension", "DictComp": "a dict comprehension",
             "GeneratorExp": "a generator expression", "Yield": "`yield`", "YieldFrom": "`yield from`",
             "Global": "`global`", "Nonlocal": "`nonlocal`", "If": "`if`", "IfExp": "a conditional expression",
             "Subscript": "indexing", "Attribute": "an attribute", "AugAssign": "augmented assignment",
             "Compare": "a comparison", "BoolOp": "`and`/`or`", "Tuple": "a tuple", "List": "a list",
             "Dict": "a dict", "Set": "a set", "Await": "`await`", "Assert": "`assert`", "Raise": "`raise`",
             "Delete": "`del`", "Import": "`import`", "ImportFrom": "`import`",
             "FunctionDef": "a nested function", "AsyncFunctionDef": "a nested function",
             "ClassDef": "a class", "JoinedStr": "an f-string", "Starred": "`*` unpacking",
             "NamedExpr": "`:=`", "AnnAssign": "an annotated assignment", "Slice": "a slice",
             "Break": "`break`", "Continue": "`continue`", "Match": "`match`"}
    if isinstance(node, ast.UnaryOp):
        symbol = {ast.Not: "not", ast.Invert: "~", ast.USub: "-", ast.UAdd: "+"}[type(node.op)]
        return f"the unary operator `{symbol}`"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return f"the call statement `{ast.unparse(node)}`"
    return names.get(type(node).__name__, f"`{type(node).__name__}`")


# ---- entry point -------------------------------------------------------------------------------


def _param_kind(compiler: FunctionCompiler, arg: ast.arg, default: ast.expr | None) -> str:
    ann = arg.annotation
    if ann is None:
        if default is not None and isinstance(default, ast.Constant) and default.value is None:
            return ir.OPT_TENSOR
        return ir.TENSOR  # documented: unannotated parameters are tensors
    obj = _static_value(ann, compiler.g)
    if obj is torch.Tensor or obj is torch.nn.Parameter:
        return ir.TENSOR
    if obj in (float, int, bool, str):
        return _ANNOTATIONS[obj.__name__]
    if obj is list:
        return ir.TENSORS
    text = ast.unparse(ann).replace(" ", "")
    if text in ("Tensor|None", "torch.Tensor|None", "Optional[Tensor]", "Optional[torch.Tensor]",
                "typing.Optional[torch.Tensor]", "None|torch.Tensor", "None|Tensor"):
        return ir.OPT_TENSOR
    if text in ("list[torch.Tensor]", "List[torch.Tensor]", "list[Tensor]", "List[Tensor]",
                "tuple[torch.Tensor,...]", "Sequence[torch.Tensor]"):
        return ir.TENSORS
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str) and ann.value in _ANNOTATIONS:
        return _ANNOTATIONS[ann.value]
    raise compiler.error(ann, f"parameter '{arg.arg}' has an annotation a region does not understand",
                         "Annotate parameters as torch.Tensor, float, int, bool, str, "
                         "torch.Tensor | None or list[torch.Tensor].")


def compile_function(fn: ast.FunctionDef, g: Globals, filename: str, source_lines: list[str],
                     level: int) -> ir.Function:
    ctx = Context()
    comp = FunctionCompiler(fn, g, filename, source_lines, ctx, region_name=fn.name)
    a = fn.args
    if a.vararg or a.kwarg:
        raise comp.error(fn, "*args and **kwargs are not supported in a region", "Name every parameter.")
    if a.kwonlyargs or a.posonlyargs:
        raise comp.error(fn, "keyword-only and positional-only parameters are not supported in a region",
                         "Use plain positional parameters.")
    params = []
    defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(a.args, defaults):
        kind = _param_kind(comp, arg, default)
        value, has_default = None, default is not None
        if has_default:
            if not _literal(default):
                raise comp.error(default, "a default value must be a literal in a region")
            value = ast.literal_eval(default)
            ok = {ir.FLOAT: float, ir.INT: int, ir.BOOL: bool, ir.STR: str}.get(kind)
            if not ((ok is not None and type(value) is ok) or (kind == ir.OPT_TENSOR and value is None)):
                raise comp.error(default, f"default {value!r} does not match the parameter's annotation",
                                 "Give float parameters float defaults (1.0, not 1).")
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
        raise comp.error(fn, "the function returns different kinds of value on different paths",
                         "Return the same structure (e.g. one tensor) everywhere.")
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    lines = {ln: source_lines[ln - 1].strip() for ln in range(fn.lineno, (fn.end_lineno or fn.lineno) + 1)
             if 0 < ln <= len(source_lines)}
    lines.update(ctx.source_lines)
    return ir.Function(
        name=fn.name, qualname=fn.name, params=tuple(params), body=tuple(comp.body), level=level,
        filename=filename, first_line=first, def_line=fn.lineno, ret=specs.pop(),
        helpers=tuple(ctx.helpers), result_types=tuple(ctx.result_types), source_lines=lines,
        frozen_globals=dict(ctx.frozen))
