"""Python forms of the region language around values: ``:=``, ``%``-formatting and ``str.format``.

A mixin of ``function.FunctionCompiler``. Formatting reuses the f-string's pieces
(``formatted``: ``str()`` of each value, at run time where it is known only then), so a
message made with ``%`` or ``.format`` is the text Python makes; what that cannot say exactly
(a width, a precision, ``%d`` of a float) is folded when every value is known when compiling,
or stays Python. ``:=`` binds in the function's scope as Python does; where the expression is
evaluated only sometimes (the right of ``and``/``or``, a branch of a conditional expression, a
comprehension) it stays Python, as a region binds names per block.
"""

from __future__ import annotations

import ast
import re
import string
from typing import Any

from ..torchlib import ops
from . import ir
from .ir import Kind

# printf-style conversions: %[(key)][flags][width][.precision][length]type
_PERCENT = re.compile(r"%(\([^)]*\))?([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)", re.S)
_LAZY = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _lazy_walruses(fn: ast.AST) -> set[int]:
    """The `:=` of `fn` that are evaluated only sometimes, or in a comprehension's own scope."""
    out: set[int] = set()

    def mark(nodes: list[ast.AST]) -> None:
        for n in nodes:
            out.update(id(w) for w in ast.walk(n) if isinstance(w, ast.NamedExpr))

    for node in ast.walk(fn):
        if isinstance(node, ast.BoolOp):
            mark(node.values[1:])
        elif isinstance(node, ast.IfExp):
            mark([node.body, node.orelse])
        elif isinstance(node, _LAZY):
            mark([node])
        elif isinstance(node, ast.Assert) and node.msg is not None:
            mark([node.msg])
    return out


class PythonFormCompiler:
    def visit_NamedExpr(self, node: ast.NamedExpr) -> Any:
        lazy = self.__dict__.get("_lazy_walruses")
        if lazy is None:
            lazy = self.__dict__["_lazy_walruses"] = _lazy_walruses(self.fn)
        if id(node) in lazy:
            raise self.error(
                node,
                "`:=` where it is evaluated only sometimes (after `and`/`or`, in a conditional expression "
                "or a comprehension) is not supported in a region",
                "Assign the name in a statement of its own before.",
            )
        value = self.value(node.value)
        self.bind_target(node.target, value)
        return value

    # -- "..." % values ------------------------------------------------------------------------------
    def percent_format(self, node: ast.AST, template: Any, args: Any) -> Any:
        if not isinstance(template, ir.Const):
            raise self.error(node, "`%` formatting of a str known only at run time is not supported in a region")
        if isinstance(args, ir.Tup) and not args.is_list:
            values = list(args.items)
        elif getattr(args, "kind", None) in (Kind.INTS, Kind.TENSORS) or isinstance(args, ir.Tup) and args.structseq:
            raise self.error(node, "`%` formatting with a tuple known only at run time is not supported in a region")
        else:
            values = [args]
        if all(isinstance(v, ir.Const) for v in values):
            return self.fold_format(node, lambda: template.value % tuple(v.value for v in values))
        pieces: list[Any] = []
        pos, k = 0, 0
        text = template.value
        for m in _PERCENT.finditer(text):
            pieces.append(ir.Const(text[pos : m.start()], Kind.STR))
            pos = m.end()
            key, flags, width, precision, conv = m.groups()
            if conv == "%" and not (key or flags or width or precision):
                pieces.append(ir.Const("%", Kind.STR))
                continue
            if key or flags or width or precision or conv not in "dirs":
                raise self.error(
                    node, f"`%` formatting with {m.group(0)!r} of a value known only at run time is not supported"
                )
            if k >= len(values):
                raise self.error(node, "not enough arguments for format string, in Python too")
            pieces += self.format_piece(node, values[k], "d" if conv == "i" else conv)
            k += 1
        if k != len(values):
            raise self.error(node, "not all arguments converted during string formatting, in Python too")
        pieces.append(ir.Const(text[pos:], Kind.STR))
        return self.joined(pieces)

    def format_piece(self, node: ast.AST, v: Any, conv: str) -> list[Any]:
        """The text of one value under conversion `conv` ('s', 'r' or 'd'), as Python writes it."""
        kind = getattr(v, "kind", None)
        if isinstance(v, ir.Const):
            text = format(v.value) if conv == "s" else repr(v.value) if conv == "r" else "%d" % v.value  # noqa: UP031
            return [ir.Const(text, Kind.STR)]
        if conv == "d":
            if kind == Kind.BOOL:
                return [self.as_int(v)]
            if kind != Kind.INT:
                raise self.error(node, f"`%d` of {ops.describe(v)} is not supported in a region", "Format int(...).")
            return [v]
        if conv == "r" and kind not in (Kind.INT, Kind.FLOAT, Kind.BOOL):
            raise self.error(node, f"repr() of {ops.describe(v)} in a message is not supported in a region")
        return self.formatted(node, v)

    def joined(self, pieces: list[Any]) -> Any:
        if all(isinstance(p, ir.Const) for p in pieces):
            return ir.Const("".join(p.value for p in pieces), Kind.STR)
        return self.intrinsic("str_concat", Kind.STR, *pieces)

    def fold_format(self, node: ast.AST, make: Any) -> ir.Const:
        try:
            return ir.Const(make(), Kind.STR)
        except Exception as exc:  # noqa: BLE001 - the same error in Python
            raise self.error(node, f"this formatting fails in Python too ({type(exc).__name__}: {exc})") from None

    # -- "...".format(...) -----------------------------------------------------------------------------
    def str_format(self, node: ast.Call) -> Any:
        template = node.func.value.value  # a str literal (visit_Call checked)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error(node, "str.format() with * or ** is not supported in a region")
        args = [self.value(a) for a in node.args]
        kwargs = {k.arg: self.value(k.value) for k in node.keywords}
        if all(isinstance(v, ir.Const) for v in [*args, *kwargs.values()]):
            return self.fold_format(
                node, lambda: template.format(*(v.value for v in args), **{k: v.value for k, v in kwargs.items()})
            )
        try:
            fields = list(string.Formatter().parse(template))
        except ValueError as exc:
            raise self.error(node, f"this format string fails in Python too ({exc})") from None
        pieces: list[Any] = []
        auto, manual = 0, False
        for literal, name, spec, conversion in fields:
            pieces.append(ir.Const(literal, Kind.STR))
            if name is None:
                continue
            if spec or conversion not in (None, "s", "r"):
                raise self.error(node, "str.format() fields with a format spec are not supported in a region")
            if name == "":
                if manual:
                    raise self.error(node, "str.format() mixes automatic and manual field numbering, in Python too")
                index: int | str = auto
                auto += 1
            elif name.isdigit():
                manual = True
                index = int(name)
            elif name.isidentifier():
                index = name
            else:
                raise self.error(node, f"str.format() field {{{name}}} is not supported in a region")
            if auto and manual:
                raise self.error(node, "str.format() mixes automatic and manual field numbering, in Python too")
            if isinstance(index, int) and index >= len(args) or isinstance(index, str) and index not in kwargs:
                raise self.error(node, f"str.format() has no argument for {{{name}}}, in Python too")
            value = args[index] if isinstance(index, int) else kwargs[index]
            pieces += self.format_piece(node, value, conversion or "s")
        return self.joined(pieces)
