"""``torch.nn.functional``'s ``interpolate`` and ``pad``, still restated in the region language.

Each taken only where torch's own source does not compile for a call (its ``because=`` says where).
The rules are those of ``nn_functional.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .adapter_registry import DETERMINISTIC, adapts, helper, unsupported
from .nn_functional import _is_number

_nn = torch._C._nn


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
    return unsupported("F.interpolate with more than three scale factors; eager takes 1 to 3 spatial dimensions")


@helper
def _scales(scale_factors, n):
    # the scale factors for n spatial dimensions: [scale_factor for _ in range(dim)] once dim is known
    if scale_factors is None or not _is_number(scale_factors):
        return scale_factors
    return (scale_factors,) * n


@helper
def _repeated_size(size, dim):
    # [size for _ in range(dim)]
    out = (size,)[: dim - dim]  # an empty run-time sequence of ints ([] is a tuple known when compiled)
    for _i in range(dim):
        out = out + (size,)
    return out


@adapts(
    F.interpolate,
    because="its dimension-dependent branches pass a run-time list of floats to an overload taking float[]?",
)
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
                    f"input with spatial dimensions of {_spatial_text(input)} and output size of {size}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format."
                )
            output_size = size
    elif scale_factor is not None:
        if not _is_number(scale_factor) and len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {_spatial_text(input)} and "
                f"scale_factor of shape {scale_factor}. "
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
    scale_factors = scale_factor
    if recompute_scale_factor is not None and recompute_scale_factor:
        output_size = _recomputed_size(input, scale_factor, dim)
        scale_factors = None
    if antialias and not ((mode == "bilinear" or mode == "bicubic" or mode == "lanczos") and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input"
        )
    if DETERMINISTIC and (mode == "bilinear" or mode == "trilinear"):
        return unsupported(
            "F.interpolate (bilinear, trilinear) under torch.use_deterministic_algorithms(True) takes a Python "
            "decomposition off the CPU; keep the function Python, or compile with deterministic algorithms off"
        )
    if mode == "nearest":
        if input.dim() == 3:
            return _nn.upsample_nearest1d(input, output_size, scale_factors=_scales(scale_factors, 1))
        if input.dim() == 4:
            return _nn.upsample_nearest2d(input, output_size, scale_factors=_scales(scale_factors, 2))
        if input.dim() == 5:
            return _nn.upsample_nearest3d(input, output_size, scale_factors=_scales(scale_factors, 3))
    if mode == "nearest-exact":
        if input.dim() == 3:
            return _nn._upsample_nearest_exact1d(input, output_size, scale_factors=_scales(scale_factors, 1))
        if input.dim() == 4:
            return _nn._upsample_nearest_exact2d(input, output_size, scale_factors=_scales(scale_factors, 2))
        if input.dim() == 5:
            return _nn._upsample_nearest_exact3d(input, output_size, scale_factors=_scales(scale_factors, 3))
    if mode == "area":
        if input.dim() == 3:
            return F.adaptive_avg_pool1d(input, output_size)
        if input.dim() == 4:
            return F.adaptive_avg_pool2d(input, output_size)
        if input.dim() == 5:
            return F.adaptive_avg_pool3d(input, output_size)
    if mode == "linear" and input.dim() == 3:
        return _nn.upsample_linear1d(input, output_size, align_corners, scale_factors=_scales(scale_factors, 1))
    if mode == "bilinear" and input.dim() == 4:
        if antialias:
            return _nn._upsample_bilinear2d_aa(
                input, output_size, align_corners, scale_factors=_scales(scale_factors, 2)
            )
        return _nn.upsample_bilinear2d(input, output_size, align_corners, scale_factors=_scales(scale_factors, 2))
    if mode == "trilinear" and input.dim() == 5:
        return _nn.upsample_trilinear3d(input, output_size, align_corners, scale_factors=_scales(scale_factors, 3))
    if mode == "bicubic" and input.dim() == 4:
        if antialias:
            return _nn._upsample_bicubic2d_aa(
                input, output_size, align_corners, scale_factors=_scales(scale_factors, 2)
            )
        return _nn.upsample_bicubic2d(input, output_size, align_corners, scale_factors=_scales(scale_factors, 2))
    if mode == "lanczos" and input.dim() == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
        return _nn._upsample_lanczos2d_aa(input, output_size, align_corners, scale_factors=_scales(scale_factors, 2))
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


@adapts(F.pad, because="its source imports a module on a CUDA-only branch (importlib.import_module)")
def pad(input, pad, mode="constant", value=None):
    if DETERMINISTIC and mode == "replicate":
        return unsupported(
            "F.pad(mode='replicate') under torch.use_deterministic_algorithms(True) takes a Python decomposition "
            "on CUDA; keep the function Python, or compile with deterministic algorithms off"
        )
    return _nn.pad(input, pad, mode, value)
