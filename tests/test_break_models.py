"""Public model code split around its breaks: each function holds one to three statements a region cannot
take (a dict, ``.tolist()``, ``print`` or a logger, ``try``/``except``, a call into numpy or scipy, an
object's method, a nested ``def``), the rest is tensor code.

Each case is public code none of us wrote, copied as its repository writes it (the edits, named in the
comment above each, only make it self-contained and small: a library call it makes is a small stand-in
defined in the cell, written like the original). The protocol: every case is called once (so the split
happens and its segments' builds start together), ``ppy_magic.wait()``, and again, until no case's split
or builds change. Then each case must be split (``__ppy_driver__``) with at least one segment a region
(``__ppy_region__``), no break may carry the compiler's internal-error text, and a call must be the same
as its Python body's (``f.__wrapped__``) bit for bit: the outputs, the inputs after the call (in-place
ops), and the gradients of the sum of the floating outputs with respect to the inputs and parameters that
require grad, with the global generators (torch's and numpy's) reseeded before each call. Last, the share
of eager's ATen calls that regions make is printed per case; every case has some, and half on average.
"""

from __future__ import annotations

import dataclasses
import os
import types
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import ppy_magic
from tests.support.breaks import region_share, settle, shape
from tests.support.cells import assert_same, compile_cell
from tests.support.eager import tensors_in

