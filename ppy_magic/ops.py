"""The curated op table: Python callables, methods and operators -> ATen overloads.

One entry per op name; the ATen schema (``schemas.py``) supplies argument names,
types, defaults and the C++ entry point, so adding an op is adding its name to
``CURATED``. Overloads are resolved by argument kinds the way PyTorch's Python
argument parser resolves them, so a region makes the same ``at::`` calls eager does.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import ir
from .schemas import Overload, SchemaArg, overloads

# ATen ops reachable as torch.<name>, torch.nn.functional.<name> and Tensor.<name>.
CURATED: tuple[str, ...] = (
    "matmul", "add", "sub", "mul", "div", "relu", "tanh", "sigmoid", "exp", "neg",
    "reciprocal", "rsub", "positive",
)

# PyTorch's Python argument parser lets a Python number stand for a Tensor
# argument only for these ops, and hides their `.Scalar` overloads: eager wraps
# the number in a 0-dim "wrapped number" tensor and calls the Tensor overload.
NUMBERS_AS_TENSORS = frozenset({
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "true_divide", "true_divide_",
    "floor_divide", "floor_divide_", "rsub",
})


@dataclass(frozen=True)
class OpSpec:
    aten: str

    @property
    def numbers_as_tensors(self) -> bool:
        return self.aten in NUMBERS_AS_TENSORS

    def candidates(self) -> tuple[Overload, ...]:
        found = overloads(self.aten)
        if self.numbers_as_tensors:
            found = tuple(o for o in found if not o.overload.startswith("Scalar"))
        return found


def _build_tables() -> tuple[dict[int, tuple[object, OpSpec]], dict[str, OpSpec]]:
    functions: dict[int, tuple[object, OpSpec]] = {}
    methods: dict[str, OpSpec] = {}
    for name in CURATED:
        spec = OpSpec(name)
        if not spec.candidates():
            raise RuntimeError(f"op table: aten::{name} has no callable overload")
        for namespace in (torch, F, torch.special, torch.linalg):
            fn = getattr(namespace, name, None)
            if fn is not None and callable(fn):
                functions[id(fn)] = (fn, spec)  # the object is kept so its id stays unique
        if hasattr(torch.Tensor, name):
            methods[name] = spec
    return functions, methods


FUNCTIONS, METHODS = _build_tables()


def function_spec(obj: object) -> OpSpec | None:
    entry = FUNCTIONS.get(id(obj))
    return entry[1] if entry is not None and entry[0] is obj else None


# Python operators. Each maps to (op for `tensor OP x`, reflected form for
# `number OP tensor`), following torch/_tensor.py: `2 / x` is
# `x.reciprocal() * 2` in eager, `2 - x` is `rsub(x, 2)`.
BINOPS: dict[type, tuple[str, str | None]] = {
    ast.Add: ("add", "add"),
    ast.Sub: ("sub", "rsub"),
    ast.Mult: ("mul", "mul"),
    ast.Div: ("div", "rdiv"),
    ast.MatMult: ("matmul", None),
}
UNARYOPS: dict[type, str] = {ast.USub: "neg", ast.UAdd: "positive"}


class ResolveError(Exception):
    """No overload of an op accepts the given arguments; the message says why."""


Actual = tuple[str, object]  # (kind, atom)


def _accepts(arg: SchemaArg, kind: str, numbers_as_tensors: bool) -> int | None:
    """How well a value of `kind` fits a schema argument: 2 exact, 1 converted, None not at all."""
    t = arg.type
    if t.startswith("Optional["):
        if kind == ir.NONE:
            return 2
        t = t[len("Optional["):-1]
    if t == "Tensor":
        if kind == ir.TENSOR:
            return 2
        if numbers_as_tensors and kind in ir.SCALAR_KINDS:
            return 1
        return None
    if t == "number":
        return 2 if kind in ir.SCALAR_KINDS else None
    if t == "int":
        return 2 if kind == ir.INT else None
    if t == "float":
        return 2 if kind == ir.FLOAT else (1 if kind == ir.INT else None)
    if t == "bool":
        return 2 if kind == ir.BOOL else None
    return None


def _bind(ov: Overload, args: list[Actual], kwargs: dict[str, Actual], numbers_as_tensors: bool,
          method: bool) -> tuple[int, tuple[ir.Arg, ...]] | None:
    positional = [a for a in ov.args if not a.kwarg_only]
    if len(args) > len(positional):
        return None
    names = {a.name for a in ov.args}
    kw = dict(kwargs)
    if not method and "input" in kw and "self" in names:
        kw["self"] = kw.pop("input")  # torch.f(input=...) is aten's `self`
    if any(k not in names for k in kw):
        return None
    score = 0
    bound: list[ir.Arg] = []
    for i, sarg in enumerate(ov.args):
        if i < len(args) and not sarg.kwarg_only:
            actual = args[i]
            if sarg.name in kw:
                return None
        elif sarg.name in kw:
            actual = kw[sarg.name]
        elif sarg.has_default:
            bound.append(ir.Default(sarg.type, sarg.default))
            continue
        else:
            return None
        kind, atom = actual
        fit = _accepts(sarg, kind, numbers_as_tensors)
        if fit is None:
            return None
        score += fit
        if fit == 1 and sarg.type.endswith("Tensor") and kind in ir.SCALAR_KINDS:
            bound.append(ir.WrapNumber(atom))
        else:
            bound.append(atom)
    return score, tuple(bound)


def resolve(spec: OpSpec, args: list[Actual], kwargs: dict[str, Actual], *, method: bool = False,
            display: str | None = None) -> tuple[Overload, tuple[ir.Arg, ...]]:
    """Pick the overload eager would call for these argument kinds."""
    best = None
    for ov in spec.candidates():
        got = _bind(ov, args, kwargs, spec.numbers_as_tensors, method)
        if got is not None and (best is None or got[0] > best[0]):
            best = (got[0], ov, got[1])
    if best is None:
        shown = ", ".join(ir.KIND_NAMES.get(k, k) for k, _ in args)
        shown_kw = ", ".join(f"{k}={ir.KIND_NAMES.get(v[0], v[0])}" for k, v in kwargs.items())
        sig = ", ".join(x for x in (shown, shown_kw) if x)
        options = "; ".join(o.text.split("(", 1)[0] + "(" + o.text.split("(", 1)[1].split(") ->")[0] + ")"
                            for o in spec.candidates())
        raise ResolveError(f"{display or spec.aten}({sig}) matches no ATen overload (have: {options})")
    return best[1], best[2]


def result_kinds(ov: Overload) -> tuple[str, ...] | None:
    """The kinds an overload returns, or None if a region cannot return them yet."""
    kinds = []
    for r in ov.returns:
        if r == "Tensor":
            kinds.append(ir.TENSOR)
        else:
            return None
    return tuple(kinds)
