"""Model code compiled at its first call: every function here stays Python when the cell compiles and must
be a region after its first call, bitwise equal to eager, gradients included.

Each case is public code, copied as its repository writes it (small edits, each named in the comment
above it, only to make it self-contained), and each stays Python at the cell for one reason only: the
source does not say what a name is, the call does. A parameter without an annotation (``n_heads`` of
``__init__``, ``embedding_dim``), one annotated with something regions do not read (``NestedTensor``,
``Union[int, Tuple[int, int]]``), ``self.<attr>`` assigned from a plain config object's field (minGPT's
CfgNode, a Hugging Face config as a plain class, a ``types.SimpleNamespace``), a module built from a class
or a ``functools.partial`` passed in (timm's ``act_layer`` / ``norm_layer``), an activation chosen by a
string (``ACT2FN[config.hidden_act]``), a callable or module passed as an argument or kept in an attribute
(a lambda, ``F.gelu``, ``nn.Dropout``), a free name bound to a module instance (``gelu``), and flags that
decide a branch or a name's kind (``x if scale is None else scale``, ``sum()`` of a list, a config field).

The protocol per case (``_twice``): build the model and inputs from fixed seeds, call once (the first call
runs the Python body and starts the build of the variant), ``ppy_magic.wait()`` for the build, then call
again with the same objects, reseeded, and back-propagate the sum of the floating outputs. The same is done
with the cell run as plain Python; outputs, the gradients of every leaf input and every parameter, and the
buffers (running statistics) must be equal bit for bit, and the second call must have run the region.
The decorated helpers that need no call-time value (``HELPERS_COMPILED``) compile at the cell, as today.
Cost: one build of the cell (those helpers) and one variant per case, built in the background at the
first calls; with every build cached the file takes about ten seconds.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import torch
from torch import nn

import ppy_magic
from tests.support.cells import assert_same, compile_cell, is_region
from tests.support.eager import compare_call, tensors_in
from tests.support.inputs import Inputs
from tests.support.outcomes import MATCH

CELL = '''
import collections.abc
import copy
import math
import os
from collections import OrderedDict
from functools import partial
from itertools import repeat
from typing import Callable, Final, List, Optional, Tuple, Type, Union

import torch
import torch as th
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.nn.functional import log_softmax

import ppy


# ==== karpathy/minGPT: mingpt/utils.py, mingpt/model.py ===============================================
# The config is minGPT's CfgNode (a plain object, not a dataclass); its __str__ / to_dict / merge_from_args
# helpers are left out.
class CfgNode:
    """ a lightweight configuration class inspired by yacs """

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def merge_from_dict(self, d):
        self.__dict__.update(d)


# karpathy/minGPT: mingpt/model.py (a helper: compiles at the cell; Block's MLP calls it)
class NewGELU(nn.Module):
    @ppy.opt(3)
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


# karpathy/minGPT: mingpt/model.py
class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        # regularization
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    @ppy.opt(3)
    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k ,v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y


# karpathy/minGPT: mingpt/model.py
class Block(nn.Module):
    """ an unassuming Transformer block """

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.ModuleDict(dict(
            c_fc    = nn.Linear(config.n_embd, 4 * config.n_embd),
            c_proj  = nn.Linear(4 * config.n_embd, config.n_embd),
            act     = NewGELU(),
            dropout = nn.Dropout(config.resid_pdrop),
        ))
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x)))) # MLP forward

    @ppy.opt(3)
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlpf(self.ln_2(x))
        return x


# karpathy/minGPT: mingpt/model.py (from_pretrained, configure_optimizers and generate left out; the
# parameter count is not printed)
class GPT(nn.Module):
    """ GPT Language Model """

    @staticmethod
    def get_default_config():
        C = CfgNode()
        # either model_type or (n_layer, n_head, n_embd) must be given in the config
        C.model_type = 'gpt'
        C.n_layer = None
        C.n_head = None
        C.n_embd =  None
        # these options must be filled in externally
        C.vocab_size = None
        C.block_size = None
        # dropout hyperparameters
        C.embd_pdrop = 0.1
        C.resid_pdrop = 0.1
        C.attn_pdrop = 0.1
        return C

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.block_size = config.block_size

        type_given = config.model_type is not None
        params_given = all([config.n_layer is not None, config.n_head is not None, config.n_embd is not None])
        assert type_given ^ params_given # exactly one of these (XOR)
        if type_given:
            # translate from model_type to detailed configuration
            config.merge_from_dict({
                # names follow the huggingface naming conventions
                # GPT-1
                'openai-gpt':   dict(n_layer=12, n_head=12, n_embd=768),  # 117M params
                # GPT-2 configs
                'gpt2':         dict(n_layer=12, n_head=12, n_embd=768),  # 124M params
                'gpt2-medium':  dict(n_layer=24, n_head=16, n_embd=1024), # 350M params
                'gpt2-large':   dict(n_layer=36, n_head=20, n_embd=1280), # 774M params
                'gpt2-xl':      dict(n_layer=48, n_head=25, n_embd=1600), # 1558M params
                # Gophers
                'gopher-44m':   dict(n_layer=8, n_head=16, n_embd=512),
                # (there are a number more...)
                # I made these tiny models up
                'gpt-mini':     dict(n_layer=6, n_head=6, n_embd=192),
                'gpt-micro':    dict(n_layer=4, n_head=4, n_embd=128),
                'gpt-nano':     dict(n_layer=3, n_head=3, n_embd=48),
            }[config.model_type])

        self.transformer = nn.ModuleDict(dict(
            wte = nn.Embedding(config.vocab_size, config.n_embd),
            wpe = nn.Embedding(config.block_size, config.n_embd),
            drop = nn.Dropout(config.embd_pdrop),
            h = nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f = nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        # init all weights, and apply a special scaled init to the residual projections, per GPT-2 paper
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02/math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    @ppy.opt(3)
    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0) # shape (1, t)

        # forward the GPT model itself
        tok_emb = self.transformer.wte(idx) # token embeddings of shape (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos) # position embeddings of shape (1, t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)

        # if we are given some desired targets also calculate the loss
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        return logits, loss


# ==== huggingface/pytorch-image-models (timm) =======================================================
# huggingface/pytorch-image-models: timm/layers/helpers.py
def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    return parse


to_2tuple = _ntuple(2)


# huggingface/pytorch-image-models: timm/layers/helpers.py
def make_divisible(v, divisor=8, min_value=None, round_limit=.9):
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    # Make sure that round down does not go down by more than 10%.
    if new_v < round_limit * v:
        new_v += divisor
    return new_v


# huggingface/pytorch-image-models: timm/layers/config.py (the environment variables are not read: fused
# attention on, not exporting)
_HAS_FUSED_ATTN = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
_EXPORTABLE = False
_USE_FUSED_ATTN = 1  # 0 == off, 1 == on (for tested use), 2 == on (for experimental use)


def use_fused_attn(experimental: bool = False) -> bool:
    # NOTE: ONNX export cannot handle F.scaled_dot_product_attention as of pytorch 2.0
    if not _HAS_FUSED_ATTN or _EXPORTABLE:
        return False
    if experimental:
        return _USE_FUSED_ATTN > 1
    return _USE_FUSED_ATTN > 0


# huggingface/pytorch-image-models: timm/layers/activations.py (a helper: compiles at the cell)
class Sigmoid(nn.Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    @ppy.opt(3)
    def forward(self, x):
        return x.sigmoid_() if self.inplace else x.sigmoid()


# huggingface/pytorch-image-models: timm/layers/create_act.py (the table of activation layers, cut to the
# entries used here; no memory-efficient variants, as when exporting)
_ACT_LAYER_DEFAULT = dict(
    silu=nn.SiLU,
    swish=nn.SiLU,
    relu=nn.ReLU,
    relu6=nn.ReLU6,
    gelu=nn.GELU,
    sigmoid=Sigmoid,
    tanh=nn.Tanh,
    hard_sigmoid=nn.Hardsigmoid,
    identity=nn.Identity,
)


def get_act_layer(name='relu'):
    if name is None:
        return None
    if not isinstance(name, str):
        # callable, module, etc
        return name
    if not name:
        return None
    name = name.lower()
    return _ACT_LAYER_DEFAULT[name]


def create_act_layer(name, inplace=None, **kwargs):
    act_layer = get_act_layer(name)
    if act_layer is None:
        return None
    if inplace is None:
        return act_layer(**kwargs)
    try:
        return act_layer(inplace=inplace, **kwargs)
    except TypeError:
        # recover if act layer doesn't have inplace arg
        return act_layer(**kwargs)


# huggingface/pytorch-image-models: timm/layers/drop.py (helpers: compile at the cell)
@ppy.opt(3)
def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # work with diff dim tensors, not just 2D ConvNets
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0., scale_by_keep: bool = True):
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    @ppy.opt(3)
    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)


# huggingface/pytorch-image-models: timm/layers/mlp.py
class Mlp(nn.Module):
    def __init__(
            self,
            in_features: int,
            hidden_features: Optional[int] = None,
            out_features: Optional[int] = None,
            act_layer: Type[nn.Module] = nn.GELU,
            norm_layer: Optional[Type[nn.Module]] = None,
            bias: Union[bool, Tuple[bool, bool]] = True,
            drop: Union[float, Tuple[float, float]] = 0.,
            use_conv: bool = False,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias = to_2tuple(bias)
        drop_probs = to_2tuple(drop)
        linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear

        self.fc1 = linear_layer(in_features, hidden_features, bias=bias[0], **dd)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop_probs[0])
        self.norm = norm_layer(hidden_features, **dd) if norm_layer is not None else nn.Identity()
        self.fc2 = linear_layer(hidden_features, out_features, bias=bias[1], **dd)
        self.drop2 = nn.Dropout(drop_probs[1])

    @ppy.opt(3)
    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


# huggingface/pytorch-image-models: timm/layers/mlp.py (init_weights left out)
class GluMlp(nn.Module):
    def __init__(
            self,
            in_features: int,
            hidden_features: Optional[int] = None,
            out_features: Optional[int] = None,
            act_layer: Type[nn.Module] = nn.Sigmoid,
            norm_layer: Optional[Type[nn.Module]] = None,
            bias: Union[bool, Tuple[bool, bool]] = True,
            drop: Union[float, Tuple[float, float]] = 0.,
            use_conv: bool = False,
            gate_last: bool = True,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        assert hidden_features % 2 == 0
        bias = to_2tuple(bias)
        drop_probs = to_2tuple(drop)
        linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear
        self.chunk_dim = 1 if use_conv else -1
        self.gate_last = gate_last  # use second half of width for gate

        self.fc1 = linear_layer(in_features, hidden_features, bias=bias[0], **dd)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop_probs[0])
        self.norm = norm_layer(hidden_features // 2, **dd) if norm_layer is not None else nn.Identity()
        self.fc2 = linear_layer(hidden_features // 2, out_features, bias=bias[1], **dd)
        self.drop2 = nn.Dropout(drop_probs[1])

    @ppy.opt(3)
    def forward(self, x):
        x = self.fc1(x)
        x1, x2 = x.chunk(2, dim=self.chunk_dim)
        x = x1 * self.act(x2) if self.gate_last else self.act(x1) * x2
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


# huggingface/pytorch-image-models: timm/layers/mlp.py (init_weights left out)
class SwiGLU(nn.Module):
    def __init__(
            self,
            in_features: int,
            hidden_features: Optional[int] = None,
            out_features: Optional[int] = None,
            act_layer: Type[nn.Module] = nn.SiLU,
            norm_layer: Optional[Type[nn.Module]] = None,
            bias: Union[bool, Tuple[bool, bool]] = True,
            drop: Union[float, Tuple[float, float]] = 0.,
            align_to: int = 0,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias = to_2tuple(bias)
        drop_probs = to_2tuple(drop)

        if align_to:
            hidden_features = hidden_features + (-hidden_features % align_to)

        self.fc1_g = nn.Linear(in_features, hidden_features, bias=bias[0], **dd)
        self.fc1_x = nn.Linear(in_features, hidden_features, bias=bias[0], **dd)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop_probs[0])
        self.norm = norm_layer(hidden_features, **dd) if norm_layer is not None else nn.Identity()
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias[1], **dd)
        self.drop2 = nn.Dropout(drop_probs[1])

    @ppy.opt(3)
    def forward(self, x):
        x_gate = self.fc1_g(x)
        x = self.fc1_x(x)
        x = self.act(x_gate) * x
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


# huggingface/pytorch-image-models: timm/models/mlp_mixer.py (the gate of GatedMlp; init_weights left out)
class SpatialGatingUnit(nn.Module):
    def __init__(
            self,
            dim: int,
            seq_len: int,
            norm_layer: Type[nn.Module] = nn.LayerNorm,
            device=None,
            dtype=None,
    ) -> None:
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        gate_dim = dim // 2
        self.norm = norm_layer(gate_dim, **dd)
        self.proj = nn.Linear(seq_len, seq_len, **dd)

    @ppy.opt(3)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, v = x.chunk(2, dim=-1)
        v = self.norm(v)
        v = self.proj(v.transpose(-1, -2))
        return u * v.transpose(-1, -2)


# huggingface/pytorch-image-models: timm/layers/mlp.py
class GatedMlp(nn.Module):
    def __init__(
            self,
            in_features: int,
            hidden_features: Optional[int] = None,
            out_features: Optional[int] = None,
            act_layer: Type[nn.Module] = nn.GELU,
            norm_layer: Optional[Type[nn.Module]] = None,
            gate_layer: Optional[Type[nn.Module]] = None,
            bias: Union[bool, Tuple[bool, bool]] = True,
            drop: Union[float, Tuple[float, float]] = 0.,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias = to_2tuple(bias)
        drop_probs = to_2tuple(drop)

        self.fc1 = nn.Linear(in_features, hidden_features, bias=bias[0], **dd)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop_probs[0])
        if gate_layer is not None:
            assert hidden_features % 2 == 0
            self.gate = gate_layer(hidden_features, **dd)
            hidden_features = hidden_features // 2  # FIXME base reduction on gate property?
        else:
            self.gate = nn.Identity()
        self.norm = norm_layer(hidden_features, **dd) if norm_layer is not None else nn.Identity()
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias[1], **dd)
        self.drop2 = nn.Dropout(drop_probs[1])

    @ppy.opt(3)
    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.gate(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


# huggingface/pytorch-image-models: timm/layers/mlp.py
class ConvMlp(nn.Module):
    def __init__(
            self,
            in_features: int,
            hidden_features: Optional[int] = None,
            out_features: Optional[int] = None,
            act_layer: Type[nn.Module] = nn.ReLU,
            norm_layer: Optional[Type[nn.Module]] = None,
            bias: Union[bool, Tuple[bool, bool]] = True,
            drop: float = 0.,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias = to_2tuple(bias)

        self.fc1 = nn.Conv2d(in_features, hidden_features, kernel_size=1, bias=bias[0], **dd)
        self.norm = norm_layer(hidden_features, **dd) if norm_layer else nn.Identity()
        self.act = act_layer()
        self.drop = nn.Dropout(drop)
        self.fc2 = nn.Conv2d(hidden_features, out_features, kernel_size=1, bias=bias[1], **dd)

    @ppy.opt(3)
    def forward(self, x):
        x = self.fc1(x)
        x = self.norm(x)
        x = self.act(x)
        x = self.drop(x)
        x = self.fc2(x)
        return x


# huggingface/pytorch-image-models: timm/layers/grn.py (a helper: compiles at the cell)
class GlobalResponseNorm(nn.Module):
    def __init__(
            self,
            dim: int,
            eps: float = 1e-6,
            channels_last: bool = True,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        self.eps = eps
        if channels_last:
            self.spatial_dim = (1, 2)
            self.channel_dim = -1
            self.wb_shape = (1, 1, 1, -1)
        else:
            self.spatial_dim = (2, 3)
            self.channel_dim = 1
            self.wb_shape = (1, -1, 1, 1)

        self.weight = nn.Parameter(torch.zeros(dim, **dd))
        self.bias = nn.Parameter(torch.zeros(dim, **dd))

    @ppy.opt(3)
    def forward(self, x):
        x_g = x.norm(p=2, dim=self.spatial_dim, keepdim=True)
        x_n = x_g / (x_g.mean(dim=self.channel_dim, keepdim=True) + self.eps)
        return x + torch.addcmul(self.bias.view(self.wb_shape), self.weight.view(self.wb_shape), x * x_n)


# huggingface/pytorch-image-models: timm/layers/mlp.py
class GlobalResponseNormMlp(nn.Module):
    def __init__(
            self,
            in_features: int,
            hidden_features: Optional[int] = None,
            out_features: Optional[int] = None,
            act_layer: Type[nn.Module] = nn.GELU,
            bias: Union[bool, Tuple[bool, bool]] = True,
            drop: Union[float, Tuple[float, float]] = 0.,
            use_conv: bool = False,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        bias = to_2tuple(bias)
        drop_probs = to_2tuple(drop)
        linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear

        self.fc1 = linear_layer(in_features, hidden_features, bias=bias[0], **dd)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop_probs[0])
        self.grn = GlobalResponseNorm(hidden_features, channels_last=not use_conv, **dd)
        self.fc2 = linear_layer(hidden_features, out_features, bias=bias[1], **dd)
        self.drop2 = nn.Dropout(drop_probs[1])

    @ppy.opt(3)
    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.grn(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


# huggingface/pytorch-image-models: timm/layers/squeeze_excite.py
class SEModule(nn.Module):
    def __init__(
            self,
            channels: int,
            rd_ratio: float = 1. / 16,
            rd_channels: Optional[int] = None,
            rd_divisor: int = 8,
            add_maxpool: bool = False,
            bias: bool = True,
            act_layer: Type[nn.Module] = nn.ReLU,
            norm_layer: Optional[Type[nn.Module]] = None,
            gate_layer: Union[str, Type[nn.Module]] = 'sigmoid',
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        self.add_maxpool = add_maxpool
        if not rd_channels:
            rd_channels = make_divisible(channels * rd_ratio, rd_divisor, round_limit=0.)
        self.fc1 = nn.Conv2d(channels, rd_channels, kernel_size=1, bias=bias, **dd)
        self.bn = norm_layer(rd_channels, **dd) if norm_layer else nn.Identity()
        self.act = create_act_layer(act_layer, inplace=True)
        self.fc2 = nn.Conv2d(rd_channels, channels, kernel_size=1, bias=bias, **dd)
        self.gate = create_act_layer(gate_layer)

    @ppy.opt(3)
    def forward(self, x):
        x_se = x.mean((2, 3), keepdim=True)
        if self.add_maxpool:
            # experimental codepath, may remove or change
            x_se = 0.5 * x_se + 0.5 * x.amax((2, 3), keepdim=True)
        x_se = self.fc1(x_se)
        x_se = self.act(self.bn(x_se))
        x_se = self.fc2(x_se)
        return x * self.gate(x_se)


# huggingface/pytorch-image-models: timm/layers/eca.py
class EcaModule(nn.Module):
    def __init__(
            self,
            channels: Optional[int] = None,
            kernel_size: int = 3,
            gamma: float = 2,
            beta: float = 1,
            act_layer: Optional[Type[nn.Module]] = None,
            gate_layer: Union[str, Type[nn.Module]] = 'sigmoid',
            rd_ratio: float = 1/8,
            rd_channels: Optional[int] = None,
            rd_divisor: int = 8,
            use_mlp: bool = False,
            device=None,
            dtype=None,
    ):
        dd = {'device': device, 'dtype': dtype}
        super().__init__()
        if channels is not None:
            t = int(abs(math.log(channels, 2) + beta) / gamma)
            kernel_size = max(t if t % 2 else t + 1, 3)
        assert kernel_size % 2 == 1
        padding = (kernel_size - 1) // 2
        if use_mlp:
            # NOTE 'mlp' mode is a timm experiment, not in paper
            assert channels is not None
            if rd_channels is None:
                rd_channels = make_divisible(channels * rd_ratio, divisor=rd_divisor)
            act_layer = act_layer or nn.ReLU
            self.conv = nn.Conv1d(1, rd_channels, kernel_size=1, padding=0, bias=True, **dd)
            self.act = create_act_layer(act_layer)
            self.conv2 = nn.Conv1d(rd_channels, 1, kernel_size=kernel_size, padding=padding, bias=True, **dd)
        else:
            self.conv = nn.Conv1d(1, 1, kernel_size=kernel_size, padding=padding, bias=False, **dd)
            self.act = None
            self.conv2 = None
        self.gate = create_act_layer(gate_layer)

    @ppy.opt(3)
    def forward(self, x):
        y = x.mean((2, 3)).view(x.shape[0], 1, -1)  # view for 1d conv
        y = self.conv(y)
        if self.conv2 is not None:
            y = self.act(y)
            y = self.conv2(y)
        y = self.gate(y).view(x.shape[0], -1, 1, 1)
        return x * y.expand_as(x)


# huggingface/pytorch-image-models: timm/layers/adaptive_avgmax_pool.py
_int_tuple_2_t = Union[int, Tuple[int, int]]


@ppy.opt(3)
def adaptive_avgmax_pool2d(x, output_size: _int_tuple_2_t = 1):
    x_avg = F.adaptive_avg_pool2d(x, output_size)
    x_max = F.adaptive_max_pool2d(x, output_size)
    return 0.5 * (x_avg + x_max)


@ppy.opt(3)
def adaptive_catavgmax_pool2d(x, output_size: _int_tuple_2_t = 1):
    x_avg = F.adaptive_avg_pool2d(x, output_size)
    x_max = F.adaptive_max_pool2d(x, output_size)
    return torch.cat((x_avg, x_max), 1)


@ppy.opt(3)
def select_adaptive_pool2d(x, pool_type='avg', output_size: _int_tuple_2_t = 1):
    """Selectable global pooling function with dynamic input kernel size
    """
    if pool_type == 'avg':
        x = F.adaptive_avg_pool2d(x, output_size)
    elif pool_type == 'avgmax':
        x = adaptive_avgmax_pool2d(x, output_size)
    elif pool_type == 'catavgmax':
        x = adaptive_catavgmax_pool2d(x, output_size)
    elif pool_type == 'max':
        x = F.adaptive_max_pool2d(x, output_size)
    else:
        assert False, 'Invalid pool type: %s' % pool_type
    return x


# huggingface/pytorch-image-models (v0.9.2): timm/models/vision_transformer.py
class Attention(nn.Module):
    fused_attn: Final[bool]

    def __init__(
            self,
            dim,
            num_heads=8,
            qkv_bias=False,
            qk_norm=False,
            attn_drop=0.,
            proj_drop=0.,
            norm_layer=nn.LayerNorm,
    ):
        super().__init__()
        assert dim % num_heads == 0, 'dim should be divisible by num_heads'
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.fused_attn = use_fused_attn()

        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.q_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    @ppy.opt(3)
    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)

        if self.fused_attn:
            x = F.scaled_dot_product_attention(
                q, k, v,
                dropout_p=self.attn_drop.p,
            )
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = attn @ v

        x = x.transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x


# huggingface/pytorch-image-models (v0.9.2): timm/models/vision_transformer.py (a helper: compiles at the cell)
class LayerScale(nn.Module):
    def __init__(self, dim, init_values=1e-5, inplace=False):
        super().__init__()
        self.inplace = inplace
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    @ppy.opt(3)
    def forward(self, x):
        return x.mul_(self.gamma) if self.inplace else x * self.gamma


# huggingface/pytorch-image-models (v0.9.2): timm/models/vision_transformer.py: `Block`, renamed here
# (minGPT's Block has the name)
class VitBlock(nn.Module):

    def __init__(
            self,
            dim,
            num_heads,
            mlp_ratio=4.,
            qkv_bias=False,
            qk_norm=False,
            proj_drop=0.,
            attn_drop=0.,
            init_values=None,
            drop_path=0.,
            act_layer=nn.GELU,
            norm_layer=nn.LayerNorm,
            mlp_layer=Mlp,
    ):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(
            dim,
            num_heads=num_heads,
            qkv_bias=qkv_bias,
            qk_norm=qk_norm,
            attn_drop=attn_drop,
            proj_drop=proj_drop,
            norm_layer=norm_layer,
        )
        self.ls1 = LayerScale(dim, init_values=init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0. else nn.Identity()

        self.norm2 = norm_layer(dim)
        self.mlp = mlp_layer(
            in_features=dim,
            hidden_features=int(dim * mlp_ratio),
            act_layer=act_layer,
            drop=proj_drop,
        )
        self.ls2 = LayerScale(dim, init_values=init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0. else nn.Identity()

    @ppy.opt(3)
    def forward(self, x):
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return x


# huggingface/pytorch-image-models (v0.9.2): timm/models/vision_transformer.py
class ResPostBlock(nn.Module):

    def __init__(
            self,
            dim,
            num_heads,
            mlp_ratio=4.,
            qkv_bias=False,
            qk_norm=False,
            proj_drop=0.,
            attn_drop=0.,
            init_values=None,
            drop_path=0.,
            act_layer=nn.GELU,
            norm_layer=nn.LayerNorm,
            mlp_layer=Mlp,
    ):
        super().__init__()
        self.init_values = init_values

        self.attn = Attention(
            dim,
            num_heads=num_heads,
            qkv_bias=qkv_bias,
            qk_norm=qk_norm,
            attn_drop=attn_drop,
            proj_drop=proj_drop,
            norm_layer=norm_layer,
        )
        self.norm1 = norm_layer(dim)
        self.drop_path1 = DropPath(drop_path) if drop_path > 0. else nn.Identity()

        self.mlp = mlp_layer(
            in_features=dim,
            hidden_features=int(dim * mlp_ratio),
            act_layer=act_layer,
            drop=proj_drop,
        )
        self.norm2 = norm_layer(dim)
        self.drop_path2 = DropPath(drop_path) if drop_path > 0. else nn.Identity()

        self.init_weights()

    def init_weights(self):
        # NOTE this init overrides that base model init with specific changes for the block type
        if self.init_values is not None:
            nn.init.constant_(self.norm1.weight, self.init_values)
            nn.init.constant_(self.norm2.weight, self.init_values)

    @ppy.opt(3)
    def forward(self, x):
        x = x + self.drop_path1(self.norm1(self.attn(x)))
        x = x + self.drop_path2(self.norm2(self.mlp(x)))
        return x


# huggingface/pytorch-image-models (v0.9.2): timm/models/vision_transformer.py
class ParallelScalingBlock(nn.Module):
    fused_attn: Final[bool]

    def __init__(
            self,
            dim,
            num_heads,
            mlp_ratio=4.,
            qkv_bias=False,
            qk_norm=False,
            proj_drop=0.,
            attn_drop=0.,
            init_values=None,
            drop_path=0.,
            act_layer=nn.GELU,
            norm_layer=nn.LayerNorm,
            mlp_layer=None,  # NOTE: not used
    ):
        super().__init__()
        assert dim % num_heads == 0, 'dim should be divisible by num_heads'
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.fused_attn = use_fused_attn()
        mlp_hidden_dim = int(mlp_ratio * dim)
        in_proj_out_dim = mlp_hidden_dim + 3 * dim

        self.in_norm = norm_layer(dim)
        self.in_proj = nn.Linear(dim, in_proj_out_dim, bias=qkv_bias)
        self.in_split = [mlp_hidden_dim] + [dim] * 3
        if qkv_bias:
            self.register_buffer('qkv_bias', None)
            self.register_parameter('mlp_bias', None)
        else:
            self.register_buffer('qkv_bias', torch.zeros(3 * dim), persistent=False)
            self.mlp_bias = nn.Parameter(torch.zeros(mlp_hidden_dim))

        self.q_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.attn_out_proj = nn.Linear(dim, dim)

        self.mlp_drop = nn.Dropout(proj_drop)
        self.mlp_act = act_layer()
        self.mlp_out_proj = nn.Linear(mlp_hidden_dim, dim)

        self.ls = LayerScale(dim, init_values=init_values) if init_values is not None else nn.Identity()
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()

    @ppy.opt(3)
    def forward(self, x):
        B, N, C = x.shape

        # Combined MLP fc1 & qkv projections
        y = self.in_norm(x)
        if self.mlp_bias is not None:
            # Concat constant zero-bias for qkv w/ trainable mlp_bias.
            # Appears faster than adding to x_mlp separately
            y = F.linear(y, self.in_proj.weight, torch.cat((self.qkv_bias, self.mlp_bias)))
        else:
            y = self.in_proj(y)
        x_mlp, q, k, v = torch.split(y, self.in_split, dim=-1)

        # Dot product attention w/ qk norm
        q = self.q_norm(q.view(B, N, self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(k.view(B, N, self.num_heads, self.head_dim)).transpose(1, 2)
        v = v.view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        if self.fused_attn:
            x_attn = F.scaled_dot_product_attention(
                q, k, v,
                dropout_p=self.attn_drop.p,
            )
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x_attn = attn @ v
        x_attn = x_attn.transpose(1, 2).reshape(B, N, C)
        x_attn = self.attn_out_proj(x_attn)

        # MLP activation, dropout, fc2
        x_mlp = self.mlp_act(x_mlp)
        x_mlp = self.mlp_drop(x_mlp)
        x_mlp = self.mlp_out_proj(x_mlp)

        # Add residual w/ drop path & layer scale applied
        y = self.drop_path(self.ls(x_attn + x_mlp))
        x = x + y
        return x


# ==== pytorch/vision (torchvision) ===================================================================
# pytorch/vision: torchvision/ops/misc.py (a helper: compiles at the cell)
class Permute(torch.nn.Module):
    def __init__(self, dims: List[int]):
        super().__init__()
        self.dims = dims

    @ppy.opt(3)
    def forward(self, x: Tensor) -> Tensor:
        return torch.permute(x, self.dims)


# pytorch/vision: torchvision/ops/stochastic_depth.py (helpers: compile at the cell; _log_api_usage_once
# left out)
@ppy.opt(3)
def stochastic_depth(input: Tensor, p: float, mode: str, training: bool = True) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
    if mode not in ["batch", "row"]:
        raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
    if not training or p == 0.0:
        return input

    survival_rate = 1.0 - p
    if mode == "row":
        size = [input.shape[0]] + [1] * (input.ndim - 1)
    else:
        size = [1] * input.ndim
    noise = torch.empty(size, dtype=input.dtype, device=input.device)
    noise = noise.bernoulli_(survival_rate)
    if survival_rate > 0.0:
        noise.div_(survival_rate)
    return input * noise


class StochasticDepth(nn.Module):
    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
        self.p = p
        self.mode = mode

    @ppy.opt(3)
    def forward(self, input: Tensor) -> Tensor:
        return stochastic_depth(input, self.p, self.mode, self.training)


# pytorch/vision: torchvision/models/convnext.py
class CNBlock(nn.Module):
    def __init__(
        self,
        dim,
        layer_scale: float,
        stochastic_depth_prob: float,
        norm_layer: Optional[Callable[..., nn.Module]] = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = partial(nn.LayerNorm, eps=1e-6)

        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]),
            norm_layer(dim),
            nn.Linear(in_features=dim, out_features=4 * dim, bias=True),
            nn.GELU(),
            nn.Linear(in_features=4 * dim, out_features=dim, bias=True),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    @ppy.opt(3)
    def forward(self, input: Tensor) -> Tensor:
        result = self.layer_scale * self.block(input)
        result = self.stochastic_depth(result)
        result += input
        return result


# ==== CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py ================================
# CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py
@ppy.opt(3)
def get_timestep_embedding(timesteps, embedding_dim):
    """
    This matches the implementation in Denoising Diffusion Probabilistic Models:
    From Fairseq.
    Build sinusoidal embeddings.
    This matches the implementation in tensor2tensor, but differs slightly
    from the description in Section 3.5 of "Attention Is All You Need".
    """
    assert len(timesteps.shape) == 1

    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float32) * -emb)
    emb = emb.to(device=timesteps.device)
    emb = timesteps.float()[:, None] * emb[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    if embedding_dim % 2 == 1:  # zero pad
        emb = torch.nn.functional.pad(emb, (0,1,0,0))
    return emb


# CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py (a helper: compiles at the cell)
@ppy.opt(3)
def nonlinearity(x):
    # swish
    return x*torch.sigmoid(x)


# CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py
def Normalize(in_channels, num_groups=32):
    return torch.nn.GroupNorm(num_groups=num_groups, num_channels=in_channels, eps=1e-6, affine=True)


# CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py
class Upsample(nn.Module):
    def __init__(self, in_channels, with_conv):
        super().__init__()
        self.with_conv = with_conv
        if self.with_conv:
            self.conv = torch.nn.Conv2d(in_channels,
                                        in_channels,
                                        kernel_size=3,
                                        stride=1,
                                        padding=1)

    @ppy.opt(3)
    def forward(self, x):
        x = torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest")
        if self.with_conv:
            x = self.conv(x)
        return x


# CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py
class Downsample(nn.Module):
    def __init__(self, in_channels, with_conv):
        super().__init__()
        self.with_conv = with_conv
        if self.with_conv:
            # no asymmetric padding in torch conv, must do it ourselves
            self.conv = torch.nn.Conv2d(in_channels,
                                        in_channels,
                                        kernel_size=3,
                                        stride=2,
                                        padding=0)

    @ppy.opt(3)
    def forward(self, x):
        if self.with_conv:
            pad = (0,1,0,1)
            x = torch.nn.functional.pad(x, pad, mode="constant", value=0)
            x = self.conv(x)
        else:
            x = torch.nn.functional.avg_pool2d(x, kernel_size=2, stride=2)
        return x


# CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py
class ResnetBlock(nn.Module):
    def __init__(self, *, in_channels, out_channels=None, conv_shortcut=False,
                 dropout, temb_channels=512):
        super().__init__()
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.use_conv_shortcut = conv_shortcut

        self.norm1 = Normalize(in_channels)
        self.conv1 = torch.nn.Conv2d(in_channels,
                                     out_channels,
                                     kernel_size=3,
                                     stride=1,
                                     padding=1)
        if temb_channels > 0:
            self.temb_proj = torch.nn.Linear(temb_channels,
                                             out_channels)
        self.norm2 = Normalize(out_channels)
        self.dropout = torch.nn.Dropout(dropout)
        self.conv2 = torch.nn.Conv2d(out_channels,
                                     out_channels,
                                     kernel_size=3,
                                     stride=1,
                                     padding=1)
        if self.in_channels != self.out_channels:
            if self.use_conv_shortcut:
                self.conv_shortcut = torch.nn.Conv2d(in_channels,
                                                     out_channels,
                                                     kernel_size=3,
                                                     stride=1,
                                                     padding=1)
            else:
                self.nin_shortcut = torch.nn.Conv2d(in_channels,
                                                    out_channels,
                                                    kernel_size=1,
                                                    stride=1,
                                                    padding=0)

    @ppy.opt(3)
    def forward(self, x, temb):
        h = x
        h = self.norm1(h)
        h = nonlinearity(h)
        h = self.conv1(h)

        if temb is not None:
            h = h + self.temb_proj(nonlinearity(temb))[:,:,None,None]

        h = self.norm2(h)
        h = nonlinearity(h)
        h = self.dropout(h)
        h = self.conv2(h)

        if self.in_channels != self.out_channels:
            if self.use_conv_shortcut:
                x = self.conv_shortcut(x)
            else:
                x = self.nin_shortcut(x)

        return x+h


# CompVis/latent-diffusion: ldm/modules/diffusionmodules/model.py
class AttnBlock(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.in_channels = in_channels

        self.norm = Normalize(in_channels)
        self.q = torch.nn.Conv2d(in_channels,
                                 in_channels,
                                 kernel_size=1,
                                 stride=1,
                                 padding=0)
        self.k = torch.nn.Conv2d(in_channels,
                                 in_channels,
                                 kernel_size=1,
                                 stride=1,
                                 padding=0)
        self.v = torch.nn.Conv2d(in_channels,
                                 in_channels,
                                 kernel_size=1,
                                 stride=1,
                                 padding=0)
        self.proj_out = torch.nn.Conv2d(in_channels,
                                        in_channels,
                                        kernel_size=1,
                                        stride=1,
                                        padding=0)


    @ppy.opt(3)
    def forward(self, x):
        h_ = x
        h_ = self.norm(h_)
        q = self.q(h_)
        k = self.k(h_)
        v = self.v(h_)

        # compute attention
        b,c,h,w = q.shape
        q = q.reshape(b,c,h*w)
        q = q.permute(0,2,1)   # b,hw,c
        k = k.reshape(b,c,h*w) # b,c,hw
        w_ = torch.bmm(q,k)     # b,hw,hw    w[b,i,j]=sum_c q[b,i,c]k[b,c,j]
        w_ = w_ * (int(c)**(-0.5))
        w_ = torch.nn.functional.softmax(w_, dim=2)

        # attend to values
        v = v.reshape(b,c,h*w)
        w_ = w_.permute(0,2,1)   # b,hw,hw (first hw of k, second of q)
        h_ = torch.bmm(v,w_)     # b, c,hw (hw of q) h_[b,c,j] = sum_i v[b,c,i] w_[b,i,j]
        h_ = h_.reshape(b,c,h,w)

        h_ = self.proj_out(h_)

        return x+h_


# ==== openai/guided-diffusion: guided_diffusion/nn.py, guided_diffusion/unet.py ======================
# openai/guided-diffusion: guided_diffusion/nn.py
@ppy.opt(3)
def timestep_embedding(timesteps, dim, max_period=10000):
    """
    Create sinusoidal timestep embeddings.

    :param timesteps: a 1-D Tensor of N indices, one per batch element.
                      These may be fractional.
    :param dim: the dimension of the output.
    :param max_period: controls the minimum frequency of the embeddings.
    :return: an [N x dim] Tensor of positional embeddings.
    """
    half = dim // 2
    freqs = th.exp(
        -math.log(max_period) * th.arange(start=0, end=half, dtype=th.float32) / half
    ).to(device=timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    embedding = th.cat([th.cos(args), th.sin(args)], dim=-1)
    if dim % 2:
        embedding = th.cat([embedding, th.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


# ==== facebookresearch/detr ==========================================================================
# facebookresearch/detr: util/misc.py (to() left out)
class NestedTensor(object):
    def __init__(self, tensors, mask: Optional[Tensor]):
        self.tensors = tensors
        self.mask = mask

    def decompose(self):
        return self.tensors, self.mask

    def __repr__(self):
        return str(self.tensors)


# facebookresearch/detr: models/position_encoding.py
class PositionEmbeddingSine(nn.Module):
    """
    This is a more standard version of the position embedding, very similar to the one
    used by the Attention is all you need paper, generalized to work on images.
    """
    def __init__(self, num_pos_feats=64, temperature=10000, normalize=False, scale=None):
        super().__init__()
        self.num_pos_feats = num_pos_feats
        self.temperature = temperature
        self.normalize = normalize
        if scale is not None and normalize is False:
            raise ValueError("normalize should be True if scale is passed")
        if scale is None:
            scale = 2 * math.pi
        self.scale = scale

    @ppy.opt(3)
    def forward(self, tensor_list: NestedTensor):
        x = tensor_list.tensors
        mask = tensor_list.mask
        assert mask is not None
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        if self.normalize:
            eps = 1e-6
            y_embed = y_embed / (y_embed[:, -1:, :] + eps) * self.scale
            x_embed = x_embed / (x_embed[:, :, -1:] + eps) * self.scale

        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=x.device)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)

        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos = torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)
        return pos


# facebookresearch/detr: models/position_encoding.py
class PositionEmbeddingLearned(nn.Module):
    """
    Absolute pos embedding, learned.
    """
    def __init__(self, num_pos_feats=256):
        super().__init__()
        self.row_embed = nn.Embedding(50, num_pos_feats)
        self.col_embed = nn.Embedding(50, num_pos_feats)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.uniform_(self.row_embed.weight)
        nn.init.uniform_(self.col_embed.weight)

    @ppy.opt(3)
    def forward(self, tensor_list: NestedTensor):
        x = tensor_list.tensors
        h, w = x.shape[-2:]
        i = torch.arange(w, device=x.device)
        j = torch.arange(h, device=x.device)
        x_emb = self.col_embed(i)
        y_emb = self.row_embed(j)
        pos = torch.cat([
            x_emb.unsqueeze(0).repeat(h, 1, 1),
            y_emb.unsqueeze(1).repeat(1, w, 1),
        ], dim=-1).permute(2, 0, 1).unsqueeze(0).repeat(x.shape[0], 1, 1, 1)
        return pos


# facebookresearch/detr: models/detr.py
class MLP(nn.Module):
    """ Very simple multi-layer perceptron (also called FFN)"""

    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        self.num_layers = num_layers
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))

    @ppy.opt(3)
    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
        return x


# facebookresearch/detr: models/segmentation.py
class MHAttentionMap(nn.Module):
    """This is a 2D attention module, which only returns the attention softmax (no multiplication by value)"""

    def __init__(self, query_dim, hidden_dim, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.dropout = nn.Dropout(dropout)

        self.q_linear = nn.Linear(query_dim, hidden_dim, bias=bias)
        self.k_linear = nn.Linear(query_dim, hidden_dim, bias=bias)

        nn.init.zeros_(self.k_linear.bias)
        nn.init.zeros_(self.q_linear.bias)
        nn.init.xavier_uniform_(self.k_linear.weight)
        nn.init.xavier_uniform_(self.q_linear.weight)
        self.normalize_fact = float(hidden_dim / self.num_heads) ** -0.5

    @ppy.opt(3)
    def forward(self, q, k, mask: Optional[Tensor] = None):
        q = self.q_linear(q)
        k = F.conv2d(k, self.k_linear.weight.unsqueeze(-1).unsqueeze(-1), self.k_linear.bias)
        qh = q.view(q.shape[0], q.shape[1], self.num_heads, self.hidden_dim // self.num_heads)
        kh = k.view(k.shape[0], self.num_heads, self.hidden_dim // self.num_heads, k.shape[-2], k.shape[-1])
        weights = torch.einsum("bqnc,bnchw->bqnhw", qh * self.normalize_fact, kh)

        if mask is not None:
            weights.masked_fill_(mask.unsqueeze(1).unsqueeze(1), float("-inf"))
        weights = F.softmax(weights.flatten(2), dim=-1).view(weights.size())
        weights = self.dropout(weights)
        return weights


# ==== huggingface/transformers =======================================================================
# huggingface/transformers: src/transformers/activations.py (NewGELUActivation is a helper that compiles at
# the cell; ACT2CLS is cut to the entries used here)
class NewGELUActivation(nn.Module):
    """
    Implementation of the GELU activation function currently in Google BERT repo (identical to OpenAI GPT). Also see
    the Gaussian Error Linear Units paper: https://arxiv.org/abs/1606.08415
    """

    @ppy.opt(3)
    def forward(self, input: Tensor) -> Tensor:
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GELUActivation(nn.Module):
    """
    Original Implementation of the GELU activation function in Google BERT repo when initially created. For
    information: OpenAI GPT's GELU is slightly different (and gives slightly different results): 0.5 * x * (1 +
    torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3)))) This is now written in C in nn.functional
    Also see the Gaussian Error Linear Units paper: https://arxiv.org/abs/1606.08415
    """

    def __init__(self, use_gelu_python: bool = False):
        super().__init__()
        if use_gelu_python:
            self.act = self._gelu_python
        else:
            self.act = nn.functional.gelu

    def _gelu_python(self, input: Tensor) -> Tensor:
        return input * 0.5 * (1.0 + torch.erf(input / math.sqrt(2.0)))

    @ppy.opt(3)
    def forward(self, input: Tensor) -> Tensor:
        return self.act(input)


class ClippedGELUActivation(nn.Module):
    """
    Clip the range of possible GeLU outputs between [min, max]. This is especially useful for quantization purpose, as
    it allows mapping negatives values in the GeLU spectrum. For more information on this trick, please refer to
    https://arxiv.org/abs/2004.09602.
    """

    def __init__(self, min: float, max: float):
        if min > max:
            raise ValueError(f"min should be < max (got min: {min}, max: {max})")

        super().__init__()
        self.min = min
        self.max = max

    @ppy.opt(3)
    def forward(self, x: Tensor) -> Tensor:
        return torch.clip(gelu(x), self.min, self.max)


class ClassInstantier(OrderedDict):
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACT2CLS = {
    "gelu": GELUActivation,
    "gelu_10": (ClippedGELUActivation, {"min": -10, "max": 10}),
    "gelu_new": NewGELUActivation,
    "gelu_python": (GELUActivation, {"use_gelu_python": True}),
    "relu": nn.ReLU,
    "sigmoid": nn.Sigmoid,
    "silu": nn.SiLU,
    "swish": nn.SiLU,
    "tanh": nn.Tanh,
}
ACT2FN = ClassInstantier(ACT2CLS)


def get_activation(activation_string):
    if activation_string in ACT2FN:
        return ACT2FN[activation_string]
    else:
        raise KeyError(f"function {activation_string} not found in ACT2FN mapping {list(ACT2FN.keys())}")


gelu = get_activation("gelu")


# huggingface/transformers: src/transformers/models/bert/configuration_bert.py: BertConfig as a plain class
# (its base, PretrainedConfig, left out)
class BertConfig:
    model_type = "bert"

    def __init__(
        self,
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        pad_token_id=0,
        position_embedding_type="absolute",
        use_cache=True,
        classifier_dropout=None,
        **kwargs,
    ):
        self.pad_token_id = pad_token_id
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.position_embedding_type = position_embedding_type
        self.use_cache = use_cache
        self.classifier_dropout = classifier_dropout


# huggingface/transformers: src/transformers/models/bert/modeling_bert.py
class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        if isinstance(config.hidden_act, str):
            self.intermediate_act_fn = ACT2FN[config.hidden_act]
        else:
            self.intermediate_act_fn = config.hidden_act

    @ppy.opt(3)
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.dense(hidden_states)
        hidden_states = self.intermediate_act_fn(hidden_states)
        return hidden_states


# huggingface/transformers: src/transformers/models/bert/modeling_bert.py
class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        if isinstance(config.hidden_act, str):
            self.transform_act_fn = ACT2FN[config.hidden_act]
        else:
            self.transform_act_fn = config.hidden_act
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    @ppy.opt(3)
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.dense(hidden_states)
        hidden_states = self.transform_act_fn(hidden_states)
        hidden_states = self.LayerNorm(hidden_states)
        return hidden_states


# huggingface/transformers: src/transformers/models/vit/configuration_vit.py, as a plain class (ViTConfig
# has BertConfig's fields, plus these)
class ViTConfig(BertConfig):
    model_type = "vit"

    def __init__(self, image_size=224, patch_size=16, num_channels=3, qkv_bias=True, encoder_stride=16, **kwargs):
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.num_channels = num_channels
        self.qkv_bias = qkv_bias
        self.encoder_stride = encoder_stride


# huggingface/transformers (v4.30): src/transformers/models/vit/modeling_vit.py
class ViTSelfAttention(nn.Module):
    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        if config.hidden_size % config.num_attention_heads != 0 and not hasattr(config, "embedding_size"):
            raise ValueError(
                f"The hidden size {config.hidden_size,} is not a multiple of the number of attention "
                f"heads {config.num_attention_heads}."
            )

        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size

        self.query = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)
        self.key = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)
        self.value = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)

        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    @ppy.opt(3)
    def transpose_for_scores(self, x: torch.Tensor) -> torch.Tensor:
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    @ppy.opt(3)
    def forward(
        self, hidden_states, head_mask: Optional[torch.Tensor] = None, output_attentions: bool = False
    ) -> Union[Tuple[torch.Tensor, torch.Tensor], Tuple[torch.Tensor]]:
        mixed_query_layer = self.query(hidden_states)

        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)

        # Take the dot product between "query" and "key" to get the raw attention scores.
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))

        attention_scores = attention_scores / math.sqrt(self.attention_head_size)

        # Normalize the attention scores to probabilities.
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)

        # This is actually dropping out entire tokens to attend to, which might
        # seem a bit unusual, but is taken from the original Transformer paper.
        attention_probs = self.dropout(attention_probs)

        # Mask heads if we want to
        if head_mask is not None:
            attention_probs = attention_probs * head_mask

        context_layer = torch.matmul(attention_probs, value_layer)

        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)

        outputs = (context_layer, attention_probs) if output_attentions else (context_layer,)

        return outputs


# huggingface/transformers: src/transformers/pytorch_utils.py
class Conv1D(nn.Module):
    """
    1D-convolutional layer as defined by Radford et al. for OpenAI GPT (and also used in GPT-2).

    Basically works like a linear layer but the weights are transposed.
    """

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.nx = nx
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    @ppy.opt(3)
    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


# huggingface/transformers: src/transformers/models/gpt2/modeling_gpt2.py
class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        embed_dim = config.hidden_size
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = ACT2FN[config.activation_function]
        self.dropout = nn.Dropout(config.resid_pdrop)

    @ppy.opt(3)
    def forward(self, hidden_states: Optional[Tuple[torch.FloatTensor]]) -> torch.FloatTensor:
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


# huggingface/transformers (v4.36): src/transformers/models/llama/modeling_llama.py
class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = ACT2FN[config.hidden_act]

    @ppy.opt(3)
    def forward(self, x):
        if self.config.pretraining_tp > 1:
            slice = self.intermediate_size // self.config.pretraining_tp
            gate_proj_slices = self.gate_proj.weight.split(slice, dim=0)
            up_proj_slices = self.up_proj.weight.split(slice, dim=0)
            down_proj_slices = self.down_proj.weight.split(slice, dim=1)

            gate_proj = torch.cat(
                [F.linear(x, gate_proj_slices[i]) for i in range(self.config.pretraining_tp)], dim=-1
            )
            up_proj = torch.cat([F.linear(x, up_proj_slices[i]) for i in range(self.config.pretraining_tp)], dim=-1)

            intermediate_states = (self.act_fn(gate_proj) * up_proj).split(slice, dim=2)
            down_proj = [
                F.linear(intermediate_states[i], down_proj_slices[i]) for i in range(self.config.pretraining_tp)
            ]
            down_proj = sum(down_proj)
        else:
            down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

        return down_proj


# huggingface/transformers: src/transformers/models/t5/modeling_t5.py (a helper: compiles at the cell)
class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        """
        Construct a layernorm module in the T5 style. No bias and no subtraction of mean.
        """
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    @ppy.opt(3)
    def forward(self, hidden_states):
        # T5 uses a layer_norm which only scales and doesn't shift, which is also known as Root Mean
        # Square Layer Normalization https://arxiv.org/abs/1910.07467 thus varience is calculated
        # w/o mean and there is no bias. Additionally we want to make sure that the accumulation for
        # half-precision inputs is done in fp32

        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)

        # convert into half-precision if necessary
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)

        return self.weight * hidden_states


# huggingface/transformers: src/transformers/models/t5/modeling_t5.py
class T5DenseActDense(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.act = ACT2FN[config.dense_act_fn]

    @ppy.opt(3)
    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        if (
            isinstance(self.wo.weight, torch.Tensor)
            and hidden_states.dtype != self.wo.weight.dtype
            and self.wo.weight.dtype != torch.int8
        ):
            hidden_states = hidden_states.to(self.wo.weight.dtype)
        hidden_states = self.wo(hidden_states)
        return hidden_states


# huggingface/transformers: src/transformers/models/t5/modeling_t5.py
class T5DenseGatedActDense(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wi_0 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wi_1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.act = ACT2FN[config.dense_act_fn]

    @ppy.opt(3)
    def forward(self, hidden_states):
        hidden_gelu = self.act(self.wi_0(hidden_states))
        hidden_linear = self.wi_1(hidden_states)
        hidden_states = hidden_gelu * hidden_linear
        hidden_states = self.dropout(hidden_states)

        # To make 8bit quantization work for google/flan-t5-xxl, self.wo is kept in float32.
        # See https://github.com/huggingface/transformers/issues/20287
        # we also make sure the weights are not in `int8` in case users will force `_keep_in_fp32_modules` to be `None``
        if (
            isinstance(self.wo.weight, torch.Tensor)
            and hidden_states.dtype != self.wo.weight.dtype
            and self.wo.weight.dtype != torch.int8
        ):
            hidden_states = hidden_states.to(self.wo.weight.dtype)

        hidden_states = self.wo(hidden_states)
        return hidden_states


# huggingface/transformers: src/transformers/models/t5/modeling_t5.py
class T5LayerFF(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.is_gated_act:
            self.DenseReluDense = T5DenseGatedActDense(config)
        else:
            self.DenseReluDense = T5DenseActDense(config)

        self.layer_norm = T5LayerNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.dropout = nn.Dropout(config.dropout_rate)

    @ppy.opt(3)
    def forward(self, hidden_states):
        forwarded_states = self.layer_norm(hidden_states)
        forwarded_states = self.DenseReluDense(forwarded_states)
        hidden_states = hidden_states + self.dropout(forwarded_states)
        return hidden_states


# ==== harvardnlp/annotated-transformer: the_annotated_transformer.py ================================
# harvardnlp/annotated-transformer: the_annotated_transformer.py
def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


# harvardnlp/annotated-transformer: the_annotated_transformer.py (a helper: compiles at the cell)
class LayerNorm(nn.Module):
    "Construct a layernorm module (See citation for details)."

    def __init__(self, features, eps=1e-6):
        super(LayerNorm, self).__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    @ppy.opt(3)
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


# harvardnlp/annotated-transformer: the_annotated_transformer.py
class SublayerConnection(nn.Module):
    """
    A residual connection followed by a layer norm.
    Note for code simplicity the norm is first as opposed to last.
    """

    def __init__(self, size, dropout):
        super(SublayerConnection, self).__init__()
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    @ppy.opt(3)
    def forward(self, x, sublayer):
        "Apply residual connection to any sublayer with the same size."
        return x + self.dropout(sublayer(self.norm(x)))


# harvardnlp/annotated-transformer: the_annotated_transformer.py
@ppy.opt(3)
def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


# harvardnlp/annotated-transformer: the_annotated_transformer.py (a helper: compiles at the cell)
class PositionwiseFeedForward(nn.Module):
    "Implements FFN equation."

    def __init__(self, d_model, d_ff, dropout=0.1):
        super(PositionwiseFeedForward, self).__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    @ppy.opt(3)
    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


# harvardnlp/annotated-transformer: the_annotated_transformer.py
class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super(Embeddings, self).__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    @ppy.opt(3)
    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


# ==== lucidrains/vit-pytorch: vit_pytorch/vit.py (before the 2023 rewrite) ===========================
# lucidrains/vit-pytorch: vit_pytorch/vit.py, before its 2023 rewrite (a helper: compiles at the cell)
class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, dropout = 0.):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, dim),
            nn.Dropout(dropout)
        )

    @ppy.opt(3)
    def forward(self, x):
        return self.net(x)


# lucidrains/vit-pytorch: vit_pytorch/vit.py, before its 2023 rewrite
class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    @ppy.opt(3)
    def forward(self, x, **kwargs):
        return self.fn(self.norm(x), **kwargs)


# ==== pytorch/pytorch: torch/nn/functional.py, the reference implementation in the docstring of
# ==== F.scaled_dot_product_attention ("Efficient implementation equivalent to the following") ==========
@ppy.opt(3)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
        is_causal=False, scale=None, enable_gqa=False) -> torch.Tensor:
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    attn_bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        assert attn_mask is None
        temp_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=0)
        attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))

    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_bias.masked_fill_(attn_mask.logical_not(), float("-inf"))
        else:
            attn_bias = attn_mask + attn_bias

    if enable_gqa:
        key = key.repeat_interleave(query.size(-3)//key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3)//value.size(-3), -3)

    attn_weight = query @ key.transpose(-2, -1) * scale_factor
    attn_weight += attn_bias
    attn_weight = torch.softmax(attn_weight, dim=-1)
    attn_weight = torch.dropout(attn_weight, dropout_p, train=True)
    return attn_weight @ value
'''


# ---- the cases: what each one is called with ------------------------------------------------------
# Each maker takes the cell's namespace and a fresh stream of seeded inputs and returns (the callable,
# its arguments): a function of the cell, or a module whose forward is the case. Module arguments, the
# configs and the flags are the values the first call brings; the comment says what the call decides.

V = 11  # vocabulary
SEQ = 5  # tokens


def _mingpt(ns: dict) -> Any:
    return ns["CfgNode"](n_embd=32, n_head=4, block_size=8, attn_pdrop=0.1, resid_pdrop=0.1)


def _gpt(ns: dict) -> Any:
    config = ns["GPT"].get_default_config()
    config.model_type = None
    config.merge_from_dict(dict(n_layer=2, n_head=4, n_embd=32, vocab_size=V, block_size=8))
    return ns["GPT"](config)


def _timm_attention(ns: dict) -> Any:
    attn = ns["Attention"](32, num_heads=4, qkv_bias=True, qk_norm=True, attn_drop=0.1)
    attn.fused_attn = False  # as timm users switch it off per module: the region reads the instance's flag
    return attn


def _nested(ns: dict, i: Inputs) -> Any:
    mask = torch.zeros(2, 4, 5, dtype=torch.bool)
    mask[0, :, 3:] = True  # padding, as nested_tensor_from_tensor_list makes it
    mask[1, 3:, :] = True
    return ns["NestedTensor"](i.t(2, 3, 4, 5), mask)


def _t5(**kw: Any) -> types.SimpleNamespace:
    base = dict(d_model=32, d_ff=64, dropout_rate=0.1, layer_norm_epsilon=1e-6, is_gated_act=False)
    return types.SimpleNamespace(**{**base, **kw})


def _timesteps(i: Inputs) -> torch.Tensor:
    return (i.uniform(3, grad=False) * 100).requires_grad_()  # fractional timesteps, a leaf: its gradient too


def _causal_mask(n: int) -> torch.Tensor:
    return torch.tril(torch.ones(1, 1, n, n, dtype=torch.long))  # 1 where attending is allowed


CASES: dict[str, Callable[[dict, Inputs], tuple[Any, tuple]]] = {
    # ---- karpathy/minGPT ----
    # self.n_head, self.n_embd: fields of a CfgNode
    "CausalSelfAttention.forward": lambda ns, i: (ns["CausalSelfAttention"](_mingpt(ns)), (i.t(2, SEQ, 32),)),
    # the same, and self.mlpf: a lambda over the block's ModuleDict, assigned in __init__
    "Block.forward": lambda ns, i: (ns["Block"](_mingpt(ns)), (i.t(2, SEQ, 32),)),
    # self.block_size from the config; a ModuleList of Blocks built in a comprehension; targets given
    "GPT.forward": lambda ns, i: (_gpt(ns), (i.ints(V, 2, SEQ), i.ints(V, 2, SEQ))),
    # ---- huggingface/pytorch-image-models ----
    # act_layer=nn.GELU, norm_layer=None: self.act is a GELU, self.norm an Identity; fc1 from a conditional class
    "Mlp.forward": lambda ns, i: (ns["Mlp"](32, 64, drop=0.1), (i.t(2, SEQ, 32),)),
    # act_layer=nn.Sigmoid; self.chunk_dim from a conditional expression, self.gate_last a flag
    "GluMlp.forward": lambda ns, i: (ns["GluMlp"](32, 64), (i.t(2, SEQ, 32),)),
    # norm_layer=partial(nn.LayerNorm, eps=1e-6): self.norm is a LayerNorm only the call knows
    "SwiGLU.forward": lambda ns, i: (
        ns["SwiGLU"](32, 48, norm_layer=partial(nn.LayerNorm, eps=1e-6), drop=0.1),
        (i.t(2, SEQ, 32),),
    ),
    # norm_layer=nn.LayerNorm (the default, a class passed as a value)
    "SpatialGatingUnit.forward": lambda ns, i: (ns["SpatialGatingUnit"](32, seq_len=SEQ), (i.t(2, SEQ, 32),)),
    # gate_layer=partial(SpatialGatingUnit, seq_len=...): the gate is a module of the cell's own class
    "GatedMlp.forward": lambda ns, i: (
        ns["GatedMlp"](32, 64, gate_layer=partial(ns["SpatialGatingUnit"], seq_len=SEQ)),
        (i.t(2, SEQ, 32),),
    ),
    # norm_layer=nn.BatchNorm2d, in training: its running statistics are compared too
    "ConvMlp.forward": lambda ns, i: (ns["ConvMlp"](8, 16, norm_layer=nn.BatchNorm2d), (i.t(2, 8, 3, 3),)),
    # fc1 through `partial(nn.Conv2d, ...) if use_conv else nn.Linear`; act_layer=nn.GELU
    "GlobalResponseNormMlp.forward": lambda ns, i: (ns["GlobalResponseNormMlp"](8, 16), (i.t(2, 3, 3, 8),)),
    # create_act_layer(nn.ReLU, inplace=True) and gate_layer='sigmoid' looked up in a table by string
    "SEModule.forward": lambda ns, i: (ns["SEModule"](16), (i.t(2, 16, 3, 3),)),
    # the gate by string; self.act and self.conv2 are None (use_mlp=False)
    "EcaModule.forward": lambda ns, i: (ns["EcaModule"](channels=16), (i.t(2, 16, 3, 3),)),
    # output_size: Union[int, Tuple[int, int]] (not read at the cell); pool_type='avgmax' decides the branch
    "select_adaptive_pool2d": lambda ns, i: (ns["select_adaptive_pool2d"], (i.t(2, 8, 4, 4), "avgmax", 1)),
    # output_size given as a tuple of ints
    "adaptive_avgmax_pool2d": lambda ns, i: (ns["adaptive_avgmax_pool2d"], (i.t(2, 8, 4, 4), (2, 2))),
    # output_size given as an int
    "adaptive_catavgmax_pool2d": lambda ns, i: (ns["adaptive_catavgmax_pool2d"], (i.t(2, 8, 4, 4), 2)),
    # self.head_dim from unannotated parameters, self.fused_attn from use_fused_attn() (switched off here),
    # q_norm/k_norm from norm_layer=nn.LayerNorm because qk_norm=True
    "Attention.forward": lambda ns, i: (_timm_attention(ns), (i.t(2, SEQ, 32),)),
    # LayerScale and DropPath or Identity by value (init_values, drop_path), fused attention on, Mlp by mlp_layer
    "VitBlock.forward": lambda ns, i: (
        ns["VitBlock"](32, 4, qkv_bias=True, init_values=0.5, drop_path=0.1),
        (i.t(2, SEQ, 32),),
    ),
    # norm_layer=partial(nn.LayerNorm, eps=1e-6), drop_path=0: Identity
    "ResPostBlock.forward": lambda ns, i: (
        ns["ResPostBlock"](32, 4, init_values=0.5, norm_layer=partial(nn.LayerNorm, eps=1e-6)),
        (i.t(2, SEQ, 32),),
    ),
    # self.in_split: a list of ints used as split sizes; mlp_bias a Parameter (qkv_bias=False), qkv_bias a buffer
    "ParallelScalingBlock.forward": lambda ns, i: (ns["ParallelScalingBlock"](32, 4), (i.t(2, SEQ, 32),)),
    # ---- pytorch/vision ----
    # norm_layer defaults to partial(nn.LayerNorm, eps=1e-6), inside an nn.Sequential
    "CNBlock.forward": lambda ns, i: (
        ns["CNBlock"](8, layer_scale=0.5, stochastic_depth_prob=0.2),
        (i.t(2, 8, 4, 4),),
    ),
    # ---- CompVis/latent-diffusion ----
    # embedding_dim: an int (odd: the zero pad), unannotated
    "get_timestep_embedding": lambda ns, i: (
        ns["get_timestep_embedding"],
        (_timesteps(i), 33),
    ),
    # with_conv=True: an unannotated flag, and self.conv assigned under it
    "Upsample.forward": lambda ns, i: (ns["Upsample"](4, True), (i.t(1, 4, 3, 3),)),
    # with_conv=False: the avg_pool2d branch; self.conv does not exist
    "Downsample.forward": lambda ns, i: (ns["Downsample"](4, False), (i.t(1, 4, 4, 4),)),
    # in/out channels from keyword-only unannotated parameters, GroupNorms from a helper function, a temb
    "ResnetBlock.forward": lambda ns, i: (
        ns["ResnetBlock"](in_channels=32, out_channels=64, dropout=0.1, temb_channels=16),
        (i.t(1, 32, 3, 3), i.t(1, 16)),
    ),
    # self.norm from Normalize(in_channels), a function
    "AttnBlock.forward": lambda ns, i: (ns["AttnBlock"](32), (i.t(1, 32, 3, 3),)),
    # ---- openai/guided-diffusion ----
    # dim: an int (odd: the zero column), unannotated
    "timestep_embedding": lambda ns, i: (ns["timestep_embedding"], (_timesteps(i), 33)),
    # ---- facebookresearch/detr ----
    # tensor_list: NestedTensor, a class of the cell; self.scale from `if scale is None: scale = 2 * math.pi`
    "PositionEmbeddingSine.forward": lambda ns, i: (
        ns["PositionEmbeddingSine"](num_pos_feats=8, normalize=True),
        (_nested(ns, i),),
    ),
    # tensor_list: NestedTensor; the embeddings' gradients
    "PositionEmbeddingLearned.forward": lambda ns, i: (
        ns["PositionEmbeddingLearned"](num_pos_feats=8),
        (_nested(ns, i),),
    ),
    # self.num_layers: an unannotated int deciding the last layer's branch
    "MLP.forward": lambda ns, i: (ns["MLP"](32, 16, 4, 3), (i.t(2, SEQ, 32),)),
    # self.num_heads, self.hidden_dim: unannotated ints; a padding mask
    "MHAttentionMap.forward": lambda ns, i: (
        ns["MHAttentionMap"](16, 16, 2, dropout=0.1),
        (i.t(2, 3, 16), i.t(2, 16, 4, 4), torch.rand(2, 4, 4, generator=i.generator()) > 0.7),
    ),
    # ---- huggingface/transformers ----
    # self.act = nn.functional.gelu, a function kept in an attribute
    "GELUActivation.forward": lambda ns, i: (ns["GELUActivation"](), (i.t(2, SEQ, 8),)),
    # `gelu`: a free name bound to a GELUActivation made by get_activation("gelu")
    "ClippedGELUActivation.forward": lambda ns, i: (ns["ClippedGELUActivation"](-0.5, 0.5), (i.t(2, SEQ, 8),)),
    # hidden_act="gelu": ACT2FN["gelu"] makes a GELUActivation
    "BertIntermediate.forward": lambda ns, i: (
        ns["BertIntermediate"](ns["BertConfig"](hidden_size=32, intermediate_size=64, hidden_act="gelu")),
        (i.t(2, SEQ, 32),),
    ),
    # hidden_act given as a callable, which the module keeps: F.silu
    "BertPredictionHeadTransform.forward": lambda ns, i: (
        ns["BertPredictionHeadTransform"](ns["BertConfig"](hidden_size=32, hidden_act=torch.nn.functional.silu)),
        (i.t(2, SEQ, 32),),
    ),
    # sizes from config fields; output_attentions=True decides the shape of the returned tuple
    "ViTSelfAttention.forward": lambda ns, i: (
        ns["ViTSelfAttention"](ns["ViTConfig"](hidden_size=32, num_attention_heads=4)),
        (i.t(2, SEQ, 32), None, True),
    ),
    # self.nf: an unannotated int, used in a size
    "Conv1D.forward": lambda ns, i: (ns["Conv1D"](48, 32), (i.t(2, SEQ, 32),)),
    # hidden_states: Optional[Tuple[torch.FloatTensor]] (not read at the cell); ACT2FN["gelu_new"]
    "GPT2MLP.forward": lambda ns, i: (
        ns["GPT2MLP"](64, types.SimpleNamespace(hidden_size=32, activation_function="gelu_new", resid_pdrop=0.1)),
        (i.t(2, SEQ, 32),),
    ),
    # self.config.pretraining_tp == 1 decides the branch (the other one sums a list: `sum()` starts at 0)
    "LlamaMLP.forward": lambda ns, i: (
        ns["LlamaMLP"](
            types.SimpleNamespace(hidden_size=32, intermediate_size=64, hidden_act="silu", pretraining_tp=1)
        ),
        (i.t(2, SEQ, 32),),
    ),
    # dense_act_fn="relu": ACT2FN["relu"] is an nn.ReLU
    "T5DenseActDense.forward": lambda ns, i: (ns["T5DenseActDense"](_t5(dense_act_fn="relu")), (i.t(2, SEQ, 32),)),
    # dense_act_fn="gelu_new"
    "T5DenseGatedActDense.forward": lambda ns, i: (
        ns["T5DenseGatedActDense"](_t5(dense_act_fn="gelu_new")),
        (i.t(2, SEQ, 32),),
    ),
    # config.is_gated_act decides which class DenseReluDense is
    "T5LayerFF.forward": lambda ns, i: (
        ns["T5LayerFF"](_t5(dense_act_fn="gelu_new", is_gated_act=True)),
        (i.t(2, SEQ, 32),),
    ),
    # ---- harvardnlp/annotated-transformer ----
    # sublayer: a module passed as an argument
    "SublayerConnection.forward": lambda ns, i: (
        ns["SublayerConnection"](32, 0.1),
        (i.t(2, SEQ, 32), ns["PositionwiseFeedForward"](32, 64, 0.1)),
    ),
    # dropout: an nn.Dropout passed as an argument (its default is None); mask: a tensor
    "attention": lambda ns, i: (
        ns["attention"],
        (i.t(2, 4, SEQ, 8), i.t(2, 4, SEQ, 8), i.t(2, 4, SEQ, 8), _causal_mask(SEQ), nn.Dropout(0.1)),
    ),
    # self.d_model: an unannotated int under math.sqrt
    "Embeddings.forward": lambda ns, i: (ns["Embeddings"](32, V), (i.ints(V, 2, SEQ),)),
    # ---- lucidrains/vit-pytorch ----
    # fn: a module passed to __init__ and kept
    "PreNorm.forward": lambda ns, i: (ns["PreNorm"](32, ns["FeedForward"](32, 64, dropout=0.1)), (i.t(2, SEQ, 32),)),
    # ---- pytorch/pytorch ----
    # scale=None: `1 / math.sqrt(...) if scale is None else scale`; is_causal=True
    "scaled_dot_product_attention": lambda ns, i: (
        ns["scaled_dot_product_attention"],
        (i.t(2, 4, SEQ, 8), i.t(2, 4, SEQ, 8), i.t(2, 4, SEQ, 8), None, 0.0, True),
    ),
}

# Decorated in the cell but not cases: these need nothing from the call and compile at the cell, as today
# (the cases call them, inlined) ...
HELPERS_COMPILED = {
    "NewGELU.forward",
    "Sigmoid.forward",
    "drop_path",
    "DropPath.forward",
    "GlobalResponseNorm.forward",
    "LayerScale.forward",
    "Permute.forward",
    "stochastic_depth",
    "StochasticDepth.forward",
    "nonlinearity",
    "NewGELUActivation.forward",
    "T5LayerNorm.forward",
    "LayerNorm.forward",
    "PositionwiseFeedForward.forward",
    "FeedForward.forward",
}
# ... and this one is called only inline, by ViTSelfAttention.forward (it stays Python at the cell too).
HELPERS_INLINE = {"ViTSelfAttention.transpose_for_scores"}

SEED = 1234  # the global generator's seed before each compared call (dropout, DropPath, stochastic depth)


# ---- the protocol -------------------------------------------------------------------------------------


@dataclass
class _Run:
    out: Any
    grads: list  # .grad of every leaf tensor argument, then of every parameter of the modules involved
    buffers: list  # the buffers of the modules involved (running statistics), after the calls
    target: Any = None
    args: tuple = ()


def _compiled(ns: dict, name: str) -> Any:
    """What `name` is bound to in `ns`: the function, or the method in its class's dict."""
    if "." in name:
        cls, method = name.split(".")
        return ns[cls].__dict__[method]
    return ns[name]


