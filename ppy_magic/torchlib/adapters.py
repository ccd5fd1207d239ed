"""Adapters: Python-level torch wrappers, reproduced in the region language.

Some public torch functions are Python code with logic of their own around an
ATen call (``F.softmax`` picks an overload by ``dtype``; ``Tensor.split`` picks
``split`` or ``split_with_sizes``; ``F.cross_entropy`` maps its reduction string
to an enum). Each adapter restates that logic, written in the same language
regions are written in, and the front end compiles it like any other callee,
specialised to the call site: branches on constant arguments vanish at compile
time. ``unsupported(...)`` marks a path the region will not take (the function
then stays Python, with that reason). Each adapter is checked against eager by
the differential tests.

This module is the front end's view of them: the registry
(``adapter_registry.py``) with every adapter module imported, so each has
registered. ``nn_functional.py``, ``nn_activations.py``, ``nn_pooling.py``,
``nn_resampling.py``, ``nn_losses.py`` and ``nn_attention.py`` restate
``torch.nn.functional``; ``torch_functional.py``
the wrappers of ``torch/functional.py`` and ``torch/_tensor.py``. Adapter
functions are registered with ``@adapts(target, ...)``; shared helpers they
call by name with ``@helper``.
"""

from __future__ import annotations

from . import nn_activations, nn_attention, nn_functional, nn_losses, nn_pooling, nn_resampling, torch_functional
from .adapter_registry import (
    CUDNN_ENABLED,
    DETERMINISTIC,
    FUNCTIONS,
    HELPERS,
    METHODS,
    MODULES,
    OPT_EINSUM,
    RESTATED,
    adapts,
    definitions,
    helper,
    lookup,
    namespace,
    unsupported,
)

# The modules whose import registered their adapters.
ADAPTER_MODULES = (nn_functional, nn_activations, nn_pooling, nn_resampling, nn_losses, nn_attention, torch_functional)

__all__ = [
    "ADAPTER_MODULES",
    "CUDNN_ENABLED",
    "DETERMINISTIC",
    "FUNCTIONS",
    "HELPERS",
    "METHODS",
    "MODULES",
    "OPT_EINSUM",
    "RESTATED",
    "adapts",
    "definitions",
    "helper",
    "lookup",
    "namespace",
    "unsupported",
]
