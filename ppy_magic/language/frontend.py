"""The front door of the language: which functions of a source are regions, and the IR of each.

Every rule that decides whether a decorated function can be compiled lives here
(or, for its body, in the compiler behind it), and every refusal is a
``CompileError`` in one format: ``at L:C:``, the source line and a caret under
the offending node. The rules:

- the function is defined at the top level of the cell or file, or is a method of a class
  defined there (``decorated_functions`` tells these from the rest; ``not_top_level`` is the
  refusal); a method's first parameter is the instance, whose attributes it reads per call
  (``modules.py``);
- the level in ``@ppy.opt(...)`` is an int literal from 0 to ``MAX_LEVEL`` (``compile_decorated``);
- it is not ``async``, not a generator, does not call itself, has no other decorator, and
  its parameters are plain positional ones, with ``*args``/``**kwargs`` allowed, but no
  keyword-only or positional-only parameters (``check_function``, in this order);
- its body is in the region language (``function.translate``).

The pipeline (a cell, a file) calls ``decorated_functions``, ``compile_decorated`` and
``not_top_level``; ``compile_function`` is ``compile_decorated`` without the level. A new
rule on a whole function goes into ``check_function``.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Sequence
from typing import Any

from .. import decorator
from ..errors import CompileError
from . import ir
from .function import located_error, translate
from .namespace import Globals, is_opt_decorator, opt_level

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def decorated_functions(
    tree: ast.Module, g: Globals, default_level: int = decorator.DEFAULT_LEVEL
) -> tuple[list[tuple[FunctionNode, int]], list[tuple[FunctionNode, int]]]:
    """Decorated top-level functions and methods of top-level classes (with their level), and
    decorated defs elsewhere.

    A level is -1 where it is not an int literal from 0 to MAX_LEVEL (``compile_decorated``
    says why; the decorator itself raises for an invalid value when it runs)."""
    top, nested = [], []
    methods = method_owners(tree)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        level = opt_level(node, g, default_level)
        if level is None:
            continue
        (top if node in tree.body or node in methods else nested).append((node, level))
    return top, nested


def method_owners(tree: ast.Module) -> dict[ast.AST, ast.ClassDef]:
    """The methods of the top-level classes of `tree`, and their class."""
    return {
        stmt: cls
        for cls in tree.body
        if isinstance(cls, ast.ClassDef)
        for stmt in cls.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def compile_decorated(
    node: FunctionNode,
    g: Globals,
    filename: str,
    lines: Sequence[str],
    level: int,
    owner: ast.ClassDef | None = None,
) -> ir.Function | None:
    """The IR of a top-level decorated function at `level`, or None at level 0 (never compiled).

    CompileError if it cannot be a region, -1 (a level that is not an int literal) included."""
    if level < 0:
        # Not an int literal from 0 to 3. An invalid value raises when the decorator runs;
        # a valid one (a variable) is only known then, too late to compile.
        dec = next(d for d in node.decorator_list if is_opt_decorator(d, g))
        where = (dec.args[0] if dec.args else dec.keywords[0].value) if isinstance(dec, ast.Call) else dec
        raise located_error(
            where,
            f"the level in @ppy.opt(...) must be an int literal from 0 to {decorator.MAX_LEVEL}, "
            "so it is known before the cell runs",
            f"Write @ppy.opt({decorator.DEFAULT_LEVEL}), or set the level of the whole cell with %%ppy -O LEVEL.",
            filename=filename,
            lines=lines,
            function=node.name,
        )
    if level == 0:
        return None
    return compile_function(node, g, filename, list(lines), level, owner)


def compile_function(
    fn: FunctionNode,
    g: Globals,
    filename: str,
    source_lines: list[str],
    level: int,
    owner: ast.ClassDef | None = None,
    overrides: dict[str, ir.Kind] | None = None,
    call: Any = None,
) -> ir.Function:
    """The IR of one function (a method of `owner`), or a located CompileError saying why it stays Python.
    `overrides`: the kinds of unannotated parameters without a default (tensors otherwise), as a first call
    gave them; `call` (``call_values.CallValues``): compiled at a call, what its values say."""
    check_function(fn, g, filename, source_lines, owner)
    assert isinstance(fn, ast.FunctionDef)  # check_function refuses `async def`
    return translate(fn, g, filename, source_lines, level, owner, overrides, call)


def check_function(
    fn: FunctionNode, g: Globals, filename: str, lines: Sequence[str], owner: ast.ClassDef | None = None
) -> None:
    """The rules on the function (or method of `owner`) as a whole, before its body is compiled."""

    def refuse(node: ast.AST, message: str, hint: str) -> CompileError:
        return located_error(node, message, hint, filename=filename, lines=lines, function=fn.name)

    if isinstance(fn, ast.AsyncFunctionDef):
        raise refuse(
            fn,
            "an async function cannot be a region",
            "Remove `async`: a region runs synchronously; await around the call.",
        )
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
        raise refuse(
            fn, "a generator cannot be a region", "A region returns its result once; keep a generator as Python."
        )
    calls_itself = next(
        (n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == fn.name),
        None,
    )
    if calls_itself is not None:
        raise refuse(
            calls_itself,
            "a region cannot call itself",
            "A region inlines the functions it calls, so it cannot recurse: keep a recursive function as Python.",
        )
    # Compiled by ppy_magic.compile (a reach), the function is the def's own: its decorators did not wrap it.
    others = [d for d in fn.decorator_list if not is_opt_decorator(d, g)] if not g.reach else []
    if others:
        raise refuse(
            others[0], "a region cannot have other decorators", "Apply other decorators to a wrapper, or drop @ppy.opt."
        )
    a = fn.args
    if a.kwonlyargs or a.posonlyargs:
        raise refuse(
            (a.kwonlyargs or a.posonlyargs)[0],
            "keyword-only and positional-only parameters are not supported in a region",
            "Use plain positional parameters.",
        )
    if owner is not None and not a.args:
        raise refuse(fn, "a method compiled as a region takes the instance first", "Add `self` as its first parameter.")


def refused_for_its_signature_only(
    fn: FunctionNode, g: Globals, filename: str, lines: Sequence[str], owner: ast.ClassDef | None = None
) -> bool:
    """Whether the whole-function rules refuse `fn` only for its keyword-only or positional-only parameters,
    which a Python driver can bind (``breaks``): with them plain, the rules pass."""
    a = fn.args
    if not (a.kwonlyargs or a.posonlyargs):
        return False
    plain = copy.copy(fn)
    plain.args = copy.copy(a)
    plain.args.args = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    plain.args.posonlyargs, plain.args.kwonlyargs, plain.args.kw_defaults = [], [], []
    plain.args.defaults = []
    try:
        check_function(plain, g, filename, lines, owner)
    except CompileError:
        return False
    return True


def not_top_level(node: FunctionNode, filename: str, lines: Sequence[str]) -> CompileError:
    """Why a decorated def inside a function or a nested class stays Python."""
    return located_error(
        node,
        "only top-level functions of a cell or file (and methods of its top-level classes) are compiled",
        "Move the function to the top level of the cell.",
        filename=filename,
        lines=lines,
        function=node.name,
    )


def not_compiled_reason(fn: Callable) -> str:
    """Why a decorated function that the source's compilation did not see stays Python."""
    qualname = getattr(fn, "__qualname__", "")
    if "<locals>" in qualname or qualname.count(".") > 1:
        return (
            "only top-level functions of a cell or file (and methods of its top-level classes) "
            "are compiled (this one is nested)"
        )
    return "it was not found among the cell's top-level functions"
