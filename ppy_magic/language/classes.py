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
import dataclasses
import inspect
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .ir import Kind
from .namespace import Globals, static_value

# ---- static types ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassRef:
    """A class instances are checked against: one that exists now (``obj``: torch.nn, an earlier cell),
    or one the source being compiled defines (``cell``: its name and lines, created when the source runs)."""

    name: str
    obj: Any = None
    cell: tuple[int, int] | None = None  # first and last line of the ClassDef

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Scalar:
    """A plain attribute: a tensor, a number, a str, a tuple of ints; `optional`: or None."""

    kind: Kind
    optional: bool = False
    seq: str = ""  # INTS: "tuple" or "list" where only that one is right, "" for either


NONE = Scalar(Kind.NONE)


@dataclass(frozen=True)
class ModType:
    """The static type of a module (or plain object) value."""

    cls: ClassRef | None  # None: a plain object of any class (a config), read attribute by attribute
    children: tuple[tuple[str, Any], ...] | None = None  # a container with known children, in order
    elem: ModType | None = None  # a ModuleList / Sequential of one class, any length
    module: bool = True  # an nn.Module (attributes also in _parameters, _buffers, _modules)
    origin: ParamObject | None = None  # a plain object: the parameter it came from (its fields' kinds)
    # values compiled into the code that reads it, which give instances of one class layouts (and code) of their
    # own: an einops layer's pattern and axis lengths (einops_forms.layer_operation)
    constants: tuple = ()

    def describe(self) -> str:
        if self.cls is None:
            return "an object"
        if self.elem is not None:
            return f"{self.cls.name} of {self.elem.describe()}"
        return self.cls.name


@dataclass(frozen=True)
class Union:
    """An attribute that is one of several modules, or None (`None` among the options)."""

    options: tuple[ModType | None, ...]


@dataclass(frozen=True)
class Unknown:
    why: str


@dataclass(frozen=True)
class ParamObject:
    """An __init__ parameter stored as it is (``self.config = config``): an object whose fields
    (``self.config.block_size``) have the kinds a dataclass declares."""

    arg: ast.arg

    def as_type(self) -> ModType:
        return ModType(None, module=False, origin=self)


AttrType = Scalar | ModType | Union | Unknown | ParamObject

# ---- annotations ---------------------------------------------------------------------------------

_PLAIN = {int: Kind.INT, float: Kind.FLOAT, bool: Kind.BOOL, str: Kind.STR, torch.Tensor: Kind.TENSOR}
_PLAIN_NAMES = {"int": Kind.INT, "float": Kind.FLOAT, "bool": Kind.BOOL, "str": Kind.STR, "Tensor": Kind.TENSOR}


def annotation_type(ann: Any, exact: bool = False) -> AttrType:
    """The attribute type a Python annotation (an object, as ``typing`` evaluates it) says.

    Class bodies do not always tell a tuple from a list (torch annotates a tuple ``list[int]``):
    only an `exact` one (a restatement's declaration) makes the region insist on one of them."""
    if ann in _PLAIN:
        return Scalar(_PLAIN[ann])
    if ann is nn.Parameter:
        return Scalar(Kind.TENSOR)
    if ann is type(None) or ann is None:
        return NONE
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        parts = [annotation_type(a, exact) for a in args]
        return union(parts)
    if origin in (tuple, list) and args and all(a is int for a in args if a is not Ellipsis):
        return Scalar(Kind.INTS, seq=origin.__name__ if exact else "")
    if origin is typing.Literal and args and all(type(a) is str for a in args):
        return Scalar(Kind.STR)
    if isinstance(ann, type) and issubclass(ann, nn.Module):
        return ModType(ClassRef(ann.__name__, ann))
    return Unknown(f"its annotation {ann!r} is not a kind a region knows")


