"""``torch.nn.functional`` functions still restated in the region language, and the helpers they share.

Each adapter follows the installed torch's own ``torch/nn/functional.py`` line by line (the
``has_torch_function`` checks left out: a region's guard already sends tensor subclasses and
TorchFunctionModes to the Python body), so that the ATen calls, their order and the errors are
eager's; it is taken only where torch's own source does not compile for a call, and says why
(``because=``). The differential tests (OpInfo, the model suites) compare each with eager.
``nn_pooling.py`` holds the pooling ones, ``nn_resampling.py`` resampling and padding,
``nn_losses.py`` the losses. ``UNSUPPORTED``: public functions neither compiles.

Paths a region cannot take exactly say so with ``unsupported(...)``; the calling function then
stays Python with that reason.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from .adapter_registry import adapts, helper

_nn = torch._C._nn
_VF = torch._C._VariableFunctions

# Names of F the adapters below cannot restate, and why (shown by ppy_magic.functional_coverage()).
UNSUPPORTED = {
    "grouped_mm": "torch._grouped_mm is a CUDA kernel (and keyword-only arguments)",
    "scaled_mm": "takes ScalingType/SwizzleType enums and lists of them; a CUDA kernel",
    "scaled_grouped_mm": "takes ScalingType/SwizzleType enums and lists of them; a CUDA kernel",
    "assert_int_or_pair": "formats its message with str.format; a check, not a tensor function",
}
# Imported into F from elsewhere: not F's own functions.
NOT_FUNCTIONAL = ("handle_torch_function", "has_torch_function", "has_torch_function_unary")
NOT_FUNCTIONAL += ("has_torch_function_variadic", "boolean_dispatch")


# ---- shared helpers (torch.nn.modules.utils, torch.nn._reduction) -------------------------------------------


@helper
def _is_number(x):
    return isinstance(x, int) or isinstance(x, float)


@helper
def _list_with_default(out_size, defaults):
    # torch.nn.modules.utils._list_with_default
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    # [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])], as a sequence of ints:
    # a tuple written in the call (None in it) is unrolled, a sequence known at run time is looped over
    first = len(defaults) - len(out_size)
    out = defaults[:0]
    for i, v in enumerate(out_size):
        out = out + ((v if v is not None else defaults[first + i]),)
    return out


@helper
def _reduction_enum(reduction):
    # torch.nn._reduction.get_enum
    if reduction == "none":
        ret = 0
    elif reduction == "mean":
        ret = 1
    elif reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.", stacklevel=2)
        ret = 1
    elif reduction == "sum":
        ret = 2
    else:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return ret


@helper
def _legacy_reduction(size_average, reduce):
    # torch.nn._reduction.legacy_get_string
    if size_average is None:
        size_average = True
    if reduce is None:
        reduce = True
    if size_average and reduce:
        ret = "mean"
    elif reduce:
        ret = "sum"
    else:
        ret = "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.", stacklevel=2
    )
    return ret


@helper
def _reduction_or_legacy(size_average, reduce, reduction):
    # legacy_get_enum(size_average, reduce) when either is given, else get_enum(reduction)
    if size_average is not None or reduce is not None:
        return _reduction_enum(_legacy_reduction(size_average, reduce))
    return _reduction_enum(reduction)


@helper
def _list_text(seq):
    # str(list(seq)) of a run-time sequence of ints
    text = ""
    for i in range(len(seq)):
        text = f"{seq[i]}" if i == 0 else f"{text}, {seq[i]}"
    return f"[{text}]"


# ---- dropout -----------------------------------------------------------------------------------------------


# ---- embeddings --------------------------------------------------------------------------------------------


@adapts(F.embedding_bag, because="its source calls `Tensor.offsets()` (nested tensors), which a region does not take")
def embedding_bag(
    input,
    weight,
    offsets=None,
    max_norm=None,
    norm_type=2,
    scale_grad_by_freq=False,
    mode="mean",
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    if weight.dtype == torch.long and input.is_floating_point():
        warnings.warn(
            "Argument order of nn.functional.embedding_bag was changed. "
            "Usage `embedding_bag(weight, input, ...)` is deprecated, "
            "and should now be `embedding_bag(input, weight, ...)`.",
            stacklevel=2,
        )
        weight, input = input, weight
    if per_sample_weights is not None and input.size() != per_sample_weights.size():
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
            f"then it must have the same shape as the input ({input.shape})"
        )
    if not weight.dim() == 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    # (a region's tensors are strided: the nested-input path of eager is never taken)
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                "fixed length sequences. However, found offsets of type <class 'torch.Tensor'>"
            )
        offsets = torch.arange(0, input.numel(), input.size(1), dtype=input.dtype, device=input.device)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode == "sum":
        mode_enum = 0
    elif mode == "mean":
        mode_enum = 1
    elif mode == "max":
        mode_enum = 2
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    else:
        raise ValueError("mode has to be one of sum, mean or max")
    if max_norm is not None:
        torch.embedding_renorm_(weight.detach(), input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. "
            "per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}'). Please open a feature request on GitHub."
        )
    ret, _, _, _ = torch.embedding_bag(
        weight,
        input,
        offsets,
        scale_grad_by_freq,
        mode_enum,
        sparse,
        per_sample_weights,
        include_last_offset,
        padding_idx,
    )
    return ret


# ---- normalisation -----------------------------------------------------------------------------------------


@adapts(
    F.layer_norm, because="an input that is a Tensor or None (a union) reaches torch.layer_norm, which takes a Tensor"
)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return torch.layer_norm(input, normalized_shape, weight, bias, eps, torch.backends.cudnn.enabled)


# ---- distances, folding ------------------------------------------------------------------------------------
