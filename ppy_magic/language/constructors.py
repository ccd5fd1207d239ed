"""Tensors made from Python numbers, and Python values read from tensors, as torch's Python layer does it.

A mixin of ``function.FunctionCompiler``: ``torch.tensor(...)`` of numbers, (nested)
lists and tuples of them, run-time sequences of numbers and tensors; the legacy typed
constructors (``torch.FloatTensor([...])``); ``torch.numel``; ``Tensor.type(...)``;
``Tensor.tolist()`` for ``for`` and ``len()``; ``x[range(...)]``'s index. torch's C++
(``torch/csrc/utils/tensor_new.cpp`` and friends) is the spec; the backend's runtime header
``ppy_native.h`` restates it on ATen calls. It reads and writes nothing of the compiler's state but through
``intrinsic``, ``call_op`` and ``emit``.
"""

from __future__ import annotations

import ast
from typing import Any

import torch

from ..torchlib import ops
from . import ir
from .ir import Kind

NONE = ir.Const(None, Kind.NONE)
FALSE = ir.Const(False, Kind.BOOL)

# The legacy typed constructors a region makes (the CPU ones) and the dtype each stores; torch.Tensor's is the
# default dtype, read when the region runs (None here).
LEGACY_TYPES: dict[Any, torch.dtype | None] = {
    **{
        getattr(torch, name): getattr(torch, name).dtype
        for name in (
            "BFloat16Tensor",
            "BoolTensor",
            "ByteTensor",
            "CharTensor",
            "DoubleTensor",
            "FloatTensor",
            "HalfTensor",
            "IntTensor",
            "LongTensor",
            "ShortTensor",
        )
    },
    torch.Tensor: None,
}
NUMBER_KINDS = (Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.NUMBER)
TENSOR_HINT = "Build it with torch.stack([...]) or keep this function Python."


