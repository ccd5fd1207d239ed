"""What a call's values say where the source does not: the kinds, constants and objects of one variant.

A function is compiled at a call (``ppy_magic/variants.py``) when its source leaves
something open: an unannotated parameter, an annotation a region does not read, an
attribute of ``self`` whose kind ``__init__`` does not show, a free name bound after
the cell was compiled. The call's values close it, in one of two ways:

- a run-time kind (a tensor, an int, a float, a bool, a str, a dtype, a tuple of ints, a
  list of tensors): the variant takes any value of that kind, checked at each call;
- a constant (``None``, a callable, a class, and, where a run-time kind cannot compile,
  every Python value): compiled in, compared with the argument at each call
  (``same_constant`` in the runtime: the same object, or an equal int/float/str/tuple).

Modules and plain objects (a config) are read at each call, like ``self``: their
attributes take their kinds from the objects the call brought (``samples``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from . import einops_forms
from .attr_types import NONE, ClassRef, ModType, Scalar, Unknown
from .ir import Kind
from .module_plan import ABSENT

# The run-time kinds of a call's values (exact types: a subclass is not the kind).
_RUNTIME = {
    torch.Tensor: Kind.TENSOR,
    torch.nn.Parameter: Kind.TENSOR,
    bool: Kind.BOOL,
    int: Kind.INT,
    float: Kind.FLOAT,
    str: Kind.STR,
    torch.dtype: Kind.DTYPE,
}
# Values compiled in whatever the step: a region cannot hold them at run time, only call them or test them.
_CONSTANT_TYPES = (
    type(None),
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    functools.partial,
    type,
    types.ModuleType,
)


@dataclass(frozen=True)
class CallValues:
    """One variant's view of the open parts of a function, from one call.

    `constant_scalars`: numbers, bools, strs, dtypes and tuples of ints are constants too (the
    second try, when run-time kinds leave the body outside the language)."""

    kinds: dict[str, Kind] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, Any] = field(default_factory=dict)  # modules and plain objects, read per call
    constant_scalars: bool = False
    # The call's extra keywords into a **kwargs the body reads, in order: parameters after the function's own
    # (their kinds, constants and objects are in the three dicts above, by keyword).
    keywords: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        """One line per parameter this variant is specialised on."""
        out = [f"{name}: {_kind_name(kind)} (any value of that kind)" for name, kind in self.kinds.items()]
        out += [f"{name} == {short_repr(v)} (compiled in)" for name, v in self.constants.items()]
        out += [f"{name}: {type(v).__name__} (its attributes read at each call)" for name, v in self.samples.items()]
        return out


def _kind_name(kind: Kind) -> str:
    from .ir import KIND_NAMES

    return KIND_NAMES.get(kind, str(kind))


def short_repr(v: Any) -> str:
    name = getattr(v, "__qualname__", None) or getattr(v, "__name__", None)
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)) and name:
        return f"{getattr(v, '__module__', None) or ''}.{name}".lstrip(".")
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def is_object(value: Any) -> bool:
    """A module or a plain object whose attributes a region reads at each call."""
    if isinstance(value, nn.Module):
        return True
    if isinstance(value, _CONSTANT_TYPES) or type(value) in _RUNTIME or callable(value):
        return False
    return hasattr(value, "__dict__") and not isinstance(value, torch.Tensor)


def argument(value: Any, constant_scalars: bool) -> tuple[str, Any]:
    """How a parameter holds the call's value: ("kind", Kind), ("constant", value), ("object", value)
    or ("python", why)."""
    t = type(value)
    if t in (torch.Tensor, torch.nn.Parameter):
        return "kind", Kind.TENSOR
    if isinstance(value, torch.Tensor):
        return "python", "it is a subclass of torch.Tensor"
    if isinstance(value, _CONSTANT_TYPES):
        return "constant", value
    if t in _RUNTIME:
        if constant_scalars:
            return "constant", value
        # A float's parameter may hold an int too, kept an int as Python keeps it: one variant for both.
        return "kind", Kind.INT_OR_FLOAT if t is float else _RUNTIME[t]
    if isinstance(value, torch.device):
        return "constant", value
    if t is tuple and all(type(v) is int for v in value):
        return ("constant", value) if constant_scalars or not value else ("kind", Kind.INTS)
    if t is torch.Size:  # a tensor's sizes: a tuple whose `+` and slices are torch.Size again
        return "kind", Kind.SIZE
    if t in (list, tuple) and value and all(type(v) in (torch.Tensor, torch.nn.Parameter) for v in value):
        return "kind", Kind.TENSORS
    if t is list and all(type(v) is int for v in value):
        return "kind", Kind.INTS
    if is_object(value):
        return "object", value
    if callable(value):
        return "constant", value
    return "python", f"it holds a {t.__name__}, which a region does not take"


def object_type(value: Any) -> ModType:
    """The static type of a module or a plain object, as its value shows it (containers with their children)."""
    cls = type(value)
    ref = ClassRef(cls.__name__, cls)
    if not isinstance(value, nn.Module):
        return ModType(ref, module=False)
    if cls in (nn.ModuleList, nn.Sequential, nn.ModuleDict):
        children = list(value._modules.items())
        types_ = [(k, object_type(m) if m is not None else None) for k, m in children]
        if any(t is None for _, t in types_):
            return ModType(ref, children=tuple(types_))
        if cls is not nn.ModuleDict and types_ and all(t == types_[0][1] for _, t in types_):
            return ModType(ref, elem=types_[0][1])
        return ModType(ref, children=tuple(types_))
    return ModType(ref, constants=einops_forms.layer_operation(value) or ())


def lookup(obj: Any, name: str) -> tuple[bool, Any]:
    """``obj.<name>`` where the runtime finds it with no Python code run: the instance ``__dict__``, a class
    attribute that is not a descriptor, a module's parameters, buffers and submodules. (False, why) elsewhere,
    and where the class's own ``__getattribute__`` gives Python another value (or raises) for it."""
    found, value = _stored(obj, name)
    hook = _read_hook(obj, name) if found else None
    if hook is not None:
        # transformers' configs remap names and raise for per-layer fields of heterogeneous configs; diffusers'
        # models answer config fields from __getattr__: the region reads what is stored, so it may do so only
        # where Python reads the same object.
        try:
            with warnings.catch_warnings():  # a deprecation warning the read would give (diffusers' config fields)
                warnings.simplefilter("ignore")
                seen = getattr(obj, name)
        except Exception as exc:  # noqa: BLE001 - whatever it raises, Python raises it and the region would not
            return False, f"its class's {hook} raises {type(exc).__name__} for it"
        if seen is not value:
            return False, f"its class's {hook} gives Python another value than the one stored"
    return found, value


