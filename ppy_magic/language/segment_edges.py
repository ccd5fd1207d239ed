"""How names cross a segment's edges where they may have no value (``splitting``): a segment returns such a
name with whether it has one, the driver unbinds it where it has none, and a segment reads a name that has
no value where it starts as a local of its own that has none."""

from __future__ import annotations

import ast


def names_value(names: list[str], unset: tuple[str, ...] = ()) -> ast.expr:
    """What a segment returns: its outputs (each as ``returned_value`` gives it), then whether each of `unset`
    has a value."""
    if not names:
        return ast.Constant(value=None)
    if len(names) == 1 and not unset:
        return ast.Name(id=names[0], ctx=ast.Load())
    values = [returned_value(n, unset) for n in names] + [has_value(n) for n in unset]
    return ast.Tuple(elts=values, ctx=ast.Load())


def returned_value(name: str, unset: tuple[str, ...] = ()) -> ast.expr:
    """How a segment returns `name`: itself, or where it may have no value (`unset`), itself if it has one
    and None if not (``name if "name" in locals() else None``: Python and a region read it alike)."""
    value = ast.Name(id=name, ctx=ast.Load())
    if name not in unset:
        return value
    return ast.IfExp(test=has_value(name), body=value, orelse=ast.Constant(value=None))


def has_value(name: str) -> ast.expr:
    """``"name" in locals()``."""
    locals_call = ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[])
    return ast.Compare(left=ast.Constant(value=name), ops=[ast.In()], comparators=[locals_call])


def bound_flag(name: str) -> str:
    return f"__ppy_has_{name}"


def unbind_unless(name: str, flag: str) -> list[ast.stmt]:
    """``if not flag: del name`` and ``del flag``: the driver's `name` has no value where the segment's had
    none, as after the Python it stands for; the flag is gone again."""
    unbind = ast.If(
        test=ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=flag, ctx=ast.Load())),
        body=[ast.Delete(targets=[ast.Name(id=name, ctx=ast.Del())])],
        orelse=[],
    )
    return [unbind, ast.Delete(targets=[ast.Name(id=flag, ctx=ast.Del())])]


def declared_unbound(name: str, at: ast.stmt) -> ast.stmt:
    """``if False: name = None``: makes `name` a local of the segment that has no value (Python reads it as
    one, and so does the region: a read raises UnboundLocalError), binding nothing."""
    st = ast.If(
        test=ast.Constant(value=False),
        body=[ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value=None))],
        orelse=[],
    )
    for n in ast.walk(st):
        ast.copy_location(n, at)
    return st
