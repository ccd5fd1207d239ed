"""The four autograd modes the differential suites run in, and the arguments as each wants them.

- "recording": grad mode on, the floating inputs require grad (autograd records the call);
- "grad mode, nothing requires grad": grad mode on, the inputs detached;
- ``torch.no_grad()``; ``torch.inference_mode()``.
"""

from __future__ import annotations

import torch

MODES = ("recording", "grad mode, nothing requires grad", "no_grad", "inference_mode")


def mode_context(mode: str):
    return {
        "recording": torch.enable_grad,
        "grad mode, nothing requires grad": torch.enable_grad,
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
    }[mode]()


def for_mode(value, mode: str):
    """The arguments as `mode` wants them: nothing requiring grad in the second mode."""
    if mode != "grad mode, nothing requires grad":
        return value
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, list):
        return [for_mode(v, mode) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(for_mode(v, mode) for v in value)
    if isinstance(value, dict):
        return {k: for_mode(v, mode) for k, v in value.items()}
    return value
