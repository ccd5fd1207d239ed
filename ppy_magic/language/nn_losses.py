"""``torch.nn.functional``'s losses, restated in the region language.

Every loss with its ``reduction``, ``weight``, ``ignore_index``, ``label_smoothing``
as eager has them; the deprecated ``size_average=``/``reduce=`` arguments warn in
eager and stay Python here. The rules are those of ``nn_functional.py``.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

from .adapter_registry import adapts, helper, unsupported
from .nn_functional import (
    _legacy_reduction,
    _list_text,
    _reduction_enum,
    _reduction_or_legacy,
    _warn_if_sizes_differ,
)

_nn = torch._C._nn


# ---- losses ------------------------------------------------------------------------------------------------


@adapts(F.ctc_loss)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    return torch.ctc_loss(
        log_probs, targets, input_lengths, target_lengths, blank, _reduction_enum(reduction), zero_infinity
    )


@adapts(F.nll_loss)
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    return _nn.nll_loss_nd(input, target, weight, _reduction_or_legacy(size_average, reduce, reduction), ignore_index)


@helper
def _check_reduction_name(reduction, message):
    if reduction != "none" and reduction != "mean" and reduction != "sum":
        raise ValueError(reduction + message)


@adapts(F.poisson_nll_loss)
def poisson_nll_loss(
    input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"
):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction_name(reduction, " is not a valid value for reduction")
    return torch.poisson_nll_loss(input, target, log_input, full, eps, _reduction_enum(reduction))


@adapts(F.gaussian_nll_loss)
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


@adapts(F.kl_div)
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction_enum = _reduction_enum(_legacy_reduction(size_average, reduce))
    else:
        if reduction == "mean":
            warnings.warn(
                "reduction: 'mean' divides the total loss by both the batch size and the support size."
                "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                stacklevel=2,
            )
        reduction_enum = 2 if reduction == "batchmean" else _reduction_enum(reduction)
    reduced = torch.kl_div(input, target, reduction_enum, log_target=log_target)
    if reduction == "batchmean" and input.dim() != 0:
        reduced = reduced / input.size()[0]
    return reduced


@adapts(F.cross_entropy)
def cross_entropy(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
):
    return _nn.cross_entropy_loss(
        input, target, weight, _reduction_or_legacy(size_average, reduce, reduction), ignore_index, label_smoothing
    )


@adapts(F.binary_cross_entropy)
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


@adapts(F.binary_cross_entropy_with_logits)
def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    reduction_enum = _reduction_or_legacy(size_average, reduce, reduction)
    if not (target.size() == input.size()):
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    return torch.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction_enum)


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


@adapts(F.smooth_l1_loss)
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _warn_if_sizes_differ(target, input)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    expanded_input, expanded_target = torch.broadcast_tensors(input, target)
    if beta == 0.0:
        return _nn.l1_loss(expanded_input, expanded_target, _reduction_enum(reduction))
    return _nn.smooth_l1_loss(expanded_input, expanded_target, _reduction_enum(reduction), beta)


@helper
def _weighted_reduction(weighted, weight, reduction, by_weight):
    if reduction == "none":
        return weighted
    elif reduction == "sum":
        return torch.sum(weighted)
    elif reduction == "mean":
        if by_weight:
            return torch.sum(weighted) / torch.sum(weight)
        return weighted.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


@adapts(F.huber_loss)
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _warn_if_sizes_differ(target, input)
    expanded_input, expanded_target = torch.broadcast_tensors(input, target)
    if weight is None:
        return _nn.huber_loss(expanded_input, expanded_target, _reduction_enum(reduction), delta)
    if weight.size() != input.size():
        raise ValueError("Weights and input must have the same size.")
    unweighted_loss = _nn.huber_loss(expanded_input, expanded_target, 0, delta)
    return _weighted_reduction(unweighted_loss * weight, weight, reduction, False)


@adapts(F.l1_loss)
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_if_sizes_differ(target, input)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    expanded_input, expanded_target = torch.broadcast_tensors(input, target)
    if weight is not None:
        if weight.size() != input.size():
            raise ValueError("Weights and input must have the same size.")
        absolute_errors = torch.abs(expanded_input - expanded_target)
        return _weighted_reduction(absolute_errors * weight, weight, reduction, True)
    return _nn.l1_loss(expanded_input, expanded_target, _reduction_enum(reduction))


@adapts(F.mse_loss)
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_if_sizes_differ(target, input)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    expanded_input, expanded_target = torch.broadcast_tensors(input, target)
    if weight is not None:
        if weight.size() != input.size():
            raise ValueError("Weights and input must have the same size.")
        squared_errors = torch.pow(expanded_input - expanded_target, 2)
        return _weighted_reduction(squared_errors * weight, weight, reduction, True)
    return _nn.mse_loss(expanded_input, expanded_target, _reduction_enum(reduction))


@adapts(F.margin_ranking_loss)
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _reduction_or_legacy(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} "
        )
    return torch.margin_ranking_loss(input1, input2, target, margin, reduction_enum)


@adapts(F.hinge_embedding_loss)
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    return torch.hinge_embedding_loss(input, target, margin, _reduction_or_legacy(size_average, reduce, reduction))


@adapts(F.multilabel_margin_loss)
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _nn.multilabel_margin_loss(input, target, _reduction_or_legacy(size_average, reduce, reduction))


@adapts(F.soft_margin_loss)
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _nn.soft_margin_loss(input, target, _reduction_or_legacy(size_average, reduce, reduction))


@adapts(F.multilabel_soft_margin_loss)
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    loss = -(target * _nn.log_sigmoid(input) + (1 - target) * _nn.log_sigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    C = input.size(class_dim)
    loss = loss.sum(dim=class_dim) / C
    if reduction == "none":
        return loss
    elif reduction == "mean":
        return loss.mean()
    elif reduction == "sum":
        return loss.sum()
    raise ValueError(reduction + " is not valid")


@adapts(F.cosine_embedding_loss)
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _reduction_or_legacy(size_average, reduce, reduction)
    return torch.cosine_embedding_loss(input1, input2, target, margin, reduction_enum)


@adapts(F.multi_margin_loss)
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _reduction_or_legacy(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    return _nn.multi_margin_loss(input, target, p, margin, weight, reduction_enum)


@adapts(F.triplet_margin_loss)
def triplet_margin_loss(
    anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"
):
    reduction_enum = _reduction_or_legacy(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return torch.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction_enum)


@adapts(F.triplet_margin_with_distance_loss)
def triplet_margin_with_distance_loss(
    anchor, positive, negative, distance_function=None, margin=1.0, swap=False, reduction="mean"
):
    if reduction != "mean" and reduction != "sum" and reduction != "none":
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim = anchor.ndim
    p_dim = positive.ndim
    n_dim = negative.ndim
    if not (a_dim == p_dim and p_dim == n_dim):
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have "
            f"the same number of dimensions, but got: anchor {a_dim}D, "
            f"positive {p_dim}D, and negative {n_dim}D inputs"
        )
    if distance_function is None:
        distance_function = torch.pairwise_distance
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    if swap:
        dist_swap = distance_function(positive, negative)
        dist_neg = torch.minimum(dist_neg, dist_swap)
    loss = torch.clamp_min(margin + dist_pos - dist_neg, 0)
    if reduction == "sum":
        return torch.sum(loss)
    elif reduction == "mean":
        return torch.mean(loss)
    return loss


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


@adapts(F.linear_cross_entropy)
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
