"""Level 3's allow-list: the ATen ops that may write their result into a dead temporary.

At level 3 an op whose tensor operand is a temporary nothing uses afterwards can
run as its ``out=`` overload with that temporary as ``out``, saving the fresh
output tensor (its allocation and, on large tensors, the memory traffic of a new
buffer). That is exact only for element-wise ops (one TensorIterator loop) and
only when the ``out=`` call iterates exactly as the functional call would:

- the temporary has the functional call's result dtype (``promote`` below names
  the operands PyTorch's type promotion reads) and shape, is a real floating
  tensor with the strides ``empty()`` gives (standard contiguous, no size-0 dim),
  and nothing else refers to it or its storage (checked at run time: use counts);
- every other tensor operand is 0-dim or standard contiguous, broadcasts to the
  temporary's shape without changing it, and is on its device (or a CPU 0-dim).

Then the functional call's own output would also be standard contiguous (every
operand's strides agree with that order), so both calls visit the elements in the
same order with the same vectorised/scalar split and compute every element with
the same instructions. The ``out=`` form keeps eager's operand order (``x + t``
stays ``add(x, t)``, where ``t.add_(x)`` would compute ``t + x``); when the
temporary is ``self`` the in-place overload (``t.add_(x)`` for ``t + x``) does the
same with fewer checks.

Every entry is verified op by op against eager, bit for bit, by
``tests/test_reuse_rule.py`` (dtypes, broadcasting, 0-dim and wrapped operands,
NaN, infinities, signed zeros, subnormals); an op that is not listed runs as the
ordinary functional op at every level.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

# aten op -> its functional overloads that may reuse a temporary ("" is the default overload).
_ELEMENTWISE: dict[str, tuple[str, ...]] = {
    # arithmetic
    "add": ("Tensor",),
    "sub": ("Tensor",),
    "mul": ("Tensor",),
    "div": ("Tensor", "Tensor_mode"),
    "true_divide": ("Tensor",),
    "rsub": ("Tensor",),
    "pow": ("Tensor_Scalar", "Tensor_Tensor"),
    "neg": ("",),
    "abs": ("",),
    "reciprocal": ("",),
    "square": ("",),
    "maximum": ("",),
    "minimum": ("",),
    "clamp": ("", "Tensor"),
    "clamp_min": ("", "Tensor"),
    "clamp_max": ("", "Tensor"),
    "where": ("self",),
    "addcmul": ("",),
    "addcdiv": ("",),
    "lerp": ("Scalar", "Tensor"),
    # transcendental
    "exp": ("",),
    "exp2": ("",),
    "expm1": ("",),
    "log": ("",),
    "log2": ("",),
    "log1p": ("",),
    "sqrt": ("",),
    "rsqrt": ("",),
    "sin": ("",),
    "cos": ("",),
    "tanh": ("",),
    "sigmoid": ("",),
    "erf": ("",),
    # activations
    "relu": ("",),
    "silu": ("",),
    "gelu": ("",),
    "softplus": ("",),
    "leaky_relu": ("",),
    "elu": ("",),
    "hardtanh": ("",),
}

# Operands that do not take part in the result's dtype (where's condition is any bool tensor).
_NOT_PROMOTED = {("where", "self"): frozenset({"condition"})}


@dataclass(frozen=True)
class Reuse:
    """How one functional overload runs into a dead temporary."""

    name: str
    overload: str  # the functional overload
    out_overload: str  # its out= overload: the same arguments, then `out`
    tensors: tuple[str, ...]  # its Tensor operands: each must fit the temporary's shape and layout
    promote: tuple[str, ...]  # operands whose promoted dtype is the result's dtype

    @property
    def candidates(self) -> tuple[str, ...]:
        """The operands a dead temporary may be: tensors whose dtype takes part in the result's."""
        return tuple(t for t in self.tensors if t in self.promote)

    inplace_overload: str | None = None  # `<name>_.<overload>` when it takes the same arguments

    @property
    def out_struct(self) -> str:
        """The ``at::_ops`` struct of the out= overload."""
        return f"{self.name}_{self.out_overload}" if self.out_overload else self.name

    @property
    def inplace_struct(self) -> str | None:
        """The ``at::_ops`` struct of the in-place overload (used when the temporary is ``self``)."""
        if self.inplace_overload is None:
            return None
        return f"{self.name}__{self.inplace_overload}" if self.inplace_overload else f"{self.name}_"


def _schema(name: str, overload: str):
    for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}"):
        if s.overload_name == overload:
            return s
    return None


def _fresh_tensor_result(schema) -> bool:
    """One result, a plain ``Tensor``: no alias annotation, so a new tensor, never a view of an input."""
    return len(schema.returns) == 1 and str(schema.returns[0].type) == "Tensor" and schema.returns[0].alias_info is None


def _inplace_overload(name: str, schema) -> str | None:
    """The in-place overload ``<name>_`` with the same arguments, ``self`` written and returned."""
    want = [(a.name, str(a.type)) for a in schema.arguments]
    for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}_"):
        args = [(a.name, str(a.type)) for a in s.arguments]
        alias = s.arguments[0].alias_info if s.arguments else None
        if args == want and args[0][0] == "self" and alias is not None and alias.is_write:
            return s.overload_name
    return None


def _out_overload(name: str, schema) -> str | None:
    """The out= overload whose arguments are the functional overload's plus ``out``."""
    want = [(a.name, str(a.type)) for a in schema.arguments]
    for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}"):
        args = [(a.name, str(a.type)) for a in s.arguments]
        if args[:-1] == want and args[-1][0] == "out" and s.arguments[-1].alias_info is not None:
            return s.overload_name
    return None


@functools.cache
def reuse_for(name: str, overload: str) -> Reuse | None:
    """The allow-list entry of ``aten::name.overload``, or None when it never reuses a temporary."""
    if overload not in _ELEMENTWISE.get(name, ()):
        return None
    schema = _schema(name, overload)
    if schema is None or not _fresh_tensor_result(schema):
        return None
    out = _out_overload(name, schema)
    if out is None:
        return None
    skip = _NOT_PROMOTED.get((name, overload), frozenset())
    tensors = tuple(a.name for a in schema.arguments if str(a.type) in ("Tensor", "Optional[Tensor]"))
    # Every Scalar too (alpha, exponents, bounds): a real number never changes a floating
    # temporary's dtype, and a complex one only makes the check refuse the reuse.
    promote = tuple(
        a.name
        for a in schema.arguments
        if str(a.type) in ("Tensor", "Optional[Tensor]", "number", "Optional[number]") and a.name not in skip
    )
    return Reuse(name, overload, out, tensors, promote, _inplace_overload(name, schema))


def allow_list() -> tuple[Reuse, ...]:
    """Every entry that resolves against this torch (an op a torch version lacks is simply absent)."""
    found = (reuse_for(n, o) for n, overloads in _ELEMENTWISE.items() for o in overloads)
    return tuple(r for r in found if r is not None)
