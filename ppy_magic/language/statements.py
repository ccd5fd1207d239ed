"""Statements of the region language: assignment and unpacking, return, raise and assert, if, for.

A mixin of ``function.FunctionCompiler``: each ``visit_<Stmt>`` emits IR
statements into the current block. Branches and loops compile their bodies in a
nested ``block()`` and join what the paths bound: a name bound differently on two
paths becomes one declared variable, if its kinds agree.
"""

from __future__ import annotations

import ast
import functools
import sys
import warnings
from typing import Any

from ..torchlib import adapters, ops, torch_source
from . import ir
from .calls import TORCH_CHECKS
from .ir import Kind
from .lists import LIST_METHODS, RuntimeListNeeded
from .liveness import stored
from .modules import dotted
from .namespace import static_value
from .values import (
    HINTS,
    RAISABLE_ERRORS,
    SYMBOLS,
    UNBOUND,
    Closure,
    MaybeBound,
    ModuleValue,
    OptionalScalar,
    StarredRest,
    Static,
    Unbound,
    UnionValue,
    atoms_of,
    constant,
    describe_node,
    structure_of,
)

# kinds a name bound on some paths only may hold (a declared variable and a flag: StatementCompiler.maybe_bound)
_MAYBE_BOUND_KINDS = frozenset({Kind.TENSOR, Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.INTS, Kind.TENSORS, Kind.OPT_TENSOR})


