"""``einops.rearrange``, ``repeat`` and ``reduce`` in a region, compiled natively.

einops turns a pattern into a recipe once (``_prepare_transformation_recipe``), works out the
recipe's sizes from each call's shape (``_reconstruct_from_shape``) and then calls the torch backend:
``reshape``, ``permute``, the reduction, ``unsqueeze`` + ``expand``, ``reshape``. The pattern and the
axis names are known when a region compiles, so this module asks einops itself for the recipe of
every rank the pattern takes, and writes the rest as a small Python function specialised to that
recipe: the size arithmetic and checks, and the same torch calls in the same order. The front end
compiles that function like any callee, so a region makes exactly einops's ATen calls, and raises
``einops.EinopsError`` with einops's message where einops would.
"""

from __future__ import annotations

import ast
import functools
import sys
from typing import Any

MAX_NDIM = 8  # ranks a pattern with an ellipsis is compiled for; a higher one raises (see _too_many_dims)
_FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16")  # TorchBackend.is_float_type
_ONE_AT_A_TIME = ("any", "all", "prod")  # TorchBackend.reduce reduces these one axis at a time
_REDUCE_METHOD = {"min": "amin", "max": "amax", "sum": "sum", "mean": "mean"}
REDUCTIONS = (*_REDUCE_METHOD, *_ONE_AT_A_TIME)  # einops's own reductions (a callable one is not compiled)
_LAYER_REDUCTIONS = ("rearrange", "min", "max", "sum", "mean", "prod")  # TorchJitBackend.reduce's


def functions() -> dict[int, str]:
    """id(einops function) -> its operation, when einops is imported (nothing imports it here)."""
    einops = sys.modules.get("einops")
    if einops is None or not str(getattr(einops, "__version__", "")).startswith("0.8."):
        return {}  # another einops: its recipes and messages are not the ones this module restates
    return {id(einops.rearrange): "rearrange", id(einops.repeat): "repeat", id(einops.reduce): "reduce"}


class NotNative(Exception):
    """This call of einops cannot be compiled natively (the statement stays Python, with this reason)."""


@functools.lru_cache(maxsize=512)
def specialised(
    operation: str, pattern: str, axes: tuple[str, ...], layer: bool = False
) -> tuple[ast.FunctionDef, list[str]]:
    """A function ``(tensor, *axis lengths) -> tensor`` doing what ``einops.<operation>`` does for this
    pattern and these axis names, in the region language; and its source lines. `operation` is
    'rearrange', 'repeat' or a reduction's name; `layer`: what the forward of einops's torch layer
    (``Rearrange``, ``Reduce``) does instead, with the recipes the layer prepared. Cached, so that a
    region compiles it once."""
    text = "\n".join(_source(operation, pattern, axes, layer))
    module = ast.parse(text)
    fdef = module.body[0]
    assert isinstance(fdef, ast.FunctionDef)
    return fdef, text.splitlines()


def namespace() -> dict[str, Any]:
    import torch

    einops = sys.modules["einops"]
    return {"torch": torch, "EinopsError": einops.EinopsError}


def _param(axis: str) -> str:
    return f"axis_{axis}"


def layer_operation(module: Any) -> tuple[str, str, tuple[tuple[str, int], ...]] | None:
    """(operation, pattern, axis lengths) of an einops torch layer whose forward is einops's own."""
    einops = sys.modules.get("einops")
    layers = sys.modules.get("einops.layers.torch")
    if not functions() or layers is None or einops is None:
        return None
    cls = type(module)
    if cls not in (layers.Rearrange, layers.Reduce):
        return None
    own = vars(module).get("forward")  # ppy_magic.compile's binding of the class's forward, or nothing
    if own is not None and getattr(getattr(own, "__func__", None), "__ppy_compiles__", None) is not cls.forward:
        return None
    operation = "rearrange" if cls is layers.Rearrange else module.reduction
    return operation, module.pattern, module._axes_lengths


def _source(operation: str, pattern: str, axes: tuple[str, ...], layer: bool) -> list[str]:
    from einops.einops import EinopsError, _prepare_recipes_for_all_dims, _prepare_transformation_recipe

    if layer and operation not in _LAYER_REDUCTIONS:
        raise NotNative(f"an einops layer reducing with {operation!r} (einops's torch layers do not)")

    head: list[tuple[bool, str]] = [
        (False, f' Error while processing {operation}-reduction pattern "{pattern}".\n Input tensor shape: '),
        (True, "tensor.shape"),
        (False, ". Additional info: {"),
    ]
    for i, name in enumerate(axes):  # f"{axes_lengths}": the dict's repr
        head += [(False, f"{', ' if i else ''}{name!r}: "), (True, _param(name))]
    head.append((False, "}.\n "))

    def error(*detail: tuple[bool, str]) -> str:  # a layer's errors are einops's own, not wrapped
        return f"raise EinopsError({_fstring(([] if layer else head) + list(detail))})"

    lines = [f"def einops_{_stem(operation)}({', '.join(['tensor', *(_param(a) for a in axes)])}):"]
    per_rank: list[tuple[int, list[str]]] = []
    has_ellipsis = "..." in pattern.split("->")[0]
    if layer:  # the recipes it made when it was built, per rank; another rank is a KeyError
        for ndim, recipe in _prepare_recipes_for_all_dims(pattern, operation, axes).items():
            per_rank.append((ndim, _apply(recipe, operation, axes, error, layer)))
    for ndim in () if layer else range(MAX_NDIM + 1):
        try:
            recipe = _prepare_transformation_recipe(pattern, operation, axes, ndim)
        except EinopsError as e:
            if not has_ellipsis and str(e).startswith("Wrong shape: expected"):
                continue  # another rank: the catch-all below says so, as einops does
            per_rank.append((ndim, [error((False, str(e)))]))
            continue
        per_rank.append((ndim, _apply(recipe, operation, axes, error, layer)))
    for i, (ndim, body) in enumerate(per_rank):
        lines.append(f"    {'if' if i == 0 else 'elif'} tensor.dim() == {ndim}:")
        lines += ["        " + b for b in body]
    lines.append("    else:")
    if layer:
        lines.append("        raise KeyError(f'{tensor.dim()}')")  # self._multirecipe[input.ndim]
    elif has_ellipsis:
        lines.append(f"        {_too_many_dims(pattern)}")
    else:
        expected = len(_parsed_left(pattern).composition)
        detail = [(False, f"Wrong shape: expected {expected} dims. Received "), (True, "tensor.dim()")]
        lines.append(f"        {error(*detail, (False, '-dim tensor.'))}")
    return lines


