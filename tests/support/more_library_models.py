"""More models of the same public libraries, beyond the ones ``library_models.MODELS`` names: the
``benchmarks.library_sweep`` check runs ``ppy_magic.compile`` on each, to find what the named suite misses.

Each is an unmodified library class built from a tiny config (32 features, 2 layers, vocabularies of 100,
sequences of 8, 16-pixel images; dropout 0.1 where the config has a single knob for it), with random weights
from ``library_models.SEED``. The table gives, per model, the config and model class names and the config's
keywords; the inputs are the shared ones of ``library_models`` (a causal LM's ids and labels, an encoder's
ids and attention mask, an image, 400 audio samples). Besides transformers' decoders, encoders, encoder-decoders,
mixtures of experts (OLMoE, Qwen3-MoE, DeepSeek-V3, gpt-oss, Llama 4, JetMoE, PhiMoE, Switch), recurrent models
(Mamba, RWKV, RecurrentGemma), vision and audio models: x-transformers' decoder with its README's options
a few at a time (rotary, ALiBi, relative and dynamic position biases, memory tokens, macaron, residual
attention, token shift, tied embeddings, value residuals, post-norm, layer dropout), and diffusers' VQ and
tiny autoencoders, Transformer2DModel, PixArt's, SD3's and Flux's transformers, the Prior transformer and a
ControlNet.
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


def _audio_inputs() -> Inputs:
    return (torch.randn(1, 400, generator=_gen()),), {}


def _translation_inputs() -> Inputs:
    return (_ids(seed=1),), {"decoder_input_ids": _ids(seed=2, seq=6)}


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
_BART = {  # the BART-shaped encoder-decoders' keywords (one layer each side)
    "d_model": 32,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "vocab_size": VOCAB,
    "max_position_embeddings": 16,
    "decoder_start_token_id": 2,
    **_SPECIAL,
}
_SPEECH = {  # wav2vec2-shaped audio encoders: two conv layers over 400 samples
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "conv_dim": (8, 8),
    "conv_stride": (5, 2),
    "conv_kernel": (10, 3),
    "num_conv_pos_embeddings": 4,
    "num_conv_pos_embedding_groups": 2,
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

_MOE = {**_DECODER, "num_local_experts": 4, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}


def _x_decoder(
    flags: Mapping[str, Any], wrapper: Mapping[str, Any] | None = None
) -> Callable[[Mapping[str, float]], nn.Module]:
    """x-transformers' TransformerWrapper(Decoder(...)) with some of its README's options."""

    def make(dropout: Mapping[str, float]) -> nn.Module:
        from x_transformers import Decoder, TransformerWrapper

        layers = Decoder(dim=32, depth=2, heads=2, **flags, **dropout)
        return TransformerWrapper(num_tokens=VOCAB, max_seq_len=16, attn_layers=layers, **(wrapper or {}))

    return make


def _x_inputs() -> Inputs:
    return (_ids(),), {}


# x-transformers' options, a few per model: each model takes other branches of the same forward.
_X_OPTIONS = {
    "x-llama": (
        {"rotary_pos_emb": True, "ff_glu": True, "ff_swish": True, "use_rmsnorm": True, "attn_kv_heads": 1},
        {},
    ),
    "x-flash": ({"attn_flash": True, "rotary_pos_emb": True, "rotary_xpos": True}, {}),
    "x-alibi": (
        {"alibi_pos_bias": True, "alibi_num_heads": 1, "attn_num_mem_kv": 2, "sandwich_norm": True},
        {"num_memory_tokens": 2},
    ),
    "x-relpos": (
        {"rel_pos_bias": True, "macaron": True, "residual_attn": True, "shift_tokens": 1, "attn_qk_norm": True},
        {},
    ),
    "x-dynpos": (
        {
            "dynamic_pos_bias": True,
            "gate_residual": True,
            "scale_residual": True,
            "ff_post_act_ln": True,
            "attn_head_scale": True,
            "attn_on_attn": True,
        },
        {},
    ),
    "x-tied": ({"use_scalenorm": True}, {"tie_embedding": True, "l2norm_embed": True, "post_emb_norm": True}),
    "x-value": ({"add_value_residual": True, "unet_skips": True, "attn_softclamp_logits": True}, {}),
    "x-postnorm": ({"pre_norm": False, "attn_gate_values": True, "ff_no_bias": True}, {}),
    "x-layerdrop": (
        {"layer_dropout": 0.1, "attn_sparse_topk": 4, "use_simple_rmsnorm": True},
        {"emb_dropout": DROPOUT},
    ),
}


def _diffusers(model: str, **config: Any) -> Callable[[Mapping[str, float]], nn.Module]:
    def make(dropout: Mapping[str, float]) -> nn.Module:
        import diffusers

        return getattr(diffusers, model)(**config, **dropout)

    return make


def _t2d_inputs() -> Inputs:
    g = _gen()
    return (torch.randn(1, 4, 8, 8, generator=g),), {"encoder_hidden_states": torch.randn(1, 5, 16, generator=g)}


def _sd3_inputs() -> Inputs:
    g = _gen()
    return (torch.randn(1, 4, 8, 8, generator=g),), {
        "encoder_hidden_states": torch.randn(1, 5, 16, generator=g),
        "pooled_projections": torch.randn(1, 8, generator=g),
        "timestep": torch.tensor([3]),
    }


def _flux_inputs() -> Inputs:
    g = _gen()
    return (torch.randn(1, 16, 4, generator=g),), {
        "encoder_hidden_states": torch.randn(1, 5, 16, generator=g),
        "pooled_projections": torch.randn(1, 8, generator=g),
        "timestep": torch.tensor([0.5]),
        "img_ids": torch.zeros(16, 3),
        "txt_ids": torch.zeros(5, 3),
    }


def _pixart_inputs() -> Inputs:
    g = _gen()
    return (torch.randn(1, 4, 8, 8, generator=g),), {
        "encoder_hidden_states": torch.randn(1, 5, 16, generator=g),
        "timestep": torch.tensor([3]),
        "added_cond_kwargs": {"resolution": None, "aspect_ratio": None},
    }


def _prior_inputs() -> Inputs:
    g = _gen()
    embedding = torch.randn(1, 16, generator=g)
    return (embedding, torch.tensor([3]), torch.randn(1, 16, generator=g)), {
        "encoder_hidden_states": torch.randn(1, 4, 16, generator=g)
    }


def _controlnet_inputs() -> Inputs:
    g = _gen()
    sample, text = torch.randn(1, 4, 8, 8, generator=g), torch.randn(1, 5, 16, generator=g)
    return (sample, torch.tensor([3]), text, torch.randn(1, 3, 16, 16, generator=g)), {}


_VAE_BLOCKS = {"block_out_channels": (8, 16), "norm_num_groups": 4, "latent_channels": 4}


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
    # Decoders, mixtures of experts, state-space and vision models of later transformers releases.
    _hf("phi3", "Phi3Config", "Phi3ForCausalLM", {**_DECODER, "pad_token_id": 0}),
    _hf("granite", "GraniteConfig", "GraniteForCausalLM", _DECODER, dropout="attention_dropout"),
    _hf("cohere", "CohereConfig", "CohereForCausalLM", _DECODER),
    _hf("cohere2", "Cohere2Config", "Cohere2ForCausalLM", _DECODER),
    _hf("olmo2", "Olmo2Config", "Olmo2ForCausalLM", _DECODER),
    _hf("smollm3", "SmolLM3Config", "SmolLM3ForCausalLM", _DECODER),
    _hf("glm4", "Glm4Config", "Glm4ForCausalLM", {**_DECODER, "head_dim": 16}),
    _hf("helium", "HeliumConfig", "HeliumForCausalLM", {**_DECODER, "head_dim": 16}),
    _hf("exaone4", "Exaone4Config", "Exaone4ForCausalLM", _DECODER),
    _hf("arcee", "ArceeConfig", "ArceeForCausalLM", _DECODER),
    _hf("persimmon", "PersimmonConfig", "PersimmonForCausalLM", {**_DECODER, "num_key_value_heads": 2}),
    _hf(
        "gpt-neo",
        "GPTNeoConfig",
        "GPTNeoForCausalLM",
        {
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 2,
            "vocab_size": VOCAB,
            "max_position_embeddings": 16,
            "attention_types": [[["global", "local"], 1]],
            "window_size": 4,
            **_SPECIAL,
        },
    ),
    _hf(
        "mpt",
        "MptConfig",
        "MptForCausalLM",
        {"d_model": 32, "n_layers": 2, "n_heads": 2, "vocab_size": VOCAB, "max_seq_len": 16},
    ),
    _hf(
        "xglm",
        "XGLMConfig",
        "XGLMForCausalLM",
        {
            "d_model": 32,
            "num_layers": 2,
            "attention_heads": 2,
            "ffn_dim": 64,
            "vocab_size": VOCAB,
            "max_position_embeddings": 16,
            **_SPECIAL,
        },
    ),
    _hf("biogpt", "BioGptConfig", "BioGptForCausalLM", {**_ENCODER, **_SPECIAL}),
    _hf("olmoe", "OlmoeConfig", "OlmoeForCausalLM", _MOE),
    _hf("qwen3-moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", _MOE),
    _hf("granite-moe", "GraniteMoeConfig", "GraniteMoeForCausalLM", _MOE),
    _hf(
        "deepseek-v3",
        "DeepseekV3Config",
        "DeepseekV3ForCausalLM",
        {
            **_MOE,
            "n_routed_experts": 4,
            "first_k_dense_replace": 1,
            "kv_lora_rank": 16,
            "q_lora_rank": 16,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8,
            "v_head_dim": 16,
            "n_group": 1,
            "topk_group": 1,
            "num_key_value_heads": 2,
        },
    ),
    _hf("gpt-oss", "GptOssConfig", "GptOssForCausalLM", {**_MOE, "head_dim": 16, "sliding_window": 4}),
    _hf(
        "mamba",
        "MambaConfig",
        "MambaForCausalLM",
        {"hidden_size": 32, "num_hidden_layers": 2, "vocab_size": VOCAB, "state_size": 4, "expand": 2, **_SPECIAL},
    ),
    _hf(
        "xlm-roberta",
        "XLMRobertaConfig",
        "XLMRobertaModel",
        {**_ENCODER, "max_position_embeddings": 24},
        dropout="hidden_dropout_prob",
        inputs=_encoder_inputs,
    ),
    _hf(
        "megatron-bert",
        "MegatronBertConfig",
        "MegatronBertModel",
        _ENCODER,
        dropout="hidden_dropout_prob",
        inputs=_encoder_inputs,
    ),
    _hf(
        "dinov2",
        "Dinov2Config",
        "Dinov2Model",
        {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 16,
            "patch_size": 4,
            "mlp_ratio": 2,
        },
        inputs=_image_inputs,
    ),
    _hf("beit", "BeitConfig", "BeitModel", {**_ENCODER, "image_size": 16, "patch_size": 4}, inputs=_image_inputs),
    _hf(
        "resnet",
        "ResNetConfig",
        "ResNetModel",
        {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1]},
        inputs=_image_inputs,
    ),
    # Decoders, mixtures of experts and recurrent models beyond the first list
    _hf(
        "gemma3",
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {**_DECODER, "head_dim": 16, "sliding_window": 4},
        dropout="attention_dropout",
    ),
    _hf("nemotron", "NemotronConfig", "NemotronForCausalLM", _DECODER, dropout="attention_dropout"),
    _hf(
        "jetmoe",
        "JetMoeConfig",
        "JetMoeForCausalLM",
        {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_key_value_heads": 2,
            "kv_channels": 8,
            "intermediate_size": 64,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "vocab_size": VOCAB,
            "max_position_embeddings": 16,
            **_SPECIAL,
        },
    ),
    _hf("phimoe", "PhimoeConfig", "PhimoeForCausalLM", _MOE),
    _hf(
        "llama4",
        "Llama4TextConfig",
        "Llama4ForCausalLM",
        {**_MOE, "head_dim": 16, "intermediate_size_mlp": 64, "num_local_experts": 2, "num_experts_per_tok": 1},
    ),
    _hf("ernie4_5", "Ernie4_5Config", "Ernie4_5ForCausalLM", {**_DECODER, "head_dim": 16}),
    _hf(
        "ctrl",
        "CTRLConfig",
        "CTRLLMHeadModel",
        {"n_embd": 32, "n_layer": 2, "n_head": 2, "dff": 64, "vocab_size": VOCAB, "n_positions": 16},
    ),
    _hf(
        "openai-gpt",
        "OpenAIGPTConfig",
        "OpenAIGPTLMHeadModel",
        {"n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": VOCAB, "n_positions": 16},
    ),
    _hf(
        "xlnet",
        "XLNetConfig",
        "XLNetLMHeadModel",
        {"d_model": 32, "n_layer": 2, "n_head": 2, "d_inner": 64, "vocab_size": VOCAB},
    ),
    _hf(
        "rwkv",
        "RwkvConfig",
        "RwkvForCausalLM",
        {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "vocab_size": VOCAB,
            "context_length": 16,
            "attention_hidden_size": 32,
            "intermediate_size": 64,
        },
    ),
    _hf(
        "recurrent-gemma",
        "RecurrentGemmaConfig",
        "RecurrentGemmaForCausalLM",
        {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 3,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "vocab_size": VOCAB,
            "lru_width": 32,
            "attention_window_size": 4,
            "head_dim": 16,
        },
    ),
    # Encoders
    _hf(
        "funnel",
        "FunnelConfig",
        "FunnelModel",
        {"d_model": 32, "n_head": 2, "d_head": 16, "d_inner": 64, "block_sizes": [1, 1], "vocab_size": VOCAB},
        inputs=_encoder_inputs,
    ),
    _hf(
        "squeezebert",
        "SqueezeBertConfig",
        "SqueezeBertModel",
        {**_ENCODER, "embedding_size": 32},
        inputs=_encoder_inputs,
    ),
    _hf(
        "longformer",
        "LongformerConfig",
        "LongformerModel",
        {**_ENCODER, "attention_window": 4, "max_position_embeddings": 24},
        inputs=_encoder_inputs,
    ),
    _hf(
        "big-bird",
        "BigBirdConfig",
        "BigBirdModel",
        {**_ENCODER, "attention_type": "original_full"},
        inputs=_encoder_inputs,
    ),
    _hf("mpnet", "MPNetConfig", "MPNetModel", {**_ENCODER, "max_position_embeddings": 24}, inputs=_encoder_inputs),
    _hf("roformer", "RoFormerConfig", "RoFormerModel", {**_ENCODER, "embedding_size": 32}, inputs=_encoder_inputs),
    _hf(
        "esm",
        "EsmConfig",
        "EsmModel",
        {**_ENCODER, "pad_token_id": 1, "max_position_embeddings": 24},
        inputs=_encoder_inputs,
    ),
    _hf(
        "modernbert",
        "ModernBertConfig",
        "ModernBertModel",
        {**_ENCODER, "global_attn_every_n_layers": 2, "local_attention": 4, **_SPECIAL},
        inputs=_encoder_inputs,
    ),
    _hf(
        "nystromformer",
        "NystromformerConfig",
        "NystromformerModel",
        {**_ENCODER, "num_landmarks": 4, "segment_means_seq_len": 8},
        inputs=_encoder_inputs,
    ),
    # Encoder-decoders
    _hf("mbart", "MBartConfig", "MBartForConditionalGeneration", _BART, inputs=_translation_inputs),
    _hf("pegasus", "PegasusConfig", "PegasusForConditionalGeneration", _BART, inputs=_translation_inputs),
    _hf("m2m100", "M2M100Config", "M2M100ForConditionalGeneration", _BART, inputs=_translation_inputs),
    _hf(
        "led",
        "LEDConfig",
        "LEDForConditionalGeneration",
        {**_BART, "attention_window": 4, "max_encoder_position_embeddings": 16, "max_decoder_position_embeddings": 16},
        inputs=_translation_inputs,
    ),
    _hf(
        "switch",
        "SwitchTransformersConfig",
        "SwitchTransformersForConditionalGeneration",
        {
            "d_model": 32,
            "d_kv": 16,
            "d_ff": 64,
            "num_layers": 2,
            "num_decoder_layers": 2,
            "num_heads": 2,
            "vocab_size": VOCAB,
            "num_experts": 2,
            "decoder_start_token_id": 0,
        },
        inputs=_translation_inputs,
    ),
    # Vision and audio
    _hf(
        "mobilevit",
        "MobileViTConfig",
        "MobileViTModel",
        {"image_size": 16, "hidden_sizes": [16, 24, 32], "neck_hidden_sizes": [8, 8, 16, 16, 24, 32, 64]},
        inputs=_image_inputs,
    ),
    _hf(
        "convnextv2",
        "ConvNextV2Config",
        "ConvNextV2Model",
        {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2},
        inputs=_image_inputs,
    ),
    _hf(
        "swinv2",
        "Swinv2Config",
        "Swinv2Model",
        {"image_size": 16, "patch_size": 2, "embed_dim": 8, "depths": [1, 1], "num_heads": [1, 2], "window_size": 2},
        inputs=_image_inputs,
    ),
    _hf(
        "poolformer",
        "PoolFormerConfig",
        "PoolFormerModel",
        {
            "hidden_sizes": [8, 16],
            "depths": [1, 1],
            "num_encoder_blocks": 2,
            "patch_sizes": [4, 2],
            "strides": [4, 2],
            "padding": [1, 0],
        },
        inputs=_image_inputs,
    ),
    _hf(
        "regnet",
        "RegNetConfig",
        "RegNetModel",
        {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "groups_width": 8},
        inputs=_image_inputs,
    ),
    _hf(
        "mobilenet-v2",
        "MobileNetV2Config",
        "MobileNetV2Model",
        {"image_size": 16, "depth_multiplier": 0.25},
        inputs=_image_inputs,
    ),
    _hf("wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model", _SPEECH, inputs=_audio_inputs),
    _hf("hubert", "HubertConfig", "HubertModel", _SPEECH, inputs=_audio_inputs),
    *(
        LibraryModel(name, "x-transformers", _x_decoder(*options), _x_inputs, decoder=True, dropout=_X_DROP)
        for name, options in _X_OPTIONS.items()
    ),
    LibraryModel(
        "vq",
        "diffusers",
        _diffusers(
            "VQModel",
            down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2,
            num_vq_embeddings=16,
            vq_embed_dim=4,
            **_VAE_BLOCKS,
        ),
        _image_inputs,
        decoder=False,
    ),
    LibraryModel(
        "vae-tiny",
        "diffusers",
        _diffusers(
            "AutoencoderTiny",
            encoder_block_out_channels=(8, 8),
            decoder_block_out_channels=(8, 8),
            num_encoder_blocks=(1, 1),
            num_decoder_blocks=(1, 1),
            latent_channels=4,
        ),
        _image_inputs,
        decoder=False,
    ),
    LibraryModel(
        "transformer-2d",
        "diffusers",
        _diffusers(
            "Transformer2DModel",
            num_attention_heads=2,
            attention_head_dim=8,
            in_channels=4,
            num_layers=1,
            norm_num_groups=4,
            cross_attention_dim=16,
        ),
        _t2d_inputs,
        decoder=False,
        dropout={"dropout": DROPOUT},
    ),
    LibraryModel(
        "sd3",
        "diffusers",
        _diffusers(
            "SD3Transformer2DModel",
            sample_size=8,
            patch_size=2,
            in_channels=4,
            num_layers=1,
            attention_head_dim=8,
            num_attention_heads=2,
            joint_attention_dim=16,
            caption_projection_dim=16,
            pooled_projection_dim=8,
            out_channels=4,
            pos_embed_max_size=16,
        ),
        _sd3_inputs,
        decoder=False,
    ),
    LibraryModel(
        "flux",
        "diffusers",
        _diffusers(
            "FluxTransformer2DModel",
            patch_size=1,
            in_channels=4,
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=8,
            num_attention_heads=2,
            joint_attention_dim=16,
            pooled_projection_dim=8,
            axes_dims_rope=(2, 2, 4),
        ),
        _flux_inputs,
        decoder=False,
    ),
    LibraryModel(
        "pixart",
        "diffusers",
        _diffusers(
            "PixArtTransformer2DModel",
            num_attention_heads=2,
            attention_head_dim=8,
            in_channels=4,
            out_channels=8,
            num_layers=1,
            sample_size=8,
            patch_size=2,
            cross_attention_dim=16,
            caption_channels=16,
            norm_num_groups=4,
        ),
        _pixart_inputs,
        decoder=False,
    ),
    LibraryModel(
        "prior",
        "diffusers",
        _diffusers(
            "PriorTransformer",
            num_attention_heads=2,
            attention_head_dim=8,
            num_layers=1,
            embedding_dim=16,
            num_embeddings=4,
            additional_embeddings=4,
        ),
        _prior_inputs,
        decoder=False,
    ),
    LibraryModel(
        "controlnet",
        "diffusers",
        _diffusers(
            "ControlNetModel",
            block_out_channels=(8, 16),
            layers_per_block=1,
            in_channels=4,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            cross_attention_dim=16,
            attention_head_dim=2,
            norm_num_groups=4,
            conditioning_embedding_out_channels=(8, 8),
        ),
        _controlnet_inputs,
        decoder=False,
    ),
)

BY_NAME: dict[str, LibraryModel] = {m.name: m for m in MORE_MODELS}