class StatementCompiler:
    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Delete(self, node: ast.Delete) -> None:
        """``del name``: the name is unbound from here on, as in Python (its value lives as long as a later
        use needs it, which then cannot compile). ``del x[i]`` and ``del obj.attr`` change an object: refused."""
        if self.loops:  # a name a later iteration would find unbound: the body is compiled once
            raise self.error(node, "`del` inside a loop is not supported in a region")
        for target in node.targets:
            if not isinstance(target, ast.Name):
                raise self.error(target, f"`del` of {describe_node(target)} is not supported in a region")
            if not isinstance(self.locals.get(target.id), (type(None), Unbound, MaybeBound)):
                self.locals[target.id] = Unbound(target.id, f"it was deleted at line {node.lineno}", certain=True)
            else:
                raise self.error(target, f"`del {target.id}`: '{target.id}' may not be bound here")

    def visit_Import(self, node: ast.Import) -> None:
        """``import torch`` in a function body (torch's own functions do it): a module the process has
        imported already binds its name when compiling, as Python's import of it does nothing more."""
        for alias in node.names:
            target = alias.name if alias.asname else alias.name.split(".")[0]
            self.bind_imported(node, alias.asname or target, self.imported_module(node, alias.name, target))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            raise self.error(node, "a relative import is not supported in a region")
        module = self.imported_module(node, node.module, node.module)
        for alias in node.names:
            if alias.name == "*" or not hasattr(module, alias.name):
                raise self.error(node, f"`from {node.module} import {alias.name}` is not known when compiling")
            self.bind_imported(node, alias.asname or alias.name, getattr(module, alias.name))

    def imported_module(self, node: ast.stmt, name: str, target: str) -> Any:
        if name not in sys.modules or target not in sys.modules:
            raise self.error(
                node,
                f"importing {name}, which this process has not imported yet, is not supported in a region",
                "Import it at the top of the module: the import then runs once, before the region compiles.",
            )
        return sys.modules[target]

    def bind_imported(self, node: ast.stmt, name: str, value: Any) -> None:
        c = constant(value)
        self.locals[name] = c if c is not None else Static(value)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # a docstring or a string used as a comment
        if self.set_grad_enabled_statement(node.value):  # torch.set_grad_enabled(b) for its effect (grad_modes)
            return None
        if isinstance(node.value, ast.Call) and (self._is_effect_call(node.value) or self._is_procedure(node.value)):
            self.value(node.value)  # evaluated for its effect (an in-place method, a list's, a procedure's)
            return None
        raise self.error(node, f"{describe_node(node)} is not supported in a region", HINTS["Expr"])

    def _is_effect_call(self, call: ast.Call) -> bool:
        f = call.func
        if not isinstance(f, ast.Attribute):
            return False
        if f.attr in LIST_METHODS:
            return True
        return f.attr.endswith("_") and not f.attr.endswith("__")

    def _is_procedure(self, call: ast.Call) -> bool:
        """A call made for what it does: warnings.warn, another @ppy.opt function, an adapter or its helper,
        one of torch's functions (``_verify_batch_size``: its only effect is what its own compiled body does),
        a compiled method of a module or object the region holds (``self._check_input_dim(input)``)."""
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):  # `self._check_input_dim(x)`
            obj = self.locals.get(f.value.id)
            if isinstance(obj, ModuleValue) and obj.mtype.cls is not None:
                model = self.classes.model(obj.mtype.cls)
                return not model.problem and f.attr in model.methods and f.attr not in model.attrs
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
            or torch_source.holds(fn)
            or fn in TORCH_CHECKS
            or fn is adapters.unsupported
            or bool(getattr(fn, "__ppy_opt__", 0))
            or getattr(fn, "__ppy_region__", False) is True
        )

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        """A nested def: inlined where it is called (see values.Closure). ``@functools.wraps(f)`` only copies
        `f`'s name and docstring onto it, which a call never reads: its argument is read, nothing more."""
        for decorator in node.decorator_list:  # evaluated in order, as Python does
            wraps = self.value(decorator.func) if isinstance(decorator, ast.Call) else None
            if not (
                isinstance(wraps, Static)
                and wraps.value is functools.wraps
                and len(decorator.args) == 1
                and not decorator.keywords
            ):
                raise self.error(decorator, "a nested function with decorators is not supported in a region")
            self.value(decorator.args[0])
        self.locals[node.name] = Closure(node, id(self), self.g, self.filename, self.source_lines)

    def visit_Assign(self, node: ast.Assign) -> None:
        unpacked = all(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets)
        if isinstance(node.value, ast.GeneratorExp) and unpacked:
            # `k, v = (f(t) for t in (k, v))`: unpacking runs the generator to its end, as tuple() does
            call = ast.copy_location(ast.Call(ast.Name("tuple", ast.Load()), [node.value], []), node)
            value = self.consume(call, tuple)
        elif isinstance(node.value, ast.Tuple) and (want := unpacked_length(node.targets)) is not None:
            value = self.unpacked_display(node.value, want)
        else:
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
        if kind in ir.SEQUENCE_KINDS:
            size = self.intrinsic("seq_len", Kind.INT, value)
            self.check("check_unpack", size, ir.Const(want, Kind.INT), ir.Const(starred, Kind.BOOL))
            item_kind = ir.ITEM_KIND[kind]
            if not starred:
                return [self.intrinsic("seq_item", item_kind, value, ir.Const(i, Kind.INT)) for i in range(want)]
            if kind != Kind.INTS:
                raise self.error(node, "starred unpacking of a list of tensors is not supported in a region")
            s = next(i for i, e in enumerate(node.elts) if isinstance(e, ast.Starred))
            after = want - s  # the length is checked: the items after the starred one count from the end
            head = [self.intrinsic("seq_item", Kind.INT, value, ir.Const(i, Kind.INT)) for i in range(s)]
            stop = ir.Const(-after, Kind.INT) if after else ir.Const(None, Kind.NONE)
            mid = self.intrinsic("seq_slice", Kind.INTS, value, ir.Const(s, Kind.INT), stop, ir.Const(None, Kind.NONE))
            self.param_vars.add(mid.name)  # a list in Python (`a, *rest = s`): never returned as a tuple
            tail = [self.intrinsic("seq_index", Kind.INT, value, ir.Const(i - after, Kind.INT)) for i in range(after)]
            return head + [StarredRest(mid)] + tail
        raise self.error(node, f"cannot unpack {ops.describe(value)} in a region")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        target = node.target
        if isinstance(target, ast.Name):
            current = self.value(target)
            rhs = self.value(node.value)
            in_place = self.list_augassign(node, current, rhs)
            self.locals[target.id] = in_place if in_place is not None else self.augmented(node, current, rhs)
        elif isinstance(target, ast.Subscript):
            base = self.value(target.value)
            if getattr(base, "kind", None) in ir.LIST_KINDS and not isinstance(target.slice, ast.Slice):
                i = self.value(target.slice)  # l[i] += v: read the item, combine, store it back
                if getattr(i, "kind", None) not in (Kind.INT, Kind.BOOL):
                    raise self.error(target, f"list indices must be ints, not {ops.describe(i)}")
                i = self.as_int(i)
                current = self.intrinsic("seq_get", ir.ITEM_KIND[base.kind], base, i)
                new = self.augmented(node, current, self.value(node.value))
                if getattr(new, "kind", None) != current.kind:
                    raise self.error(target, f"{ir.KIND_NAMES[base.kind]} cannot hold {ops.describe(new)}")
                self.emit(ir.Effect(ir.Intrinsic("list_set", (base, i, new)), self.line()))
                return
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
        if self.helper and self.runtime_returns:  # the paths return constants and values alike
            value = self.as_runtime(value)
        if self.helper:  # the caller knows the static parts; only runtime atoms cross
            value = self.passed_on(value)  # a nested def returned takes its free names' values now
            self.returns.append((ir.HELPER_RETURN, structure_of(value)))
            runtime = tuple(a for a in atoms_of(value) if isinstance(a, ir.Var))
            self.list_returns.update(i for i, a in enumerate(runtime) if a.name in self.param_vars)
            self.emit(ir.Return(runtime, ir.HELPER_RETURN, self.line()))
        else:
            atoms: list[ir.Atom] = []
            self.returned_lists: list[ir.Tup] = []
            spec = self.return_spec(node, value, atoms)
            self.returns.append((spec, structure_of(value)))
            self.emit(ir.Return(tuple(atoms), spec, self.line()))
        self.terminated = True

    def as_runtime(self, value: Any) -> Any:
        """`value` with its constants of a run-time kind held in variables (runtime_structure's view)."""
        if isinstance(value, ir.Tup):
            return ir.Tup(tuple(self.as_runtime(v) for v in value.items), value.structseq, value.is_list, value.origin)
        if isinstance(value, ir.Const) and value.kind not in (Kind.NONE, Kind.ENUM, Kind.DTYPE, Kind.STR):
            var = self.new_var("r", value.kind)
            self.emit(ir.Declare(var, self.line()))
            self.emit(ir.Move(var, value, self.line()))
            return var
        return value

    def return_spec(self, node: ast.AST, value: Any, atoms: list[ir.Atom]) -> str:
        if isinstance(value, ir.Tup):
            if value.is_list:
                if any(v is value for v in self.returned_lists):
                    raise self._list_twice(node)
                self.returned_lists.append(value)
            inner = "".join(self.return_spec(node, v, atoms) for v in value.items)
            if value.is_list:
                return f"[{inner}]"
            if value.structseq is not None:
                if value.structseq not in self.ctx.result_types:
                    self.ctx.result_types.append(value.structseq)
                return f"R{self.ctx.result_types.index(value.structseq)}({inner})"
            return f"({inner})"
        code = ir.RETURN_CODES.get(getattr(value, "kind", None))
        if code is not None and value.kind == Kind.INTS and not value.size:
            code = ir.PLAIN_INTS_RETURN  # a tuple in Python, not a torch.Size
        if code is not None:
            self.not_a_list_parameter(node, value, "returning a list parameter (or a slice of one)")
            if value.kind in (Kind.TENSOR_LIST, Kind.INT_LIST, Kind.FLOAT_LIST) and value in atoms:
                raise self._list_twice(node)
            if value.kind != Kind.NONE:
                atoms.append(value)
            return code
        raise self.error(
            node, f"a region cannot return {ops.describe(value)}", "Return tensors, numbers, or tuples of them."
        )

    def _list_twice(self, node: ast.AST) -> Exception:
        return self.error(
            node,
            "this returns one list twice (two names bound to it): Python returns the same list, a region would "
            "return two",
            "Return it once.",
        )

    def not_a_list_parameter(self, node: ast.AST, value: Any, what: str) -> None:
        """A list parameter is a list or a tuple, as the caller passed it (and so is a slice of it); code
        whose result would show which (returning it, `+`/`*` on it) stays Python."""
        if isinstance(value, ir.Var) and value.name in self.param_vars:
            raise self.error(
                node,
                f"{what} would show whether the caller passed a list or a tuple; the region cannot know",
                "Convert it first: list(xs) or tuple(xs).",
            )

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if not (isinstance(exc, ast.Call) and len(exc.args) <= 1 and not exc.keywords):
            raise self.error(node, 'only `raise ValueError("message")` and the like are supported in a region')
        if isinstance(exc.func, ast.Name) and exc.func.id in RAISABLE_ERRORS:
            error = exc.func.id
        else:
            error = self.exception_class(exc.func)
        message = self.message(exc.args[0]) if exc.args else ""
        self.emit(ir.Raise(error, message, self.line()))
        self.terminated = True

    def exception_class(self, node: ast.expr) -> str:
        """`raise LibraryError(message)`: the class as ``module:qualname``, which the runtime imports when
        it raises (a class Python can find again by that name: not one defined inside a function)."""
        value = self.value(node)
        cls = value.value if isinstance(value, Static) else None
        qualname = getattr(cls, "__qualname__", "")
        if not (isinstance(cls, type) and issubclass(cls, Exception)) or "<" in qualname:
            raise self.error(node, 'only `raise ValueError("message")` and the like are supported in a region')
        found = sys.modules.get(cls.__module__)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is not cls:
            raise self.error(node, f"the exception class {qualname} cannot be found by its name in {cls.__module__}")
        return f"{cls.__module__}:{qualname}"

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
        if isinstance(test, ir.Const) and test.value:
            return
        with self.block() as failing:  # the message is evaluated only when the assertion fails
            message = self.message(node.msg) if node.msg is not None else ""
            self.emit(ir.Raise("AssertionError", message, self.line()))
        if isinstance(test, ir.Const):
            self.body.extend(failing.body)
            self.terminated = True
            return
        self.emit(ir.If(test, (), tuple(failing.body), self.line()))

    def visit_If(self, node: ast.If) -> None:
        narrowed = self.narrowing(node.test)
        test = self.truth(node.test)
        if isinstance(test, ir.Const):  # decided at compile time: only the taken branch exists
            dropped = node.orelse if test.value else node.body
            for name in sorted(stored(dropped) - self.locals.keys()):
                # still a local of the function, as Python has it: no value
                self.locals[name] = Unbound(name, certain=True)
            self.compile_body(node.body if test.value else node.orelse)
            return
        self.branch(node, test, node.body, node.orelse, narrowed)

    def narrowing(self, test: ast.expr) -> list[tuple[str, bool, bool]]:
        """What a test says of names (or ``self.x``) that may be None: (the name, the branch it holds
        on, whether it is not None there) for `x is None` / `x is not None`, and for the `and`/`or`/
        `not` of such tests (`and`: what each says when true holds on its true branch; `or`: when false,
        on its false branch)."""
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            key = test.left.id if isinstance(test.left, ast.Name) else dotted(test.left)
            if key is None:
                return []
            value = self.locals.get(key)
            if (value is None or isinstance(value, Unbound)) and "." in key:
                value = self.visit(test.left)
            if getattr(value, "kind", None) in ir.HELD_BY or isinstance(value, (OptionalScalar, UnionValue)):
                is_not = isinstance(test.ops[0], ast.IsNot)
                return [(key, True, is_not), (key, False, not is_not)]
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return [(key, not branch, not_none) for key, branch, not_none in self.narrowing(test.operand)]
        if isinstance(test, ast.BoolOp):
            holds = isinstance(test.op, ast.And)
            return [fact for v in test.values for fact in self.narrowing(v) if fact[1] == holds]
        return []

    def narrow_on(self, facts: list[tuple[str, bool, bool]], which: bool) -> None:
        """On one branch of a test: bind what the test says there of names that may be None."""
        for key, branch, not_none in facts:
            if branch == which:
                self.narrow(key, not_none)

    def branch(
        self,
        node: ast.AST,
        test: ir.Atom,
        then: list[ast.stmt],
        orelse: list[ast.stmt],
        narrowed: list[tuple[str, bool, bool]] = (),
    ) -> None:
        before = dict(self.locals)
        paths = []
        for stmts, which in ((then, True), (orelse, False)):
            with self.block(before) as path:
                self.narrow_on(narrowed, which)
                self.compile_body(stmts)
            paths.append(path)
        then_path, else_path = paths
        merged = self.merge(node, before, [(p.locals, p.terminated, p.body) for p in paths])
        if then_path.terminated != else_path.terminated:
            # One path returns or raises: the other one goes on after the `if`, so what it binds
            # (a narrowed `x`, say) stays in scope for the code that follows.
            if then_path.terminated:
                self.emit(ir.If(test, tuple(then_path.body), (), self.line()))
                self.body.extend(else_path.body)
            else:
                self.emit(ir.If(test, (), tuple(else_path.body), self.line()))
                self.body.extend(then_path.body)
        else:
            self.emit(ir.If(test, tuple(then_path.body), tuple(else_path.body), self.line()))
        self.locals = merged
        self.terminated = then_path.terminated and else_path.terminated

    def narrow(self, key: str, not_none: bool) -> None:
        """In a branch of `if x is None`: bind `x` (or ``self.x``) to what it is there."""
        value = self.locals.get(key)
        if value is None or isinstance(value, Unbound):
            value = self.value(ast.parse(key, mode="eval").body)
        if getattr(value, "kind", None) in ir.HELD_BY:  # an X or None: an X where it is not None
            if not_none:
                self.locals[key] = self.intrinsic("unwrap_optional", ir.HELD_BY[value.kind], value)
            return
        narrowed = self.narrowed(value, not_none)
        if narrowed is not None:
            self.locals[key] = narrowed

    def merge(self, node: ast.AST, before: dict, branches: list[tuple[dict, bool, list]]) -> dict:
        """Locals after branches join: a name bound differently becomes one declared variable."""
        live = [(locs, body) for locs, term, body in branches if not term]
        if not live:
            return dict(before)
        if len(live) == 1:  # the other path raised or returned: the live one goes on after the `if` (branch)
            return dict(live[0][0])
        names = sorted(set().union(*(locs.keys() for locs, _ in live)))  # one order in every process
        merged = {}
        for name in names:
            if "." in name and name not in before:
                continue  # `self.x` narrowed in a branch: read again after it
            vals = [locs.get(name, UNBOUND) for locs, _ in live]
            if all(v is vals[0] or v == vals[0] for v in vals):
                merged[name] = vals[0]
                continue
            if any(v is UNBOUND or isinstance(v, (Unbound, MaybeBound)) for v in vals):
                merged[name] = self.maybe_bound(name, vals, [body for _, body in live])
                continue
            joined = self.join(node, name, vals, [body for _, body in live])
            merged[name] = joined
        return merged

    def maybe_bound(self, name: str, vals: list, bodies: list[list]) -> Any:
        """A name bound on some paths only: its value and a flag saying whether it is bound, which a read
        checks (UnboundLocalError, as in Python). Of one plain kind on every path that binds it; else
        Unbound (a read is refused when compiling)."""
        atoms = []
        for v in vals:
            if isinstance(v, MaybeBound):
                atoms.append(v.var)
            elif not (v is UNBOUND or isinstance(v, Unbound)):
                atoms.append(v)
        if not atoms and all(v is UNBOUND or (isinstance(v, Unbound) and v.certain) for v in vals):
            return Unbound(name, certain=True)  # no path binds it
        kinds = {getattr(a, "kind", None) for a in atoms}
        if not (
            all(isinstance(a, (ir.Var, ir.Const)) for a in atoms)
            and len(kinds) == 1
            and kinds <= _MAYBE_BOUND_KINDS
            and not any(isinstance(a, ir.Var) and a.name in self.param_vars for a in atoms)
        ):
            return Unbound(name)
        kind = kinds.pop()
        var, flag = self.new_var(name, kind), self.new_var(f"{name}_bound", Kind.BOOL)
        if all(getattr(a, "size", False) for a in atoms):
            var = self.sized(var)  # a torch.Size on every path that binds it
        self.emit(ir.Declare(var, self.line()))
        self.emit(ir.Declare(flag, self.line()))
        for v, body in zip(vals, bodies, strict=True):
            if isinstance(v, MaybeBound):
                body += [ir.Move(var, v.var, self.line()), ir.Move(flag, v.flag, self.line())]
            elif v is UNBOUND or isinstance(v, Unbound):
                body.append(ir.Move(flag, ir.Const(False, Kind.BOOL), self.line()))
            else:
                body += [ir.Move(var, v, self.line()), ir.Move(flag, ir.Const(True, Kind.BOOL), self.line())]
        return MaybeBound(name, var, flag)

    def join(self, node: ast.AST, name: str, vals: list, bodies: list[list]) -> Any:
        first = vals[0]
        if all(v is first or v == first for v in vals):
            return first
        runtime_list = next((v.kind for v in vals if getattr(v, "kind", None) in ir.LIST_KINDS), None)
        if runtime_list is not None:  # a list known at compile time on another path: a run-time one too
            for v in vals:
                if isinstance(v, ir.Tup) and v.is_list:
                    if v.items:
                        self.need_runtime_list(node, v)
                    raise (
                        RuntimeListNeeded(v.origin, runtime_list, node)
                        if v.origin is not None
                        else self.error(node, f"'{name}' is a list of different kinds on different paths")
                    )
        if isinstance(first, ir.Tup):
            if not all(isinstance(v, ir.Tup) and len(v.items) == len(first.items) for v in vals):
                for v in vals:
                    if isinstance(v, ir.Tup) and v.is_list and v.origin is not None and v.items:
                        self.need_runtime_list(node, v)
                return Unbound(name, "it is a tuple of different lengths in different branches")
            origins = {v.origin for v in vals}
            return ir.Tup(
                tuple(self.join(node, name, [v.items[i] for v in vals], bodies) for i in range(len(first.items))),
                first.structseq,
                first.is_list,
                origins.pop() if len(origins) == 1 else None,
            )
        kinds = {getattr(v, "kind", None) for v in vals}
        for held, optional in ir.OPTIONAL_OF.items():
            if len(kinds) > 1 and kinds <= {Kind.NONE, held, optional}:
                kinds = {optional}  # an X on one path, None on another
        if len(kinds) > 1 and kinds <= {Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.NUMBER}:
            kinds = {Kind.NUMBER}  # an int on one path, a float on another: a number of run-time type
        if len(kinds) != 1 or None in kinds or Kind.NONE in kinds or Kind.ENUM in kinds:
            return Unbound(name, "it has different kinds of value in different branches")
        var = self.new_var(name, kinds.pop())
        if any(isinstance(v, ir.Var) and v.name in self.param_vars for v in vals):
            self.param_vars.add(var.name)
        self.emit(ir.Declare(var, self.line()))
        for v, body in zip(vals, bodies, strict=True):
            body.append(ir.Move(var, v, self.line()))
        return self.sized(var) if all(getattr(v, "size", False) for v in vals) else var


def unpacked_length(targets: list[ast.expr]) -> int | None:
    """How many names every target of `a, b = ...` unpacks into, where none is starred and all agree."""
    lengths = {
        len(t.elts)
        if isinstance(t, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in t.elts)
        else None
        for t in targets
    }
    return lengths.pop() if len(lengths) == 1 else None