CELL = r'''
import math
import time
import logging
import warnings
from types import FunctionType
from typing import Any, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from scipy.optimize import linear_sum_assignment

import ppy

logger = logging.getLogger("ppy_break_models")
LOGGER = logger


# ==== stand-ins for library calls (plain Python, written like the originals) ==============================

# pytorch/vision: torchvision/utils.py
def _log_api_usage_once(obj: Any) -> None:
    module = obj.__module__
    if not module.startswith("torchvision"):
        module = f"torchvision.internal.{module}"
    name = obj.__class__.__name__
    if isinstance(obj, FunctionType):
        name = obj.__name__
    torch._C._log_api_usage_once(f"{module}.{name}")


# rbgirshick/py-faster-rcnn: lib/nms/py_cpu_nms.py (numpy), the stand-in for torchvision.ops.nms
def py_cpu_nms(dets, thresh):
    x1 = dets[:, 0]
    y1 = dets[:, 1]
    x2 = dets[:, 2]
    y2 = dets[:, 3]
    scores = dets[:, 4]
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort(kind="stable")[::-1]
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(i)
        xx1 = np.maximum(x1[i], x1[order[1:]])
        yy1 = np.maximum(y1[i], y1[order[1:]])
        xx2 = np.minimum(x2[i], x2[order[1:]])
        yy2 = np.minimum(y2[i], y2[order[1:]])
        w = np.maximum(0.0, xx2 - xx1 + 1)
        h = np.maximum(0.0, yy2 - yy1 + 1)
        inter = w * h
        ovr = inter / (areas[i] + areas[order[1:]] - inter)
        inds = np.where(ovr <= thresh)[0]
        order = order[inds + 1]
    return keep


def nms(boxes, scores, iou_threshold):
    dets = torch.cat([boxes, scores[:, None]], 1).detach().numpy()
    return torch.as_tensor(np.array(py_cpu_nms(dets, iou_threshold), dtype=np.int64))


# facebookresearch/detectron2: detectron2/utils/events.py (EventStorage.put_scalar, a dict of lists)
class EventStorage:
    def __init__(self):
        self._history = {}

    def put_scalar(self, name, value, smoothing_hint=True):
        self._history.setdefault(name, []).append(float(value))


_CURRENT_STORAGE = EventStorage()


def get_event_storage():
    return _CURRENT_STORAGE


# huggingface/pytorch-image-models: timm/utils/metrics.py
class AverageMeter:
    """Computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


# huggingface/transformers: src/transformers/cache_utils.py (DynamicCache.update, lists of tensors)
class DynamicCache:
    def __init__(self):
        self._seen_tokens = 0
        self.key_cache = []
        self.value_cache = []

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        if layer_idx == 0:
            self._seen_tokens += key_states.shape[-2]
        if len(self.key_cache) <= layer_idx:
            self.key_cache.append(key_states)
            self.value_cache.append(value_states)
        else:
            self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], key_states], dim=-2)
            self.value_cache[layer_idx] = torch.cat([self.value_cache[layer_idx], value_states], dim=-2)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]


# a tokenizer as HF's data collators use it: special tokens, the mask token, a vocabulary size
class TinyTokenizer:
    mask_token = "[MASK]"

    def __init__(self, vocab_size=30):
        self.vocab_size = vocab_size

    def __len__(self):
        return self.vocab_size

    def convert_tokens_to_ids(self, token):
        return 3 if token == "[MASK]" else 1

    def get_special_tokens_mask(self, token_ids, already_has_special_tokens=False):
        return [1 if t in (0, 1, 2) else 0 for t in token_ids]


# ==== pytorch/vision: torchvision/ops/focal_loss.py ========================================================
@ppy.opt(3)
def sigmoid_focal_loss(
    inputs: torch.Tensor,
    targets: torch.Tensor,
    alpha: float = 0.25,
    gamma: float = 2,
    reduction: str = "none",
) -> torch.Tensor:
    # Original implementation from https://github.com/facebookresearch/fvcore/blob/master/fvcore/nn/focal_loss.py
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(sigmoid_focal_loss)
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)

    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss

    # Check reduction option and return loss accordingly
    if reduction == "none":
        pass
    elif reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    else:
        raise ValueError(
            f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: 'none', 'mean', 'sum'"
        )
    return loss


# ==== pytorch/vision: torchvision/ops/boxes.py ==============================================================
# (box_area and _box_inter_union as helpers without their usage logging, so box_iou's own call is the break)
@ppy.opt(3)
def box_area(boxes: Tensor) -> Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


@ppy.opt(3)
def _box_inter_union(boxes1: Tensor, boxes2: Tensor) -> Tuple[Tensor, Tensor]:
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)

    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N,M,2]
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N,M,2]

    wh = _upcast(rb - lt).clamp(min=0)  # [N,M,2]
    inter = wh[:, :, 0] * wh[:, :, 1]  # [N,M]

    union = area1[:, None] + area2 - inter

    return inter, union


@ppy.opt(3)
def _upcast(t: Tensor) -> Tensor:
    # Protects from numerical overflows in multiplications by upcasting to the equivalent higher type
    if t.is_floating_point():
        return t if t.dtype in (torch.float32, torch.float64) else t.float()
    else:
        return t if t.dtype in (torch.int32, torch.int64) else t.int()


# pytorch/vision: torchvision/ops/boxes.py
@ppy.opt(3)
def box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(box_iou)
    inter, union = _box_inter_union(boxes1, boxes2)
    iou = inter / union
    return iou


# pytorch/vision: torchvision/ops/boxes.py
@ppy.opt(3)
def generalized_box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(generalized_box_iou)

    inter, union = _box_inter_union(boxes1, boxes2)
    iou = inter / union

    lti = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rbi = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])

    whi = _upcast(rbi - lti).clamp(min=0)  # [N,M,2]
    areai = whi[:, :, 0] * whi[:, :, 1]

    return iou - (areai - union) / areai


# pytorch/vision: torchvision/ops/boxes.py (torchvision._is_tracing() is torch.jit.is_tracing())
@ppy.opt(3)
def clip_boxes_to_image(boxes: Tensor, size: Tuple[int, int]) -> Tensor:
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(clip_boxes_to_image)
    dim = boxes.dim()
    boxes_x = boxes[..., 0::2]
    boxes_y = boxes[..., 1::2]
    height, width = size

    if torch.jit.is_tracing():
        boxes_x = torch.max(boxes_x, torch.tensor(0, dtype=boxes.dtype, device=boxes.device))
        boxes_x = torch.min(boxes_x, torch.tensor(width, dtype=boxes.dtype, device=boxes.device))
        boxes_y = torch.max(boxes_y, torch.tensor(0, dtype=boxes.dtype, device=boxes.device))
        boxes_y = torch.min(boxes_y, torch.tensor(height, dtype=boxes.dtype, device=boxes.device))
    else:
        boxes_x = boxes_x.clamp(min=0, max=width)
        boxes_y = boxes_y.clamp(min=0, max=height)

    clipped_boxes = torch.stack((boxes_x, boxes_y), dim=dim)
    return clipped_boxes.reshape(boxes.shape)


# pytorch/vision: torchvision/ops/boxes.py (nms: the numpy stand-in above)
@ppy.opt(3)
def _batched_nms_coordinate_trick(
    boxes: Tensor,
    scores: Tensor,
    idxs: Tensor,
    iou_threshold: float,
) -> Tensor:
    # strategy: in order to perform NMS independently per class,
    # we add an offset to all the boxes. The offset is dependent
    # only on the class idx, and is large enough so that boxes
    # from different classes do not overlap
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    max_coordinate = boxes.max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    boxes_for_nms = boxes + offsets[:, None]
    keep = nms(boxes_for_nms, scores, iou_threshold)
    return keep


# pytorch/vision: torchvision/ops/boxes.py
@ppy.opt(3)
def masks_to_boxes(masks: torch.Tensor) -> torch.Tensor:
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(masks_to_boxes)
    if masks.numel() == 0:
        return torch.zeros((0, 4), device=masks.device, dtype=torch.float)

    n = masks.shape[0]

    bounding_boxes = torch.zeros((n, 4), device=masks.device, dtype=torch.float)

    for index, mask in enumerate(masks):
        y, x = torch.where(mask != 0)

        bounding_boxes[index, 0] = torch.min(x)
        bounding_boxes[index, 1] = torch.min(y)
        bounding_boxes[index, 2] = torch.max(x)
        bounding_boxes[index, 3] = torch.max(y)

    return bounding_boxes


# pytorch/vision: torchvision/ops/ciou_loss.py (with _diou_iou_loss and _loss_inter_union of
# torchvision/ops/diou_loss.py, _utils.py inlined as helpers; _upcast_non_float from _utils.py)
@ppy.opt(3)
def _upcast_non_float(t: Tensor) -> Tensor:
    # Protects from numerical overflows in multiplications by upcasting to the equivalent higher type
    if t.dtype not in (torch.float32, torch.float64):
        return t.float()
    return t


@ppy.opt(3)
def _loss_inter_union(boxes1: torch.Tensor, boxes2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)

    # Intersection keypoints
    xkis1 = torch.max(x1, x1g)
    ykis1 = torch.max(y1, y1g)
    xkis2 = torch.min(x2, x2g)
    ykis2 = torch.min(y2, y2g)

    intsctk = torch.zeros_like(x1)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsctk[mask] = (xkis2[mask] - xkis1[mask]) * (ykis2[mask] - ykis1[mask])
    unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk

    return intsctk, unionk


@ppy.opt(3)
def _diou_iou_loss(boxes1: torch.Tensor, boxes2: torch.Tensor, eps: float = 1e-7) -> Tuple[torch.Tensor, torch.Tensor]:
    intsct, union = _loss_inter_union(boxes1, boxes2)
    iou = intsct / (union + eps)
    # smallest enclosing box
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    xc1 = torch.min(x1, x1g)
    yc1 = torch.min(y1, y1g)
    xc2 = torch.max(x2, x2g)
    yc2 = torch.max(y2, y2g)
    # The diagonal distance of the smallest enclosing box squared
    diagonal_distance_squared = ((xc2 - xc1) ** 2) + ((yc2 - yc1) ** 2) + eps
    # centers of boxes
    x_p = (x2 + x1) / 2
    y_p = (y2 + y1) / 2
    x_g = (x1g + x2g) / 2
    y_g = (y1g + y2g) / 2
    # The distance between boxes' centers squared.
    centers_distance_squared = ((x_p - x_g) ** 2) + ((y_p - y_g) ** 2)
    # The distance IoU is the IoU penalized by a normalized
    # distance between boxes' centers squared.
    loss = 1 - iou + (centers_distance_squared / diagonal_distance_squared)
    return loss, iou


@ppy.opt(3)
def complete_box_iou_loss(
    boxes1: torch.Tensor,
    boxes2: torch.Tensor,
    reduction: str = "none",
    eps: float = 1e-7,
) -> torch.Tensor:
    # Original Implementation from https://github.com/facebookresearch/detectron2/blob/main/detectron2/layers/losses.py
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        _log_api_usage_once(complete_box_iou_loss)

    boxes1 = _upcast_non_float(boxes1)
    boxes2 = _upcast_non_float(boxes2)

    diou_loss, iou = _diou_iou_loss(boxes1, boxes2)

    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)

    # width and height of boxes
    w_pred = x2 - x1
    h_pred = y2 - y1
    w_gt = x2g - x1g
    h_gt = y2g - y1g
    v = (4 / (torch.pi**2)) * torch.pow((torch.atan(w_gt / h_gt) - torch.atan(w_pred / h_pred)), 2)
    with torch.no_grad():
        alpha = v / (1 - iou + v + eps)

    loss = diou_loss + alpha * v

    # Check reduction option and return loss accordingly
    if reduction == "none":
        pass
    elif reduction == "mean":
        loss = loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    elif reduction == "sum":
        loss = loss.sum()
    else:
        raise ValueError(
            f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: 'none', 'mean', 'sum'"
        )
    return loss


# ==== facebookresearch/detr: util/box_ops.py, models/matcher.py, models/detr.py, util/misc.py ===============
@ppy.opt(3)
def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h),
         (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


# facebookresearch/detr: models/matcher.py (@torch.no_grad() left out; generalized_box_iou: torchvision's
# above, which DETR's util/box_ops.py restates)
class HungarianMatcher(nn.Module):
    def __init__(self, cost_class: float = 1, cost_bbox: float = 1, cost_giou: float = 1):
        super().__init__()
        self.cost_class = cost_class
        self.cost_bbox = cost_bbox
        self.cost_giou = cost_giou
        assert cost_class != 0 or cost_bbox != 0 or cost_giou != 0, "all costs cant be 0"

    @ppy.opt(3)
    def forward(self, outputs, targets):
        bs, num_queries = outputs["pred_logits"].shape[:2]

        # We flatten to compute the cost matrices in a batch
        out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)  # [batch_size * num_queries, num_classes]
        out_bbox = outputs["pred_boxes"].flatten(0, 1)  # [batch_size * num_queries, 4]

        # Also concat the target labels and boxes
        tgt_ids = torch.cat([v["labels"] for v in targets])
        tgt_bbox = torch.cat([v["boxes"] for v in targets])

        # Compute the classification cost. Contrary to the loss, we don't use the NLL,
        # but approximate it in 1 - proba[target class].
        # The 1 is a constant that doesn't change the matching, it can be ommitted.
        cost_class = -out_prob[:, tgt_ids]

        # Compute the L1 cost between boxes
        cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)

        # Compute the giou cost betwen boxes
        cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))

        # Final cost matrix
        C = self.cost_bbox * cost_bbox + self.cost_class * cost_class + self.cost_giou * cost_giou
        C = C.view(bs, num_queries, -1).cpu()

        sizes = [len(v["boxes"]) for v in targets]
        indices = [linear_sum_assignment(c[i].detach().numpy()) for i, c in enumerate(C.split(sizes, -1))]
        return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64)) for i, j in indices]


# facebookresearch/detr: util/misc.py (@torch.no_grad() left out)
@ppy.opt(3)
def accuracy(output, target, topk=(1,)):
    """Computes the precision@k for the specified values of k"""
    if target.numel() == 0:
        return [torch.zeros([], device=output.device)]
    maxk = max(topk)
    batch_size = target.size(0)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].view(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


# facebookresearch/detr: models/detr.py (SetCriterion: its loss_labels and loss_cardinality; the matcher's
# indices come in; @torch.no_grad() of loss_cardinality left out)
class SetCriterion(nn.Module):
    def __init__(self, num_classes, eos_coef):
        super().__init__()
        self.num_classes = num_classes
        self.eos_coef = eos_coef
        empty_weight = torch.ones(self.num_classes + 1)
        empty_weight[-1] = self.eos_coef
        self.register_buffer('empty_weight', empty_weight)

    @ppy.opt(3)
    def loss_labels(self, outputs, targets, indices, num_boxes, log=True):
        """Classification loss (NLL)
        targets dicts must contain the key "labels" containing a tensor of dim [nb_target_boxes]
        """
        assert 'pred_logits' in outputs
        src_logits = outputs['pred_logits']

        idx = self._get_src_permutation_idx(indices)
        target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
        target_classes = torch.full(src_logits.shape[:2], self.num_classes,
                                    dtype=torch.int64, device=src_logits.device)
        target_classes[idx] = target_classes_o

        loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)
        losses = {'loss_ce': loss_ce}

        if log:
            # TODO this should probably be a separate loss, not hacked in this one here
            losses['class_error'] = 100 - accuracy(src_logits[idx], target_classes_o)[0]
        return losses

    @ppy.opt(3)
    def loss_cardinality(self, outputs, targets, indices, num_boxes):
        """ Compute the cardinality error, ie the absolute error in the number of predicted non-empty boxes
        This is not really a loss, it is intended for logging purposes only. It doesn't propagate gradients
        """
        pred_logits = outputs['pred_logits']
        device = pred_logits.device
        tgt_lengths = torch.as_tensor([len(v["labels"]) for v in targets], device=device)
        # Count the number of predictions that are NOT "no-object" (which is the last class)
        card_pred = (pred_logits.argmax(-1) != pred_logits.shape[-1] - 1).sum(1)
        card_err = F.l1_loss(card_pred.float(), tgt_lengths.float())
        losses = {'cardinality_error': card_err}
        return losses

    def _get_src_permutation_idx(self, indices):
        # permute predictions following indices
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        src_idx = torch.cat([src for (src, _) in indices])
        return batch_idx, src_idx


# facebookresearch/detr: util/misc.py (NestedTensor's to/decompose/__repr__ left out)
class NestedTensor(object):
    def __init__(self, tensors, mask: Optional[Tensor]):
        self.tensors = tensors
        self.mask = mask


def _max_by_axis(the_list):
    # type: (List[List[int]]) -> List[int]
    maxes = the_list[0]
    for sublist in the_list[1:]:
        for index, item in enumerate(sublist):
            maxes[index] = max(maxes[index], item)
    return maxes


# facebookresearch/detr: util/misc.py (the torchvision._is_tracing() branch for ONNX left out)
@ppy.opt(3)
def nested_tensor_from_tensor_list(tensor_list: List[Tensor]):
    # TODO make this more general
    if tensor_list[0].ndim == 3:
        # TODO make it support different-sized images
        max_size = _max_by_axis([list(img.shape) for img in tensor_list])
        # min_size = tuple(min(s) for s in zip(*[img.shape for img in tensor_list]))
        batch_shape = [len(tensor_list)] + max_size
        b, c, h, w = batch_shape
        dtype = tensor_list[0].dtype
        device = tensor_list[0].device
        tensor = torch.zeros(batch_shape, dtype=dtype, device=device)
        mask = torch.ones((b, h, w), dtype=torch.bool, device=device)
        for img, pad_img, m in zip(tensor_list, tensor, mask):
            pad_img[: img.shape[0], : img.shape[1], : img.shape[2]].copy_(img)
            m[: img.shape[1], :img.shape[2]] = False
    else:
        raise ValueError('not supported')
    return NestedTensor(tensor, mask)


# ==== huggingface/transformers: src/transformers/models/mixtral/modeling_mixtral.py (v4.36) ================
class MixtralBLockSparseTop2MLP(nn.Module):
    def __init__(self, hidden_dim, ffn_dim):
        super().__init__()
        self.ffn_dim = ffn_dim
        self.hidden_dim = hidden_dim

        self.w1 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)
        self.w2 = nn.Linear(self.ffn_dim, self.hidden_dim, bias=False)
        self.w3 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)

        self.act_fn = nn.SiLU()

    def forward(self, hidden_states, routing_weights):
        current_hidden_states = self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states)
        current_hidden_states = self.w2(current_hidden_states)
        return routing_weights * current_hidden_states


# huggingface/transformers: src/transformers/models/mixtral/modeling_mixtral.py (v4.36; sizes as arguments
# instead of a MixtralConfig)
class MixtralSparseMoeBlock(nn.Module):
    def __init__(self, hidden_dim, ffn_dim, num_experts, top_k):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.ffn_dim = ffn_dim
        self.num_experts = num_experts
        self.top_k = top_k

        # gating
        self.gate = nn.Linear(self.hidden_dim, self.num_experts, bias=False)

        self.experts = nn.ModuleList([MixtralBLockSparseTop2MLP(hidden_dim, ffn_dim) for _ in range(self.num_experts)])

    @ppy.opt(3)
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """ """
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        # router_logits: (batch * sequence_length, n_experts)
        router_logits = self.gate(hidden_states)

        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        # we cast back to the input dtype
        routing_weights = routing_weights.to(hidden_states.dtype)

        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype, device=hidden_states.device
        )

        # One hot encode the selected experts to create an expert mask
        # this will be used to easily index which expert is going to be sollicitated
        expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)

        # Loop over all available experts in the model and perform the computation on each expert
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])

            if top_x.shape[0] == 0:
                continue

            # in torch it is faster to index using lists than torch tensors
            top_x_list = top_x.tolist()
            idx_list = idx.tolist()

            # Index the correct hidden states and compute the expert hidden state for
            # the current expert. We need to make sure to multiply the output hidden
            # states by `routing_weights` on the corresponding tokens (top-1 and top-2)
            current_state = hidden_states[None, top_x_list].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state, routing_weights[top_x_list, idx_list, None])

            # However `index_add_` only support torch tensors for indexing so we'll use
            # the `top_x` tensor here.
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


# huggingface/transformers: src/transformers/models/mixtral/modeling_mixtral.py (attention_mask=None path)
@ppy.opt(3)
def load_balancing_loss_func(gate_logits: torch.Tensor, num_experts: torch.Tensor = None, top_k=2) -> float:
    if gate_logits is None or not isinstance(gate_logits, tuple):
        return 0

    if isinstance(gate_logits, tuple):
        compute_device = gate_logits[0].device
        concatenated_gate_logits = torch.cat([layer_gate.to(compute_device) for layer_gate in gate_logits], dim=0)

    routing_weights = torch.nn.functional.softmax(concatenated_gate_logits, dim=-1)

    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)

    expert_mask = torch.nn.functional.one_hot(selected_experts, num_experts)

    # Compute the percentage of tokens routed to each experts
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)

    # Compute the average probability of routing to these experts
    router_prob_per_expert = torch.mean(routing_weights, dim=0)

    overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
    return overall_loss * num_experts


# ==== huggingface/transformers: src/transformers/models/switch_transformers/modeling_switch_transformers.py =
# (sizes as arguments instead of a SwitchTransformersConfig; the expert an nn.Linear + ReLU + nn.Linear)
class SwitchTransformersTop1Router(nn.Module):
    def __init__(self, hidden_size, num_experts, expert_capacity, jitter_noise=0.0):
        super().__init__()
        self.num_experts = num_experts
        self.expert_capacity = expert_capacity
        self.classifier = nn.Linear(hidden_size, self.num_experts, bias=False)
        self.jitter_noise = jitter_noise
        self.dtype = torch.float32

    @ppy.opt(3)
    def forward(self, hidden_states: torch.Tensor) -> Tuple:
        # float32 is used to ensure stability. See the discussion of "selective precision" in
        # https://arxiv.org/abs/2101.03961.
        # We also store the previous dtype to cast back the output to the previous dtype
        self.input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(self.dtype)

        if self.training and self.jitter_noise > 0:
            # Multiply the token inputs by the uniform distribution - adding some noise
            hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - self.jitter_noise, 1.0 + self.jitter_noise)

        # Shape: [num_groups, tokens_per_group, num_experts]
        router_logits = self.classifier(hidden_states)

        # Apply Softmax and cast back to the original `dtype`
        router_probs = nn.functional.softmax(router_logits, dim=-1, dtype=self.dtype).to(self.input_dtype)

        expert_index = torch.argmax(router_probs, dim=-1)
        expert_index = torch.nn.functional.one_hot(expert_index, num_classes=self.num_experts)

        # Mask tokens outside expert capacity. Sum over each sequence
        token_priority = torch.cumsum(expert_index, dim=-2)
        # mask if the token routed to to the expert will overflow
        expert_capacity_mask = token_priority <= self.expert_capacity
        expert_index = expert_index * expert_capacity_mask

        router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
        return expert_index, router_probs, router_logits


class SwitchTransformersSparseMLP(nn.Module):
    def __init__(self, hidden_size, d_ff, num_experts, expert_capacity):
        super().__init__()
        # Step 1: Get the correct router according to its class
        self.router = SwitchTransformersTop1Router(hidden_size, num_experts, expert_capacity)

        # Step 2: Get the experts
        self.experts = nn.ModuleDict()
        for idx in range(num_experts):
            self.experts[f"expert_{idx}"] = nn.Sequential(
                nn.Linear(hidden_size, d_ff, bias=False), nn.ReLU(), nn.Linear(d_ff, hidden_size, bias=False)
            )

    @ppy.opt(3)
    def forward(self, hidden_states):
        # Step 1: Get the router_mask from the router as wel as the probabilities
        router_mask, router_probs, router_logits = self.router(hidden_states)
        expert_index = torch.argmax(router_mask, dim=-1)

        # The routers introduced might not always map all the tokens, to a router, which means that some hidden states
        # can be unchanged from one layer to another. That is why the hidden states are cloned before updating only
        # the seleced ones.

        next_states = hidden_states.clone()

        router_mask = router_mask.bool()
        batch_size, seq_len, num_experts = router_mask.shape
        idx_mask = router_mask.reshape(batch_size * seq_len, num_experts).sum(dim=0)
        idx_mask = torch.nonzero(idx_mask, as_tuple=True)[
            0
        ].tolist()  # length: number of "activated" expert / value: index
        for idx in idx_mask:
            next_states[router_mask[:, :, idx]] = getattr(self.experts, "expert_{}".format(idx))(
                hidden_states[router_mask[:, :, idx]]
            )

        hidden_states = router_probs * next_states
        return hidden_states, (router_logits, expert_index)


# ==== karpathy/nanoGPT: model.py (GPT.forward's loss) and train.py (the training loop's loss and its log line)
gradient_accumulation_steps = 4
log_interval = 1


@ppy.opt(3)
def nanogpt_loss_and_log(logits, targets, iter_num):
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
    loss = loss / gradient_accumulation_steps  # scale the loss to account for gradient accumulation
    # timing and logging
    if iter_num % log_interval == 0:
        # get loss as float. note: this is a CPU-GPU sync point
        # scale up to undo the division above, approximating the true total loss (exact would have been a sum)
        lossf = loss.item() * gradient_accumulation_steps
        print(f"iter {iter_num}: loss {lossf:.4f}")
    return loss


# ==== huggingface/transformers: src/transformers/generation/utils.py (_sample: one step of its loop) with the
# warpers of generation/logits_process.py inlined (TemperatureLogitsWarper, TopKLogitsWarper,
# RepetitionPenaltyLogitsProcessor); the model's logits and the streamer come in; model_kwargs' update is
# _update_model_kwargs_for_generation's cache_position line
class TinyStreamer:
    def __init__(self):
        self.tokens = []

    def put(self, value):
        self.tokens.append(value.tolist())


@ppy.opt(3)
def sample_step(input_ids, logits, unfinished_sequences, model_kwargs, streamer, pad_token_id: int = 0):
    next_token_logits = logits[:, -1, :].clone().float()
    # RepetitionPenaltyLogitsProcessor(penalty=1.2)
    score = torch.gather(next_token_logits, 1, input_ids)
    score = torch.where(score < 0, score * 1.2, score / 1.2)
    next_token_scores = next_token_logits.scatter(1, input_ids, score)
    # TemperatureLogitsWarper(0.7)
    next_token_scores = next_token_scores / 0.7
    # TopKLogitsWarper(top_k=5)
    top_k = min(5, next_token_scores.size(-1))  # Safety check
    indices_to_remove = next_token_scores < torch.topk(next_token_scores, top_k)[0][..., -1, None]
    next_token_scores = next_token_scores.masked_fill(indices_to_remove, -float("Inf"))

    probs = nn.functional.softmax(next_token_scores, dim=-1)
    next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1)

    # finished sentences should have their next token be a padding token
    next_tokens = next_tokens * unfinished_sequences + pad_token_id * (1 - unfinished_sequences)

    # update generated ids, model inputs, and length for next step
    input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
    if streamer is not None:
        streamer.put(next_tokens.cpu())
    model_kwargs["cache_position"] = model_kwargs["cache_position"][-1:] + 1
    unfinished_sequences = unfinished_sequences & ~(next_tokens == 2)
    this_peer_finished = unfinished_sequences.max() == 0
    return input_ids, unfinished_sequences, this_peer_finished, probs


# ==== huggingface/transformers: src/transformers/generation/beam_search.py (BeamHypotheses.add) and
# generation/utils.py (_beam_search's scores) with BeamSearchScorer.process's loop over one batch entry
class BeamHypotheses:
    def __init__(self, num_beams: int, length_penalty: float):
        self.length_penalty = length_penalty
        self.num_beams = num_beams
        self.beams = []
        self.worst_score = 1e9

    def __len__(self):
        return len(self.beams)

    def add(self, hyp: torch.LongTensor, sum_logprobs: float, beam_indices=None):
        score = sum_logprobs / (hyp.shape[-1] ** self.length_penalty)
        if len(self) < self.num_beams or score > self.worst_score:
            self.beams.append((score, hyp, beam_indices))
            if len(self) > self.num_beams:
                sorted_next_scores = sorted([(s, idx) for idx, (s, _, _) in enumerate(self.beams)])
                del self.beams[sorted_next_scores[0][1]]
                self.worst_score = sorted_next_scores[1][0]
            else:
                self.worst_score = min(score, self.worst_score)


@ppy.opt(3)
def beam_search_step(next_token_logits, beam_scores, input_ids, beam_hyp, num_beams: int, eos_token_id: int):
    next_token_scores = nn.functional.log_softmax(next_token_logits, dim=-1)  # (batch_size * num_beams, vocab_size)
    next_token_scores = next_token_scores + beam_scores[:, None].expand_as(next_token_scores)

    # reshape for beam search
    vocab_size = next_token_scores.shape[-1]
    next_token_scores = next_token_scores.view(1, num_beams * vocab_size)

    # Sample 2 next tokens for each beam (so we have some spare tokens and match output of beam search)
    next_token_scores, next_tokens = torch.topk(next_token_scores, 2 * num_beams, dim=1, largest=True, sorted=True)

    next_indices = torch.div(next_tokens, vocab_size, rounding_mode="floor")
    next_tokens = next_tokens % vocab_size

    next_beam_scores = torch.zeros((1, num_beams), dtype=next_token_scores.dtype)
    next_beam_tokens = torch.zeros((1, num_beams), dtype=next_tokens.dtype)
    next_beam_indices = torch.zeros((1, num_beams), dtype=next_indices.dtype)
    beam_idx = 0
    for beam_token_rank, (next_token, next_score, next_index) in enumerate(
        zip(next_tokens[0], next_token_scores[0], next_indices[0])
    ):
        batch_beam_idx = next_index
        # add to generated hypotheses if end of sentence
        if next_token.item() == eos_token_id:
            # if beam_token does not belong to top num_beams tokens, it should not be added
            is_beam_token_worse_than_top_num_beams = beam_token_rank >= num_beams
            if is_beam_token_worse_than_top_num_beams:
                continue
            beam_hyp.add(input_ids[batch_beam_idx].clone(), next_score.item())
        else:
            # add next predicted token since it is not eos_token
            next_beam_scores[0, beam_idx] = next_score
            next_beam_tokens[0, beam_idx] = next_token
            next_beam_indices[0, beam_idx] = batch_beam_idx
            beam_idx += 1

        # once the beam for next step is full, don't add more tokens to it.
        if beam_idx == num_beams:
            break

    beam_scores = next_beam_scores.view(-1)
    beam_next_tokens = next_beam_tokens.view(-1)
    beam_idx = next_beam_indices.view(-1)
    input_ids = torch.cat([input_ids[beam_idx, :], beam_next_tokens.unsqueeze(-1)], dim=-1)
    return input_ids, beam_scores


# ==== facebookresearch/fairseq: fairseq/criterions/label_smoothed_cross_entropy.py ==========================
@ppy.opt(3)
def label_smoothed_nll_loss(lprobs, target, epsilon: float, ignore_index: int = None, reduce: bool = True):
    if target.dim() == lprobs.dim() - 1:
        target = target.unsqueeze(-1)
    nll_loss = -lprobs.gather(dim=-1, index=target)
    smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
    if ignore_index is not None:
        pad_mask = target.eq(ignore_index)
        nll_loss.masked_fill_(pad_mask, 0.0)
        smooth_loss.masked_fill_(pad_mask, 0.0)
    else:
        nll_loss = nll_loss.squeeze(-1)
        smooth_loss = smooth_loss.squeeze(-1)
    if reduce:
        nll_loss = nll_loss.sum()
        smooth_loss = smooth_loss.sum()
    eps_i = epsilon / (lprobs.size(-1) - 1)
    loss = (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss
    return loss, nll_loss


# facebookresearch/fairseq: LabelSmoothedCrossEntropyCriterion.forward and compute_loss (the model's output
# comes in as logits; get_normalized_probs is log_softmax; sample a dict as fairseq's)
class LabelSmoothedCrossEntropyCriterion(nn.Module):
    def __init__(self, label_smoothing, padding_idx, sentence_avg=False):
        super().__init__()
        self.sentence_avg = sentence_avg
        self.eps = label_smoothing
        self.padding_idx = padding_idx

    @ppy.opt(3)
    def forward(self, net_output, sample, reduce: bool = True):
        lprobs = F.log_softmax(net_output, dim=-1, dtype=torch.float32)
        target = sample["target"]
        lprobs, target = lprobs.view(-1, lprobs.size(-1)), target.view(-1)
        loss, nll_loss = label_smoothed_nll_loss(lprobs, target, self.eps, ignore_index=self.padding_idx, reduce=reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        return loss, sample_size, logging_output


# ==== facebookresearch/fairseq: fairseq/data/data_utils.py =================================================
@ppy.opt(3)
def collate_tokens(
    values,
    pad_idx,
    eos_idx=None,
    left_pad=False,
    move_eos_to_beginning=False,
    pad_to_length=None,
    pad_to_multiple=1,
    pad_to_bsz=None,
):
    """Convert a list of 1d tensors into a padded 2d tensor."""
    size = max(v.size(0) for v in values)
    size = size if pad_to_length is None else max(size, pad_to_length)
    if pad_to_multiple != 1 and size % pad_to_multiple != 0:
        size = int(((size - 0.1) // pad_to_multiple + 1) * pad_to_multiple)

    batch_size = len(values) if pad_to_bsz is None else max(len(values), pad_to_bsz)
    res = values[0].new(batch_size, size).fill_(pad_idx)

    def copy_tensor(src, dst):
        assert dst.numel() == src.numel()
        if move_eos_to_beginning:
            if eos_idx is None:
                # if no eos_idx is specified, then use the last token in src
                dst[0] = src[-1]
            else:
                dst[0] = eos_idx
            dst[1:] = src[:-1]
        else:
            dst.copy_(src)

    for i, v in enumerate(values):
        copy_tensor(v, res[i][size - len(v) :] if left_pad else res[i][: len(v)])
    return res


# ==== facebookresearch/fairseq: fairseq/models/transformer/transformer_decoder.py (buffered_future_mask;
# utils.fill_with_neg_inf inlined)
class FutureMask(nn.Module):
    def __init__(self):
        super().__init__()
        self._future_mask = torch.empty(0)

    @ppy.opt(3)
    def buffered_future_mask(self, tensor):
        dim = tensor.size(0)
        # self._future_mask.device != tensor.device is not working in TorchScript. This is a workaround.
        if (
            self._future_mask.size(0) == 0
            or (not self._future_mask.device == tensor.device)
            or self._future_mask.size(0) < dim
        ):
            self._future_mask = torch.triu(torch.zeros([dim, dim]).float().fill_(float("-inf")).type_as(tensor), 1)
        self._future_mask = self._future_mask.to(tensor)
        return tensor + self._future_mask[:dim, :dim]


# ==== huggingface/transformers: src/transformers/data/data_collator.py =====================================
# (DataCollatorForLanguageModeling.torch_mask_tokens; the tokenizer and mlm_probability as arguments)
@ppy.opt(3)
def torch_mask_tokens(inputs: Any, tokenizer, mlm_probability: float = 0.15, special_tokens_mask: Optional[Any] = None):
    labels = inputs.clone()
    # We sample a few tokens in each sequence for MLM training (with probability `self.mlm_probability`)
    probability_matrix = torch.full(labels.shape, mlm_probability)
    if special_tokens_mask is None:
        special_tokens_mask = [
            tokenizer.get_special_tokens_mask(val, already_has_special_tokens=True) for val in labels.tolist()
        ]
        special_tokens_mask = torch.tensor(special_tokens_mask, dtype=torch.bool)
    else:
        special_tokens_mask = special_tokens_mask.bool()

    probability_matrix.masked_fill_(special_tokens_mask, value=0.0)
    masked_indices = torch.bernoulli(probability_matrix).bool()
    labels[~masked_indices] = -100  # We only compute loss on masked tokens

    # 80% of the time, we replace masked input tokens with tokenizer.mask_token ([MASK])
    indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked_indices
    inputs[indices_replaced] = tokenizer.convert_tokens_to_ids(tokenizer.mask_token)

    # 10% of the time, we replace masked input tokens with random word
    indices_random = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked_indices & ~indices_replaced
    random_words = torch.randint(len(tokenizer), labels.shape, dtype=torch.long)
    inputs[indices_random] = random_words[indices_random]

    # The rest of the time (10% of the time) we keep the masked input tokens unchanged
    return inputs, labels


# ==== huggingface/diffusers: src/diffusers/schedulers/scheduling_ddpm.py ===================================
# (DDPMScheduler.step for variance_type="fixed_small", prediction_type="epsilon"; an nn.Module holding its
# tensors as buffers and its config as attributes; randn_tensor of utils/torch_utils.py with its logging)
class DDPMSchedulerOutput:  # a dataclass (a ModelOutput) in the original
    def __init__(self, prev_sample=None, pred_original_sample=None):
        self.prev_sample = prev_sample
        self.pred_original_sample = pred_original_sample


def randn_tensor(shape, generator=None, device=None, dtype=None, layout=None):
    rand_device = device
    batch_size = shape[0]
    layout = layout or torch.strided
    device = device or torch.device("cpu")
    if generator is not None and generator.device.type != device.type and generator.device.type == "cpu":
        rand_device = "cpu"
        if device != "mps":
            logger.info(
                f"The passed generator was created on 'cpu' even though a tensor on {device} was expected."
            )
    latents = torch.randn(shape, generator=generator, device=rand_device, dtype=dtype, layout=layout).to(device)
    return latents


class DDPMScheduler(nn.Module):
    def __init__(self, num_train_timesteps=20, beta_start=0.0001, beta_end=0.02):
        super().__init__()
        betas = torch.linspace(beta_start, beta_end, num_train_timesteps, dtype=torch.float32)
        alphas = 1.0 - betas
        self.register_buffer("betas", betas)
        self.register_buffer("alphas_cumprod", torch.cumprod(alphas, dim=0))
        self.register_buffer("one", torch.tensor(1.0))
        self.num_train_timesteps = num_train_timesteps
        self.num_inference_steps = None
        self.clip_sample = True
        self.clip_sample_range = 1.0

    def previous_timestep(self, timestep):
        prev_t = timestep - 1
        return prev_t

    @ppy.opt(3)
    def step(self, model_output: torch.Tensor, timestep: int, sample: torch.Tensor, return_dict: bool = True):
        t = timestep

        prev_t = self.previous_timestep(t)

        # 1. compute alphas, betas
        alpha_prod_t = self.alphas_cumprod[t]
        alpha_prod_t_prev = self.alphas_cumprod[prev_t] if prev_t >= 0 else self.one
        beta_prod_t = 1 - alpha_prod_t
        beta_prod_t_prev = 1 - alpha_prod_t_prev
        current_alpha_t = alpha_prod_t / alpha_prod_t_prev
        current_beta_t = 1 - current_alpha_t

        # 2. compute predicted original sample from predicted noise also called
        # "predicted x_0" of formula (15) from https://arxiv.org/pdf/2006.11239.pdf
        pred_original_sample = (sample - beta_prod_t ** (0.5) * model_output) / alpha_prod_t ** (0.5)

        # 3. Clip or threshold "predicted x_0"
        if self.clip_sample:
            pred_original_sample = pred_original_sample.clamp(-self.clip_sample_range, self.clip_sample_range)

        # 4. Compute coefficients for pred_original_sample x_0 and current sample x_t
        # See formula (7) from https://arxiv.org/pdf/2006.11239.pdf
        pred_original_sample_coeff = (alpha_prod_t_prev ** (0.5) * current_beta_t) / beta_prod_t
        current_sample_coeff = current_alpha_t ** (0.5) * beta_prod_t_prev / beta_prod_t

        # 5. Compute predicted previous sample µ_t
        # See formula (7) from https://arxiv.org/pdf/2006.11239.pdf
        pred_prev_sample = pred_original_sample_coeff * pred_original_sample + current_sample_coeff * sample

        # 6. Add noise
        variance = 0
        if t > 0:
            device = model_output.device
            variance_noise = randn_tensor(model_output.shape, device=device, dtype=model_output.dtype)
            # _get_variance for "fixed_small"
            var = (1 - alpha_prod_t_prev) / (1 - alpha_prod_t) * current_beta_t
            var = torch.clamp(var, min=1e-20)
            variance = (var ** 0.5) * variance_noise

        pred_prev_sample = pred_prev_sample + variance

        if not return_dict:
            return (pred_prev_sample,)

        return DDPMSchedulerOutput(prev_sample=pred_prev_sample, pred_original_sample=pred_original_sample)


# ==== huggingface/diffusers: src/diffusers/schedulers/scheduling_euler_discrete.py ==========================
# (EulerDiscreteScheduler.step for prediction_type="epsilon"; an nn.Module with its sigmas as a buffer;
# _init_step_index picks the first matching timestep)
class EulerDiscreteSchedulerOutput:  # a dataclass (a ModelOutput) in the original
    def __init__(self, prev_sample=None, pred_original_sample=None):
        self.prev_sample = prev_sample
        self.pred_original_sample = pred_original_sample


class EulerDiscreteScheduler(nn.Module):
    def __init__(self, num_inference_steps=10):
        super().__init__()
        sigmas = torch.linspace(10.0, 0.0, num_inference_steps + 1)
        self.register_buffer("sigmas", sigmas)
        self.register_buffer("timesteps", torch.arange(num_inference_steps, 0, -1).float())
        self.is_scale_input_called = False
        self._step_index = None

    @property
    def step_index(self):
        return self._step_index

    def _init_step_index(self, timestep):
        indices = (self.timesteps == timestep).nonzero()
        pos = 1 if len(indices) > 1 else 0
        self._step_index = indices[pos].item()

    @ppy.opt(3)
    def step(
        self,
        model_output: torch.Tensor,
        timestep: float,
        sample: torch.Tensor,
        s_churn: float = 0.0,
        s_tmin: float = 0.0,
        s_tmax: float = float("inf"),
        s_noise: float = 1.0,
        return_dict: bool = True,
    ):
        if not self.is_scale_input_called:
            logger.warning(
                "The `scale_model_input` function should be called before `step` to ensure correct denoising. "
                "See `StableDiffusionPipeline` for a usage example."
            )

        if self.step_index is None:
            self._init_step_index(timestep)

        # Upcast to avoid precision issues when computing prev_sample
        sample = sample.to(torch.float32)

        sigma = self.sigmas[self.step_index]

        gamma = min(s_churn / (len(self.sigmas) - 1), 2**0.5 - 1) if s_tmin <= sigma <= s_tmax else 0.0

        noise = randn_tensor(model_output.shape, dtype=model_output.dtype, device=model_output.device)

        eps = noise * s_noise
        sigma_hat = sigma * (gamma + 1)

        if gamma > 0:
            sample = sample + eps * (sigma_hat**2 - sigma**2) ** 0.5

        # 1. compute predicted original sample (x_0) from sigma-scaled predicted noise
        pred_original_sample = sample - sigma_hat * model_output

        # 2. Convert to an ODE derivative
        derivative = (sample - pred_original_sample) / sigma_hat

        dt = self.sigmas[self.step_index + 1] - sigma_hat

        prev_sample = sample + derivative * dt

        # Cast sample back to model compatible dtype
        prev_sample = prev_sample.to(model_output.dtype)

        # upon completion increase step index by one
        self._step_index += 1

        if not return_dict:
            return (prev_sample,)

        return EulerDiscreteSchedulerOutput(prev_sample=prev_sample, pred_original_sample=pred_original_sample)


# ==== ultralytics/yolov5: utils/general.py ================================================================
# (non_max_suppression without the multi-label, classes, mask and merge-NMS options; torchvision.ops.nms is
# the numpy stand-in)
@ppy.opt(3)
def xywh2xyxy(x):
    # Convert nx4 boxes from [x, y, w, h] to [x1, y1, x2, y2] where xy1=top-left, xy2=bottom-right
    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)
    y[..., 0] = x[..., 0] - x[..., 2] / 2  # top left x
    y[..., 1] = x[..., 1] - x[..., 3] / 2  # top left y
    y[..., 2] = x[..., 0] + x[..., 2] / 2  # bottom right x
    y[..., 3] = x[..., 1] + x[..., 3] / 2  # bottom right y
    return y


@ppy.opt(3)
def non_max_suppression(
    prediction,
    conf_thres=0.25,
    iou_thres=0.45,
    agnostic=False,
    max_det=300,
):
    # Checks
    assert 0 <= conf_thres <= 1, f'Invalid Confidence threshold {conf_thres}, valid values are between 0.0 and 1.0'
    assert 0 <= iou_thres <= 1, f'Invalid IoU {iou_thres}, valid values are between 0.0 and 1.0'

    bs = prediction.shape[0]  # batch size
    xc = prediction[..., 4] > conf_thres  # candidates

    # Settings
    max_wh = 7680  # (pixels) maximum box width and height
    max_nms = 30000  # maximum number of boxes into torchvision.ops.nms()
    time_limit = 0.5 + 0.05 * bs  # seconds to quit after

    t = time.time()
    output = [torch.zeros((0, 6), device=prediction.device)] * bs
    for xi, x in enumerate(prediction):  # image index, image inference
        x = x[xc[xi]]  # confidence

        # If none remain process next image
        if not x.shape[0]:
            continue

        # Compute conf
        x[:, 5:] *= x[:, 4:5]  # conf = obj_conf * cls_conf

        # Box/Mask
        box = xywh2xyxy(x[:, :4])  # center_x, center_y, width, height) to (x1, y1, x2, y2)

        # Detections matrix nx6 (xyxy, conf, cls)
        conf, j = x[:, 5:].max(1, keepdim=True)
        x = torch.cat((box, conf, j.float()), 1)[conf.view(-1) > conf_thres]

        # Check shape
        n = x.shape[0]  # number of boxes
        if not n:  # no boxes
            continue
        x = x[x[:, 4].argsort(descending=True)[:max_nms]]  # sort by confidence and remove excess boxes

        # Batched NMS
        c = x[:, 5:6] * (0 if agnostic else max_wh)  # classes
        boxes, scores = x[:, :4] + c, x[:, 4]  # boxes (offset by class), scores
        i = nms(boxes, scores, iou_thres)  # NMS
        i = i[:max_det]  # limit detections

        output[xi] = x[i]
        if (time.time() - t) > time_limit:
            LOGGER.warning(f'WARNING ⚠️ NMS time limit {time_limit:.3f}s exceeded')
            break  # time limit exceeded

    return output


# ==== ultralytics/ultralytics: ultralytics/utils/loss.py (v8DetectionLoss.preprocess; self.device a CPU) ===
@ppy.opt(3)
def v8_preprocess(targets, batch_size: int, scale_tensor):
    """Preprocesses the target counts and matches with the input batch size to output a tensor."""
    nl, ne = targets.shape
    if nl == 0:
        out = torch.zeros(batch_size, 0, ne - 1)
    else:
        i = targets[:, 0]  # image index
        _, counts = i.unique(return_counts=True)
        counts = counts.to(dtype=torch.int32)
        out = torch.zeros(batch_size, counts.max(), ne - 1)
        for j in range(batch_size):
            matches = i == j
            if n := matches.sum():
                out[j, :n] = targets[matches, 1:]
        out[..., 1:5] = xywh2xyxy(out[..., 1:5].mul_(scale_tensor))
    return out


# ==== facebookresearch/detectron2: detectron2/structures/boxes.py, modeling/roi_heads/fast_rcnn.py ==========
# (Boxes with its clip; Instances as a dict; batched_nms the coordinate trick above)
class Boxes:
    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor

    def clip(self, box_size: Tuple[int, int]) -> None:
        assert torch.isfinite(self.tensor).all(), "Box tensor contains infinite or NaN!"
        h, w = box_size
        x1 = self.tensor[:, 0].clamp(min=0, max=w)
        y1 = self.tensor[:, 1].clamp(min=0, max=h)
        x2 = self.tensor[:, 2].clamp(min=0, max=w)
        y2 = self.tensor[:, 3].clamp(min=0, max=h)
        self.tensor = torch.stack((x1, y1, x2, y2), dim=-1)


@ppy.opt(3)
def fast_rcnn_inference_single_image(
    boxes,
    scores,
    image_shape: Tuple[int, int],
    score_thresh: float,
    nms_thresh: float,
    topk_per_image: int,
):
    valid_mask = torch.isfinite(boxes).all(dim=1) & torch.isfinite(scores).all(dim=1)
    if not valid_mask.all():
        boxes = boxes[valid_mask]
        scores = scores[valid_mask]

    scores = scores[:, :-1]
    num_bbox_reg_classes = boxes.shape[1] // 4
    # Convert to Boxes to use the `clip` function ...
    boxes = Boxes(boxes.reshape(-1, 4))
    boxes.clip(image_shape)
    boxes = boxes.tensor.view(-1, num_bbox_reg_classes, 4)  # R x C x 4

    # 1. Filter results based on detection scores. It can make NMS more efficient
    #    by filtering out low-confidence detections.
    filter_mask = scores > score_thresh  # R x K
    # R' x 2. First column contains indices of the R predictions;
    # Second column contains indices of classes.
    filter_inds = filter_mask.nonzero()
    if num_bbox_reg_classes == 1:
        boxes = boxes[filter_inds[:, 0], 0]
    else:
        boxes = boxes[filter_mask]
    scores = scores[filter_mask]

    # 2. Apply NMS for each class independently.
    keep = _batched_nms_coordinate_trick(boxes, scores, filter_inds[:, 1], nms_thresh)
    if topk_per_image >= 0:
        keep = keep[:topk_per_image]
    boxes, scores, filter_inds = boxes[keep], scores[keep], filter_inds[keep]

    result = {"pred_boxes": boxes, "scores": scores, "pred_classes": filter_inds[:, 1]}
    return result, filter_inds[:, 0]


# facebookresearch/detectron2: detectron2/modeling/roi_heads/fast_rcnn.py
@ppy.opt(3)
def _log_classification_stats(pred_logits, gt_classes, prefix="fast_rcnn"):
    num_instances = gt_classes.numel()
    if num_instances == 0:
        return
    pred_classes = pred_logits.argmax(dim=1)
    bg_class_ind = pred_logits.shape[1] - 1

    fg_inds = (gt_classes >= 0) & (gt_classes < bg_class_ind)
    num_fg = fg_inds.nonzero().numel()
    fg_gt_classes = gt_classes[fg_inds]
    fg_pred_classes = pred_classes[fg_inds]

    num_false_negative = (fg_pred_classes == bg_class_ind).nonzero().numel()
    num_accurate = (pred_classes == gt_classes).nonzero().numel()
    fg_num_accurate = (fg_pred_classes == fg_gt_classes).nonzero().numel()

    storage = get_event_storage()
    storage.put_scalar(f"{prefix}/cls_accuracy", num_accurate / num_instances)
    if num_fg > 0:
        storage.put_scalar(f"{prefix}/fg_cls_accuracy", fg_num_accurate / num_fg)
        storage.put_scalar(f"{prefix}/false_negative", num_false_negative / num_fg)


# facebookresearch/detectron2: FastRCNNOutputLayers.losses (class-agnostic smooth-L1 box regression on the
# foreground, as box_reg_loss with smooth_l1_beta=0.5; the proposals' gt_classes and deltas come in)
class FastRCNNOutputLayers(nn.Module):
    def __init__(self, num_classes, box_reg_loss_weight=1.0):
        super().__init__()
        self.num_classes = num_classes
        self.smooth_l1_beta = 0.5
        self.loss_weight = {"loss_box_reg": box_reg_loss_weight}

    @ppy.opt(3)
    def losses(self, predictions, gt_classes, proposal_deltas_gt):
        scores, proposal_deltas = predictions
        _log_classification_stats(scores, gt_classes)

        loss_cls = F.cross_entropy(scores, gt_classes, reduction="mean")
        fg_inds = ((gt_classes >= 0) & (gt_classes < self.num_classes)).nonzero()[:, 0]
        n = torch.abs(proposal_deltas[fg_inds] - proposal_deltas_gt[fg_inds])
        cond = n < self.smooth_l1_beta
        loss_box_reg = torch.where(cond, 0.5 * n**2 / self.smooth_l1_beta, n - 0.5 * self.smooth_l1_beta).sum()
        losses = {
            "loss_cls": loss_cls,
            "loss_box_reg": loss_box_reg / max(gt_classes.numel(), 1.0),
        }
        return {k: v * self.loss_weight.get(k, 1.0) for k, v in losses.items()}


# ==== huggingface/pytorch-image-models: validate.py (the loop's body; timm/utils/metrics.py's accuracy) =====
@ppy.opt(3)
def timm_accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


@ppy.opt(3)
def timm_validate_step(output, target, losses, top1, top5, batch_idx: int, log_freq: int = 1):
    loss = F.cross_entropy(output, target)
    acc1, acc5 = timm_accuracy(output, target, topk=(1, 5))
    reduced_loss = loss.data

    losses.update(reduced_loss.item(), output.size(0))
    top1.update(acc1.item(), output.size(0))
    top5.update(acc5.item(), output.size(0))

    if batch_idx % log_freq == 0:
        logger.info(
            f'Test: [{batch_idx:>4d}]  '
            f'Loss: {losses.val:>7.3f} ({losses.avg:>6.3f})  '
            f'Acc@1: {top1.val:>7.3f} ({top1.avg:>7.3f})  '
            f'Acc@5: {top5.val:>7.3f} ({top5.avg:>7.3f})'
        )
    return loss, acc1, acc5


# ==== huggingface/pytorch-image-models: timm/data/mixup.py (Mixup.__call__ in 'batch' mode without cutmix:
# _params_per_batch's numpy draw, _mix_batch, mixup_target and one_hot)
@ppy.opt(3)
def one_hot(x, num_classes: int, on_value: float = 1., off_value: float = 0.):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value, device=x.device).scatter_(1, x, on_value)


@ppy.opt(3)
def mixup_target(target, num_classes: int, lam: float = 1., smoothing: float = 0.0):
    off_value = smoothing / num_classes
    on_value = 1. - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
    y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
    return y1 * lam + y2 * (1. - lam)


@ppy.opt(3)
def mixup_batch(x, target, num_classes: int, mixup_alpha: float = 0.8, label_smoothing: float = 0.1):
    assert len(x) % 2 == 0, 'Batch size should be even when using this'
    lam = float(np.random.beta(mixup_alpha, mixup_alpha))
    x_flipped = x.flip(0).mul_(1. - lam)
    x.mul_(lam).add_(x_flipped)
    target = mixup_target(target, num_classes, lam, label_smoothing)
    return x, target


# ==== huggingface/transformers: src/transformers/models/bert/modeling_bert.py ==============================
# (BertForSequenceClassification.forward after the encoder: the pooled output comes in; the config a plain
# object)
class BertConfig:
    def __init__(self, hidden_size=16, num_labels=3, hidden_dropout_prob=0.1, problem_type=None):
        self.hidden_size = hidden_size
        self.num_labels = num_labels
        self.hidden_dropout_prob = hidden_dropout_prob
        self.classifier_dropout = None
        self.problem_type = problem_type


class BertForSequenceClassification(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_labels = config.num_labels
        self.config = config
        classifier_dropout = (
            config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        )
        self.dropout = nn.Dropout(classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    @ppy.opt(3)
    def forward(self, pooled_output, labels):
        pooled_output = self.dropout(pooled_output)
        logits = self.classifier(pooled_output)

        loss = None
        if labels is not None:
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif self.num_labels > 1 and (labels.dtype == torch.long or labels.dtype == torch.int):
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"

            if self.config.problem_type == "regression":
                loss_fct = nn.MSELoss()
                if self.num_labels == 1:
                    loss = loss_fct(logits.squeeze(), labels.squeeze())
                else:
                    loss = loss_fct(logits, labels)
            elif self.config.problem_type == "single_label_classification":
                loss_fct = nn.CrossEntropyLoss()
                loss = loss_fct(logits.view(-1, self.num_labels), labels.view(-1))
            elif self.config.problem_type == "multi_label_classification":
                loss_fct = nn.BCEWithLogitsLoss()
                loss = loss_fct(logits, labels)
        output = (logits,)
        return ((loss,) + output) if loss is not None else output


# huggingface/transformers: src/transformers/models/bert/modeling_bert.py (load_tf_weights_in_bert: the
# shape check and the copy of one variable; the TF checkpoint's array comes in as numpy)
@ppy.opt(3)
def load_tf_weight(pointer, array, name: str, m_name: str):
    if m_name[-11:] == "_embeddings":
        pointer = getattr(pointer, "weight")
    elif m_name == "kernel":
        array = np.transpose(array)
    try:
        if pointer.shape != array.shape:
            raise ValueError(f"Pointer shape {pointer.shape} and array shape {array.shape} mismatched")
    except ValueError as e:
        e.args += (pointer.shape, array.shape)
        raise
    logger.info(f"Initialize PyTorch weight {name}")
    with torch.no_grad():
        pointer.copy_(torch.from_numpy(array))
    return pointer * 2.0 + 1.0


# huggingface/transformers: src/transformers/modeling_utils.py (ModuleUtilsMixin.get_extended_attention_mask,
# the encoder path: config.is_decoder False)
@ppy.opt(3)
def get_extended_attention_mask(
    attention_mask: Tensor, input_shape: Tuple[int], device: torch.device = None, dtype: torch.float = None
) -> Tensor:
    if dtype is None:
        dtype = torch.float32

    if not (attention_mask.dim() == 2 and False):
        # show warning only if it won't be shown in `create_extended_attention_mask_for_decoder`
        if device is not None:
            warnings.warn(
                "The `device` argument is deprecated and will be removed in v5 of Transformers.", FutureWarning
            )
    # We can provide a self-attention mask of dimensions [batch_size, from_seq_length, to_seq_length]
    # ourselves in which case we just need to make it broadcastable to all heads.
    if attention_mask.dim() == 3:
        extended_attention_mask = attention_mask[:, None, :, :]
    elif attention_mask.dim() == 2:
        extended_attention_mask = attention_mask[:, None, None, :]
    else:
        raise ValueError(
            f"Wrong shape for input_ids (shape {input_shape}) or attention_mask (shape {attention_mask.shape})"
        )

    extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
    extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
    return extended_attention_mask


# huggingface/transformers: src/transformers/models/gpt2/modeling_gpt2.py (GPT2LMHeadModel.forward after the
# transformer: its hidden states come in; the output a ModelOutput-like dataclass)
class CausalLMOutputWithCrossAttentions:  # a dataclass (a ModelOutput) in the original
    def __init__(self, loss=None, logits=None):
        self.loss = loss
        self.logits = logits


class GPT2LMHead(nn.Module):
    def __init__(self, n_embd, vocab_size):
        super().__init__()
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    @ppy.opt(3)
    def forward(self, hidden_states, labels=None):
        lm_logits = self.lm_head(hidden_states)

        loss = None
        if labels is not None:
            # move labels to correct device to enable model parallelism
            labels = labels.to(lm_logits.device)
            # Shift so that tokens < n predict n
            shift_logits = lm_logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            # Flatten the tokens
            loss_fct = nn.CrossEntropyLoss()
            loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))

        return CausalLMOutputWithCrossAttentions(loss=loss, logits=lm_logits)


# huggingface/transformers: src/transformers/models/llama/modeling_llama.py (LlamaAttention.forward with a
# DynamicCache, eager attention; rotate_half, apply_rotary_pos_emb, repeat_kv as helpers)
@ppy.opt(3)
def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


@ppy.opt(3)
def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim: int = 1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


@ppy.opt(3)
def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_key_value_heads, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = hidden_size // num_heads
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    @ppy.opt(3)
    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_value=None, cache_position=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)

        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)

        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        if past_key_value is not None:
            # sin and cos are specific to RoPE models; cache_position needed for the static cache
            cache_kwargs = {"sin": sin, "cos": cos, "cache_position": cache_position}
            key_states, value_states = past_key_value.update(key_states, value_states, self.layer_idx, cache_kwargs)

        # eager_attention_forward
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        if attention_mask is not None:
            causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
            attn_weights = attn_weights + causal_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()

        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.o_proj(attn_output)
        return attn_output, attn_weights


# ==== pytorch/examples: mnist/main.py (Net, and test()'s body for one batch with its print) ================
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(8 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


@ppy.opt(3)
def mnist_test_batch(model, data, target, dataset_size: int):
    test_loss = 0
    correct = 0
    output = model(data)
    test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
    pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
    correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= dataset_size

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, dataset_size,
        100. * correct / dataset_size))
    return output, test_loss, correct


# ==== huggingface/transformers: src/transformers/models/llama/modeling_llama.py (LlamaRotaryEmbedding, the
# default rope; @torch.no_grad() left out)
class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    @ppy.opt(3)
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        # Force float32 (see https://github.com/huggingface/transformers/pull/29285)
        device_type = x.device.type
        device_type = device_type if isinstance(device_type, str) and device_type != "mps" else "cpu"
        with torch.autocast(device_type=device_type, enabled=False):
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos()
            sin = emb.sin()

        # Advanced RoPE types (e.g. yarn) apply a post-processing scaling factor, equivalent to scaling attention
        cos = cos * self.attention_scaling
        sin = sin * self.attention_scaling

        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)
'''


