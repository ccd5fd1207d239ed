"""Model code as people write it, compiled together and compared with eager.

Activations, hand-written norms, rotary embeddings, attention, losses and a GPT-2
block, each a ``@ppy.opt(3)`` function of its inputs and weights, written the way
public model code (nanoGPT, HF transformers, LLaMA, sentence-transformers) writes
them. Every one must compile and match eager bitwise (outputs, and gradients
with respect to inputs and weights). The control-flow cases may instead stay
Python, with a reason located ``at L:C``; a wrong result or a crash is never
acceptable. The tests keep the three apart: a mismatch fails loudly on its own,
a function that stays Python fails with the list of reasons.
"""

from __future__ import annotations

import re

import pytest
import torch

from tests.support.batch import BUILD_FAILED, python_outcome
from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import CRASH, FAILURES, MATCH, PYTHON

CELL = """
import math
import torch
import torch.nn.functional as F
import ppy

EPS = 1e-5


@ppy.opt(3)
def gelu_tanh(x):
    # HF NewGELUActivation / nanoGPT new_gelu
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


@ppy.opt(3)
def gelu_erf(x):
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


@ppy.opt(3)
def gelu_functional(x):
    return F.gelu(x, approximate="tanh")


@ppy.opt(3)
def silu(x):
    return x * torch.sigmoid(x)


@ppy.opt(3)
def swiglu(x, w1, w2, w3):
    # LLaMA FeedForward: w2(silu(w1(x)) * w3(x))
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


@ppy.opt(3)
def swiglu_chunk(x):
    x, gate = x.chunk(2, dim=-1)
    return F.silu(gate) * x


@ppy.opt(3)
def rms_norm(x, weight, eps: float = 1e-6):
    # LLaMA RMSNorm
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return normed.type_as(x) * weight


@ppy.opt(3)
def t5_layer_norm(hidden_states, weight, eps: float = 1e-6):
    variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + eps)
    return weight * hidden_states


@ppy.opt(3)
def layer_norm_by_hand(x, weight, bias):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + EPS) * weight + bias


@ppy.opt(3)
def layer_norm_var(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + EPS) * weight + bias


@ppy.opt(3)
def softmax_by_hand(x):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


@ppy.opt(3)
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


@ppy.opt(3)
def apply_rotary_pos_emb(q, k, cos, sin):
    # HF LLaMA; calls another region of the cell
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


@ppy.opt(3)
def rope_cos_sin(seq_len: int, dim: int, base: float = 10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    t = torch.arange(seq_len, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


@ppy.opt(3)
def rotary_interleaved(x, cos, sin):
    # GPT-J style: rotate even/odd pairs
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


@ppy.opt(3)
def rotary_complex(xq, freqs_cis):
    # Meta LLaMA apply_rotary_emb
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq)


@ppy.opt(3)
def causal_attention(q, k, v):
    T = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = torch.tril(torch.ones(T, T, device=q.device)).view(1, 1, T, T)
    att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    return att @ v


@ppy.opt(3)
def causal_attention_buffer(q, k, v, bias):
    # nanoGPT's slow path: `bias` is the registered tril buffer
    B, nh, T, hs = q.size()
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    att = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    return att @ v


@ppy.opt(3)
def attention_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@ppy.opt(3)
def attention_sdpa_mask(q, k, v, mask, causal: bool):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else mask, dropout_p=0.0,
                                          is_causal=causal)


@ppy.opt(3)
def attention_einsum(q, k, v):
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return torch.einsum("bhqk,bhkd->bhqd", scores.softmax(dim=-1), v)


@ppy.opt(3)
def cross_entropy_gather(logits, targets):
    logp = F.log_softmax(logits, dim=-1)
    return -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1).mean()


@ppy.opt(3)
def cross_entropy_one_hot(logits, targets):
    logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    one_hot = F.one_hot(targets, num_classes=logits.size(-1)).to(logits.dtype)
    return -(one_hot * logp).sum(dim=-1).mean()


@ppy.opt(3)
def cross_entropy_functional(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


@ppy.opt(3)
def cross_entropy_smoothed(logits, targets):
    return F.cross_entropy(logits, targets, label_smoothing=0.1)


@ppy.opt(3)
def gpt2_mlp(x, c_fc_w, c_fc_b, c_proj_w, c_proj_b):
    h = F.gelu(F.linear(x, c_fc_w, c_fc_b), approximate="tanh")
    return F.linear(h, c_proj_w, c_proj_b)


@ppy.opt(3)
def gpt2_attention(x, c_attn_w, c_attn_b, c_proj_w, c_proj_b, n_head: int):
    B, T, C = x.size()
    q, k, v = F.linear(x, c_attn_w, c_attn_b).split(C, dim=2)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return F.linear(y, c_proj_w, c_proj_b)


@ppy.opt(3)
def gpt2_block(x, ln_1_w, ln_1_b, c_attn_w, c_attn_b, attn_proj_w, attn_proj_b, ln_2_w, ln_2_b,
               c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b, n_head: int):
    B, T, C = x.size()
    h = F.layer_norm(x, (C,), ln_1_w, ln_1_b, 1e-5)
    q, k, v = F.linear(h, c_attn_w, c_attn_b).split(C, dim=2)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    x = x + F.linear(y, attn_proj_w, attn_proj_b)
    h = F.layer_norm(x, (C,), ln_2_w, ln_2_b, 1e-5)
    x = x + F.linear(F.gelu(F.linear(h, c_fc_w, c_fc_b)), mlp_proj_w, mlp_proj_b)
    return x


@ppy.opt(3)
def gpt2_block_composed(x, ln_1_w, ln_1_b, c_attn_w, c_attn_b, attn_proj_w, attn_proj_b, ln_2_w, ln_2_b,
                        c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b, n_head: int):
    C = x.size(-1)
    x = x + gpt2_attention(F.layer_norm(x, (C,), ln_1_w, ln_1_b), c_attn_w, c_attn_b, attn_proj_w, attn_proj_b,
                           n_head)
    x = x + gpt2_mlp(F.layer_norm(x, (C,), ln_2_w, ln_2_b), c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b)
    return x


@ppy.opt(3)
def hf_conv1d(x, weight, bias):
    # HF GPT-2 Conv1D
    size_out = x.size()[:-1] + (weight.size(-1),)
    x = torch.addmm(bias, x.view(-1, x.size(-1)), weight)
    return x.view(size_out)


@ppy.opt(3)
def gpt2_embed(idx, wte, wpe):
    B, T = idx.size()
    pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
    return F.embedding(idx, wte) + F.embedding(pos, wpe)


@ppy.opt(3)
def lm_head_loss(x, ln_f_w, ln_f_b, wte, targets):
    x = F.layer_norm(x, (x.size(-1),), ln_f_w, ln_f_b, 1e-5)
    logits = F.linear(x, wte)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


@ppy.opt(3)
def top_k_probs(logits, temperature: float, top_k: int):
    # nanoGPT generate(): keep the top k logits of the last position
    logits = logits[:, -1, :] / temperature
    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
    logits[logits < v[:, [-1]]] = -float("Inf")
    return F.softmax(logits, dim=-1)


@ppy.opt(3)
def residual_inplace(x, y, w):
    h = x @ w
    h += y
    h.relu_()
    return h


@ppy.opt(3)
def add_into_input(x, y):
    x.add_(y, alpha=0.5)
    return x


@ppy.opt(3)
def dropout_residual(x, y, p: float):
    return x + F.dropout(y, p=p, training=True)


@ppy.opt(3)
def clip_logits(image_features, text_features, logit_scale):
    image_features = image_features / image_features.norm(dim=-1, keepdim=True)
    text_features = text_features / text_features.norm(dim=-1, keepdim=True)
    return logit_scale.exp() * image_features @ text_features.t()


@ppy.opt(3)
def mean_pooling(token_embeddings, attention_mask):
    # sentence-transformers
    mask = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
    return torch.sum(token_embeddings * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


@ppy.opt(3)
def conv_block(x, w, b):
    return F.max_pool2d(F.relu(F.conv2d(x, w, b, stride=1, padding=1)), 2)


@ppy.opt(3)
def batch_norm_eval(x, running_mean, running_var, weight, bias):
    return F.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=1e-5)


@ppy.opt(3)
def mse_by_hand(pred, target):
    return ((pred - target) ** 2).mean()


# ---- constructs model code leans on ----------------------------------------------------------------------------


@ppy.opt(3)
def max_over_time(x):
    return torch.max(x, 1)


@ppy.opt(3)
def concat_heads(heads: list, w):
    return torch.cat(heads, dim=-1) @ w


@ppy.opt(3)
def clamp_input(input, min: float, max: float):
    return torch.clamp(input, min=min, max=max)


@ppy.opt(3)
def last_and_strided(x):
    return x[..., -1], x[:, None, ..., ::2]


@ppy.opt(3)
def masked_mean(x, mask):
    return x[mask].mean()


@ppy.opt(3)
def gather_rows(table, idx):
    return table[idx] * 2


@ppy.opt(3)
def write_into_slice(x, y):
    out = x.clone()
    out[:, :2] = y
    return out


# ---- control flow: compile and match, or stay Python with a located reason ----------------------------------


@ppy.opt(3)
def linear_maybe_bias(x, w, b=None):
    y = x @ w.t()
    if b is not None:
        y = y + b
    return y


@ppy.opt(3)
def activation(x, kind: str):
    if kind == "gelu":
        return F.gelu(x)
    elif kind == "relu":
        return F.relu(x)
    return F.silu(x)


@ppy.opt(3)
def maybe_dropout(x, training: bool):
    if training:
        x = F.dropout(x, 0.1)
    return x * 2


@ppy.opt(3)
def scaled(x, scale: float | None = None):
    return x if scale is None else x * scale


@ppy.opt(3)
def tanh_stack(x, w, n_layers: int):
    for _ in range(n_layers):
        x = torch.tanh(x @ w)
    return x


@ppy.opt(3)
def residual_stack(x, w1, w2, n_layers: int):
    for i in range(n_layers):
        x = x + F.gelu(x @ w1) @ w2 * (1.0 / (i + 1))
    return x


@ppy.opt(3)
def checked_matmul(x, w):
    assert x.size(-1) == w.size(0), "inner dimensions differ"
    return x @ w


@ppy.opt(3)
def repeat_kv(x, n_rep: int):
    # LLaMA grouped-query attention
    bs, n_kv_heads, slen, head_dim = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(bs, n_kv_heads, n_rep, slen, head_dim).reshape(
        bs, n_kv_heads * n_rep, slen, head_dim)


@ppy.opt(3)
def relu_if_positive_sum(x):
    if x.sum() > 0:
        return torch.relu(x)
    return x


@ppy.opt(3)
def halve_until_small(x):
    while x.abs().max() > 1:
        x = x / 2
    return x
"""