def _modules(target: Any, args: tuple) -> list[nn.Module]:
    return [m for m in (target, *args) if isinstance(m, nn.Module)]


def _loss(out: Any) -> torch.Tensor | None:
    """The sum of the floating outputs that require grad (None when there are none)."""
    total = None
    for t in tensors_in(out):
        if t.requires_grad and t.is_floating_point():
            total = t.sum() if total is None else total + t.sum()
    return total


def _twice(ns: dict, name: str, after_first_call: Callable[[], None] | None = None) -> _Run:
    """Build case `name` from fixed seeds, call it once, then (after `after_first_call`) again, reseeded,
    and back-propagate; the second call's output, the gradients and the buffers."""
    torch.manual_seed(0)
    target, args = CASES[name](ns, Inputs())
    torch.manual_seed(SEED)
    target(*args)  # the first call: it runs the Python body (and starts the build of this variant)
    if after_first_call is not None:
        after_first_call()
    torch.manual_seed(SEED)
    out = target(*args)
    loss = _loss(out)
    if loss is not None:
        loss.backward()
    modules = _modules(target, args)
    leaves = [t for t in tensors_in(list(args)) if t.requires_grad and t.is_leaf]
    params = [p for m in modules for p in m.parameters()]
    buffers = [b.clone() for m in modules for b in m.buffers()]
    return _Run(out, [t.grad for t in leaves + params], buffers, target, args)


