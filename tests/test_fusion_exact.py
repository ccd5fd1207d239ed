"""Exact fusion (issue 25): ``ppy_fused.h``'s ops and chains give eager's bits, on a CI-sized sample.

``python -m benchmarks.fusion_exact`` is the exhaustive run (every float32 for each unary op); this
is a sample of it that fails if any fused op drifts from eager: a few million float32 bit patterns
per unary op along both of eager's paths and every bfloat16 and float16 pattern, ranges of
consecutive patterns where formulas are delicate, lengths around every vector step and chunk
boundary with 1 and 2 threads, special and NaN pairs. One build.
"""

from __future__ import annotations

import pytest
import torch

from tests.support import fusion

pytestmark = pytest.mark.skipif(
    torch.backends.cpu.get_cpu_capability() != "AVX512",
    reason="ppy_fused.h's formulas are eager's AVX512 kernels'",
)

# Consecutive bit patterns (start, count): subnormals, around 1.0, where exp overflows and underflows,
# where tanh saturates, the infinities and the NaNs after them, the negative side likewise.
RANGES = [
    (0x00000000, 1 << 18),
    (0x3F7F0000, 1 << 17),
    (0x42AE0000, 1 << 18),
    (0x41000000, 1 << 17),
    (0x7F7F0000, 1 << 18),
    (0x80000000, 1 << 18),
    (0xC2AE0000, 1 << 18),
    (0xC2CE0000, 1 << 17),
    (0xFF7F0000, 1 << 18),
]


@pytest.fixture(scope="module")
def ext(cache_dir):
    return fusion.build(cache_dir)


def _assert_clean(tally: fusion.Tally) -> None:
    assert tally.checked and all(v > 0 for v in tally.checked.values()), tally.checked
    bad = {k: v for k, v in tally.bad.items() if v and "[open:" not in k}
    assert not bad, bad


@pytest.mark.parametrize("name", list(fusion.UNARY))
def test_unary_random_bits(ext, name):
    g = torch.Generator().manual_seed(list(fusion.UNARY).index(name))
    bits = torch.randint(-(1 << 31), (1 << 31) - 1, ((1 << 21) - 32,), generator=g, dtype=torch.int32)
    x = torch.cat([bits.view(torch.float32), fusion.special_values()])
    x = torch.cat([x, torch.zeros(-x.numel() % 32)])  # a multiple of the vector step: no tail
    tally = fusion.Tally.empty()
    fusion.check_unary_bits(ext, x, tally, [name])
    _assert_clean(tally)


@pytest.mark.parametrize("name", list(fusion.UNARY))
def test_unary_bit_ranges(ext, name):
    tally = fusion.Tally.empty()
    for start, count in RANGES:
        signed = start - (1 << 32) if start >= 1 << 31 else start
        x = (torch.arange(count, dtype=torch.int64) + signed).to(torch.int32).view(torch.float32)
        fusion.check_unary_bits(ext, x, tally, [name])
    _assert_clean(tally)


@pytest.mark.parametrize("dtype", fusion.REDUCED, ids=str)
def test_reduced_every_pattern(ext, dtype):
    tally = fusion.Tally.empty()
    fusion.check_reduced_unary(ext, dtype, tally, torch.Generator().manual_seed(0), full=False)
    _assert_clean(tally)


def test_widening_bfloat16_is_eagers_float(ext):
    tally = fusion.Tally.empty()
    fusion.check_widen(ext, tally, torch.Generator().manual_seed(0))
    _assert_clean(tally)
    assert tally.checked["float() of bfloat16 (vector body)"] == 1 << 16


def test_lengths_and_threads(ext):
    tally = fusion.Tally.empty()
    fusion.check_lengths(ext, fusion.boundary_lengths(full=False), (1, 2), torch.Generator().manual_seed(0), tally)
    _assert_clean(tally)
    refused = [k for k in tally.checked if "refused" in k]
    assert refused == [f"{fusion.REFUSING_CHAIN}: refused (2t)"]  # only where gelu's chunks differ


def test_special_and_nan_pairs(ext):
    tally = fusion.Tally.empty()
    fusion.check_special_pairs(ext, tally)
    fusion.check_nan_pairs(ext, tally)
    _assert_clean(tally)


def test_refusing_differing_chunks_is_needed(ext):
    # 20000 elements on 2 threads: gelu's grain (numel / threads) makes two chunks with tails at
    # 9984..9999 and 19984..19999; sigmoid's (32768) runs serially, all vector body. Put values where
    # sigmoid's two formulas differ there: fusing at gelu's chunks must then differ from eager.
    n, lanes = 20000, list(range(9984, 10000)) + list(range(19984, 20000))
    g = torch.Generator().manual_seed(0)
    c = torch.randn(1 << 14, generator=g) * 3
    strided = torch.empty(2 * c.numel())[::2]
    strided.copy_(c)
    gelu_tail = fusion.gelu_tanh(strided).contiguous()  # gelu's scalar formula, as in its tail
    g_strided = torch.empty(2 * c.numel())[::2]
    g_strided.copy_(gelu_tail)
    differ = torch.sigmoid(gelu_tail).view(torch.int32) != torch.sigmoid(g_strided).view(torch.int32)
    picks = c[differ][: len(lanes)]
    assert picks.numel() == len(lanes)
    x = torch.randn(n, generator=g)
    x[lanes] = picks
    k = list(fusion.CHAINS).index(fusion.REFUSING_CHAIN)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        eager = torch.sigmoid(fusion.gelu_tanh(x))
        assert ext.chain(k, x, x, False).numel() == 0  # refused
        forced = ext.chain(k, x, x, True)
    finally:
        torch.set_num_threads(before)
    assert fusion.mismatches(forced, eager) > 0
    assert fusion.mismatches(forced[: lanes[0]], eager[: lanes[0]]) == 0  # only the tails differ
