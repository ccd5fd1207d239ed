"""``with torch.no_grad():`` and the other grad-mode blocks, and ``torch.set_grad_enabled(b)`` as a call.

A mixin of ``function.FunctionCompiler``. A block's mode is a guard variable (kind
``GRAD_MODE``, a guard object of the backend's ``ppy_native.h``): entering saves the mode and sets it, as
the context manager's ``__enter__`` does; the block's normal end restores it, and so does the
guard's destructor when a ``return``, ``break``, ``continue`` or an exception leaves the block
first, as ``__exit__`` would. A region that may turn grad mode on inside (``enable_grad``,
``set_grad_enabled`` of a value) is built at level 1: the levels' shortcuts rest on the mode the
call started with (``Context.grad_enabling``).

A ``torch.autocast(...)`` item is ``autocast.AutocastCompiler``'s: a guard of its own kind, left
the same ways.
"""

from __future__ import annotations

import ast

import torch

from ..torchlib import ops
from . import ir
from .autocast import is_autocast
from .ir import Kind
from .namespace import static_value


class GradModeCompiler:
    def visit_With(self, node: ast.With) -> None:
        self.with_items(node, list(node.items))

    def with_items(self, node: ast.With, items: list[ast.withitem]) -> None:
        """`with a, b:` is `with a: with b:`."""
        if not items:
            self.compile_body(node.body)
            return
        item = items[0]
        ctx = item.context_expr
        fn = static_value(ctx.func, self.g) if isinstance(ctx, ast.Call) else None
        if is_autocast(fn):
            guard, leave = self.autocast_enter(item, fn), "autocast_exit"
            if guard is None:  # autocast.__init__ raises: the block is never entered
                return
        else:
            mode = self.grad_mode_of(item)
            guard = self.assign(ir.Intrinsic("grad_mode_enter", (mode,)), Kind.GRAD_MODE, base="grad_mode")
            leave = "grad_mode_exit"
        self.with_items(node, items[1:])
        if not self.terminated:  # the normal end; any other way out runs the guard's destructor
            self.check(leave, guard)

    def grad_mode_of(self, item: ast.withitem) -> ir.Atom:
        """The grad mode a `with` item sets (evaluated as Python evaluates the context expression)."""
        ctx = item.context_expr
        fn = static_value(ctx.func, self.g) if isinstance(ctx, ast.Call) else None
        if fn not in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled):
            raise self.error(
                ctx,
                "only `with torch.no_grad():`, `torch.enable_grad()`, `torch.set_grad_enabled(b)` and "
                "`torch.autocast(...)` blocks are supported in a region",
                "Keep other context managers outside the region, or leave this function Python.",
            )
        if item.optional_vars is not None:
            raise self.error(item.optional_vars, "`with ... as name` of a grad mode is not supported in a region")
        args = [self.value(a) for a in ctx.args]
        kwargs = {k.arg: self.value(k.value) for k in ctx.keywords}
        if fn is torch.set_grad_enabled:
            return self.grad_mode_argument(ctx, args, kwargs)
        if args or kwargs:
            raise self.error(ctx, f"{fn.__name__}() takes no arguments in a region")
        if fn is torch.enable_grad:
            self.ctx.grad_enabling = True
        return ir.Const(fn is torch.enable_grad, Kind.BOOL)

    def grad_mode_argument(self, node: ast.AST, args: list, kwargs: dict) -> ir.Atom:
        """The `mode` of torch.set_grad_enabled(mode)."""
        if len(args) + len(kwargs) != 1 or (kwargs and "mode" not in kwargs):
            raise self.error(node, "torch.set_grad_enabled() takes one bool, mode")
        mode = args[0] if args else kwargs["mode"]
        if getattr(mode, "kind", None) != Kind.BOOL:
            raise self.error(node, f"torch.set_grad_enabled() takes a bool, got {ops.describe(mode)}")
        if not (isinstance(mode, ir.Const) and mode.value is False):
            self.ctx.grad_enabling = True
        return mode

    def set_grad_enabled_statement(self, call: ast.Call) -> bool:
        """`torch.set_grad_enabled(b)` as a statement: the mode from here on, past the region's return too,
        as in Python. False if `call` is something else."""
        if not isinstance(call, ast.Call) or static_value(call.func, self.g) is not torch.set_grad_enabled:
            return False
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise self.error(call, "torch.set_grad_enabled() with * or ** is not supported in a region")
        args = [self.value(a) for a in call.args]
        kwargs = {k.arg: self.value(k.value) for k in call.keywords}
        self.check("set_grad_enabled", self.grad_mode_argument(call, args, kwargs))
        return True
