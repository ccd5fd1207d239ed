"""Modules in the region language: ``self.<name>``, submodule calls, ModuleList/ModuleDict/Sequential.

A mixin of ``function.FunctionCompiler``. A module value (``values.ModuleValue``) is what
the runtime read of one module at the call, before any operator runs: the plan
(``Plan``) says, per module class met, which attributes to read, where (an
attribute, a key or a position in ``_modules``) and of which kind; the region's C++
reads them from there. Reading them all first keeps a call the region was not built
for (a subclass instance, a hook on a submodule called inline, an attribute of
another kind) a fallback to the Python method with nothing run yet.

A submodule's ``forward`` (a ``@ppy.opt`` method of the same source, or the
restatement of a ``torch.nn`` module in ``nn_modules.py``) is compiled as a helper,
like any callee. Its module is checked for hooks, since ``nn.Module.__call__`` would
run them.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import CompileError
from ..torchlib import nn_modules, ops, torch_source
from . import call_values, einops_forms, ir
from .attr_types import NONE, ModType, ParamObject, Scalar, Union, Unknown
from .ir import Kind
from .iteration import RangeIteration, StaticIteration
from .loops import stored_names
from .module_plan import (
    ALL,
    ATTRIBUTE,
    KEY,
    LENGTH,
    METHOD,
    POSITION,
    READS,
    SCALAR_CODES,
    LayoutBuilder,
    ModuleLoop,
    Slot,
)
from .namespace import Globals, function_key, static_value
from .values import BoundMethod, ModuleValue, OptionalScalar, PendingObject, Static, Unbound, UnionValue, constant

# ---- compiling with modules ---------------------------------------------------------------------------


class ModuleCompiler:
    # -- layouts --------------------------------------------------------------------------------------
    def layout(self, mtype: ModType) -> LayoutBuilder:
        found = self.ctx.layout_index.get(mtype)
        if found is None:
            found = LayoutBuilder(len(self.ctx.layouts), mtype)
            self.ctx.layouts.append(found)
            self.ctx.layout_index[mtype] = found
        return found

    def module_model(self, node: ast.AST, mv: ModuleValue) -> Any:
        if mv.mtype.cls is None:
            return None
        model = self.classes.model(mv.mtype.cls)
        if model.problem:
            raise self.error(node, f"{mv.path} is a {mv.mtype.cls.name}, which a region cannot read: {model.problem}")
        return model

    # -- attributes -------------------------------------------------------------------------------------
    def module_attribute(self, node: ast.Attribute, mv: ModuleValue) -> Any:
        name = node.attr
        path = f"{mv.path}.{name}"
        m = mv.mtype
        if name == "__class__":
            return self.class_of(node, mv)
        if mv.sample is not None:
            return self.sampled_attribute(node, mv, name, path)
        model = self.module_model(node, mv)
        if model is not None and model.own_getattr:
            raise self.error(
                node, f"`{path}`: {m.cls.name} has a __getattr__ of its own, read only from a call's object"
            )
        if m.cls is None:  # a plain object (a config): its fields' kinds come from a dataclass
            from .self_assignments import field_type

            assert m.origin is not None
            return self.read(node, mv, Slot(name, ATTRIBUTE, ""), field_type(self.classes, m.origin.arg, name), path)
        if m.children is not None and name not in model.attrs:
            child = dict(m.children).get(name)
            if child is not None:
                return self.read(node, mv, Slot(name, ATTRIBUTE, ""), child, path)
        if name in model.methods and name not in model.attrs:
            return BoundMethod(mv, name)
        t = model.attr(name)
        if t is None:
            if name in model.defined:
                raise self.error(
                    node,
                    f"`{path}` is a class attribute or method of {m.cls.name} a region does not read",
                    "Compile the method with @ppy.opt, or make it a plain attribute set in __init__.",
                )
            raise self.error(
                node,
                f"`{path}` is not set in {m.cls.name}'s __init__ or annotated in its class body",
                f"Assign it in __init__ (self.{name} = ...) or annotate it in the class body ({name}: int).",
            )
        return self.read(node, mv, Slot(name, ATTRIBUTE, ""), t, path)

    def class_of(self, node: ast.AST, mv: ModuleValue) -> Static:
        """`obj.__class__` / `type(obj)`: the class the region was compiled for, which reading the object
        checks at each call (a layout is for objects of exactly its class)."""
        cls = mv.mtype.cls.obj if mv.mtype.cls is not None else None
        if cls is None:
            raise self.error(node, f"the class of `{mv.path}` is not known when compiling")
        self.layout(mv.mtype)
        return Static(cls)

    def sampled_attribute(self, node: ast.Attribute, mv: ModuleValue, name: str, path: str) -> Any:
        """`obj.name` compiled at a call: of the kind (or the value) the call's object holds there."""
        m = mv.mtype
        model = self.module_model(node, mv) if m.module else None
        if model is not None and name in model.methods and name not in model.attrs:
            return BoundMethod(mv, name)
        found, value = call_values.lookup(mv.sample, name)
        if not found:
            if model is not None and name in model.methods:
                return BoundMethod(mv, name)
            getter = call_values.property_getter(mv.sample, name)
            callee = self.callee_def(getter) if getter is not None else None
            if callee is not None:
                try:
                    return self.property_call(node, mv, name, getter, callee)
                except CompileError as exc:
                    value = f"{value}, whose getter a region cannot take ({exc.message})"
            err = self.error(node, f"`{path}` cannot be read in a region: {value}")
            if not m.module:  # a plain object's property (a config's): read in Python before the statement
                err.uses = (node,)
            raise err
        constant_scalars = self.ctx.call is not None and self.ctx.call.constant_scalars
        stated = model.attr(name) if model is not None else None
        # What the class says, where the value agrees (narrowed to the option it holds): every instance of the
        # class shares one layout, so what the class states is read as it states it. torch's own modules keep
        # their restated declarations exactly (their restated forwards read them so).
        exact = m.cls is not None and nn_modules.declared(m.cls.obj) is not None
        t = call_values.stated_for(stated, value, exact) if stated is not None else None
        if constant_scalars and not exact and isinstance(t, Scalar) and t.kind != Kind.TENSOR:
            t = None  # the second try: a user class's Python values are constants too (a flag decides a branch)
        if t is None:
            t = call_values.attribute_type(value, constant_scalars)
        return self.read(node, mv, Slot(name, ATTRIBUTE, ""), t, path, sample=value)

    def property_call(self, node: ast.Attribute, mv: ModuleValue, name: str, getter: Any, callee: tuple) -> Any:
        """`obj.name` where the class makes `name` a property: its getter compiled inline, as a method is
        (the class's property checked at each call to still be the one compiled)."""
        fdef, g, filename, lines = callee
        display = f"{type(mv.sample).__name__}.{name}"
        value = self.call_helper(node, fdef, g, filename, lines, [mv], {}, adapter=False, display=display)
        code = getter.__code__
        self.layout(mv.mtype).slot(Slot(name, METHOD, "-", pos=code.co_firstlineno, origin=code.co_filename))
        return value

    def read(self, node: ast.AST, mv: ModuleValue, where: Slot, t: Any, path: str, sample: Any = None) -> Any:
        """Read what `where` names in `mv`, of type `t`, as a value of the region (`sample`: the object
        the call compiling it brought there, if any)."""
        lay = self.layout(mv.mtype)
        if isinstance(t, call_values.Constant):
            lay.slot(Slot(where.name, where.how, "K", pos=where.pos, value=t.value))
            self.ctx.specialised_reads.add((path, self.line()))
            c = constant(t.value)
            return c if c is not None else Static(t.value)
        if isinstance(t, Unknown):
            raise self.error(
                node,
                f"the kind of `{path}` is not known before the cell runs: {t.why}",
                "Annotate it in the class body (e.g. `n_head: int`), or assign it a literal, "
                "an annotated parameter, a Parameter, a buffer or a module in __init__.",
            )
        if isinstance(t, ParamObject):
            if where.how != ATTRIBUTE:
                raise self.error(node, f"`{path}` cannot be read in a region")
            return PendingObject(mv, where.name, t, path)
        if isinstance(t, Scalar):
            if t == NONE:
                lay.slot(Slot(where.name, where.how, "N", pos=where.pos))
                return ir.Const(None, Kind.NONE)
            code = SCALAR_CODES.get(t.kind)
            if t.kind == Kind.INTS:
                code = {"tuple": "I", "list": "J"}.get(t.seq, "Q")
            if code is None:
                raise self.error(node, f"`{path}` is {ir.KIND_NAMES.get(t.kind, t.kind)}, which a region does not read")
            i = lay.slot(Slot(where.name, where.how, code, t.optional, pos=where.pos))
            slot = ir.Const(i, Kind.INT)
            if t.kind == Kind.TENSOR and t.optional:
                return self.intrinsic("attr_opt_tensor", Kind.OPT_TENSOR, mv.atom, slot)
            value = self.intrinsic(READS[t.kind], t.kind, mv.atom, slot)
            if t.kind == Kind.INTS and t.seq != "tuple":
                self.param_vars.add(value.name)  # a list (or either) in Python: never returned as a tuple
            if t.optional:
                return OptionalScalar(self.intrinsic("attr_is_none", Kind.BOOL, mv.atom, slot), value, path)
            return value
        if isinstance(t, ModType):
            sub = self.layout(t)
            i = lay.slot(Slot(where.name, where.how, "M", subs=(sub.index,), pos=where.pos))
            atom = self.intrinsic("attr_module", Kind.MODULE, mv.atom, ir.Const(i, Kind.INT))
            return ModuleValue(atom, t, path, sample)
        if isinstance(t, Union):
            subs = tuple(-1 if o is None else self.layout(o).index for o in t.options)
            i = lay.slot(Slot(where.name, where.how, "U", subs=subs, pos=where.pos))
            slot = ir.Const(i, Kind.INT)
            tag = self.intrinsic("attr_variant", Kind.INT, mv.atom, slot)
            module = self.intrinsic("attr_module", Kind.MODULE, mv.atom, slot)
            return UnionValue(tag, module, t.options, path, sample)
        raise self.error(node, f"`{path}` cannot be read in a region")

    def pending_object(self, node: ast.AST, p: PendingObject) -> ModuleValue:
        """`self.config` as the plain object whose attributes the region reads."""
        sub = self.layout(p.origin.as_type())
        i = self.layout(p.module.mtype).slot(Slot(p.name, ATTRIBUTE, "M", subs=(sub.index,)))
        atom = self.intrinsic("attr_module", Kind.MODULE, p.module.atom, ir.Const(i, Kind.INT))
        return ModuleValue(atom, sub.mtype, p.path)

    def pending_error(self, node: ast.AST, p: PendingObject) -> Exception:
        return self.error(
            node,
            f"the kind of `{p.path}` is not known before the cell runs: it is the parameter "
            f"'{p.origin.arg.arg}' of __init__, which has no annotation",
            f"Annotate the parameter (`{p.origin.arg.arg}: int`) or the attribute in the class body (`{p.name}: int`).",
        )

    # -- calls ----------------------------------------------------------------------------------------------
    def call_module(
        self, node: ast.Call, mv: ModuleValue, args: list, kwargs: dict, method: str = "forward", hooks: bool = True
    ) -> Any:
        if method == "forward" and einops_forms.layer_operation(mv.sample) is not None:
            return self.einops_layer_call(node, mv, args, kwargs, hooks)
        model = self.module_model(node, mv)
        if model is None:
            raise self.error(node, f"{mv.path} is not a module a region can call")
        if not model.module and method == "forward":
            raise self.error(node, f"{mv.path} is a {mv.mtype.cls.name}, not an nn.Module: it cannot be called")
        if hooks and model.call_problem:  # calling it runs its class's own __call__, not nn.Module's
            raise self.error(node, f"{mv.path} cannot be called inline: {mv.mtype.cls.name} {model.call_problem[3:]}")
        target = model.methods.get(method)
        if target is None:
            obj = mv.mtype.cls.obj
            torch_own = obj is not None and obj.__module__.startswith("torch")
            what = f"{obj.__module__}.{obj.__qualname__}" if obj is not None else mv.mtype.cls.name
            hint = (
                f"{what}.{method} is not a plain function of torch's source; call the functional form instead."
                if torch_own
                else f"Decorate {mv.mtype.cls.name}.{method} with @ppy.opt in the same cell."
                if not self.g.reach
                else f"{what}.{method} is wrapped by a decorator with code of its own, or is not a plain function: "
                "it runs as Python (its body a region of its own)."
            )
            raise self.error(node, f"{mv.path}.{method}() is not compiled: {what}.{method} is not a region", hint)
        if hooks:
            self.inline_call(node, mv)
        if target.adapter:  # a torch.nn module: torch's own forward, where it compiles for this call
            made = self.torch_forward_call(node, mv, method, args, kwargs)
            if made is not NotImplemented:
                return made
        # The method Python would find is the one compiled here: checked at each call.
        origin = "torch" if target.adapter else ("" if target.filename == self.ctx.filename else target.filename)
        line = 0 if target.adapter else function_key(target.node)[1]
        self.layout(mv.mtype).slot(Slot(method, METHOD, "-", pos=line, origin=origin))
        made = self.call_helper(
            node,
            target.node,
            target.g,
            target.filename,
            target.lines,
            [mv, *args],
            kwargs,
            adapter=target.adapter,
            display=f"{mv.mtype.cls.name}.{method}",
        )
        fn = getattr(mv.mtype.cls.obj, method, None)
        if not target.adapter and torch_source.holds_method(fn):  # a torch.nn class's, from torch's own source
            self.ctx.torch_sources.add(
                f"{torch_source.name_of(fn)} ({torch_source.relative(target.filename)}:{target.node.lineno})"
            )
        return made

    def inline_call(self, node: ast.Call, mv: ModuleValue) -> None:
        """`mv`'s forward runs inline, where nn.Module.__call__ would run its hooks: its layout checks at each
        call that it has none. A module the call being compiled for brought with a hook registered is not
        called inline at all (the call runs as Python, hooks and all, where the function is split around it)."""
        what = registered_hook(mv.sample)
        if what is not None:
            raise self.error(
                node,
                f"{mv.path} has {what} registered: nn.Module.__call__ runs it, a region would call {mv.path}'s "
                "forward inline without it",
                "The call runs as Python while the hook stays registered.",
            )
        self.layout(mv.mtype).inline = True

    def einops_layer_call(self, node: ast.Call, mv: ModuleValue, args: list, kwargs: dict, hooks: bool) -> Any:
        """An einops ``Rearrange`` or ``Reduce`` layer: its pattern and axis lengths compiled in (compared at
        each call), its forward the function einops_forms writes for them."""
        operation, pattern, axes = einops_forms.layer_operation(mv.sample)
        if len(args) + len(kwargs) != 1 or set(kwargs) - {"input"}:
            raise self.error(node, f"{mv.path}() takes one tensor")
        x = args[0] if args else kwargs["input"]
        if getattr(x, "kind", None) != Kind.TENSOR:
            raise self.error(node, f"{mv.path}() of {ops.describe(x)} (not a tensor) is not compiled")
        if not all(type(n) is int for _, n in axes):
            raise self.error(node, f"{mv.path}: an einops layer whose axis lengths are not all ints")
        for name in ("pattern", "_axes_lengths") + (("reduction",) if operation != "rearrange" else ()):
            value = getattr(mv.sample, name)
            self.read(node, mv, Slot(name, ATTRIBUTE, ""), call_values.Constant(value), f"{mv.path}.{name}", value)
        forward = type(mv.sample).forward
        if hooks:
            self.inline_call(node, mv)
        code = forward.__code__
        self.layout(mv.mtype).slot(Slot("forward", METHOD, "-", pos=code.co_firstlineno, origin=code.co_filename))
        try:
            fdef, lines = einops_forms.specialised(operation, pattern, tuple(a for a, _ in axes), layer=True)
        except Exception as exc:  # noqa: BLE001 - NotNative, or a pattern einops itself cannot read
            raise self.error(node, f"{mv.path}: {exc}") from None
        g = Globals(einops_forms.namespace())
        lengths = [ir.Const(n, Kind.INT) for _, n in axes]
        display = f"{type(mv.sample).__name__}.forward"
        return self.call_helper(node, fdef, g, "<einops>", lines, [x, *lengths], {}, adapter=True, display=display)

    def call_union(self, node: ast.Call, uv: UnionValue, args: list, kwargs: dict) -> Any:
        results, bodies, tags = [], [], []
        for i, option in enumerate(uv.options):
            if option is None:
                continue
            with self.block() as path:
                results.append(self.call_module(node, ModuleValue(uv.module, option, uv.path), args, kwargs))
            bodies.append(path.body)
            tags.append(i)
        joined = self.join(node, "result", results, bodies)
        if isinstance(joined, Unbound):
            raise self.error(node, f"the modules {uv.path} may be return different kinds of value")
        tests = [self.intrinsic("eq", Kind.BOOL, uv.tag, ir.Const(t, Kind.INT)) for t in tags]
        if None in uv.options:  # calling None raises, as in Python
            orelse: tuple = (ir.Raise("TypeError", "'NoneType' object is not callable", self.line()),)
        else:
            orelse = tuple(bodies.pop())
            tests.pop()
        for test, body in reversed(list(zip(tests, bodies, strict=True))):
            orelse = (ir.If(test, tuple(body), orelse, self.line()),)
        for stmt in orelse:
            self.emit(stmt)
        return joined

    # -- containers -----------------------------------------------------------------------------------------
    def module_items(self, node: ast.AST, mv: ModuleValue) -> tuple[str, Any]:
        """What iterating `mv` gives: ("static", [values]) for known children, ("list", (modules, elem))."""
        m = mv.mtype
        lay = self.layout(m)
        if m.elem is not None:
            i = lay.slot(Slot("*", ALL, "m", subs=(self.layout(m.elem).index,)))
            return "list", (self.intrinsic("attr_modules", Kind.MODULES, mv.atom, ir.Const(i, Kind.INT)), m.elem)
        if m.children is not None and m.cls is not None and m.cls.obj is not None:
            if m.cls.obj.__name__ == "ModuleDict":
                raise self.error(node, f"iterating {mv.path} (a ModuleDict) is not supported in a region")
            lay.slot(Slot("#", LENGTH, "-", pos=len(m.children)))
            values = [
                self.read(node, mv, Slot(str(k), POSITION, "", pos=k), t, f"{mv.path}[{k}]", child_sample(mv, k))
                for k, (_key, t) in enumerate(m.children)
            ]
            return "static", values
        raise self.error(node, f"{mv.path} is a {m.describe()}, which cannot be iterated in a region")

    def module_len(self, node: ast.AST, mv: ModuleValue) -> ir.Atom:
        kind, found = self.module_items(node, mv)
        if kind == "static":
            return ir.Const(len(found), Kind.INT)
        return self.intrinsic("modules_len", Kind.INT, found[0])

    def module_index(self, node: ast.Subscript, mv: ModuleValue, index: Any) -> Any:
        m = mv.mtype
        name = m.cls.obj.__name__ if m.cls is not None and m.cls.obj is not None else None
        if name not in ("ModuleList", "Sequential", "ModuleDict"):
            raise self.error(node, f"indexing {mv.path} (a {m.describe()}) is not supported in a region")
        if name == "ModuleDict":
            if not (isinstance(index, ir.Const) and index.kind == Kind.STR):
                raise self.error(node, "a ModuleDict is indexed by a str known at compile time in a region")
            child = dict(m.children or ()).get(index.value)
            if child is None:
                raise self.error(node, f"{mv.path} has no module '{index.value}' in __init__")
            return self.read(
                node,
                mv,
                Slot(index.value, KEY, ""),
                child,
                f"{mv.path}[{index.value!r}]",
                child_sample(mv, index.value),
            )
        if getattr(index, "kind", None) not in (Kind.INT, Kind.BOOL):
            raise self.error(node, f"{mv.path} ({name}) is indexed by an int in a region")
        if m.elem is not None or not isinstance(index, ir.Const):
            kind, found = self.module_items(node, mv)
            if kind == "list":
                modules, elem = found
                got = self.intrinsic("modules_item", Kind.MODULE, modules, self.as_int(index))
                return ModuleValue(got, elem, f"{mv.path}[...]", child_sample(mv, 0))
            raise self.error(node, f"indexing {mv.path} needs an index known at compile time")
        k, n = int(index.value), len(m.children or ())
        if not -n <= k < n:
            raise self.error(node, f"index {k} is out of range for {mv.path}, which has {n} modules in __init__")
        if k < 0:  # Python counts from the end of the list as it is then
            self.layout(m).slot(Slot("#", LENGTH, "-", pos=n))
            k += n
        key, t = (m.children or ())[k]
        sample = child_sample(mv, k)
        if name == "ModuleList":  # ModuleList looks its key up; Sequential counts its values
            return self.read(node, mv, Slot(str(k), KEY, ""), t, f"{mv.path}[{k}]", sample)
        return self.read(node, mv, Slot(str(k), POSITION, "", pos=k), t, f"{mv.path}[{k}]", sample)

    def for_modules(self, node: ast.For, mv: ModuleValue) -> None:
        """`for m in <modules>:` — unrolled over known children, or a loop over a list read at the call."""
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported in a region")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "a region loops over modules into one name")
        kind, found = self.module_items(node, mv)
        name = node.target.id
        if kind == "static":
            for value in found:  # as Python runs it: the body once per module, in order
                self.locals[name] = value
                self.compile_body(node.body)
                if self.terminated:
                    raise self.error(node, "`return` inside a loop is not supported in a region")
            return
        modules, elem = found
        self.module_list_loop(node, [node.target], [(mv, modules, elem)], None, ir.Const(0, Kind.INT))

    def module_loop_sources(self, node: ast.For) -> ModuleLoop | None:
        """`for i, m in enumerate(<modules>)`, `for a, b in zip(<modules>, <modules>)` and
        `enumerate(zip(...))` of lists of modules, each read once; None for any other loop."""
        it, start, counted = node.iter, None, False
        if isinstance(it, ast.Call) and static_value(it.func, self.g) is enumerate:
            if it.keywords and [k.arg for k in it.keywords] != ["start"] or not 1 <= len(it.args) <= 2:
                return None
            start = it.args[1] if len(it.args) == 2 else (it.keywords[0].value if it.keywords else None)
            counted, it = True, it.args[0]
        zipped = isinstance(it, ast.Call) and static_value(it.func, self.g) is zip and not it.keywords
        sources = list(it.args) if zipped else [it]
        if not sources or any(isinstance(a, ast.Starred) for a in sources):
            return None
        # Only `self.a.b`-style reads of a module are looked at here: evaluating any other expression
        # now would run it twice (once more in the ordinary loop).
        if not all(self._reads_a_module(a) for a in sources):
            return None
        values = [self.value(a) for a in sources]
        if not all(isinstance(v, ModuleValue) for v in values):
            return None
        items = tuple(self.module_items(a, v) for a, v in zip(sources, values, strict=True))
        return ModuleLoop(sources, tuple(values), items, start, counted, zipped)

    def module_iteration(self, node: ast.For, loop: ModuleLoop, runtime: bool) -> Any:
        """The iteration of a loop over modules all known from __init__: unrolled, as a static sequence is."""
        if runtime:
            path = loop.values[0].path
            raise self.error(
                node.iter,
                f"reversed(), zip() or enumerate() of {path} is not supported in a loop with break or continue; "
                f"write `for m in {path}:` and count with a variable of your own",
            )
        parts = [StaticIteration(tuple(found)) for _kind, found in loop.items]
        it = self.zip_iterations(node.iter, parts) if loop.zipped else parts[0]
        if not loop.counted:
            return it
        start = self.value(loop.start) if loop.start is not None else ir.Const(0, Kind.INT)
        if getattr(start, "kind", None) not in (Kind.INT, Kind.BOOL):
            raise self.error(node.iter, f"enumerate() needs an int start in a region, got {ops.describe(start)}")
        return self.enumerate_iteration(node.iter, it, self.as_int(start))

    def _reads_a_module(self, node: ast.expr) -> bool:
        """`node` is an attribute path from a local module (`self.layers`, `block.heads`): reading it runs nothing."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and isinstance(self.locals.get(node.id), ModuleValue)

    def for_module_lists(self, node: ast.For, loop: ModuleLoop) -> None:
        """A loop over lists of modules read at the call, counted (enumerate) and/or zipped."""
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported in a region")
        sources, counted, zipped = loop.sources, loop.counted, loop.zipped
        target = node.target
        if counted:
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name)):
                raise self.error(target, "a region unpacks enumerate() over modules into two names: `for i, m in ...`")
            count_target, target = target.elts[0], target.elts[1]
        names = [target] if not zipped else (target.elts if isinstance(target, ast.Tuple) else [])
        if len(names) != len(sources) or not all(isinstance(t, ast.Name) for t in names):
            raise self.error(target, "a region loops over modules into one name per list of modules")
        lists = []
        for a, mv, (kind, found) in zip(sources, loop.values, loop.items, strict=True):
            if kind != "list":
                raise self.error(
                    a,
                    f"zipping {mv.path}, known from __init__, with a list of modules known only at the "
                    "call is not supported in a region",
                )
            lists.append((mv, *found))
        begin: Any = ir.Const(0, Kind.INT)
        if loop.start is not None:
            begin = self.value(loop.start)
            if getattr(begin, "kind", None) not in (Kind.INT, Kind.BOOL):
                raise self.error(loop.start, f"enumerate() needs an int start in a region, got {ops.describe(begin)}")
            begin = self.as_int(begin)
        self.module_list_loop(node, names, lists, count_target if counted else None, begin)

    def module_list_loop(
        self,
        node: ast.For,
        names: list[ast.Name],
        lists: list[tuple[ModuleValue, ir.Atom, Any]],
        count_target: ast.expr | None,
        begin: ir.Atom,
    ) -> None:
        """A run-time loop over lists of modules read at the call (modules, element type), in step (zip
        stops at the shortest): each name is bound to its list's module, `count_target` to begin + index."""
        n = self.intrinsic("modules_len", Kind.INT, lists[0][1])
        for _mv, modules, _elem in lists[1:]:
            n = self.intrinsic("min", Kind.INT, n, self.intrinsic("modules_len", Kind.INT, modules))

        def bind(index: ir.Atom) -> None:
            # Each loop variable is a module the body reads from its list at the loop's index.
            for t, (mv, modules, elem) in zip(names, lists, strict=True):
                item = self.new_var(t.id, Kind.MODULE)
                self.emit(ir.Assign((item,), ir.Intrinsic("modules_at", (modules, index)), self.line()))
                self.locals[t.id] = ModuleValue(item, elem, f"{mv.path}[...]", child_sample(mv, 0))
            if count_target is not None:
                self.bind_target(count_target, self.intrinsic("int_add", Kind.INT, begin, index))

        iteration = RangeIteration(ir.Const(0, Kind.INT), n, ir.Const(1, Kind.INT))
        module_names = {t.id for t in names}
        assigned = (stored_names(node.body) | stored_names([node.target])) - module_names
        self.run_loop(node, iteration, bind, None, node.body, assigned, [])
        for name in module_names:
            self.locals[name] = Unbound(name, "the loop variable is undefined after a loop that may run zero times")

    # -- narrowing on attributes -------------------------------------------------------------------------
    def narrowed(self, value: Any, not_none: bool) -> Any:
        """What a value is in the branch where it was tested `is None` (`not_none` False) or not."""
        if isinstance(value, OptionalScalar):
            return value.value if not_none else ir.Const(None, Kind.NONE)
        if isinstance(value, UnionValue):
            if not not_none:
                return ir.Const(None, Kind.NONE)
            options = [(i, o) for i, o in enumerate(value.options) if o is not None]
            if len(options) == 1:
                return ModuleValue(value.module, options[0][1], value.path)
            return value
        return None


