"""Model code with control flow: every function compiles to a region and matches eager bit for bit.

Functions of the kinds real model code has, written as it is usually written (decoding
filters, non-maximum suppression, recurrences unrolled over time, iterations until a
tolerance, lists built in loops and stacked, masks built in loops), each called on a few
inputs. For every call the region and the Python body run on identical clones of the inputs
(tests/support/eager.py): outputs, inputs after the call, raised errors and gradients must be
equal bit for bit. Unlike tests/test_models.py, none may stay Python. This file costs one build.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import MATCH

CELL = """
import math
import torch
import torch.nn.functional as F
import ppy


# ---- decoding ---------------------------------------------------------------------------------
@ppy.opt(3)
def top_k_filter(logits, k: int):
    if k <= 0:
        return logits
    k = min(k, logits.size(-1))
    kth = torch.topk(logits, k)[0][..., -1, None]
    return logits.masked_fill(logits < kth, float("-inf"))


@ppy.opt(3)
def top_p_filter(logits, top_p: float):
    sorted_logits, sorted_idx = torch.sort(logits, descending=True)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove = cum > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = remove.scatter(-1, sorted_idx, remove)
    return logits.masked_fill(mask, float("-inf"))


@ppy.opt(3)
def repetition_penalty(logits, prev_tokens, penalty: float):
    out = logits.clone()
    for tok in prev_tokens:
        i = int(tok)
        if out[0, i] < 0:
            out[0, i] = out[0, i] * penalty
        else:
            out[0, i] = out[0, i] / penalty
    return out


@ppy.opt(3)
def greedy_decode(tokens, emb, w_out, steps: int, eos: int):
    for _ in range(steps):
        h = emb[tokens[:, -1]]
        nxt = (h @ w_out).argmax(-1)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        if bool((nxt == eos).all()):
            break
    return tokens


@ppy.opt(3)
def sample_step(logits, temperature: float, k: int):
    if temperature == 0.0:
        return logits.argmax(-1)
    filtered = top_k_filter(logits / temperature, k)
    return torch.multinomial(filtered.softmax(-1), 1)[:, 0]


@ppy.opt(3)
def beam_search(logp_steps, beam: int):
    scores = logp_steps.new_zeros(1)
    parents = []
    tokens = []
    vocab = logp_steps.size(1)
    for t in range(logp_steps.size(0)):
        total = (scores[:, None] + logp_steps[t][None, :]).reshape(-1)
        scores, idx = total.topk(min(beam, total.numel()))
        parents.append(idx // vocab)
        tokens.append(idx % vocab)
    return scores, parents, tokens


@ppy.opt(3)
def ctc_greedy(log_probs, blank: int):
    best = log_probs.argmax(-1)
    out = []
    prev = -1
    for t in best:
        k = int(t)
        if k != prev and k != blank:
            out.append(k)
        prev = k
    return out


@ppy.opt(3)
def viterbi(emissions, transitions):
    score = emissions[0]
    history = []
    for t in range(1, emissions.size(0)):
        total = score[:, None] + transitions + emissions[t][None, :]
        score, idx = total.max(0)
        history.append(idx)
    best = int(score.argmax())
    path = [best]
    for idx in reversed(history):
        best = int(idx[best])
        path.append(best)
    path.reverse()
    return path, score.max()


# ---- detection ----------------------------------------------------------------------------------
@ppy.opt(3)
def nms(boxes, scores, iou_threshold: float):
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i)
        if order.numel() == 1:
            break
        rest = order[1:]
        xx1 = torch.maximum(boxes[rest, 0], boxes[i, 0])
        yy1 = torch.maximum(boxes[rest, 1], boxes[i, 1])
        xx2 = torch.minimum(boxes[rest, 2], boxes[i, 2])
        yy2 = torch.minimum(boxes[rest, 3], boxes[i, 3])
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        iou = inter / (area[i] + area[rest] - inter)
        order = rest[iou <= iou_threshold]
    return torch.stack(keep)