def _read_hook(obj: Any, name: str) -> str | None:
    """The method of `obj`'s class that Python's read of ``obj.<name>`` runs: its own ``__getattribute__``, or
    its own ``__getattr__`` where the name is past the instance ``__dict__`` and the class (a module's
    parameters, buffers and submodules); None where it runs neither."""
    cls = type(obj)
    if cls.__getattribute__ is not object.__getattribute__:
        return "__getattribute__"
    if not _own_getattr(cls) or name in (getattr(obj, "__dict__", None) or {}):
        return None
    return None if any(name in k.__dict__ for k in cls.__mro__) else "__getattr__"


def _own_getattr(cls: type) -> bool:
    """Whether `cls` has a ``__getattr__`` other than nn.Module's (which reads parameters, buffers and
    submodules, as the runtime does)."""
    return getattr(cls, "__getattr__", nn.Module.__getattr__) is not nn.Module.__getattr__


def _stored(obj: Any, name: str) -> tuple[bool, Any]:
    cls_attr = None
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            cls_attr = klass.__dict__[name]
            break
    if cls_attr is not None and hasattr(type(cls_attr), "__set__"):
        return False, "it is a property (or another data descriptor) of its class"
    d = getattr(obj, "__dict__", None) or {}
    if name in d:
        return True, d[name]
    if cls_attr is not None:
        if hasattr(type(cls_attr), "__get__"):
            return False, "it is a method (or another descriptor) of its class"
        return True, cls_attr
    if isinstance(obj, nn.Module):
        for where in ("_parameters", "_buffers", "_modules"):
            if name in d.get(where, {}):
                return True, d[where][name]
    return False, "it does not exist"


STORED = "stored"  # what getattr(obj, name, default) finds, or ABSENT