def annotation_node_type(node: ast.expr, g: Globals) -> AttrType:
    """The attribute type an annotation in the source says (``int``, ``float | None``, ``tuple[int, ...]``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return Unknown("its annotation is not valid Python")
    if isinstance(node, ast.Name) and node.id in _PLAIN_NAMES and node.id not in g.values:
        return Scalar(_PLAIN_NAMES[node.id])
    if isinstance(node, ast.Constant) and node.value is None:
        return NONE
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return union([annotation_node_type(node.left, g), annotation_node_type(node.right, g)])
    if isinstance(node, ast.Subscript):
        base = static_value(node.value, g)
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base is typing.Optional:
            return union([annotation_node_type(inner[0], g), NONE])
        if base is typing.Union:
            return union([annotation_node_type(e, g) for e in inner])
        if base in (tuple, list, typing.Tuple, typing.List):  # noqa: UP006 - the objects, not annotations
            ints = all(
                (isinstance(e, ast.Constant) and e.value is Ellipsis) or annotation_node_type(e, g) == Scalar(Kind.INT)
                for e in inner
            )
            return Scalar(Kind.INTS) if ints else Unknown("a tuple that is not of ints")
    value = static_value(node, g)
    if value is not None:
        return annotation_type(value)
    return Unknown(f"its annotation `{ast.unparse(node)}` is not a kind a region knows")


def union(parts: list[AttrType]) -> AttrType:
    """What an attribute is when it may be any of `parts` (assigned in several places)."""
    unknown = next((p for p in parts if isinstance(p, Unknown)), None)
    if unknown is not None:
        return unknown
    objects = [p for p in parts if isinstance(p, ParamObject)]
    if objects:
        return objects[0] if all(p == objects[0] for p in parts) else Unknown("it is assigned different objects")
    flat: list[Any] = []
    for p in parts:
        flat += list(p.options) if isinstance(p, Union) else [p]
    scalars = {p for p in flat if isinstance(p, Scalar) and p != NONE}
    has_none = any(p == NONE or p is None for p in flat)
    mods = [p for p in flat if isinstance(p, ModType)]
    if scalars and mods:
        return Unknown("it is a module in one place and a value in another")
    if mods:
        options: list[ModType | None] = []
        for m in mods:
            if m not in options:
                options.append(m)
        if has_none:
            options.append(None)
        return options[0] if len(options) == 1 else Union(tuple(options))
    kinds = {s.kind for s in scalars}
    optional = has_none or any(s.optional for s in scalars)
    if not kinds:
        return NONE
    if len(kinds) > 1:
        return Unknown(f"it is {' or '.join(sorted(k.name.lower() for k in kinds))} in different places")
    seqs = {s.seq for s in scalars}
    return Scalar(kinds.pop(), optional, seqs.pop() if len(seqs) == 1 else "")


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

    def attr(self, name: str) -> AttrType | None:
        return self.attrs.get(name)


def is_module_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, nn.Module)


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
                literal = _literal(stmt.value)
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
        env = _Env(self, g, me, params, defaults, model)
        out = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if _is_self_attr(target, me):
                        out.append((target.attr, env.type_of(node.value)))
            elif isinstance(node, ast.AnnAssign) and node.value is not None and _is_self_attr(node.target, me):
                out.append((node.target.attr, env.type_of(node.value)))
            elif isinstance(node, ast.AugAssign) and _is_self_attr(node.target, me):
                out.append((node.target.attr, Unknown("it is changed by augmented assignment")))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_self(node.func.value, me):
                registered = self._registration(node, env)
                if registered is not None:
                    out.append(registered)
        return out

    def _registration(self, call: ast.Call, env: _Env) -> tuple[str, AttrType] | None:
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
        from . import nn_modules

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
            return model
        if cls.__module__.startswith("torch."):
            model.problem = f"torch.nn.{cls.__name__} has no restatement in the region language"
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
        if self.g.reaches(cls):
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

    if ref.obj is None or not g.reaches(ref.obj) or stmt.name.startswith("__"):
        return False
    found = ref.obj.__dict__.get(stmt.name)
    code = getattr(found, "__code__", None)
    return (
        source.is_plain(found)
        and code.co_filename == filename
        and (code.co_name, code.co_firstlineno) == function_key(stmt)
    )


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
        code = getattr(getattr(value, "__wrapped__", value), "__code__", None)
        if code is None:
            continue
        parsed = file_tree(code.co_filename)  # parsed once per file
        if parsed is None:
            return None
        tree, lines = parsed
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and node.name == cls.__name__
                and node.lineno <= code.co_firstlineno <= (node.end_lineno or node.lineno)
            ):
                return node, code.co_filename, lines
        return None
    return _class_in_module_file(cls)


def _class_in_module_file(cls: type) -> tuple[ast.ClassDef, str, list[str]] | None:
    """A class whose body holds no function (attributes only): found by its qualified name in its module's file."""
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