# ---- the cases -----------------------------------------------------------------------------------------------
# name -> (the owner's constructor or None, the function's name, the arguments' builder). Arguments are built
# fresh for every call from a fixed seed (caches, meters and streamers are new objects each time); a
# module is built once per case, from a fixed seed, and shared by the region's and eager's calls.


def _g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _t(*shape: int, grad: bool = False, seed: int = 0) -> torch.Tensor:
    t = torch.randn(*shape, generator=_g(seed))
    return t.requires_grad_() if grad else t


def _boxes(n: int, seed: int = 0, grad: bool = False, scale: float = 10.0) -> torch.Tensor:
    g = _g(seed)
    xy = torch.rand(n, 2, generator=g) * scale
    wh = torch.rand(n, 2, generator=g) * scale / 2 + 0.5
    b = torch.cat([xy, xy + wh], 1)
    return b.requires_grad_() if grad else b


def _ints(high: int, *shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=_g(seed))


def _detr_targets() -> list:
    return [
        {"labels": torch.tensor([1, 3]), "boxes": torch.rand(2, 4, generator=_g(5)) * 0.5 + 0.25},
        {"labels": torch.tensor([0, 2, 2]), "boxes": torch.rand(3, 4, generator=_g(6)) * 0.5 + 0.25},
    ]


