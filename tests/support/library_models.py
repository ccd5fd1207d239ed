"""Unmodified models of public libraries (transformers, diffusers, x-transformers), tiny, and the checks that
``ppy_magic.compile(model)`` leaves them exact and whole.

``MODELS`` is the registry: each ``LibraryModel`` builds its model from a config object with random weights
from a fixed seed (nothing is downloaded), and makes example inputs from their own generator. Sizes are tiny
(32-64 features, 2 layers, vocabularies of 100, sequences of 8, images of 8-16 pixels) so a forward takes
milliseconds; where the config has dropout it is set (0.1), so train mode draws from the RNG.

The checks compare a compiled model with an eager copy of the same weights (``copy.deepcopy`` before
compiling), bit for bit by ``ppy_magic.bench.compare.same_as_eager`` on every tensor and value the outputs
hold (``ModelOutput``, dataclasses, tuples, dicts, cache objects):

- ``check_exact(entry, compile_fn)``: eval under ``no_grad``; train mode with dropout, the global RNG seeded
  alike before each side's call (and its state compared after); each parameter's ``.grad`` after a backward
  of a scalar of the output (the loss where labels are given), in eval and in train mode. Each side is
  called ``calls`` times (a compiled function may settle over its first calls) and compared at every call.
  ``differences`` returns what differs instead of raising.
- ``snapshot_classes(model)`` / ``changed_classes(snapshot)``: ``vars(cls)`` of every class in the MRO of
  every submodule's type, compared attribute by attribute by identity; and every submodule's own type.
- ``python_call_share(model, args, kwargs, eager=...)``: Python frames entered (``sys.setprofile``'s
  ``'call'`` events; C calls are not counted) during one eval forward of the compiled model, over the same
  for the eager copy.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import random
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy
import torch
from torch import nn

from ppy_magic.bench.compare import same_as_eager

DROPOUT = 0.1
VOCAB = 100
SEQ = 8
SEED = 0

Inputs = tuple[tuple, dict]


@dataclass(frozen=True)
class LibraryModel:
    """One model of the suite: how to build it and its example inputs."""

    name: str
    library: str  # the PyPI distribution the class comes from
    make: Callable[[Mapping[str, float]], nn.Module]  # make(dropout settings) -> the model, random init
    inputs: Callable[[], Inputs]  # (args, kwargs) of one forward, from a fixed generator
    decoder: bool  # a decoder-only model: the benchmark's 0.7 goal applies to it
    dropout: Mapping[str, float] = field(default_factory=dict)  # the config's dropout settings in this suite
    training_only: tuple[str, ...] = ()  # keyword inputs that only the loss needs (the benchmark leaves them out)
    random_in_eval: bool = False  # the forward samples from the global RNG in eval mode too
    note: str = ""

    def build(self, seed: int = SEED, dropout: Mapping[str, float] | None = None) -> tuple[nn.Module, tuple, dict]:
        """The model (in eval mode) from `seed`, and its example inputs."""
        torch.manual_seed(seed)
        model = self.make(self.dropout if dropout is None else dropout)
        model.eval()
        args, kwargs = self.inputs()
        return model, args, kwargs

    def eval_inputs(self) -> Inputs:
        """The inputs without the ones only a loss needs (what the benchmark times)."""
        args, kwargs = self.inputs()
        return args, {k: v for k, v in kwargs.items() if k not in self.training_only}

    def __str__(self) -> str:
        return self.name


# ----------------------------------------------------------------------------------------------------------
# inputs


def _gen(seed: int = 1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _ids(batch: int = 1, seq: int = SEQ, vocab: int = VOCAB, seed: int = 1, low: int = 3) -> torch.Tensor:
    # Token 0..2 are the configs' special tokens (pad, bos, eos): the inputs use ordinary ones.
    return torch.randint(low, vocab, (batch, seq), generator=_gen(seed))


def _lm_inputs() -> Inputs:
    ids = _ids()
    return (ids,), {"labels": ids.clone()}


def _lm_inputs_with_mask() -> Inputs:
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding: the mask reaches the attention
    return (ids,), {"attention_mask": mask, "labels": ids.clone()}


def _seq2seq_inputs() -> Inputs:
    ids, target = _ids(seed=1), _ids(seed=2, seq=6)
    return (ids,), {"decoder_input_ids": target, "labels": target.clone()}


# ----------------------------------------------------------------------------------------------------------
# transformers


def _quiet_transformers() -> None:
    import transformers

    transformers.logging.set_verbosity_error()


_SPECIAL = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def _gpt2(attn: str) -> Callable[[Mapping[str, float]], nn.Module]:
    def make(dropout: Mapping[str, float]) -> nn.Module:
        _quiet_transformers()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            n_embd=32, n_layer=2, n_head=2, n_positions=16, vocab_size=VOCAB, attn_implementation=attn, **_SPECIAL
        )
        for k, v in dropout.items():
            setattr(config, k, v)
        return GPT2LMHeadModel(config)

    return make


def _llama(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        attn_implementation="eager",
        **_SPECIAL,
        **dropout,
    )
    return LlamaForCausalLM(config)


def _bert(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        attn_implementation="eager",
        pad_token_id=0,
        **dropout,
    )
    return BertForMaskedLM(config)


def _bert_inputs() -> Inputs:
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[0, -2:] = 0
    types = torch.zeros_like(ids)
    types[0, 4:] = 1
    labels = torch.full_like(ids, -100)
    labels[0, 1], labels[0, 5] = 7, 11
    return (ids,), {"attention_mask": mask, "token_type_ids": types, "labels": labels}


def _vit(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=16,
        patch_size=4,
        num_channels=3,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=10,
        attn_implementation="eager",
        **dropout,
    )
    return ViTForImageClassification(config)


def _vit_inputs() -> Inputs:
    return (torch.randn(1, 3, 16, 16, generator=_gen()),), {"labels": torch.tensor([3])}


def _mixtral(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        output_router_logits=True,  # the load-balancing loss joins the loss
        attn_implementation="eager",
        **_SPECIAL,
        **dropout,
    )
    return MixtralForCausalLM(config)


def _qwen2_moe(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    config = Qwen2MoeConfig(
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        num_experts=4,
        num_experts_per_tok=2,
        output_router_logits=True,
        attn_implementation="eager",
        **_SPECIAL,
        **dropout,
    )
    return Qwen2MoeForCausalLM(config)


def _qwen2(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        tie_word_embeddings=True,
        attn_implementation="eager",
        **_SPECIAL,
        **dropout,
    )
    return Qwen2ForCausalLM(config)


def _gpt_neox(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = GPTNeoXConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        rotary_pct=0.5,  # rotary embedding on half of each head's features
        use_parallel_residual=True,
        attn_implementation="eager",
        **_SPECIAL,
        **dropout,
    )
    return GPTNeoXForCausalLM(config)


def _phi(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import PhiConfig, PhiForCausalLM

    config = PhiConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        partial_rotary_factor=0.5,
        attn_implementation="eager",
        **_SPECIAL,
        **dropout,
    )
    return PhiForCausalLM(config)


def _t5(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        vocab_size=VOCAB,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
        attn_implementation="eager",
        **dropout,
    )
    return T5ForConditionalGeneration(config)


def _bart(dropout: Mapping[str, float]) -> nn.Module:
    _quiet_transformers()
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=VOCAB,
        max_position_embeddings=16,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=None,
        attn_implementation="eager",
        **dropout,
    )
    return BartForConditionalGeneration(config)


# ----------------------------------------------------------------------------------------------------------
# diffusers


def _unet2d(dropout: Mapping[str, float]) -> nn.Module:
    from diffusers import UNet2DModel

    return UNet2DModel(
        sample_size=8,
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        layers_per_block=1,
        norm_num_groups=4,
        attention_head_dim=8,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        **dropout,
    )


def _unet2d_inputs() -> Inputs:
    return (torch.randn(1, 3, 8, 8, generator=_gen()), torch.tensor([10])), {}


def _unet2d_cond(dropout: Mapping[str, float]) -> nn.Module:
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        layers_per_block=1,
        norm_num_groups=4,
        cross_attention_dim=16,
        attention_head_dim=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        **dropout,
    )


def _unet2d_cond_inputs() -> Inputs:
    g = _gen()
    return (torch.randn(1, 4, 8, 8, generator=g), torch.tensor([10])), {
        "encoder_hidden_states": torch.randn(1, 4, 16, generator=g)
    }


def _vae(dropout: Mapping[str, float]) -> nn.Module:
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        layers_per_block=1,
        latent_channels=2,
        norm_num_groups=4,
        sample_size=16,
        **dropout,
    )


def _vae_inputs() -> Inputs:
    # sample_posterior: the latent is drawn from the posterior with torch.randn (the global RNG)
    return (torch.randn(1, 3, 16, 16, generator=_gen()),), {"sample_posterior": True}


# ----------------------------------------------------------------------------------------------------------
# x-transformers


def _x_decoder(dropout: Mapping[str, float]) -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper

    layer_dropout = {k: v for k, v in dropout.items() if k != "emb_dropout"}
    return TransformerWrapper(
        num_tokens=VOCAB,
        max_seq_len=16,
        emb_dropout=dropout.get("emb_dropout", 0.0),
        attn_layers=Decoder(dim=32, depth=2, heads=2, **layer_dropout),
    )


def _x_encoder(dropout: Mapping[str, float]) -> nn.Module:
    from x_transformers import Encoder, TransformerWrapper

    layer_dropout = {k: v for k, v in dropout.items() if k != "emb_dropout"}
    return TransformerWrapper(
        num_tokens=VOCAB,
        max_seq_len=16,
        emb_dropout=dropout.get("emb_dropout", 0.0),
        use_abs_pos_emb=False,
        attn_layers=Encoder(dim=32, depth=2, heads=2, rotary_pos_emb=True, ff_glu=True, **layer_dropout),
    )


def _x_inputs() -> Inputs:
    return (_ids(),), {}


def _x_encoder_inputs() -> Inputs:
    mask = torch.ones(1, SEQ, dtype=torch.bool)
    mask[0, -3:] = False
    return (_ids(),), {"mask": mask}


# ----------------------------------------------------------------------------------------------------------
# the registry

_HF_DROP = {"attention_dropout": DROPOUT}
_LM = ("labels",)

MODELS: tuple[LibraryModel, ...] = (
    LibraryModel(
        "gpt2",
        "transformers",
        _gpt2("eager"),
        _lm_inputs,
        decoder=True,
        dropout={"resid_pdrop": DROPOUT, "embd_pdrop": DROPOUT, "attn_pdrop": DROPOUT},
        training_only=_LM,
        note="GPT2LMHeadModel, 32 features, 2 layers, 2 heads, eager attention",
    ),
    LibraryModel(
        "gpt2-sdpa",
        "transformers",
        _gpt2("sdpa"),
        _lm_inputs_with_mask,
        decoder=True,
        dropout={"resid_pdrop": DROPOUT, "embd_pdrop": DROPOUT, "attn_pdrop": DROPOUT},
        training_only=_LM,
        note="GPT2LMHeadModel with scaled_dot_product_attention and a padding mask",
    ),
    LibraryModel(
        "llama",
        "transformers",
        _llama,
        _lm_inputs,
        decoder=True,
        dropout=_HF_DROP,
        training_only=_LM,
        note="LlamaForCausalLM, 32 features, 2 layers, 2 heads, 1 key-value head (GQA), rotary",
    ),
    LibraryModel(
        "bert",
        "transformers",
        _bert,
        _bert_inputs,
        decoder=False,
        dropout={"hidden_dropout_prob": DROPOUT, "attention_probs_dropout_prob": DROPOUT},
        training_only=_LM,
        note="BertForMaskedLM, 32 features, 2 layers, padding mask and token types",
    ),
    LibraryModel(
        "vit",
        "transformers",
        _vit,
        _vit_inputs,
        decoder=False,
        dropout={"hidden_dropout_prob": DROPOUT, "attention_probs_dropout_prob": DROPOUT},
        training_only=_LM,
        note="ViTForImageClassification, 16×16 image, 4×4 patches, 32 features, 2 layers, 10 classes",
    ),
    LibraryModel(
        "mixtral",
        "transformers",
        _mixtral,
        _lm_inputs,
        decoder=True,
        dropout={"attention_dropout": DROPOUT, "router_jitter_noise": DROPOUT},
        training_only=_LM,
        note="MixtralForCausalLM, 4 experts, top-2 routing with jitter noise in train mode, router loss",
    ),
    LibraryModel(
        "unet2d",
        "diffusers",
        _unet2d,
        _unet2d_inputs,
        decoder=False,
        dropout={"dropout": DROPOUT},
        note="UNet2DModel, 8×8×3 sample, channels (8, 16), one attention down and up block",
    ),
    LibraryModel(
        "x-decoder",
        "x-transformers",
        _x_decoder,
        _x_inputs,
        decoder=True,
        dropout={"emb_dropout": DROPOUT, "attn_dropout": DROPOUT, "ff_dropout": DROPOUT},
        note="TransformerWrapper(Decoder(dim=32, depth=2, heads=2)), absolute positions",
    ),
    # Beyond the list asked for: generality.
    LibraryModel(
        "t5",
        "transformers",
        _t5,
        _seq2seq_inputs,
        decoder=False,
        dropout={"dropout_rate": DROPOUT},
        training_only=_LM,
        note="T5ForConditionalGeneration, encoder-decoder, relative position buckets, 2+2 layers",
    ),
    LibraryModel(
        "bart",
        "transformers",
        _bart,
        _seq2seq_inputs,
        decoder=False,
        dropout={
            "dropout": DROPOUT,
            "attention_dropout": DROPOUT,
            "activation_dropout": DROPOUT,
            "encoder_layerdrop": DROPOUT,  # a layer skipped when torch.rand([]) < 0.1: RNG-driven control flow
            "decoder_layerdrop": DROPOUT,
        },
        training_only=_LM,
        note="BartForConditionalGeneration, encoder-decoder with layer drop in train mode",
    ),
    LibraryModel(
        "qwen2",
        "transformers",
        _qwen2,
        _lm_inputs_with_mask,
        decoder=True,
        dropout=_HF_DROP,
        training_only=_LM,
        note="Qwen2ForCausalLM, tied embeddings, GQA, padding mask",
    ),
    LibraryModel(
        "gpt-neox",
        "transformers",
        _gpt_neox,
        _lm_inputs,
        decoder=True,
        dropout={"attention_dropout": DROPOUT, "hidden_dropout": DROPOUT},
        training_only=_LM,
        note="GPTNeoXForCausalLM, parallel residual, rotary on half the head",
    ),
    LibraryModel(
        "phi",
        "transformers",
        _phi,
        _lm_inputs,
        decoder=True,
        dropout={"resid_pdrop": DROPOUT, "embd_pdrop": DROPOUT, "attention_dropout": DROPOUT},
        training_only=_LM,
        note="PhiForCausalLM, partial rotary, parallel attention and MLP",
    ),
    LibraryModel(
        "qwen2-moe",
        "transformers",
        _qwen2_moe,
        _lm_inputs,
        decoder=True,
        dropout=_HF_DROP,
        training_only=_LM,
        note="Qwen2MoeForCausalLM, 4 experts top-2 and a gated shared expert, router loss",
    ),
    LibraryModel(
        "unet2d-cond",
        "diffusers",
        _unet2d_cond,
        _unet2d_cond_inputs,
        decoder=False,
        dropout={"dropout": DROPOUT},
        note="UNet2DConditionModel, 8×8×4 latent, cross-attention on 4 tokens of 16 features",
    ),
    LibraryModel(
        "vae",
        "diffusers",
        _vae,
        _vae_inputs,
        decoder=False,
        random_in_eval=True,
        note="AutoencoderKL, 16×16×3 image, channels (8, 16), latent 2, the posterior sampled (torch.randn)",
    ),
    LibraryModel(
        "x-encoder",
        "x-transformers",
        _x_encoder,
        _x_encoder_inputs,
        decoder=False,
        dropout={"emb_dropout": DROPOUT, "attn_dropout": DROPOUT, "ff_dropout": DROPOUT},
        note="TransformerWrapper(Encoder(dim=32, depth=2, heads=2, rotary, GLU)), a padding mask",
    ),
)

BY_NAME: dict[str, LibraryModel] = {m.name: m for m in MODELS}


def entry(name: str) -> LibraryModel:
    return BY_NAME[name]


# ----------------------------------------------------------------------------------------------------------
# the outputs as leaves


def leaves(value: Any, path: str = "out") -> Iterator[tuple[str, Any]]:
    """(path, value) for every tensor and plain value `value` holds: through tuples, lists, mappings
    (``ModelOutput`` is one), dataclasses and plain objects (a ``DynamicCache`` and its layers)."""
    seen: set[int] = set()

    def walk(v: Any, p: str, depth: int) -> Iterator[tuple[str, Any]]:
        if isinstance(v, torch.Tensor) or v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            yield p, v
            return
        if isinstance(v, (type, torch.dtype, torch.device, torch.Size)) or callable(v) or depth > 8:
            yield p, v
            return
        if id(v) in seen:
            yield p, f"<the object at {type(v).__name__} seen before>"
            return
        seen.add(id(v))
        if isinstance(v, (tuple, list)):
            yield p + ".__class__", type(v)
            for i, item in enumerate(v):
                yield from walk(item, f"{p}[{i}]", depth + 1)
        elif isinstance(v, Mapping):
            yield p + ".__class__", type(v)
            for k, item in v.items():
                yield from walk(item, f"{p}[{k!r}]", depth + 1)
        elif dataclasses.is_dataclass(v):
            yield p + ".__class__", type(v)
            for f in dataclasses.fields(v):
                yield from walk(getattr(v, f.name), f"{p}.{f.name}", depth + 1)
        elif hasattr(v, "__dict__"):
            yield p + ".__class__", type(v)
            for k, item in sorted(vars(v).items()):
                yield from walk(item, f"{p}.{k}", depth + 1)
        else:
            yield p, v

    yield from walk(value, path, 0)


def output_difference(got: Any, want: Any, path: str = "out") -> str | None:
    """None when every leaf of `got` is the same as eager's `want`; else the first difference."""
    g, w = list(leaves(got, path)), list(leaves(want, path))
    gp, wp = [p for p, _ in g], [p for p, _ in w]
    if gp != wp:
        extra = sorted(set(gp) ^ set(wp))[:3]
        return f"{path}: the outputs hold different things ({len(gp)} vs eager's {len(wp)} leaves; e.g. {extra})"
    for (p, a), (_, b) in zip(g, w, strict=True):
        found = same_as_eager(a, b, p)
        if found is not None:
            return found
    return None


