"""``ppy_magic.compile``: code nobody decorated, compiled from its installed source.

A model from ``transformers``, ``diffusers`` or a user's ``model.py`` has run already:
its classes and functions exist, and their code objects name the files and lines they
came from (``language/source.py``). ``compile`` makes regions of them at their calls,
as a cell's functions the cell could not compile whole are made (``variants``: the
call's values give the kinds; ``breaks``: what a region cannot take runs as Python
between regions), with one difference: their *reach*. Inside a region compiled here,
every function and every method of the libraries the model's classes come from
compiles from its source without a decorator (``Globals.reach``), so a submodule's
``forward`` and the helpers it calls run inline in their caller's region.

For a module, every submodule whose class is not torch's own gets, on the instance,
its class's ``forward`` (and the methods that ``forward`` calls on ``self``) as a
region bound to it (``_bind``). The class is untouched, other instances stay eager;
``nn.Module.__call__`` finds the instance's ``forward`` and runs hooks around it as
before; ``state_dict``, ``deepcopy`` and pickling see one more instance attribute, a
bound method (pickled as ``getattr(instance, name)``, so a pickled model loads, eager,
without ppy_magic). A method its class holds wrapped by a decorator that runs code of
its own (``functools.wraps`` style) is bound as a copy of the wrapper calling the
region of the method it wraps: the wrapper's code still runs, in Python.
"""

from __future__ import annotations

import ast
import copy
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from . import backend, breaks, decorator, region, variants
from .errors import BuildError, CompileError
from .language import frontend, source
from .language.function import ignored_extras
from .language.namespace import library_globals

_NEVER = frozenset({"torch", "builtins", "ppy_magic", "ppy", "typing", "functools", "abc", "collections"})
_lock = threading.RLock()


def compile(obj: Any, level: int = decorator.DEFAULT_LEVEL) -> Any:  # noqa: A001 - the public name
    """Compile `obj` from its source into regions, exactly: results bit for bit eager's, autograd unchanged.

    - an ``nn.Module`` instance: the ``forward`` of every submodule (each class once) and the methods
      it calls become regions bound to this model's instances only; returns the model itself;
    - a class: its methods are compiled in place (every instance, present and future); returns it;
    - a function or a bound method: returns a region of it (the original is untouched).

    Regions are built at their first calls, from the values those calls bring; until a build lands a
    call runs the Python code. What a region cannot take runs as Python between regions (breaks);
    ``ppy_magic.explain(obj)`` says, per submodule, what became a region and why the rest did not.
    """
    decorator._check_level(level)
    if isinstance(obj, nn.Module):
        Compiler(_reach_of_module(obj), level).module(obj)
        return obj
    if isinstance(obj, type):
        Compiler(_reach_of(obj), level).klass(obj)
        return obj
    if isinstance(obj, types.MethodType):
        fn = Compiler(_reach_of(obj.__func__), level).function(obj.__func__, owner=type(obj.__self__))
        return types.MethodType(fn, obj.__self__)
    if isinstance(obj, types.FunctionType):
        return Compiler(_reach_of(obj), level).function(obj)
    raise TypeError(
        f"ppy_magic.compile takes an nn.Module, a class or a function, not {type(obj).__name__}; "
        "for a callable object, compile its class or its __call__"
    )


