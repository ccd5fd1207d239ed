"""Adapters: the few Python-level torch functions still restated in the region language.

torch's Python-level functions compile from the installed torch's own source (``torch_source``).
Where that source does not compile for a call, an adapter registered for the function restates it,
written in the same language regions are written in, and the front end compiles it like any other
callee, specialised to the call site. Each says why it exists (``@adapts(..., because=...)``, shown
by ``functional_coverage()``); ``unsupported(...)`` marks a path the region will not take (the
function then stays Python, with that reason). The Tensor methods of ``torch/_tensor.py`` and the
dtype shortcuts (``x.float()``) are restated here too (``methods=``). Each adapter is checked
against eager by the differential tests.

This module is the front end's view of them: the registry (``adapter_registry.py``) with every
adapter module imported, so each has registered. ``nn_functional.py``, ``nn_pooling.py``,
``nn_resampling.py`` and ``nn_losses.py`` restate functions of ``torch.nn.functional``;
``torch_functional.py`` those of ``torch/functional.py`` and ``torch/_tensor.py``. Helpers they call
by name are registered with ``@helper``.
"""

from __future__ import annotations

from . import nn_functional, nn_losses, nn_pooling, nn_resampling, torch_functional
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
ADAPTER_MODULES = (nn_functional, nn_pooling, nn_resampling, nn_losses, torch_functional)

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