def _detr_outputs() -> dict:
    return {"pred_logits": _t(2, 5, 5, grad=True, seed=3), "pred_boxes": torch.rand(2, 5, 4, generator=_g(4))}


def _detr_indices() -> list:
    return [
        (torch.tensor([0, 3]), torch.tensor([1, 0])),
        (torch.tensor([1, 2, 4]), torch.tensor([0, 2, 1])),
    ]


def _yolo_prediction() -> torch.Tensor:
    g = _g(7)
    xy = torch.rand(2, 12, 2, generator=g) * 64
    wh = torch.rand(2, 12, 2, generator=g) * 16 + 2
    rest = torch.rand(2, 12, 4, generator=g)
    return torch.cat([xy, wh, rest], -1)


def _v8_targets() -> torch.Tensor:
    img = torch.tensor([[0.0], [0.0], [1.0], [2.0], [2.0], [2.0]])
    cls = torch.tensor([[1.0], [0.0], [2.0], [1.0], [1.0], [0.0]])
    return torch.cat([img, cls, torch.rand(6, 4, generator=_g(8))], 1)


def _rope(ns: dict) -> tuple:
    pos = torch.arange(4)[None]
    return ns["LlamaRotaryEmbedding"](4).forward(_t(1, 4, 8), pos)


def _causal(n: int) -> torch.Tensor:
    return torch.full((n, n), float("-inf")).triu(1)[None, None]


