"""Per-call cost of PyTorch functions as ATen regions at levels 1 to 4, against eager.

The cases, each timed under ``torch.no_grad()`` and with autograd recording (the
floating tensor arguments, or the model's parameters, require grad; forward only):

- the seed's layer, ``relu(x @ w + b)``: x 8×32, w 32×32, b 32;
- GPT-2's GELU (tanh form, seven element-wise ops) on 8×32 and on 1024×1024;
- a GRU cell unrolled over 32 steps (the cell of PyTorch's own RNN benchmarks,
  benchmarks/fastrnns/cells.py), state 8×32, its outputs collected in a list and
  stacked: ~600 ATen calls per call, the loop and the list kept in C++;
- a nanoGPT (2 layers, 2 heads, 32 features, vocabulary 64) in eval mode, called
  as ``model(idx)`` with B=1, T=8: every ``forward`` of its classes a region, the
  submodules run inline; eager runs the same model with its Python methods.

One PyTorch thread; every variant of a case runs interleaved round by round in
this one process, so load from other work on the machine falls on all of them
alike. The clock is this thread's CPU time (``time.thread_time``) unless
``--clock wall`` is given: on a machine shared with other work, wall time also
counts the time the thread waited for a core, which swamps differences of a few
per cent (measured here: rounds spread ±20% in wall time, ±3% in CPU time).
Each round gives one ratio per level (its time over eager's in the same round);
printed are the median per-call times and the median ratio with its spread
(lowest..highest round). Targets (no grad, level 3 / eager): seed layer ≤ 0.60,
GELU 8×32 ≤ 0.50, GELU 1024×1024 ≤ 0.85, GRU ≤ 0.6, the model ≤ 0.6; with
autograd recording, level 3 no slower than level 1. ``--compile`` adds
torch.compile of the seed layer, the GELUs and the model. ``--threads 2`` runs
everything with two PyTorch threads, on the wall clock (the calling thread's CPU
time would leave out the second thread's work).

    python -m benchmarks.call_overhead [-r ROUNDS] [--scale S] [--only NAME] [--clock cpu|wall] [--compile]
                                       [--threads N]
    python -m benchmarks.call_overhead --variants    # variants built at calls: guard cost, first-call latency
    python -m benchmarks.call_overhead --breaks      # one Python statement in a region: its cost (break_cost.py)

``--variants`` measures instead: a region with 4 values compiled in (a callable and three Nones, each
compared at every call) against one with the same ATen calls and none (goal: within the rounds' spread),
and how long the seed layer's first call takes until its variant is live, from an empty cache and from disk.

Exits 1 only when the measurement is broken (a variant fell back to Python or
differs from eager), not when a target is missed: timings are for reading.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tests.support.cells import compile_cell
from tests.support.nanogpt import GPT_SOURCE

SOURCE = """\
import math
import torch
import ppy


def layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b)


def gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gru(xs, h, w_ih, w_hh, b_ih, b_hh):
    outs = []
    for x in xs:
        gi = torch.mm(x, w_ih.t()) + b_ih
        gh = torch.mm(h, w_hh.t()) + b_hh
        i_r, i_i, i_n = gi.chunk(3, 1)
        h_r, h_i, h_n = gh.chunk(3, 1)
        resetgate = (i_r + h_r).sigmoid()
        inputgate = torch.sigmoid(i_i + h_i)
        newgate = (i_n + resetgate * h_n).tanh()
        h = newgate + inputgate * (h - newgate)
        outs.append(h)
    return torch.stack(outs)
