"""Model code that calls torch.nn.functional, as public repositories write it, compiled and compared with eager.

Losses (focal, VAE, CLIP/SimCLR contrastive, distillation, Dice, DETR boxes), blocks
(diffusion ResBlock with group_norm, ESRGAN/ESPCN upsamplers with pixel_shuffle, ResNet
with batch norm in training, UNet up-sampling with F.pad, squeeze-excitation, a spatial
transformer), and the parameter kinds such code uses (``Optional[int]``, ``torch.dtype``,
a ``float`` parameter given an int, ``str`` choices). Each is a ``@ppy.opt(3)``
function of one cell (one build); every one must compile and match eager bitwise,
gradients included (tests/support/eager.py compares outputs, inputs after the call,
the generator's state and gradients).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.batch import python_outcome
from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.inputs import Inputs
from tests.support.outcomes import CRASH, FAILURES, MATCH, PYTHON

CELL = """
import math
from typing import Optional

import torch
import torch.nn.functional as F
import ppy


@ppy.opt(3)
def sigmoid_focal_loss(inputs, targets, alpha: float = 0.25, gamma: float = 2, reduction: str = "none"):
    # torchvision.ops.sigmoid_focal_loss
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss
    if reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    elif reduction != "none":
        raise ValueError(f"Invalid Value for arg 'reduction': '{reduction}' ")
    return loss


@ppy.opt(3)
def vae_loss(recon_x, x, mu, logvar):
    # pytorch/examples vae/main.py
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


@ppy.opt(3)
def clip_loss(image_features, text_features, logit_scale):
    # open_clip ClipLoss, one device
    image_features = F.normalize(image_features, dim=-1)
    text_features = F.normalize(text_features, dim=-1)
    logits_per_image = logit_scale.exp() * image_features @ text_features.T
    logits_per_text = logits_per_image.T
    labels = torch.arange(logits_per_image.shape[0], device=image_features.device, dtype=torch.long)
    return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


@ppy.opt(3)
def nt_xent(z_i, z_j, temperature: float = 0.5):
    # SimCLR NT-Xent (Spijkervet/SimCLR)
    batch_size = z_i.shape[0]
    z = F.normalize(torch.cat((z_i, z_j), dim=0), dim=1)
    sim = torch.matmul(z, z.T) / temperature
    positives = torch.cat((torch.diag(sim, batch_size), torch.diag(sim, -batch_size)), dim=0).reshape(2 * batch_size, 1)
    mask = ~torch.eye(2 * batch_size, dtype=torch.bool, device=z.device)
    mask[:batch_size, batch_size:] &= ~torch.eye(batch_size, dtype=torch.bool, device=z.device)
    mask[batch_size:, :batch_size] &= ~torch.eye(batch_size, dtype=torch.bool, device=z.device)
    negatives = sim[mask].reshape(2 * batch_size, -1)
    logits = torch.cat((positives, negatives), dim=1)
    labels = torch.zeros(2 * batch_size, dtype=torch.long, device=z.device)
    return F.cross_entropy(logits, labels, reduction="sum") / (2 * batch_size)


@ppy.opt(3)
def distillation_loss(student_logits, teacher_logits, labels, T: float = 2.0, alpha: float = 0.5):
    # Hinton et al. knowledge distillation, as in many training scripts
    soft = F.kl_div(
        F.log_softmax(student_logits / T, dim=1), F.softmax(teacher_logits / T, dim=1), reduction="batchmean"
    ) * (T * T)
    hard = F.cross_entropy(student_logits, labels)
    return alpha * soft + (1.0 - alpha) * hard


@ppy.opt(3)
def label_smoothing_ce(x, target, smoothing: float = 0.1):
    # timm LabelSmoothingCrossEntropy
    confidence = 1.0 - smoothing
    logprobs = F.log_softmax(x, dim=-1)
    nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1))
    nll_loss = nll_loss.squeeze(1)
    smooth_loss = -logprobs.mean(dim=-1)
    loss = confidence * nll_loss + smoothing * smooth_loss
    return loss.mean()