CONTROL_FLOW = (
    "linear_maybe_bias",
    "activation",
    "maybe_dropout",
    "scaled",
    "tanh_stack",
    "residual_stack",
    "checked_matmul",
    "repeat_kv",
    "relu_if_positive_sum",
    "halve_until_small",
)

_seed = iter(range(10**6))


def t(*shape, grad=True, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(next(_seed))
    return (torch.randn(*shape, generator=g, dtype=dtype) * scale).requires_grad_(grad)


def ints(high, *shape):
    g = torch.Generator().manual_seed(next(_seed))
    return torch.randint(0, high, shape, generator=g)


B, T, C, NH, V = 2, 5, 8, 2, 11


def gpt2_weights():
    return (t(C), t(C), t(3 * C, C), t(3 * C), t(C, C), t(C), t(C), t(C), t(4 * C, C), t(4 * C), t(C, 4 * C), t(C))


def _causal_bias():
    return torch.tril(torch.ones(T, T)).view(1, 1, T, T)


# name -> calls: each a function returning (args, kwargs); fresh tensors each time.
CALLS = {
    "gelu_tanh": [lambda: ((t(4, 8),), {})],
    "gelu_erf": [lambda: ((t(4, 8),), {})],
    "gelu_functional": [lambda: ((t(4, 8),), {})],
    "silu": [lambda: ((t(4, 8),), {})],
    "swiglu": [lambda: ((t(B, T, C), t(16, C), t(C, 16), t(16, C)), {})],
    "swiglu_chunk": [lambda: ((t(B, T, 2 * C),), {})],
    "rms_norm": [lambda: ((t(B, T, C), t(C)), {}), lambda: ((t(B, T, C, dtype=torch.bfloat16), t(C)), {"eps": 1e-5})],
    "t5_layer_norm": [lambda: ((t(B, T, C), t(C)), {})],
    "layer_norm_by_hand": [lambda: ((t(B, T, C), t(C), t(C)), {})],
    "layer_norm_var": [lambda: ((t(B, T, C), t(C), t(C)), {})],
    "softmax_by_hand": [lambda: ((t(B, T, C, scale=5.0),), {})],
    "rotate_half": [lambda: ((t(B, NH, T, C),), {})],
    "apply_rotary_pos_emb": [lambda: ((t(B, NH, T, C), t(B, NH, T, C), t(T, C, grad=False), t(T, C, grad=False)), {})],
    "rope_cos_sin": [lambda: ((T, C), {}), lambda: ((3, 4), {"base": 500.0})],
    "rotary_interleaved": [lambda: ((t(B, T, C), t(T, C // 2, grad=False), t(T, C // 2, grad=False)), {})],
    "rotary_complex": [
        lambda: ((t(B, T, NH, C), torch.polar(torch.ones(T, 1, C // 2), t(T, 1, C // 2, grad=False))), {})
    ],
    "causal_attention": [lambda: ((t(B, NH, T, C), t(B, NH, T, C), t(B, NH, T, C)), {})],
    "causal_attention_buffer": [lambda: ((t(B, NH, T, C), t(B, NH, T, C), t(B, NH, T, C), _causal_bias()), {})],
    "attention_sdpa": [lambda: ((t(B, NH, T, C), t(B, NH, T, C), t(B, NH, T, C)), {})],
    "attention_sdpa_mask": [
        lambda: ((t(B, NH, T, C), t(B, NH, T, C), t(B, NH, T, C), _causal_bias().bool(), False), {}),
        lambda: ((t(B, NH, T, C), t(B, NH, T, C), t(B, NH, T, C), _causal_bias().bool(), True), {}),
    ],
    "attention_einsum": [lambda: ((t(B, NH, T, C), t(B, NH, T, C), t(B, NH, T, C)), {})],
    "cross_entropy_gather": [lambda: ((t(B * T, V), ints(V, B * T)), {})],
    "cross_entropy_one_hot": [lambda: ((t(B * T, V), ints(V, B * T)), {})],
    "cross_entropy_functional": [lambda: ((t(B, T, V), ints(V, B, T)), {})],
    "cross_entropy_smoothed": [lambda: ((t(B * T, V), ints(V, B * T)), {})],
    "gpt2_mlp": [lambda: ((t(B, T, C), t(4 * C, C), t(4 * C), t(C, 4 * C), t(C)), {})],
    "gpt2_attention": [lambda: ((t(B, T, C), t(3 * C, C), t(3 * C), t(C, C), t(C), NH), {})],
    "gpt2_block": [lambda: ((t(B, T, C), *gpt2_weights(), NH), {})],
    "gpt2_block_composed": [lambda: ((t(B, T, C), *gpt2_weights(), NH), {})],
    "hf_conv1d": [lambda: ((t(B, T, C), t(C, 3 * C), t(3 * C)), {})],
    "gpt2_embed": [lambda: ((ints(V, B, T), t(V, C), t(T, C)), {})],
    "lm_head_loss": [lambda: ((t(B, T, C), t(C), t(C), t(V, C), ints(V, B, T)), {})],
    "top_k_probs": [lambda: ((t(B, T, V), 0.8, 3), {})],
    "residual_inplace": [lambda: ((t(4, C), t(4, C), t(C, C)), {})],
    "add_into_input": [lambda: ((t(4, C, grad=False), t(4, C)), {})],
    "dropout_residual": [lambda: ((t(4, C), t(4, C), 0.25), {})],
    "clip_logits": [lambda: ((t(3, C), t(4, C), t((), grad=True)), {})],
    "mean_pooling": [lambda: ((t(B, T, C), ints(2, B, T)), {})],
    "conv_block": [lambda: ((t(2, 3, 8, 8), t(4, 3, 3, 3), t(4)), {})],
    "batch_norm_eval": [lambda: ((t(4, 3, 5), t(3, grad=False), t(3, grad=False).abs(), t(3), t(3)), {})],
    "mse_by_hand": [lambda: ((t(4, C), t(4, C)), {})],
    "max_over_time": [lambda: ((t(B, T, C),), {})],
    "concat_heads": [lambda: (([t(B, T, C // 2) for _ in range(NH)], t(C, C)), {})],
    "clamp_input": [lambda: ((t(4, C), -0.5, 0.5), {})],
    "last_and_strided": [lambda: ((t(B, T, C),), {})],
    "masked_mean": [lambda: ((t(4, C), t(4, C, grad=False) > 0), {})],
    "gather_rows": [lambda: ((t(V, C), ints(V, 7)), {})],
    "write_into_slice": [lambda: ((t(4, C), t(4, 2)), {})],
    "linear_maybe_bias": [lambda: ((t(4, C), t(3, C), t(3)), {}), lambda: ((t(4, C), t(3, C)), {})],
    "activation": [lambda: ((t(4, C), "gelu"), {}), lambda: ((t(4, C), "relu"), {}), lambda: ((t(4, C), "silu"), {})],
    "maybe_dropout": [lambda: ((t(4, C), True), {}), lambda: ((t(4, C), False), {})],
    "scaled": [lambda: ((t(4, C),), {}), lambda: ((t(4, C), 0.5), {})],
    "tanh_stack": [lambda: ((t(4, C), t(C, C), 3), {}), lambda: ((t(4, C), t(C, C), 0), {})],
    "residual_stack": [lambda: ((t(4, C), t(C, C), t(C, C), 2), {})],
    "checked_matmul": [lambda: ((t(4, C), t(C, 3)), {}), lambda: ((t(4, C), t(3, C)), {})],
    "repeat_kv": [lambda: ((t(B, NH, T, C), 2), {}), lambda: ((t(B, NH, T, C), 1), {})],
    "relu_if_positive_sum": [lambda: ((t(4, C) + 5,), {}), lambda: ((t(4, C) - 5,), {})],
    "halve_until_small": [lambda: ((t(4, C, scale=10.0),), {})],
}


def _model_names() -> list[str]:
    import ast

    return [n.name for n in ast.parse(CELL).body if isinstance(n, ast.FunctionDef)]


def test_every_function_of_the_cell_has_inputs():
    assert sorted(_model_names()) == sorted(CALLS)
    assert set(CONTROL_FLOW) <= set(CALLS)


def _cell_for(name: str) -> str:
    """The cell with only `name` and the cell functions it calls (transitively): the others' lines blanked,
    so that every line keeps its number."""
    import ast

    defs = {n.name: n for n in ast.parse(CELL).body if isinstance(n, ast.FunctionDef)}
    wanted, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in wanted:
            wanted.add(current)
            todo += [
                n.func.id
                for n in ast.walk(defs[current])
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defs
            ]
    lines = CELL.splitlines()
    for other, node in defs.items():
        if other not in wanted:
            for i in range(node.decorator_list[0].lineno - 1, node.end_lineno):
                lines[i] = ""
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def cell():
    ns, report = compile_cell(CELL, filename="<ppy-models>")
    return ns, report


@pytest.fixture(scope="module")
def build_failure(cell):
    _, report = cell
    return next((r for _, r in report.python if r.startswith(BUILD_FAILED)), None)


@pytest.fixture(scope="module")
def outcomes(cell, build_failure):
    ns, report = cell
    results = {}
    for name, calls in CALLS.items():
        f, rep = ns[name], report
        if build_failure is not None:
            # The whole cell's build failed (a compiler bug, failed on its own below): compile each function
            # alone so that the lists still say which functions compile and match.
            sub_ns, rep = compile_cell(_cell_for(name), filename=f"<ppy-models-{name}>")
            f = sub_ns[name]
        per_call = []
        for make in calls:
            args, kwargs = make()
            if is_region(f):
                per_call.append(compare_call(f, args, kwargs))
            else:
                per_call.append(python_outcome(f, rep))
        results[name] = per_call
    compiled = [n for n, r in results.items() if r[0][0] not in (PYTHON, CRASH)]
    print(f"\nmodels: {len(compiled)} of {len(results)} functions compiled: {', '.join(compiled)}")
    return results


def test_the_cell_builds(build_failure):
    assert build_failure is None, f"the model cell's C++ build failed: {build_failure}"


def test_model_inputs_run_in_eager(cell):
    # The suite's own sanity: every call is valid eager code (except the one meant to fail its assert).
    ns, _ = cell
    for name, calls in CALLS.items():
        py = getattr(ns[name], "__wrapped__", ns[name])
        for i, make in enumerate(calls):
            args, kwargs = make()
            if (name, i) == ("checked_matmul", 1):
                with pytest.raises(AssertionError, match="inner dimensions differ"):
                    py(*args, **kwargs)
            else:
                py(*args, **kwargs)


def test_no_model_function_differs_from_eager(outcomes):
    bad = [
        f"{name} (call {i}): {status}: {detail}"
        for name, results in outcomes.items()
        for i, (status, detail) in enumerate(results)
        if status in FAILURES
    ]
    assert not bad, "MISMATCH or crash in model code:\n" + "\n".join(bad)


def test_every_model_function_compiles(outcomes):
    python = [
        f"{name}: {results[0][1]}"
        for name, results in outcomes.items()
        if name not in CONTROL_FLOW and results[0][0] == PYTHON
    ]
    assert not python, f"{len(python)} model functions stay Python:\n" + "\n".join(python)


def test_model_functions_that_compiled_match_on_every_call(outcomes):
    partial = [
        f"{name} (call {i}): {status}: {detail}"
        for name, results in outcomes.items()
        if results[0][0] not in (PYTHON, CRASH)
        for i, (status, detail) in enumerate(results)
        if status != MATCH
    ]
    assert not partial, "\n".join(partial)


LOCATED = re.compile(r"^at \d+:\d+: ")
# What a reason looks like when the compiler's own failure leaked into it instead of a user-facing reason.
INTERNALS = re.compile(
    r"ppy_magic|\.py\b|Traceback|\b(AttributeError|KeyError|IndexError|NameError|"
    r"UnboundLocalError|RecursionError)\b"
)


def test_control_flow_compiles_and_matches_or_stays_python_with_a_located_reason(outcomes):
    unlocated = []
    for name in CONTROL_FLOW:
        status, reason = outcomes[name][0]
        if status == PYTHON and not LOCATED.match(reason):
            unlocated.append(f"{name}: {reason}")
    assert not unlocated, "control flow stays Python without a located reason:\n" + "\n".join(unlocated)


def test_reasons_do_not_leak_compiler_internals(outcomes):
    leaked = [
        f"{name}: {results[0][1]}"
        for name, results in outcomes.items()
        if results[0][0] == PYTHON and (not LOCATED.match(results[0][1]) or INTERNALS.search(results[0][1]))
    ]
    assert not leaked, "reasons without a location, or with the compiler's internals in them:\n" + "\n".join(leaked)