"""
LEVELS = (1, 2, 3, 4)  # 4: fused chains (where eager runs AVX512)
FILENAME = "<call_overhead>"


@dataclass(frozen=True)
class Case:
    name: str
    function: str  # a function of SOURCE, or "gpt": the model
    make_args: Callable[[], tuple]
    number: int  # calls per round
    target: float | None  # level 3 / eager, no grad


def _randn(*shapes: tuple[int, ...]) -> Callable[[], tuple]:
    def make() -> tuple:
        g = torch.Generator().manual_seed(0)
        return tuple(torch.randn(*s, generator=g) for s in shapes)

    return make


def gru_inputs() -> tuple[torch.Tensor, ...]:
    """32 steps of a batch of 8 with 32 features; a GRU of 32 hidden features."""
    g = torch.Generator().manual_seed(0)
    scale = 32**-0.5
    return (
        torch.randn(32, 8, 32, generator=g),
        torch.randn(8, 32, generator=g),
        torch.randn(96, 32, generator=g) * scale,
        torch.randn(96, 32, generator=g) * scale,
        torch.randn(96, generator=g) * scale,
        torch.randn(96, generator=g) * scale,
    )


def gpt_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(0)),)


CASES = (
    Case("seed layer 8×32", "layer", _randn((8, 32), (32, 32), (32,)), 20_000, 0.60),
    Case("GELU-tanh 8×32", "gelu", _randn((8, 32)), 20_000, 0.50),
    Case("GELU-tanh 1024×1024", "gelu", _randn((1024, 1024)), 20, 0.85),
    Case("GRU cell over 32 steps, state 8×32", "gru", gru_inputs, 200, 0.6),
    Case("tiny GPT model(idx), B=1, T=8, eval", "gpt", gpt_inputs, 400, 0.6),
)


def cell_source() -> str:
    """The functions once per level, as one cell: ``layer_1`` is ``@ppy.opt(1)``, and so on."""
    head, _, body = SOURCE.partition("\n\n\n")
    parts = [head]
    for level in LEVELS:
        for block in body.split("\n\n\n"):
            name = block.split("def ", 1)[1].split("(", 1)[0]
            parts.append(f"@ppy.opt({level})\n" + block.replace(f"def {name}(", f"def {name}_{level}(", 1))
    return "\n\n\n".join(parts) + "\n"


def build_regions() -> dict:
    """The regions, built the way a %%ppy cell builds them (cached under PPY_CACHE_DIR)."""
    namespace, report = compile_cell(cell_source(), {"__name__": "__call_overhead__"}, FILENAME)
    missing = [n for n in namespace if n[-2:] in ("_1", "_2", "_3") and not getattr(namespace[n], "__ppy_region__", 0)]
    if missing:
        sys.exit(f"call_overhead: {', '.join(missing)} did not compile:\n{report.summary()}")
    return namespace


def gpt_models() -> dict[str, torch.nn.Module]:
    """The model with its forwards compiled at each level, and as plain Python (eager); the same weights."""
    models = {}
    for level in (*LEVELS, None):
        module = f"__call_overhead_gpt_{level or 'eager'}__"
        namespace = types.ModuleType(module)
        sys.modules[module] = namespace  # dataclasses look their module up
        if level is None:  # a plain cell: @ppy.opt only marks
            exec(compile(GPT_SOURCE, "<call_overhead_gpt_eager>", "exec"), namespace.__dict__)
        else:
            _, report = compile_cell(
                GPT_SOURCE, namespace.__dict__, f"<call_overhead_gpt_{level}>", level_override=level
            )
            if report.python:
                sys.exit(f"call_overhead: the model did not compile at level {level}:\n{report.summary()}")
        torch.manual_seed(0)
        config = namespace.GPTConfig(block_size=8, vocab_size=64, dropout=0.0)
        models[f"level {level}" if level else "eager"] = namespace.GPT(config).eval()
    return models


def make_loop(n_args: int) -> Callable:
    # Like timeit: a loop compiled for this arity, no fn(*args) per call.
    params = "".join(f", a{i}" for i in range(n_args))
    source = f"def loop(n, fn{params}):\n    for _ in range(n):\n        fn({params[2:]})\n"
    scope: dict = {}
    exec(compile(source, "<call_overhead loop>", "exec"), scope)
    return scope["loop"]


CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}


def time_round(loop: Callable, fn: Callable, args: tuple, number: int, clock: Callable[[], float]) -> float:
    gc.disable()
    try:
        t0 = clock()
        loop(number, fn, *args)
        return (clock() - t0) / number
    finally:
        gc.enable()


def same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):  # the model's (logits, loss): loss is None without targets
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is b
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.requires_grad == b.requires_grad
        and torch.equal(a, b)
    )


def variants_of(case: Case, ns: dict, models: dict) -> dict[str, Callable]:
    if case.function == "gpt":
        return dict(models)
    out: dict[str, Callable] = {f"level {lv}": ns[f"{case.function}_{lv}"] for lv in LEVELS}
    out["eager"] = ns[f"{case.function}_1"].__wrapped__
    return out


def _regions(fn: Callable) -> list:
    """The regions a variant calls: the function, or every compiled forward of a model."""
    if getattr(fn, "__ppy_region__", False):
        return [fn]
    if isinstance(fn, torch.nn.Module):
        return list({id(f): f for m in fn.modules() if getattr(f := type(m).forward, "__ppy_region__", False)}.values())
    return []


def measure_case(
    case: Case, variants: dict, grad: bool, rounds: int, scale: float, compiled: Callable | None, clock: Callable
) -> tuple[dict, bool]:
    args = tuple(a.requires_grad_(grad) if a.is_floating_point() else a for a in case.make_args())
    for model in variants.values():
        if isinstance(model, torch.nn.Module):
            model.requires_grad_(grad)
    eager = variants["eager"]
    variants = {k: v for k, v in variants.items() if k != "eager"} | {"eager": eager}
    if compiled is not None:
        variants["torch.compile"] = compiled
    number = max(1, int(case.number * scale))
    loop = make_loop(len(args))
    broken = False
    with torch.set_grad_enabled(grad):
        expected = eager(*args)
        for label, fn in variants.items():
            out = fn(*args)  # also the warm-up call (torch.compile compiles here)
            if not same(out, expected):
                print(f"  {label}: OUTPUT DIFFERS FROM EAGER")
                broken = True
            loop(max(1, number // 10), fn, *args)
        before = {(label, id(r)): (r, r.fallbacks) for label, fn in variants.items() for r in _regions(fn)}
        times: dict[str, list[float]] = {label: [] for label in variants}
        for _ in range(rounds):
            for label, fn in variants.items():
                times[label].append(time_round(loop, fn, args, number, clock))
    for (label, _), (r, fallbacks) in before.items():
        if r.fallbacks != fallbacks:
            print(f"  {label}: fell back to Python ({r.last_fallback_reason})")
            broken = True
    return times, broken


def report(case: Case, grad: bool, times: dict) -> dict[str, float]:
    mode = "autograd recording" if grad else "torch.no_grad()"
    eager = times["eager"]
    print(f"{case.name} · {mode} · median of {len(eager)} rounds")
    ratios = {}
    for label, ts in times.items():
        line = f"  {label:<14} {statistics.median(ts) * 1e6:10.2f} µs/call"
        if label != "eager":
            per_round = [t / e for t, e in zip(ts, eager, strict=True)]
            ratios[label] = statistics.median(per_round)
            line += f"   /eager {ratios[label]:.2f} ({min(per_round):.2f}..{max(per_round):.2f})"
        print(line)
    l1, l3 = times["level 1"], times["level 3"]
    l3_rounds = [a / b for a, b in zip(l3, l1, strict=True)]
    l3_over_l1 = statistics.median(l3_rounds)
    if not grad and case.target is not None:
        verdict = "met" if ratios["level 3"] <= case.target else "MISSED"
        print(f"  level 3/eager {ratios['level 3']:.2f}: target ≤ {case.target:.2f} {verdict}")
    elif grad:
        # Level 3 runs level 2's code here: the rounds' own spread says whether a median above 1 is a difference.
        lo, hi = min(l3_rounds), max(l3_rounds)
        if l3_over_l1 <= 1.0:
            verdict = "met"
        elif lo <= 1.0:
            verdict = "equal within the rounds' spread"
        else:
            verdict = "MISSED: slower in every round"
        print(f"  level 3/level 1 {l3_over_l1:.2f} ({lo:.2f}..{hi:.2f}): target ≤ 1.00 {verdict}")
    return ratios


VARIANTS_SOURCE = """\
import torch
import ppy