def _assert_same_run(got: _Run, want: _Run) -> None:
    assert_same(got.out, want.out)
    assert len(got.grads) == len(want.grads)
    for i, (g, w) in enumerate(zip(got.grads, want.grads, strict=True)):
        assert (g is None) == (w is None), f"gradient {i}: {g is None} vs {w is None}"
        if g is not None:
            assert torch.equal(g, w), f"gradient {i} differs"
    assert_same(got.buffers, want.buffers)


@pytest.fixture(scope="module")
def cell():
    ns, report = compile_cell(CELL, filename="<ppy-call-models>")
    eager = {"__name__": "__ppy_call_models_eager__"}
    exec(compile(CELL, "<ppy-call-models-eager>", "exec"), eager)  # plain Python: ppy.opt only marks
    return ns, report, eager


# ---- the tests --------------------------------------------------------------------------------------------


def _decorated(source: str) -> set[str]:
    """The names the report gives the decorated functions and methods of `source`."""
    tree = ast.parse(source)
    names = set()
    for node in tree.body:
        defs = [(None, node)] if isinstance(node, ast.FunctionDef) else []
        if isinstance(node, ast.ClassDef):
            defs = [(node.name, d) for d in node.body if isinstance(d, ast.FunctionDef)]
        for owner, d in defs:
            if any("ppy.opt" in ast.unparse(dec) for dec in d.decorator_list):
                names.add(f"{owner}.{d.name}" if owner else d.name)
    return names