class ConstructorCompiler:
    def constructor_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        """The value of a call of `fn` if it is one of this module's, else NotImplemented."""
        if fn is torch.tensor:
            return self.tensor_call(node, args, kwargs)
        if fn is torch.numel:
            t = args[0] if len(args) == 1 and not kwargs else kwargs.get("input") if not args else None
            if getattr(t, "kind", None) != Kind.TENSOR or len(args) + len(kwargs) != 1:
                raise self.error(node, "torch.numel() takes one tensor")
            return self.intrinsic("tensor_numel", Kind.INT, t)
        if fn is callable:
            return self.callable_call(node, args, kwargs)
        try:
            legacy = fn in LEGACY_TYPES
        except TypeError:  # unhashable
            legacy = False
        if legacy:
            return self.legacy_call(node, fn, args, kwargs)
        return NotImplemented

    # -- torch.tensor --------------------------------------------------------------------------------
    def tensor_call(self, node: ast.Call, args: list, kwargs: dict) -> ir.Var:
        """torch.tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False)."""
        if len(args) != 1:
            raise self.error(node, f"torch.tensor() takes one positional argument (data), got {len(args)}")
        extra = set(kwargs) - {"dtype", "device", "requires_grad", "pin_memory"}
        if extra:
            raise self.error(node, f"torch.tensor() with {sorted(extra)[0]}= is not supported in a region")
        pin = kwargs.get("pin_memory", FALSE)
        if not (isinstance(pin, ir.Const) and pin.value is False):
            raise self.error(node, "torch.tensor(..., pin_memory=...) is not supported in a region")
        dtype = self.dtype_option(node, kwargs.get("dtype", NONE), "torch.tensor")
        device = kwargs.get("device", NONE)
        if getattr(device, "kind", None) not in (Kind.NONE, Kind.DEVICE, Kind.STR):
            raise self.error(node, f"torch.tensor(device=...) takes a device or a str, got {ops.describe(device)}")
        grad = kwargs.get("requires_grad", FALSE)
        if getattr(grad, "kind", None) != Kind.BOOL:
            raise self.error(node, f"torch.tensor(requires_grad=...) takes a bool, got {ops.describe(grad)}")
        data = args[0]
        kind = getattr(data, "kind", None) if not isinstance(data, ir.Tup) else None
        if kind == Kind.TENSOR:
            return self.intrinsic("tensor_copy", Kind.TENSOR, data, dtype, device, grad)
        if kind in (Kind.INTS, Kind.INT_LIST, Kind.FLOAT_LIST):
            return self.intrinsic("tensor_new_seq", Kind.TENSOR, dtype, device, grad, data)
        sizes, numbers = self.nested_numbers(node, data, "torch.tensor")
        return self.intrinsic("tensor_new", Kind.TENSOR, dtype, device, grad, *self.shape_operands(sizes), *numbers)

    def dtype_option(self, node: ast.AST, dtype: Any, who: str) -> ir.Atom:
        if getattr(dtype, "kind", None) not in (Kind.NONE, Kind.DTYPE, Kind.OPT_DTYPE):
            raise self.error(node, f"{who}(dtype=...) takes a torch.dtype, got {ops.describe(dtype)}")
        return dtype

    @staticmethod
    def shape_operands(sizes: list[int]) -> list[ir.Const]:
        return [ir.Const(len(sizes), Kind.INT), *(ir.Const(n, Kind.INT) for n in sizes)]

    def nested_numbers(self, node: ast.AST, data: Any, who: str) -> tuple[list[int], list[ir.Atom]]:
        """The sizes of a rectangular (nested) sequence known at compile time, and its numbers in row-major
        order. What PyTorch would read differently (a tensor inside it, a ragged one) stays Python."""
        if not isinstance(data, ir.Tup):
            kind = getattr(data, "kind", None)
            if kind in NUMBER_KINDS:
                return [], [data]
            if kind in (Kind.TENSOR, Kind.TENSORS, Kind.TENSOR_LIST):
                raise self.error(
                    node, f"{who}() of a sequence holding tensors is not supported in a region", TENSOR_HINT
                )
            raise self.error(node, f"{who}() of {ops.describe(data)} is not supported in a region")
        parts = [self.nested_numbers(node, item, who) for item in data.items]
        shapes = {tuple(sizes) for sizes, _ in parts}
        if len(shapes) > 1:
            raise self.error(
                node, f"{who}() of a ragged sequence (its items of different lengths) is not supported in a region"
            )
        inner = list(shapes.pop()) if shapes else []
        return [len(data.items), *inner], [n for _, numbers in parts for n in numbers]

    def legacy_call(self, node: ast.Call, cls: Any, args: list, kwargs: dict) -> ir.Var:
        """torch.FloatTensor([...]): legacy_new_from_sequence, the type's dtype and no inference."""
        name = "torch.Tensor" if cls is torch.Tensor else f"torch.{cls.__name__}"
        data = args[0] if len(args) == 1 else None
        if kwargs or not isinstance(data, ir.Tup):
            raise self.error(
                node,
                f"{name}(...) is made from a list or a tuple of numbers in a region; "
                "with sizes it makes an uninitialised tensor, whose values are not defined",
                "Write torch.tensor([...], dtype=...) for values, or torch.empty(...) for a tensor to fill.",
            )
        sizes, numbers = self.nested_numbers(node, data, name)
        dtype = LEGACY_TYPES[cls]
        dtype_atom = ir.Const(dtype, Kind.DTYPE) if dtype is not None else NONE
        return self.intrinsic("legacy_tensor", Kind.TENSOR, dtype_atom, *self.shape_operands(sizes), *numbers)

    # -- Tensor methods --------------------------------------------------------------------------------
    def tensor_type(self, node: ast.Call, t: ir.Var, args: list, kwargs: dict) -> Any:
        """Tensor.type(dtype=None, non_blocking=False, *, memory_format=None) (THPVariable_type)."""
        params = dict(zip(("dtype", "non_blocking"), args, strict=False))
        if len(args) > 2 or any(k in params or k not in ("dtype", "non_blocking", "memory_format") for k in kwargs):
            raise self.error(node, "Tensor.type() with these arguments is not supported in a region")
        params.update(kwargs)
        target = params.get("dtype", NONE)
        rest = [params.get("non_blocking", FALSE)]
        memory = {"memory_format": params["memory_format"]} if "memory_format" in params else {}
        if isinstance(target, ir.Const) and target.kind == Kind.NONE:
            return self.intrinsic("tensor_type_name", Kind.STR, t)
        if getattr(target, "kind", None) == Kind.DTYPE:
            return self.call_op(node, ops.OpSpec("to"), [t, target, *rest], memory, method=True, display="Tensor.type")
        name = None
        if isinstance(target, ir.Const) and target.kind == Kind.STR:
            name = target.value
        elif isinstance(getattr(target, "value", None), type) and target.value in LEGACY_TYPES:  # torch.DoubleTensor
            name = "torch.Tensor" if target.value is torch.Tensor else f"torch.{target.value.__name__}"
        if name is None:
            raise self.error(node, f"Tensor.type() of {ops.describe(target)} is not supported in a region")
        if name == "torch.Tensor":
            raise self.error(node, "Tensor.type('torch.Tensor') depends on the default tensor type when it runs")
        try:  # torch itself says what the name means (options_from_string), on a CPU tensor
            made = torch.empty(0).type(name)
        except ValueError as exc:  # invalid type: raised where eager raises it
            self.emit(ir.Raise("ValueError", str(exc), self.line()))
            self.terminated = True
            return ir.Const(None, Kind.NONE)
        except Exception as exc:  # noqa: BLE001 - a CUDA type: eager initialises the device here
            raise self.error(node, f"Tensor.type({name!r}) is not supported in a region ({exc})") from None
        if made.device.type != "cpu" or made.layout != torch.strided or made.is_quantized:
            raise self.error(node, f"Tensor.type({name!r}) of a non-CPU or non-dense type is not supported in a region")
        dtype = made.dtype
        device = ir.Const("cpu", Kind.STR)
        dt = ir.Const(dtype, Kind.DTYPE)
        return self.call_op(node, ops.OpSpec("to"), [t, device, dt, *rest], memory, method=True, display="Tensor.type")

    def tensor_tolist(self, node: ast.Call, t: ir.Var, args: list, kwargs: dict) -> ir.Var:
        if args or kwargs:
            raise self.error(node, "Tensor.tolist() takes no arguments")
        numbers = self.intrinsic("tensor_tolist", Kind.NUMBERS, t)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        if receiver is not None and _one_dimensional(receiver):
            self.__dict__.setdefault("one_d_numbers", set()).add(numbers.name)
        return numbers

    def iterable_numbers(self, node: ast.AST, value: ir.Var) -> None:
        """Iterating x.tolist() is exact only where x is 1-d: of more dimensions its items are lists."""
        if value.name not in self.__dict__.get("one_d_numbers", ()):
            raise self.error(
                node,
                "iterating x.tolist() is compiled only where x is 1-d for certain (its items are numbers): "
                "x.flatten().tolist(), x.view(-1).tolist(), torch.arange(...).tolist()",
                "Flatten it first, or let this loop run as Python.",
            )

    # -- builtins ----------------------------------------------------------------------------------------
    def callable_call(self, node: ast.Call, args: list, kwargs: dict) -> ir.Const:
        """callable(x), decided when compiling: values of the region's kinds are never callable; functions,
        closures, classes and modules always are."""
        from .values import BoundMethod, CellFunction, Closure, ModuleValue, Static, TensorMethod

        if len(args) != 1 or kwargs:
            raise self.error(node, f"callable() takes exactly one argument ({len(args) + len(kwargs)} given)")
        v = args[0]
        if isinstance(v, (Closure, TensorMethod, BoundMethod)) or (
            isinstance(v, Static) and isinstance(v.value, CellFunction)
        ):
            return ir.Const(True, Kind.BOOL)
        if isinstance(v, (Static, ir.Const)):
            return ir.Const(callable(v.value), Kind.BOOL)
        if isinstance(v, ModuleValue) and v.sample is not None:
            return ir.Const(callable(v.sample), Kind.BOOL)
        if isinstance(v, ir.Tup):
            return ir.Const(False, Kind.BOOL)
        if isinstance(v, ir.Var) and v.kind not in (Kind.MODULE, Kind.MODULES, Kind.CONSTANT):
            return ir.Const(False, Kind.BOOL)  # tensors, numbers, str, dtypes, devices, sequences, None
        raise self.error(node, f"callable() of {ops.describe(v)} is not known when compiling")

    def range_index(self, node: ast.Call) -> ir.IndexItem:
        """x[range(...)]: the range's ints as a Long index tensor, as PyTorch reads a sequence of ints."""
        it = self.range_iteration(node)
        if all(isinstance(b, ir.Const) for b in (it.start, it.stop, it.step)):
            values = range(it.start.value, it.stop.value, it.step.value)
            return ir.IndexItem("list", tuple(ir.Const(v, Kind.INT) for v in values))
        return ir.IndexItem("ints", (self.intrinsic("range_list", Kind.INT_LIST, it.start, it.stop, it.step),))


def _one_dimensional(node: ast.expr) -> bool:
    """An expression that makes a 1-d tensor whatever its inputs: flatten/ravel, view(-1)/reshape(-1),
    torch.arange/randperm."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    attr, args = node.func.attr, node.args
    if attr in ("flatten", "ravel") and not args and not node.keywords:
        return True
    if attr in ("view", "reshape") and len(args) == 1 and not node.keywords:
        a = args[0]
        return (
            isinstance(a, ast.UnaryOp)
            and isinstance(a.op, ast.USub)
            and isinstance(a.operand, ast.Constant)
            and a.operand.value == 1
        )
    return attr in ("arange", "randperm") and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
