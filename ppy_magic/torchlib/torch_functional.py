"""The Python-level wrappers of ``torch/functional.py`` and ``torch/_tensor.py``, restated in the region language.

``torch.split``, ``torch.einsum``, ``torch.norm``, ``torch.meshgrid``,
``torch.unique``, ... are Python functions around
``torch._C._VariableFunctions`` ops, and some ``Tensor`` methods
(``Tensor.split``, ``Tensor.unflatten``, ``Tensor.stft``) are Python too. Each
adapter follows the installed torch's source (the rules are in
``nn_functional.py``).
"""

from __future__ import annotations

import torch

from .adapter_registry import OPT_EINSUM, adapts, helper, unsupported

_VF = torch._C._VariableFunctions
_aten = torch.ops.aten

# torch.functional's public names the adapters below cannot restate, and why.
UNSUPPORTED = {
    "broadcast_shapes": "returns a torch.Size computed from Python sequences (no tensors); call it outside",
    "pca_lowrank": "random projections and iterations in Python (torch._lowrank)",
    "svd_lowrank": "random projections and iterations in Python (torch._lowrank)",
    "unravel_index": "builds its coefficients with itertools.accumulate over a Python sequence",
}


@adapts(
    torch.split,
    torch.Tensor.split,
    methods=("split",),
    because="Tensor.split (torch/_tensor.py) is a method, which regions take only restated",
)
def split(self, split_size, dim=0):
    # Tensor.split (torch.split calls it)
    if isinstance(split_size, torch.Tensor):
        return unsupported(
            "Tensor.split with a tensor of sizes reads its values (int(tensor)); pass an int or a list of ints"
        )
    if isinstance(split_size, int):
        return _VF.split(self, split_size, dim)
    return _VF.split_with_sizes(self, split_size, dim)


@adapts(torch.einsum, because="its source asks isinstance() of a list of tensors, decided only by the value")
def einsum(*args):
    if len(args) < 2:
        raise ValueError(
            "einsum(): must specify the equation string and at least one operand, "
            "or at least one operand and its subscripts list"
        )
    if not isinstance(args[0], str):
        return unsupported("torch.einsum in the sublist format; write the equation as a string")
    equation = args[0]
    operands = args[1:]
    if len(operands) == 1 and not isinstance(operands[0], torch.Tensor):
        # the old interface: the operands in one list or tuple (torch calls itself again with them spread)
        operands = operands[0]
    if OPT_EINSUM and len(operands) > 2:
        return unsupported(
            "torch.einsum with more than two operands (or a list of them of a length known only at run time) "
            "picks its contraction path from the shapes at run time (opt_einsum); contract two operands at a "
            "time, or set torch.backends.opt_einsum.enabled = False"
        )
    return _VF.einsum(equation, operands)


@adapts(torch.meshgrid, because="its source builds a dict of keywords")
def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and not isinstance(tensors[0], torch.Tensor):  # one list or tuple of them
        tensors = tensors[0]
    if indexing is None:
        return _VF.meshgrid(tensors)
    return _VF.meshgrid(tensors, indexing=indexing)


@adapts(torch.Tensor.stft, methods=("stft",))
def tensor_stft(
    self,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=None,
    return_complex=None,
    align_to_window=None,
):
    return torch.stft(
        self,
        n_fft,
        hop_length,
        win_length,
        window,
        center,
        pad_mode,
        normalized,
        onesided,
        return_complex=return_complex,
        align_to_window=align_to_window,
    )


@adapts(torch.Tensor.istft, methods=("istft",))
def tensor_istft(
    self,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
):
    return torch.istft(
        self,
        n_fft,
        hop_length,
        win_length,
        window,
        center,
        normalized,
        onesided,
        length,
        return_complex=return_complex,
    )


@helper
def _unique_impl(input, sorted, return_inverse, return_counts, dim):
    if dim is not None:
        return _VF.unique_dim(input, dim, sorted=sorted, return_inverse=return_inverse, return_counts=return_counts)
    return torch._unique2(input, sorted=sorted, return_inverse=return_inverse, return_counts=return_counts)


@adapts(
    torch.unique,
    torch.Tensor.unique,
    methods=("unique",),
    because="Tensor.unique (torch/_tensor.py) is a method, which regions take only restated",
)
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    # torch.unique is a boolean_dispatch on return_inverse and return_counts: they must be known when compiled
    output, inverse_indices, counts = _unique_impl(input, sorted, return_inverse, return_counts, dim)
    if return_inverse and return_counts:
        return output, inverse_indices, counts
    if return_inverse:
        return output, inverse_indices
    if return_counts:
        return output, counts
    return output


@adapts(
    torch.unique_consecutive,
    torch.Tensor.unique_consecutive,
    methods=("unique_consecutive",),
    because="Tensor.unique_consecutive (torch/_tensor.py) is a method, which regions take only restated",
)
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    output, inverse_indices, counts = _VF.unique_consecutive(
        input, return_inverse=return_inverse, return_counts=return_counts, dim=dim
    )
    if return_inverse and return_counts:
        return output, inverse_indices, counts
    if return_inverse:
        return output, inverse_indices
    if return_counts:
        return output, counts
    return output


@helper
def _range_list(t, start, stop):
    # list(range(start, stop)) as a run-time sequence (t: any tensor, for an empty one)
    out = t.size()[:0]
    for i in range(start, stop):
        out = out + (i,)
    return out