Case = tuple  # (owner builder or None, function name, args builder)
CASES: dict[str, Case] = {
    # ---- pytorch/vision ----
    "sigmoid_focal_loss": (
        None,
        "sigmoid_focal_loss",
        lambda ns: (_t(4, 6, grad=True), (_t(4, 6, seed=1) > 0).float(), 0.25, 2, "mean"),
    ),
    "box_iou": (None, "box_iou", lambda ns: (_boxes(5, grad=True), _boxes(4, seed=1))),
    "generalized_box_iou": (
        None,
        "generalized_box_iou",
        lambda ns: (_boxes(5, grad=True), _boxes(4, seed=1, grad=True)),
    ),
    "clip_boxes_to_image": (None, "clip_boxes_to_image", lambda ns: (_boxes(6, grad=True) - 2.0, (8, 9))),
    "_batched_nms_coordinate_trick": (
        None,
        "_batched_nms_coordinate_trick",
        lambda ns: (_boxes(10), torch.rand(10, generator=_g(2)), _ints(3, 10, seed=3), 0.3),
    ),
    "masks_to_boxes": (None, "masks_to_boxes", lambda ns: (torch.rand(3, 6, 7, generator=_g(1)) > 0.7,)),
    "complete_box_iou_loss": (
        None,
        "complete_box_iou_loss",
        lambda ns: (_boxes(6, grad=True), _boxes(6, seed=1), "mean"),
    ),
    # ---- facebookresearch/detr ----
    "HungarianMatcher.forward": (
        lambda ns: ns["HungarianMatcher"](1, 5, 2),
        "HungarianMatcher.forward",
        lambda ns: (_detr_outputs(), _detr_targets()),
    ),
    "SetCriterion.loss_labels": (
        lambda ns: ns["SetCriterion"](4, 0.1),
        "SetCriterion.loss_labels",
        lambda ns: (_detr_outputs(), _detr_targets(), _detr_indices(), 5),
    ),
    "SetCriterion.loss_cardinality": (
        lambda ns: ns["SetCriterion"](4, 0.1),
        "SetCriterion.loss_cardinality",
        lambda ns: (_detr_outputs(), _detr_targets(), _detr_indices(), 5),
    ),
    "nested_tensor_from_tensor_list": (
        None,
        "nested_tensor_from_tensor_list",
        lambda ns: ([_t(3, 4, 5), _t(3, 6, 3, seed=1)],),
    ),
    # ---- huggingface/transformers ----
    "MixtralSparseMoeBlock.forward": (
        lambda ns: ns["MixtralSparseMoeBlock"](8, 16, 4, 2),
        "MixtralSparseMoeBlock.forward",
        lambda ns: (_t(2, 3, 8, grad=True),),
    ),
    "load_balancing_loss_func": (
        None,
        "load_balancing_loss_func",
        lambda ns: ((_t(6, 4, grad=True), _t(6, 4, seed=1, grad=True)), 4, 2),
    ),
    "SwitchTransformersTop1Router.forward": (
        lambda ns: ns["SwitchTransformersTop1Router"](8, 4, 2),
        "SwitchTransformersTop1Router.forward",
        lambda ns: (_t(2, 5, 8, grad=True),),
    ),
    "SwitchTransformersSparseMLP.forward": (
        lambda ns: ns["SwitchTransformersSparseMLP"](8, 16, 4, 3),
        "SwitchTransformersSparseMLP.forward",
        lambda ns: (_t(2, 5, 8, grad=True),),
    ),
    "sample_step": (
        None,
        "sample_step",
        lambda ns: (
            _ints(12, 3, 4),
            _t(3, 4, 12, grad=True),
            torch.ones(3, dtype=torch.long),
            {"cache_position": torch.arange(4)},
            ns["TinyStreamer"](),
        ),
    ),
    "beam_search_step": (
        None,
        "beam_search_step",
        lambda ns: (
            _t(3, 6, grad=True) * 3,
            torch.tensor([0.0, -0.5, -1.0]),
            _ints(6, 3, 4),
            ns["BeamHypotheses"](3, 1.0),
            3,
            2,
        ),
    ),
    "torch_mask_tokens": (
        None,
        "torch_mask_tokens",
        lambda ns: (_ints(30, 4, 8), ns["TinyTokenizer"](30), 0.3),
    ),
    "BertForSequenceClassification.forward": (
        lambda ns: ns["BertForSequenceClassification"](ns["BertConfig"]()),
        "BertForSequenceClassification.forward",
        lambda ns: (_t(4, 16, grad=True), _ints(3, 4)),
    ),
    "load_tf_weight": (
        None,
        "load_tf_weight",
        lambda ns: (torch.zeros(3, 5), np.arange(15, dtype=np.float32).reshape(5, 3), "bert/dense/kernel", "kernel"),
    ),
    "get_extended_attention_mask": (
        None,
        "get_extended_attention_mask",
        lambda ns: ((_t(2, 6) > 0).long(), (2, 6), torch.device("cpu")),
    ),
    "GPT2LMHead.forward": (
        lambda ns: ns["GPT2LMHead"](8, 11),
        "GPT2LMHead.forward",
        lambda ns: (_t(2, 5, 8, grad=True), _ints(11, 2, 5)),
    ),
    "LlamaAttention.forward": (
        lambda ns: ns["LlamaAttention"](16, 4, 2, 0),
        "LlamaAttention.forward",
        lambda ns: (_t(1, 4, 16, grad=True), _rope(ns), _causal(4), ns["DynamicCache"](), torch.arange(4)),
    ),
    "LlamaRotaryEmbedding.forward": (
        lambda ns: ns["LlamaRotaryEmbedding"](8),
        "LlamaRotaryEmbedding.forward",
        lambda ns: (_t(2, 5, 8), torch.arange(5).expand(2, 5)),
    ),
    # ---- karpathy/nanoGPT ----
    "nanogpt_loss_and_log": (
        None,
        "nanogpt_loss_and_log",
        lambda ns: (_t(2, 6, 13, grad=True), _ints(13, 2, 6), 3),
    ),
    # ---- facebookresearch/fairseq ----
    "LabelSmoothedCrossEntropyCriterion.forward": (
        lambda ns: ns["LabelSmoothedCrossEntropyCriterion"](0.1, 1),
        "LabelSmoothedCrossEntropyCriterion.forward",
        lambda ns: (_t(2, 5, 9, grad=True), {"target": _ints(9, 2, 5), "ntokens": 10}),
    ),
    "collate_tokens": (
        None,
        "collate_tokens",
        lambda ns: ([_ints(9, 3, seed=1) + 2, _ints(9, 5, seed=2) + 2, _ints(9, 2, seed=3) + 2], 1),
    ),
    "FutureMask.buffered_future_mask": (
        lambda ns: ns["FutureMask"](),
        "FutureMask.buffered_future_mask",
        lambda ns: (_t(5, 5, grad=True),),
    ),
    # ---- huggingface/diffusers ----
    "DDPMScheduler.step": (
        lambda ns: ns["DDPMScheduler"](),
        "DDPMScheduler.step",
        lambda ns: (_t(2, 3, 4, 4, grad=True), 7, _t(2, 3, 4, 4, seed=1, grad=True)),
    ),
    "EulerDiscreteScheduler.step": (
        lambda ns: ns["EulerDiscreteScheduler"](),
        "EulerDiscreteScheduler.step",
        lambda ns: (_t(2, 3, 4, 4, grad=True), 8.0, _t(2, 3, 4, 4, seed=1, grad=True), 0.5, 0.0, 100.0),
    ),
    # ---- ultralytics ----
    "non_max_suppression": (None, "non_max_suppression", lambda ns: (_yolo_prediction(), 0.25, 0.45)),
    "v8_preprocess": (
        None,
        "v8_preprocess",
        lambda ns: (_v8_targets(), 3, torch.tensor([64.0, 48.0, 64.0, 48.0])),
    ),
    # ---- facebookresearch/detectron2 ----
    "fast_rcnn_inference_single_image": (
        None,
        "fast_rcnn_inference_single_image",
        lambda ns: (
            torch.cat([_boxes(8, scale=20.0), _boxes(8, seed=1, scale=20.0)], 1),
            torch.rand(8, 3, generator=_g(2)).softmax(-1),
            (16, 18),
            0.2,
            0.5,
            5,
        ),
    ),
    "FastRCNNOutputLayers.losses": (
        lambda ns: ns["FastRCNNOutputLayers"](3),
        "FastRCNNOutputLayers.losses",
        lambda ns: (
            (_t(6, 4, grad=True), _t(6, 4, seed=1, grad=True)),
            torch.tensor([0, 3, 1, 2, 3, 1]),
            _t(6, 4, seed=2),
        ),
    ),
    # ---- huggingface/pytorch-image-models ----
    "timm_validate_step": (
        None,
        "timm_validate_step",
        lambda ns: (
            _t(6, 7, grad=True),
            _ints(7, 6),
            ns["AverageMeter"](),
            ns["AverageMeter"](),
            ns["AverageMeter"](),
            0,
        ),
    ),
    "mixup_batch": (None, "mixup_batch", lambda ns: (_t(4, 3, 2, 2), _ints(5, 4), 5)),
    # ---- pytorch/examples ----
    "mnist_test_batch": (None, "mnist_test_batch", lambda ns: (ns["Net"]().eval(), _t(3, 1, 12, 12), _ints(10, 3), 3)),
}
# -------------------------------------------------------------------------------------------------------------------