def first_tensor(value: Any) -> torch.Tensor:
    for _, v in leaves(value):
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v
    raise ValueError(f"no floating tensor in the output ({type(value).__name__})")


def scalar_of(out: Any) -> torch.Tensor:
    """What the gradient check backpropagates: the loss where the output has one, else the sum of its
    first floating tensor."""
    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    return first_tensor(out).sum()


# ----------------------------------------------------------------------------------------------------------
# calling a model the same way on both sides

CompileFn = Callable[[nn.Module], Any]
MODES = ("eval", "train", "grad")


def default_compile() -> CompileFn:
    import ppy_magic

    return ppy_magic.compile  # AttributeError where the package has none (yet)


def pair(entry: LibraryModel, compile_fn: CompileFn | None = None, dropout: Mapping[str, float] | None = None):
    """(compiled, eager, args, kwargs): the model built twice from the entry's seed, one kept eager, the other
    compiled with `compile_fn` (``ppy_magic.compile`` by default). The compiled side is whatever `compile_fn`
    returned. Built twice, not deep-copied: ``deepcopy`` shares functions, so a lambda a model keeps on
    itself (x-transformers' tied ``to_logits``) would read the original's weights from the copy."""
    compile_fn = compile_fn or default_compile()
    model, args, kwargs = entry.build(dropout=dropout)
    eager = entry.build(dropout=dropout)[0]
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), eager.state_dict().values(), strict=True))
    compiled = compile_fn(model)
    return compiled, eager, args, kwargs


