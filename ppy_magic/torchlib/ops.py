"""The op table: Python callables, Tensor methods and operators -> ATen overloads.

The table is derived from PyTorch itself. PyTorch's C bindings
(``torch._C._VariableFunctions``, ``_nn``, ``_linalg``, ``_special``, ``_fft`` and
``TensorBase``'s methods) are generated from the same ATen schemas a region
calls, so every binding whose name has callable ATen overloads maps to them
one to one. Python-level wrappers with logic of their own (``F.softmax``,
``Tensor.split``, ...) are reproduced by small adapters (``adapters.py``).
Overloads are resolved by argument kinds the way PyTorch's Python argument
parser resolves them, so a region makes the same ATen calls eager does.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Any

import torch

from ..language import ir
from ..language.ir import Kind
from ..language.values import KwArgs
from .schemas import Overload, SchemaArg, overloads

# PyTorch's Python argument parser lets a Python number stand for a Tensor
# argument only for these ops (python_arg_parser.cpp), and their `.Scalar`
# overloads have no Python binding: eager wraps the number in a 0-dim
# "wrapped number" tensor and calls the Tensor overload.
NUMBERS_AS_TENSORS = frozenset(
    {
        "add",
        "add_",
        "sub",
        "sub_",
        "subtract",
        "subtract_",
        "mul",
        "mul_",
        "multiply",
        "multiply_",
        "div",
        "div_",
        "divide",
        "divide_",
        "true_divide",
        "true_divide_",
        "floor_divide",
        "floor_divide_",
        "rsub",
    }
)

# Bindings that look generated but carry Python-level logic, or return values a
# region cannot represent exactly: never mapped directly.
EXCLUDED = frozenset(
    {
        "item",
        "tolist",
        "range",  # torch.range: its binding warns in Python, before ATen
        "numpy",
        "data_ptr",
        "backward",
        "register_hook",
        "retain_grad",
        "requires_grad_",
        "set_",
        "storage",
        "untyped_storage",
        "is_nonzero",
        "equal",
        "allclose",
        "is_same_size",
        "result_type",
        "can_cast",
        "promote_types",
        "__and__",
        "__or__",
        "__xor__",
        "__lshift__",
        "__rshift__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "size",
        "stride",
        "dim",
        "numel",
        "data",
        "type",
        "to_dense",
        "element_size",
        "get_device",
        "is_contiguous",
        "nonzero_static",
        "resize_",
        "resize_as_",
        "record_stream",
        "share_memory_",
        "pin_memory",
        "is_pinned",
        "to_sparse",
        "_values",
        "_indices",
        "values",
        "indices",
        "q_scale",
    }
)

# Binding namespaces and the prefix their ATen names carry.
_BINDINGS = (
    ("_VariableFunctions", ""),
    ("_nn", ""),
    ("_linalg", ""),
    ("_special", ""),
    ("_fft", ""),
)


@dataclass(frozen=True)
class OpSpec:
    aten: str
    python_name: str = ""
    overload: str | None = None  # one overload only: torch.ops.aten.<op>.<overload>

    @property
    def numbers_as_tensors(self) -> bool:
        return self.aten in NUMBERS_AS_TENSORS and self.overload is None

    def candidates(self) -> tuple[Overload, ...]:
        found = overloads(self.aten)
        if self.overload is not None:
            return tuple(o for o in found if o.overload == self.overload)
        if self.numbers_as_tensors:
            found = tuple(o for o in found if not o.overload.startswith("Scalar"))
        return found


# Ops that make tensors of other layouts: regions stay strided (see the runtime's guard).
_LAYOUT_PREFIXES = (
    "to_sparse",
    "_to_sparse",
    "to_mkldnn",
    "sparse_",
    "_sparse",
    "nested_",
    "_nested",
    "to_padded_tensor",
    "_to_dense",
    "to_dense",
)


def _usable(name: str) -> bool:
    return (
        not name.startswith("__")
        and name not in EXCLUDED
        and not name.startswith(_LAYOUT_PREFIXES)
        and bool(overloads(name))
    )


def _binding_namespaces() -> list[Any]:
    return [ns for ns in (getattr(torch._C, name, None) for name, _ in _BINDINGS) if ns is not None]


_function_specs: dict[int, tuple[object, OpSpec | None]] = {}


def function_spec(obj: object) -> OpSpec | None:
    """The op a generated binding calls, or None. Looked up per object: a new kernel pays only for
    the functions its cells use."""
    entry = _function_specs.get(id(obj))
    if entry is not None and entry[0] is obj:
        return entry[1]
    spec = None
    name = getattr(obj, "__name__", None)
    if isinstance(obj, torch._ops.OpOverload) and obj.namespace == "aten":  # torch.ops.aten.<op>.<overload>
        op = obj._schema.name.split("::", 1)[1]
        overload = "" if obj._overloadname == "default" else obj._overloadname
        if _usable(op) and any(o.overload == overload for o in overloads(op)):
            spec = OpSpec(op, f"torch.ops.aten.{op}.{obj._overloadname}", overload)
    elif (
        isinstance(name, str)
        and callable(obj)
        and _usable(name)
        and any(getattr(ns, name, None) is obj for ns in _binding_namespaces())
    ):
        spec = OpSpec(name, name)
    _function_specs[id(obj)] = (obj, spec)  # the object is kept so its id stays unique
    return spec


@functools.cache
def method_spec(name: str) -> OpSpec | None:
    """The op a Tensor method calls, if the method is PyTorch's generated binding (not a Python override)."""
    base = torch._C.TensorBase
    own = getattr(torch.Tensor, name, None)
    if own is None or own is not getattr(base, name, None) or type(own).__name__ != "method_descriptor":
        return None
    return OpSpec(name, f"Tensor.{name}") if _usable(name) else None


