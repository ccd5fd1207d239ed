"""Level 3's rule, op by op: an allow-listed op's out= overload into a dead temporary equals the functional op.

For every entry of ``backend.reuse.allow_list()`` and every sample (dtypes, shapes
with size-1 and broadcast dims, 0-dim tensors and wrapped numbers, the op's scalar
parameters, NaN, infinities, signed zeros, subnormals, values past float16's range)
this checks, without any compiler: whenever the rule lets an operand be reused
(``may_reuse`` mirrors ``ppy::reusable``/``ppy::fits``/``ppy::result_dtype`` in
``ppy_region.h``), ``op.out(..., out=temp)`` gives the same bits, dtype, shape and
strides as ``op(...)``. The differential suites at level 3 check the C++ side end to end.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ppy_magic.backend import reuse

FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INT_VIEW = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}

# Temporary shapes: vector tails, size-1 dims, more than one vectorised chunk.
SHAPES = [(7,), (1,), (3, 5), (4, 1), (1, 33), (2, 1, 4), (2, 3, 4, 5), (3, 67), (1029,)]

# Values of the op's scalar parameters, by (op, argument); default otherwise.
SCALARS = {
    ("pow", "exponent"): [3.0, 2, 0.5, -1, 0, 1, 2.5, -2, -0.5, 3],
    ("add", "alpha"): [1, 2, 0.5],
    ("sub", "alpha"): [1, -1.5],
    ("rsub", "alpha"): [1, 2],
    ("clamp", "min"): [-0.5, None, 0],
    ("clamp", "max"): [0.5, 0.25, None],
    ("clamp_min", "min"): [0.0, -0.25],
    ("clamp_max", "max"): [0.0, 1.5],
    ("lerp", "weight"): [0.3, 0.75],
    ("addcmul", "value"): [1, 0.5],
    ("addcdiv", "value"): [1, -2.0],
    ("leaky_relu", "negative_slope"): [0.01, 0.2],
    ("softplus", "beta"): [1, 2.0],
    ("softplus", "threshold"): [20, 1.0],
    ("elu", "alpha"): [1.0, 0.5],
    ("hardtanh", "min_val"): [-1, -0.5],
    ("hardtanh", "max_val"): [1, 2.0],
}
STRINGS = {("gelu", "approximate"): ["none", "tanh"], ("div", "rounding_mode"): ["trunc", "floor"]}


def special(t: torch.Tensor) -> torch.Tensor:
    """`t` with NaN, infinities, signed zeros, a subnormal and out-of-range values in its first elements."""
    flat = t.reshape(-1)
    tiny = torch.finfo(t.dtype).tiny / 4
    values = [math.nan, math.inf, -math.inf, 0.0, -0.0, tiny, 1e5, -7e4, 1.0, -1.0]
    for i, v in enumerate(values[: flat.numel()]):
        flat[i] = v
    return t


def standard(t: torch.Tensor) -> bool:
    expected = 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride()), strict=True):
        if stride != expected:
            return False
        expected *= max(size, 1)
    return True


def reusable(t: torch.Tensor) -> bool:
    return t.dtype in FLOATING and not t.is_conj() and not t.is_neg() and t.numel() > 0 and standard(t)


def fits(t: torch.Tensor, o) -> bool:
    if not isinstance(o, torch.Tensor):
        return True
    if o.is_conj() or o.is_neg():
        return False
    if o.dim() == 0:
        return o.device == t.device or o.device.type == "cpu"
    if o.device != t.device or o.dim() > t.dim() or not standard(o):
        return False
    return all(s in (1, ts) for s, ts in zip(o.shape, t.shape[t.dim() - o.dim() :], strict=True))


def may_reuse(entry: reuse.Reuse, names: list[str], args: list, p: int, result: torch.Tensor) -> bool:
    """The rule of ppy_region.h for operand p (the dead temporary).

    The result's dtype is read off the functional call here; in C++ ``ppy::result_dtype``
    computes it with the function TensorIterator uses (``at::native::update_result_type_state``).
    """
    t = args[p]
    if not isinstance(t, torch.Tensor) or names[p] not in entry.candidates:
        return False
    if not reusable(t) or result.dtype != t.dtype:
        return False
    return all(fits(t, a) for n, a in zip(names, args, strict=True) if n in entry.tensors)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(INT_VIEW[t.dtype]) if t.dtype in INT_VIEW else t


def operand_variants(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> list:
    """Other operands for a temporary of `shape`: same shape, broadcast, 0-dim, wrapped numbers, other dtypes."""

    def randn(*s, dt=dtype):
        return special(torch.randn(s, generator=g, dtype=torch.float64).to(dt))

    out = [randn(*shape), randn(*shape[-1:]), randn(), 2.5, -3, True]
    if len(shape) >= 2:
        out += [randn(1, shape[-1]), randn(shape[-2], 1)]
    out += [randn(*shape, dt=torch.float32 if dtype != torch.float32 else torch.float64)]
    out += [torch.randint(-3, 4, shape, generator=g), torch.randn((), generator=g, dtype=torch.float64)]
    if shape[-1] > 1:  # laid out differently: the rule must refuse these
        out += [
            randn(*shape[:-1], shape[-1] * 2)[..., ::2],
            randn(*reversed(shape)).mT if len(shape) >= 2 else randn(1),
        ]
    return out


def samples(entry: reuse.Reuse, dtype: torch.dtype, shape: tuple[int, ...], g: torch.Generator):
    """(argument names, argument values) of calls of the functional overload."""
    schema = next(
        s for s in torch._C._jit_get_schemas_for_operator(f"aten::{entry.name}") if s.overload_name == entry.overload
    )
    names = [a.name for a in schema.arguments]
    kwonly = {a.name for a in schema.arguments if a.kwarg_only}
    choices = []
    for a in schema.arguments:
        typ = str(a.type)
        if a.name == "condition":
            choices.append([torch.rand(shape, generator=g) > 0.5, torch.rand(shape[-1:], generator=g) > 0.5])
        elif typ in ("Tensor", "Optional[Tensor]"):
            if a.name == names[0]:
                # A temporary the rule may reuse, and some it must refuse: a strided view, transposed, integer.
                wide = special(torch.randn((*shape[:-1], shape[-1] * 2), generator=g, dtype=torch.float64).to(dtype))
                firsts = [special(torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)), wide[..., ::2]]
                if len(shape) >= 2:
                    firsts.append(special(torch.randn(shape[::-1], generator=g, dtype=torch.float64).to(dtype)).mT)
                firsts.append(torch.randint(-3, 4, shape, generator=g))
                choices.append(firsts)
            else:
                choices.append(operand_variants(shape, dtype, g))
        elif (entry.name, a.name) in SCALARS:
            choices.append(SCALARS[(entry.name, a.name)])
        elif (entry.name, a.name) in STRINGS:
            choices.append(STRINGS[(entry.name, a.name)])
        elif a.has_default_value():
            choices.append([a.default_value])
        else:
            raise AssertionError(f"no sample values for {entry.name}.{entry.overload} argument {a.name}: {typ}")
    for combo in itertools.product(*choices):
        yield names, list(combo), kwonly


def invoke(op, names: list[str], args: list, kwonly: set[str], **extra):
    positional = [a for n, a in zip(names, args, strict=True) if n not in kwonly]
    keywords = {n: a for n, a in zip(names, args, strict=True) if n in kwonly}
    return op(*positional, **keywords, **extra)


def _overload(name: str, overload: str):
    return getattr(getattr(torch.ops.aten, name), overload or "default")


@pytest.mark.parametrize("entry", reuse.allow_list(), ids=lambda e: f"{e.name}.{e.overload or 'default'}")
def test_out_into_a_dead_temporary_is_the_functional_op(entry):
    functional, out_op = _overload(entry.name, entry.overload), _overload(entry.name, entry.out_overload)
    inplace_op = None if entry.inplace_overload is None else _overload(entry.name + "_", entry.inplace_overload)
    g = torch.Generator().manual_seed(0)
    reused = refused = 0
    for dtype, shape in itertools.product(FLOATING, SHAPES):
        for names, args, kwonly in samples(entry, dtype, shape, g):
            try:
                expected = invoke(functional, names, args, kwonly)
            except RuntimeError:
                continue  # eager rejects these arguments: the region runs the functional op and raises the same
            positions = [p for p in range(len(args)) if may_reuse(entry, names, args, p, expected)]
            refused += not positions
            for p in positions:
                forms = [("out=", out_op)] + ([("in place", inplace_op)] if inplace_op and p == 0 else [])
                for form, op in forms:
                    # The temporary: a fresh tensor holding operand p (a clone keeps standard strides).
                    temp = args[p].clone()
                    call = [temp if a is args[p] else a for a in args]  # t * t: both operands are the temporary
                    got = invoke(op, names, call, kwonly, **({"out": temp} if op is out_op else {}))
                    where = f"{entry.name}.{entry.overload} {form} {dtype} {shape} {names[p]}: {names} = {args!r:.300}"
                    assert got is temp, where
                    assert got.dtype == expected.dtype and got.shape == expected.shape, where
                    assert got.stride() == expected.stride(), where
                    assert torch.equal(bits(got), bits(expected)), where
                    reused += 1
    # Not vacuous: the rule allowed many samples and refused others.
    assert reused >= 30 and refused >= 10, (reused, refused)
