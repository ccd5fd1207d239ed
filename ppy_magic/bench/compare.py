"""What "the same as eager" means, once: the rule behind every "matches eager" in the project.

A region promises results that are bit for bit those of eager (DESIGN.md §5). ``same_as_eager``
is that promise as code, used by ``%ppy_bench``'s "matches eager" column and by the tests,
the fuzz and the OpInfo suite. It returns None when `got` is the same as `want`, else one
short line naming the first difference by its path (``result[1].values: ...``).

Tensors: type, dtype, shape, layout, device, ``requires_grad``, whether there is a
``grad_fn``, strides (when more than one element makes them observable), the conj/neg
bits, and the values by their bytes: ``-0.0`` is not ``0.0``, a NaN matches only a NaN
with the same bits. Python numbers: by type (``1`` is not ``1.0`` nor ``True``) and
value, floats by their bits except that any NaN matches any NaN (Python cannot make
NaN payloads observable the way a tensor's bytes are). Tuples, lists, named tuples
(``torch.return_types.*``), ``torch.Size`` and dicts: by exact type, length and items,
recursively; dataclasses (a model's output) by exact type and field by field; an object with no
``__eq__`` of its own (a model's cache) by its attributes. Anything else: by exact type and ``==``.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import sys
from typing import Any

import torch

__all__ = ["same_as_eager"]


def same_as_eager(got: Any, want: Any, path: str = "result", depth: int = 0) -> str | None:
    """None when `got` is the same as eager's `want`; else the first difference, prefixed with its path."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{path}: {type(got).__name__} vs eager's Tensor"
        return _tensor_difference(got, want, path)
    if type(got) is not type(want):
        return f"{path}: {type(got).__name__} vs eager's {type(want).__name__}"
    if isinstance(want, (tuple, list)):  # torch.Size and named tuples too: their exact type was checked above
        if len(got) != len(want):
            return f"{path}: {len(got)} items vs eager's {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            found = same_as_eager(g, w, f"{path}[{i}]", depth + 1)
            if found is not None:
                return found
        return None
    if dataclasses.is_dataclass(want) and not isinstance(want, type):  # an output dataclass: field by field
        for f in dataclasses.fields(want):
            found = same_as_eager(getattr(got, f.name), getattr(want, f.name), f"{path}.{f.name}", depth + 1)
            if found is not None:
                return found
        if not isinstance(want, dict):
            return None
    if isinstance(want, dict):
        if list(got) != list(want):
            return f"{path}: keys {list(got)} vs eager's {list(want)}"
        for key in want:
            found = same_as_eager(got[key], want[key], f"{path}[{key!r}]", depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(want, float):
        return None if _same_float(got, want) else f"{path}: {got!r} vs eager's {want!r}"
    if isinstance(want, complex):
        same = _same_float(got.real, want.real) and _same_float(got.imag, want.imag)
        return None if same else f"{path}: {got!r} vs eager's {want!r}"
    plain = type(want).__eq__ is object.__eq__ and hasattr(want, "__dict__") and not callable(want)
    if plain and got is not want and not isinstance(want, (type, torch.nn.Module)):
        # An object with no equality of its own (a model's cache): the same when its attributes are.
        if depth > _MAX_DEPTH:
            return f"{path}: nested too deep to compare"
        mine, theirs = vars(got), vars(want)
        if list(mine) != list(theirs):
            return f"{path}: attributes {list(mine)} vs eager's {list(theirs)}"
        for key in theirs:
            found = same_as_eager(mine[key], theirs[key], f"{path}.{key}", depth + 1)
            if found is not None:
                return found
        return None
    try:
        same = bool(got == want)
    except Exception:  # an object whose == raises or is ambiguous cannot be called the same
        same = False
    return None if same else f"{path}: {got!r} vs eager's {want!r}"


_MAX_DEPTH = 20  # objects compared by their attributes, inside one another


def _same_float(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))