def _foreground():
    """Builds a call starts run in the foreground, so a call runs the region it asked for."""
    import ppy_magic.variants

    return ppy_magic.variants.blocking()


def call(model: nn.Module, args: tuple, kwargs: dict, *, train: bool, grad: bool, seed: int) -> tuple[Any, Any]:
    """One forward: the model in train or eval mode, the global RNGs seeded (torch's, Python's ``random``,
    which x-transformers' layer dropout draws from, and NumPy's, which wav2vec2's time masking draws from), the
    inputs deep-copied (so a model that writes its inputs cannot reach the other side's); (output, torch's RNG
    state after)."""
    model.train(train)
    args, kwargs = copy.deepcopy((args, kwargs))
    torch.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)
    with torch.set_grad_enabled(grad), _foreground():
        out = model(*args, **kwargs)
    return out, torch.get_rng_state()


def _grads(model: nn.Module) -> dict[str, torch.Tensor | None]:
    return {name: p.grad for name, p in model.named_parameters()}


def _grad_differences(got: dict, want: dict, where: str) -> list[str]:
    if list(got) != list(want):
        return [f"{where}: parameters {list(got)[:3]}... vs eager's {list(want)[:3]}..."]
    out = []
    for name in want:
        a, b = got[name], want[name]
        if a is None or b is None:
            if (a is None) != (b is None):
                out.append(
                    f"{where}: {name}.grad is {'None' if a is None else 'a tensor'} vs eager's "
                    f"{'None' if b is None else 'a tensor'}"
                )
            continue
        found = same_as_eager(a, b, f"{where}: {name}.grad")
        if found is not None:
            out.append(found)
    return out