def all_specs() -> list[OpSpec]:
    """Every op the table maps (functions and methods): for listings and tests, not for compiling."""
    specs = {}
    for ns in _binding_namespaces():
        for name in dir(ns):
            spec = function_spec(getattr(ns, name))
            if spec is not None:
                specs[spec.aten] = spec
    for name in dir(torch._C.TensorBase):
        spec = method_spec(name)
        if spec is not None:
            specs.setdefault(spec.aten, spec)
    return list(specs.values())


def supported_ops() -> list[str]:
    """Python-level names regions can call directly (adapters add a few more)."""
    from . import adapters, torch_source

    names = set()
    publics = [
        (torch, "torch"),
        (torch.nn.functional, "F"),
        (torch.linalg, "torch.linalg"),
        (torch.special, "torch.special"),
        (torch.fft, "torch.fft"),
    ]
    for module, label in publics:
        for name in dir(module):
            if name.startswith("_"):
                continue
            obj = getattr(module, name, None)
            if function_spec(obj) is not None or adapters.lookup(obj) is not None or torch_source.holds(obj):
                names.add(f"{label}.{name}")
    names.update(
        f"Tensor.{n}" for n in dir(torch._C.TensorBase) if not n.startswith("_") and method_spec(n) is not None
    )
    names.update(f"Tensor.{n}" for n in adapters.METHODS)
    names.update(  # Tensor.split, Tensor.unique, ...: written in torch/_tensor.py, compiled from there
        f"Tensor.{n}" for n, fn in vars(torch.Tensor).items() if not n.startswith("_") and torch_source.holds(fn)
    )
    return sorted(names)


# Python operators: (op for `tensor OP x`, reflected form for `number OP tensor`)
# following torch/_tensor.py: `2 / x` is `x.reciprocal() * 2`, `2 - x` is
# `rsub(x, 2)`, `2 ** x` is `torch.pow(2, x)`, `2 // x` is floor_divide(2, x).
BINOPS: dict[type, tuple[str, str | None]] = {
    ast.Add: ("add", "add"),
    ast.Sub: ("sub", "rsub"),
    ast.Mult: ("mul", "mul"),
    ast.Div: ("div", "rdiv"),
    ast.MatMult: ("matmul", None),
    ast.FloorDiv: ("floor_divide", "rfloordiv"),
    ast.Mod: ("remainder", "rremainder"),
    ast.Pow: ("pow", "rpow"),
    ast.BitAnd: ("bitwise_and", "bitwise_and"),
    ast.BitOr: ("bitwise_or", "bitwise_or"),
    ast.BitXor: ("bitwise_xor", "bitwise_xor"),
    ast.LShift: ("bitwise_left_shift", None),
    ast.RShift: ("bitwise_right_shift", None),
}
INPLACE_BINOPS: dict[type, str] = {
    ast.Add: "add_",
    ast.Sub: "sub_",
    ast.Mult: "mul_",
    ast.Div: "div_",
    ast.Pow: "pow_",
    ast.FloorDiv: "floor_divide_",
    ast.Mod: "remainder_",
    ast.BitAnd: "bitwise_and_",
    ast.BitOr: "bitwise_or_",
    ast.BitXor: "bitwise_xor_",
}
UNARYOPS: dict[type, str] = {ast.USub: "neg", ast.UAdd: "positive", ast.Invert: "bitwise_not"}
COMPARE_OPS: dict[type, tuple[str, str]] = {  # op, and the op with operands swapped
    ast.Eq: ("eq", "eq"),
    ast.NotEq: ("ne", "ne"),
    ast.Lt: ("lt", "gt"),
    ast.LtE: ("le", "ge"),
    ast.Gt: ("gt", "lt"),
    ast.GtE: ("ge", "le"),
}