@ppy.opt(3)
def nms_indices(boxes, scores, iou_threshold: float):
    order = scores.argsort(descending=True)
    suppressed = torch.zeros(boxes.size(0), dtype=torch.bool)
    keep = []
    for i in order:
        j = int(i)
        if suppressed[j]:
            continue
        keep.append(j)
        lt = torch.maximum(boxes[j, :2], boxes[:, :2])
        rb = torch.minimum(boxes[j, 2:], boxes[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[:, 0] * wh[:, 1]
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        iou = inter / (areas[j] + areas - inter)
        suppressed = suppressed | (iou > iou_threshold)
    return keep


# ---- recurrences unrolled over time -------------------------------------------------------------
@ppy.opt(3)
def rnn_tanh(xs, h, w_ih, w_hh, b):
    outs = []
    for t in range(xs.size(0)):
        h = torch.tanh(xs[t] @ w_ih.t() + h @ w_hh.t() + b)
        outs.append(h)
    return torch.stack(outs), h


@ppy.opt(3)
def gru(xs, h, w_ih, w_hh, b_ih, b_hh):
    outs = []
    for x in xs:
        i_r, i_z, i_n = F.linear(x, w_ih, b_ih).chunk(3, 1)
        h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
        outs.append(h)
    return torch.stack(outs)


@ppy.opt(3)
def lstm(xs, h, c, w_ih, w_hh, b):
    outs = []
    for x in xs:
        gates = x @ w_ih.t() + h @ w_hh.t() + b
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs, dim=0), (h, c)


@ppy.opt(3)
def bidirectional_rnn(xs, w_f, w_b, u):
    n = xs.size(0)
    h = xs.new_zeros(xs.size(1), u.size(0))
    forward = []
    for t in range(n):
        h = torch.tanh(xs[t] @ w_f + h @ u)
        forward.append(h)
    h = xs.new_zeros(xs.size(1), u.size(0))
    backward = [h] * n
    for t in reversed(range(n)):
        h = torch.tanh(xs[t] @ w_b + h @ u)
        backward[t] = h
    return torch.cat([torch.stack(forward), torch.stack(backward)], dim=-1)


@ppy.opt(3)
def selective_scan(u, delta, A, B, C, D):
    # the reference loop of a selective state-space layer: u, delta (b, d, l); A (d, n); B, C (b, n, l)
    delta_a = torch.exp(delta[:, :, :, None] * A[None, :, None, :])
    delta_b_u = (delta * u)[:, :, :, None] * B.transpose(1, 2)[:, None, :, :]
    x = u.new_zeros(u.size(0), A.size(0), A.size(1))
    ys = []
    for i in range(u.size(2)):
        x = delta_a[:, :, i] * x + delta_b_u[:, :, i]
        ys.append((x * C[:, None, :, i]).sum(-1))
    y = torch.stack(ys, dim=2)
    return y + u * D[None, :, None]


@ppy.opt(3)
def ema_with_reset(xs, decay: float, resets):
    state = None
    outs = []
    for x, r in zip(xs, resets):
        if state is None or bool(r):
            state = x
        else:
            state = decay * state + (1 - decay) * x
        outs.append(state)
    return torch.stack(outs)


# ---- iterations until a tolerance ---------------------------------------------------------------
@ppy.opt(3)
def sinkhorn(cost, eps: float, tol: float, max_iter: int):
    k = torch.exp(-cost / eps)
    a = torch.full((cost.size(0),), 1.0 / cost.size(0), dtype=cost.dtype)
    b = torch.full((cost.size(1),), 1.0 / cost.size(1), dtype=cost.dtype)
    u = torch.ones_like(a)
    v = torch.ones_like(b)
    for _ in range(max_iter):
        u_prev = u
        u = a / (k @ v)
        v = b / (k.t() @ u)
        if (u - u_prev).abs().max() < tol:
            break
    return u[:, None] * k * v[None, :]


@ppy.opt(3)
def newton_sqrt(a, tol: float):
    x = a.clone()
    while True:
        nx = 0.5 * (x + a / x)
        if (nx - x).abs().max().item() < tol:
            return nx
        x = nx


@ppy.opt(3)
def power_iteration(a, iters: int, tol: float):
    v = a.new_ones(a.size(1)) / math.sqrt(a.size(1))
    steps = 0
    for steps in range(1, iters + 1):
        w = a @ v
        nv = w / w.norm()
        done = (nv - v).norm() < tol
        v = nv
        if done:
            break
    return v, v @ a @ v, steps


@ppy.opt(3)
def bisect_root(lo, hi, target, tol: float):
    # solves x ** 3 = target elementwise
    it = 0
    while (hi - lo).max() > tol and it < 200:
        mid = (lo + hi) / 2
        big = mid**3 > target
        hi = torch.where(big, mid, hi)
        lo = torch.where(big, lo, mid)
        it += 1
    return (lo + hi) / 2, it


# ---- masks built in loops -----------------------------------------------------------------------
@ppy.opt(3)
def band_mask(scores, width: int):
    n = scores.size(-1)
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        lo = max(0, i - width)
        mask[i, lo : i + 1] = True
    return scores.masked_fill(~mask, float("-inf")).softmax(-1)


@ppy.opt(3)
def length_mask(x, lengths):
    mask = torch.zeros(x.size(0), x.size(1), dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, : int(n)] = True
    return x.masked_fill(~mask[:, :, None], 0.0), mask


@ppy.opt(3)
def block_causal_mask(x, block: int):
    n = x.size(-1)
    mask = torch.ones(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(n):
            if j // block > i // block:
                mask[i, j] = False
    return x.masked_fill(~mask, 0.0)


# ---- lists of tensors ---------------------------------------------------------------------------
@ppy.opt(3)
def mean_of_list(xs: list[torch.Tensor]):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total / len(xs)


@ppy.opt(3)
def mlp(x, ws: list[torch.Tensor], bs: list[torch.Tensor]):
    for i, (w, b) in enumerate(zip(ws, bs)):
        x = x @ w + b
        if i < len(ws) - 1:
            x = torch.relu(x)
    return x


@ppy.opt(3)
def clip_grads(grads: list[torch.Tensor], max_norm: float):
    total = torch.stack([g.norm() for g in grads]).norm()
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        return [g * coef for g in grads]
    return [g.clone() for g in grads]


@ppy.opt(3)
def list_reductions(xs: list[torch.Tensor]):
    largest = max(x.abs().max() for x in xs)
    has_nan = any(torch.isnan(x).any() for x in xs)
    all_pos = all((x > 0).all() for x in xs)
    total = sum((x.sum() for x in xs), torch.zeros(()))
    sizes = sum(x.numel() for x in xs)
    return largest, has_nan, all_pos, total, sizes


@ppy.opt(3)
def multi_head(q, k, v, heads: int):
    outs = [torch.softmax(q[h] @ k[h].t() / math.sqrt(q.size(-1)), -1) @ v[h] for h in range(heads)]
    return torch.cat(outs, dim=-1)


@ppy.opt(3)
def residual_stack(x, ws: list[torch.Tensor]):
    skips = []
    for i, w in enumerate(ws):
        y = torch.tanh(x @ w)
        x = x + y if i % 2 == 0 else y
        skips.append(x)
    while len(skips) > 1:
        skips.append(skips.pop() + skips.pop())
    return skips[0]


@ppy.opt(3)
def stack_of_rows(x):
    rows = []
    for row in x:
        if row.sum() > 0:
            rows.append(row * 2)
        else:
            rows.append(-row)
    return torch.stack(rows) if rows else x


# ---- numbers from tensors ----------------------------------------------------------------------
@ppy.opt(3)
def python_argmax(x):
    best_i = 0
    best_v = x[0].item()
    for i in range(1, len(x)):
        v = x[i].item()
        if v > best_v:
            best_v, best_i = v, i
    return best_i, best_v


@ppy.opt(3)
def prefix_until_negative(x):
    i = 0
    while i < x.size(0) and x[i].item() >= 0:
        i += 1
    return x[:i], i


@ppy.opt(3)
def normalise_if_needed(x, eps: float):
    norm = float(x.norm())
    scale = 1.0 / norm if norm > eps else 1.0
    return x * scale, norm


@ppy.opt(3)
def to_floats(x):
    vals = []
    for t in x.flatten():
        vals.append(float(t))
    return vals, sum(vals)


@ppy.opt(3)
def checked_softmax(x):
    assert (x.abs() < 1e4).all(), "logits out of range"
    y = x.softmax(-1)
    return y if y.max() > 0.5 else y * 0 + 1 / y.size(-1)


@ppy.opt(3)
def shape_games(x, w, axis: int):
    dims = [d for d in range(x.dim()) if d != axis]
    moved = x.permute(*dims, axis)
    scale = w.view(-1, *((1,) * (x.ndim - 1)))
    return moved, x * scale


@ppy.opt(3)
def gate(a, b):
    picked = a if a.sum() > b.sum() else b
    either = (a.max() > 1) or (b.max() > 1)
    both = bool(a.min() > -1) and bool(b.min() > -1)
    return picked, either, both, not (a.mean() > 0)
"""


def _t(*shape, grad=True, dtype=torch.float32, scale=1.0, seed=[0]):  # noqa: B006 - a counter on purpose
    seed[0] += 1
    g = torch.Generator().manual_seed(seed[0])
    return (torch.randn(*shape, generator=g, dtype=dtype) * scale).requires_grad_(grad and dtype.is_floating_point)


def _ints(high, *shape, seed=[100]):  # noqa: B006
    seed[0] += 1
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed[0]))


def _boxes(n):
    xy = torch.rand(n, 2, generator=torch.Generator().manual_seed(n)) * 10
    wh = torch.rand(n, 2, generator=torch.Generator().manual_seed(n + 1)) * 5 + 1
    return torch.cat([xy, xy + wh], 1)


V, H, T, B = 11, 8, 6, 3

CALLS = {
    "top_k_filter": [lambda: (_t(2, V), 3), lambda: (_t(2, V), 0), lambda: (_t(V), 50)],
    "top_p_filter": [lambda: (_t(2, V), 0.9), lambda: (_t(V, grad=False), 0.1)],
    "repetition_penalty": [lambda: (_t(1, V), _ints(V, 5), 1.3)],
    "greedy_decode": [
        lambda: (_ints(V, 2, 3), _t(V, H), _t(H, V), 6, 3),
        lambda: (torch.tensor([[1], [2]]), _t(V, H), _t(H, V), 4, 0),
    ],
    "sample_step": [lambda: (_t(2, V, grad=False), 0.7, 4), lambda: (_t(2, V), 0.0, 4)],
    "beam_search": [lambda: (_t(5, V).log_softmax(-1), 3), lambda: (_t(1, 2).log_softmax(-1), 4)],
    "ctc_greedy": [lambda: (_t(12, 4, grad=False), 0), lambda: (_t(0, 4, grad=False), 0)],
    "viterbi": [lambda: (_t(7, 4), _t(4, 4)), lambda: (_t(1, 3), _t(3, 3))],
    "nms": [lambda: (_boxes(12), _t(12, grad=False), 0.3), lambda: (_boxes(1), _t(1, grad=False), 0.5)],
    "nms_indices": [lambda: (_boxes(10), _t(10, grad=False), 0.2)],
    "rnn_tanh": [lambda: (_t(T, B, 4), _t(B, H), _t(H, 4), _t(H, H, scale=0.3), _t(H))],
    "gru": [
        lambda: (_t(T, B, 4), _t(B, H), _t(3 * H, 4), _t(3 * H, H, scale=0.3), _t(3 * H), _t(3 * H)),
        lambda: (_t(0, B, 4), _t(B, H), _t(3 * H, 4), _t(3 * H, H), _t(3 * H), _t(3 * H)),
    ],
    "lstm": [lambda: (_t(T, B, 4), _t(B, H), _t(B, H), _t(4 * H, 4), _t(4 * H, H, scale=0.3), _t(4 * H))],
    "bidirectional_rnn": [lambda: (_t(T, B, 4), _t(4, H), _t(4, H), _t(H, H, scale=0.3))],
    "selective_scan": [
        lambda: (_t(2, 3, 5), _t(2, 3, 5).abs() * 0.1, -_t(3, 4).abs(), _t(2, 4, 5), _t(2, 4, 5), _t(3))
    ],
    "ema_with_reset": [lambda: (_t(T, 4), 0.9, torch.tensor([0, 0, 1, 0, 1, 0]))],
    "sinkhorn": [lambda: (_t(5, 4).abs(), 0.5, 1e-6, 200), lambda: (_t(3, 3).abs(), 0.1, 1e-9, 3)],
    "newton_sqrt": [lambda: (_t(6).abs() + 0.5, 1e-6), lambda: (_t(3, dtype=torch.float64).abs() + 1, 1e-12)],
    "power_iteration": [
        lambda: (_t(5, 5, grad=False) @ _t(5, 5, grad=False).t(), 100, 1e-5),
        lambda: (_t(3, 3), 2, 0.0),
    ],
    "bisect_root": [lambda: (torch.zeros(4), torch.full((4,), 4.0), _t(4, grad=False).abs() * 10, 1e-4)],
    "band_mask": [lambda: (_t(5, 5), 2), lambda: (_t(3, 3), 0)],
    "length_mask": [lambda: (_t(3, 5, 2), torch.tensor([2, 5, 0]))],
    "block_causal_mask": [lambda: (_t(5, 5), 2), lambda: (_t(2, 0, 0), 1)],
    "mean_of_list": [lambda: ([_t(3), _t(3), _t(3)],), lambda: ([_t(2, 2)],)],
    "mlp": [lambda: (_t(2, 4), [_t(4, 5), _t(5, 3)], [_t(5), _t(3)]), lambda: (_t(2, 4), [], [])],
    "clip_grads": [lambda: ([_t(3, 3, scale=5), _t(4, scale=5)], 1.0), lambda: ([_t(3) * 0.01], 1.0)],
    "list_reductions": [
        lambda: ([_t(3), _t(2, 2), _t(4)],),
        lambda: ([_t(3).abs() + 1, torch.tensor([float("nan")])],),
    ],
    "multi_head": [lambda: (_t(2, 4, 3), _t(2, 4, 3), _t(2, 4, 3), 2)],
    "residual_stack": [lambda: (_t(2, 4), [_t(4, 4), _t(4, 4), _t(4, 4)]), lambda: (_t(2, 4), [_t(4, 4)])],
    "stack_of_rows": [lambda: (_t(4, 3),), lambda: (_t(0, 3),)],
    "python_argmax": [lambda: (_t(7, grad=False),), lambda: (torch.tensor([3, 1, 4, 1, 5]),), lambda: (_t(0),)],
    "prefix_until_negative": [lambda: (torch.tensor([1.0, 2.0, -1.0, 3.0]),), lambda: (torch.tensor([1, 2]),)],
    "normalise_if_needed": [lambda: (_t(4), 1e-3), lambda: (torch.zeros(3), 1e-3)],
    "to_floats": [lambda: (_t(2, 3, grad=False),), lambda: (torch.tensor([1, 2]),)],
    "checked_softmax": [lambda: (_t(2, 5, scale=3),), lambda: (_t(3),), lambda: (torch.tensor([1e5, 0.0]),)],
    "shape_games": [lambda: (_t(2, 3, 4), _t(2), 1), lambda: (_t(3), _t(3), 0)],
    "gate": [lambda: (_t(3), _t(3)), lambda: (_t(()), _t(()))],
}


@pytest.fixture(scope="module")
def cell():
    ns, report = compile_cell(CELL, filename="<ppy-control-models>")
    return ns, report


def test_the_suite_is_large_enough_and_every_function_has_inputs():
    import ast

    names = [n.name for n in ast.parse(CELL).body if isinstance(n, ast.FunctionDef)]
    assert sorted(names) == sorted(CALLS)
    assert len(names) >= 30


# Calls that check an error is the same as eager's: (function, call) -> the exception eager raises.
RAISES = {
    ("gru", 1): RuntimeError,  # torch.stack of no steps
    ("python_argmax", 2): IndexError,
    ("checked_softmax", 2): AssertionError,
}


def test_every_call_is_valid_eager_code(cell):
    ns, _ = cell
    for name, calls in CALLS.items():
        py = ns[name].__wrapped__ if is_region(ns[name]) else ns[name]
        for i, make in enumerate(calls):
            expected = RAISES.get((name, i))
            with pytest.raises(expected) if expected else contextlib.nullcontext():
                py(*make())


def test_every_function_compiles(cell):
    ns, report = cell
    stayed = {name: reason for name, reason in report.python}
    assert not stayed, "model functions with control flow stay Python:\n" + "\n".join(
        f"{n}: {r}" for n, r in stayed.items()
    )
    assert all(is_region(ns[name]) for name in CALLS)


def test_every_function_matches_eager_bit_for_bit_with_gradients(cell):
    ns, _ = cell
    bad = []
    calls = 0
    for name, makers in CALLS.items():
        for i, make in enumerate(makers):
            status, detail = compare_call(ns[name], make(), {})
            calls += 1
            if status != MATCH:
                bad.append(f"{name} (call {i}): {status}: {detail}")
    print(f"\ncontrol-flow model code: {len(CALLS)} functions, {calls} calls, {calls - len(bad)} match eager")
    assert not bad, "\n".join(bad)
