"""One or more calls of every public function of ``torch.nn.functional`` (and ``torch.functional``), as regions.

Shared by tests/test_functional.py and benchmarks/functional_coverage.py. Each
probe is a ``@ppy.opt(3)`` function of one cell (one build) calling one public
function the way user code does, with the options the issue names (every pad
mode, pooling with indices, each interpolate mode, losses with reduction,
weight, ignore_index, label_smoothing, dropout in and out of training, ...).
``PROBES`` maps each probe to the public name it exercises and the calls to
make; ``tests.support.eager.compare_call`` compares each with eager,
gradients included.
"""

from __future__ import annotations

import torch

from tests.support.inputs import Inputs

CELL = """
import math
import torch
import torch.nn.functional as F
import ppy


# ---- activations
@ppy.opt(3)
def p_relu(x):
    return F.relu(x), F.relu(x.clone(), inplace=True)

@ppy.opt(3)
def p_relu_(x):
    return F.relu_(x.clone())

@ppy.opt(3)
def p_relu6(x):
    return F.relu6(x * 4), F.relu6(x.clone() * 4, inplace=True)

@ppy.opt(3)
def p_hardtanh(x):
    return F.hardtanh(x, -0.5, 0.5), F.hardtanh(x.clone(), min_val=-2.0, max_val=0.25, inplace=True)

@ppy.opt(3)
def p_hardtanh_(x):
    return F.hardtanh_(x.clone(), -0.5, 0.5)

@ppy.opt(3)
def p_elu(x):
    return F.elu(x), F.elu(x, alpha=0.5), F.elu(x.clone(), 2.0, True)

@ppy.opt(3)
def p_elu_(x):
    return F.elu_(x.clone(), 0.5)

@ppy.opt(3)
def p_selu(x):
    return F.selu(x), F.selu(x.clone(), inplace=True)

@ppy.opt(3)
def p_selu_(x):
    return F.selu_(x.clone())

@ppy.opt(3)
def p_celu(x):
    return F.celu(x), F.celu(x, alpha=2.0), F.celu(x.clone(), 0.5, True)

@ppy.opt(3)
def p_celu_(x):
    return F.celu_(x.clone(), 0.5)

@ppy.opt(3)
def p_leaky_relu(x):
    return F.leaky_relu(x), F.leaky_relu(x, 0.2), F.leaky_relu(x.clone(), negative_slope=0.1, inplace=True)

@ppy.opt(3)
def p_leaky_relu_(x):
    return F.leaky_relu_(x.clone(), 0.2)

@ppy.opt(3)
def p_prelu(x, w):
    return F.prelu(x, w)

@ppy.opt(3)
def p_rrelu(x):
    return F.rrelu(x), F.rrelu(x, 0.1, 0.3, training=False)

@ppy.opt(3)
def p_rrelu_training(x):
    return F.rrelu(x, training=True)

@ppy.opt(3)
def p_rrelu_(x):
    return F.rrelu_(x.clone())

@ppy.opt(3)
def p_glu(x):
    return F.glu(x), F.glu(x, dim=0)

@ppy.opt(3)
def p_gelu(x):
    return F.gelu(x), F.gelu(x, approximate="tanh")

@ppy.opt(3)
def p_logsigmoid(x):
    return F.logsigmoid(x)

@ppy.opt(3)
def p_hardshrink(x):
    return F.hardshrink(x), F.hardshrink(x, 0.25)

@ppy.opt(3)
def p_tanhshrink(x):
    return F.tanhshrink(x)

@ppy.opt(3)
def p_softsign(x):
    return F.softsign(x)

@ppy.opt(3)
def p_softplus(x):
    return F.softplus(x), F.softplus(x, beta=2.0, threshold=1.0)

@ppy.opt(3)
def p_softmin(x):
    return F.softmin(x, dim=-1), F.softmin(x, 0, dtype=torch.float64)

@ppy.opt(3)
def p_softmax(x):
    return F.softmax(x, dim=-1), F.softmax(x, 1, dtype=torch.float64)

@ppy.opt(3)
def p_log_softmax(x):
    return F.log_softmax(x, dim=-1), F.log_softmax(x, 0, dtype=torch.float64)

@ppy.opt(3)
def p_softshrink(x):
    return F.softshrink(x), F.softshrink(x, 0.25)

@ppy.opt(3)
def p_gumbel_softmax(x):
    return F.gumbel_softmax(x, tau=0.5), F.gumbel_softmax(x, hard=True)

@ppy.opt(3)
def p_tanh(x):
    return F.tanh(x)

@ppy.opt(3)
def p_sigmoid(x):
    return F.sigmoid(x)

@ppy.opt(3)
def p_hardsigmoid(x):
    return F.hardsigmoid(x * 4), F.hardsigmoid(x.clone() * 4, inplace=True)

@ppy.opt(3)
def p_silu(x):
    return F.silu(x), F.silu(x.clone(), inplace=True)

@ppy.opt(3)
def p_mish(x):
    return F.mish(x), F.mish(x.clone(), inplace=True)

@ppy.opt(3)
def p_hardswish(x):
    return F.hardswish(x * 4), F.hardswish(x.clone() * 4, inplace=True)

@ppy.opt(3)
def p_threshold(x):
    return F.threshold(x, 0.1, 20.0), F.threshold(x.clone(), 0.5, -1.0, inplace=True)

@ppy.opt(3)
def p_threshold_(x):
    return F.threshold_(x.clone(), 0.1, 20.0)


# ---- linear and convolution
@ppy.opt(3)
def p_linear(x, w, b):
    return F.linear(x, w, b), F.linear(x, w)

@ppy.opt(3)
def p_bilinear(x1, x2, w, b):
    return F.bilinear(x1, x2, w, b)

@ppy.opt(3)
def p_conv1d(x, w, b):
    return F.conv1d(x, w, b, stride=2, padding=1), F.conv1d(x, w, padding="same", dilation=2)

@ppy.opt(3)
def p_conv2d(x, w, b):
    return F.conv2d(x, w, b, padding=1), F.conv2d(x, w, None, (2, 1), (0, 1), 1, 1)

@ppy.opt(3)
def p_conv3d(x, w):
    return F.conv3d(x, w, padding="valid")

@ppy.opt(3)
def p_conv_transpose1d(x, w, b):
    return F.conv_transpose1d(x, w, b, stride=2, output_padding=1)

@ppy.opt(3)
def p_conv_transpose2d(x, w):
    return F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)

@ppy.opt(3)
def p_conv_transpose3d(x, w):
    return F.conv_transpose3d(x, w, stride=(1, 2, 2))

@ppy.opt(3)
def p_conv_tbc(x, w, b):
    return F.conv_tbc(x, w, b, 1)

@ppy.opt(3)
def p_unfold(x):
    return F.unfold(x, 2), F.unfold(x, (2, 3), dilation=1, padding=1, stride=(2, 1))

@ppy.opt(3)
def p_fold(cols):
    return F.fold(cols, (4, 5), 2), F.fold(cols, output_size=(3, 4), kernel_size=(2, 2), padding=0, stride=1)

@ppy.opt(3)
def p_pixel_shuffle(x):
    return F.pixel_shuffle(x, 2)

@ppy.opt(3)
def p_pixel_unshuffle(x):
    return F.pixel_unshuffle(x, 2)

@ppy.opt(3)
def p_channel_shuffle(x):
    return F.channel_shuffle(x, 2)

@ppy.opt(3)
def p_native_channel_shuffle(x):
    return F.native_channel_shuffle(x, 2)


# ---- pooling
@ppy.opt(3)
def p_avg_pool1d(x):
    return F.avg_pool1d(x, 2), F.avg_pool1d(x, 3, stride=1, padding=1, ceil_mode=True, count_include_pad=False)

@ppy.opt(3)
def p_avg_pool2d(x):
    return F.avg_pool2d(x, 2), F.avg_pool2d(x, (3, 2), stride=1, padding=1, divisor_override=3)

@ppy.opt(3)
def p_avg_pool3d(x):
    return F.avg_pool3d(x, 2, stride=1)

@ppy.opt(3)
def p_max_pool1d(x):
    return F.max_pool1d(x, 2), F.max_pool1d(x, 3, 1, 1, 1, True, True)

@ppy.opt(3)
def p_max_pool1d_with_indices(x):
    return F.max_pool1d_with_indices(x, 2)

@ppy.opt(3)
def p_max_pool2d(x):
    return F.max_pool2d(x, 2), F.max_pool2d(x, (3, 2), stride=1, padding=1, return_indices=True)

@ppy.opt(3)
def p_max_pool2d_with_indices(x):
    return F.max_pool2d_with_indices(x, 2, dilation=1, ceil_mode=True)

@ppy.opt(3)
def p_max_pool3d(x):
    return F.max_pool3d(x, 2), F.max_pool3d(x, 2, return_indices=True)

@ppy.opt(3)
def p_max_pool3d_with_indices(x):
    return F.max_pool3d_with_indices(x, (1, 2, 2))

@ppy.opt(3)
def p_max_unpool1d(x):
    y, i = F.max_pool1d(x, 2, return_indices=True)
    return F.max_unpool1d(y, i, 2), F.max_unpool1d(y, i, 2, output_size=x.size())

@ppy.opt(3)
def p_max_unpool2d(x):
    y, i = F.max_pool2d(x, 2, return_indices=True)
    return F.max_unpool2d(y, i, 2), F.max_unpool2d(y, i, 2, stride=2, output_size=x.shape[-2:])

@ppy.opt(3)
def p_max_unpool3d(x):
    y, i = F.max_pool3d(x, 2, return_indices=True)
    return F.max_unpool3d(y, i, 2)

@ppy.opt(3)
def p_lp_pool1d(x):
    return F.lp_pool1d(x, 2.0, 2), F.lp_pool1d(x, 3, 2, stride=1, ceil_mode=True)

@ppy.opt(3)
def p_lp_pool2d(x):
    return F.lp_pool2d(x, 2.0, 2), F.lp_pool2d(x, 1.5, (2, 3), stride=1)

@ppy.opt(3)
def p_lp_pool3d(x):
    return F.lp_pool3d(x, 2.0, 2)

@ppy.opt(3)
def p_adaptive_avg_pool1d(x):
    return F.adaptive_avg_pool1d(x, 3)

@ppy.opt(3)
def p_adaptive_avg_pool2d(x):
    sizes = [s // 2 for s in x.shape[-2:]]  # sizes known at run time
    return (F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x, (3, None)), F.adaptive_avg_pool2d(x, (2, 3)),
            F.adaptive_avg_pool2d(x, sizes), F.adaptive_max_pool2d(x, x.shape[-2:]))

@ppy.opt(3)
def p_adaptive_avg_pool3d(x):
    return F.adaptive_avg_pool3d(x, (1, 2, 1))

@ppy.opt(3)
def p_adaptive_max_pool1d(x):
    return F.adaptive_max_pool1d(x, 3), F.adaptive_max_pool1d(x, 2, return_indices=True)

@ppy.opt(3)
def p_adaptive_max_pool1d_with_indices(x):
    return F.adaptive_max_pool1d_with_indices(x, 3)

@ppy.opt(3)
def p_adaptive_max_pool2d(x):
    return F.adaptive_max_pool2d(x, 2), F.adaptive_max_pool2d(x, (None, 3), return_indices=True)

@ppy.opt(3)
def p_adaptive_max_pool2d_with_indices(x):
    return F.adaptive_max_pool2d_with_indices(x, (2, 3))

@ppy.opt(3)
def p_adaptive_max_pool3d(x):
    return F.adaptive_max_pool3d(x, 1), F.adaptive_max_pool3d(x, (1, 2, 2), True)

@ppy.opt(3)
def p_adaptive_max_pool3d_with_indices(x):
    return F.adaptive_max_pool3d_with_indices(x, 2)

@ppy.opt(3)
def p_fractional_max_pool2d(x):
    return F.fractional_max_pool2d(x, 2, output_size=3), F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5))

@ppy.opt(3)
def p_fractional_max_pool2d_with_indices(x):
    return F.fractional_max_pool2d_with_indices(x, (2, 2), output_size=(3, 3))

@ppy.opt(3)
def p_fractional_max_pool3d(x):
    return F.fractional_max_pool3d(x, 2, output_size=2), F.fractional_max_pool3d(x, 2, None, 0.5, True)

@ppy.opt(3)
def p_fractional_max_pool3d_with_indices(x):
    return F.fractional_max_pool3d_with_indices(x, 2, output_size=(2, 2, 2))


# ---- dropout
@ppy.opt(3)
def p_dropout(x, training: bool):
    return F.dropout(x, 0.3, training), F.dropout(x, p=0.5, training=training, inplace=False)

@ppy.opt(3)
def p_alpha_dropout(x, training: bool):
    return F.alpha_dropout(x, 0.3, training)

@ppy.opt(3)
def p_feature_alpha_dropout(x, training: bool):
    return F.feature_alpha_dropout(x, 0.3, training)

@ppy.opt(3)
def p_dropout1d(x, training: bool):
    return F.dropout1d(x, 0.5, training)

@ppy.opt(3)
def p_dropout2d(x, training: bool):
    return F.dropout2d(x, 0.5, training)

@ppy.opt(3)
def p_dropout3d(x, training: bool):
    return F.dropout3d(x, 0.5, training)


# ---- normalisation
@ppy.opt(3)
def p_batch_norm(x, rm, rv, w, b):
    return F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)

@ppy.opt(3)
def p_batch_norm_training(x, rm, rv, w, b):
    # training updates the running statistics in place
    y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2)
    return y, rm, rv

@ppy.opt(3)
def p_batch_norm_no_stats(x):
    return F.batch_norm(x, None, None, training=True)

@ppy.opt(3)
def p_instance_norm(x, w, b):
    return F.instance_norm(x), F.instance_norm(x, weight=w, bias=b, eps=1e-3)

@ppy.opt(3)
def p_layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b), F.layer_norm(x, x.shape[-2:])

@ppy.opt(3)
def p_rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w), F.rms_norm(x, x.shape[-1:], eps=1e-6)

@ppy.opt(3)
def p_group_norm(x, w, b):
    return F.group_norm(x, 2, w, b), F.group_norm(x, 4)

@ppy.opt(3)
def p_local_response_norm(x3, x4):
    return F.local_response_norm(x3, 2), F.local_response_norm(x4, 3, alpha=1e-3, beta=0.5, k=2.0)

@ppy.opt(3)
def p_normalize(x):
    return F.normalize(x), F.normalize(x, p=1.0, dim=-1), F.normalize(x, dim=0, eps=1e-6)


# ---- embeddings
@ppy.opt(3)
def p_embedding(idx, w):
    return F.embedding(idx, w), F.embedding(idx, w, padding_idx=0), F.embedding(idx, w, -1)

@ppy.opt(3)
def p_embedding_max_norm(idx, w):
    return F.embedding(idx, w, max_norm=1.0)

@ppy.opt(3)
def p_embedding_bag(idx, w, offsets, psw):
    return (
        F.embedding_bag(idx, w, offsets),
        F.embedding_bag(idx, w, offsets, mode="sum", per_sample_weights=psw),
        F.embedding_bag(idx, w, offsets, mode="max"),
    )

@ppy.opt(3)
def p_one_hot(idx):
    return F.one_hot(idx), F.one_hot(idx, 12)


# ---- attention, distances
@ppy.opt(3)
def p_scaled_dot_product_attention(q, k, v, mask):
    return (
        F.scaled_dot_product_attention(q, k, v),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.5),
    )

@ppy.opt(3)
def p_sdpa_gqa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

@ppy.opt(3)
def p_multi_head_attention_forward(x, mem, in_w, in_b, out_w, out_b, mask):
    # what nn.MultiheadAttention calls: self-attention with weights, cross-attention through SDPA
    self_out, weights = F.multi_head_attention_forward(
        x, x, x, 8, 2, in_w, in_b, None, None, False, 0.0, out_w, out_b, training=False, attn_mask=mask
    )
    cross_out, none = F.multi_head_attention_forward(
        x, mem, mem, 8, 2, in_w, in_b, None, None, False, 0.0, out_w, out_b, training=False, need_weights=False
    )
    return self_out, weights, cross_out

@ppy.opt(3)
def p_cosine_similarity(a, b):
    return F.cosine_similarity(a, b), F.cosine_similarity(a, b, dim=0, eps=1e-6)

@ppy.opt(3)
def p_pairwise_distance(a, b):
    return F.pairwise_distance(a, b), F.pairwise_distance(a, b, p=1.0, keepdim=True)

@ppy.opt(3)
def p_pdist(a):
    return F.pdist(a), F.pdist(a, p=1.0)


# ---- losses
@ppy.opt(3)
def p_cross_entropy(x, t, w, probs):
    return (
        F.cross_entropy(x, t),
        F.cross_entropy(x, t, w, reduction="sum"),
        F.cross_entropy(x, t, ignore_index=1, reduction="none"),
        F.cross_entropy(x, t, label_smoothing=0.1),
        F.cross_entropy(x, probs),
    )

@ppy.opt(3)
def p_nll_loss(x, t, w):
    lp = F.log_softmax(x, dim=1)
    return F.nll_loss(lp, t), F.nll_loss(lp, t, w, ignore_index=2, reduction="sum"), F.nll_loss(lp, t, reduction="none")

@ppy.opt(3)
def p_binary_cross_entropy(p, t, w):
    return F.binary_cross_entropy(p, t), F.binary_cross_entropy(p, t, w, reduction="sum")

@ppy.opt(3)
def p_binary_cross_entropy_with_logits(x, t, w, pw):
    return (
        F.binary_cross_entropy_with_logits(x, t),
        F.binary_cross_entropy_with_logits(x, t, w, reduction="none", pos_weight=pw),
    )

@ppy.opt(3)
def p_kl_div(lp, t):
    return F.kl_div(lp, t, reduction="batchmean"), F.kl_div(lp, t.log(), reduction="sum", log_target=True)

@ppy.opt(3)
def p_mse_loss(x, y, w):
    return F.mse_loss(x, y), F.mse_loss(x, y, reduction="sum"), F.mse_loss(x, y, weight=w)

@ppy.opt(3)
def p_l1_loss(x, y, w):
    return F.l1_loss(x, y), F.l1_loss(x, y, reduction="none"), F.l1_loss(x, y, weight=w, reduction="sum")

@ppy.opt(3)
def p_smooth_l1_loss(x, y):
    return F.smooth_l1_loss(x, y), F.smooth_l1_loss(x, y, beta=0.5), F.smooth_l1_loss(x, y, beta=0.0)

@ppy.opt(3)
def p_huber_loss(x, y, w):
    return F.huber_loss(x, y), F.huber_loss(x, y, delta=0.5, reduction="sum"), F.huber_loss(x, y, weight=w)

@ppy.opt(3)
def p_poisson_nll_loss(x, y):
    return F.poisson_nll_loss(x, y), F.poisson_nll_loss(x.exp(), y, log_input=False, full=True, reduction="sum")

@ppy.opt(3)
def p_gaussian_nll_loss(x, y, var):
    return F.gaussian_nll_loss(x, y, var), F.gaussian_nll_loss(x, y, var, full=True, reduction="sum")

@ppy.opt(3)
def p_margin_ranking_loss(a, b, t):
    return F.margin_ranking_loss(a, b, t), F.margin_ranking_loss(a, b, t, margin=0.5, reduction="none")

@ppy.opt(3)
def p_hinge_embedding_loss(x, t):
    return F.hinge_embedding_loss(x, t), F.hinge_embedding_loss(x, t, margin=0.5, reduction="sum")

@ppy.opt(3)
def p_multilabel_margin_loss(x, t):
    return F.multilabel_margin_loss(x, t)

@ppy.opt(3)
def p_soft_margin_loss(x, t):
    return F.soft_margin_loss(x, t), F.soft_margin_loss(x, t, reduction="none")

@ppy.opt(3)
def p_multilabel_soft_margin_loss(x, t, w):
    return F.multilabel_soft_margin_loss(x, t), F.multilabel_soft_margin_loss(x, t, w, reduction="sum")

@ppy.opt(3)
def p_cosine_embedding_loss(a, b, t):
    return F.cosine_embedding_loss(a, b, t), F.cosine_embedding_loss(a, b, t, margin=0.2, reduction="sum")

@ppy.opt(3)
def p_multi_margin_loss(x, t, w):
    return F.multi_margin_loss(x, t), F.multi_margin_loss(x, t, p=2, margin=0.5, weight=w)

@ppy.opt(3)
def p_triplet_margin_loss(a, p, n):
    return F.triplet_margin_loss(a, p, n), F.triplet_margin_loss(a, p, n, margin=0.5, p=1, swap=True)

@ppy.opt(3)
def p_triplet_margin_with_distance_loss(a, p, n):
    cosine = lambda x, y: 1.0 - F.cosine_similarity(x, y)
    return (
        F.triplet_margin_with_distance_loss(a, p, n),
        F.triplet_margin_with_distance_loss(a, p, n, swap=True),
        F.triplet_margin_with_distance_loss(a, p, n, distance_function=cosine, margin=0.5),
    )

@ppy.opt(3)
def p_ctc_loss(lp, targets, in_lens, tgt_lens):
    return F.ctc_loss(lp, targets, in_lens, tgt_lens), F.ctc_loss(lp, targets, in_lens, tgt_lens, reduction="sum")

@ppy.opt(3)
def p_linear_cross_entropy(x, w, t):
    return F.linear_cross_entropy(x, w, t)


# ---- resampling and padding
@ppy.opt(3)
def p_pad(x):
    return (
        F.pad(x, (1, 2)),
        F.pad(x, (1, 1, 2, 0), value=0.5),
        F.pad(x, (2, 1), mode="reflect"),
        F.pad(x, (1, 2, 0, 1), mode="replicate"),
        F.pad(x, (1, 1, 1, 1), mode="circular"),
        F.pad(x, (-1, 0)),
    )

@ppy.opt(3)
def p_interpolate(x3, x4, x5):
    return (
        F.interpolate(x4, size=(6, 8)),
        F.interpolate(x4, size=7, mode="nearest-exact"),
        F.interpolate(x3, size=9, mode="linear", align_corners=True),
        F.interpolate(x4, size=(5, 7), mode="bilinear"),
        F.interpolate(x4, size=(5, 7), mode="bicubic", align_corners=False),
        F.interpolate(x5, size=(3, 4, 5), mode="trilinear"),
        F.interpolate(x4, size=(2, 3), mode="area"),
        F.interpolate(x4, size=(3, 5), mode="bilinear", antialias=True),
        F.interpolate(x4, scale_factor=2.0, mode="nearest", recompute_scale_factor=True),
        F.interpolate(x4, scale_factor=0.5, mode="area"),
    )

@ppy.opt(3)
def p_interpolate_scale(x):
    return F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, scale_factor=(1.5, 2.0), mode="bilinear")

@ppy.opt(3)
def p_upsample(x):
    return F.upsample(x, size=(6, 8)), F.upsample(x, scale_factor=2, mode="bilinear", align_corners=False)

@ppy.opt(3)
def p_upsample_nearest(x):
    return F.upsample_nearest(x, size=(6, 8))

@ppy.opt(3)
def p_upsample_bilinear(x):
    return F.upsample_bilinear(x, size=(6, 8))

@ppy.opt(3)
def p_grid_sample(x, grid):
    return (
        F.grid_sample(x, grid, align_corners=False),
        F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
        F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection", align_corners=False),
    )

@ppy.opt(3)
def p_affine_grid(theta):
    return F.affine_grid(theta, (2, 3, 4, 5), align_corners=False), F.affine_grid(theta, [2, 1, 3, 3], True)


# ---- torch.functional
@ppy.opt(3)
def p_split(x):
    return torch.split(x, 2), torch.split(x, [1, 3], dim=1), x.split(3, -1), x.split([2, 2])

@ppy.opt(3)
def p_chunk(x):
    return torch.chunk(x, 2), x.chunk(3, dim=1), torch.tensor_split(x, 3), x.tensor_split([1, 2], dim=1)

@ppy.opt(3)
def p_unflatten(x):
    return x.unflatten(1, (2, 2)), torch.unflatten(x, -1, (2, -1))

@ppy.opt(3)
def p_broadcast_tensors(a, b):
    return torch.broadcast_tensors(a, b)

@ppy.opt(3)
def p_meshgrid(a, b):
    return torch.meshgrid(a, b)

@ppy.opt(3)
def p_cdist(a, b):
    return torch.cdist(a, b), torch.cdist(a, b, p=1.0), torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")

@ppy.opt(3)
def p_norm(x):
    return torch.norm(x), torch.norm(x, dim=1), x.norm(p=1, dim=0, keepdim=True), torch.norm(x, "nuc"), x.norm(3)

@ppy.opt(3)
def p_einsum(a, b):
    return torch.einsum("ij,jk->ik", a, b), torch.einsum("ii", a[:, :3]), torch.einsum("ij->ji", a)

@ppy.opt(3)
def p_tensordot(a, b):
    return torch.tensordot(a, b, 1), torch.tensordot(a, b, dims=([1], [0]))

@ppy.opt(3)
def p_unique(x):
    return torch.unique(x), torch.unique(x, return_inverse=True), x.unique(return_counts=True, sorted=True)

@ppy.opt(3)
def p_unique_dim(x):
    return torch.unique(x, dim=0, return_inverse=True, return_counts=True)

@ppy.opt(3)
def p_unique_consecutive(x):
    return torch.unique_consecutive(x), torch.unique_consecutive(x, return_counts=True), x.unique_consecutive()

@ppy.opt(3)
def p_atleast_1d(a, b):
    return torch.atleast_1d(a), torch.atleast_1d(a, b)

@ppy.opt(3)
def p_atleast_2d(a, b):
    return torch.atleast_2d(a), torch.atleast_2d(a, b)

@ppy.opt(3)
def p_atleast_3d(a, b):
    return torch.atleast_3d(b), torch.atleast_3d(a, b)

@ppy.opt(3)
def p_block_diag(a, b):
    return torch.block_diag(a, b)

@ppy.opt(3)
def p_cartesian_prod(a, b):
    return torch.cartesian_prod(a, b)

@ppy.opt(3)
def p_chain_matmul(a, b, c):
    return torch.chain_matmul(a, b, c)

@ppy.opt(3)
def p_lu(a):
    return torch.lu(a), torch.lu(a, get_infos=True), a.lu()

@ppy.opt(3)
def p_stft(x, window):
    return torch.stft(x, 8, hop_length=2, window=window, return_complex=True), x.stft(8, return_complex=True)

@ppy.opt(3)
def p_istft(z, window):
    return torch.istft(z, 8, hop_length=2, window=window), z.istft(8, hop_length=2, window=window)
"""