def differences(
    entry: LibraryModel,
    compile_fn: CompileFn | None = None,
    modes: tuple[str, ...] = MODES,
    calls: int = 3,
    pair_: tuple | None = None,
) -> list[str]:
    """What differs between the compiled model and its eager copy, per mode and call (empty: bit for bit
    the same). ``eval``: eval mode under no_grad. ``train``: train mode (dropout on), no_grad, the RNG
    seeded alike; its state after is compared too. ``grad``: eval and train mode recording autograd,
    the outputs and every parameter's ``.grad`` after ``scalar_of(out).backward()``."""
    compiled, eager, args, kwargs = pair_ or pair(entry, compile_fn)
    found: list[str] = []

    def compare(mode: str, train: bool, grad: bool) -> None:
        for i in range(calls):
            seed = 1000 + i
            where = f"{mode}, call {i + 1}"
            if grad:
                compiled.zero_grad(set_to_none=True)
                eager.zero_grad(set_to_none=True)
            try:
                got, got_rng = call(compiled, args, kwargs, train=train, grad=grad, seed=seed)
            except Exception as err:  # noqa: BLE001 - the first error is what the report names
                want_err = None
                try:
                    call(eager, args, kwargs, train=train, grad=grad, seed=seed)
                except Exception as e:  # noqa: BLE001
                    want_err = e
                if want_err is None or type(want_err) is not type(err):
                    found.append(f"{where}: the compiled model raised {type(err).__name__}: {_line(err)}")
                    return
                continue
            want, want_rng = call(eager, args, kwargs, train=train, grad=grad, seed=seed)
            diff = output_difference(got, want)
            if diff is not None:
                found.append(f"{where}: {diff}")
            if not torch.equal(got_rng, want_rng):
                found.append(f"{where}: the RNG state after the call differs from eager's (other draws)")
            if grad:
                try:
                    scalar_of(got).backward()
                except Exception as err:  # noqa: BLE001
                    try:
                        scalar_of(want).backward()
                    except Exception as want_err:  # noqa: BLE001 - eager's backward fails alike: no gradients
                        if type(want_err) is type(err):
                            continue
                    found.append(f"{where}: backward raised {type(err).__name__}: {_line(err)}")
                    return
                scalar_of(want).backward()
                found.extend(_grad_differences(_grads(compiled), _grads(eager), where))
            if found:
                return  # the first difference is the one worth reading

    if "eval" in modes:
        compare("eval", train=False, grad=False)
    if "train" in modes and not found:
        compare("train", train=True, grad=False)
    if "grad" in modes and not found:
        compare("grad (eval mode)", train=False, grad=True)
        if not found:
            compare("grad (train mode)", train=True, grad=True)
    compiled.eval()
    eager.eval()
    return found