@ppy.opt(3)
def dice_loss(logits, targets, eps: float = 1e-6):
    # segmentation Dice loss on sigmoid probabilities
    probs = torch.sigmoid(logits)
    num = 2 * (probs * targets).sum(dim=(2, 3)) + eps
    den = probs.sum(dim=(2, 3)) + targets.sum(dim=(2, 3)) + eps
    return 1 - (num / den).mean()


@ppy.opt(3)
def box_cxcywh_to_xyxy(x):
    # DETR util/box_ops.py
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


@ppy.opt(3)
def generalized_box_iou(boxes1, boxes2):
    # DETR util/box_ops.py
    area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])
    area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    iou = inter / union
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


@ppy.opt(3)
def detr_box_losses(src_boxes, target_boxes, num_boxes: float):
    # DETR SetCriterion.loss_boxes
    loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none")
    loss_giou = 1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes), box_cxcywh_to_xyxy(target_boxes)))
    return loss_bbox.sum() / num_boxes, loss_giou.sum() / num_boxes


@ppy.opt(3)
def diffusion_resblock(x, emb, n1_w, n1_b, c1_w, c1_b, e_w, e_b, n2_w, n2_b, c2_w, c2_b, training: bool):
    # guided-diffusion ResBlock (no up/down sampling, same channels)
    h = F.silu(F.group_norm(x, 4, n1_w, n1_b))
    h = F.conv2d(h, c1_w, c1_b, padding=1)
    emb_out = F.linear(F.silu(emb), e_w, e_b)
    h = h + emb_out[:, :, None, None]
    h = F.silu(F.group_norm(h, 4, n2_w, n2_b))
    h = F.dropout(h, p=0.1, training=training)
    h = F.conv2d(h, c2_w, c2_b, padding=1)
    return x + h


@ppy.opt(3)
def esrgan_upsampler(feat, w1, b1, w2, b2):
    # Real-ESRGAN / SRResNet pixel-shuffle upsampling: conv -> PixelShuffle(2) -> LeakyReLU, twice
    feat = F.leaky_relu(F.pixel_shuffle(F.conv2d(feat, w1, b1, padding=1), 2), negative_slope=0.2)
    feat = F.leaky_relu(F.pixel_shuffle(F.conv2d(feat, w2, b2, padding=1), 2), negative_slope=0.2)
    return feat


@ppy.opt(3)
def espcn(x, w1, b1, w2, b2, w3, b3, upscale: int):
    # ESPCN (the PyTorch super-resolution example)
    x = torch.tanh(F.conv2d(x, w1, b1, padding=2))
    x = torch.tanh(F.conv2d(x, w2, b2, padding=1))
    return torch.sigmoid(F.pixel_shuffle(F.conv2d(x, w3, b3, padding=1), upscale))


@ppy.opt(3)
def resnet_basic_block(x, c1_w, bn1_rm, bn1_rv, bn1_w, bn1_b, c2_w, bn2_rm, bn2_rv, bn2_w, bn2_b, training: bool):
    # torchvision BasicBlock written functionally: batch norm updates its running stats in training
    out = F.conv2d(x, c1_w, padding=1)
    out = F.relu(F.batch_norm(out, bn1_rm, bn1_rv, bn1_w, bn1_b, training, 0.1, 1e-5))
    out = F.conv2d(out, c2_w, padding=1)
    out = F.batch_norm(out, bn2_rm, bn2_rv, bn2_w, bn2_b, training, 0.1, 1e-5)
    return F.relu(out + x)


