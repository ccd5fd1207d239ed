"""Classes as the region language sees them: what ``self.<name>`` is, known before any instance exists.

A method is compiled from the source before its class is created, so the kind of
each attribute comes from the source too (and is checked again on every call):

- class-level annotations (``n_head: int``; torch's own modules annotate theirs);
- assignments in the class's other methods (``__init__`` above all):
  ``self.w = nn.Parameter(...)``, ``self.register_buffer("mask", ...)``,
  ``self.fc = nn.Linear(...)``, ``self.h = nn.ModuleList([Block(c) for _ in ...])``,
  literals, parameters with an annotation or a literal default, ``config.n_head``
  where a dataclass of the source or namespace declares ``n_head: int``;
- for the standard ``torch.nn`` modules, the declarations of their adapters
  (``nn_modules.py``).

A ``ModType`` is the static type of a module value: its class, and for containers
built with known children (``nn.Sequential(a, b)``, ``nn.ModuleDict(dict(...))``)
those children, or for a ``ModuleList``/``Sequential`` of one class its element type.
An attribute whose kind is not known stays unknown, and a method that reads it stays
Python, saying what to annotate.
"""

from __future__ import annotations

import ast
import inspect
import sys
import typing
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ..torchlib import torch_source
from . import source
from .attr_types import (
    NONE,
    AttrType,
    ClassRef,
    Scalar,
    Unknown,
    annotation_node_type,
    annotation_type,
    is_module_class,
    union,
)
from .ir import Kind
from .namespace import Globals, static_value
from .self_assignments import Env, is_self, is_self_attr, literal_type

# ---- class models -----------------------------------------------------------------------------------


@dataclass
class Method:
    """A decorated method a region can call inline: its definition and where it comes from."""

    node: ast.FunctionDef
    g: Globals
    filename: str
    lines: list[str]
    adapter: bool = False  # a restated torch.nn forward (nn_modules.py)


@dataclass
class ClassModel:
    ref: ClassRef
    module: bool  # an nn.Module subclass
    attrs: dict[str, AttrType] = field(default_factory=dict)
    methods: dict[str, Method] = field(default_factory=dict)  # compiled methods, by name
    defined: set[str] = field(default_factory=set)  # names the class body (or a base) defines
    problem: str | None = None  # why instances of it cannot be read by a region
    call_problem: str | None = None  # why a region cannot call its instances inline (a __call__ of its own)
    # A __getattr__ of its own (diffusers' ModelMixin's): only a call's objects are read, each attribute found
    # past the instance and the class checked when compiling to be what that __getattr__ gives
    # (``call_values.lookup``)
    own_getattr: bool = False

    def attr(self, name: str) -> AttrType | None:
        return self.attrs.get(name)


_object_models: dict[tuple[type, frozenset[str]], ClassModel] = {}