INTERNAL = "cannot compile this ("


def _decorated(ns: dict, name: str) -> Any:
    """The decorated function of case `name` (for a method: the object in its class's dict)."""
    if "." in name:
        cls, method = name.split(".")
        return ns[cls].__dict__[method]
    return ns[name]


class _Case:
    def __init__(self, ns: dict, name: str):
        owner_of, fname, self.build = CASES[name]
        self.ns = ns
        self.name = name
        self.f = _decorated(ns, fname)
        self.owner_of = owner_of
        self.error: Exception | None = None

    def first(self) -> None:
        """A call while the cases settle: what it raised is kept for the case's test."""
        if self.error is None:
            try:
                self.call()
            except Exception as exc:  # noqa: BLE001 - reported by the case's test
                self.error = exc

    def args(self) -> tuple:
        """Fresh arguments (the module too: its state, a scheduler's step index, starts anew each call)."""
        torch.manual_seed(0)
        owner = self.owner_of(self.ns) if self.owner_of is not None else None
        args = self.build(self.ns)
        return args if owner is None else (owner, *args)

    def call(self, python: bool = False) -> tuple[Any, tuple]:
        """One call, the compiled function's or its Python body's, on fresh arguments from reseeded generators;
        (the result, the arguments after the call)."""
        args = self.args()
        fn = self.f.__wrapped__ if python else self.f
        torch.manual_seed(1234)
        np.random.seed(1234)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args)
        return out, args


