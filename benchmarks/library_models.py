"""Per-call cost of unmodified public library models compiled with ``ppy_magic.compile(model)``, against eager
and ``torch.compile``.

The models are those of ``tests/support/library_models.py`` (transformers' GPT-2, Llama, BERT, ViT, Mixtral,
T5, BART, Qwen2, GPT-NeoX, Phi, Qwen2-MoE; diffusers' UNet2DModel, UNet2DConditionModel, AutoencoderKL;
x-transformers' decoder and encoder), tiny (32 features, 2 layers, sequences of 8, images of 8-16 pixels),
each called as ``model(*args, **kwargs)`` in eval mode under ``torch.no_grad()`` with B=1, without the
labels only a loss needs. Per model: one copy compiled, one eager, one under ``torch.compile`` (the same
weights); the compiled copy is checked bit for bit against eager first, torch.compile's with
``torch.testing.assert_close`` (not for a model that samples in eval mode: torch.compile draws its own numbers).

One PyTorch thread; the variants run interleaved round by round in this one process, so load from other
work on the machine falls on all of them alike. The clock is this thread's CPU time (``time.thread_time``)
unless ``--clock wall`` is given. Each round gives one ratio per variant (its time over eager's in the same
round); printed are the median per-call times and the median ratio with its spread (lowest..highest round).
Also printed: the Python calls (frames entered) of one compiled forward over eager's.

Goals: compiled / eager ≤ 0.70 on every decoder-only model; Python calls ≤ 10% of eager's on every model.

    python -m benchmarks.library_models [--models gpt2,llama] [-r ROUNDS] [--seconds S] [--clock cpu|wall]
                                        [--no-torch-compile]

Exits 1 only when the measurement is broken (the compiled model differs from eager, or ``compile`` raised),
not when a goal is missed: timings are for reading. Where torch.compile fails for a model, its column says so.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tests.support import library_models as L

RATIO_GOAL = 0.70  # compiled / eager, decoder-only models
CALLS_GOAL = 0.10  # Python calls, compiled / eager
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}
EAGER, COMPILED, TORCH_COMPILE = "eager", "ppy compile", "torch.compile"


@dataclass
class Row:
    name: str
    decoder: bool
    times: dict[str, list[float]] = field(default_factory=dict)  # per variant, seconds per call per round
    calls: L.CallShare | None = None
    notes: dict[str, str] = field(default_factory=dict)  # per variant: why it has no times
    broken: bool = False

    def ratio(self, label: str) -> tuple[float, float, float] | None:
        if label not in self.times or EAGER not in self.times:
            return None
        rounds = [t / e for t, e in zip(self.times[label], self.times[EAGER], strict=True)]
        return statistics.median(rounds), min(rounds), max(rounds)


def _loop(number: int, fn: Callable, args: tuple, kwargs: dict) -> None:
    for _ in range(number):
        fn(*args, **kwargs)


def time_round(fn: Callable, args: tuple, kwargs: dict, number: int, clock: Callable[[], float]) -> float:
    gc.disable()
    try:
        t0 = clock()
        _loop(number, fn, args, kwargs)
        return (clock() - t0) / number
    finally:
        gc.enable()


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0][:80]}" if lines else type(err).__name__


def _close(got: Any, want: Any) -> str | None:
    """None when torch.compile's output is close to eager's (its own promise), else what is not."""
    g = [v for _, v in L.leaves(got) if isinstance(v, torch.Tensor)]
    w = [v for _, v in L.leaves(want) if isinstance(v, torch.Tensor)]
    if len(g) != len(w):
        return f"{len(g)} tensors vs eager's {len(w)}"
    try:
        for a, b in zip(g, w, strict=True):
            torch.testing.assert_close(a, b)
    except AssertionError as err:
        return str(err).strip().splitlines()[0]
    return None


def measure(entry: L.LibraryModel, rounds: int, seconds: float, clock: Callable, with_torch_compile: bool) -> Row:
    import ppy_magic
    import ppy_magic.variants

    row = Row(entry.name, entry.decoder)
    model, _, _ = entry.build()
    args, kwargs = entry.eval_inputs()
    eager = copy.deepcopy(model)
    variants: dict[str, Callable] = {EAGER: eager}
    compile_fn = getattr(ppy_magic, "compile", None)
    if compile_fn is None:
        row.notes[COMPILED] = "ppy_magic.compile is missing"
    else:
        try:
            variants[COMPILED] = compile_fn(model)
        except Exception as err:  # noqa: BLE001 - reported in its column
            row.notes[COMPILED] = f"compile raised {_first_line(err)}"
            row.broken = True
    if with_torch_compile:
        variants[TORCH_COMPILE] = torch.compile(copy.deepcopy(eager))

    with torch.no_grad(), ppy_magic.variants.blocking():
        torch.manual_seed(0)  # a model may sample in eval mode too (the VAE's posterior): compared calls seed alike
        want = eager(*args, **kwargs)
        for label in list(variants):
            fn = variants[label]
            try:
                if label == COMPILED:
                    L.settle(fn, args, kwargs)  # a compiled model splits and builds over its first calls
                for _ in range(3):  # torch.compile compiles here
                    torch.manual_seed(0)
                    got = fn(*args, **kwargs)
                    if label == COMPILED and (diff := L.output_difference(got, want)) is not None:
                        row.notes[label] = f"DIFFERS FROM EAGER: {diff}"
                        row.broken = True
                        break
                ppy_magic.wait()
            except Exception as err:  # noqa: BLE001 - torch.compile may not take a model: its column says so
                row.notes[label] = f"raised {_first_line(err)}"
                row.broken |= label == COMPILED
            # torch.compile draws its own random numbers (inductor's RNG): a model sampling in eval is not compared
            compare = label == TORCH_COMPILE and label not in row.notes and not entry.random_in_eval
            if compare and (diff := _close(got, want)) is not None:
                row.notes[label] = f"not close to eager: {diff}"
            if label in row.notes and label != EAGER:
                del variants[label]
        t0 = time.perf_counter()
        _loop(3, eager, args, kwargs)
        per_call = max((time.perf_counter() - t0) / 3, 1e-6)
        number = max(3, int(seconds / per_call))
        for fn in variants.values():
            _loop(max(1, number // 10), fn, args, kwargs)
        row.times = {label: [] for label in variants}
        for _ in range(rounds):
            for label, fn in variants.items():
                row.times[label].append(time_round(fn, args, kwargs, number, clock))
    if COMPILED in variants:
        row.calls = L.python_call_share(variants[COMPILED], args, kwargs, eager=eager)
    return row


def _cell(row: Row, label: str) -> str:
    if label in row.notes:
        return row.notes[label]
    r = row.ratio(label)
    us = statistics.median(row.times[label]) * 1e6
    return f"{us:9.1f} µs  {r[0]:.2f} ({r[1]:.2f}..{r[2]:.2f})"


def report(rows: list[Row], with_torch_compile: bool) -> None:
    width = max(len(r.name) for r in rows)
    labels = [COMPILED] + ([TORCH_COMPILE] if with_torch_compile else [])
    head = f"{'model':<{width}}  dec  {'eager':>12}  " + "  ".join(f"{lb + ' /eager':<30}" for lb in labels)
    print(head + "  Python calls")
    for row in rows:
        eager = f"{statistics.median(row.times[EAGER]) * 1e6:9.1f} µs" if EAGER in row.times else "—"
        cells = "  ".join(f"{_cell(row, lb):<30}" for lb in labels)
        calls = f"{row.calls.compiled}/{row.calls.eager} = {row.calls.share:.1%}" if row.calls else "—"
        print(f"{row.name:<{width}}  {'yes' if row.decoder else 'no ':<3}  {eager:>12}  {cells}  {calls}")
    print(f"\ngoals: {COMPILED}/eager ≤ {RATIO_GOAL:.2f} on every decoder model; Python calls ≤ {CALLS_GOAL:.0%}")
    for row in rows:
        verdicts = []
        r = row.ratio(COMPILED)
        if row.decoder:
            if r is None:
                verdicts.append("time: not measured")
            else:
                verdicts.append(f"time {r[0]:.2f}: {'met' if r[0] <= RATIO_GOAL else 'MISSED'}")
        if row.calls is None:
            verdicts.append("calls: not measured")
        else:
            verdicts.append(f"calls {row.calls.share:.1%}: {'met' if row.calls.share <= CALLS_GOAL else 'MISSED'}")
        print(f"  {row.name:<{width}}  " + "; ".join(verdicts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help=f"comma-separated names (default: all of {', '.join(L.BY_NAME)})")
    parser.add_argument("-r", "--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--seconds", type=float, default=0.2, help="eager time per round and variant (default 0.2)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="thread CPU time (default) or wall time")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out (slow to build)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",")] if args.models else list(L.BY_NAME)
    unknown = [n for n in names if n not in L.BY_NAME]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(L.BY_NAME)}")

    torch.set_num_threads(1)
    with_tc = not args.no_torch_compile
    print(
        f"torch {torch.__version__} · 1 thread · {args.clock} time · eval, no_grad, B=1 · "
        "variants interleaved round by round in one process"
    )
    rows = []
    for name in names:
        print(f"  {name} ...", flush=True)
        rows.append(measure(L.entry(name), args.repeat, args.seconds, CLOCKS[args.clock], with_tc))
    print()
    report(rows, with_tc)
    if with_tc:
        # Drop torch.compile's caches now: left to interpreter shutdown, dynamo's weakref
        # callbacks print an ignored KeyError (torch 2.13).
        torch._dynamo.reset()
    return 1 if any(r.broken for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