class Classes:
    """The class models one source can use: its own top-level classes, torch.nn's, earlier cells'."""

    def __init__(self, g: Globals, filename: str, lines: list[str]):
        self.g = g
        self.filename = filename
        self.lines = lines
        self.nodes: dict[str, ast.ClassDef] = dict(g.classes)
        self._models: dict[Any, ClassModel] = {}
        self._busy: set[Any] = set()

    # -- which class a name or call means ---------------------------------------------------------
    def ref_of(self, node: ast.expr) -> ClassRef | None:
        """The class an expression names, if it is a class a region can know."""
        if isinstance(node, ast.Name) and node.id in self.nodes:
            cdef = self.nodes[node.id]
            return ClassRef(cdef.name, None, (cdef.lineno, cdef.end_lineno or cdef.lineno))
        obj = static_value(node, self.g)
        if isinstance(obj, type):
            return ClassRef(obj.__name__, obj)
        return None

    def model(self, ref: ClassRef) -> ClassModel:
        key = ref.obj if ref.obj is not None else ref.name
        if key in self._models:
            return self._models[key]
        if key in self._busy:  # a class whose attributes mention itself: read what is known so far
            return ClassModel(ref, True, problem=f"{ref.name} contains itself")
        shared = (ref.obj, self.g.reach) if ref.obj is not None else None
        if shared in _object_models:  # a class that exists: its model depends on it and the reach only
            self._models[key] = _object_models[shared]
            return self._models[key]
        self._busy.add(key)
        try:
            if ref.obj is not None:
                model = self._model_of_object(ref)
            else:
                model = self._model_of_node(ref, self.nodes[ref.name], self.g, self.filename, self.lines)
        finally:
            self._busy.discard(key)
        self._models[key] = model
        if shared is not None and not self._busy:  # complete: not read while a class containing it was
            _object_models[shared] = model
        return model

    def is_module(self, ref: ClassRef) -> bool:
        if ref.obj is not None:
            return is_module_class(ref.obj)
        return self.model(ref).module

    # -- a class of the source -------------------------------------------------------------------------
    def _model_of_node(
        self, ref: ClassRef, cdef: ast.ClassDef, g: Globals, filename: str, lines: list[str]
    ) -> ClassModel:
        from .namespace import opt_level

        model = ClassModel(ref, module=False)
        bases: list[ClassModel] = []
        for b in cdef.bases:
            bref = self.ref_of(b)
            if bref is None:
                model.problem = f"its base `{ast.unparse(b)}` is not known before the cell runs"
                continue
            if bref.obj is object:
                continue
            if bref.obj is nn.Module:
                model.module = True
                continue
            base = self.model(bref)
            bases.append(base)
            model.module = model.module or base.module
            if base.problem and not model.problem:
                model.problem = base.problem
            model.call_problem = model.call_problem or base.call_problem
            model.own_getattr = model.own_getattr or base.own_getattr
        for base in bases:  # inherited first, the class's own override them
            model.attrs.update(base.attrs)
            model.methods.update(base.methods)
            model.defined |= base.defined
        exists = ref.obj is not None  # read from its instances as they are: only attribute lookup matters
        if cdef.keywords and not exists:
            model.problem = model.problem or "it has a metaclass or class keywords"
        for name in ("__getattr__", "__getattribute__", "__setattr__", "__call__"):
            if any(isinstance(s, ast.FunctionDef) and s.name == name for s in cdef.body):
                if name == "__call__":
                    model.call_problem = "it defines __call__"
                elif exists and name == "__getattr__":
                    model.own_getattr = True
                elif not (exists and name == "__setattr__"):
                    model.problem = f"it defines {name}"
        # class-level annotations and names
        for stmt in cdef.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                t = annotation_node_type(stmt.annotation, g)
                if stmt.value is None:
                    model.attrs[stmt.target.id] = t
                else:
                    model.defined.add(stmt.target.id)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                model.defined.add(stmt.name)
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            model.defined.add(n.id)
                literal = literal_type(stmt.value)
                if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and literal is not None:
                    model.attrs[stmt.targets[0].id] = literal  # a class constant (read from the class)
        # assignments in the methods that are not compiled (compiled ones cannot assign to self)
        found: dict[str, list[AttrType]] = {}
        for stmt in cdef.body:
            if not isinstance(stmt, ast.FunctionDef):
                continue
            level = opt_level(stmt, g)
            if level is None and _compiles_undecorated(ref, stmt, g, filename):
                level = 1  # ppy_magic.compile: the library's methods, as written
            wrapped = _inside_wrappers(ref, stmt, g, filename) if level is None else None
            if wrapped is not None:  # ... or inside their decorators' wrappers, which compile with them
                model.methods[stmt.name] = wrapped
                continue
            if level is not None:
                if level != 0:  # ppy.opt(0): never compiled, so never run inline either
                    model.methods[stmt.name] = Method(stmt, g, filename, lines)
                continue
            for name, t in self._assignments(stmt, g, model):
                found.setdefault(name, []).append(t)
        annotated = {s.target.id for s in cdef.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        for name, types_ in found.items():
            if name in annotated and not isinstance(model.attrs.get(name), Unknown):
                continue  # the annotation says it
            model.attrs[name] = union(types_)
        if model.module:
            model.attrs.setdefault("training", Scalar(Kind.BOOL))
        return model

    def _assignments(self, fn: ast.FunctionDef, g: Globals, model: ClassModel) -> list[tuple[str, AttrType]]:
        if not fn.args.args:
            return []
        me = fn.args.args[0].arg
        params = {a.arg: a for a in fn.args.args[1:] + fn.args.kwonlyargs}
        positional = [a.arg for a in fn.args.args]
        defaults = dict(zip(positional[len(positional) - len(fn.args.defaults) :], fn.args.defaults, strict=True))
        kw_defaults = zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True)
        defaults.update({a.arg: d for a, d in kw_defaults if d is not None})
        env = Env(self, g, me, params, defaults, model)
        out = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if is_self_attr(target, me):
                        out.append((target.attr, env.type_of(node.value)))
            elif isinstance(node, ast.AnnAssign) and node.value is not None and is_self_attr(node.target, me):
                out.append((node.target.attr, env.type_of(node.value)))
            elif isinstance(node, ast.AugAssign) and is_self_attr(node.target, me):
                out.append((node.target.attr, Unknown("it is changed by augmented assignment")))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_self(node.func.value, me):
                registered = self._registration(node, env)
                if registered is not None:
                    out.append(registered)
        return out

    def _registration(self, call: ast.Call, env: Env) -> tuple[str, AttrType] | None:
        what = call.func.attr  # type: ignore[union-attr]
        if what not in ("register_buffer", "register_parameter", "add_module", "register_module"):
            return None
        args = list(call.args) + [kw.value for kw in call.keywords if kw.arg in ("tensor", "param", "module", "name")]
        if len(args) < 2 or not (isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)):
            return None
        name, value = args[0].value, args[1]
        if isinstance(value, ast.Constant) and value.value is None:
            return name, NONE
        if what in ("register_buffer", "register_parameter"):
            t = env.type_of(value)
            return name, t if isinstance(t, Scalar) and t.kind == Kind.TENSOR else Scalar(Kind.TENSOR)
        return name, env.type_of(value)

    # -- a class that exists now (torch.nn, an earlier cell) -----------------------------------------
    def _model_of_object(self, ref: ClassRef) -> ClassModel:
        from ..torchlib import nn_modules

        cls = ref.obj
        model = ClassModel(ref, module=is_module_class(cls))
        for klass in reversed(cls.__mro__):
            ann = klass.__dict__.get("__annotations__", {})
            hints = None
            for name in ann:
                if name.startswith("__") or name in ("dump_patches", "call_super_init", "forward"):
                    continue
                if hints is None:
                    try:
                        hints = typing.get_type_hints(klass)
                    except Exception:
                        hints = {}
                model.attrs[name] = annotation_type(hints.get(name, ann[name]))
            model.defined |= {k for k in klass.__dict__ if klass is not object}
        if model.module:
            model.attrs["training"] = Scalar(Kind.BOOL)
        declared = nn_modules.declared(cls)
        if declared is not None:
            kinds, forward = declared
            model.attrs.update({name: annotation_type(ann, exact=True) for name, ann in kinds.items()})
            if forward is not None:
                defs, lines = nn_modules.definitions()
                g = Globals(nn_modules.namespace())
                model.methods["forward"] = Method(defs[forward], g, "<adapter>", lines, adapter=True)
            own = _torch_methods(cls, self.g.reach, with_forward=forward is None)  # torch's source
            model.methods.update({k: m for k, m in own.items() if k not in model.methods})
            return model
        if cls.__module__.startswith("torch.") and not torch_source.holds_class(cls):
            model.problem = f"{cls.__module__}.{cls.__name__} is not compiled from torch's source"
            return model
        # a class of an earlier cell or module: its compiled methods and its __init__, from its source
        found = class_source(cls)
        if found is None:
            model.problem = f"the source of {cls.__name__} is not available"
            return model
        cdef, filename, lines = found
        module = inspect.getmodule(cls) or sys.modules.get(cls.__module__)
        from .namespace import collect_globals, library_globals

        # A notebook cell's classes belong to no importable module: their methods' globals are the namespace.
        namespace = vars(module) if module else method_globals(cls)
        if self.g.reaches(cls) or torch_source.holds_class(cls):
            g = library_globals(namespace, self.g.reach)
        else:
            g = collect_globals(ast.Module(body=[], type_ignores=[]), namespace)
        sub = Classes(g, filename, lines)
        sub._models = self._models
        mine = sub._model_of_node(ref, cdef, g, filename, lines)
        mine.module = model.module
        return mine


