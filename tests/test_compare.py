"""The one "same as eager" comparator: each of its rules, so that dropping one fails a test here.

No C++ build: plain tensors and values on both sides.
"""

from __future__ import annotations

import collections
import math
import warnings

import pytest
import torch

from ppy_magic.bench.compare import same_as_eager
from tests.support.cells import assert_same


def _with_bits(t: torch.Tensor, bits: int) -> torch.Tensor:
    """`t` (float32, one element) with its bit pattern replaced."""
    return torch.tensor([bits], dtype=torch.int32).view(torch.float32).reshape(t.shape)


def _nan_with_payload(payload: int) -> torch.Tensor:
    return _with_bits(torch.zeros(()), 0x7FC00000 | payload)


X = torch.arange(6, dtype=torch.float32).reshape(2, 3)
POINT = collections.namedtuple("POINT", "x y")


# (got, want, what the first difference must say); want is eager's value.
DIFFERENT = {
    "tensor vs number": (1.0, torch.tensor(1.0), "result: float vs eager's Tensor"),
    "tensor subclass": (torch.nn.Parameter(X.clone()), X.clone(), "result: Parameter vs eager's Tensor"),
    "dtype": (X.double(), X, "result.dtype: torch.float64 vs eager's torch.float32"),
    "shape": (X.reshape(3, 2), X, "result.shape: torch.Size([3, 2]) vs eager's torch.Size([2, 3])"),
    "layout": (X.to_sparse(), X, "result.layout: torch.sparse_coo vs eager's torch.strided"),
    "device": (torch.empty(2, 3, device="meta"), X, "result.device: meta vs eager's cpu"),
    "requires_grad": (X.clone().requires_grad_(), X.clone(), "result.requires_grad: True vs eager's False"),
    "grad_fn presence": (
        X.clone().requires_grad_(),
        X.clone().requires_grad_() * 1,
        "result.grad_fn: NoneType vs eager's MulBackward0",
    ),
    "strides": (X.t().contiguous(), X.t(), "result.stride(): (2, 1) vs eager's (1, 3)"),
    "conj bit": (
        torch.ones(2, dtype=torch.complex64),
        torch.ones(2, dtype=torch.complex64).conj(),
        "result.is_conj(): False vs eager's True",
    ),
    "neg bit": (torch.zeros(2), torch.zeros(2)._neg_view(), "result.is_neg(): False vs eager's True"),
    "sign of zero": (torch.tensor([1.0, -0.0]), torch.tensor([1.0, 0.0]), "first at [1]: -0.0 vs eager's 0.0"),
    "NaN payload": (
        _nan_with_payload(1),
        _nan_with_payload(0),
        "1 of 1 elements differ, first at []: nan vs eager's nan (bits 0x7fc00001 vs 0x7fc00000)",
    ),
    "float value": (X + 1e-6 * (X == 4), X, "result.values: 1 of 6 elements differ, first at [1, 1]"),
    "float16": (torch.tensor([-0.0], dtype=torch.float16), torch.tensor([0.0], dtype=torch.float16), "-0.0 vs"),
    "bfloat16": (torch.ones(3, dtype=torch.bfloat16), torch.ones(3, dtype=torch.bfloat16) * 2, "1.0 vs eager's 2.0"),
    "complex, imaginary sign of zero": (
        torch.tensor([complex(1.0, -0.0)]),
        torch.tensor([complex(1.0, 0.0)]),
        "first at [0]: (1-0j) vs eager's (1+0j)",
    ),
    "integer": (torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]), "first at [2]: 3 vs eager's 4"),
    "bool": (torch.tensor([True, False]), torch.tensor([True, True]), "first at [1]: False vs eager's True"),
    "float vs -float": (-0.0, 0.0, "result: -0.0 vs eager's 0.0"),
    "int vs float": (1, 1.0, "result: int vs eager's float"),
    "bool vs int": (True, 1, "result: bool vs eager's int"),
    "int value": (2, 3, "result: 2 vs eager's 3"),
    "complex number, sign of zero": (complex(1.0, -0.0), complex(1.0, 0.0), "result: (1-0j) vs eager's (1+0j)"),
    "tuple vs list": ([X], (X,), "result: list vs eager's tuple"),
    "length": ((X, X), (X,), "result: 2 items vs eager's 1"),
    "named tuple type": (tuple(torch.max(X, 0)), torch.max(X, 0), "result: tuple vs eager's max"),
    "named tuple item": (
        torch.return_types.max((X[1], torch.tensor([0, 0, 0]))),
        torch.max(X, 0),
        "result[1].values: 3 of 3 elements differ",
    ),
    "collections namedtuple": (POINT(1, 2), POINT(1, 3), "result[1]: 2 vs eager's 3"),
    "torch.Size vs tuple": (torch.Size([2, 3]), (2, 3), "result: Size vs eager's tuple"),
    "torch.Size items": (torch.Size([2, 3]), torch.Size([2, 4]), "result[1]: 3 vs eager's 4"),
    "nested path": (
        (X, [1.0, X]),
        (X, [1.0, X.neg()]),
        "result[1][1].values: 6 of 6 elements differ, first at [0, 0]: 0.0 vs eager's -0.0",
    ),
    "dict keys": ({"a": 1}, {"b": 1}, "result: keys ['a'] vs eager's ['b']"),
    "dict values": ({"a": X}, {"a": X.double()}, "result['a'].dtype"),
    "other objects by ==": (torch.float32, torch.float64, "result: torch.float32 vs eager's torch.float64"),
    "None vs a tensor": (None, X, "result: NoneType vs eager's Tensor"),
}

