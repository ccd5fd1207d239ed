"""einops in a region: ``rearrange``, ``repeat``, ``reduce`` and the ``Rearrange``/``Reduce`` layers
compile natively (no break), make einops's ATen calls (values, shapes, strides and gradients equal to
eager's), and raise einops's own errors, with its messages, where einops does."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("einops")

import ppy_magic  # noqa: E402
from ppy_magic import region, variants  # noqa: E402
from tests.support import einops_code as code  # noqa: E402


def _same(a, b) -> bool:
    return (
        torch.equal(a, b)
        and a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.is_contiguous() == b.is_contiguous()
        and (a.grad_fn is None) == (b.grad_fn is None)
    )


def _inputs(grad: bool = False):
    g = torch.Generator().manual_seed(0)
    x4 = torch.randn(2, 3, 4, 6, generator=g, requires_grad=grad)
    x3 = torch.randn(2, 5, 16, generator=g, requires_grad=grad)
    b2 = torch.rand(3, 4, generator=g) > 0.5
    i3 = torch.randint(-5, 5, (2, 3, 4), generator=g)
    return x4, x3, b2, i3


def _settled(fn, *args):
    """`fn` compiled and called until it runs as one region (builds in the foreground)."""
    compiled = ppy_magic.compile(fn)
    with variants.blocking():
        for _ in range(3):
            compiled(*args)
    return compiled


def _one_region(compiled) -> None:
    reg = compiled.__func__ if hasattr(compiled, "__func__") else compiled
    assert reg.__ppy_region__, ppy_magic.explain(compiled)
    assert "__ppy_split__" not in reg.__dict__, ppy_magic.explain(compiled)  # no break: einops is native
    assert region.counters(reg)[1] == 0  # every call ran the region


def test_patterns_compile_into_one_region_and_match_eager():
    compiled = _settled(code.shapes, *_inputs())
    _one_region(compiled)
    got, want = compiled(*_inputs()), code.shapes(*_inputs())
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert _same(a, b), f"pattern {i}"


def test_gradients_match_eager():
    compiled = _settled(code.shapes, *_inputs())
    (x4, x3, b2, i3), (e4, e3, _, _) = _inputs(grad=True), _inputs(grad=True)
    got, want = compiled(x4, x3, b2, i3), code.shapes(e4, e3, b2, i3)
    for a, b in zip(got, want, strict=True):
        assert _same(a, b)
    sum(t.float().sum() * (i + 1) for i, t in enumerate(got) if t.requires_grad).backward()
    sum(t.float().sum() * (i + 1) for i, t in enumerate(want) if t.requires_grad).backward()
    assert torch.equal(x4.grad, e4.grad) and torch.equal(x3.grad, e3.grad)


def _raises_as_eager(compiled, eager, *args) -> None:
    with pytest.raises(Exception) as want:
        eager(*args)
    with pytest.raises(Exception) as got:
        compiled(*args)
    assert type(got.value) is type(want.value)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize(
    "fn, good, bad",
    [
        (code.split_heads, (torch.randn(2, 5, 16), 4), [(torch.randn(2, 5, 16), 3), (torch.randn(5, 16), 4)]),
        (code.split_last, (torch.randn(2, 6),), [(torch.randn(2, 5),), (torch.randn(()),)]),
        (code.mean_of, (torch.randn(2, 3),), [(torch.arange(6).view(2, 3),)]),
        (code.exact_split, (torch.randn(3, 20),), [(torch.randn(3, 16),)]),
    ],
    ids=["divide", "ellipsis", "mean-of-ints", "known-product"],
)
def test_errors_are_einops_own(fn, good, bad):
    compiled = _settled(fn, *good)
    _one_region(compiled)
    assert _same(compiled(*good), fn(*good))
    for args in bad:
        _raises_as_eager(compiled, fn, *args)
    _one_region(compiled)  # the errors came from the region, not from a fallback to Python


def test_a_pattern_einops_cannot_read_is_python_and_raises_einops_error():
    compiled = ppy_magic.compile(code.no_arrow)
    x = torch.randn(2, 3, 4)
    for _ in range(3):
        with variants.blocking():
            _raises_as_eager(compiled, code.no_arrow, x)
    assert "is not compiled" in str(ppy_magic.explain(compiled))


def test_a_module_with_einops_layers_is_one_region_and_exact():
    torch.manual_seed(0)
    model, eager = code.Attention(), None
    eager = copy.deepcopy(model)
    x = torch.randn(2, 5, 16, requires_grad=True)
    ppy_magic.compile(model)
    with variants.blocking():
        for _ in range(3):
            model(x)
    _one_region(model.forward)
    xe = x.detach().clone().requires_grad_()
    got, want = model(x), eager(xe)
    assert _same(got, want)
    got.sum().backward(), want.sum().backward()
    assert torch.equal(x.grad, xe.grad)
    for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters(), strict=True):
        assert torch.equal(p.grad, q.grad), name
    with pytest.raises(KeyError) as want_err:  # the layer has no recipe for a 2-D tensor
        eager(torch.randn(5, 16))
    with pytest.raises(KeyError) as got_err:
        model(torch.randn(5, 16))
    assert got_err.value.args[0] == str(want_err.value.args[0])  # the rank, as text (a region raises with a str)


def test_a_layer_whose_pattern_changes_is_not_run_with_the_old_one():
    torch.manual_seed(0)
    model = code.Attention()
    ppy_magic.compile(model)
    x = torch.randn(2, 5, 16)
    with variants.blocking():
        for _ in range(3):
            model(x)
    eager = copy.deepcopy(model)
    for m in (model, eager):
        m.merge_heads.pattern = "b h n d -> b n (d h)"  # read per call, as the layer's forward does not
        m.merge_heads._multirecipe = type(m.merge_heads)("b h n d -> b n (d h)")._multirecipe
    with variants.blocking():
        assert _same(model(x), code.Attention.forward(eager, x))