def check_exact(
    entry: LibraryModel, compile_fn: CompileFn | None = None, modes: tuple[str, ...] = MODES, calls: int = 3
) -> None:
    """Raise AssertionError naming the first difference between the compiled model and eager, if any."""
    found = differences(entry, compile_fn, modes, calls)
    if found:
        raise AssertionError(f"{entry.name}: not the same as eager:\n  " + "\n  ".join(found))


def generates(model: nn.Module) -> bool:
    """A transformers model with ``generate`` (a causal LM or an encoder-decoder)."""
    return bool(getattr(model, "can_generate", lambda: False)())


def generate_differences(entry: LibraryModel, compiled: nn.Module, eager: nn.Module, new_tokens: int = 4) -> list[str]:
    """What differs between ``generate`` on the compiled model and on eager, from the entry's prompt (its ids,
    and its attention mask if it has one): greedy decoding's tokens and every step's scores, twice (the
    second call runs what the first built), then sampling with two seeds. Each step after the first brings
    a cache and a one-token query the forward's first calls were not compiled for."""
    args, kwargs = entry.inputs()
    prompt = {"input_ids": args[0] if args else kwargs["input_ids"]}
    if "attention_mask" in kwargs:
        prompt["attention_mask"] = kwargs["attention_mask"]

    def generate(model: nn.Module, seed: int, **how: Any) -> Any:
        model.eval()
        torch.manual_seed(seed)
        with _foreground():
            return model.generate(**prompt, max_new_tokens=new_tokens, pad_token_id=0, **how)

    found = []
    greedy = {"do_sample": False, "output_scores": True, "return_dict_in_generate": True}
    for call in range(2):
        got, want = generate(compiled, 0, **greedy), generate(eager, 0, **greedy)
        if not torch.equal(got.sequences, want.sequences):
            found.append(f"generate, greedy call {call + 1}: the tokens differ")
        diff = output_difference(tuple(got.scores), tuple(want.scores))
        if diff is not None:
            found.append(f"generate, greedy call {call + 1}: the scores differ: {diff}")
    for seed in range(2):
        sampled = {"do_sample": True, "top_k": 5}
        if not torch.equal(generate(compiled, seed, **sampled), generate(eager, seed, **sampled)):
            found.append(f"generate, sampled with seed {seed}: the tokens differ")
    return found


