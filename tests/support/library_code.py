"""Library code for tests/test_library.py: an importable module nobody decorated, written as libraries write it
(decorators that wrap, ``**kwargs`` passed through, a config object, an output dataclass, helpers at module
level, methods calling methods)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    dim: int = 16
    hidden: int = 32
    layers: int = 2
    eps: float = 1e-5
    dropout: float = 0.1


@dataclass
class Output:
    last_hidden_state: torch.Tensor
    aux: torch.Tensor | None = None


def renames_kwarg(old: str, new: str):
    """Like transformers' deprecate_kwarg: a wrapper with logic of its own."""

    def wrapper(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapped

    return wrapper


def documented(fn):
    """Like a docstring decorator: returns the function itself."""
    fn.__doc__ = (fn.__doc__ or "") + "\n(documented)"
    return fn


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def scale_by(x, factor=2.0):
    return x * factor


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.up = nn.Linear(config.dim, config.hidden)
        self.down = nn.Linear(config.hidden, config.dim)
        self.drop = nn.Dropout(config.dropout)

    @documented
    def forward(self, x, **kwargs):
        return self.drop(self.down(gelu_tanh(self.up(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.norm = RMSNorm(config.dim, config.eps)
        self.mlp = MLP(config)
        self.config = config

    def residual(self, x, h):
        return x + h

    @renames_kwarg("hidden", "x")
    def forward(self, x, mask=None, **kwargs):
        h = self.mlp(self.norm(x), **kwargs)
        if mask is not None:
            h = h * mask
        return self.residual(x, h)


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.layers)])
        self.out = nn.Linear(config.dim, config.dim)
        self.calls = {}  # a dict on the instance: the line using it runs as Python

    @torch.no_grad()
    def summary(self, x):
        return x.abs().max()

    def forward(self, x, mask=None, cache=None, **kwargs):
        if not isinstance(self.config, Config) or isinstance(cache, Config):  # decided when compiling
            raise TypeError("a Config, please")
        for block in self.blocks:
            x = block(x, mask=mask, **kwargs)
        self.calls["n"] = self.calls.get("n", 0) + 1
        h = scale_by(self.out(x))
        return Output(h, aux=torch.relu(h).sum(-1))


def keep_last(hidden, keep):
    """transformers' slice_logits_to_keep, as written there: an int becomes a slice object."""
    if isinstance(keep, int):
        keep = slice(-keep, None)
    return hidden[:, keep, :]


def split_heads(x, heads):
    """A shape built from a run-time shape: `(*x.shape[:-1], heads, -1)`."""
    shape = (*x.shape[:-1], heads, -1)
    return x.view(shape).transpose(1, 2) * len((*x.shape,))


class ShapeError(ValueError):
    """A library's own exception class, raised from code a region compiles."""


class Errors:
    class Nested(RuntimeError):
        pass


def checked_scale(x, factor):
    if x.dim() != 2:
        raise ShapeError(f"expected a 2-D input, got {x.dim()} dimensions")
    if factor < 0:
        raise Errors.Nested("a negative factor")
    return x * factor


def identity(t, *args, **kwargs):
    return t


def maybe(fn=None):
    """x-transformers' idiom: a function made per call, wrapped with functools.wraps."""
    if fn is None:
        fn = identity

    @functools.wraps(fn)
    def inner(x, *args, **kwargs):
        if x is None:
            return x
        return fn(x, *args, **kwargs)

    return inner


class MaybeNorm(nn.Module):
    def __init__(self, dim, norm):
        super().__init__()
        self.norm = nn.LayerNorm(dim) if norm else None
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(maybe(self.norm)(x)) + maybe()(x)
