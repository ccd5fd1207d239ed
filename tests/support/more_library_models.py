"""More models of the same public libraries, beyond the ones ``library_models.MODELS`` names: the
``benchmarks.library_sweep`` check runs ``ppy_magic.compile`` on each, to find what the named suite misses.

Each is an unmodified library class built from a tiny config (32 features, 2 layers, vocabularies of 100,
sequences of 8, 16-pixel images; dropout 0.1 where the config has a single knob for it), with random weights
from ``library_models.SEED``. The table gives, per model, the config and model class names and the config's
keywords; the inputs are the shared ones of ``library_models`` (a causal LM's ids and labels, an encoder's
ids and attention mask, an image).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from .library_models import _SPECIAL, DROPOUT, VOCAB, Inputs, LibraryModel, _gen, _ids, _lm_inputs, _quiet_transformers


def _encoder_inputs() -> Inputs:
    ids = _ids()
    return (ids,), {"attention_mask": torch.ones_like(ids)}


def _image_inputs() -> Inputs:
    return (torch.randn(1, 3, 16, 16, generator=_gen()),), {}


_DECODER = {  # the Llama-shaped configs' keywords
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": VOCAB,
    "max_position_embeddings": 16,
    "attn_implementation": "eager",
    **_SPECIAL,
}
_ENCODER = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "vocab_size": VOCAB,
    "max_position_embeddings": 16,
}
_GPT = {"n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": VOCAB, "n_positions": 16, **_SPECIAL}


def _transformers(config: str, model: str, keywords: Mapping[str, Any]) -> Callable[[Mapping[str, float]], nn.Module]:
    def make(dropout: Mapping[str, float]) -> nn.Module:
        _quiet_transformers()
        import transformers

        return getattr(transformers, model)(getattr(transformers, config)(**keywords, **dropout))

    return make


def _hf(
    name: str,
    config: str,
    model: str,
    keywords: Mapping[str, Any],
    *,
    dropout: str | None = None,
    inputs: Callable[[], Inputs] = _lm_inputs,
) -> LibraryModel:
    decoder = inputs is _lm_inputs
    return LibraryModel(
        name,
        "transformers",
        _transformers(config, model, keywords),
        inputs,
        decoder=decoder,
        dropout={dropout: DROPOUT} if dropout else {},
        training_only=("labels",) if decoder else (),
        note=f"{model}",
    )


def _dit(dropout: Mapping[str, float]) -> nn.Module:
    from diffusers import DiTTransformer2DModel

    return DiTTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=8,
        in_channels=4,
        out_channels=4,
        num_layers=2,
        sample_size=8,
        patch_size=2,
        num_embeds_ada_norm=10,
        norm_num_groups=2,
        **dropout,
    )


def _dit_inputs() -> Inputs:
    return (torch.randn(1, 4, 8, 8, generator=_gen()),), {
        "timestep": torch.tensor([3]),
        "class_labels": torch.tensor([1]),
    }


def _x_continuous(dropout: Mapping[str, float]) -> nn.Module:
    from x_transformers import ContinuousTransformerWrapper, Decoder

    layers = Decoder(dim=32, depth=2, heads=2, rotary_pos_emb=True, **dropout)
    return ContinuousTransformerWrapper(dim_in=6, dim_out=5, max_seq_len=16, attn_layers=layers)


def _x_continuous_inputs() -> Inputs:
    return (torch.randn(1, 8, 6, generator=_gen()),), {}


def _x_enc_dec(dropout: Mapping[str, float]) -> nn.Module:
    from x_transformers import XTransformer

    sizes = {"enc_num_tokens": VOCAB, "dec_num_tokens": VOCAB, "enc_max_seq_len": 16, "dec_max_seq_len": 16}
    return XTransformer(dim=32, enc_depth=1, enc_heads=2, dec_depth=1, dec_heads=2, **sizes)


def _x_enc_dec_inputs() -> Inputs:
    return (_ids(seed=1), _ids(seed=2)), {}


def _x_vit(dropout: Mapping[str, float]) -> nn.Module:
    from x_transformers import Encoder, ViTransformerWrapper

    layers = Encoder(dim=32, depth=2, heads=2, ff_glu=True, attn_qk_norm=True, **dropout)
    return ViTransformerWrapper(image_size=16, patch_size=4, num_classes=3, attn_layers=layers)


_X_DROP = {"attn_dropout": DROPOUT, "ff_dropout": DROPOUT}

MORE_MODELS: tuple[LibraryModel, ...] = (
    _hf("mistral", "MistralConfig", "MistralForCausalLM", _DECODER, dropout="attention_dropout"),
    _hf("gemma", "GemmaConfig", "GemmaForCausalLM", {**_DECODER, "head_dim": 16}, dropout="attention_dropout"),
    _hf(
        "gemma2",
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {**_DECODER, "head_dim": 16, "sliding_window": 4},
        dropout="attention_dropout",
    ),
    _hf("qwen3", "Qwen3Config", "Qwen3ForCausalLM", {**_DECODER, "head_dim": 16}, dropout="attention_dropout"),
    _hf("olmo", "OlmoConfig", "OlmoForCausalLM", _DECODER, dropout="attention_dropout"),
    _hf("stablelm", "StableLmConfig", "StableLmForCausalLM", _DECODER, dropout="attention_dropout"),
    _hf("starcoder2", "Starcoder2Config", "Starcoder2ForCausalLM", _DECODER, dropout="residual_dropout"),
    _hf(
        "opt",
        "OPTConfig",
        "OPTForCausalLM",
        {**_ENCODER, "ffn_dim": 64, "word_embed_proj_dim": 32, "attn_implementation": "eager", **_SPECIAL},
        dropout="dropout",
    ),
    _hf(
        "gptj",
        "GPTJConfig",
        "GPTJForCausalLM",
        {**_GPT, "rotary_dim": 8, "attn_implementation": "eager"},
        dropout="resid_pdrop",
    ),
    _hf(
        "gpt-bigcode",
        "GPTBigCodeConfig",
        "GPTBigCodeForCausalLM",
        {**_GPT, "attn_implementation": "eager"},
        dropout="resid_pdrop",
    ),
    _hf(
        "codegen",
        "CodeGenConfig",
        "CodeGenForCausalLM",
        {**_GPT, "rotary_dim": 8, "n_ctx": 16, "attn_implementation": "eager"},
        dropout="resid_pdrop",
    ),
    _hf(
        "falcon",
        "FalconConfig",
        "FalconForCausalLM",
        {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": VOCAB, **_SPECIAL},
        dropout="hidden_dropout",
    ),
    _hf(
        "bloom",
        "BloomConfig",
        "BloomForCausalLM",
        {"hidden_size": 32, "n_layer": 2, "n_head": 2, "vocab_size": VOCAB, **_SPECIAL},
        dropout="hidden_dropout",
    ),
    _hf(
        "roberta",
        "RobertaConfig",
        "RobertaForMaskedLM",
        {**_ENCODER, "max_position_embeddings": 24, "attn_implementation": "eager"},
        dropout="hidden_dropout_prob",
        inputs=_encoder_inputs,
    ),
    _hf(
        "distilbert",
        "DistilBertConfig",
        "DistilBertForMaskedLM",
        {"dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 2, "vocab_size": VOCAB, "max_position_embeddings": 16},
        dropout="dropout",
        inputs=_encoder_inputs,
    ),
    _hf(
        "albert",
        "AlbertConfig",
        "AlbertForMaskedLM",
        {**_ENCODER, "embedding_size": 16},
        dropout="hidden_dropout_prob",
        inputs=_encoder_inputs,
    ),
    _hf(
        "electra",
        "ElectraConfig",
        "ElectraForMaskedLM",
        {**_ENCODER, "embedding_size": 16},
        dropout="hidden_dropout_prob",
        inputs=_encoder_inputs,
    ),
    _hf(
        "deberta-v2",
        "DebertaV2Config",
        "DebertaV2ForMaskedLM",
        _ENCODER,
        dropout="hidden_dropout_prob",
        inputs=_encoder_inputs,
    ),
    _hf(
        "mobilebert",
        "MobileBertConfig",
        "MobileBertForMaskedLM",
        {**_ENCODER, "embedding_size": 16, "intra_bottleneck_size": 16},
        dropout="hidden_dropout_prob",
        inputs=_encoder_inputs,
    ),
    _hf("clip-text", "CLIPTextConfig", "CLIPTextModel", _ENCODER, dropout="dropout", inputs=_encoder_inputs),
    _hf(
        "deit",
        "DeiTConfig",
        "DeiTForImageClassification",
        {**_ENCODER, "image_size": 16, "patch_size": 4, "num_labels": 3},
        dropout="hidden_dropout_prob",
        inputs=_image_inputs,
    ),
    _hf(
        "convnext",
        "ConvNextConfig",
        "ConvNextForImageClassification",
        {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2, "num_labels": 3},
        dropout="drop_path_rate",
        inputs=_image_inputs,
    ),
    _hf(
        "swin",
        "SwinConfig",
        "SwinForImageClassification",
        {
            "image_size": 16,
            "patch_size": 2,
            "embed_dim": 8,
            "depths": [1, 1],
            "num_heads": [1, 2],
            "window_size": 2,
            "num_labels": 3,
        },
        dropout="hidden_dropout_prob",
        inputs=_image_inputs,
    ),
    _hf(
        "segformer",
        "SegformerConfig",
        "SegformerForSemanticSegmentation",
        {
            "num_encoder_blocks": 2,
            "depths": [1, 1],
            "sr_ratios": [2, 1],
            "hidden_sizes": [8, 16],
            "num_attention_heads": [1, 2],
            "decoder_hidden_size": 16,
            "num_labels": 3,
        },
        dropout="hidden_dropout_prob",
        inputs=_image_inputs,
    ),
    LibraryModel("dit", "diffusers", _dit, _dit_inputs, decoder=False, dropout={"dropout": DROPOUT}),
    LibraryModel("x-continuous", "x-transformers", _x_continuous, _x_continuous_inputs, decoder=True, dropout=_X_DROP),
    LibraryModel("x-enc-dec", "x-transformers", _x_enc_dec, _x_enc_dec_inputs, decoder=False),
    LibraryModel("x-vit", "x-transformers", _x_vit, _image_inputs, decoder=False, dropout=_X_DROP),
)

BY_NAME: dict[str, LibraryModel] = {m.name: m for m in MORE_MODELS}
