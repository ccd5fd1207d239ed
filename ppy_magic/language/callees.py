"""Callees in the region language: other @ppy.opt functions, library functions, closures and adapters.

A mixin of ``function.FunctionCompiler``. A callee is compiled, by a new compiler of the same class,
as a helper specialised to the call site's argument kinds (constants stay constants), and called;
its arguments are bound as Python binds them (``bind_arguments``).
"""

from __future__ import annotations

import ast
import types
from typing import Any

from ..errors import CompileError
from ..torchlib import adapters, torch_source
from . import ir, param_kinds, source
from .ir import Kind
from .module_plan import METHOD, Slot
from .namespace import Globals, closure_globals, collect_globals, function_key, library_globals
from .values import (
    CellFunction,
    Closure,
    KwArgs,
    MaybeBound,
    ModuleValue,
    OptionalScalar,
    Unbound,
    UnionValue,
    Unsupported,
    atoms_of,
    constant,
    kinds_of,
    rebuild,
    runtime_structure,
    structure_of,
)


class CalleeCompiler:
    """A call of a function the region compiles too: found (``callee_def``), bound, specialised, called."""

    def callee_def(self, fn: Any) -> tuple[ast.FunctionDef, Globals, str, list[str]] | None:
        if isinstance(fn, CellFunction):
            return fn.node, self.g, self.filename, self.source_lines
        target = getattr(fn, "__ppy_compiles__", None) or fn  # a function ppy_magic.compile made a region
        target = getattr(target, "__wrapped__", target) if getattr(target, "__ppy_region__", False) else target
        if not isinstance(target, types.FunctionType):
            return None
        if getattr(target, "__ppy_opt__", 0):
            g = collect_globals(ast.Module(body=[], type_ignores=[]), target.__globals__)
        elif (reached := self.g.reaches(target) or torch_source.holds(target)) and source.is_plain(target):
            g = library_globals(target.__globals__, self.g.reach)  # the library a compiled model comes from
        elif reached and (cells := source.closure_values(target)) is not None:
            g = closure_globals(library_globals(target.__globals__, self.g.reach), cells)  # a decorator's wrapper
        else:
            return None
        found = source.definition(target)
        if found is None:
            return None
        node, filename, file_lines = found
        return node, g, filename, file_lines

    def torch_source_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict, restated: bool) -> Any:
        """One of torch's Python-level functions (``torch_source.holds``), compiled from the installed torch's
        source. Where that does not compile for this call: NotImplemented if an adapter restates it (the
        adapter then), else the reason, at this call (the statement stays Python)."""
        callee = self.callee_def(fn)
        if callee is None:
            if restated:
                return NotImplemented
            raise self.error(node, f"the source of `{torch_source.name_of(fn)}` cannot be found")
        made = self.attempt_torch_source(fn, callee, lambda: self.call_user(node, callee, args, kwargs))
        if made is NotImplemented and not restated:
            why = torch_source.fallbacks.get(torch_source.name_of(fn), "")
            raise self.error(node, f"{why} (in torch's `{torch_source.name_of(fn)}`)")
        return made

    def torch_forward_call(self, node: ast.Call, mv: ModuleValue, method: str, args: list, kwargs: dict) -> Any:
        """A torch.nn module's `method` compiled from the installed torch's source (``torch_source``), reading
        the attributes its restatement declares; NotImplemented (the restatement then) where it does not compile."""
        cls = mv.mtype.cls.obj
        fn = getattr(cls, method, None) if cls is not None else None
        found = source.definition(fn) if torch_source.holds_method(fn) else None
        if found is None:
            return NotImplemented
        fdef, filename, lines = found
        g = library_globals(fn.__globals__, self.g.reach)

        def compile_it() -> Any:
            made = self.call_helper(
                node, fdef, g, filename, lines, [mv, *args], kwargs, adapter=False, display=f"{cls.__name__}.{method}"
            )
            # the method Python would find is the one compiled here: checked at each call
            self.layout(mv.mtype).slot(Slot(method, METHOD, "-", pos=function_key(fdef)[1], origin=filename))
            return made

        return self.attempt_torch_source(fn, (fdef, g, filename, lines), compile_it)

    def attempt_torch_source(self, fn: Any, callee: tuple, compile_it: Any) -> Any:
        """`compile_it()` (a call of `callee`, the def of `fn` in torch's source), or NotImplemented where it does
        not compile, the attempt taken back (``Context.restore``) and why kept for the coverage report. The region
        names what it compiled by the file and line of the def it parsed (``explain``)."""
        saved = self.ctx.checkpoint()
        try:
            made = compile_it()
        except CompileError as err:
            self.ctx.restore(saved)  # nothing of the attempt stays in the region
            torch_source.gave_way(fn, err.message)
            return NotImplemented
        torch_source.compiled.add(torch_source.name_of(fn))
        fdef, _, filename, _ = callee
        self.ctx.torch_sources.add(f"{torch_source.name_of(fn)} ({torch_source.relative(filename)}:{fdef.lineno})")
        return made

    def call_closure(self, node: ast.Call, closure: Closure, args: list, kwargs: dict) -> Any:
        """A lambda or nested def, compiled like a callee; its free names are extra arguments."""
        if closure.env is not None:
            env = closure.env
        elif closure.owner == id(self):
            # a closure among the free names (a lambda a nested def calls) takes its own free names' values now
            env = tuple((n, self.passed_on(self.locals[n])) for n in closure.free_names() if n in self.locals)
        else:
            raise self.error(
                node,
                "a function defined in another function's body cannot be called here in a region: "
                "define it where it is called, or pass it as an argument",
            )
        for name, value in env:
            if isinstance(value, Unbound):
                raise self.error(node, f"'{name}' may be unbound here: {value.why}")
            if isinstance(value, MaybeBound):
                raise self.error(node, f"'{name}' may be unbound here: it is bound on some paths only")
        c = closure
        return self.call_helper(node, c.node, c.g, c.filename, c.lines, args, kwargs, adapter=False, env=env)

    def passed_on(self, value: Any) -> Any:
        """A value given to another function: a closure of this one takes its free names' values now."""
        if isinstance(value, Closure) and value.env is None and value.owner == id(self):
            capturing = self.capturing
            if id(value) in capturing:  # nested defs that call each other: recursion, refused where called
                return value
            capturing.add(id(value))
            try:
                env = tuple((n, self.passed_on(self.locals[n])) for n in value.free_names() if n in self.locals)
            finally:
                capturing.discard(id(value))
            return Closure(value.node, value.owner, value.g, value.filename, value.lines, env)
        return value

    def call_user(self, node: ast.Call, callee: tuple, args: list, kwargs: dict) -> Any:
        fdef, g, filename, lines = callee
        return self.call_helper(node, fdef, g, filename, lines, args, kwargs, adapter=False)

    def call_adapter(self, node: ast.AST, name: str, args: list, kwargs: dict) -> Any:
        defs, lines = adapters.definitions()
        g = Globals(dict(adapters.namespace()))
        return self.call_helper(node, defs[name], g, "<adapter>", lines, args, kwargs, adapter=True)

    def call_helper(
        self,
        node: ast.AST,
        fdef: ast.FunctionDef,
        g: Globals,
        filename: str,
        lines: list[str],
        args: list,
        kwargs: dict,
        adapter: bool,
        env: tuple[tuple[str, Any], ...] = (),
        display: str | None = None,
    ) -> Any:
        who = display or fdef.name
        # One def under two closures (a decorator's wrapper of two methods) is two functions: keyed by both.
        # A method called on another module (a Sequential inside a Sequential) is not a call of itself: the
        # module tree compiled in is finite, so a def may recur on modules of other types, never on the same one.
        on = args[0].mtype if args and isinstance(args[0], ModuleValue) else None
        frame = (id(fdef), g.closure_key(), on)
        if not adapter and (frame in self.ctx.stack or (fdef is self.ctx.root and on is None)):
            raise self.error(node, f"'{who}' calls itself; recursion is not supported in a region")
        args = [self.passed_on(a) for a in args]
        kwargs = {k: self.passed_on(v) for k, v in kwargs.items()}
        names, bound = self.bind_arguments(node, fdef, g, args, kwargs)
        for name, value in env:  # a closure's free names: extra arguments of its helper
            if name not in bound:
                names.append(name)
                bound[name] = value
        runtime_args = tuple(a for n in names for a in atoms_of(bound[n]) if isinstance(a, ir.Var))
        # which arguments hold a list parameter (a list or a tuple, as the caller passed it): the callee knows too
        lists = tuple(i for i, a in enumerate(runtime_args) if a.name in self.param_vars)
        key = (id(fdef), g.closure_key(), tuple((n, structure_of(bound[n])) for n in names), lists)
        if key not in self.ctx.specialised:
            self.ctx.specialised[key] = self.specialise(
                node, fdef, g, filename, lines, names, bound, adapter, who, lists, frame
            )
        symbol, structure, kinds, list_returns = self.ctx.specialised[key]
        targets = tuple(self.new_var("r", k) for k in kinds)
        self.param_vars.update(targets[i].name for i in list_returns)  # a list parameter, returned
        self.emit(ir.Assign(targets, ir.CallFunction(symbol, runtime_args), self.line()))
        it = iter(targets)
        return rebuild(structure, it)

    def bind_arguments(
        self, node: ast.AST, fdef: ast.FunctionDef, g: Globals, args: list, kwargs: dict
    ) -> tuple[list[str], dict[str, Any]]:
        """The callee's parameters bound to the call's values as Python binds them: positional-only and
        plain parameters, `*args` (a tuple), keyword-only ones, `**kwargs` (a KwArgs); then defaults."""
        who, params = fdef.name, fdef.args
        positional = [a.arg for a in params.posonlyargs + params.args]
        keyword = {a.arg for a in params.args + params.kwonlyargs}
        defaults = dict(zip(positional[len(positional) - len(params.defaults) :], params.defaults, strict=True))
        defaults.update({a.arg: d for a, d in zip(params.kwonlyargs, params.kw_defaults, strict=True) if d is not None})
        if len(args) > len(positional) and not params.vararg:
            raise self.error(node, f"{who}() takes {len(positional)} positional arguments but {len(args)} were given")
        bound: dict[str, Any] = dict(zip(positional, args, strict=False))  # the rest by keyword or default
        extra: list[tuple[str, Any]] = []
        for k, v in kwargs.items():
            if k in keyword and k not in bound:
                bound[k] = v
            elif params.kwarg and k not in bound:
                extra.append((k, v))
            else:
                raise self.error(node, f"{who}() got an unexpected or repeated argument '{k}'")
        names = positional + ([params.vararg.arg] if params.vararg else []) + [a.arg for a in params.kwonlyargs]
        if params.vararg:
            bound[params.vararg.arg] = ir.Tup(tuple(args[len(positional) :]))
        for n in names:
            if n not in bound:
                if n not in defaults:
                    raise self.error(node, f"{who}() missing required argument '{n}'")
                ok, value = param_kinds.default_value(defaults[n], g)
                c = constant(value) if ok else None
                if c is None:
                    raise self.error(node, f"the default of '{n}' in {who}() is not known when compiling")
                bound[n] = c
        if params.kwarg:
            names.append(params.kwarg.arg)
            bound[params.kwarg.arg] = KwArgs(tuple(extra))
        return names, bound

    def specialise(
        self,
        node: ast.AST,
        fdef: ast.FunctionDef,
        g: Globals,
        filename: str,
        lines: list[str],
        names: list[str],
        bound: dict,
        adapter: bool,
        who: str,
        lists: tuple[int, ...] = (),
        frame: tuple = (),
    ) -> tuple[str, Any, tuple[Kind, ...], frozenset[int]]:
        for runtime_returns in (False, True):
            sub = type(self)(
                fdef, g, filename, lines, self.ctx, region_name=self.region_name, adapter=adapter, helper=True
            )
            sub.runtime_returns = runtime_returns
            params: list[ir.Var] = []
            for n in names:
                sub.locals[n] = sub.rename_params(bound[n], n, params)
            sub.param_vars.update(params[i].name for i in lists)
            self.ctx.stack.append(frame or (id(fdef), g.closure_key(), None))
            try:
                sub.compile_body(fdef.body)
            except Unsupported as exc:
                if self.adapter:
                    raise  # up to the call in user code
                raise self.error(node, str(exc)) from None
            except CompileError as err:
                if adapter:
                    raise self.error(node, err.message, err.hint) from None
                raise
            finally:
                self.ctx.stack.pop()
            if not sub.terminated:
                sub.emit(ir.Return((), ir.HELPER_RETURN, sub.line()))
                sub.returns.append((ir.HELPER_RETURN, structure_of(ir.Const(None, Kind.NONE))))
            structures = {s for _, s in sub.returns}
            if len(structures) == 1:
                break
            # `return -1, x[0]` on one path, `return i, row` on another: the constants as values, once more
            if runtime_returns or len({runtime_structure(s) for s in structures}) != 1:
                raise self.error(node, f"'{who}' returns different kinds of value on different paths")
        structure = structures.pop()
        kinds = kinds_of(structure)
        stem = "".join(ch if ch.isalnum() else "_" for ch in who).strip("_") or "fn"  # <lambda>: lambda; A.f: A_f
        symbol = f"ppy_fn_{len(self.ctx.helpers)}_{stem}"
        body = tuple(sub.body)
        # Lines are the region's file's: a callee of another file (torch's source, a library's other module)
        # points its errors at the caller's line, as an adapter does.
        own_lines = not adapter and filename == self.ctx.filename
        self.ctx.helpers.append(ir.Helper(symbol, tuple(params), body, kinds, own_lines))
        if own_lines:
            for ln in range(fdef.lineno, (fdef.end_lineno or fdef.lineno) + 1):
                if 0 < ln <= len(lines):
                    self.ctx.source_lines.setdefault(ln, lines[ln - 1].strip())
        return symbol, structure, kinds, frozenset(sub.list_returns)

    def rename_params(self, value: Any, name: str, params: list[ir.Var]) -> Any:
        """A helper's view of an argument: runtime atoms become its parameters, the rest stays static."""
        if isinstance(value, ir.Tup):
            items = tuple(self.rename_params(v, name, params) for v in value.items)
            return ir.Tup(items, value.structseq, value.is_list, value.origin)
        if isinstance(value, KwArgs):
            return KwArgs(tuple((k, self.rename_params(v, k, params)) for k, v in value.items))
        if isinstance(value, Closure) and value.env is not None:
            env = tuple((k, self.rename_params(v, k, params)) for k, v in value.env)
            return Closure(value.node, value.owner, value.g, value.filename, value.lines, env)
        if isinstance(value, ModuleValue):
            return ModuleValue(self.rename_params(value.atom, name, params), value.mtype, name, value.sample)
        if isinstance(value, OptionalScalar):
            none = self.rename_params(value.none, f"{name}_is_none", params)
            return OptionalScalar(none, self.rename_params(value.value, name, params), name)
        if isinstance(value, UnionValue):
            tag = self.rename_params(value.tag, f"{name}_option", params)
            module = self.rename_params(value.module, name, params)
            return UnionValue(tag, module, value.options, name, value.sample)
        if isinstance(value, ir.Var):
            var = self.new_var(name, value.kind)
            params.append(var)
            return self.sized(var) if value.size else var
        return value
