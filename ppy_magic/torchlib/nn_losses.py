"""``torch.nn.functional``'s losses still restated in the region language.

Each taken only where torch's own source does not compile for a call (its ``because=`` says where),
with its ``reduction``, ``weight`` and ``ignore_index`` as eager has them. The rules are those of
``nn_functional.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .adapter_registry import adapts, helper, unsupported
from .nn_functional import (
    _list_text,
    _reduction_enum,
    _reduction_or_legacy,
)

_nn = torch._C._nn


# ---- losses ------------------------------------------------------------------------------------------------


@adapts(F.ctc_loss, because="its source asks has_torch_function_variadic() of int lengths")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    return torch.ctc_loss(
        log_probs, targets, input_lengths, target_lengths, blank, _reduction_enum(reduction), zero_infinity
    )


@helper
def _check_reduction_name(reduction, message):
    if reduction != "none" and reduction != "mean" and reduction != "sum":
        raise ValueError(reduction + message)


@adapts(F.gaussian_nll_loss, because="its source calls zip(..., strict=True): zip() with keywords")
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * torch.ones_like(input)
    elif torch.any(var < 0):
        raise ValueError("var has negative entry/entries")
    if var.size() != input.size():
        if input.size()[:-1] == var.size():
            var = torch.unsqueeze(var, -1)
        elif input.ndim == var.ndim and _mismatched_size_sum(input, var) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    _check_reduction_name(reduction, " is not valid")
    var = var.clone()
    # `with torch.no_grad(): var.clamp_(min=eps)`: the same in-place update, unrecorded
    var.detach().clamp_(min=eps)
    loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
    if full:
        loss += 0.5 * math.log(2 * math.pi)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


@helper
def _mismatched_size_sum(input, var):
    # sum(y for x, y in zip(input.size(), var.size(), strict=True) if x != y), dims equal in number
    total = 0
    for i in range(input.dim()):
        if input.size(i) != var.size(i):
            total = total + var.size(i)
    return total


@adapts(F.binary_cross_entropy, because="its source asks `torch.jit.is_tracing()`")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _reduction_or_legacy(size_average, reduce, reduction)
    if target.size() != input.size():
        raise ValueError(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}) is "
            "deprecated. Please ensure they have the same size."
        )
    if weight is not None:
        new_size = _broadcast_shapes(target.size(), weight.size())
        weight = weight.expand(new_size)
    return _nn.binary_cross_entropy(input, target, weight, reduction_enum)


@helper
def _broadcast_shapes(a, b):
    # torch.broadcast_shapes(a, b) of two sizes, as torch._refs._broadcast_shapes computes it
    n = max(len(a), len(b))
    for idx in range(-1, -1 - len(a), -1):
        if a[idx] != 1 and a[idx] < 0:
            raise ValueError("Attempting to broadcast a dimension with negative length!")
    padded = _ones_like_sizes(a, n - len(a)) + a
    out = a[:0]  # an empty run-time sequence of ints
    for idx in range(-1, -1 - n, -1):
        c = padded[idx]
        if -idx <= len(b):
            v = b[idx]
            if v != c:
                if c == 1:
                    if v < 0:
                        raise ValueError("Attempting to broadcast a dimension with negative length!")
                    c = v
                elif v != 1:
                    raise RuntimeError(
                        f"Attempting to broadcast a dimension of length {v} at {idx}! "
                        f"Mismatching argument at index 1 had {b}; but expected shape "
                        f"should be broadcastable to {_list_text(padded[: n + idx + 1] + out)}"
                    )
        out = (c,) + out
    return out


@helper
def _ones_like_sizes(sizes, n):
    # [1] * n as a run-time sequence of ints
    out = sizes[:0]
    for _i in range(n):
        out = out + (1,)
    return out


@helper
def _tuple_text(seq):
    # str(tuple(seq)) of a run-time sequence of ints
    text = ""
    for i in range(len(seq)):
        text = f"{seq[i]}" if i == 0 else f"{text}, {seq[i]}"
    if len(seq) == 1:
        text = f"{text},"
    return f"({text})"


@helper
def _prod(seq, start):
    out = start
    for i in range(len(seq)):
        out = out * seq[i]
    return out


@adapts(F.linear_cross_entropy, because="its source formats a run-time sequence of ints into a message")
def linear_cross_entropy(
    input,
    linear_weight,
    target,
    linear_bias=None,
    weight=None,
    reduction="mean",
    ignore_index=None,
    label_smoothing=0.0,
    options=None,
):
    if options is not None:
        return unsupported(
            "F.linear_cross_entropy with options= takes the chunked path (custom ops); "
            "call it without options=, or keep the function Python"
        )
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    num_batches = input.shape[:-1]
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            "expected equal input and linear_weight last dimensions (in_features), "
            f"got {input.shape[-1]} and {linear_weight.shape[-1]}, respectively"
        )
    num_classes = linear_weight.shape[0]
    out_features = linear_weight.shape[1:-1]
    if linear_bias is not None and linear_bias.shape != (num_classes,) + out_features:
        raise RuntimeError(
            "expected linear_bias shape "
            f"{_tuple_text((num_classes,) + out_features)}, got {_tuple_text(linear_bias.shape)}"
        )
    if len(out_features) > 0 and len(num_batches) == 0:
        raise RuntimeError(
            f"K-dimensional loss defined by linear_weight shape {_tuple_text(linear_weight.shape)} requires"
            f" batched input, (N, {in_features}), got unbatched"
            f" input with shape {_tuple_text(input.shape)}"
        )
    logits_shape = num_batches + (num_classes,) + out_features
    target_contains_probabilities = target.shape == logits_shape
    if target_contains_probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    if ignore_index is None:
        ignore_index = -100
    if len(out_features) > 0:
        rows = _prod(out_features, num_classes)  # math.prod(out_features, start=num_classes)
        linear_weight = linear_weight.reshape((rows, in_features))
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(rows)
    logits = _nn.linear(input, linear_weight, linear_bias)
    logits = logits.reshape(logits_shape)
    return F.cross_entropy(
        logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing
    )