def _is_self(node: ast.AST, me: str) -> bool:
    return isinstance(node, ast.Name) and node.id == me


def _is_self_attr(node: ast.AST, me: str) -> bool:
    return isinstance(node, ast.Attribute) and _is_self(node.value, me)


class _Env:
    """The types of expressions inside one method of a class (for `self.x = <expr>`)."""

    def __init__(self, classes: Classes, g: Globals, me: str, params: dict, defaults: dict, model: ClassModel):
        self.classes = classes
        self.g = g
        self.me = me
        self.params = params
        self.defaults = defaults
        self.model = model

    def type_of(self, e: ast.expr) -> AttrType:
        if isinstance(e, ast.Constant):
            return _constant_type(e.value)
        if isinstance(e, (ast.Tuple, ast.List)):
            items = [self.type_of(i) for i in e.elts]
            if all(i == Scalar(Kind.INT) for i in items):
                return Scalar(Kind.INTS, seq="tuple" if isinstance(e, ast.Tuple) else "list")
            return Unknown("a tuple or list that is not of ints")
        if isinstance(e, ast.IfExp):
            return union([self.type_of(e.body), self.type_of(e.orelse)])
        if isinstance(e, ast.Name):
            return self.name_type(e.id)
        if isinstance(e, ast.Attribute):
            if _is_self(e.value, self.me):
                t = self.model.attrs.get(e.attr)
                return t if t is not None else Unknown(f"self.{e.attr} is not known here")
            if isinstance(e.value, ast.Name) and e.value.id in self.params:
                return field_type(self.classes, self.params[e.value.id], e.attr)
            obj = static_value(e, self.g)
            if obj is not None:
                return _constant_type(obj)
            return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")
        if isinstance(e, ast.BinOp):
            a, b = self.type_of(e.left), self.type_of(e.right)
            if isinstance(a, Scalar) and isinstance(b, Scalar) and not a.optional and not b.optional:
                if Kind.TENSOR in (a.kind, b.kind):
                    return Scalar(Kind.TENSOR)
                if a.kind in (Kind.INT, Kind.BOOL) and b.kind in (Kind.INT, Kind.BOOL):
                    return Scalar(Kind.FLOAT) if isinstance(e.op, ast.Div) else Scalar(Kind.INT)
                if {a.kind, b.kind} <= {Kind.INT, Kind.FLOAT, Kind.BOOL}:
                    return Scalar(Kind.FLOAT)
                if a.kind == b.kind == Kind.INTS and isinstance(e.op, ast.Add):
                    return Scalar(Kind.INTS)
            return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")
        if isinstance(e, ast.UnaryOp):
            t = self.type_of(e.operand)
            if isinstance(e.op, ast.Not):
                return Scalar(Kind.BOOL)
            return t
        if isinstance(e, ast.Compare):
            return Scalar(Kind.BOOL)
        if isinstance(e, ast.BoolOp):
            return union([self.type_of(v) for v in e.values])
        if isinstance(e, ast.Call):
            return self.call_type(e)
        if isinstance(e, ast.Subscript):
            return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")
        return Unknown(f"`{ast.unparse(e)}` is not known before the cell runs")

    def name_type(self, name: str) -> AttrType:
        if name in self.params:
            arg = self.params[name]
            if arg.annotation is not None:
                t = annotation_node_type(arg.annotation, self.g)
                if not isinstance(t, Unknown):
                    return t
            d = self.defaults.get(name)
            if d is not None and isinstance(d, ast.Constant) and d.value is not None:
                return _constant_type(d.value)
            if d is None:
                return ParamObject(arg)
            return Unknown(f"the parameter '{name}' has no annotation")
        ok, value = self.g.lookup(name)
        if ok:
            return _constant_type(value)
        return Unknown(f"'{name}' is not known before the cell runs")

    def call_type(self, call: ast.Call) -> AttrType:
        f = call.func
        obj = static_value(f, self.g)
        if obj in (int, len):
            return Scalar(Kind.INT)
        if obj is float:
            return Scalar(Kind.FLOAT)
        if obj in (bool, hasattr, isinstance, callable):
            return Scalar(Kind.BOOL)
        if obj is str:
            return Scalar(Kind.STR)
        if obj in (tuple, list) and call.args:
            inner = self.type_of(call.args[0])
            if isinstance(inner, Scalar) and inner.kind == Kind.INTS and not inner.optional:
                return Scalar(Kind.INTS, seq=obj.__name__)
            return Unknown(f"a {obj.__name__} whose items are not known")
        if obj is nn.Parameter or obj is nn.parameter.Buffer:
            return Scalar(Kind.TENSOR)
        if isinstance(obj, types.ModuleType) or (
            isinstance(obj, (types.BuiltinFunctionType, types.FunctionType))
            and getattr(obj, "__module__", "") in ("torch", "torch.functional", "torch._C._VariableFunctions")
        ):
            return Scalar(Kind.TENSOR)
        ref = self.classes.ref_of(f)
        if ref is not None and (ref.obj is None or is_module_class(ref.obj)):
            return self.module_type(ref, call)
        if isinstance(f, ast.Attribute):
            base = self.type_of(f.value) if not isinstance(f.value, ast.Name) or f.value.id != "torch" else None
            if isinstance(base, Scalar) and base.kind == Kind.TENSOR and not base.optional:
                return Scalar(Kind.TENSOR)  # a tensor method: torch.tril(...).view(...)
            if static_value(f.value, self.g) is torch:
                return Scalar(Kind.TENSOR)
        return Unknown(f"`{ast.unparse(call)}` is not known before the cell runs")

    def module_type(self, ref: ClassRef, call: ast.Call) -> AttrType:
        cls = ref.obj
        if cls in (nn.ModuleList, nn.Sequential):
            items = call.args
            if cls is nn.ModuleList and len(items) == 1:
                return self._list_items(ref, items[0])
            if cls is nn.Sequential and len(items) == 1 and isinstance(items[0], ast.Starred):
                return self._list_items(ref, items[0].value)
            if cls is nn.Sequential and len(items) == 1 and _is_call_to(items[0], "OrderedDict", self.g):
                return self._keyed(ref, items[0].args[0] if items[0].args else None)
            if not items and cls is nn.ModuleList:
                return ModType(ref, children=())
            return self._children(ref, [(str(i), a) for i, a in enumerate(items)])
        if cls is nn.ModuleDict:
            if not call.args:
                return ModType(ref, children=())
            return self._keyed(ref, call.args[0])
        if ref.obj is None and not self.classes.is_module(ref):
            return ModType(ref, module=False)
        return ModType(ref)

    def _list_items(self, ref: ClassRef, e: ast.expr) -> AttrType:
        if isinstance(e, (ast.List, ast.Tuple)):
            return self._children(ref, [(str(i), a) for i, a in enumerate(e.elts)])
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            elem = self.type_of(e.elt)
            if isinstance(elem, ModType):
                return ModType(ref, elem=elem)
            return Unknown(f"the items of this {ref.name} are not modules known before the cell runs")
        return Unknown(f"the modules in this {ref.name} are not known before the cell runs")

    def _keyed(self, ref: ClassRef, e: ast.expr | None) -> AttrType:
        if e is None:
            return ModType(ref, children=())
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(e, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in e.keys):
            pairs = [(k.value, v) for k, v in zip(e.keys, e.values, strict=True)]  # type: ignore[union-attr]
        elif isinstance(e, ast.Call) and static_value(e.func, self.g) is dict and not e.args:
            pairs = [(kw.arg, kw.value) for kw in e.keywords if kw.arg is not None]
            if len(pairs) != len(e.keywords):
                return Unknown("the keys of this container are not known before the cell runs")
        elif isinstance(e, (ast.List, ast.Tuple)) and all(
            isinstance(p, ast.Tuple) and len(p.elts) == 2 and isinstance(p.elts[0], ast.Constant) for p in e.elts
        ):
            pairs = [(p.elts[0].value, p.elts[1]) for p in e.elts]  # type: ignore[attr-defined]
        else:
            return Unknown(f"the modules in this {ref.name} are not known before the cell runs")
        return self._children(ref, pairs)

    def _children(self, ref: ClassRef, pairs: list[tuple[str, ast.expr]]) -> AttrType:
        children = []
        for key, value in pairs:
            t = self.type_of(value)
            if not isinstance(t, ModType):
                return Unknown(f"the item '{key}' of this {ref.name} is not a module known before the cell runs")
            children.append((key, t))
        return ModType(ref, children=tuple(children))


