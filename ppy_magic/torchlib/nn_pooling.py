"""``torch.nn.functional``'s pooling, resampling and padding, restated in the region language.

Pooling (max, average, Lp, adaptive, fractional, unpooling; 1-3d, with indices),
``interpolate``/``upsample*`` in every mode, ``grid_sample``, ``affine_grid`` and
``pad``. The rules are those of ``nn_functional.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .adapter_registry import DETERMINISTIC, adapts, helper, unsupported
from .nn_functional import _list_with_default

_nn = torch._C._nn


# ---- pooling -----------------------------------------------------------------------------------------------


@helper
def _stride_or_empty(stride):
    if stride is None:
        return []
    return stride


@adapts(
    F.max_pool3d_with_indices, because="its source imports a module on a CUDA-only branch (importlib.import_module)"
)
def max_pool3d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    if DETERMINISTIC:
        return unsupported(
            "F.max_pool3d with indices under torch.use_deterministic_algorithms(True) takes a Python decomposition "
            "on CUDA; keep the function Python, or compile with deterministic algorithms off"
        )
    return _nn.max_pool3d_with_indices(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@helper
def _unpool_default_size(input_size, kernel_size, stride, padding, d):
    n = len(kernel_size)
    return (input_size[-n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]


@helper
def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    input_size = input.size()
    n = len(kernel_size)
    if n == 1:
        default_size = (_unpool_default_size(input_size, kernel_size, stride, padding, 0),)
    elif n == 2:
        default_size = (
            _unpool_default_size(input_size, kernel_size, stride, padding, 0),
            _unpool_default_size(input_size, kernel_size, stride, padding, 1),
        )
    else:
        default_size = (
            _unpool_default_size(input_size, kernel_size, stride, padding, 0),
            _unpool_default_size(input_size, kernel_size, stride, padding, 1),
            _unpool_default_size(input_size, kernel_size, stride, padding, 2),
        )
    if output_size is None:
        ret = default_size
    else:
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(
                "output_size should be a sequence containing "
                f"{n} or {n + 2} elements, but it has a length of '{len(output_size)}'"
            )
        for d in range(n):
            min_size = default_size[d] - stride[d]
            max_size = default_size[d] + stride[d]
            if not (min_size < output_size[d] < max_size):
                raise ValueError(
                    f'invalid output_size "{output_size}" (dim {d} must be between {min_size} and {max_size})'
                )
        ret = output_size
    for d in range(n):
        if ret[d] < 0:
            raise ValueError(
                "max_unpooling: output_size must contain non-negative spatial "
                f"dimensions, but got output_size[{d}]={ret[d]}"
            )
    return ret


@helper
def _lp_root(out, kernel_elements, norm_type):
    return (torch.sign(out) * F.relu(torch.abs(out))).mul(kernel_elements).pow(1.0 / norm_type)


@adapts(F.adaptive_max_pool2d_with_indices, because="_list_with_default zips a static tuple with a run-time size")
def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_max_pool2d(input, output_size)


@adapts(F.adaptive_max_pool3d_with_indices, because="_list_with_default zips a static tuple with a run-time size")
def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_max_pool3d(input, output_size)


@adapts(F.adaptive_avg_pool2d, because="_list_with_default zips a static tuple with a run-time size")
def adaptive_avg_pool2d(input, output_size):
    _output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_avg_pool2d(input, _output_size)


@adapts(F.adaptive_avg_pool3d, because="_list_with_default zips a static tuple with a run-time size")
def adaptive_avg_pool3d(input, output_size):
    _output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_avg_pool3d(input, _output_size)
