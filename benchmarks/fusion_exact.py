"""Exact fusion's exhaustive check (issue 25): ``ppy_fused.h`` against eager, bit for bit.

    python -m benchmarks.fusion_exact [--sample N] [--ops neg,sigmoid,...] [--random N]

1. Every unary op over all 2^32 float32 bit patterns (256 chunks of 2^24; ``--sample N`` takes N
   chunks spread over the range), along both of eager's paths: the vector body (a contiguous chunk)
   and the scalar formula of the tail (a strided chunk runs it for every element). 1 thread.
   The same for bfloat16 and float16 over all 2^16 patterns, and at lengths around their steps;
   and the cast ``x.float()`` of every bfloat16 pattern as a chain reads it (float16 is refused).
2. Every op, binary form (tensor-tensor, tensor-number, number-tensor) and chain at lengths around
   every vector step and chunk boundary, with 1 and 2 threads, on random and special values.
3. Binary ops over every pair of special values, over two NaNs at every tail length, and over
   ``--random`` random pairs.

Bits are compared as int32, so a NaN must come out with eager's sign and payload. Prints one row per
check (inputs, mismatches) and the time; exits 1 if a check that must hold has a mismatch. Rows
marked "[open: ...]" are the known divergent cases (docs/fusion.md), reported and not counted.
"""

from __future__ import annotations

import argparse
import time

import torch

from tests.support import fusion

CHUNK = 1 << 24
CHUNKS = (1 << 32) // CHUNK


def exhaustive_unary(ext, chunks: list[int], names: list[str], tally: fusion.Tally) -> None:
    base = torch.arange(CHUNK, dtype=torch.int64)
    for c in chunks:
        start = c * CHUNK
        patterns = ((base + start + (1 << 31)) % (1 << 32) - (1 << 31)).to(torch.int32)
        fusion.check_unary_bits(ext, patterns.view(torch.float32), tally, names)


def random_binary(ext, n: int, gen: torch.Generator, tally: fusion.Tally) -> None:
    for _ in range(max(1, n // CHUNK)):
        m = min(n, CHUNK)
        a, b = fusion.random_floats(m, gen), fusion.random_floats(m, gen)
        both_nan = a.isnan() & b.isnan()
        for k, (name, fn) in enumerate(fusion.BINARY.items()):
            got, want = ext.binary(k, a, b, None, False), fn(a, b)
            if name in fusion.NAN_PAIR_OPEN:
                fusion._add_split(tally, f"{name} random pairs", got, want, both_nan)
            else:
                tally.add(f"{name} random pairs", m, fusion.mismatches(got, want))


def render(tally: fusion.Tally) -> str:
    width = max(len(k) for k in tally.checked) + 2
    lines = [f"{'check':<{width}}{'inputs':>16}{'mismatches':>12}"]
    for name, count in tally.checked.items():
        lines.append(f"{name:<{width}}{count:>16,}{tally.bad[name]:>12,}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=CHUNKS, help=f"chunks of 2^24 patterns per unary op (of {CHUNKS})")
    ap.add_argument("--ops", default=",".join(fusion.UNARY), help="unary ops to check exhaustively")
    ap.add_argument("--random", type=int, default=1 << 26, help="random pairs per binary op")
    args = ap.parse_args(argv)
    names = [n for n in args.ops.split(",") if n]
    unknown = sorted(set(names) - set(fusion.UNARY))
    if unknown:
        ap.error(f"unknown ops: {', '.join(unknown)}")
    t0 = time.perf_counter()
    ext = fusion.build()
    capability = torch.backends.cpu.get_cpu_capability()
    if not ext.capability_matches():
        print(f"eager runs {capability}: the fused formulas are AVX512's; nothing to check")
        return 1
    print(f"built in {time.perf_counter() - t0:.0f} s; torch {torch.__version__}, {capability}")
    step = max(1, CHUNKS // max(1, min(args.sample, CHUNKS)))
    chunks = list(range(0, CHUNKS, step))[: args.sample]
    tally = fusion.Tally.empty()
    gen = torch.Generator().manual_seed(0)
    torch.set_num_threads(1)
    t1 = time.perf_counter()
    exhaustive_unary(ext, chunks, names, tally)
    t_unary = time.perf_counter() - t1
    t2 = time.perf_counter()
    for dtype in fusion.REDUCED:
        fusion.check_reduced_unary(ext, dtype, tally, gen)
    fusion.check_widen(ext, tally, gen)
    fusion.check_lengths(ext, fusion.boundary_lengths(), (1, 2), gen, tally)
    fusion.check_special_pairs(ext, tally)
    fusion.check_nan_pairs(ext, tally)
    random_binary(ext, args.random, gen, tally)
    t_rest = time.perf_counter() - t2
    print(render(tally))
    covered = len(chunks) * CHUNK
    print(
        f"\nunary ops: {covered:,} bit patterns each ({covered / (1 << 32):.1%} of all) in {t_unary:.0f} s; "
        f"lengths, pairs and random pairs in {t_rest:.0f} s; 1 thread for the exhaustive part"
    )
    bad = tally.total_bad()
    print("every check that must hold holds" if bad == 0 else f"{bad:,} mismatches")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