_inputs = Inputs()  # this module's own stream of seeds
t, ints, uniform = _inputs.t, _inputs.ints, _inputs.uniform


def _ctc():
    T, N, C, S = 12, 2, 5, 4
    lp = torch.randn(T, N, C, generator=torch.Generator().manual_seed(7)).log_softmax(2).requires_grad_()
    targets = torch.randint(1, C, (N, S), generator=torch.Generator().manual_seed(8))
    return (lp, targets, torch.full((N,), T, dtype=torch.long), torch.tensor([4, 3])), {}


def _unique_input():
    return (torch.tensor([[1, 2, 2], [1, 2, 2], [3, 1, 0]]),), {}


def _x(*shape, **kw):
    return lambda: ((t(*shape, **kw),), {})


# probe -> (the public name it exercises, [calls: () -> (args, kwargs)])
PROBES: dict[str, tuple[str, list]] = {
    "p_relu": ("F.relu", [_x(4, 6)]),
    "p_relu_": ("F.relu_", [_x(4, 6)]),
    "p_relu6": ("F.relu6", [_x(4, 6)]),
    "p_hardtanh": ("F.hardtanh", [_x(4, 6)]),
    "p_hardtanh_": ("F.hardtanh_", [_x(4, 6)]),
    "p_elu": ("F.elu", [_x(4, 6)]),
    "p_elu_": ("F.elu_", [_x(4, 6)]),
    "p_selu": ("F.selu", [_x(4, 6)]),
    "p_selu_": ("F.selu_", [_x(4, 6)]),
    "p_celu": ("F.celu", [_x(4, 6)]),
    "p_celu_": ("F.celu_", [_x(4, 6)]),
    "p_leaky_relu": ("F.leaky_relu", [_x(4, 6)]),
    "p_leaky_relu_": ("F.leaky_relu_", [_x(4, 6)]),
    "p_prelu": ("F.prelu", [lambda: ((t(2, 3, 4), t(3)), {})]),
    "p_rrelu": ("F.rrelu", [_x(4, 6)]),
    "p_rrelu_training": ("F.rrelu", [_x(4, 6)]),
    "p_rrelu_": ("F.rrelu_", [_x(4, 6, grad=False)]),
    "p_glu": ("F.glu", [_x(4, 6)]),
    "p_gelu": ("F.gelu", [_x(4, 6)]),
    "p_logsigmoid": ("F.logsigmoid", [_x(4, 6)]),
    "p_hardshrink": ("F.hardshrink", [_x(4, 6)]),
    "p_tanhshrink": ("F.tanhshrink", [_x(4, 6)]),
    "p_softsign": ("F.softsign", [_x(4, 6)]),
    "p_softplus": ("F.softplus", [_x(4, 6)]),
    "p_softmin": ("F.softmin", [_x(4, 6)]),
    "p_softmax": ("F.softmax", [_x(4, 6)]),
    "p_log_softmax": ("F.log_softmax", [_x(4, 6)]),
    "p_softshrink": ("F.softshrink", [_x(4, 6)]),
    "p_gumbel_softmax": ("F.gumbel_softmax", [_x(4, 6)]),
    "p_tanh": ("F.tanh", [_x(4, 6)]),
    "p_sigmoid": ("F.sigmoid", [_x(4, 6)]),
    "p_hardsigmoid": ("F.hardsigmoid", [_x(4, 6)]),
    "p_silu": ("F.silu", [_x(4, 6)]),
    "p_mish": ("F.mish", [_x(4, 6)]),
    "p_hardswish": ("F.hardswish", [_x(4, 6)]),
    "p_threshold": ("F.threshold", [_x(4, 6)]),
    "p_threshold_": ("F.threshold_", [_x(4, 6)]),
    "p_linear": ("F.linear", [lambda: ((t(3, 5), t(4, 5), t(4)), {})]),
    "p_bilinear": ("F.bilinear", [lambda: ((t(3, 5), t(3, 2), t(4, 5, 2), t(4)), {})]),
    "p_conv1d": ("F.conv1d", [lambda: ((t(2, 3, 9), t(4, 3, 3), t(4)), {})]),
    "p_conv2d": ("F.conv2d", [lambda: ((t(2, 3, 6, 7), t(4, 3, 3, 3), t(4)), {})]),
    "p_conv3d": ("F.conv3d", [lambda: ((t(1, 2, 4, 5, 5), t(3, 2, 2, 2, 2)), {})]),
    "p_conv_transpose1d": ("F.conv_transpose1d", [lambda: ((t(2, 3, 6), t(3, 4, 3), t(4)), {})]),
    "p_conv_transpose2d": ("F.conv_transpose2d", [lambda: ((t(2, 3, 4, 5), t(3, 2, 3, 3)), {})]),
    "p_conv_transpose3d": ("F.conv_transpose3d", [lambda: ((t(1, 2, 3, 4, 4), t(2, 3, 2, 2, 2)), {})]),
    "p_conv_tbc": ("F.conv_tbc", [lambda: ((t(7, 2, 3), t(3, 3, 4), t(4)), {})]),
    "p_unfold": ("F.unfold", [_x(2, 3, 5, 6)]),
    "p_fold": ("F.fold", [_x(2, 12, 12)]),
    "p_pixel_shuffle": ("F.pixel_shuffle", [_x(1, 8, 3, 3)]),
    "p_pixel_unshuffle": ("F.pixel_unshuffle", [_x(1, 2, 4, 6)]),
    "p_channel_shuffle": ("F.channel_shuffle", [_x(1, 4, 3, 3)]),
    "p_native_channel_shuffle": ("F.native_channel_shuffle", [_x(1, 4, 3, 3)]),
    "p_avg_pool1d": ("F.avg_pool1d", [_x(2, 3, 9)]),
    "p_avg_pool2d": ("F.avg_pool2d", [_x(2, 3, 6, 7)]),
    "p_avg_pool3d": ("F.avg_pool3d", [_x(1, 2, 4, 5, 5)]),
    "p_max_pool1d": ("F.max_pool1d", [_x(2, 3, 9)]),
    "p_max_pool1d_with_indices": ("F.max_pool1d_with_indices", [_x(2, 3, 9)]),
    "p_max_pool2d": ("F.max_pool2d", [_x(2, 3, 6, 7)]),
    "p_max_pool2d_with_indices": ("F.max_pool2d_with_indices", [_x(2, 3, 6, 7)]),
    "p_max_pool3d": ("F.max_pool3d", [_x(1, 2, 4, 6, 6)]),
    "p_max_pool3d_with_indices": ("F.max_pool3d_with_indices", [_x(1, 2, 4, 6, 6)]),
    "p_max_unpool1d": ("F.max_unpool1d", [_x(2, 3, 8)]),
    "p_max_unpool2d": ("F.max_unpool2d", [_x(2, 3, 6, 8)]),
    "p_max_unpool3d": ("F.max_unpool3d", [_x(1, 2, 4, 4, 4)]),
    "p_lp_pool1d": ("F.lp_pool1d", [_x(2, 3, 9, positive=True)]),
    "p_lp_pool2d": ("F.lp_pool2d", [_x(2, 3, 6, 7, positive=True)]),
    "p_lp_pool3d": ("F.lp_pool3d", [_x(1, 2, 4, 4, 4, positive=True)]),
    "p_adaptive_avg_pool1d": ("F.adaptive_avg_pool1d", [_x(2, 3, 9)]),
    "p_adaptive_avg_pool2d": ("F.adaptive_avg_pool2d", [_x(2, 3, 6, 7)]),
    "p_adaptive_avg_pool3d": ("F.adaptive_avg_pool3d", [_x(1, 2, 4, 5, 5)]),
    "p_adaptive_max_pool1d": ("F.adaptive_max_pool1d", [_x(2, 3, 9)]),
    "p_adaptive_max_pool1d_with_indices": ("F.adaptive_max_pool1d_with_indices", [_x(2, 3, 9)]),
    "p_adaptive_max_pool2d": ("F.adaptive_max_pool2d", [_x(2, 3, 6, 7)]),
    "p_adaptive_max_pool2d_with_indices": ("F.adaptive_max_pool2d_with_indices", [_x(2, 3, 6, 7)]),
    "p_adaptive_max_pool3d": ("F.adaptive_max_pool3d", [_x(1, 2, 4, 5, 5)]),
    "p_adaptive_max_pool3d_with_indices": ("F.adaptive_max_pool3d_with_indices", [_x(1, 2, 4, 5, 5)]),
    "p_fractional_max_pool2d": ("F.fractional_max_pool2d", [_x(2, 3, 7, 7)]),
    "p_fractional_max_pool2d_with_indices": ("F.fractional_max_pool2d_with_indices", [_x(2, 3, 7, 7)]),
    "p_fractional_max_pool3d": ("F.fractional_max_pool3d", [_x(1, 2, 5, 5, 5)]),
    "p_fractional_max_pool3d_with_indices": ("F.fractional_max_pool3d_with_indices", [_x(1, 2, 5, 5, 5)]),
    "p_dropout": ("F.dropout", [lambda: ((t(4, 6), True), {}), lambda: ((t(4, 6), False), {})]),
    "p_alpha_dropout": ("F.alpha_dropout", [lambda: ((t(4, 6), True), {}), lambda: ((t(4, 6), False), {})]),
    "p_feature_alpha_dropout": (
        "F.feature_alpha_dropout",
        [lambda: ((t(2, 3, 4), True), {}), lambda: ((t(2, 3, 4), False), {})],
    ),
    "p_dropout1d": ("F.dropout1d", [lambda: ((t(2, 3, 4), True), {}), lambda: ((t(3, 4), False), {})]),
    "p_dropout2d": ("F.dropout2d", [lambda: ((t(2, 3, 4, 4), True), {}), lambda: ((t(3, 4, 4), False), {})]),
    "p_dropout3d": ("F.dropout3d", [lambda: ((t(2, 3, 2, 2, 2), True), {}), lambda: ((t(3, 2, 2, 2), True), {})]),
    "p_batch_norm": (
        "F.batch_norm",
        [lambda: ((t(4, 3, 5), t(3, grad=False), t(3, grad=False, positive=True), t(3), t(3)), {})],
    ),
    "p_batch_norm_training": (
        "F.batch_norm",
        [lambda: ((t(4, 3, 5), t(3, grad=False), t(3, grad=False, positive=True), t(3), t(3)), {})],
    ),
    "p_batch_norm_no_stats": ("F.batch_norm", [_x(4, 3, 5)]),
    "p_instance_norm": ("F.instance_norm", [lambda: ((t(2, 3, 5), t(3), t(3)), {})]),
    "p_layer_norm": ("F.layer_norm", [lambda: ((t(2, 3, 5), t(5), t(5)), {})]),
    "p_rms_norm": ("F.rms_norm", [lambda: ((t(2, 3, 5), t(5)), {})]),
    "p_group_norm": ("F.group_norm", [lambda: ((t(2, 4, 5), t(4), t(4)), {})]),
    "p_local_response_norm": ("F.local_response_norm", [lambda: ((t(2, 4, 5), t(2, 4, 3, 3)), {})]),
    "p_normalize": ("F.normalize", [_x(4, 6)]),
    "p_embedding": ("F.embedding", [lambda: ((ints(10, 3, 4), t(10, 5)), {})]),
    "p_embedding_max_norm": ("F.embedding", [lambda: ((ints(10, 3, 4), t(10, 5, grad=False)), {})]),
    "p_embedding_bag": (
        "F.embedding_bag",
        [lambda: ((ints(10, 8), t(10, 5), torch.tensor([0, 3, 5]), t(8)), {})],
    ),
    "p_one_hot": ("F.one_hot", [lambda: ((ints(10, 3, 4),), {})]),
    "p_scaled_dot_product_attention": (
        "F.scaled_dot_product_attention",
        [lambda: ((t(2, 2, 5, 4), t(2, 2, 5, 4), t(2, 2, 5, 4), t(5, 5, grad=False) > 0), {})],
    ),
    "p_sdpa_gqa": ("F.scaled_dot_product_attention", [lambda: ((t(1, 4, 5, 4), t(1, 2, 5, 4), t(1, 2, 5, 4)), {})]),
    "p_multi_head_attention_forward": (
        "F.multi_head_attention_forward",
        [lambda: ((t(5, 2, 8), t(6, 2, 8), t(24, 8), t(24), t(8, 8), t(8), t(5, 5, grad=False) > 0), {})],
    ),
    "p_cosine_similarity": ("F.cosine_similarity", [lambda: ((t(4, 6), t(4, 6)), {})]),
    "p_pairwise_distance": ("F.pairwise_distance", [lambda: ((t(4, 6), t(4, 6)), {})]),
    "p_pdist": ("F.pdist", [_x(5, 3)]),
    "p_cross_entropy": (
        "F.cross_entropy",
        [lambda: ((t(6, 4), ints(4, 6), t(4, positive=True), t(6, 4, grad=False).softmax(1)), {})],
    ),
    "p_nll_loss": ("F.nll_loss", [lambda: ((t(6, 4), ints(4, 6), t(4, positive=True)), {})]),
    "p_binary_cross_entropy": (
        "F.binary_cross_entropy",
        [lambda: ((uniform(4, 3), uniform(4, 3, grad=False), t(3)), {})],
    ),
    "p_binary_cross_entropy_with_logits": (
        "F.binary_cross_entropy_with_logits",
        [lambda: ((t(4, 3), uniform(4, 3, grad=False), t(3), t(3, positive=True)), {})],
    ),
    "p_kl_div": ("F.kl_div", [lambda: ((t(4, 5).log_softmax(1), uniform(4, 5, grad=False)), {})]),
    "p_mse_loss": ("F.mse_loss", [lambda: ((t(4, 5), t(4, 5), t(4, 5, positive=True)), {})]),
    "p_l1_loss": ("F.l1_loss", [lambda: ((t(4, 5), t(4, 5), t(4, 5, positive=True)), {})]),
    "p_smooth_l1_loss": ("F.smooth_l1_loss", [lambda: ((t(4, 5), t(4, 5)), {})]),
    "p_huber_loss": ("F.huber_loss", [lambda: ((t(4, 5), t(4, 5), t(4, 5, positive=True)), {})]),
    "p_poisson_nll_loss": ("F.poisson_nll_loss", [lambda: ((t(4, 5), uniform(4, 5, grad=False) * 3), {})]),
    "p_gaussian_nll_loss": (
        "F.gaussian_nll_loss",
        [
            lambda: ((t(4, 5), t(4, 5), t(4, 5, positive=True)), {}),
            lambda: ((t(4, 5), t(4, 5), t(4, 1, positive=True)), {}),  # var of one column: unsqueezed
            lambda: ((t(4, 5), t(4, 5), t(4, 5)), {}),  # a negative entry: torch.any(var < 0) raises
        ],
    ),
    "p_margin_ranking_loss": ("F.margin_ranking_loss", [lambda: ((t(6), t(6), torch.tensor([1.0, -1.0] * 3)), {})]),
    "p_hinge_embedding_loss": ("F.hinge_embedding_loss", [lambda: ((t(6), torch.tensor([1.0, -1.0] * 3)), {})]),
    "p_multilabel_margin_loss": (
        "F.multilabel_margin_loss",
        [lambda: ((t(2, 4), torch.tensor([[3, 0, -1, 1], [1, 2, 3, -1]])), {})],
    ),
    "p_soft_margin_loss": ("F.soft_margin_loss", [lambda: ((t(6), torch.tensor([1.0, -1.0] * 3)), {})]),
    "p_multilabel_soft_margin_loss": (
        "F.multilabel_soft_margin_loss",
        [lambda: ((t(3, 4), (uniform(3, 4, grad=False) > 0.5).float(), t(4)), {})],
    ),
    "p_cosine_embedding_loss": (
        "F.cosine_embedding_loss",
        [lambda: ((t(6, 3), t(6, 3), torch.tensor([1, -1] * 3)), {})],
    ),
    "p_multi_margin_loss": ("F.multi_margin_loss", [lambda: ((t(5, 4), ints(4, 5), t(4, positive=True)), {})]),
    "p_triplet_margin_loss": ("F.triplet_margin_loss", [lambda: ((t(4, 5), t(4, 5), t(4, 5)), {})]),
    "p_triplet_margin_with_distance_loss": (
        "F.triplet_margin_with_distance_loss",
        [lambda: ((t(4, 5), t(4, 5), t(4, 5)), {})],
    ),
    "p_ctc_loss": ("F.ctc_loss", [_ctc]),
    "p_linear_cross_entropy": ("F.linear_cross_entropy", [lambda: ((t(4, 5), t(7, 5), ints(7, 4)), {})]),
    "p_pad": ("F.pad", [_x(2, 3, 5)]),
    "p_interpolate": ("F.interpolate", [lambda: ((t(2, 3, 5), t(2, 3, 4, 5), t(1, 2, 2, 3, 3)), {})]),
    "p_interpolate_scale": ("F.interpolate", [_x(1, 2, 3, 4)]),
    "p_upsample": ("F.upsample", [_x(1, 2, 3, 4)]),
    "p_upsample_nearest": ("F.upsample_nearest", [_x(1, 2, 3, 4)]),
    "p_upsample_bilinear": ("F.upsample_bilinear", [_x(1, 2, 3, 4)]),
    "p_grid_sample": ("F.grid_sample", [lambda: ((t(2, 3, 4, 5), t(2, 3, 3, 2, scale=0.8)), {})]),
    "p_affine_grid": ("F.affine_grid", [_x(2, 2, 3)]),
    "p_split": ("torch.split", [_x(4, 4)]),
    "p_chunk": ("torch.chunk", [_x(4, 6)]),
    "p_unflatten": ("Tensor.unflatten", [_x(3, 4)]),
    "p_broadcast_tensors": ("torch.broadcast_tensors", [lambda: ((t(3, 1), t(4)), {})]),
    "p_meshgrid": ("torch.meshgrid", [lambda: ((t(3), t(4)), {})]),
    "p_cdist": ("torch.cdist", [lambda: ((t(4, 3), t(5, 3)), {})]),
    "p_norm": ("torch.norm", [_x(4, 5)]),
    "p_einsum": ("torch.einsum", [lambda: ((t(3, 4), t(4, 2)), {})]),
    "p_tensordot": ("torch.tensordot", [lambda: ((t(3, 4), t(4, 2)), {})]),
    "p_unique": ("torch.unique", [_unique_input]),
    "p_unique_dim": ("torch.unique", [_unique_input]),
    "p_unique_consecutive": ("torch.unique_consecutive", [_unique_input]),
    "p_atleast_1d": ("torch.atleast_1d", [lambda: ((t(()), t(3)), {})]),
    "p_atleast_2d": ("torch.atleast_2d", [lambda: ((t(()), t(3)), {})]),
    "p_atleast_3d": ("torch.atleast_3d", [lambda: ((t(()), t(3, 2)), {})]),
    "p_block_diag": ("torch.block_diag", [lambda: ((t(2, 2), t(1, 3)), {})]),
    "p_cartesian_prod": ("torch.cartesian_prod", [lambda: ((t(2), t(3)), {})]),
    "p_chain_matmul": ("torch.chain_matmul", [lambda: ((t(2, 3), t(3, 4), t(4, 2)), {})]),
    "p_lu": ("torch.lu", [_x(3, 3)]),
    "p_stft": ("torch.stft", [lambda: ((t(32), torch.hann_window(8)), {})]),
    "p_istft": (
        "torch.istft",
        [
            lambda: (
                (
                    torch.stft(torch.randn(32), 8, hop_length=2, window=torch.hann_window(8), return_complex=True),
                    torch.hann_window(8),
                ),
                {},
            )
        ],
    ),
}
