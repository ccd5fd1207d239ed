"""``torch.nn.functional``'s pooling, resampling and padding, restated in the region language.

Pooling (max, average, Lp, adaptive, fractional, unpooling; 1-3d, with indices),
``interpolate``/``upsample*`` in every mode, ``grid_sample``, ``affine_grid`` and
``pad``. The rules are those of ``nn_functional.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .adapter_registry import DETERMINISTIC, adapts, helper, unsupported
from .nn_functional import _list_with_default, _pair, _single, _triple

_nn = torch._C._nn


# ---- pooling -----------------------------------------------------------------------------------------------


@adapts(F.fractional_max_pool2d_with_indices)
def fractional_max_pool2d_with_indices(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size or an output_ratio")
    if output_size is None:
        if len(output_ratio) > 2:
            raise ValueError("fractional_max_pool2d requires output_ratio to either be a single Int or tuple of Ints.")
        _output_ratio = _pair(output_ratio)
        output_size = [int(input.size(-2) * _output_ratio[0]), int(input.size(-1) * _output_ratio[1])]
    if _random_samples is None:
        n_batch = 1 if input.dim() == 3 else input.size(0)
        _random_samples = torch.rand(n_batch, input.size(-3), 2, dtype=input.dtype, device=input.device)
    return _nn.fractional_max_pool2d(input, kernel_size, output_size, _random_samples)


@adapts(F.fractional_max_pool2d)
def fractional_max_pool2d(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    out = F.fractional_max_pool2d_with_indices(
        input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )
    if return_indices:
        return out
    return out[0]


@adapts(F.fractional_max_pool3d_with_indices)
def fractional_max_pool3d_with_indices(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool3d requires specifying either an output_size or an output_ratio")
    if output_size is None:
        _output_ratio = _triple(output_ratio)
        output_size = [
            int(input.size(-3) * _output_ratio[0]),
            int(input.size(-2) * _output_ratio[1]),
            int(input.size(-1) * _output_ratio[2]),
        ]
    if _random_samples is None:
        n_batch = 1 if input.dim() == 4 else input.size(0)
        _random_samples = torch.rand(n_batch, input.size(-4), 3, dtype=input.dtype, device=input.device)
    return _nn.fractional_max_pool3d(input, kernel_size, output_size, _random_samples)


@adapts(F.fractional_max_pool3d)
def fractional_max_pool3d(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    out = F.fractional_max_pool3d_with_indices(
        input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )
    if return_indices:
        return out
    return out[0]


@helper
def _stride_or_empty(stride):
    if stride is None:
        return []
    return stride


@adapts(F.max_pool1d_with_indices)
def max_pool1d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    return torch.max_pool1d_with_indices(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool1d)
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return F.max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return torch.max_pool1d(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool2d_with_indices)
def max_pool2d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    return _nn.max_pool2d_with_indices(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool2d)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return F.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return torch.max_pool2d(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool3d_with_indices)
def max_pool3d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    if DETERMINISTIC:
        return unsupported(
            "F.max_pool3d with indices under torch.use_deterministic_algorithms(True) takes a Python decomposition "
            "on CUDA; keep the function Python, or compile with deterministic algorithms off"
        )
    return _nn.max_pool3d_with_indices(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool3d)
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return F.max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return torch.max_pool3d(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


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


@adapts(F.max_unpool1d)
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel_size = _single(kernel_size)
    _stride = _single(stride) if stride is not None else kernel_size
    padding = _single(padding)
    output_size = _unpool_output_size(input, kernel_size, _stride, padding, output_size)
    output_size = output_size + (1,)
    return _nn.max_unpool2d(input.unsqueeze(-1), indices.unsqueeze(-1), output_size).squeeze(-1)


@adapts(F.max_unpool2d)
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel_size = _pair(kernel_size)
    _stride = _pair(stride) if stride is not None else kernel_size
    padding = _pair(padding)
    output_size = _unpool_output_size(input, kernel_size, _stride, padding, output_size)
    return _nn.max_unpool2d(input, indices, output_size)


@adapts(F.max_unpool3d)
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel_size = _triple(kernel_size)
    _stride = _triple(stride) if stride is not None else kernel_size
    padding = _triple(padding)
    output_size = _unpool_output_size(input, kernel_size, _stride, padding, output_size)
    return _nn.max_unpool3d(input, indices, output_size, _stride, padding)


@helper
def _lp_root(out, kernel_elements, norm_type):
    return (torch.sign(out) * F.relu(torch.abs(out))).mul(kernel_elements).pow(1.0 / norm_type)


@adapts(F.lp_pool3d)
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kd, kw, kh = _triple(kernel_size)
    if norm_type == float("inf"):
        return F.max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -F.max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = F.avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = F.avg_pool3d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_root(out, kd * kw * kh, norm_type)


@adapts(F.lp_pool2d)
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kw, kh = _pair(kernel_size)
    if norm_type == float("inf"):
        return F.max_pool2d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -F.max_pool2d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = F.avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = F.avg_pool2d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_root(out, kw * kh, norm_type)


@adapts(F.lp_pool1d)
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    if norm_type == float("inf"):
        return F.max_pool1d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -F.max_pool1d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = F.avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = F.avg_pool1d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_root(out, kernel_size, norm_type)


@adapts(F.adaptive_max_pool1d_with_indices)
def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return torch.adaptive_max_pool1d(input, output_size)


@adapts(F.adaptive_max_pool1d)
def adaptive_max_pool1d(input, output_size, return_indices=False):
    if return_indices:
        return F.adaptive_max_pool1d_with_indices(input, output_size)
    return F.adaptive_max_pool1d_with_indices(input, output_size)[0]


@adapts(F.adaptive_max_pool2d_with_indices)
def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_max_pool2d(input, output_size)


@adapts(F.adaptive_max_pool2d)
def adaptive_max_pool2d(input, output_size, return_indices=False):
    if return_indices:
        return F.adaptive_max_pool2d_with_indices(input, output_size)
    return F.adaptive_max_pool2d_with_indices(input, output_size)[0]


@adapts(F.adaptive_max_pool3d_with_indices)
def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_max_pool3d(input, output_size)


@adapts(F.adaptive_max_pool3d)
def adaptive_max_pool3d(input, output_size, return_indices=False):
    if return_indices:
        return F.adaptive_max_pool3d_with_indices(input, output_size)
    return F.adaptive_max_pool3d_with_indices(input, output_size)[0]


@adapts(F.adaptive_avg_pool2d)
def adaptive_avg_pool2d(input, output_size):
    _output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_avg_pool2d(input, _output_size)


@adapts(F.adaptive_avg_pool3d)
def adaptive_avg_pool3d(input, output_size):
    _output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_avg_pool3d(input, _output_size)