def _tensor_difference(got: torch.Tensor, want: torch.Tensor, path: str) -> str | None:
    if type(got) is not type(want):
        return f"{path}: {type(got).__name__} vs eager's {type(want).__name__}"
    if got.is_nested or want.is_nested:
        return _nested_difference(got, want, path)
    for attr in ("dtype", "shape", "layout", "device", "requires_grad"):
        g, w = getattr(got, attr), getattr(want, attr)
        if g != w:
            return f"{path}.{attr}: {g} vs eager's {w}"
    if (got.grad_fn is None) != (want.grad_fn is None):
        return f"{path}.grad_fn: {type(got.grad_fn).__name__} vs eager's {type(want.grad_fn).__name__}"
    # With one element or none, strides address nothing differently: eager's own choice there is arbitrary.
    if got.layout == torch.strided and got.numel() > 1 and got.stride() != want.stride():
        return f"{path}.stride(): {got.stride()} vs eager's {want.stride()}"
    if got.is_conj() != want.is_conj():
        return f"{path}.is_conj(): {got.is_conj()} vs eager's {want.is_conj()}"
    if got.is_neg() != want.is_neg():
        return f"{path}.is_neg(): {got.is_neg()} vs eager's {want.is_neg()}"
    if got.is_quantized:
        found = _quantizer_difference(got, want, path)
        if found is not None:
            return found
    if got.device.type == "meta":
        return None  # no values to compare
    try:
        g, w = _element_bytes(got), _element_bytes(want)
    except (RuntimeError, NotImplementedError) as err:  # never call values the same without looking at them
        return f"{path}.values: cannot be compared bit for bit ({type(err).__name__}: {_first_line(err)})"
    if torch.equal(g, w):
        return None
    differs = (g != w).any(dim=1)
    n = int(differs.sum())
    first = int(differs.nonzero()[0, 0])
    where = list(_unravel(first, tuple(got.shape)))
    a, b = _element(got, first), _element(want, first)
    shown = f"{a!r} vs eager's {b!r}"
    if repr(a) == repr(b):  # NaN payloads: the numbers print alike, the bits do not
        shown += f" (bits {_hex(g[first])} vs {_hex(w[first])})"
    return f"{path}.values: {n} of {got.numel()} elements differ, first at {where}: {shown}"


def _nested_difference(got: torch.Tensor, want: torch.Tensor, path: str) -> str | None:
    """Nested tensors have no shape or strides: their components are compared instead."""
    for attr in ("is_nested", "dtype", "layout", "device", "requires_grad"):
        g, w = getattr(got, attr), getattr(want, attr)
        if g != w:
            return f"{path}.{attr}: {g} vs eager's {w}"
    return same_as_eager(list(got.detach().unbind()), list(want.detach().unbind()), f"{path}.unbind()")


def _quantizer_difference(got: torch.Tensor, want: torch.Tensor, path: str) -> str | None:
    """The same integers mean other numbers under another scale or zero point."""
    if got.qscheme() != want.qscheme():
        return f"{path}.qscheme(): {got.qscheme()} vs eager's {want.qscheme()}"
    if got.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        params = ("q_scale", "q_zero_point")
    else:
        params = ("q_per_channel_axis", "q_per_channel_scales", "q_per_channel_zero_points")
    for name in params:
        found = same_as_eager(getattr(got, name)(), getattr(want, name)(), f"{path}.{name}()")
        if found is not None:
            return found
    return None


def _dense(t: torch.Tensor) -> torch.Tensor:
    """A plain contiguous tensor whose bytes are `t`'s values."""
    t = t.detach()
    if t.is_quantized:
        return t.int_repr().contiguous()  # viewing a quantized tensor's bytes crashes torch 2.13's equal()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.resolve_conj().resolve_neg().contiguous()


def _element_bytes(t: torch.Tensor) -> torch.Tensor:
    """One row of bytes per element, in row-major order: what the values are, bit for bit."""
    t = _dense(t)
    flat = t.reshape(-1)
    if flat.stride(0) != 1:  # one element or none, with an odd stride: contiguous() keeps it
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat.view(torch.uint8).reshape(t.numel(), t.element_size())


def _element(t: torch.Tensor, flat_index: int) -> Any:
    return _dense(t).reshape(-1)[flat_index].item()


def _unravel(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        index, i = divmod(index, size)
        out.append(i)
    return tuple(reversed(out))


def _hex(row: torch.Tensor) -> str:
    raw = bytes(row.tolist())
    return "0x" + (raw[::-1] if sys.byteorder == "little" else raw).hex()  # most significant byte first


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
