"""Code calling einops, for tests/test_einops.py: functions and a module written as model code writes them
(x-transformers, vit-pytorch), compiled with ``ppy_magic.compile`` and compared with eager."""

from __future__ import annotations

from einops import rearrange, reduce, repeat
from einops.layers.torch import Rearrange, Reduce
from torch import nn


def shapes(x4, x3, b2, i3):
    """Many patterns at once: one region, so one build. x4 (2, 3, 4, 6), x3 (2, 5, 16), b2 a bool
    (3, 4), i3 an int64 (2, 3, 4)."""
    return (
        rearrange(x3, "b n (h d) -> b h n d", h=4),
        rearrange(rearrange(x3, "b n (h d) -> b h n d", h=4), "b h n d -> b n (h d)"),
        rearrange(x3, "... (h d) -> ... h d", h=2),
        rearrange(x4, "... (h d) -> ... h d", d=3),
        rearrange(x4, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=3),
        rearrange(x4, "b c h w -> w h c b"),
        rearrange(x3, "b n d -> b n d"),
        rearrange(x3, "b n d -> (b n) d"),
        rearrange(x3[:1], "1 n d -> n d"),
        rearrange(x3, "b n d -> b n () d"),
        rearrange(x4, "b ... w -> b w ..."),
        repeat(x3, "b n d -> b n d r", r=3),
        repeat(x3[:, 0], "b d -> (r b) d", r=2),
        repeat(x3[:, :1], "b 1 d -> b k d", k=4),
        repeat(x3[0], "n d -> b n d", b=2),
        reduce(x4, "b c (h h2) (w w2) -> b c h w", "max", h2=2, w2=2),
        reduce(x3, "b n d -> b d", "mean"),
        reduce(x3, "b n d -> b", "sum"),
        reduce(x4, "b ... -> b", "prod"),
        reduce(x3, "b n d -> n", "min"),
        reduce(x3, "b n d -> b 1 d", "mean"),
        reduce(b2, "a b -> b", "any"),
        reduce(b2, "a b -> a", "all"),
        reduce(i3, "a b c -> a", "sum"),
    )


def split_heads(x, h):
    return rearrange(x, "b n (h d) -> b h n d", h=h)


def split_last(x):
    return rearrange(x, "... (h d) -> ... h d", h=2)


def mean_of(x):
    return reduce(x, "b n -> b", "mean")


def no_arrow(x):
    y = x * 2
    return rearrange(y, "b n d")  # einops fails to read it: the statement is Python and raises its error


def exact_split(x):
    return rearrange(x, "b (h d) -> b h d", h=4, d=5)


class Attention(nn.Module):
    """Attention as x-transformers and vit-pytorch write it: einops layers and functions around matmuls."""

    def __init__(self, dim: int = 16, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.split_heads = Rearrange("b n (h d) -> b h n d", h=heads)
        self.merge_heads = Rearrange("b h n d -> b n (h d)")
        self.pool = Reduce("b n d -> b d", "mean")
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q = self.split_heads(q)
        k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (k, v))
        attn = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).softmax(dim=-1)
        out = self.merge_heads(attn @ v)
        return self.to_out(out) + repeat(self.pool(x), "b d -> b n d", n=x.shape[1])
