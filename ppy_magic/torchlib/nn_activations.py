"""``torch.nn.functional``'s activations and softmaxes, restated in the region language.

As ``nn_functional.py`` (whose module docstring says how adapters follow torch's source), for
``F.relu`` to ``F.log_softmax``.
"""

from __future__ import annotations

import warnings

import torch

from .adapter_registry import helper

_nn = torch._C._nn
_VF = torch._C._VariableFunctions


@helper
def _softmax_dim(name, ndim, stacklevel):
    # F._get_softmax_dim
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=2,
    )
    if ndim == 0 or ndim == 1 or ndim == 3:
        ret = 0
    else:
        ret = 1
    return ret