def test_the_suite_is_large_enough_and_every_decorated_function_is_accounted_for():
    decorated = _decorated(CELL)
    assert len(CASES) - len(STILL_PYTHON) >= 32
    assert set(CASES) <= decorated
    assert decorated - set(CASES) == HELPERS_COMPILED | HELPERS_INLINE


def test_no_case_is_compiled_at_the_cell(cell):
    """Every case depends on what its call brings: the cell does not compile it (it says why it stays
    Python, or, once the mechanism reports it so, that it compiles at its first call)."""
    _ns, report, _eager = cell
    stayed = dict(report.python)
    at_the_cell = [name for name in CASES if name not in stayed and name in report.compiled]
    assert not at_the_cell, f"compiled at the cell, so not about call-time kinds: {at_the_cell}"
    assert set(report.compiled) >= HELPERS_COMPILED, report.summary()


def test_every_case_runs_as_plain_python_and_is_deterministic(cell):
    _ns, _report, eager = cell
    for name in CASES:
        _assert_same_run(_twice(eager, name), _twice(eager, name))


# Cases a call's values do not make regions whole, and why: each is split around that line (a break, run
# as Python) after its first call, and runs right. minGPT's Block keeps its MLP as a lambda over a ModuleDict
# (`self.mlpf`), a Python function the region would have to inline with the modules it closes over; HF's
# ClippedGELUActivation calls a module object held by a global (`gelu = GELUActivation()`), which only
# parameters and `self` can bring today.
STILL_PYTHON = {
    "Block.forward": "`self.mlpf` is a Python function",
    "GPT.forward": "`self.mlpf` is a Python function",
    "ClippedGELUActivation.forward": "`gelu` is not supported in a region",
}