def _plain(v: Any) -> Any:
    """`v` with dataclasses and plain objects as (class name, their fields), for comparing."""
    if isinstance(v, torch.Tensor):
        return v
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, nn.Module):
        return ("module", type(v).__name__)
    if dataclasses.is_dataclass(v) or (hasattr(v, "__dict__") and not isinstance(v, (type, types.FunctionType))):
        return (type(v).__name__, {k: _plain(x) for k, x in vars(v).items()})
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, v.tobytes())
    return v


def _grads(out: Any, args: tuple) -> list | None:
    """The gradients of the sum of `out`'s floating outputs w.r.t. the leaf tensors of `args` and the
    parameters of its modules (the method's owner is its first)."""
    leaves = [t for t in tensors_in(_plain(list(args))) if t.requires_grad and t.is_leaf]
    leaves += [p for m in args if isinstance(m, nn.Module) for p in m.parameters() if p.requires_grad]
    outs = [t for t in tensors_in(_plain(out)) if t.requires_grad and t.is_floating_point()]
    if not outs or not leaves:
        return None
    loss = sum(t.sum() for t in outs)
    return list(torch.autograd.grad(loss, leaves, allow_unused=True))


@pytest.fixture(scope="module")
def cases():
    ns, _report = compile_cell(CELL, filename="<ppy-break-models>")
    built = {name: _Case(ns, name) for name in CASES}
    # every case once, then the builds together; again until no case's split or builds change
    before = None
    for _ in range(8):
        for case in built.values():
            case.first()
        assert ppy_magic.wait(timeout=900), "the builds did not land in 15 minutes"
        now = {name: shape(case.f) for name, case in built.items()}
        if now == before:
            break
        before = now
    for case in built.values():
        if case.error is None:
            settle(case.f, case.call)
    return built