@ppy.opt(3)
def plain(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = x @ w
    y = y + b
    y = torch.relu(y)
    return y


@ppy.opt(3)
def specialised(x, w, b, act, extra, shift, gain):
    y = x @ w
    y = y + b
    if extra is not None:
        y = y + extra
    if shift is not None:
        y = y - shift
    if gain is not None:
        y = y * gain
    y = act(y)
    return y
"""


def measure_variants(rounds: int, scale: float, clock: Callable[[], float]) -> int:
    """A region with 4 values compiled in (a callable and three Nones, each compared at every call) against
    the same body, written the same way, with none; and how long the seed layer's first call takes to make it
    a region."""
    import tempfile

    import ppy_magic
    from ppy_magic import backend, pipeline

    ns, _ = compile_cell(VARIANTS_SOURCE, filename="<call_overhead variants>")
    x, w, b = torch.randn(8, 32), torch.randn(32, 32), torch.randn(32)
    spec_args = (x, w, b, torch.relu, None, None, None)
    ns["specialised"](*spec_args)
    ppy_magic.wait()
    plain, spec = ns["plain"], ns["specialised"]
    assert spec.__ppy_region__ and torch.equal(plain(x, w, b), spec(*spec_args))
    number = max(1, int(20000 * scale))
    loops = {3: make_loop(3), 7: make_loop(7)}
    times: dict[str, list[float]] = {"plain": [], "specialised": []}
    ratios = []
    with torch.no_grad():
        for _ in range(rounds):
            t_plain = time_round(loops[3], plain, (x, w, b), number, clock)
            t_spec = time_round(loops[7], spec, spec_args, number, clock)
            times["plain"].append(t_plain)
            times["specialised"].append(t_spec)
            ratios.append(t_spec / t_plain)
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    print("variants: the guards of a specialised region (seed layer, no_grad, µs per call)")
    print(f"  without specialised values: {med['plain']:.2f}")
    print(
        f"  with 4 compiled in (a callable, three Nones): {med['specialised']:.2f}"
        f"  ratio {statistics.median(ratios):.3f} ({min(ratios):.3f}..{max(ratios):.3f} over {rounds} rounds)"
    )
    spread = (min(times["plain"]) * 1e6, max(times["plain"]) * 1e6)
    print(f"  the plain region's own spread over the rounds: {spread[0]:.2f}..{spread[1]:.2f}")
    print("variants: the seed layer's first call, its activation passed in (time until the region is live)")
    cold = backend.Cache(tempfile.mkdtemp(prefix="ppy-first-call-"))
    for label, cache in (("cold (an empty cache)", cold), ("warm (the same variant on disk)", cold)):
        fresh: dict = {"__name__": "__first_call__"}
        binder = pipeline.compile_source(FIRST_CALL_SOURCE, fresh, "<call_overhead first call>", cache=cache)
        pipeline.run(compile(FIRST_CALL_SOURCE, "<call_overhead first call>", "exec"), fresh, binder)
        f = fresh["seed_at_call"]
        t0 = time.perf_counter()
        first = f(x, w, b, torch.relu)
        t_call = time.perf_counter() - t0
        assert ppy_magic.wait(timeout=600)
        live = time.perf_counter() - t0
        assert f.__ppy_region__ and torch.equal(f(x, w, b, torch.relu), first)
        print(f"  {label}: the first call returned in {t_call * 1e3:.1f} ms (Python); region live after {live:.2f} s")
    return 0


FIRST_CALL_SOURCE = """\
import torch
import ppy


@ppy.opt(3)
def seed_at_call(x, w, b, act):
    return act(x @ w + b)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-r", "--repeat", type=int, default=9, help="rounds (default 9)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the calls per round (default 1)")
    parser.add_argument("--only", help="run only the cases whose name contains this text")
    parser.add_argument("--no-grad-only", action="store_true", help="leave out the autograd-recording runs")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="thread CPU time (default) or wall time")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="add torch.compile of the seed layer, the GELUs and the model (slow to build)",
    )
    parser.add_argument("--threads", type=int, default=1, help="PyTorch threads (default 1; more: wall clock)")
    parser.add_argument(
        "--variants",
        action="store_true",
        help="only the variants built at calls: the guards of 4 specialised values, and the first call's latency",
    )
    parser.add_argument(
        "--breaks", action="store_true", help="only the cost of a break: one Python statement in a region"
    )
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    if args.threads > 1 and args.clock == "cpu":
        args.clock = "wall"  # thread_time counts the calling thread alone
    if args.breaks:
        from benchmarks.break_cost import measure_breaks

        return measure_breaks(args.repeat, args.scale, CLOCKS[args.clock])
    if args.variants:
        return measure_variants(args.repeat, args.scale, CLOCKS[args.clock])
    cases = [c for c in CASES if not args.only or args.only in c.name]
    ns = build_regions() if any(c.function != "gpt" for c in cases) else {}
    models = gpt_models() if any(c.function == "gpt" for c in cases) else {}
    print(
        f"torch {torch.__version__} · {args.threads} thread{'s' if args.threads > 1 else ''} · {args.clock} time · "
        "variants interleaved round by round in one process"
    )
    broken = False
    for case in cases:
        variants = variants_of(case, ns, models)
        for grad in (False,) if args.no_grad_only else (False, True):
            compiled = None
            if args.compile and case.function in ("layer", "gelu", "gpt") and not grad:
                compiled = torch.compile(variants["eager"])
            times, bad = measure_case(case, variants, grad, args.repeat, args.scale, compiled, CLOCKS[args.clock])
            broken |= bad
            report(case, grad, times)
    if args.compile:
        # Drop torch.compile's caches now: left to interpreter shutdown, dynamo's weakref
        # callbacks print an ignored KeyError (torch 2.13).
        torch._dynamo.reset()
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
