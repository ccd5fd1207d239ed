"""``torch.nn.functional``, restated in the region language.

Each adapter follows the installed torch's own ``torch/nn/functional.py`` line
by line (the ``has_torch_function`` checks left out: a region's guard already
sends tensor subclasses and TorchFunctionModes to the Python body), so that
the ``at::`` calls, their order and the errors are eager's; the differential
tests (OpInfo, the model suites) compare each with eager, so a change in a new
torch version shows up there. Functions of ``F`` that are PyTorch's generated
bindings (``F.conv2d`` is ``torch.conv2d``) need no adapter: the op table maps
them. ``coverage.py`` lists every public name and how it is compiled.

Paths a region cannot take exactly say so with ``unsupported(...)``; the
calling function then stays Python with that reason.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

from .adapters import CUDNN_ENABLED, DETERMINISTIC, adapts, helper, unsupported

_nn = torch._C._nn
_VF = torch._C._VariableFunctions

# Names of F the adapters below cannot restate, and why (shown by ppy_magic.functional_coverage()).
UNSUPPORTED = {
    "multi_head_attention_forward": "compares tensors by identity (`query is key`) and merges masks with "
    "warnings; call scaled_dot_product_attention, or keep the function Python",
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
def _single(x):
    # _ntuple(1): an iterable becomes a tuple, anything else is repeated
    if isinstance(x, tuple) or isinstance(x, list) or not _is_number(x):
        return x
    return (x,)


@helper
def _pair(x):
    if isinstance(x, tuple) or isinstance(x, list) or not _is_number(x):
        return x
    return (x, x)


@helper
def _triple(x):
    if isinstance(x, tuple) or isinstance(x, list) or not _is_number(x):
        return x
    return (x, x, x)


@helper
def _is_number(x):
    return isinstance(x, int) or isinstance(x, float)


@helper
def _or_default(v, d):
    if v is None:
        return d
    return v


@helper
def _list_with_default(out_size, defaults):
    # torch.nn.modules.utils._list_with_default
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    if not isinstance(out_size, tuple):
        return out_size  # a sequence known at run time holds no None
    n = len(out_size)
    if n == 1:
        return (_or_default(out_size[0], defaults[-1]),)
    if n == 2:
        return (_or_default(out_size[0], defaults[-2]), _or_default(out_size[1], defaults[-1]))
    if n == 3:
        return (
            _or_default(out_size[0], defaults[-3]),
            _or_default(out_size[1], defaults[-2]),
            _or_default(out_size[2], defaults[-1]),
        )
    return out_size


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
    # torch.nn._reduction.legacy_get_string, which always warns
    return unsupported("the deprecated size_average= and reduce= arguments warn in eager; pass reduction=")


@helper
def _reduction_or_legacy(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    return _reduction_enum(reduction)


@helper
def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


@helper
def _verify_batch_size(size):
    size_prods = size[0]
    for i in range(len(size) - 2):
        size_prods = size_prods * size[i + 2]
    if size_prods == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


@helper
def _verify_spatial_size(size):
    size_prods = 1
    for i in range(2, len(size)):
        size_prods = size_prods * size[i]
    if size_prods == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {size}")


@helper
def _warn_if_sizes_differ(target, input):
    if target.size() != input.size():
        warnings.warn(
            f"Using a target size ({target.size()}) that is different to the input size ({input.size()}). "
            "This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.",
            stacklevel=2,
        )


# ---- pooling -----------------------------------------------------------------------------------------------


@adapts(F.fractional_max_pool2d_with_indices)
def fractional_max_pool2d_with_indices(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size or an output_ratio")
    if output_size is None:
        if len(output_ratio) > 2:
            raise ValueError("fractional_max_pool2d requires output_ratio to either be a single Int or tuple of Ints.")
        _output_ratio = _pair(output_ratio)
        output_size = [int(input.size(-2) * _output_ratio[0]), int(input.size(-1) * _output_ratio[1])]
    if _random_samples is None:
        n_batch = 1 if input.dim() == 3 else input.size(0)
        _random_samples = torch.rand(n_batch, input.size(-3), 2, dtype=input.dtype, device=input.device)
    return _nn.fractional_max_pool2d(input, kernel_size, output_size, _random_samples)


@adapts(F.fractional_max_pool2d)
def fractional_max_pool2d(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    out = F.fractional_max_pool2d_with_indices(
        input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )
    if return_indices:
        return out
    return out[0]


@adapts(F.fractional_max_pool3d_with_indices)
def fractional_max_pool3d_with_indices(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool3d requires specifying either an output_size or an output_ratio")
    if output_size is None:
        _output_ratio = _triple(output_ratio)
        output_size = [
            int(input.size(-3) * _output_ratio[0]),
            int(input.size(-2) * _output_ratio[1]),
            int(input.size(-1) * _output_ratio[2]),
        ]
    if _random_samples is None:
        n_batch = 1 if input.dim() == 4 else input.size(0)
        _random_samples = torch.rand(n_batch, input.size(-4), 3, dtype=input.dtype, device=input.device)
    return _nn.fractional_max_pool3d(input, kernel_size, output_size, _random_samples)


@adapts(F.fractional_max_pool3d)
def fractional_max_pool3d(
    input, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None
):
    out = F.fractional_max_pool3d_with_indices(
        input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )
    if return_indices:
        return out
    return out[0]


@helper
def _stride_or_empty(stride):
    if stride is None:
        return []
    return stride


@adapts(F.max_pool1d_with_indices)
def max_pool1d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    return torch.max_pool1d_with_indices(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool1d)
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return F.max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return torch.max_pool1d(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool2d_with_indices)
def max_pool2d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    return _nn.max_pool2d_with_indices(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool2d)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return F.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return torch.max_pool2d(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool3d_with_indices)
def max_pool3d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    if DETERMINISTIC:
        return unsupported(
            "F.max_pool3d with indices under deterministic algorithms takes a Python decomposition on CUDA"
        )
    return _nn.max_pool3d_with_indices(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@adapts(F.max_pool3d)
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return F.max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return torch.max_pool3d(input, kernel_size, _stride_or_empty(stride), padding, dilation, ceil_mode)


@helper
def _seq_text(seq):
    # str(seq) of a sequence of ints: a tuple known when compiled, or sizes (a torch.Size) at run time
    if not isinstance(seq, tuple):
        return f"{seq}"
    n = len(seq)
    if n == 0:
        return "()"
    if n == 1:
        return f"({seq[0]},)"
    if n == 2:
        return f"({seq[0]}, {seq[1]})"
    if n == 3:
        return f"({seq[0]}, {seq[1]}, {seq[2]})"
    if n == 4:
        return f"({seq[0]}, {seq[1]}, {seq[2]}, {seq[3]})"
    return unsupported("an error message that formats a tuple of more than four items")


@helper
def _unpool_default_size(input_size, kernel_size, stride, padding, d):
    n = len(kernel_size)
    return (input_size[-n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]


@helper
def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    input_size = input.size()
    n = len(kernel_size)
    if n == 1:
        default_size = (_unpool_default_size(input_size, kernel_size, stride, padding, 0),)
    elif n == 2:
        default_size = (
            _unpool_default_size(input_size, kernel_size, stride, padding, 0),
            _unpool_default_size(input_size, kernel_size, stride, padding, 1),
        )
    else:
        default_size = (
            _unpool_default_size(input_size, kernel_size, stride, padding, 0),
            _unpool_default_size(input_size, kernel_size, stride, padding, 1),
            _unpool_default_size(input_size, kernel_size, stride, padding, 2),
        )
    if output_size is None:
        ret = default_size
    else:
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(
                "output_size should be a sequence containing "
                f"{n} or {n + 2} elements, but it has a length of '{len(output_size)}'"
            )
        for d in range(n):
            min_size = default_size[d] - stride[d]
            max_size = default_size[d] + stride[d]
            if not (min_size < output_size[d] < max_size):
                raise ValueError(
                    f'invalid output_size "{_seq_text(output_size)}" (dim {d} must be between {min_size} '
                    f"and {max_size})"
                )
        ret = output_size
    for d in range(n):
        if ret[d] < 0:
            raise ValueError(
                "max_unpooling: output_size must contain non-negative spatial "
                f"dimensions, but got output_size[{d}]={ret[d]}"
            )
    return ret


@adapts(F.max_unpool1d)
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel_size = _single(kernel_size)
    _stride = _single(stride) if stride is not None else kernel_size
    padding = _single(padding)
    output_size = _unpool_output_size(input, kernel_size, _stride, padding, output_size)
    output_size = output_size + (1,)
    return _nn.max_unpool2d(input.unsqueeze(-1), indices.unsqueeze(-1), output_size).squeeze(-1)


@adapts(F.max_unpool2d)
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel_size = _pair(kernel_size)
    _stride = _pair(stride) if stride is not None else kernel_size
    padding = _pair(padding)
    output_size = _unpool_output_size(input, kernel_size, _stride, padding, output_size)
    return _nn.max_unpool2d(input, indices, output_size)


@adapts(F.max_unpool3d)
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel_size = _triple(kernel_size)
    _stride = _triple(stride) if stride is not None else kernel_size
    padding = _triple(padding)
    output_size = _unpool_output_size(input, kernel_size, _stride, padding, output_size)
    return _nn.max_unpool3d(input, indices, output_size, _stride, padding)


@helper
def _lp_root(out, kernel_elements, norm_type):
    return (torch.sign(out) * F.relu(torch.abs(out))).mul(kernel_elements).pow(1.0 / norm_type)


@adapts(F.lp_pool3d)
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kd, kw, kh = _triple(kernel_size)
    if norm_type == float("inf"):
        return F.max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -F.max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = F.avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = F.avg_pool3d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_root(out, kd * kw * kh, norm_type)


@adapts(F.lp_pool2d)
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kw, kh = _pair(kernel_size)
    if norm_type == float("inf"):
        return F.max_pool2d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -F.max_pool2d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = F.avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = F.avg_pool2d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_root(out, kw * kh, norm_type)


@adapts(F.lp_pool1d)
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    if norm_type == float("inf"):
        return F.max_pool1d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -F.max_pool1d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = F.avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = F.avg_pool1d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_root(out, kernel_size, norm_type)


@adapts(F.adaptive_max_pool1d_with_indices)
def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return torch.adaptive_max_pool1d(input, output_size)


@adapts(F.adaptive_max_pool1d)
def adaptive_max_pool1d(input, output_size, return_indices=False):
    if return_indices:
        return F.adaptive_max_pool1d_with_indices(input, output_size)
    return F.adaptive_max_pool1d_with_indices(input, output_size)[0]


@adapts(F.adaptive_max_pool2d_with_indices)
def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_max_pool2d(input, output_size)


@adapts(F.adaptive_max_pool2d)
def adaptive_max_pool2d(input, output_size, return_indices=False):
    if return_indices:
        return F.adaptive_max_pool2d_with_indices(input, output_size)
    return F.adaptive_max_pool2d_with_indices(input, output_size)[0]


@adapts(F.adaptive_max_pool3d_with_indices)
def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_max_pool3d(input, output_size)


@adapts(F.adaptive_max_pool3d)
def adaptive_max_pool3d(input, output_size, return_indices=False):
    if return_indices:
        return F.adaptive_max_pool3d_with_indices(input, output_size)
    return F.adaptive_max_pool3d_with_indices(input, output_size)[0]


@adapts(F.adaptive_avg_pool2d)
def adaptive_avg_pool2d(input, output_size):
    _output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_avg_pool2d(input, _output_size)


@adapts(F.adaptive_avg_pool3d)
def adaptive_avg_pool3d(input, output_size):
    _output_size = _list_with_default(output_size, input.size())
    return _nn.adaptive_avg_pool3d(input, _output_size)


# ---- dropout -----------------------------------------------------------------------------------------------


@adapts(F.dropout)
def dropout(input, p=0.5, training=True, inplace=False):
    _ = _check_p(p)
    if inplace:
        return _VF.dropout_(input, p, training)
    return _VF.dropout(input, p, training)


@adapts(F.alpha_dropout)
def alpha_dropout(input, p=0.5, training=False, inplace=False):
    _ = _check_p(p)
    if inplace:
        return _VF.alpha_dropout_(input, p, training)
    return _VF.alpha_dropout(input, p, training)


@helper
def _feature_dropout(input, p, training, inplace):
    if inplace:
        return _VF.feature_dropout_(input, p, training)
    return _VF.feature_dropout(input, p, training)


@adapts(F.dropout1d)
def dropout1d(input, p=0.5, training=True, inplace=False):
    _ = _check_p(p)
    inp_dim = input.dim()
    if inp_dim != 2 and inp_dim != 3:
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {inp_dim}D input. "
            "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
            "spatial dimension, a channel dimension, and an optional batch dimension "
            "(i.e. 2D or 3D inputs)."
        )
    is_batched = inp_dim == 3
    if not is_batched:
        input = input.unsqueeze_(0) if inplace else input.unsqueeze(0)
    result = _feature_dropout(input, p, training, inplace)
    if not is_batched:
        result = result.squeeze_(0) if inplace else result.squeeze(0)
    return result


@adapts(F.dropout2d)
def dropout2d(input, p=0.5, training=True, inplace=False):
    _ = _check_p(p)
    inp_dim = input.dim()
    if inp_dim != 3 and inp_dim != 4:
        warnings.warn(
            f"dropout2d: Received a {inp_dim}-D input to dropout2d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            "and silence this warning, please use dropout instead. Note that dropout2d "
            "exists to provide channel-wise dropout on inputs with 2 spatial dimensions, "
            "a channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
            stacklevel=2,
        )
    if inp_dim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
            "1D dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _feature_dropout(input, p, training, inplace)


@adapts(F.dropout3d)
def dropout3d(input, p=0.5, training=True, inplace=False):
    _ = _check_p(p)
    inp_dim = input.dim()
    if inp_dim != 4 and inp_dim != 5:
        warnings.warn(
            f"dropout3d: Received a {inp_dim}-D input to dropout3d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            "and silence this warning, please use dropout instead. Note that dropout3d "
            "exists to provide channel-wise dropout on inputs with 3 spatial dimensions, "
            "a channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
            stacklevel=2,
        )
    is_batched = inp_dim == 5
    if not is_batched:
        input = input.unsqueeze_(0) if inplace else input.unsqueeze(0)
    result = _feature_dropout(input, p, training, inplace)
    if not is_batched:
        result = result.squeeze_(0) if inplace else result.squeeze(0)
    return result


@adapts(F.feature_alpha_dropout)
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    _ = _check_p(p)
    if inplace:
        return _VF.feature_alpha_dropout_(input, p, training)
    return _VF.feature_alpha_dropout(input, p, training)


# ---- activations -------------------------------------------------------------------------------------------


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
    ret = 0 if ndim == 0 or ndim == 1 or ndim == 3 else 1
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


# ---- embeddings --------------------------------------------------------------------------------------------


@adapts(F.embedding)
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if padding_idx is not None:
        if padding_idx > 0:
            if padding_idx >= weight.size(0):
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -weight.size(0):
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = weight.size(0) + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        input = input.contiguous()
        # F._no_grad_embedding_renorm_: the renorm writes into weight.detach()
        torch.embedding_renorm_(weight.detach(), input, max_norm, norm_type)
    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


@adapts(F.embedding_bag)
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


@adapts(F.batch_norm)
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    if training:
        _ = _verify_batch_size(input.size())
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    elif eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    return torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, CUDNN_ENABLED)


@adapts(F.instance_norm)
def instance_norm(
    input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5
):
    if use_input_stats:
        _ = _verify_spatial_size(input.size())
    return torch.instance_norm(
        input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, CUDNN_ENABLED
    )


@adapts(F.layer_norm)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return torch.layer_norm(input, normalized_shape, weight, bias, eps, CUDNN_ENABLED)


@adapts(F.rms_norm)
def rms_norm(input, normalized_shape, weight=None, eps=None):
    return torch.rms_norm(input, normalized_shape, weight, eps)


@adapts(F.group_norm)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    _ = _verify_batch_size((input.size(0) * input.size(1) // num_groups, num_groups) + input.size()[2:])
    return torch.group_norm(input, num_groups, weight, bias, eps, CUDNN_ENABLED)


@adapts(F.local_response_norm)
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    div = input.mul(input)
    if dim == 3:
        div = div.unsqueeze(1)
        div = F.pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = F.avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = input.size()
        div = div.view(sizes[0], 1, sizes[1], sizes[2], -1)
        div = F.pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = F.avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1)
        div = div.view(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return input / div


@adapts(F.normalize)
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    if out is None:
        denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
        return input / denom
    denom = input.norm(p, dim, keepdim=True).clamp_min_(eps).expand_as(input)
    return torch.div(input, denom, out=out)


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
        _ = _legacy_reduction(size_average, reduce)
    _ = _check_reduction_name(reduction, " is not a valid value for reduction")
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
    _ = _check_reduction_name(reduction, " is not valid")
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
        reduction_enum = _legacy_reduction(size_average, reduce)
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
def _list_text(seq):
    # str(list(seq)) of a run-time sequence of ints
    text = ""
    for i in range(len(seq)):
        text = f"{seq[i]}" if i == 0 else f"{text}, {seq[i]}"
    return f"[{text}]"


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
    _ = _warn_if_sizes_differ(target, input)
    if size_average is not None or reduce is not None:
        _ = _legacy_reduction(size_average, reduce)
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
    _ = _warn_if_sizes_differ(target, input)
    expanded_input, expanded_target = torch.broadcast_tensors(input, target)
    if weight is None:
        return _nn.huber_loss(expanded_input, expanded_target, _reduction_enum(reduction), delta)
    if weight.size() != input.size():
        raise ValueError("Weights and input must have the same size.")
    unweighted_loss = _nn.huber_loss(expanded_input, expanded_target, 0, delta)
    return _weighted_reduction(unweighted_loss * weight, weight, reduction, False)


@adapts(F.l1_loss)
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _ = _warn_if_sizes_differ(target, input)
    if size_average is not None or reduce is not None:
        _ = _legacy_reduction(size_average, reduce)
    expanded_input, expanded_target = torch.broadcast_tensors(input, target)
    if weight is not None:
        if weight.size() != input.size():
            raise ValueError("Weights and input must have the same size.")
        absolute_errors = torch.abs(expanded_input - expanded_target)
        return _weighted_reduction(absolute_errors * weight, weight, reduction, True)
    return _nn.l1_loss(expanded_input, expanded_target, _reduction_enum(reduction))


@adapts(F.mse_loss)
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _ = _warn_if_sizes_differ(target, input)
    if size_average is not None or reduce is not None:
        _ = _legacy_reduction(size_average, reduce)
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
        _ = _legacy_reduction(size_average, reduce)
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
    if distance_function is not None:
        return unsupported("F.triplet_margin_with_distance_loss with a distance_function")
    dist_pos = torch.pairwise_distance(anchor, positive)
    dist_neg = torch.pairwise_distance(anchor, negative)
    if swap:
        dist_swap = torch.pairwise_distance(positive, negative)
        dist_neg = torch.minimum(dist_neg, dist_swap)
    loss = torch.clamp_min(margin + dist_pos - dist_neg, 0)
    if reduction == "sum":
        return torch.sum(loss)
    elif reduction == "mean":
        return torch.mean(loss)
    return loss


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
        return unsupported("F.linear_cross_entropy with options= (the chunked path)")
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
        return unsupported("F.linear_cross_entropy's shape error formats tuples")
    if len(out_features) > 0 and len(num_batches) == 0:
        return unsupported("F.linear_cross_entropy's shape error formats tuples")
    logits_shape = num_batches + (num_classes,) + out_features
    target_contains_probabilities = target.shape == logits_shape
    if target_contains_probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    if ignore_index is None:
        ignore_index = -100
    if len(out_features) > 0:
        return unsupported("F.linear_cross_entropy with a K-dimensional linear_weight")
    logits = _nn.linear(input, linear_weight, linear_bias)
    logits = logits.reshape(logits_shape)
    return F.cross_entropy(
        logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing
    )


# ---- resampling --------------------------------------------------------------------------------------------


@adapts(F.upsample)
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return F.interpolate(input, size, scale_factor, mode, align_corners)


@helper
def _spatial_text(input):
    # str(list(input.shape[2:])), for interpolate's messages
    text = ""
    for i in range(2, input.dim()):
        text = f"{input.size(i)}" if i == 2 else f"{text}, {input.size(i)}"
    return f"[{text}]"


@helper
def _recomputed_size(input, scale_factor, dim):
    # [_sym_int(input.size(i + 2) * scale_factors[i]) for i in range(dim)]; len(scale_factor) == dim was checked
    out = input.size()[:0]  # an empty run-time sequence of ints
    if _is_number(scale_factor):
        for i in range(dim):
            out = out + (int(input.size(i + 2) * scale_factor),)
        return out
    n = len(scale_factor)
    if n == 0:
        return out
    if n == 1:
        return out + (int(input.size(2) * scale_factor[0]),)
    if n == 2:
        return out + (int(input.size(2) * scale_factor[0]), int(input.size(3) * scale_factor[1]))
    if n == 3:
        return out + (
            int(input.size(2) * scale_factor[0]),
            int(input.size(3) * scale_factor[1]),
            int(input.size(4) * scale_factor[2]),
        )
    return unsupported("F.interpolate with more than three scale factors")


@helper
def _repeated_size(size, dim):
    # [size for _ in range(dim)]
    out = (size,)[: dim - dim]  # an empty run-time sequence of ints ([] is a tuple known when compiled)
    for _i in range(dim):
        out = out + (size,)
    return out


@adapts(F.interpolate)
def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    if mode == "nearest" or mode == "area" or mode == "nearest-exact":
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the "
                "interpolating modes: linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    elif size is not None:
        if _is_number(size):
            output_size = _repeated_size(size, dim)
        else:
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {_spatial_text(input)} and output size of {_seq_text(size)}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format."
                )
            output_size = size
    elif scale_factor is not None:
        if not _is_number(scale_factor) and len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {_spatial_text(input)} and "
                f"scale_factor of shape {_seq_text(scale_factor)}. "
                "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                "scale_factor in (s1, s2, ...,sK) format."
            )
        output_size = None
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor is not None and recompute_scale_factor:
        output_size = _recomputed_size(input, scale_factor, dim)
    elif output_size is None:
        return unsupported("F.interpolate with scale_factor= passes a list of floats, which a region cannot yet")
    if antialias and not ((mode == "bilinear" or mode == "bicubic" or mode == "lanczos") and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input"
        )
    if DETERMINISTIC and (mode == "bilinear" or mode == "trilinear"):
        return unsupported("F.interpolate under deterministic algorithms takes a Python decomposition off the CPU")
    if mode == "nearest":
        if input.dim() == 3:
            return _nn.upsample_nearest1d(input, output_size, scale_factors=None)
        if input.dim() == 4:
            return _nn.upsample_nearest2d(input, output_size, scale_factors=None)
        if input.dim() == 5:
            return _nn.upsample_nearest3d(input, output_size, scale_factors=None)
    if mode == "nearest-exact":
        if input.dim() == 3:
            return _nn._upsample_nearest_exact1d(input, output_size, scale_factors=None)
        if input.dim() == 4:
            return _nn._upsample_nearest_exact2d(input, output_size, scale_factors=None)
        if input.dim() == 5:
            return _nn._upsample_nearest_exact3d(input, output_size, scale_factors=None)
    if mode == "area":
        if input.dim() == 3:
            return F.adaptive_avg_pool1d(input, output_size)
        if input.dim() == 4:
            return F.adaptive_avg_pool2d(input, output_size)
        if input.dim() == 5:
            return F.adaptive_avg_pool3d(input, output_size)
    if mode == "linear" and input.dim() == 3:
        return _nn.upsample_linear1d(input, output_size, align_corners, scale_factors=None)
    if mode == "bilinear" and input.dim() == 4:
        if antialias:
            return _nn._upsample_bilinear2d_aa(input, output_size, align_corners, scale_factors=None)
        return _nn.upsample_bilinear2d(input, output_size, align_corners, scale_factors=None)
    if mode == "trilinear" and input.dim() == 5:
        return _nn.upsample_trilinear3d(input, output_size, align_corners, scale_factors=None)
    if mode == "bicubic" and input.dim() == 4:
        if antialias:
            return _nn._upsample_bicubic2d_aa(input, output_size, align_corners, scale_factors=None)
        return _nn.upsample_bicubic2d(input, output_size, align_corners, scale_factors=None)
    if mode == "lanczos" and input.dim() == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
        return _nn._upsample_lanczos2d_aa(input, output_size, align_corners, scale_factors=None)
    if input.dim() == 3 and mode == "bilinear":
        raise NotImplementedError("Got 3D input, but bilinear mode needs 4D input")
    if input.dim() == 3 and mode == "trilinear":
        raise NotImplementedError("Got 3D input, but trilinear mode needs 5D input")
    if input.dim() == 4 and mode == "linear":
        raise NotImplementedError("Got 4D input, but linear mode needs 3D input")
    if input.dim() == 4 and mode == "trilinear":
        raise NotImplementedError("Got 4D input, but trilinear mode needs 5D input")
    if input.dim() == 5 and mode == "linear":
        raise NotImplementedError("Got 5D input, but linear mode needs 3D input")
    if input.dim() == 5 and mode == "bilinear":
        raise NotImplementedError("Got 5D input, but bilinear mode needs 4D input")
    raise NotImplementedError(
        "Input Error: Only 3D, 4D and 5D input Tensors supported"
        f" (got {input.dim()}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area"
        f" | nearest-exact (got {mode})"
    )


@adapts(F.upsample_nearest)
def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return F.interpolate(input, size, scale_factor, mode="nearest")


@adapts(F.upsample_bilinear)
def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return F.interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


@helper
def _warn_align_corners_default():
    warnings.warn(
        "Default grid_sample and affine_grid behavior has changed "
        "to align_corners=False since 1.3.0. Please specify "
        "align_corners=True if the old behavior is desired. "
        "See the documentation of grid_sample for details.",
        stacklevel=2,
    )


@adapts(F.grid_sample)
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    if mode != "bilinear" and mode != "nearest" and mode != "bicubic":
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{mode}'"
        )
    if padding_mode != "zeros" and padding_mode != "border" and padding_mode != "reflection":
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode "
            "to be 'zeros', 'border', or 'reflection', "
            f"but got: '{padding_mode}'"
        )
    if mode == "bilinear":
        mode_enum = 0
    elif mode == "nearest":
        mode_enum = 1
    else:
        mode_enum = 2
    if padding_mode == "zeros":
        padding_mode_enum = 0
    elif padding_mode == "border":
        padding_mode_enum = 1
    else:
        padding_mode_enum = 2
    if align_corners is None:
        _ = _warn_align_corners_default()
        align_corners = False
    return torch.grid_sampler(input, grid, mode_enum, padding_mode_enum, align_corners)


@adapts(F.affine_grid)
def affine_grid(theta, size, align_corners=None):
    if align_corners is None:
        _ = _warn_align_corners_default()
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(
                f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got {theta.shape}."
            )
        spatial_size = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(
                f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got {theta.shape}."
            )
        spatial_size = size[-3:]
    else:
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, "
            "for 2D and 3D affine transforms, respectively. "
            f"Got size {size}."
        )
    if align_corners and _min_of(spatial_size) == 1:
        warnings.warn(
            "Since version 1.3.0, affine_grid behavior has changed "
            "for unit-size grids when align_corners=True. "
            "This is not an intended use case of affine_grid. "
            "See the documentation of affine_grid for details.",
            stacklevel=2,
        )
    elif _min_of(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    return torch.affine_grid_generator(theta, size, align_corners)


@helper
def _min_of(sizes):
    # min() of a non-empty sequence of ints
    m = sizes[0]
    for i in range(1, len(sizes)):
        if sizes[i] < m:
            m = sizes[i]
    return m


@adapts(F.pad)
def pad(input, pad, mode="constant", value=None):
    if DETERMINISTIC and mode == "replicate":
        return unsupported(
            "F.pad(mode='replicate') under deterministic algorithms takes a Python decomposition on CUDA"
        )
    return _nn.pad(input, pad, mode, value)


# ---- distances, folding ------------------------------------------------------------------------------------


@adapts(F.unfold)
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    return _nn.im2col(input, _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride))


@adapts(F.fold)
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    return _nn.col2im(input, _pair(output_size), _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride))
