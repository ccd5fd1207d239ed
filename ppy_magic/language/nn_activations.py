"""``torch.nn.functional``'s activations and softmaxes, restated in the region language.

As ``nn_functional.py`` (whose module docstring says how adapters follow torch's source), for
``F.relu`` to ``F.log_softmax``.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from .adapter_registry import adapts, helper

_nn = torch._C._nn
_VF = torch._C._VariableFunctions


@adapts(F.threshold)
def threshold(input, threshold, value, inplace=False):
    if inplace:
        return _VF.threshold_(input, threshold, value)
    return _VF.threshold(input, threshold, value)


@adapts(F.relu)
def relu(input, inplace=False):
    if inplace:
        return torch.relu_(input)
    return torch.relu(input)


@adapts(F.glu)
def glu(input, dim=-1):
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    return _nn.glu(input, dim)


@adapts(F.hardtanh)
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if inplace:
        return _nn.hardtanh_(input, min_val, max_val)
    return _nn.hardtanh(input, min_val, max_val)


@adapts(F.relu6)
def relu6(input, inplace=False):
    if inplace:
        return _nn.relu6_(input)
    return _nn.relu6(input)


@adapts(F.elu)
def elu(input, alpha=1.0, inplace=False):
    if inplace:
        return _nn.elu_(input, alpha)
    return _nn.elu(input, alpha)


@adapts(F.selu)
def selu(input, inplace=False):
    if inplace:
        return torch.selu_(input)
    return torch.selu(input)


@adapts(F.celu)
def celu(input, alpha=1.0, inplace=False):
    if inplace:
        return torch.celu_(input, alpha)
    return torch.celu(input, alpha)


@adapts(F.leaky_relu)
def leaky_relu(input, negative_slope=0.01, inplace=False):
    if inplace:
        return _nn.leaky_relu_(input, negative_slope)
    return _nn.leaky_relu(input, negative_slope)


@adapts(F.rrelu)
def rrelu(input, lower=0.125, upper=0.3333333333333333, training=False, inplace=False):
    if inplace:
        return torch.rrelu_(input, lower, upper, training)
    return torch.rrelu(input, lower, upper, training)


@adapts(F.tanhshrink)
def tanhshrink(input):
    return input - input.tanh()


@adapts(F.softsign)
def softsign(input):
    return input / (input.abs() + 1)


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


@adapts(F.softmin)
def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    if dtype is None:
        return (-input).softmax(dim)
    return (-input).softmax(dim, dtype=dtype)


@adapts(F.softmax)
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    if dtype is None:
        return input.softmax(dim)
    return input.softmax(dim, dtype=dtype)


@adapts(F.gumbel_softmax)
def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -torch.empty_like(logits, memory_format=torch.contiguous_format).exponential_().log()
    gumbels = (logits + gumbels) / tau
    y_soft = gumbels.softmax(dim)
    if hard:
        index = y_soft.max(dim, keepdim=True)[1]
        y_hard = torch.zeros_like(logits, memory_format=torch.contiguous_format).scatter_(dim, index, 1.0)
        return y_hard - y_soft.detach() + y_soft
    return y_soft


@adapts(F.log_softmax)
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    if dtype is None:
        return input.log_softmax(dim)
    return input.log_softmax(dim, dtype=dtype)


@adapts(F.tanh)
def tanh(input):
    return input.tanh()


@adapts(F.sigmoid)
def sigmoid(input):
    return input.sigmoid()


@adapts(F.hardsigmoid)
def hardsigmoid(input, inplace=False):
    if inplace:
        return _nn.hardsigmoid_(input)
    return _nn.hardsigmoid(input)


@adapts(F.silu)
def silu(input, inplace=False):
    if inplace:
        return _nn.silu_(input)
    return _nn.silu(input)


@adapts(F.mish)
def mish(input, inplace=False):
    if inplace:
        return _nn.mish_(input)
    return _nn.mish(input)


@adapts(F.hardswish)
def hardswish(input, inplace=False):
    if inplace:
        return _nn.hardswish_(input)
    return _nn.hardswish(input)