def _compiles_undecorated(ref: ClassRef, stmt: ast.FunctionDef, g: Globals, filename: str) -> bool:
    """A method of a class in the compile's reach (``Globals.reach``) that its class holds as written:
    the plain function of this ``def`` (a decorator that wrapped it would run code the method's source
    does not show). Special methods (``__init__``, ...) are never run by a region."""
    from . import source
    from .namespace import function_key

    if ref.obj is None or not (g.reaches(ref.obj) or torch_source.holds_class(ref.obj)) or stmt.name.startswith("__"):
        return False
    found = ref.obj.__dict__.get(stmt.name)
    code = getattr(found, "__code__", None)
    return (
        source.is_plain(found)
        and code.co_filename == filename
        and (code.co_name, code.co_firstlineno) == function_key(stmt)
    )


def _inside_wrappers(ref: ClassRef, stmt: ast.FunctionDef, g: Globals, filename: str) -> Method | None:
    """A method of a class in the compile's reach that its class holds inside decorators' wrappers
    (``functools.wraps``: each holds the next in a closure cell, as ``__wrapped__``), down to this ``def`` as
    written: the outermost wrapper, compiled with its cells' values (``source.closure_values``); a region
    calling it inline runs the wrappers' code too, and checks the class still holds that very function."""
    from . import source
    from .namespace import closure_globals, function_key, library_globals

    if ref.obj is None or not (g.reaches(ref.obj) or torch_source.holds_class(ref.obj)) or stmt.name.startswith("__"):
        return None
    outer = ref.obj.__dict__.get(stmt.name)
    f = source.innermost(outer)
    code = getattr(f, "__code__", None)
    if f is outer or not source.is_plain(f) or code.co_filename != filename:
        return None
    if (code.co_name, code.co_firstlineno) != function_key(stmt):
        return None
    cells = source.closure_values(outer)
    found = source.definition(outer) if cells is not None else None
    if found is None:
        return None
    node, wrapper_file, lines = found
    return Method(node, closure_globals(library_globals(outer.__globals__, g.reach), cells), wrapper_file, lines)