def _line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else ""


# ----------------------------------------------------------------------------------------------------------
# the library's classes


def snapshot_classes(model: nn.Module) -> dict:
    """Every submodule's type, and ``vars(cls)`` of every class in those types' MROs."""
    types = {name: type(m) for name, m in model.named_modules()}
    classes = {cls: dict(vars(cls)) for t in types.values() for cls in t.__mro__}
    return {"types": types, "model": model, "classes": classes}


def changed_classes(snapshot: dict) -> list[str]:
    """What changed since `snapshot`: an attribute of a class added, removed or replaced (compared by
    identity), or a submodule whose type is not the one it had."""
    out = []
    for cls, before in snapshot["classes"].items():
        now = vars(cls)
        name = f"{cls.__module__}.{cls.__qualname__}"
        for key in before.keys() - now.keys():
            out.append(f"{name}.{key} was removed")
        for key in now.keys() - before.keys():
            out.append(f"{name}.{key} was added")
        for key in before.keys() & now.keys():
            if before[key] is not now[key]:
                out.append(f"{name}.{key} was replaced")
    now_types = {name: type(m) for name, m in snapshot["model"].named_modules()}
    for name, t in snapshot["types"].items():
        if now_types.get(name) is not t:
            got = now_types.get(name)
            out.append(f"submodule {name or '<root>'}: type {getattr(got, '__qualname__', got)} was {t.__qualname__}")
    return sorted(out)