class ResolveError(Exception):
    """No overload of an op accepts the given arguments; the message says why."""


# ---- overload resolution --------------------------------------------------------------


def _base(t: str) -> tuple[str, bool]:
    if t.startswith("Optional[") and t.endswith("]"):
        return t[len("Optional[") : -1], True
    return t, False


def _fit(arg: SchemaArg, value: Any, numbers_as_tensors: bool) -> tuple[int, Any] | None:
    """How well `value` fits a schema argument (2 exact, 1 converted) and the IR argument to pass."""
    t, optional = _base(arg.type)
    if isinstance(value, ir.Const) and value.kind == Kind.NONE:
        return (2, ir.Default(None)) if optional else None
    items = value.items if isinstance(value, ir.Tup) else None
    kind = None if items is not None else getattr(value, "kind", None)
    if kind in ir.HELD_BY and kind != Kind.OPT_TENSOR:  # an int, float, bool or dtype that may be None
        held = ir.HELD_BY[kind]
        fits = {"int": (Kind.INT,), "float": (Kind.FLOAT,), "bool": (Kind.BOOL,), "ScalarType": (Kind.DTYPE,)}
        ok = optional and (held in fits.get(t, ()) or (t == "number" and held in ir.SCALAR_KINDS))
        return (2, value) if ok else None
    if t == "Tensor":
        if kind == Kind.TENSOR or (kind == Kind.OPT_TENSOR and optional):
            return 2, value
        if numbers_as_tensors and kind in (*ir.SCALAR_KINDS, Kind.NUMBER):
            return 1, ir.WrapNumber(value)
        return None
    if t == "number":
        return (2, value) if kind in (*ir.SCALAR_KINDS, Kind.NUMBER) else None
    if t == "int":
        return (2, value) if kind == Kind.INT else None
    if t == "float":
        return (2, value) if kind == Kind.FLOAT else ((1, value) if kind == Kind.INT else None)
    if t == "bool":
        return (2, value) if kind == Kind.BOOL else None
    if t == "str":
        return (2, value) if kind == Kind.STR else None
    if t == "ScalarType":
        return (2, value) if kind == Kind.DTYPE else None
    if t == "Device":
        if kind == Kind.DEVICE:
            return 2, value
        return (1, value) if kind == Kind.STR else None  # device="cpu", as PyTorch's parser accepts
    if t in ("MemoryFormat", "Layout"):
        want = torch.memory_format if t == "MemoryFormat" else torch.layout
        ok = kind == Kind.ENUM and isinstance(value, ir.Const) and isinstance(value.value, want)
        return (2, value) if ok else None
    if t == "List[int]":
        if kind in (Kind.INTS, Kind.INT_LIST):
            return 2, value
        if items is not None and all(getattr(i, "kind", None) == Kind.INT for i in items):
            return 2, ir.Items(tuple(items), Kind.INT)
        if kind == Kind.INT and arg.size:  # int[N]: one int stands for N copies, as in PyTorch's parser
            return 1, ir.Items((value,) * arg.size, Kind.INT)
        return None
    if t == "List[float]":  # a list or tuple of numbers, as PyTorch's parser takes a float[]
        if items is not None and all(getattr(i, "kind", None) in (Kind.FLOAT, Kind.INT) for i in items):
            return 2, ir.Items(tuple(items), Kind.FLOAT)
        return None
    if t == "List[Tensor]":
        if kind in (Kind.TENSORS, Kind.TENSOR_LIST):
            return 2, value
        if items is not None and all(getattr(i, "kind", None) == Kind.TENSOR for i in items):
            return 2, ir.Items(tuple(items), Kind.TENSOR)
        return None
    return None