def method_globals(cls: type) -> dict[str, Any]:
    """The globals the methods of `cls` run with (its module's namespace), or an empty dict."""
    for value in vars(cls).values():
        g = getattr(getattr(value, "__wrapped__", value), "__globals__", None)
        if isinstance(g, dict):
            return g
    return {}


def class_source(cls: type) -> tuple[ast.ClassDef, str, list[str]] | None:
    """The ClassDef of `cls`, its file and the file's lines, found through its methods' code
    (``inspect.getsource`` needs the module's file, which a notebook cell's module lacks)."""
    from .source import file_tree

    for value in vars(cls).values():
        # A method under decorators (a classmethod under diffusers' hub-argument check): the function written
        # in the class body, not a wrapper whose code is another file's.
        try:
            code = getattr(inspect.unwrap(getattr(value, "__func__", value)), "__code__", None)
        except ValueError:  # a cycle of __wrapped__
            continue
        parsed = file_tree(code.co_filename) if code is not None else None  # parsed once per file
        if parsed is None:
            continue
        tree, lines = parsed
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and node.name == cls.__name__
                and node.lineno <= code.co_firstlineno <= (node.end_lineno or node.lineno)
            ):
                return node, code.co_filename, lines
    return _class_in_module_file(cls)


def _class_in_module_file(cls: type) -> tuple[ast.ClassDef, str, list[str]] | None:
    """A class no method's code leads to (attributes only, or functions C wraps): by its qualified name in its
    module's file."""
    from .source import file_tree

    filename = getattr(sys.modules.get(cls.__module__), "__file__", None)
    parsed = file_tree(filename) if filename else None
    if parsed is None or "<locals>" in cls.__qualname__:
        return None
    tree, lines = parsed
    body: list[ast.stmt] = tree.body
    node = None
    for part in cls.__qualname__.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node, filename, lines


def _torch_methods(cls: type, reach: frozenset[str], with_forward: bool) -> dict[str, Method]:
    """The plain methods of a torch.nn class (``Conv1d._conv_forward``), from torch's source; its forward
    too `with_forward` (where nothing restates it: else the restatement is its fallback, modules.py)."""
    from .namespace import library_globals

    out: dict[str, Method] = {}
    for klass in cls.__mro__:
        if klass is nn.Module:  # its own methods (parameters(), state_dict(), ...) are no forward's helpers
            break
        for name, fn in vars(klass).items():
            if name in out or (name == "forward" and not with_forward) or name.startswith("__"):
                continue
            if not torch_source.holds_method(fn):
                continue
            found = source.definition(fn)
            if found is not None:
                node, filename, lines = found
                out[name] = Method(node, library_globals(fn.__globals__, reach), filename, lines)
    return out
