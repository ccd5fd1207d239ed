"""Front end: the Python source of one ``@ppy.opt`` function -> ``ir.Function``.

The visitor is its own whitelist: each supported AST node has a ``visit_<Node>``;
anything else reaches ``generic_visit`` and becomes a located ``CompileError``.
Nested expressions are flattened into temporaries in Python's evaluation order,
so the C++ makes the same ATen calls in the same order as eager.
"""

from __future__ import annotations

import ast
import builtins
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from . import ir, ops
from .errors import CompileError, Location

from .decorator import MAX_LEVEL

_ANNOTATIONS = {"Tensor": ir.TENSOR, "float": ir.FLOAT, "int": ir.INT, "bool": ir.BOOL}


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
    obj = _static_value(target, g)
    return obj is decorator.opt


def _static_value(node: ast.expr, g: Globals) -> Any:
    """The object a dotted name (``ppy.opt``, ``torch.nn.functional``) refers to, or None."""
    if isinstance(node, ast.Name):
        ok, value = g.lookup(node.id)
        return value if ok else None
    if isinstance(node, ast.Attribute):
        base = _static_value(node.value, g)
        if isinstance(base, types.ModuleType):
            return getattr(base, node.attr, None)
    return None


def opt_level(fn: ast.FunctionDef | ast.AsyncFunctionDef, g: Globals) -> int | None:
    """The level of a ``@ppy.opt(...)`` decorator on `fn`, or None if it has none.

    Levels that are not an int literal are checked when the decorator runs.
    """
    for dec in fn.decorator_list:
        if not _is_opt_decorator(dec, g):
            continue
        if not isinstance(dec, ast.Call):
            return MAX_LEVEL  # bare @ppy.opt
        if not dec.args and not dec.keywords:
            return MAX_LEVEL
        arg = dec.args[0] if dec.args else dec.keywords[0].value
        if isinstance(arg, ast.Constant) and type(arg.value) is int and 0 <= arg.value <= MAX_LEVEL:
            return arg.value
        return -1  # invalid: the decorator itself raises when the cell runs
    return None


def collect_globals(tree: ast.Module, namespace: dict[str, Any]) -> Globals:
    """Global names as a function compiled from `tree` will see them.

    A name the source binds at top level exactly once, by an import of a known
    module or a literal int/float/bool assignment, has that value; a name it
    binds any other way (or twice) is unknown: its value is not known before the
    cell runs. Other names come from `namespace`.
    """
    bindings: dict[str, list[tuple[bool, Any]]] = {}

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
            bind(stmt.targets[0].id, value, type(value) in (int, float, bool))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(stmt.name, None, False)
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
    return Globals(values, unknown)


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


def _loc(node: ast.AST, filename: str, line_offset: int) -> Location:
    return Location(filename, node.lineno + line_offset, node.col_offset,
                    getattr(node, "end_col_offset", None) if getattr(node, "end_lineno", None) == node.lineno
                    else None)


