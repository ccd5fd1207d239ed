"""Per-call cost as an ATen region, in eager and under torch.compile: a layer, a tiny GPT model, and a loop.

The layer is the seed's relu(x @ w + b), x 8×32, w 32×32, b 32: small enough that
the cost is the Python round trip per operator, which is what a region removes.
The model is a nanoGPT (2 layers, 2 heads, 32 features, vocabulary 64) in eval
mode, called as ``model(idx)`` with B=1, T=8: every ``forward`` of its classes a
region, the submodules run inline; eager and torch.compile run the same model
with its classes' Python methods (``torch.compile(model)``). The loop is a GRU
cell unrolled over 32 steps (the cell of PyTorch's own RNN benchmarks,
benchmarks/fastrnns/cells.py), state 8×32, its outputs collected in a list and
stacked: ~600 ATen calls per call, the loop and the list kept in C++
(torch.compile, which traces all 32 steps, only with --gru-compile).

One PyTorch thread; the three variants run interleaved round by round in this
one process (``ppy_magic.bench``, the same measurement ``%ppy_bench`` uses), so
their ratios are comparable even on a busy machine. Prints µs per call (best
round) and the ratios against the targets: region/eager ≤ 0.75 and
compile/region ≥ 5 for the layer, region/eager ≤ 0.6 for the model and the GRU.

    python -m benchmarks.call_overhead [-n CALLS] [-r ROUNDS] [--no-compile] [--only layer|gpt|gru]
                                       [--gru-compile]

Exits 1 only when the measurement is broken (a variant could not run or
differs from eager), not when a target is missed: timings are for reading.
"""

from __future__ import annotations

import argparse
import sys
import types
from dataclasses import replace

import torch

from ppy_magic.bench import measure as bench
from tests.support.cells import compile_cell

SOURCE = """\
import torch
import ppy


@ppy.opt(3)
def layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b)


@ppy.opt(3)
def gru(xs, h, w_ih, w_hh, b_ih, b_hh):
    outs = []
    for x in xs:
        gi = torch.mm(x, w_ih.t()) + b_ih
        gh = torch.mm(h, w_hh.t()) + b_hh
        i_r, i_i, i_n = gi.chunk(3, 1)
        h_r, h_i, h_n = gh.chunk(3, 1)
        resetgate = (i_r + h_r).sigmoid()
        inputgate = torch.sigmoid(i_i + h_i)
        newgate = (i_n + resetgate * h_n).tanh()
        h = newgate + inputgate * (h - newgate)
        outs.append(h)
    return torch.stack(outs)
"""
FILENAME = "<call_overhead>"
REGION_OVER_EAGER_AT_MOST = 0.75
COMPILE_OVER_REGION_AT_LEAST = 5.0
MODEL_REGION_OVER_EAGER_AT_MOST = 0.6
GRU_REGION_OVER_EAGER_AT_MOST = 0.6

GPT_SOURCE = """\
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F
import ppy


@dataclass
class GPTConfig:
    block_size: int = 8
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    @ppy.opt(3)
    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                    .view(1, 1, config.block_size, config.block_size))

    @ppy.opt(3)
    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    @ppy.opt(3)
    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    @ppy.opt(3)
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    @ppy.opt(3)
    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.config.block_size
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x[:, [-1], :])
"""


def compile_source(source: str, filename: str, module: str) -> dict:
    """The source's regions, built the way a %%ppy cell builds them (cached under PPY_CACHE_DIR)."""
    namespace = types.ModuleType(module)
    sys.modules[module] = namespace  # dataclasses look their module up
    ns, report = compile_cell(source, namespace.__dict__, filename)
    if report.python:
        sys.exit(f"call_overhead: not everything compiled:\n{report.summary()}")
    return ns


def compile_layer(name: str = "layer"):
    region = compile_source(SOURCE, FILENAME, "__call_overhead__")[name]
    if not getattr(region, "__ppy_region__", False):
        sys.exit(f"call_overhead: {name} did not compile")
    return region


def gru_inputs() -> tuple[torch.Tensor, ...]:
    """32 steps of a batch of 8 with 32 features; a GRU of 32 hidden features."""
    g = torch.Generator().manual_seed(0)
    scale = 32**-0.5
    return (
        torch.randn(32, 8, 32, generator=g),
        torch.randn(8, 32, generator=g),
        torch.randn(96, 32, generator=g) * scale,
        torch.randn(96, 32, generator=g) * scale,
        torch.randn(96, generator=g) * scale,
        torch.randn(96, generator=g) * scale,
    )