def child_sample(mv: ModuleValue, key: int | str) -> Any:
    """The submodule at `key` (a position, or a ModuleDict's key) of the object `mv` was compiled from, if any:
    a list of one class is compiled from its first module (the others are checked to read the same)."""
    modules = getattr(mv.sample, "_modules", None)
    if not isinstance(modules, dict):
        return None
    if isinstance(key, str):
        return modules.get(key)
    items = list(modules.values())
    return items[key] if -len(items) <= key < len(items) else None


def dotted(node: ast.AST) -> str | None:
    """``self.a.b`` as a name narrowing can bind (attributes of a name only)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not parts:
        return None
    return ".".join([node.id, *reversed(parts)])


_HOOK_DICTS = (
    ("_forward_pre_hooks", "a forward pre-hook"),
    ("_forward_hooks", "a forward hook"),
    ("_backward_pre_hooks", "a backward pre-hook"),
    ("_backward_hooks", "a backward hook"),
)


def registered_hook(module: Any) -> str | None:
    """What hook `module` (an object a call brought, or None) has registered, the first of those the runtime's
    layout check refuses (``module_plan.h``'s ``hooks_free``), or None."""
    if module is None:
        return None
    own = getattr(module, "__dict__", {})
    for name, what in _HOOK_DICTS:
        if own.get(name):
            return what
    return None