def _package(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    return module.split(".")[0] if isinstance(module, str) else None


def _reach_of(obj: Any) -> frozenset[str]:
    top = _package(obj)
    return frozenset({top} - _NEVER) if top else frozenset()


def _reach_of_module(model: nn.Module) -> frozenset[str]:
    """The packages of the model's own classes (not torch's): their code compiles from source."""
    return frozenset(p for m in model.modules() for p in [_package(type(m))] if p) - _NEVER


def _is_torch_class(cls: type) -> bool:
    return (cls.__module__ or "").split(".")[0] == "torch"


# ---- compiling ---------------------------------------------------------------------------------------


@dataclass
class Compiled:
    """What one method of one class became: the callable bound on instances, and what explain says."""

    name: str
    bound: Callable | None  # a region, or a copy of the class's wrapper calling one; None: stays as it is
    region: Any = None  # the region underneath (explain reads it)
    reason: str | None = None  # why it stays Python, if it does
    wrapped_by: tuple[str, ...] = ()  # the decorators' wrappers that still run, outermost first


@dataclass
class Compiler:
    reach: frozenset[str]
    level: int
    made: dict[Any, Compiled] = field(default_factory=dict)  # per class attribute (function) compiled

    # -- a module --------------------------------------------------------------------------------------
    def module(self, model: nn.Module) -> None:
        for _name, m in model.named_modules(remove_duplicate=True):
            cls = type(m)
            if _is_torch_class(cls):
                continue  # torch.nn's modules: restated inline in a region's C++, eager when called from Python
            for name in self.methods_of(cls):
                done = self.method(cls, name)
                if done.bound is not None:
                    m.__dict__[name] = types.MethodType(done.bound, m)

    def methods_of(self, cls: type) -> list[str]:
        """``forward`` and the methods it calls on ``self`` (transitively), that its class has."""
        out: list[str] = []
        todo = ["forward"]
        while todo:
            name = todo.pop()
            if name in out:
                continue
            f = _attribute(cls, name)
            if not isinstance(f, types.FunctionType):
                continue
            out.append(name)
            inner = source.innermost(f)
            found = source.located(inner.__code__) if isinstance(inner, types.FunctionType) else None
            if found is None:
                continue
            node = found[0]
            me = node.args.args[0].arg if node.args.args else None
            for n in ast.walk(node):
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and isinstance(n.func.value, ast.Name)
                    and n.func.value.id == me
                ):
                    todo.append(n.func.attr)
        return out

    def method(self, cls: type, name: str) -> Compiled:
        f = _attribute(cls, name)
        with _lock:
            done = self.made.get(f)
            if done is None:
                done = self.made[f] = self._through_wrappers(name, f, owner=cls)
                _records[id(done.bound if done.bound is not None else f)] = done
        return done

    # -- a class, in place ---------------------------------------------------------------------------
    def klass(self, cls: type) -> None:
        for name, f in list(vars(cls).items()):
            if not isinstance(f, types.FunctionType) or name.startswith("__"):
                continue
            done = self._through_wrappers(name, f, owner=cls)
            if done.bound is not None:
                setattr(cls, name, done.bound)

    # -- a function ----------------------------------------------------------------------------------
    def function(self, fn: types.FunctionType, owner: type | None = None) -> Any:
        done = self._through_wrappers(fn.__name__, fn, owner)
        if done.bound is None:
            raise CompileError(f"{fn.__qualname__} cannot be compiled: {done.reason}")
        return done.bound

    def _through_wrappers(self, name: str, f: types.FunctionType, owner: type | None) -> Compiled:
        """`f` as a region; or, where `f` is a decorator's wrapper (it has ``__wrapped__`` and holds the
        function it wraps in a closure cell), a copy of the wrapper whose cell holds the region."""
        wrappers: list[types.FunctionType] = []
        inner = f
        while not _is_def(inner):
            nxt = getattr(inner, "__wrapped__", None)
            if not isinstance(inner, types.FunctionType) or not source.holds_wrapped(inner, nxt) or len(wrappers) > 16:
                return Compiled(name, None, reason=f"{_describe(inner)} is not a function ppy_magic can read")
            wrappers.append(inner)
            inner = nxt
        reg, reason = self._region(inner, owner)
        if reg is None:
            return Compiled(name, None, reason=reason)
        bound = reg
        for w in reversed(wrappers):
            bound = _rewrap(w, bound)
        # What a region calling it inline checks (module_plan.h): this binding runs what the class's `f` runs
        # (its wrappers' code around the region of the function they wrap), as the region does inline.
        bound.__dict__["__ppy_compiles__"] = f
        return Compiled(name, bound, reg, wrapped_by=tuple(_wrapper_name(w) for w in wrappers))

    def _region(self, fn: types.FunctionType, owner: type | None) -> tuple[Any, str | None]:
        if not source.is_plain(fn):
            return None, "it is a generator, a coroutine or a closure"
        found = source.located(fn.__code__)
        if found is None:
            return None, f"the source of {fn.__qualname__} is not available"
        node, owner_node, filename, lines = found
        g = library_globals(fn.__globals__, self.reach | _reach_of(fn))
        cell_error, signature_only = None, False
        try:
            frontend.check_function(node, g, filename, lines, owner_node)
        except CompileError as err:
            signature_only = frontend.refused_for_its_signature_only(node, g, filename, lines, owner_node)
            if not signature_only:
                return None, err.reason
            cell_error = err
        try:
            cache = backend.shared_cache()
            runtime = _runtime(cache)
        except BuildError as err:
            return None, f"the runtime could not be built: {err}"
        src = variants.Source(node, g, filename, lines, self.level, owner_node, cell_error, signature_only)
        reg = region.make_pending(runtime, fn, ignored_extras(node))
        hook = variants.Variants(src, fn, cache, runtime)
        hook.around = breaks.Splitter(src, fn, cache, runtime)
        runtime.set_miss(reg, hook)
        if signature_only:
            hook.around.bind_in_python(reg, cell_error)
        return reg, None


# ---- what became of a model ----------------------------------------------------------------------------

# What each method compiled became, by the callable bound on instances (nothing is kept on the instance but
# the bound method itself, so copies and pickles of a model see plain Python objects).
_records: dict[int, Compiled] = {}