def _apply(recipe: Any, operation: str, axes: tuple[str, ...], error: Any, layer: bool) -> list[str]:
    """``_reconstruct_from_shape`` and ``_apply_recipe`` of einops for one recipe, as statements."""
    out: list[str] = []
    lengths: list[str] = [str(v) for v in recipe.elementary_axes_lengths]
    for axis in axes:
        lengths[recipe.axis_name2elementary_axis[axis]] = _param(axis)
    need_init_reshape = False
    for i, (known, unknown) in enumerate(recipe.input_composition_known_unknown):
        length = f"size{i}"
        out.append(f"{length} = tensor.shape[{i}]")
        if not known and len(unknown) == 1:
            lengths[unknown[0]] = length
            continue
        product = f"known{i}"
        out.append(f"{product} = {' * '.join(['1', *(lengths[a] for a in known)])}")
        if not unknown:
            out.append(f"if {length} != {product}:")
            out.append("    " + error((False, "Shape mismatch, "), (True, length), (False, " != "), (True, product)))
        else:
            out.append(f"if {length} % {product} != 0:")
            detail = [(False, "Shape mismatch, can't divide axis of length "), (True, length)]
            out.append("    " + error(*detail, (False, " in chunks of "), (True, product)))
            out.append(f"inferred{i} = {length} // {product}")
            lengths[unknown[0]] = f"inferred{i}"
        if len(known) + len(unknown) != 1:
            need_init_reshape = True
    permutation = list(recipe.axes_permutation)
    if need_init_reshape:
        out.append(f"tensor = tensor.reshape([{', '.join(lengths[: len(permutation)])}])")
    if permutation != list(range(len(permutation))):
        out.append(f"tensor = tensor.permute({permutation})")
    reduced = list(range(recipe.first_reduced_axis, len(permutation)))
    if reduced:
        out += _reduction(operation, reduced, layer)
    added = {pos: lengths[e] for pos, e in recipe.added_axes.items()}
    if added:
        repeats = ["-1"] * (len(added) + len(permutation))
        for pos, length in added.items():
            out.append(f"tensor = torch.unsqueeze(tensor, {pos})")
            repeats[pos] = length
        out.append(f"tensor = tensor.expand([{', '.join(repeats)}])")
    final = [" * ".join(["1", *(lengths[e] for e in group)]) for group in recipe.output_composite_axes]
    if any(len(group) != 1 for group in recipe.output_composite_axes):
        out.append(f"tensor = tensor.reshape([{', '.join(final)}])")
    out.append("return tensor")
    return out


def _reduction(operation: str, reduced: list[int], layer: bool) -> list[str]:
    if operation in _ONE_AT_A_TIME:
        return [f"tensor = tensor.{operation}(dim={i})" for i in sorted(reduced)[::-1]]
    if operation == "mean" and not layer:  # the layers' backend (TorchJitBackend) does not check
        floating = " or ".join(f"tensor.dtype == torch.{d}" for d in _FLOAT_DTYPES)
        message = "reduce_mean is not available for non-floating tensors"
        check = [f"if not ({floating}):", f"    raise NotImplementedError({message!r})"]
    else:
        check = []
    return check + [f"tensor = tensor.{_REDUCE_METHOD[operation]}(dim={tuple(reduced)})"]


def _too_many_dims(pattern: str) -> str:
    message = (
        f"ppy_magic compiles the einops pattern {pattern!r} for tensors of at most {MAX_NDIM} dimensions; "
        "call this function's Python body (f.__wrapped__) for more"
    )
    return f"raise NotImplementedError({message!r})"


def _parsed_left(pattern: str) -> Any:
    from einops.parsing import ParsedExpression

    return ParsedExpression(pattern.split("->")[0])


def _stem(operation: str) -> str:
    return operation if operation.isidentifier() else "reduce"


def _fstring(parts: list[tuple[bool, str]]) -> str:
    """An f-string literal of `parts`: (False, text) as it is, (True, expression) as a field."""
    text = "".join("{" + p + "}" if field else p.replace("{", "{{").replace("}", "}}") for field, p in parts)
    return "f" + repr(text)