def tiny_gpt() -> torch.nn.Module:
    ns = compile_source(GPT_SOURCE, "<call_overhead_gpt>", "__call_overhead_gpt__")
    torch.manual_seed(0)
    return ns["GPT"](ns["GPTConfig"]()).eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--number", type=int, default=20_000, help="calls per round (default 20,000)")
    parser.add_argument("-r", "--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    parser.add_argument("--only", choices=("layer", "gpt", "gru"), help="measure only one of the three")
    parser.add_argument("--gru-compile", action="store_true", help="time torch.compile of the GRU loop too")
    args = parser.parse_args(argv)
    options = bench.BenchOptions(number=args.number, repeat=args.repeat, threads=1, compile=not args.no_compile)
    broken = False
    if args.only in (None, "layer"):
        layer = compile_layer()
        g = torch.Generator().manual_seed(0)
        x, w, b = torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g), torch.randn(32, generator=g)
        result = bench.measure(layer, (x, w, b), options, arg_names=["x", "w", "b"])
        title = "relu(x @ w + b), x 8×32, w 32×32, b 32"
        broken |= report(result, title, args, REGION_OVER_EAGER_AT_MOST, COMPILE_OVER_REGION_AT_LEAST)
    if args.only in (None, "gpt"):
        model = tiny_gpt()
        idx = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(0))
        model_options = replace(options, number=max(1, options.number // 50))  # a model call is ~50 layers
        result = bench.measure(model, (idx,), model_options, arg_names=["idx"])
        title = "tiny GPT model(idx): 2 layers, 2 heads, 32 features, B=1, T=8, eval"
        broken |= report(result, title, args, MODEL_REGION_OVER_EAGER_AT_MOST, None, model_options.number)
    if args.only in (None, "gru"):
        gru = compile_layer("gru")
        gru_options = replace(
            options, number=max(1, options.number // 100), warmup=20, compile=args.gru_compile and options.compile
        )
        result = bench.measure(gru, gru_inputs(), gru_options, arg_names=["xs", "h", "w_ih", "w_hh", "b_ih", "b_hh"])
        title = "GRU cell over 32 steps (fastrnns), state 8×32, outputs stacked"
        gru_args = argparse.Namespace(**{**vars(args), "no_compile": not gru_options.compile})
        broken |= report(result, title, gru_args, GRU_REGION_OVER_EAGER_AT_MOST, None, gru_options.number)
    # Drop torch.compile's caches now: left to interpreter shutdown, dynamo's weakref
    # callbacks print an ignored KeyError (torch 2.13).
    torch._dynamo.reset()
    return 1 if broken else 0


def report(
    result: bench.BenchResult,
    title: str,
    args: argparse.Namespace,
    region_over_eager: float,
    compile_over_region: float | None,
    number: int | None = None,
) -> bool:
    """Print one measurement; True when it is broken (a variant failed or differs from eager)."""
    print(
        f"{title} · 1 thread · torch {torch.__version__} · "
        f"best of {args.repeat} rounds of {number or args.number:,} calls, interleaved"
    )
    broken = False
    for v in result.variants:
        if v.ran:
            first = f"  (first call, compiling: {v.first_call_s:.1f} s)" if v.first_call_s is not None else ""
            check = "" if v.matches_eager else f"  OUTPUT {v.check.upper()}"
            print(f"  {v.label:<16} {v.best_s * 1e6:7.2f} µs/call{first}{check}")
            broken |= not v.matches_eager
        else:
            print(f"  {v.label:<16} not run: {v.skipped}")
            broken |= v.label != bench.COMPILE or not args.no_compile
    if result.region_fallbacks:
        print(f"  the region fell back to Python {result.region_fallbacks:,} times ({result.last_fallback_reason})")
        broken = True

    region, eager, comp = result[bench.REGION], result[bench.EAGER], result[bench.COMPILE]
    if region.ran:
        ratio = region.best_s / eager.best_s
        print(
            f"  region/eager   = {ratio:.2f}  (target ≤ {region_over_eager}: "
            f"{'met' if ratio <= region_over_eager else 'MISSED'})"
        )
    if region.ran and comp.ran:
        ratio = comp.best_s / region.best_s
        target = (
            f"(target ≥ {compile_over_region:g}: {'met' if ratio >= compile_over_region else 'MISSED'})"
            if compile_over_region
            else ""
        )
        print(f"  compile/region = {ratio:.1f}   {target}".rstrip())
    return broken


if __name__ == "__main__":
    sys.exit(main())