def compiled_methods(m: nn.Module) -> dict[str, Compiled]:
    """The methods ``ppy_magic.compile`` bound on `m` (or on the module `m` was copied from), by name."""
    out = {}
    for name, value in m.__dict__.items():
        if isinstance(value, types.MethodType) and value.__self__ is m:
            done = _records.get(id(value.__func__))
            if done is not None and done.bound is value.__func__:
                out[name] = done
    return out


@dataclass
class ModelExplanation:
    """``explain(model)``: per submodule path, what its forward became."""

    name: str
    rows: list[tuple[str, str, str]]  # (path, class, what its forward is)

    def __str__(self) -> str:
        lines = [f"{self.name}: compiled with ppy_magic.compile"]
        for path, cls, what in self.rows:
            depth = path.count(".") + 1 if path else 0
            lines.append(f"{'  ' * depth}{path or '(the model)'} ({cls}): {what}")
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def explain_model(model: nn.Module) -> ModelExplanation:
    rows = []
    for path, m in model.named_modules():
        cls = type(m)
        compiled = compiled_methods(m)
        if _is_torch_class(cls):
            what = "torch.nn: runs inline in its caller's region, eager when called from Python"
        elif not compiled:
            what = "Python: not compiled (ppy_magic.compile was not called on a module holding it)"
        else:
            what = "; ".join(f"{name}: {_status(done, bool(path))}" for name, done in compiled.items())
        rows.append((path, cls.__name__, what or "no forward"))
    return ModelExplanation(type(model).__name__, rows)


def _status(done: Compiled, inner: bool) -> str:
    if done.bound is None:
        return f"Python ({done.reason})"
    reg = done.region
    calls, fallbacks = region.counters(reg)
    if inner and calls + fallbacks == 0 and not reg.__dict__.get("__ppy_variant_records__"):
        return "never called on its own: inline in its caller's region where that one is a region"
    split = reg.__dict__.get("__ppy_split__")
    if split is not None and getattr(reg, "__ppy_driver__", None) is not None:
        n = len(split.breaks)
        what = (
            f"region with {n} break{'s' if n != 1 else ''}" if reg.__ppy_region__ else "Python (split, no region yet)"
        )
    elif reg.__ppy_region__:
        what = "region"
    else:
        what = f"Python ({region.explain(reg).reason})"
    what += f" [{calls} calls as region, {fallbacks} in Python]"
    if done.wrapped_by:
        what += f", inside its decorators' wrappers (Python): {', '.join(done.wrapped_by)}"
    return what


def explain(obj: Any) -> Any:
    """``ppy_magic.explain``: for a compiled model, the tree of its submodules; otherwise ``region.explain``."""
    if isinstance(obj, nn.Module):
        return explain_model(obj)
    if isinstance(obj, types.MethodType) and obj.__func__ is not None:  # model.forward: the instance's own
        done = _records.get(id(obj.__func__))
        if done is not None and done.bound is obj.__func__:
            return region.explain(done.region)
        return region.explain(obj.__func__)
    return region.explain(obj)


_runtimes: dict[str, Any] = {}


def _runtime(cache: backend.Cache) -> Any:
    with _lock:
        rt = _runtimes.get(cache.root)
        if rt is None:
            rt = _runtimes[cache.root] = backend.load_runtime(cache)
            rt.set_fallback_hook(region.FALLBACKS)
        return rt


def _attribute(cls: type, name: str) -> Any:
    """What Python finds for `name` on `cls` (the first class of its MRO holding it), without binding."""
    for k in cls.__mro__:
        if name in k.__dict__:
            return k.__dict__[name]
    return None


def _is_def(f: Any) -> bool:
    """`f` runs its own code only: not a decorator's wrapper holding (``__wrapped__``) another function."""
    return isinstance(f, types.FunctionType) and not source.holds_wrapped(f, getattr(f, "__wrapped__", None))


def _rewrap(wrapper: types.FunctionType, inner: Callable) -> types.FunctionType:
    """A copy of `wrapper` whose closure holds `inner` where it held the function it wraps."""
    old = wrapper.__wrapped__
    cells = tuple(types.CellType(inner) if source.cell_value(c) is old else c for c in wrapper.__closure__ or ())
    new = types.FunctionType(wrapper.__code__, wrapper.__globals__, wrapper.__name__, wrapper.__defaults__, cells)
    new.__kwdefaults__ = copy.copy(wrapper.__kwdefaults__)
    new.__dict__.update(wrapper.__dict__)
    new.__qualname__ = wrapper.__qualname__
    new.__wrapped__ = inner
    return new


def _wrapper_name(w: types.FunctionType) -> str:
    """A wrapper by the code it runs (``functools.wraps`` gave it the wrapped function's names)."""
    code = w.__code__
    return f"{w.__globals__.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"


def _describe(f: Any) -> str:
    return getattr(f, "__qualname__", None) or type(f).__name__


__all__ = ["compile", "compiled_methods", "explain"]
