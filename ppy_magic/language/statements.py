"""Statements of the region language: assignment and unpacking, return, raise and assert, if, for.

A mixin of ``function.FunctionCompiler``: each ``visit_<Stmt>`` emits IR
statements into the current block. Branches and loops compile their bodies in a
nested ``block()`` and join what the paths bound: a name bound differently on two
paths becomes one declared variable, if its kinds agree.
"""

from __future__ import annotations

import ast
import warnings
from typing import Any

from . import adapters, ir, ops
from .ir import Kind
from .namespace import static_value
from .values import (
    HINTS,
    RAISABLE_ERRORS,
    SYMBOLS,
    UNBOUND,
    Closure,
    StarredRest,
    Unbound,
    atoms_of,
    describe_node,
    structure_of,
)


class StatementCompiler:
    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # a docstring or a string used as a comment
        if isinstance(node.value, ast.Call) and (self._is_effect_call(node.value) or self._is_procedure(node.value)):
            self.value(node.value)  # evaluated for its effect; the result, if any, is dropped as Python drops it
            return None
        raise self.error(node, f"{describe_node(node)} is not supported in a region", HINTS["Expr"])

    def _is_effect_call(self, call: ast.Call) -> bool:
        f = call.func
        return isinstance(f, ast.Attribute) and f.attr.endswith("_") and not f.attr.endswith("__")

    def _is_procedure(self, call: ast.Call) -> bool:
        """A call made for what it does: warnings.warn, another @ppy.opt function, an adapter or its helper."""
        f = call.func
        if isinstance(f, ast.Name) and f.id in self.locals:
            return False
        if isinstance(f, ast.Name) and f.id in self.g.functions:
            return True
        fn = static_value(f, self.g)
        if fn is None:
            return False
        return (
            fn is warnings.warn
            or adapters.lookup(fn) is not None
            or fn is adapters.unsupported
            or bool(getattr(fn, "__ppy_opt__", 0))
            or getattr(fn, "__ppy_region__", False) is True
        )

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        """A nested def: inlined where it is called (see values.Closure)."""
        if node.decorator_list:
            raise self.error(node.decorator_list[0], "a nested function with decorators is not supported in a region")
        self.locals[node.name] = Closure(node, id(self), self.g, self.filename, self.source_lines)

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
            for t, v in zip(target.elts, items, strict=True):
                self.bind_target(
                    t.value if isinstance(t, ast.Starred) else t, v.value if isinstance(v, StarredRest) else v
                )
        elif starred:
            s = starred[0]
            after = n - s - 1
            head, mid, tail = items[:s], items[s : len(items) - after], items[len(items) - after :]
            for t, v in zip(target.elts[:s], head, strict=True):
                self.bind_target(t, v)
            self.bind_target(target.elts[s].value, ir.Tup(tuple(mid)))
            for t, v in zip(target.elts[s + 1 :], tail, strict=True):
                self.bind_target(t, v)
        else:
            for t, v in zip(target.elts, items, strict=True):
                self.bind_target(t, v)

    def sequence_items(self, node: ast.AST, value: Any, want: int, starred: bool) -> list[Any]:
        """The items of a value being unpacked, checking its length as Python would."""
        if isinstance(value, ir.Tup):
            have = len(value.items)
            if (have < want) or (have > want and not starred):
                raise self.error(node, f"unpacking {have} values into {want} names fails in Python too")
            return list(value.items)
        kind = getattr(value, "kind", None)
        if kind in (Kind.INTS, Kind.TENSORS):
            size = self.intrinsic("seq_len", Kind.INT, value)
            self.check("check_unpack", size, ir.Const(want, Kind.INT), ir.Const(starred, Kind.BOOL))
            item_kind = Kind.INT if kind == Kind.INTS else Kind.TENSOR
            if not starred:
                return [self.intrinsic("seq_item", item_kind, value, ir.Const(i, Kind.INT)) for i in range(want)]
            if kind != Kind.INTS:
                raise self.error(node, "starred unpacking of a list of tensors is not supported in a region")
            s = next(i for i, e in enumerate(node.elts) if isinstance(e, ast.Starred))
            after = want - s  # the length is checked: the items after the starred one count from the end
            head = [self.intrinsic("seq_item", Kind.INT, value, ir.Const(i, Kind.INT)) for i in range(s)]
            stop = ir.Const(-after, Kind.INT) if after else ir.Const(None, Kind.NONE)
            mid = self.intrinsic("seq_slice", Kind.INTS, value, ir.Const(s, Kind.INT), stop, ir.Const(None, Kind.NONE))
            tail = [self.intrinsic("seq_index", Kind.INT, value, ir.Const(i - after, Kind.INT)) for i in range(after)]
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
        if getattr(current, "kind", None) == Kind.TENSOR:
            name = ops.INPLACE_BINOPS.get(type(node.op))
            if name is None:
                raise self.error(node, f"`{SYMBOLS.get(type(node.op), '?')}=` on a tensor is not supported")
            self.call_op(
                node, ops.OpSpec(name), [current, rhs], {}, method=True, display=f"Tensor {SYMBOLS[type(node.op)]}="
            )
            return current  # in place: the same tensor
        return self.binop(node, node.op, current, rhs)

    def visit_Return(self, node: ast.Return) -> None:
        value = self.value(node.value) if node.value is not None else ir.Const(None, Kind.NONE)
        if self.helper:  # the caller knows the static parts; only runtime atoms cross
            self.returns.append((ir.HELPER_RETURN, structure_of(value)))
            runtime = tuple(a for a in atoms_of(value) if isinstance(a, ir.Var))
            self.emit(ir.Return(runtime, ir.HELPER_RETURN, self.line()))
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
        code = ir.RETURN_CODES.get(getattr(value, "kind", None))
        if code is not None and value.kind == Kind.INTS and not value.size:
            raise self.error(
                node,
                "a region returns sequences of ints as a torch.Size, and this one is a tuple or a list in Python",
                "Return a tensor's sizes, or tuple(...) items written out.",
            )
        if code is not None:
            if value.kind != Kind.NONE:
                atoms.append(value)
            return code
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
        if isinstance(value, ir.Const) and value.kind == Kind.STR:
            return value.value
        if isinstance(value, ir.Var) and value.kind == Kind.STR:
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
        """`x is None` / `x is not None` on a name holding X or None: (name, the branch where it holds an X)."""
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.left, ast.Name)
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            value = self.locals.get(test.left.id)
            if getattr(value, "kind", None) in ir.HELD_BY:
                return test.left.id, isinstance(test.ops[0], ast.IsNot)
        return None

    def narrow(self, name: str) -> None:
        """In a branch where `name` is known not to be None: what it holds."""
        held = self.locals[name]
        self.locals[name] = self.intrinsic("unwrap_optional", ir.HELD_BY[held.kind], held)

    def branch(
        self,
        node: ast.AST,
        test: ir.Atom,
        then: list[ast.stmt],
        orelse: list[ast.stmt],
        narrowed: tuple[str, bool] | None = None,
    ) -> None:
        before = dict(self.locals)
        paths = []
        for stmts, which in ((then, True), (orelse, False)):
            with self.block(before) as path:
                if narrowed is not None and narrowed[1] == which:
                    self.narrow(narrowed[0])
                self.compile_body(stmts)
            paths.append(path)
        then_path, else_path = paths
        merged = self.merge(node, before, [(p.locals, p.terminated, p.body) for p in paths])
        self.emit(ir.If(test, tuple(then_path.body), tuple(else_path.body), self.line()))
        self.locals = merged
        self.terminated = then_path.terminated and else_path.terminated

    def merge(self, node: ast.AST, before: dict, branches: list[tuple[dict, bool, list]]) -> dict:
        """Locals after branches join: a name bound differently becomes one declared variable."""
        live = [(locs, body) for locs, term, body in branches if not term]
        if not live:
            return dict(before)
        if len(live) == 1:  # the other path raised or returned: the live one's names, declared outside it
            locs, body = live[0]
            outer = {id(a) for v in before.values() for a in atoms_of(v) if isinstance(a, ir.Var)}
            return {name: self.hoist(name, v, body, outer) for name, v in locs.items()}
        names = sorted(set().union(*(locs.keys() for locs, _ in live)))  # one order in every process
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

    def hoist(self, name: str, value: Any, body: list, outer: set[int]) -> Any:
        """`value` as seen after a branch whose `body` set it: a variable declared inside the branch
        becomes one declared before it (C++ scopes end with the branch; Python's names do not)."""
        if isinstance(value, ir.Tup):
            return ir.Tup(tuple(self.hoist(name, v, body, outer) for v in value.items), value.structseq, value.is_list)
        if not isinstance(value, ir.Var) or id(value) in outer:
            return value
        var = self.new_var(name, value.kind)
        self.emit(ir.Declare(var, self.line()))
        body.append(ir.Move(var, value, self.line()))
        return self.sized(var) if value.size else var

    def join(self, node: ast.AST, name: str, vals: list, bodies: list[list]) -> Any:
        first = vals[0]
        if isinstance(first, ir.Tup):
            if not all(isinstance(v, ir.Tup) and len(v.items) == len(first.items) for v in vals):
                return Unbound(name, "it is a tuple of different lengths in different branches")
            return ir.Tup(
                tuple(self.join(node, name, [v.items[i] for v in vals], bodies) for i in range(len(first.items)))
            )
        kinds = {getattr(v, "kind", None) for v in vals}
        for held, optional in ir.OPTIONAL_OF.items():
            if len(kinds) > 1 and kinds <= {Kind.NONE, held, optional}:
                kinds = {optional}  # an X on one path, None on another
        if len(kinds) != 1 or None in kinds or Kind.NONE in kinds or Kind.ENUM in kinds:
            return Unbound(name, "it has different kinds of value in different branches")
        var = self.new_var(name, kinds.pop())
        self.emit(ir.Declare(var, self.line()))
        for v, body in zip(vals, bodies, strict=True):
            body.append(ir.Move(var, v, self.line()))
        return self.sized(var) if all(getattr(v, "size", False) for v in vals) else var

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
        for a, b in zip(it.args, bounds, strict=True):
            if getattr(b, "kind", None) not in (Kind.INT, Kind.BOOL):
                raise self.error(a, f"range() needs ints, got {ops.describe(b)}")
        start, stop, step = (
            (ir.Const(0, Kind.INT), bounds[0], ir.Const(1, Kind.INT))
            if len(bounds) == 1
            else (bounds[0], bounds[1], ir.Const(1, Kind.INT))
            if len(bounds) == 2
            else tuple(bounds)
        )
        if isinstance(step, ir.Const) and step.value == 0:
            raise self.error(it, "range() arg 3 must not be zero")
        if not isinstance(step, ir.Const):
            self.check("check_range_step", step)
        body, fresh = self.loop_body(node, node.body, {node.target.id: Kind.INT})
        loop_var = fresh[node.target.id]
        self.emit(ir.For(loop_var, start, stop, step, body, self.line()))
        self.locals[node.target.id] = Unbound(
            node.target.id, "the loop variable is undefined after a loop that may run zero times"
        )

    def loop_body(
        self, node: ast.stmt, stmts: list[ast.stmt], fresh: dict[str, Kind]
    ) -> tuple[tuple[ir.Stmt, ...], dict[str, ir.Var]]:
        """A loop's body, compiled once for every iteration; the caller emits the loop around it.

        Names the body rebinds that hold values before the loop become loop-carried variables
        (declared before it, stored at the end of each iteration; their kinds must not change).
        `fresh` names (a for loop's variable) are new variables of the given kinds, bound in the
        body. After the loop, carried names hold their variables; names bound only inside it are
        unbound, since it may run zero times."""
        assigned = {
            n.id
            for n in ast.walk(ast.Module(body=stmts, type_ignores=[]))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        carried: dict[str, Any] = {}
        for name in sorted(assigned):
            if name in self.locals and name not in fresh:
                carried[name] = self.carry(node, name, self.locals[name])
        before = dict(self.locals)
        new = {name: self.new_var(name, kind) for name, kind in fresh.items()}
        with self.block({**before, **carried, **new}) as loop:
            self.compile_body(stmts)
            if self.terminated:
                raise self.error(node, "`return` inside a loop is not supported in a region")
            for name, var in carried.items():
                self.store_carried(node, name, var, self.locals.get(name, UNBOUND))
        after = {**before, **carried}
        for name in sorted(assigned - set(carried)):
            after[name] = Unbound(name, "it is only bound inside the loop, which may run zero times")
        self.locals = after
        return tuple(loop.body), new

    def carry(self, node: ast.AST, name: str, value: Any) -> Any:
        if isinstance(value, ir.Tup):
            return ir.Tup(tuple(self.carry(node, name, v) for v in value.items))
        kind = getattr(value, "kind", None)
        if kind in (None, Kind.NONE, Kind.ENUM):
            return value  # static: must stay the same through the loop
        var = self.new_var(name, kind)
        self.emit(ir.Declare(var, self.line()))
        self.emit(ir.Move(var, value, self.line()))
        return self.sized(var) if getattr(value, "size", False) else var

    def store_carried(self, node: ast.AST, name: str, var: Any, value: Any) -> None:
        if isinstance(var, ir.Tup):
            if not (isinstance(value, ir.Tup) and len(value.items) == len(var.items)):
                raise self.error(node, f"'{name}' changes shape inside the loop")
            for a, b in zip(var.items, value.items, strict=True):
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