def _literal(e: ast.expr) -> AttrType | None:
    """The type of a literal int/float/bool/str (or tuple of ints) class constant, else None."""
    try:
        value = ast.literal_eval(e)
    except ValueError:
        return None
    t = _constant_type(value)
    return None if isinstance(t, Unknown) or t == NONE else t


def _is_call_to(e: ast.expr, name: str, g: Globals) -> bool:
    if not isinstance(e, ast.Call):
        return False
    obj = static_value(e.func, g)
    return getattr(obj, "__name__", None) == name


def _constant_type(value: Any) -> AttrType:
    if value is None:
        return NONE
    if type(value) in _PLAIN:
        return Scalar(_PLAIN[type(value)])
    if isinstance(value, torch.Tensor):
        return Scalar(Kind.TENSOR)
    if isinstance(value, (tuple, list)) and all(type(v) is int for v in value):
        return Scalar(Kind.INTS, seq=type(value).__name__ if type(value) in (tuple, list) else "")
    return Unknown(f"a {type(value).__name__} value")


def field_type(classes: Classes, param: ast.arg, name: str) -> AttrType:
    """`config.<name>` where `config` is a parameter: the field's annotation in a dataclass.

    The parameter's own annotation names the dataclass; without one, every dataclass of the
    source and of the namespace that declares the field must agree on its kind."""
    if param.annotation is not None:
        ref = classes.ref_of(param.annotation)
        if ref is not None:
            found = _dataclass_fields(classes, ref)
            if found is not None:
                return found.get(name, Unknown(f"the dataclass {ref.name} has no field '{name}'"))
    seen: list[AttrType] = []
    for cname in classes.nodes:
        fields = _dataclass_fields(classes, ClassRef(cname))
        if fields and name in fields:
            seen.append(fields[name])
    for value in classes.g.values.values():
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__name__ not in classes.nodes:
            fields = _dataclass_fields(classes, ClassRef(value.__name__, value))
            if fields and name in fields:
                seen.append(fields[name])
    if not seen:
        return Unknown(f"`{param.arg}.{name}` is not a field of a dataclass the region can see")
    kinds = set(seen)
    if len(kinds) != 1:
        return Unknown(f"dataclasses disagree on the kind of the field '{name}'")
    return seen[0]


def _dataclass_fields(classes: Classes, ref: ClassRef) -> dict[str, AttrType] | None:
    if ref.obj is not None:
        if not dataclasses.is_dataclass(ref.obj):
            return None
        try:
            hints = typing.get_type_hints(ref.obj)
        except Exception:
            hints = {}
        return {f.name: annotation_type(hints.get(f.name, f.type)) for f in dataclasses.fields(ref.obj)}
    cdef = classes.nodes.get(ref.name)
    if cdef is None or not any(
        static_value(d.func if isinstance(d, ast.Call) else d, classes.g) is dataclasses.dataclass
        for d in cdef.decorator_list
    ):
        return None
    return {
        s.target.id: annotation_node_type(s.annotation, classes.g)
        for s in cdef.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }
