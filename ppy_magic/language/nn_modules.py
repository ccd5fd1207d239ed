"""The standard ``torch.nn`` modules' ``forward``, restated in the region language.

Each function below follows the installed torch's own ``forward`` (and the
``torch.nn.functional`` code it runs) line by line, reading the module's
attributes through ``self`` as the original does, so a region makes the same
ATen calls in the same order, reads the attributes at each call (after
``load_state_dict``, an optimizer step, ``.eval()``), and raises eager's errors.
``@forward_of(cls, **kinds)`` registers one for a class and says, as annotations, the
kinds of the attributes its class body does not annotate (``Linear.bias`` may be None); where
an attribute has a kind the restatement does not take (a ``str`` padding of a
convolution, an ``Embedding`` with ``max_norm``), the kind declared here is the one
the region is built for, and a module that differs runs its Python ``forward``,
counted, with the reason.

The front end compiles these like ``adapters.py``'s: as helpers specialised to
the call site, errors pointing at the user's line.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .adapters import unsupported

_nn = torch._C._nn
_VF = torch._C._VariableFunctions

# The kinds declared below, as annotations (attr_types.annotation_type reads them, exactly:
# a tuple here is a tuple, not a list).
OPT_TENSOR = torch.Tensor | None
INTS = tuple[int, ...]
NONE = None

FORWARDS: dict[type, tuple[str | None, dict[str, Any]]] = {}  # class -> (its forward's restatement, attribute kinds)


def forward_of(*classes: type, **kinds: Any) -> Callable:
    def register(fn: Callable) -> Callable:
        for cls in classes:
            FORWARDS[cls] = (fn.__name__, kinds)
        return fn

    return register


# Containers without a forward of their own: read (indexed, iterated), never called.
FORWARDS[nn.ModuleList] = (None, {})
FORWARDS[nn.ModuleDict] = (None, {})


def declared(cls: type) -> tuple[dict[str, Any], str | None] | None:
    """The attribute kinds declared for a torch.nn class and the name of its forward's restatement."""
    entry = FORWARDS.get(cls)
    if entry is None:
        return None
    return dict(entry[1]), entry[0]


def _backend_flags() -> dict[str, bool]:
    return {
        "CUDNN_ENABLED": bool(torch.backends.cudnn.enabled),
        "DETERMINISTIC": bool(torch.are_deterministic_algorithms_enabled()),
    }


# What the restatements read; namespace() reads them again whenever a region is compiled.
CUDNN_ENABLED = _backend_flags()["CUDNN_ENABLED"]
DETERMINISTIC = _backend_flags()["DETERMINISTIC"]


# ---- containers and identity -----------------------------------------------------------------------


@forward_of(nn.Sequential)
def sequential_forward(self, input):
    for module in self:
        input = module(input)
    return input


@forward_of(nn.Identity)
def identity_forward(self, input):
    return input


@forward_of(nn.Flatten)
def flatten_forward(self, input):
    return input.flatten(self.start_dim, self.end_dim)


# ---- linear layers ------------------------------------------------------------------------------------


@forward_of(nn.Linear, bias=OPT_TENSOR)
def linear_forward(self, input):
    return F.linear(input, self.weight, self.bias)


@forward_of(nn.Bilinear, bias=OPT_TENSOR)
def bilinear_forward(self, input1, input2):
    return F.bilinear(input1, input2, self.weight, self.bias)


@forward_of(nn.Embedding, max_norm=NONE)
def embedding_forward(self, input):
    # F.embedding; a max_norm renormalises the weight in place under no_grad (declared None here)
    if self.padding_idx is None:
        padding_idx = -1
    else:
        padding_idx = self.padding_idx
        if padding_idx > 0:
            assert padding_idx < self.weight.size(0), "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -self.weight.size(0), "Padding_idx must be within num_embeddings"
            padding_idx = self.weight.size(0) + padding_idx
    return torch.embedding(self.weight, input, padding_idx, self.scale_grad_by_freq, self.sparse)


# ---- convolutions --------------------------------------------------------------------------------------


@forward_of(nn.Conv1d, bias=OPT_TENSOR, padding=INTS)
def conv1d_forward(self, input):
    if self.padding_mode != "zeros":
        if DETERMINISTIC:
            unsupported("a padded convolution with deterministic algorithms on")
        return torch.conv1d(
            _nn.pad(input, self._reversed_padding_repeated_twice, self.padding_mode, None),
            self.weight,
            self.bias,
            self.stride,
            (0,),
            self.dilation,
            self.groups,
        )
    return torch.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


@forward_of(nn.Conv2d, bias=OPT_TENSOR, padding=INTS)
def conv2d_forward(self, input):
    if self.padding_mode != "zeros":
        if DETERMINISTIC:
            unsupported("a padded convolution with deterministic algorithms on")
        return torch.conv2d(
            _nn.pad(input, self._reversed_padding_repeated_twice, self.padding_mode, None),
            self.weight,
            self.bias,
            self.stride,
            (0, 0),
            self.dilation,
            self.groups,
        )
    return torch.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


@forward_of(nn.ConvTranspose2d, bias=OPT_TENSOR, padding=INTS)
def conv_transpose2d_forward(self, input, output_size=None):
    if self.padding_mode != "zeros":
        raise ValueError("Only `zeros` padding mode is supported for ConvTranspose2d")
    if output_size is not None:
        unsupported("ConvTranspose2d with output_size=")
    # _output_padding with no output_size: _single(self.output_padding), a tuple already
    return torch.conv_transpose2d(
        input, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups, self.dilation
    )


# ---- normalisation -------------------------------------------------------------------------------------


@forward_of(nn.LayerNorm, weight=OPT_TENSOR, bias=OPT_TENSOR)
def layer_norm_forward(self, input):
    return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


@forward_of(nn.RMSNorm, weight=OPT_TENSOR)
def rms_norm_forward(self, x):
    # F.rms_norm
    if self.eps is None:
        return torch.rms_norm(x, self.normalized_shape, self.weight, None)
    return torch.rms_norm(x, self.normalized_shape, self.weight, self.eps)


@forward_of(nn.GroupNorm, weight=OPT_TENSOR, bias=OPT_TENSOR)
def group_norm_forward(self, input):
    # F.group_norm, with its _verify_batch_size
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    size = input.size()
    size_prods = size[0] * size[1] // self.num_groups
    for i in range(len(size) - 2):
        size_prods = size_prods * size[i + 2]
    if size_prods == 1:
        tail = ""  # the list _verify_batch_size prints: [N * C // G, G, *spatial sizes]
        for i in range(len(size) - 2):
            tail = f"{tail}, {size[i + 2]}"
        raise ValueError(
            "Expected more than 1 value per channel when training, got input size "
            f"[{size[0] * size[1] // self.num_groups}, {self.num_groups}{tail}]"
        )
    return torch.group_norm(input, self.num_groups, self.weight, self.bias, self.eps, CUDNN_ENABLED)


BATCH_NORM = dict(
    weight=OPT_TENSOR, bias=OPT_TENSOR, running_mean=OPT_TENSOR, running_var=OPT_TENSOR, num_batches_tracked=OPT_TENSOR
)


@forward_of(nn.BatchNorm1d, **BATCH_NORM)
def batch_norm1d_forward(self, input):
    if input.dim() != 2 and input.dim() != 3:
        raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")
    return batch_norm_common(self, input)


@forward_of(nn.BatchNorm2d, **BATCH_NORM)
def batch_norm2d_forward(self, input):
    if input.dim() != 4:
        raise ValueError(f"expected 4D input (got {input.dim()}D input)")
    return batch_norm_common(self, input)


@forward_of(nn.BatchNorm3d, **BATCH_NORM)
def batch_norm3d_forward(self, input):
    if input.dim() != 5:
        raise ValueError(f"expected 5D input (got {input.dim()}D input)")
    return batch_norm_common(self, input)


def batch_norm_common(self, input):
    # _BatchNorm.forward after its _check_input_dim
    if self.momentum is None:
        exponential_average_factor = 0.0
    else:
        exponential_average_factor = self.momentum
    if self.training and self.track_running_stats:
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # use cumulative moving average
                exponential_average_factor = 1.0 / float(self.num_batches_tracked)
            else:  # use exponential moving average
                exponential_average_factor = self.momentum
    if self.training:
        bn_training = True
    else:
        bn_training = (self.running_mean is None) and (self.running_var is None)
    return F.batch_norm(
        input,
        self.running_mean if not self.training or self.track_running_stats else None,
        self.running_var if not self.training or self.track_running_stats else None,
        self.weight,
        self.bias,
        bn_training,
        exponential_average_factor,
        self.eps,
    )


# ---- dropout -----------------------------------------------------------------------------------------


@forward_of(nn.Dropout)
def dropout_forward(self, input):
    return F.dropout(input, self.p, self.training, self.inplace)


# ---- activations ---------------------------------------------------------------------------------------


@forward_of(nn.ReLU)
def relu_forward(self, input):
    return F.relu(input, inplace=self.inplace)


@forward_of(nn.GELU)
def gelu_forward(self, input):
    return F.gelu(input, approximate=self.approximate)


@forward_of(nn.SiLU)
def silu_forward(self, input):
    return F.silu(input, inplace=self.inplace)


@forward_of(nn.Tanh)
def tanh_forward(self, input):
    return torch.tanh(input)


@forward_of(nn.Sigmoid)
def sigmoid_forward(self, input):
    return torch.sigmoid(input)


@forward_of(nn.Mish)
def mish_forward(self, input):
    if self.inplace:
        return _nn.mish_(input)
    return _nn.mish(input)


@forward_of(nn.LeakyReLU)
def leaky_relu_forward(self, input):
    if self.inplace:
        return _nn.leaky_relu_(input, self.negative_slope)
    return _nn.leaky_relu(input, self.negative_slope)


@forward_of(nn.ELU)
def elu_forward(self, input):
    if self.inplace:
        return _nn.elu_(input, self.alpha)
    return _nn.elu(input, self.alpha)


@forward_of(nn.Hardtanh, nn.ReLU6)
def hardtanh_forward(self, input):
    if self.min_val > self.max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if self.inplace:
        return _nn.hardtanh_(input, self.min_val, self.max_val)
    return _nn.hardtanh(input, self.min_val, self.max_val)


@forward_of(nn.Hardswish)
def hardswish_forward(self, input):
    if self.inplace:
        return _nn.hardswish_(input)
    return _nn.hardswish(input)


@forward_of(nn.Hardsigmoid)
def hardsigmoid_forward(self, input):
    if self.inplace:
        return _nn.hardsigmoid_(input)
    return _nn.hardsigmoid(input)


@forward_of(nn.SELU)
def selu_forward(self, input):
    if self.inplace:
        return torch.selu_(input)
    return torch.selu(input)


@forward_of(nn.Softplus)
def softplus_forward(self, input):
    return _nn.softplus(input, self.beta, self.threshold)


@forward_of(nn.Softsign)
def softsign_forward(self, input):
    return input / (input.abs() + 1)


@forward_of(nn.Tanhshrink)
def tanhshrink_forward(self, input):
    return input - input.tanh()


@forward_of(nn.Softmax, dim=int)
def softmax_forward(self, input):
    return input.softmax(self.dim)


@forward_of(nn.LogSoftmax, dim=int)
def log_softmax_forward(self, input):
    return input.log_softmax(self.dim)


# ---- the front end's view ---------------------------------------------------------------------------------


@functools.cache
def definitions() -> tuple[dict[str, ast.FunctionDef], list[str]]:
    """The restatements' ASTs (compiled like user code) and this file's lines."""
    source = inspect.getsource(inspect.getmodule(definitions))
    tree = ast.parse(source)
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}, source.splitlines()


def namespace() -> dict[str, Any]:
    """Globals of the restatements; the backend flags are read when a region is compiled."""
    return {
        "torch": torch,
        "F": F,
        "_nn": _nn,
        "_VF": _VF,
        "unsupported": unsupported,
        "batch_norm_common": batch_norm_common,
        **_backend_flags(),
    }


# Called by name from the restatements: compiled as restatements too.
HELPERS = {id(batch_norm_common): "batch_norm_common"}


def helper_name(fn: Any) -> str | None:
    name = HELPERS.get(id(fn))
    return name if name is not None and globals().get(name) is fn else None
