"""Seeded input tensors for probes and model-code calls.

Each ``Inputs`` is one stream of seeds 0, 1, 2, ...: every tensor it makes comes
from a generator seeded with the next one, so a module's inputs are the same in
every run whatever else ran before it.
"""

from __future__ import annotations

import torch


class Inputs:
    def __init__(self) -> None:
        self._seeds = iter(range(10**6))

    def generator(self) -> torch.Generator:
        return torch.Generator().manual_seed(next(self._seeds))

    def t(self, *shape, grad=True, dtype=torch.float32, scale=1.0, positive=False) -> torch.Tensor:
        x = torch.randn(*shape, generator=self.generator(), dtype=dtype) * scale
        if positive:
            x = x.abs() + 0.1
        return x.requires_grad_(grad)

    def ints(self, high, *shape) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=self.generator())

    def uniform(self, *shape, grad=True) -> torch.Tensor:
        return (torch.rand(*shape, generator=self.generator()) * 0.9 + 0.05).requires_grad_(grad)
