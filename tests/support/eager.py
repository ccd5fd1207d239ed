"""One case against eager: the region and its Python body called on identical inputs, and what differs.

Each is called on fresh clones of the arguments, with the global generator reseeded
before each call, so random ops can be compared too. Compared (by
``ppy_magic.bench.compare.same_as_eager``, bit for bit): the outputs, the inputs after
the call (in-place ops), the generator's state after the call, which inputs the outputs
share memory with or are, raised exceptions (type and message; the region may add
notes), and gradients of the sum of the floating outputs with respect to every input
that requires grad. A region must also have run (its ``calls`` went up, no guard
fallback). When something differs, eager is called again a few times: if it disagrees
with itself, the case is NONDETERMINISTIC rather than the region's MISMATCH.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ppy_magic.bench.compare import same_as_eager
from tests.support.outcomes import MATCH, MISMATCH, NO_RUN, NONDETERMINISTIC, first_line

SEED = 1234  # the global generator's seed before each of the two calls
# Extra eager calls before a difference is blamed on the region. Only a difference pays for them, and
# a nondeterministic kernel usually shows itself in the first few; but in this harness LAPACK's gelsy
# (torch.linalg.lstsq) gives one result in ~97% of calls, so 20 calls missed its others about half the
# time when the region drew one of them (a false MISMATCH); 200 miss them less than 1% of the time.
EAGER_RETRIES = 200


@dataclass
class _Run:
    value: Any = None
    error: BaseException | None = None
    args: Any = None  # the (cloned) arguments after the call
    rng: torch.Tensor | None = None


def clone_tree(v: Any) -> Any:
    """Fresh copies of every tensor in `v`, with the same strides (when dense) and requires_grad."""
    if isinstance(v, torch.Tensor):
        c = v.detach().clone()
        return c.requires_grad_() if v.requires_grad else c
    if isinstance(v, list):
        return [clone_tree(x) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(clone_tree(x) for x in v)
    if isinstance(v, dict):
        return {k: clone_tree(x) for k, x in v.items()}
    return v


def tensors_in(v: Any) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in tensors_in(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in tensors_in(x)]
    return []


def _call(f: Callable, args: tuple, kwargs: dict) -> _Run:
    args, kwargs = clone_tree(args), clone_tree(kwargs)
    run = _Run(args=(args, kwargs))
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run.value = f(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - compared with eager's
            run.error = exc
    run.rng = torch.get_rng_state()
    return run


def compare_call(f: Any, args: tuple = (), kwargs: dict | None = None, *, grad: bool = True) -> tuple[str, str]:
    """Call region `f` and ``f.__wrapped__`` on the same inputs; (status, what differed)."""
    kwargs = kwargs or {}
    calls, fallbacks = f.calls, f.fallbacks
    region = _call(f, args, kwargs)
    ran = f.calls == calls + 1 and f.fallbacks == fallbacks
    fell_back = f.fallbacks != fallbacks
    eager = _call(f.__wrapped__, args, kwargs)
    diffs = _diff_runs(region, eager)
    if not diffs and grad:
        diffs = _diff_grads(region, eager)
    if diffs:
        # Some kernels differ from call to call (LAPACK's gelsy depends on buffer alignment): eager is
        # asked again, up to EAGER_RETRIES times, before a difference counts as the region's.
        for _ in range(EAGER_RETRIES):
            again = _call(f.__wrapped__, args, kwargs)
            if _diff_runs(again, eager) or (grad and _diff_grads(again, _call(f.__wrapped__, args, kwargs))):
                return NONDETERMINISTIC, "eager differs from itself: " + "; ".join(diffs[:3])
        return MISMATCH, "; ".join(diffs[:5])
    if not ran:
        if fell_back:
            return NO_RUN, f"the region fell back to Python: {f.last_fallback_reason}"
        return NO_RUN, f"the region's call count went from {calls} to {f.calls}"
    return MATCH, ""


def _diff_runs(r: _Run, e: _Run) -> list[str]:
    if r.error is not None or e.error is not None:
        return _diff_errors(r.error, e.error)
    in_r, in_e = tensors_in(r.args), tensors_in(e.args)
    diffs = _differences(r.value, e.value, "result") + _differences(in_r, in_e, "inputs after the call")
    diffs += _diff_aliasing(r.value, in_r, e.value, in_e)
    if not torch.equal(r.rng, e.rng):
        diffs.append("the global generator's state after the call differs (random numbers consumed differently)")
    return diffs


def _diff_errors(r: BaseException | None, e: BaseException | None) -> list[str]:
    if r is None:
        return [f"eager raised {type(e).__name__}: {first_line(e)}; the region returned"]
    if e is None:
        return [f"the region raised {type(r).__name__}: {first_line(r)}; eager returned"]
    if type(r) is not type(e):
        return [
            f"the region raised {type(r).__name__}: {first_line(r)}; eager raised {type(e).__name__}: {first_line(e)}"
        ]
    if str(r) != str(e):
        return [f"{type(e).__name__} messages differ: region {str(r)!r} vs eager {str(e)!r}"]
    eager_notes = getattr(e, "__notes__", [])
    region_notes = getattr(r, "__notes__", [])
    if region_notes[: len(eager_notes)] != eager_notes:
        return [f"exception notes differ: region {region_notes!r} vs eager {eager_notes!r}"]
    return []


def _diff_aliasing(r_out: Any, r_in: list, e_out: Any, e_in: list) -> list[str]:
    """Which inputs each output tensor shares memory with: a view in eager must be a view in the region."""

    def pattern(out: Any, inputs: list) -> list[tuple[int, ...]]:
        ptrs = [_storage_ptr(t) for t in inputs]
        return [tuple(i for i, p in enumerate(ptrs) if p is not None and p == _storage_ptr(t)) for t in tensors_in(out)]

    a, b = pattern(r_out, r_in), pattern(e_out, e_in)
    if a != b:
        return [f"outputs share memory with inputs differently: region {a} vs eager {b}"]
    same_r = [next((i for i, t in enumerate(r_in) if t is o), None) for o in tensors_in(r_out)]
    same_e = [next((i for i, t in enumerate(e_in) if t is o), None) for o in tensors_in(e_out)]
    if same_r != same_e:  # `x.add_(y); return x` returns the very object it was given
        return [f"outputs are input objects differently: region {same_r} vs eager {same_e}"]
    return []


def _storage_ptr(t: torch.Tensor) -> int | None:
    try:
        if t.layout != torch.strided or t.untyped_storage().nbytes() == 0:
            return None
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _grad_inputs(run: _Run) -> list[torch.Tensor]:
    return [t for t in tensors_in(run.args) if t.requires_grad and t.is_leaf]


def _loss(value: Any) -> torch.Tensor | None:
    outs = [
        t
        for t in tensors_in(value)
        if t.requires_grad and t.layout == torch.strided and (t.is_floating_point() or t.is_complex())
    ]
    if not outs:
        return None
    total = None
    for t in outs:
        s = torch.view_as_real(t.resolve_conj()).sum() if t.is_complex() else t.sum()
        total = s if total is None else total + s
    return total


def _grads(run: _Run) -> tuple[Any, BaseException | None]:
    inputs = _grad_inputs(run)
    if not inputs:
        return None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            loss = _loss(run.value)
            if loss is None:
                return None, None
            return list(torch.autograd.grad(loss, inputs, allow_unused=True)), None
        except Exception as exc:  # noqa: BLE001 - compared with eager's
            return None, exc


def _diff_grads(r: _Run, e: _Run) -> list[str]:
    if r.error is not None or e.error is not None:
        return []
    gr, err_r = _grads(r)
    ge, err_e = _grads(e)
    if err_r is not None or err_e is not None:
        return [f"backward: {d}" for d in _diff_errors(err_r, err_e)]
    if gr is None and ge is None:
        return []
    return _differences(gr, ge, "gradients")


def _differences(got: Any, want: Any, where: str) -> list[str]:
    found = same_as_eager(got, want, where)
    return [] if found is None else [found]