def test_the_suite_is_large_enough():
    assert len(CASES) >= 32
    assert len({name.split(".")[0] for name in CASES}) >= 30


@pytest.mark.parametrize("name", list(CASES))
def test_split_a_region_and_bitwise_eager(cases, name):
    case = cases[name]
    assert case.error is None, f"{name} raised {type(case.error).__name__}: {case.error}"
    f = case.f
    explain = ppy_magic.explain(f)
    assert f.__ppy_driver__ is not None, f"{name} is not split:\n{explain}"
    assert f.__ppy_region__ is True, f"{name}: no segment is a region:\n{explain}"
    split = f.__dict__["__ppy_split__"]
    described = "\n".join(split.describe())
    assert len(split.breaks) >= 1, described
    internal = [why for _st, why in split.breaks.values() if INTERNAL in why]
    assert not internal, f"{name}: an internal compiler error as a break's reason:\n{described}"

    got, got_args = case.call()
    want, want_args = case.call(python=True)
    assert_same(_plain(got), _plain(want))
    assert_same(_plain(got_args), _plain(want_args))
    g_got, g_want = _grads(got, got_args), _grads(want, want_args)
    assert (g_got is None) == (g_want is None)
    if g_got is not None:
        assert_same(g_got, g_want)


def _share_table(cases: dict) -> list[tuple[str, int, float]]:
    """(name, breaks, share) per case; a case whose measurement raises has share 0 (and fails the test)."""
    rows = []
    for name, case in cases.items():
        split = case.f.__dict__.get("__ppy_split__")
        breaks = len(split.breaks) if split is not None else 0
        args = case.args()
        torch.manual_seed(1234)
        np.random.seed(1234)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                share = region_share(case.f, args)
            except Exception as exc:  # noqa: BLE001 - a row of the table, and a failure below
                print(f"{name}: measuring its share raised {type(exc).__name__}: {str(exc).splitlines()[0]}")
                share = 0.0
        rows.append((name, breaks, share))
    return rows


def test_most_of_each_case_runs_in_regions(cases, capsys):
    rows = _share_table(cases)
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'case':<{width}}  breaks  share", *(f"{n:<{width}}  {b:>6}  {s:5.2f}" for n, b, s in rows)]
    mean = sum(s for _, _, s in rows) / len(rows)
    lines.append(f"{'mean':<{width}}  {'':>6}  {mean:5.2f}")
    table = "\n".join(lines)
    with capsys.disabled():
        print("\n" + table)
    path = os.environ.get("PPY_BREAK_REPORT")
    if path:
        with open(path, "w") as out:
            out.write(table + "\n")
    # A case whose ATen calls all happen in a Python function it calls (fairseq's collate_tokens copies
    # through a nested def) has none in regions; nine in ten have some, and most calls are made in regions.
    assert sum(s > 0 for _, _, s in rows) >= 0.9 * len(rows), table
    assert mean >= 0.65, table