@adapts(torch.norm, because="its source compares an optional value with a constant")
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    # torch.norm's path for strided tensors on the CPU and CUDA, the only ones a region sees.
    if dim is None:
        _dim = None
    elif isinstance(dim, int):
        _dim = [dim]
    else:
        _dim = dim
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            if out is None:
                return torch.linalg.vector_norm(input, 2, _dim, keepdim, dtype=dtype)
            return torch.linalg.vector_norm(input, 2, _dim, keepdim, dtype=dtype, out=out)
        if _dim is None:
            _dim = _range_list(input, 0, input.ndim)
        if out is None:
            return torch.linalg.matrix_norm(input, p, _dim, keepdim, dtype=dtype)
        return torch.linalg.matrix_norm(input, p, _dim, keepdim, dtype=dtype, out=out)
    _p = 2.0 if p is None else p
    if out is None:
        return torch.linalg.vector_norm(input, _p, _dim, keepdim, dtype=dtype)
    return torch.linalg.vector_norm(input, _p, _dim, keepdim, dtype=dtype, out=out)


@adapts(torch.Tensor.norm, methods=("norm",))
def tensor_norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    return torch.norm(self, p, dim, keepdim, dtype=dtype)


@adapts(torch.Tensor.lu, methods=("lu",))
def tensor_lu(self, pivot=True, get_infos=False):
    LU, pivots, infos = torch._lu_with_info(self, pivot=pivot, check_errors=(not get_infos))
    if get_infos:
        return LU, pivots, infos
    return LU, pivots


@adapts(torch.Tensor.unflatten, methods=("unflatten",))
def unflatten(self, dim, sizes):
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    return torch.unflatten(self, dim, sizes)


@adapts(methods=("to",))
def tensor_to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    # THPVariable_to (torch/csrc/autograd/python_variable_methods.cpp): parse_to_conversion takes a device
    # and a dtype from to(dtype, ...), to(device=None, dtype=None, ...) or to(other, ...); then the dispatch
    rest = args
    if len(args) > 0 and isinstance(args[0], torch.Tensor):
        if dtype is not None or device is not None:
            return unsupported("Tensor.to(other) with dtype= or device= as well")
        device = args[0].device
        dtype = args[0].dtype
        rest = args[1:]
    elif len(args) > 0 and isinstance(args[0], torch.dtype):
        if dtype is not None:
            return unsupported("Tensor.to(dtype) with dtype= as well")
        dtype = args[0]
        rest = args[1:]
    elif len(args) > 0:
        if device is not None:
            return unsupported("Tensor.to(device) with device= as well")
        device = args[0]
        rest = args[1:]
        if len(rest) > 0 and isinstance(rest[0], torch.dtype):
            dtype = rest[0]
            rest = rest[1:]
    if len(rest) > 2:
        return unsupported("Tensor.to with more positional arguments than it takes")
    if len(rest) > 0:
        non_blocking = rest[0]
    if len(rest) > 1:
        copy = rest[1]
    # a region's tensors are strided: self.options() has layout torch.strided
    if device is None and dtype is None:
        if not copy and memory_format is None:
            return self
        return _aten.to.dtype_layout(
            self,
            dtype=self.dtype,
            layout=torch.strided,
            device=self.device,
            non_blocking=non_blocking,
            copy=copy,
            memory_format=memory_format,
        )
    if device is None:
        return _aten.to.dtype(self, dtype, non_blocking, copy, memory_format)
    if dtype is None:
        return _aten.to.dtype_layout(
            self,
            dtype=self.dtype,
            layout=torch.strided,
            device=device,
            non_blocking=non_blocking,
            copy=copy,
            memory_format=memory_format,
        )
    return _aten.to.device(self, device, dtype, non_blocking, copy, memory_format)


# Tensor.float() and friends: PyTorch's binding calls self.to(dtype) (to.dtype).
@adapts(methods=("float",))
def float_(self, memory_format=None):
    return self.to(torch.float32, memory_format=memory_format)


@adapts(methods=("double",))
def double_(self, memory_format=None):
    return self.to(torch.float64, memory_format=memory_format)


@adapts(methods=("half",))
def half_(self, memory_format=None):
    return self.to(torch.float16, memory_format=memory_format)


@adapts(methods=("bfloat16",))
def bfloat16_(self, memory_format=None):
    return self.to(torch.bfloat16, memory_format=memory_format)


@adapts(methods=("int",))
def int_(self, memory_format=None):
    return self.to(torch.int32, memory_format=memory_format)


@adapts(methods=("long",))
def long_(self, memory_format=None):
    return self.to(torch.int64, memory_format=memory_format)


@adapts(methods=("bool",))
def bool_(self, memory_format=None):
    return self.to(torch.bool, memory_format=memory_format)


@adapts(methods=("byte",))
def byte_(self, memory_format=None):
    return self.to(torch.uint8, memory_format=memory_format)


@adapts(methods=("char",))
def char_(self, memory_format=None):
    return self.to(torch.int8, memory_format=memory_format)


@adapts(methods=("short",))
def short_(self, memory_format=None):
    return self.to(torch.int16, memory_format=memory_format)


@adapts(methods=("cfloat",))
def cfloat_(self, memory_format=None):
    return self.to(torch.complex64, memory_format=memory_format)


@adapts(methods=("cdouble",))
def cdouble_(self, memory_format=None):
    return self.to(torch.complex128, memory_format=memory_format)