@pytest.mark.parametrize("name", sorted(STILL_PYTHON))
def test_the_cases_split_at_a_break_say_why_and_run_right(cell, name):
    ns, _report, eager = cell
    got = _twice(ns, name, lambda: ppy_magic.wait(timeout=600))
    f = _compiled(ns, name)
    assert f.__ppy_driver__ is not None, ppy_magic.explain(f)
    assert STILL_PYTHON[name] in str(ppy_magic.explain(f))
    _assert_same_run(got, _twice(eager, name))


@pytest.mark.parametrize("name", [n for n in CASES if n not in STILL_PYTHON])
def test_a_region_after_its_first_call_and_bitwise_eager(cell, name):
    ns, _report, eager = cell
    before: dict[str, tuple[int, int]] = {}

    def wait_for_the_build() -> None:
        assert ppy_magic.wait(timeout=600), f"{name}: its build did not land in 10 minutes"
        f = _compiled(ns, name)
        assert is_region(f), f"{name} is not a region after its first call:\n{ppy_magic.explain(f)}"
        before["counts"] = (f.calls, f.fallbacks)

    got = _twice(ns, name, wait_for_the_build)
    f = _compiled(ns, name)
    calls, fallbacks = before["counts"]
    assert (f.calls, f.fallbacks) == (calls + 1, fallbacks), (
        f"{name}: the call after wait() did not run the region: {f.last_fallback_reason}"
    )
    _assert_same_run(got, _twice(eager, name))
    if "." not in name:  # a function: also the eager harness's comparison (inputs after the call, the RNG)
        status, detail = compare_call(f, got.args)
        assert status == MATCH, f"{name}: {status}: {detail}"