def getattr_finds(obj: Any, name: str) -> str:
    """What ``getattr(obj, name, default)`` finds in `obj`, where a region can tell it at each call: STORED (a
    value the runtime reads as Python does, ``lookup``), ABSENT (nothing: no such name in the instance
    ``__dict__``, in the class's MRO, or, for a module, among its parameters, buffers and submodules, which
    a layout checks at each call), or why neither holds (a property, whose getter may raise AttributeError,
    which getattr turns into the default; a ``__getattr__`` of the class's own)."""
    missing = object()
    if _own_getattr(type(obj)):
        return "its class has a __getattr__ of its own"
    try:
        value = getattr(obj, name, missing)
    except Exception as exc:  # noqa: BLE001 - Python raises it there; the region would not
        return f"reading it raises {type(exc).__name__}"
    if value is not missing:
        found, why = lookup(obj, name)
        return STORED if found else why
    if _stored(obj, name) != (False, "it does not exist"):
        return "its class's __getattribute__ hides a value it holds"
    return ABSENT


def property_getter(obj: Any, name: str) -> types.FunctionType | None:
    """The getter of a plain ``property`` ``name`` of ``obj``'s class (a function of Python source), or None."""
    found = next((k.__dict__[name] for k in type(obj).__mro__ if name in k.__dict__), None)
    if type(found) is not property or not isinstance(found.fget, types.FunctionType):
        return None
    return found.fget


@dataclass(frozen=True, eq=False)
class Constant:
    """An attribute compiled in as the value the call's object held (compared at each call)."""

    value: Any


def attribute_type(value: Any, constant_scalars: bool) -> Any:
    """What a region reads an attribute holding `value` as: a ``classes`` type, or a ``Constant``."""
    t = type(value)
    if value is None:
        return NONE
    if t in (torch.Tensor, torch.nn.Parameter) or t is nn.parameter.Buffer:
        return Scalar(Kind.TENSOR)
    if isinstance(value, torch.Tensor):
        return Unknown("it is a subclass of torch.Tensor")
    if t in (bool, int, float, str) and not constant_scalars:
        return Scalar(_RUNTIME[t])
    if t in (tuple, list) and all(type(v) is int for v in value) and not (constant_scalars and t is tuple):
        return Scalar(Kind.INTS, seq=t.__name__)
    if t in (bool, int, float, str, tuple) or isinstance(value, (torch.dtype, torch.device, *_CONSTANT_TYPES)):
        if t is tuple and not all(type(v) in (int, float, bool, str) for v in value):
            return Unknown("a tuple of other things than numbers and strs")
        return Constant(value)
    if is_object(value):
        return object_type(value)
    if callable(value):
        return Constant(value)
    return Unknown(f"it holds a {t.__name__}, which a region does not read")


def stated_for(t: Any, value: Any, exact: bool) -> Any:
    """A class's stated attribute type `t`, narrowed to what `value` holds (the option of a union, a scalar
    without its None unless `exact`), or None where the value is not one `t` holds."""
    from .attr_types import ParamObject, Union

    if isinstance(t, (Unknown, ParamObject)):
        return None
    if isinstance(t, Union):
        if value is None:
            return NONE if None in t.options else None
        return next((o for o in t.options if o is not None and stated_for(o, value, exact) is not None), None)
    if isinstance(t, ModType):
        if t.cls is None or t.children is not None or t.elem is not None:
            return None  # a container or a plain object: its items as the value shows them
        same = type(value) is t.cls.obj if t.cls.obj is not None else type(value).__name__ == t.cls.name
        constants = einops_forms.layer_operation(value) if same else None
        return dataclasses.replace(t, constants=constants) if constants else t if same else None
    if not isinstance(t, Scalar):
        return None
    if value is None:
        return (t if exact else NONE) if t.optional or t == NONE else None
    if t.kind == Kind.TENSOR:
        ok = type(value) in (torch.Tensor, torch.nn.Parameter, nn.parameter.Buffer)
    elif t.kind == Kind.INTS:
        seqs = (tuple,) if t.seq == "tuple" else (list,) if t.seq == "list" else (tuple, list)
        ok = type(value) in seqs and all(type(v) is int for v in value)
    else:
        want = {Kind.INT: (int,), Kind.FLOAT: (float,), Kind.BOOL: (bool,), Kind.STR: (str,)}.get(t.kind, ())
        ok = type(value) in want
    if not ok:
        return None
    return t if exact or not t.optional else Scalar(t.kind, False, t.seq)