# ----------------------------------------------------------------------------------------------------------
# Python calls


@dataclass(frozen=True)
class CallShare:
    compiled: int  # Python frames entered by one eval forward of the compiled model
    eager: int  # the same for its eager copy
    share: float  # compiled / eager

    def __str__(self) -> str:
        return f"{self.compiled} of eager's {self.eager} Python calls ({self.share:.1%})"


SETTLE_CALLS = 30  # the most calls a compiled model is given to settle


def count_python_calls(fn: Callable[[], Any]) -> int:
    """Python function calls (frames entered: ``sys.setprofile``'s 'call' events) while `fn()` runs, in
    this thread. The garbage collector is collected before and held off during the count: a collection
    inside it runs finalisers and weakref callbacks, Python calls of neither forward, in one count and not
    the other."""
    count = 0

    def profile(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        nonlocal count
        if event == "call":
            count += 1

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(old)
        if was_enabled:
            gc.enable()
    return count - 1  # not fn's own frame


def settle(model: nn.Module, args: tuple, kwargs: dict, *, most: int = SETTLE_CALLS) -> int:
    """Call `model` (eval, no_grad, builds in the foreground) until one forward makes as many Python calls as
    the one before: a compiled model splits and builds over its first calls. The calls it took."""
    model.eval()
    before = None
    with torch.no_grad(), _foreground():
        for n in range(1, most + 1):
            now = count_python_calls(lambda: model(*args, **kwargs))
            if now == before:
                return n
            before = now
    return most


def python_call_share(model: nn.Module, args: tuple, kwargs: dict, *, eager: nn.Module) -> CallShare:
    """Python calls of one eval forward (no_grad) of compiled `model` over those of `eager` on the same
    inputs, once the compiled one has settled (``settle``)."""
    counts = []
    for m in (model, eager):
        settle(m, args, kwargs)
        with torch.no_grad(), _foreground():
            counts.append(count_python_calls(lambda m=m: m(*args, **kwargs)))
    return CallShare(counts[0], counts[1], counts[0] / counts[1] if counts[1] else 1.0)