SAME = {
    "equal floats": (X.clone(), X),
    "NaN with the same bits": (_nan_with_payload(3), _nan_with_payload(3)),
    "zero-element tensors": (torch.empty(0, 3), torch.empty(0, 3)),
    "zero-element tensors, other strides": (torch.empty(0, 3), torch.empty(3, 0).t()),
    "zero elements, stride 0 (a gradient of an empty input)": (torch.empty(0), torch.empty(0).as_strided((0,), (0,))),
    "one element, other strides": (torch.ones(1, 1), torch.ones(1, 1).expand(1, 1).as_strided((1, 1), (5, 7))),
    "a non-contiguous view": (X.t(), X.clone().t()),
    "sparse": (X.to_sparse(), X.to_sparse()),
    "meta tensors (no values to compare)": (torch.empty(2, device="meta"), torch.empty(2, device="meta")),
    "complex": (torch.tensor([1 + 2j]), torch.tensor([1 + 2j])),
    "bool": (torch.tensor([True]), torch.tensor([True])),
    "float16 and bfloat16": (
        (torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.bfloat16)),
        (torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.bfloat16)),
    ),
    "Python NaN": (math.nan, float("nan")),
    "Python numbers": ((1, 2.5, True, 1j), (1, 2.5, True, 1j)),
    "named tuples": (torch.max(X, 0), torch.max(X.clone(), 0)),
    "torch.Size": (torch.Size([2, 3]), torch.Size([2, 3])),
    "None": (None, None),
}


@pytest.mark.parametrize("name", list(DIFFERENT))
def test_each_rule_finds_its_difference(name):
    got, want, says = DIFFERENT[name]
    found = same_as_eager(got, want)
    assert found is not None and says in found, found


@pytest.mark.parametrize("name", list(SAME))
def test_what_is_the_same_is_not_called_different(name):
    got, want = SAME[name]
    assert same_as_eager(got, want) is None


def test_the_path_names_the_root_given():
    assert same_as_eager((1, 2), (1, 3), "output") == "output[1]: 2 vs eager's 3"


def test_quantized_tensors_by_their_integers_and_their_quantizer():
    def q(values, scale):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized tensors are deprecated, not gone
            return torch.quantize_per_tensor(values, scale, 0, torch.qint8)

    assert same_as_eager(q(X, 0.1), q(X, 0.1)) is None
    assert same_as_eager(q(X, 0.1), q(X, 0.2)) == "result.q_scale(): 0.1 vs eager's 0.2"
    assert same_as_eager(q(X + 1, 0.1), q(X, 0.1)).startswith("result.values: 6 of 6 elements differ")


def test_nested_tensors_by_their_components():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "prototype stage"
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
        other = torch.nested.nested_tensor([torch.ones(2), torch.zeros(3)])
    assert same_as_eager(nested, nested.clone()) is None
    assert same_as_eager(nested, other).startswith("result.unbind()[1].values: 3 of 3 elements differ")
    assert same_as_eager(nested, torch.ones(2)) == "result.is_nested: True vs eager's False"


def test_assert_same_is_the_comparator():
    assert_same((X, 1.0), (X.clone(), 1.0))
    with pytest.raises(AssertionError, match="-0.0 vs eager's 0.0"):
        assert_same(torch.tensor(-0.0), torch.tensor(0.0))
