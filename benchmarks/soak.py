"""Soak: a million region calls, a hundred thousand raising calls and fallbacks, eight threads on one region.

Every call is checked against eager PyTorch: outputs bit for bit (``torch.equal``
against eager's output for the same inputs, computed once), raising calls for
the same exception type and message, fallbacks (a tensor subclass argument: the
guard sends the call to the Python body) for eager's result and one counted
fallback each. The resident set size (``VmRSS``) is read after a warm-up and
after each phase, with the garbage collector run first; what a leak would look
like is RSS that grows with the number of calls.

    python -m benchmarks.soak [--scale 0.1]

Prints each phase's calls, seconds, mismatches and RSS change, then the totals
against the goals: RSS growth < 1 MB, 0 mismatches. Exits 1 if a goal is missed.
"""

from __future__ import annotations

import argparse
import gc
import linecache
import sys
import threading
import time

import torch

from ppy_magic import backend, explain, pipeline

SOURCE = """\
import torch
import ppy


@ppy.opt(3)
def layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b)
"""
FILENAME = "<soak>"
RSS_GOAL_BYTES = 1_000_000


class Logged(torch.Tensor):
    """A tensor subclass: regions leave it to the Python body (a counted fallback)."""


def rss_bytes() -> int:
    gc.collect()
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def compile_layer():
    namespace = {"__name__": "__soak__"}
    linecache.cache[FILENAME] = (len(SOURCE), None, SOURCE.splitlines(True), FILENAME)
    binder = pipeline.compile_source(SOURCE, namespace, FILENAME, cache=backend.shared_cache())
    pipeline.run(compile(SOURCE, FILENAME, "exec"), namespace, binder)
    layer = namespace["layer"]
    if not getattr(layer, "__ppy_region__", False):
        sys.exit(f"soak: the layer did not compile:\n{binder.report.summary()}")
    return layer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every count (default 1: 10^6 calls)")
    parser.add_argument("--threads", type=int, default=8, help="threads calling one region (default 8)")
    args = parser.parse_args(argv)
    n_calls, n_raising, n_fallbacks = (max(1, int(n * args.scale)) for n in (1_000_000, 100_000, 100_000))
    per_thread = max(1, int(25_000 * args.scale))
    torch.set_num_threads(1)

    layer = compile_layer()
    eager = layer.__wrapped__
    g = torch.Generator().manual_seed(0)
    inputs = [(torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g), torch.randn(32, generator=g))]
    inputs += [(torch.randn(4, 32, generator=g), *inputs[0][1:]) for _ in range(7)]
    expected = [eager(*args) for args in inputs]
    bad = (torch.randn(8, 31, generator=g), inputs[0][1], inputs[0][2])  # 8×31 @ 32×32: matmul raises
    try:
        eager(*bad)
    except RuntimeError as exc:
        bad_error = (type(exc), str(exc))
    sub = (inputs[0][0].as_subclass(Logged), *inputs[0][1:])

    def region_calls(n: int, k: int = 0) -> int:
        wrong = 0
        for i in range(n):
            j = (i + k) % len(inputs)
            if not torch.equal(layer(*inputs[j]), expected[j]):
                wrong += 1
        return wrong

    def raising_calls(n: int) -> int:
        wrong = 0
        for _ in range(n):
            try:
                layer(*bad)
                wrong += 1
            except RuntimeError as exc:
                wrong += (type(exc), str(exc)) != bad_error
        return wrong

    def fallback_calls(n: int) -> int:
        wrong = 0
        for _ in range(n):
            out = layer(*sub)
            wrong += type(out) is not Logged or not torch.equal(out.as_subclass(torch.Tensor), expected[0])
        return wrong

    def threaded_calls(n: int) -> int:
        results = [0] * args.threads
        start = threading.Barrier(args.threads)

        def work(t: int) -> None:
            start.wait()
            results[t] = region_calls(n, t)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(results)

    # Warm-up: every path once a few thousand times, so allocator pools and caches are in place.
    warm = region_calls(5000) + raising_calls(2000) + fallback_calls(2000) + threaded_calls(500)
    base_rss = rss_bytes()
    fallbacks_before = explain(layer).fallbacks
    print(
        f"soak · relu(x @ w + b), x 8×32 or 4×32 · torch {torch.__version__} · 1 PyTorch thread · "
        f"RSS after warm-up {base_rss / 1e6:.1f} MB"
    )
    phases = [
        ("region calls", n_calls, lambda: region_calls(n_calls)),
        ("raising calls", n_raising, lambda: raising_calls(n_raising)),
        ("fallbacks", n_fallbacks, lambda: fallback_calls(n_fallbacks)),
        (f"{args.threads} threads, one region", per_thread * args.threads, lambda: threaded_calls(per_thread)),
    ]
    mismatches, before = warm, base_rss
    for label, n, run in phases:
        t0 = time.perf_counter()
        wrong = run()
        seconds = time.perf_counter() - t0
        after = rss_bytes()
        mismatches += wrong
        print(
            f"  {label:<26} {n:>10,} calls {seconds:7.1f} s  mismatches {wrong}  RSS {(after - before) / 1e6:+.2f} MB"
        )
        before = after
    counted = explain(layer).fallbacks - fallbacks_before
    if counted != n_fallbacks:
        print(f"  fallbacks counted: {counted}, expected {n_fallbacks}")
        mismatches += abs(counted - n_fallbacks)
    growth = rss_bytes() - base_rss
    ok = growth < RSS_GOAL_BYTES and mismatches == 0
    print(
        f"RSS growth {growth / 1e6:+.2f} MB (goal < {RSS_GOAL_BYTES / 1e6:.0f} MB) · mismatches {mismatches} "
        f"(goal 0) · {'goals met' if ok else 'GOAL MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