class FunctionCompiler(ast.NodeVisitor):
    """Turns one FunctionDef into ``ir.Function``; raises CompileError otherwise."""

    def __init__(self, fn: ast.FunctionDef, g: Globals, filename: str, source_lines: list[str],
                 level: int, line_offset: int = 0):
        self.fn = fn
        self.g = g
        self.filename = filename
        self.source_lines = source_lines
        self.line_offset = line_offset
        self.level = level
        self.locals: dict[str, ir.Var] = {}
        self.body: list[ir.Stmt] = []
        self.used_names: set[str] = set()
        self.frozen: dict[str, Any] = {}
        self.returned = False
        self._node: ast.AST | None = None

    # -- errors ------------------------------------------------------------
    def error(self, node: ast.AST, message: str, hint: str | None = None) -> CompileError:
        loc = _loc(node, self.filename, self.line_offset)
        src = self.source_lines[node.lineno - 1] if 0 < node.lineno <= len(self.source_lines) else None
        return CompileError(message, loc, hint, self.fn.name, src)

    def visit(self, node: ast.AST) -> Any:
        """Dispatch, turning any unexpected failure into an error located at the node."""
        outer, self._node = self._node, node
        try:
            return super().visit(node)
        except CompileError:
            raise
        except ops.ResolveError as exc:
            raise self.error(node, str(exc)) from None
        except Exception as exc:  # a bug here must not hide where the user's code is
            if _debug():
                raise
            raise self.error(node, f"cannot compile this ({type(exc).__name__}: {exc})") from None
        finally:
            self._node = outer

    def generic_visit(self, node: ast.AST) -> Any:
        what = type(node).__name__
        hint = _HINTS.get(what, "Keep this function to tensor operations, or leave it as plain Python.")
        raise self.error(node, f"{_describe(node)} is not supported in a region", hint)

    # -- the function --------------------------------------------------------
    def compile(self) -> ir.Function:
        fn = self.fn
        a = fn.args
        if a.vararg or a.kwarg:
            raise self.error(fn, "*args and **kwargs are not supported in a region",
                             "Name every parameter.")
        if a.kwonlyargs or a.posonlyargs:
            raise self.error(fn, "keyword-only and positional-only parameters are not supported in a region",
                             "Use plain positional parameters.")
        params = []
        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
        for arg, default in zip(a.args, defaults):
            kind = self._param_kind(arg)
            has_default = default is not None
            value = None
            if has_default:
                value = self._default_value(default, kind)
            var = self._new_var(arg.arg, kind)
            self.locals[arg.arg] = var
            params.append(ir.Param(var.name, kind, value, has_default))
        for stmt in fn.body:
            if self.returned:
                raise self.error(stmt, "code after `return` is not supported in a region")
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str) and stmt is fn.body[0]):
                continue  # the docstring
            self.visit(stmt)
        if not self.returned:
            raise self.error(fn, "a region must end with `return <tensor>`")
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        lines = {ln: self.source_lines[ln - 1 - self.line_offset].strip()
                 for ln in range(fn.lineno + self.line_offset, (fn.end_lineno or fn.lineno) + self.line_offset + 1)
                 if 0 <= ln - 1 - self.line_offset < len(self.source_lines)}
        return ir.Function(
            name=fn.name, qualname=fn.name, params=tuple(params), body=tuple(self.body), level=self.level,
            filename=self.filename, first_line=first + self.line_offset, def_line=fn.lineno + self.line_offset,
            source_lines=lines, frozen_globals=dict(self.frozen))

    def _param_kind(self, arg: ast.arg) -> str:
        if arg.annotation is None:
            return ir.TENSOR  # documented: unannotated parameters are tensors
        ann = arg.annotation
        obj = _static_value(ann, self.g)
        if obj is torch.Tensor or obj is torch.nn.Parameter:
            return ir.TENSOR
        if obj in (float, int, bool):
            return _ANNOTATIONS[obj.__name__]
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str) and ann.value in _ANNOTATIONS:
            return _ANNOTATIONS[ann.value]
        raise self.error(ann, f"parameter '{arg.arg}' has an annotation a region does not understand",
                         "Annotate parameters as torch.Tensor, float, int or bool.")

    def _default_value(self, node: ast.expr, kind: str) -> Any:
        try:
            value = ast.literal_eval(node)
        except ValueError:
            raise self.error(node, "a default value must be a literal in a region") from None
        if kind == ir.FLOAT and type(value) is float or kind == ir.INT and type(value) is int \
                or kind == ir.BOOL and type(value) is bool:
            return value
        raise self.error(node, f"default {value!r} does not match the parameter's annotation",
                         "Give float parameters float defaults (1.0, not 1).")

    def _new_var(self, base: str, kind: str) -> ir.Var:
        name, n = base, 0
        while name in self.used_names:
            n += 1
            name = f"{base}_{n}"
        self.used_names.add(name)
        return ir.Var(name, kind)

    def _line(self, node: ast.AST) -> int:
        return node.lineno + self.line_offset

    def _emit(self, node: ast.AST, call: ir.Call, kind: str, base: str = "t") -> ir.Var:
        var = self._new_var(base, kind)
        self.body.append(ir.Assign(var, call, self._line(self._stmt_node or node)))
        return var

    _stmt_node: ast.AST | None = None

    # -- statements ------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        self._stmt_node = node
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            raise self.error(node.targets[0] if len(node.targets) == 1 else node,
                             "only `name = expression` assignments are supported in a region")
        value = self._value(node.value)
        self.locals[node.targets[0].id] = value  # a Const is folded into its uses
        self._stmt_node = None

    def visit_Return(self, node: ast.Return) -> None:
        self._stmt_node = node
        if node.value is None:
            raise self.error(node, "a region must return a tensor")
        value = self._value(node.value)
        if not (isinstance(value, ir.Var) and value.kind == ir.TENSOR):
            raise self.error(node.value, "a region must return a tensor", "Return one torch.Tensor.")
        self.body.append(ir.Return((value,), "T", self._line(node)))
        self.returned = True
        self._stmt_node = None

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    # -- expressions: each returns an ir.Var or ir.Const ---------------------------
    def _value(self, node: ast.expr) -> ir.Var | ir.Const:
        return self.visit(node)

    def visit_Constant(self, node: ast.Constant) -> ir.Const:
        v = node.value
        if type(v) is bool:
            return ir.Const(v, ir.BOOL)
        if type(v) is int:
            if not -(2**63) <= v < 2**63:
                raise self.error(node, "integer constant does not fit in 64 bits")
            return ir.Const(v, ir.INT)
        if type(v) is float:
            return ir.Const(v, ir.FLOAT)
        raise self.error(node, f"constant {v!r} is not supported in a region",
                         "Use int, float or bool constants.")

    def visit_Name(self, node: ast.Name) -> ir.Var | ir.Const:
        if node.id in self.locals:
            return self.locals[node.id]
        ok, value = self.g.lookup(node.id)
        if ok and type(value) in (int, float, bool):
            self.frozen[node.id] = value
            return self.visit_Constant(ast.copy_location(ast.Constant(value), node))
        if ok:
            raise self.error(node, f"'{node.id}' is a {type(value).__name__}, not a value a region can use",
                             "Regions compute on tensors and int/float/bool values.")
        raise self.error(node, f"name '{node.id}' is not known when the region is compiled",
                         "Define it before the function, as a module, or as an int/float constant.")

    def visit_BinOp(self, node: ast.BinOp) -> ir.Var | ir.Const:
        lhs = self._value(node.left)
        rhs = self._value(node.right)
        op = ops.BINOPS.get(type(node.op))
        symbol = _OPERATOR_SYMBOLS.get(type(node.op), type(node.op).__name__)
        if isinstance(lhs, ir.Const) and isinstance(rhs, ir.Const):
            return self._fold(node, lambda a, b: _PY_BINOPS[type(node.op)](a, b), lhs, rhs)
        if op is None:
            raise self.error(node, f"the operator `{symbol}` is not supported in a region")
        forward, reflected = op
        if lhs.kind == ir.TENSOR:
            return self._op(node, forward, [lhs, rhs], {}, display=f"Tensor {symbol}")
        if rhs.kind == ir.TENSOR and reflected is not None:
            if reflected == "rdiv":  # torch/_tensor.py: __rdiv__ is self.reciprocal() * other
                recip = self._op(node, "reciprocal", [rhs], {})
                return self._op(node, "mul", [recip, lhs], {})
            return self._op(node, reflected, [rhs, lhs], {}, display=f"{symbol} Tensor")
        raise self.error(node, f"`{symbol}` on {ir.KIND_NAMES[lhs.kind]} and {ir.KIND_NAMES[rhs.kind]} "
                               "values is not supported in a region",
                         "Regions do arithmetic on tensors; compute plain numbers outside the function.")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ir.Var | ir.Const:
        operand = self._value(node.operand)
        if isinstance(operand, ir.Const) and type(node.op) in _PY_UNARYOPS:
            return self._fold(node, _PY_UNARYOPS[type(node.op)], operand)
        name = ops.UNARYOPS.get(type(node.op))
        if name is None or operand.kind != ir.TENSOR:
            raise self.error(node, f"{_describe(node)} is not supported in a region")
        return self._op(node, name, [operand], {})

    def visit_Call(self, node: ast.Call) -> ir.Var:
        args = [self._value(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(node, "`*args` in a call is not supported in a region")
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(kw.value, "`**kwargs` in a call is not supported in a region")
            kwargs[kw.arg] = self._value(kw.value)
        func = node.func
        if isinstance(func, ast.Attribute) and self._is_tensor_expr(func.value):
            receiver = self._value(func.value)
            spec = ops.METHODS.get(func.attr)
            if spec is None:
                raise self.error(func, f"Tensor method `.{func.attr}()` is not in the region op table",
                                 "ppy_magic.supported_ops() lists what regions can call.")
            return self._call(node, spec, [receiver] + args, kwargs, method=True, display=f"Tensor.{func.attr}")
        obj = _static_value(func, self.g)
        if obj is None:
            raise self.error(func, f"cannot tell what `{ast.unparse(func)}` is when the region is compiled",
                             "Call torch functions through a module name (torch.relu, F.relu).")
        spec = ops.function_spec(obj)
        if spec is None:
            raise self.error(func, f"`{ast.unparse(func)}` is not in the region op table",
                             "ppy_magic.supported_ops() lists what regions can call.")
        self._freeze_root(func)
        return self._call(node, spec, args, kwargs, method=False, display=ast.unparse(func))

    # -- helpers -------------------------------------------------------------------
    def _is_tensor_expr(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.locals and self.locals[node.id].kind == ir.TENSOR
        return not isinstance(_static_value(node, self.g), types.ModuleType)

    def _freeze_root(self, node: ast.expr) -> None:
        while isinstance(node, ast.Attribute):
            node = node.value
        if isinstance(node, ast.Name) and node.id not in self.locals:
            ok, value = self.g.lookup(node.id)
            if ok and not hasattr(builtins, node.id):
                self.frozen[node.id] = value

    def _call(self, node: ast.AST, spec: ops.OpSpec, args: list, kwargs: dict, method: bool,
              display: str) -> ir.Var:
        actual = [(a.kind, a) for a in args]
        actual_kw = {k: (v.kind, v) for k, v in kwargs.items()}
        overload, bound = ops.resolve(spec, actual, actual_kw, method=method, display=display)
        kinds = ops.result_kinds(overload)
        if kinds is None or len(kinds) != 1:
            raise self.error(node, f"{display} returns {', '.join(overload.returns)}; "
                                   "a region can use only single-tensor results here")
        return self._emit(node, ir.Call(overload, bound), kinds[0])

    def _op(self, node: ast.AST, name: str, args: list, kwargs: dict, display: str | None = None) -> ir.Var:
        return self._call(node, ops.OpSpec(name), args, kwargs, method=False, display=display or name)

    def _fold(self, node: ast.AST, fn, *consts: ir.Const) -> ir.Const:
        try:
            value = fn(*(c.value for c in consts))
        except (ArithmeticError, ValueError) as exc:
            raise self.error(node, f"this constant expression fails in Python: {exc}") from None
        return self.visit_Constant(ast.copy_location(ast.Constant(value), node))


import operator as _operator  # noqa: E402

_PY_BINOPS = {ast.Add: _operator.add, ast.Sub: _operator.sub, ast.Mult: _operator.mul,
              ast.Div: _operator.truediv, ast.FloorDiv: _operator.floordiv, ast.Mod: _operator.mod,
              ast.Pow: _operator.pow}
_PY_UNARYOPS = {ast.USub: _operator.neg, ast.UAdd: _operator.pos}
_OPERATOR_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@",
                     ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
                     ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}

_HINTS = {
    "Expr": "A region has no side effects: assign the value or remove the statement.",
    "While": "Loops are not supported in a region; keep this function as Python.",
    "For": "Loops are not supported in a region; keep this function as Python.",
    "Try": "Exceptions cannot be caught inside a region; handle them around the call.",
    "With": "Context managers are not supported in a region; put the `with` around the call.",
    "Lambda": "Define the computation inline instead of as a lambda.",
    "ListComp": "Comprehensions are not supported in a region.",
    "GeneratorExp": "Comprehensions are not supported in a region.",
    "Yield": "Generators cannot be regions.",
    "Global": "A region cannot rebind globals; return the value instead.",
    "Nonlocal": "A region cannot rebind outer variables; return the value instead.",
}


def _describe(node: ast.AST) -> str:
    names = {"Expr": "a bare expression statement", "While": "`while`", "For": "`for`", "Try": "`try`",
             "With": "`with`", "Lambda": "`lambda`", "ListComp": "a list comprehension",
             "SetComp": "a set comprehension", "DictComp": "a dict comprehension",
             "GeneratorExp": "a generator expression", "Yield": "`yield`", "YieldFrom": "`yield from`",
             "Global": "`global`", "Nonlocal": "`nonlocal`", "If": "`if`", "IfExp": "a conditional expression",
             "Subscript": "indexing", "Attribute": "attribute access", "AugAssign": "augmented assignment",
             "Compare": "a comparison", "BoolOp": "`and`/`or`", "Tuple": "a tuple", "List": "a list",
             "Dict": "a dict", "Await": "`await`", "Assert": "`assert`", "Raise": "`raise`",
             "Delete": "`del`", "Import": "`import`", "ImportFrom": "`import`", "FunctionDef": "a nested function",
             "ClassDef": "a class", "JoinedStr": "an f-string", "Starred": "`*` unpacking",
             "NamedExpr": "`:=`", "AnnAssign": "an annotated assignment", "Slice": "a slice"}
    if isinstance(node, ast.UnaryOp):
        return f"the unary operator `{ {ast.Not: 'not', ast.Invert: '~', ast.USub: '-', ast.UAdd: '+'}[type(node.op)] }`"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return f"the call statement `{ast.unparse(node)}`"
    return names.get(type(node).__name__, f"`{type(node).__name__}`")


def _debug() -> bool:
    import os

    return os.environ.get("PPY_DEBUG", "") not in ("", "0")


def compile_function(fn: ast.FunctionDef, g: Globals, filename: str, source_lines: list[str], level: int,
                     line_offset: int = 0) -> ir.Function:
    return FunctionCompiler(fn, g, filename, source_lines, level, line_offset).compile()