@ppy.opt(3)
def unet_up(x1, x2, up_w, up_b):
    # milesial/Pytorch-UNet Up: transpose conv, pad to the skip connection's size, concatenate
    x1 = F.conv_transpose2d(x1, up_w, up_b, stride=2)
    diff_y = x2.size()[2] - x1.size()[2]
    diff_x = x2.size()[3] - x1.size()[3]
    x1 = F.pad(x1, [diff_x // 2, diff_x - diff_x // 2, diff_y // 2, diff_y - diff_y // 2])
    return torch.cat([x2, x1], dim=1)


@ppy.opt(3)
def squeeze_excitation(x, fc1_w, fc1_b, fc2_w, fc2_b):
    # torchvision.ops.SqueezeExcitation with Hardsigmoid (MobileNetV3)
    scale = F.adaptive_avg_pool2d(x, 1)
    scale = F.relu(F.conv2d(scale, fc1_w, fc1_b))
    scale = F.hardsigmoid(F.conv2d(scale, fc2_w, fc2_b))
    return scale * x


@ppy.opt(3)
def mobilenet_inverted_residual(x, w_exp, rm1, rv1, g1, b1, w_dw, rm2, rv2, g2, b2, w_proj, rm3, rv3, g3, b3):
    # MobileNetV3 InvertedResidual, eval mode: expand 1x1, depthwise 3x3, project 1x1, residual
    h = F.hardswish(F.batch_norm(F.conv2d(x, w_exp), rm1, rv1, g1, b1, False, 0.01, 0.001))
    h = F.conv2d(h, w_dw, padding=1, groups=w_dw.shape[0])
    h = F.hardswish(F.batch_norm(h, rm2, rv2, g2, b2, False, 0.01, 0.001))
    h = F.batch_norm(F.conv2d(h, w_proj), rm3, rv3, g3, b3, False, 0.01, 0.001)
    return h + x


@ppy.opt(3)
def gumbel_quantize(logits, embed_w, tau: float, hard: bool):
    # DALL-E dVAE / taming GumbelQuantize
    soft_one_hot = F.gumbel_softmax(logits, tau=tau, dim=1, hard=hard)
    return torch.einsum("b n h w, n d -> b d h w", soft_one_hot, embed_w)


@ppy.opt(3)
def arcface_logits(embeddings, weight, labels, s: float = 64.0, m: float = 0.5):
    # ArcFace additive angular margin (insightface, simplified)
    cosine = F.linear(F.normalize(embeddings), F.normalize(weight))
    sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
    phi = cosine * math.cos(m) - sine * math.sin(m)
    one_hot = F.one_hot(labels, num_classes=weight.shape[0]).to(cosine.dtype)
    output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
    return output * s


@ppy.opt(3)
def triplet_embedding_loss(anchor, positive, negative, margin: float = 0.2):
    # FaceNet-style triplet loss on L2-normalised embeddings
    return F.triplet_margin_loss(F.normalize(anchor), F.normalize(positive), F.normalize(negative), margin=margin)


@ppy.opt(3)
def spatial_transformer(x, theta):
    # the PyTorch spatial transformer tutorial's stn()
    grid = F.affine_grid(theta, x.size(), align_corners=False)
    return F.grid_sample(x, grid, align_corners=False)


@ppy.opt(3)
def yolo_upsample_concat(x, skip, w, b):
    # YOLOv5 neck: 1x1 conv + SiLU, nearest upsampling by 2, concat with the skip connection
    x = F.silu(F.conv2d(x, w, b))
    x = F.interpolate(x, scale_factor=2.0, mode="nearest")
    return torch.cat([x, skip], dim=1)


@ppy.opt(3)
def top_k_filtering(logits, top_k: Optional[int] = None, filter_value: float = -float("Inf")):
    # HF top_k_top_p_filtering, the top-k half
    if top_k is not None:
        top_k = min(top_k, logits.size(-1))
        indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
        logits = logits.masked_fill(indices_to_remove, filter_value)
    return logits


@ppy.opt(3)
def alibi_slopes_bias(attention_mask, slopes, dtype: torch.dtype):
    # HF BLOOM build_alibi_tensor, with the slopes given
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.to(dtype)


@ppy.opt(3)
def perceptual_style_loss(feat_x, feat_y):
    # Gatys style loss: Gram matrices compared with mse_loss
    b, c, h, w = feat_x.shape
    fx = feat_x.view(b, c, h * w)
    fy = feat_y.view(b, c, h * w)
    gx = torch.bmm(fx, fx.transpose(1, 2)) / (c * h * w)
    gy = torch.bmm(fy, fy.transpose(1, 2)) / (c * h * w)
    return F.mse_loss(gx, gy)


@ppy.opt(3)
def dqn_huber_loss(q_values, actions, expected):
    # PyTorch DQN tutorial: gather the taken actions, smooth L1 against the targets
    state_action_values = q_values.gather(1, actions)
    return F.smooth_l1_loss(state_action_values, expected.unsqueeze(1))
"""

_inputs = Inputs()  # this module's own stream of seeds
t, ints, uniform = _inputs.t, _inputs.ints, _inputs.uniform


def boxes(n, grad=True):
    g = _inputs.generator()
    centre = torch.rand(n, 2, generator=g) * 0.5 + 0.25
    size = torch.rand(n, 2, generator=g) * 0.3 + 0.1
    return torch.cat([centre, size], dim=1).requires_grad_(grad)


def _resblock():
    C, E = 8, 6
    return (
        t(2, C, 5, 5),
        t(2, E),
        t(C),
        t(C),
        t(C, C, 3, 3, scale=0.2),
        t(C),
        t(C, E),
        t(C),
        t(C),
        t(C),
        t(C, C, 3, 3, scale=0.2),
        t(C),
    )


def _basic_block(training):
    C = 4

    def bn():
        return t(C, grad=False), t(C, grad=False, positive=True), t(C), t(C)

    return (t(2, C, 5, 5), t(C, C, 3, 3, scale=0.3), *bn(), t(C, C, 3, 3, scale=0.3), *bn(), training), {}


def _inverted_residual():
    C, E = 4, 8

    def bn(n):
        return t(n, grad=False), t(n, grad=False, positive=True), t(n), t(n)

    return (t(2, C, 5, 5), t(E, C, 1, 1), *bn(E), t(E, 1, 3, 3), *bn(E), t(C, E, 1, 1), *bn(C)), {}


# name -> calls: each returns (args, kwargs), fresh tensors each time
CALLS = {
    "sigmoid_focal_loss": [
        lambda: ((t(4, 5), uniform(4, 5, grad=False).round()), {}),
        lambda: ((t(4, 5), uniform(4, 5, grad=False).round(), 0.5, 2.0, "mean"), {}),
        lambda: ((t(4, 5), uniform(4, 5, grad=False).round()), {"gamma": 3, "reduction": "sum"}),
    ],
    "vae_loss": [lambda: ((uniform(4, 784), uniform(4, 1, 28, 28, grad=False), t(4, 20), t(4, 20)), {})],
    "clip_loss": [lambda: ((t(4, 8), t(4, 8), t((), scale=0.1)), {})],
    "nt_xent": [lambda: ((t(4, 8), t(4, 8)), {}), lambda: ((t(3, 8), t(3, 8), 0.1), {})],
    "distillation_loss": [
        lambda: ((t(4, 6), t(4, 6, grad=False), ints(6, 4)), {}),
        lambda: ((t(4, 6), t(4, 6), ints(6, 4), 4.0, 0.9), {}),
    ],
    "label_smoothing_ce": [lambda: ((t(5, 7), ints(7, 5)), {}), lambda: ((t(5, 7), ints(7, 5), 0.2), {})],
    "dice_loss": [lambda: ((t(2, 3, 4, 4), uniform(2, 3, 4, 4, grad=False).round()), {})],
    "box_cxcywh_to_xyxy": [lambda: ((boxes(5),), {})],
    "generalized_box_iou": [
        lambda: (
            (
                boxes(3, grad=False) * 0 + torch.tensor([0.1, 0.1, 0.5, 0.6]),
                boxes(4, grad=False) * 0 + torch.tensor([0.2, 0.0, 0.7, 0.4]),
            ),
            {},
        )
    ],
    "detr_box_losses": [lambda: ((boxes(5), boxes(5, grad=False), 5.0), {})],
    "diffusion_resblock": [lambda: ((*_resblock(), True), {}), lambda: ((*_resblock(), False), {})],
    "esrgan_upsampler": [
        lambda: ((t(1, 4, 3, 3), t(16, 4, 3, 3, scale=0.2), t(16), t(16, 4, 3, 3, scale=0.2), t(16)), {})
    ],
    "espcn": [
        lambda: (
            (
                t(1, 1, 6, 6),
                t(8, 1, 5, 5, scale=0.2),
                t(8),
                t(4, 8, 3, 3, scale=0.2),
                t(4),
                t(4, 4, 3, 3, scale=0.2),
                t(4),
                2,
            ),
            {},
        )
    ],
    "resnet_basic_block": [lambda: _basic_block(True), lambda: _basic_block(False)],
    "unet_up": [lambda: ((t(1, 4, 3, 3), t(1, 2, 7, 8), t(4, 2, 2, 2), t(2)), {})],
    "squeeze_excitation": [lambda: ((t(2, 8, 4, 4), t(2, 8, 1, 1), t(2), t(8, 2, 1, 1), t(8)), {})],
    "mobilenet_inverted_residual": [_inverted_residual],
    "gumbel_quantize": [
        lambda: ((t(2, 5, 3, 3), t(5, 4), 1.0, False), {}),
        lambda: ((t(2, 5, 3, 3), t(5, 4), 0.5, True), {}),
    ],
    "arcface_logits": [
        lambda: ((t(4, 6), t(5, 6), ints(5, 4)), {}),
        lambda: ((t(4, 6), t(5, 6), ints(5, 4), 30.0, 0.3), {}),
    ],
    "triplet_embedding_loss": [lambda: ((t(4, 6), t(4, 6), t(4, 6)), {})],
    "spatial_transformer": [lambda: ((t(2, 1, 6, 6), t(2, 2, 3, scale=0.3)), {})],
    "yolo_upsample_concat": [lambda: ((t(1, 4, 3, 3), t(1, 2, 6, 6), t(2, 4, 1, 1), t(2)), {})],
    "top_k_filtering": [
        lambda: ((t(2, 10),), {}),
        lambda: ((t(2, 10), 3), {}),
        lambda: ((t(2, 10),), {"top_k": 20, "filter_value": -1e9}),
    ],
    "alibi_slopes_bias": [
        lambda: ((torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]), t(2, 3, 1, grad=False).abs(), torch.float32), {}),
        lambda: ((torch.tensor([[1, 1, 0]]), t(1, 2, 1, grad=False).abs(), torch.bfloat16), {}),
    ],
    "perceptual_style_loss": [lambda: ((t(2, 3, 4, 4), t(2, 3, 4, 4, grad=False)), {})],
    "dqn_huber_loss": [lambda: ((t(5, 3), ints(3, 5, 1), t(5, grad=False)), {})],
}


def test_every_function_of_the_cell_has_inputs():
    import ast

    names = [n.name for n in ast.parse(CELL).body if isinstance(n, ast.FunctionDef)]
    assert sorted(names) == sorted(CALLS)
    assert len(names) >= 20


@pytest.fixture(scope="module")
def outcomes():
    ns, report = compile_cell(CELL, filename="<ppy-models-functional>")
    results = {}
    for name, calls in CALLS.items():
        f = ns[name]
        per_call = []
        for make in calls:
            args, kwargs = make()
            per_call.append(compare_call(f, args, kwargs) if is_region(f) else python_outcome(f, report))
        results[name] = per_call
    compiled = [n for n, r in results.items() if r[0][0] not in (PYTHON, CRASH)]
    print(f"\nfunctional models: {len(compiled)} of {len(results)} compiled: {', '.join(compiled)}")
    return results


def test_no_model_function_differs_from_eager(outcomes):
    bad = [
        f"{name} (call {i}): {status}: {detail}"
        for name, results in outcomes.items()
        for i, (status, detail) in enumerate(results)
        if status in FAILURES
    ]
    assert not bad, "MISMATCH or crash in model code:\n" + "\n".join(bad)


def test_every_model_function_compiles_and_matches(outcomes):
    python = [f"{name}: {results[0][1]}" for name, results in outcomes.items() if results[0][0] == PYTHON]
    assert not python, f"{len(python)} model functions stay Python:\n" + "\n".join(python)
    partial = [
        f"{name} (call {i}): {status}: {detail}"
        for name, results in outcomes.items()
        for i, (status, detail) in enumerate(results)
        if status != MATCH
    ]
    assert not partial, "\n".join(partial)