def _bind(
    ov: Overload, args: list, kwargs: dict, numbers_as_tensors: bool, method: bool
) -> tuple[int, tuple[ir.Arg, ...]] | None:
    receiver = None
    if method:  # the receiver is the schema's `self`, wherever it stands (where.self: condition, self, other)
        if not any(a.name == "self" for a in ov.args) or "self" in kwargs:
            return None
        receiver, args = args[0], list(args[1:])
    positional = [a for a in ov.args if not a.kwarg_only and not (method and a.name == "self")]
    # Varargs int lists: `x.view(2, 3)`, `torch.zeros(2, 3)`, `x.permute(0, 2, 1)`.
    if (
        len(positional) == 1
        and positional[0].type == "List[int]"
        and args
        and all(getattr(a, "kind", None) == Kind.INT for a in args)
        and (len(args) > 1 or not positional[0].size)
    ):
        args = [ir.Tup(tuple(args))]
    if len(args) > len(positional):
        return None
    kw = dict(kwargs)
    given = {a.name: v for a, v in zip(positional, args, strict=False)}  # the rest by keyword or default
    score = 0
    bound: list[ir.Arg] = []
    for sarg in ov.args:
        keyword = None if method and sarg.name == "self" else _keyword(sarg.name, method, kw)
        if method and sarg.name == "self":
            actual = receiver
        elif sarg.name in given:
            if keyword is not None:
                return None  # given twice: PyTorch's parser refuses it
            actual = given[sarg.name]
        elif keyword is not None:
            actual = kw.pop(keyword)
        elif sarg.has_default:
            bound.append(ir.Default(sarg.default))
            continue
        else:
            return None
        got = _fit(sarg, actual, numbers_as_tensors)
        if got is None:
            return None
        score += got[0]
        bound.append(got[1])
    if kw:
        return None  # a keyword no parameter took (or a second spelling of one that did)
    return score, tuple(bound)


# The other keywords PyTorch's argument parser takes for a parameter of these (Python) names, tried after
# the name itself and in this order (numpy_compatibility_arg_names, torch/csrc/utils/python_arg_parser.cpp):
# `x.sum(axis=1, keepdims=True)`, `torch.add(x1=a, x2=b)`. Only the generated bindings take them.
NUMPY_NAMES = {"dim": ("axis",), "keepdim": ("keepdims",), "input": ("x", "a", "x1"), "other": ("x2",)}


def _python_name(name: str, method: bool) -> str:
    """A schema argument's name in the Python signature: aten's `self` is `input` of a function."""
    return "input" if name == "self" and not method else name


def _keyword(name: str, method: bool, kw: dict) -> str | None:
    """The keyword of `kw` that PyTorch's parser binds to schema argument `name`, if any."""
    python = _python_name(name, method)
    return next((k for k in (python, *NUMPY_NAMES.get(python, ())) if k in kw), None)


def resolve(
    spec: OpSpec, args: list, kwargs: dict, *, method: bool = False, display: str | None = None
) -> tuple[Overload, tuple[ir.Arg, ...]]:
    """Pick the overload eager would call for these argument kinds."""
    best = None
    for ov in spec.candidates():
        got = _bind(ov, args, kwargs, spec.numbers_as_tensors, method)
        if got is not None and (best is None or got[0] > best[0]):
            best = (got[0], ov, got[1])
    if best is None:
        shown = ", ".join(describe(a) for a in args)
        shown_kw = ", ".join(f"{k}={describe(v)}" for k, v in kwargs.items())
        sig = ", ".join(x for x in (shown, shown_kw) if x)
        options = "; ".join(o.text.split("::", 1)[-1].split(" ->")[0] for o in spec.candidates()[:6])
        raise ResolveError(
            f"{display or spec.aten}({sig}) matches no ATen overload a region can call (ATen has: {options})"
        )
    return best[1], best[2]


def describe(value: Any) -> str:
    if isinstance(value, ir.Tup):
        inner = ", ".join(describe(v) for v in value.items)
        return f"[{inner}]" if value.is_list else f"({inner})"
    if isinstance(value, KwArgs):
        return "**kwargs"
    return ir.KIND_NAMES.get(getattr(value, "kind", "?"), "?")


_RETURN_KINDS = {
    "Tensor": Kind.TENSOR,
    "List[Tensor]": Kind.TENSORS,
    "int": Kind.INT,
    "float": Kind.FLOAT,
    "bool": Kind.BOOL,
    "ScalarType": Kind.DTYPE,
    "Scalar": Kind.NUMBER,  # Tensor.item(): a Python int, float or bool, as the dtype decides
    "number": Kind.NUMBER,
}


def result_kinds(ov: Overload) -> tuple[Kind, ...] | None:
    """The kinds an overload returns, or None if a region cannot return them exactly."""
    kinds = []
    for r in ov.returns:
        k = _RETURN_KINDS.get(r)
        if k is None:
            return None
        kinds.append(k)
    return tuple(kinds)


def result_type(ov: Overload) -> type | None:
    """The torch.return_types structseq eager returns for a multi-result op, if any."""
    if len(ov.returns) > 1 and any(ov.return_names):
        return getattr(torch.return_types, ov.name, None)
    return None
