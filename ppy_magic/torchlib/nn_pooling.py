"""``torch.nn.functional``'s pooling functions still restated in the region language.

The adaptive pools with indices and ``max_pool3d_with_indices``, each taken only where torch's own
source does not compile for a call (its ``because=`` says where). The rules are those of
``nn_functional.py``.
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
