"""Level 4: chains of element-wise float32 ops run as one fused pass, bit for bit eager's, or op by op.

Each function below is compiled at level 4 and compared with eager, bitwise (NaN payloads and signs
too), at lengths around the vector step and the chunk boundaries, with 1 and 2 threads, on random bit
patterns and special values; then the cases a chain must refuse (a non-contiguous, broadcast,
double or grad-recording operand, a NaN Python number, chunks that disagree), which must still be
eager's bits, through the ops one by one. ``explain`` names each chain and why an op stays out.
Skipped where eager's kernels are not AVX512 (the fused formulas are those; level 4 is level 3 there).
"""

from __future__ import annotations

import contextlib
import math
import os

import pytest
import torch
import torch.nn.functional as F

import ppy_magic
from ppy_magic.backend import fusion
from tests.support import fusion as checks
from tests.support.cells import compile_cell, headers_gcc_reads

pytestmark = pytest.mark.skipif(not fusion.available(), reason="eager's kernels here are not AVX512's")

SOURCE = """
import math
import torch
import torch.nn.functional as F
import ppy


@ppy.opt(4)
def gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


@ppy.opt(4)
def mixed(x: torch.Tensor, y: torch.Tensor, s: float, k: int) -> torch.Tensor:
    a = 1 - x
    b = 2 / y
    c = x**2 - s * y
    d = torch.relu(a + b + c).sigmoid() * k
    return d + F.gelu(x, approximate="tanh") * torch.exp(-y.abs()) - F.silu(x.neg()) / 3


@ppy.opt(4)
def two_grains(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(F.gelu(x, approximate="tanh")) * 2.0


@ppy.opt(4)
def shared(x: torch.Tensor) -> tuple:
    h = x * 2.0 + 1.0
    return h.tanh() * 3.0, h


@ppy.opt(4)
def biased(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b)


@ppy.opt(4)
def rows(h: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(h + b) * 2.0 - c / (1.0 + c)


@ppy.opt(4)
def select(x: torch.Tensor, y: torch.Tensor, t: float) -> torch.Tensor:
    a = torch.where(x > 0, x, y * 0.01)
    b = torch.where(x <= y, 1.0, a)
    c = torch.where(a != t, b, 2)
    return torch.where(y >= x, c, -c) + torch.where(x == y, y, x) * torch.where(x < t, 0.5, c)


@ppy.opt(4)
def scaled(x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x * t) + y * t - t


@ppy.opt(4)
def masks(x: torch.Tensor, y: torch.Tensor) -> tuple:
    m = (x > y) * 2.0
    return m + 1.0, torch.where(x > 0, 1.0, 2.0) + x


@ppy.opt(4)
def squash(v: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(v)


@ppy.opt(4)
def helpers(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return squash(F.silu(x) * y) - 1.0


@ppy.opt(4)
def widened(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = x.float()
    return torch.exp(-h.abs()) * y.to(torch.float32) + torch.sigmoid(x.float())


@ppy.opt(4)
def narrowed(x: torch.Tensor) -> torch.Tensor:
    return (x * 2.0).bfloat16() + 1.0
"""


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def mixed(x, y, s, k):
    a = 1 - x
    b = 2 / y
    c = x**2 - s * y
    d = torch.relu(a + b + c).sigmoid() * k
    return d + F.gelu(x, approximate="tanh") * torch.exp(-y.abs()) - F.silu(x.neg()) / 3


def two_grains(x):
    return torch.sigmoid(F.gelu(x, approximate="tanh")) * 2.0


def shared(x):
    h = x * 2.0 + 1.0
    return h.tanh() * 3.0, h


def biased(x, w, b):
    return torch.relu(x @ w + b)


def rows(h, b, c):
    return torch.sigmoid(h + b) * 2.0 - c / (1.0 + c)


def select(x, y, t):
    a = torch.where(x > 0, x, y * 0.01)
    b = torch.where(x <= y, 1.0, a)
    c = torch.where(a != t, b, 2)
    return torch.where(y >= x, c, -c) + torch.where(x == y, y, x) * torch.where(x < t, 0.5, c)


def scaled(x, t, y):
    return torch.sigmoid(x * t) + y * t - t


def masks(x, y):
    m = (x > y) * 2.0
    return m + 1.0, torch.where(x > 0, 1.0, 2.0) + x


def helpers(x, y):
    return torch.sigmoid(F.silu(x) * y) - 1.0


def widened(x, y):
    h = x.float()
    return torch.exp(-h.abs()) * y.to(torch.float32) + torch.sigmoid(x.float())


def narrowed(x):
    return (x * 2.0).bfloat16() + 1.0


@pytest.fixture(scope="module")
def compiled():
    return compile_cell(SOURCE, filename="<fusion-level>")


@pytest.fixture(scope="module")
def ns(compiled):
    return compiled[0]


def _inputs(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    bits = torch.randint(-(1 << 31), (1 << 31) - 1, (n,), generator=gen, dtype=torch.int32).view(torch.float32)
    normal = torch.randn(n, generator=gen) * 3
    x = torch.where(torch.rand(n, generator=gen) < 0.3, bits, normal)
    sp = checks.special_values()
    x[: min(n, sp.numel())] = sp[: min(n, sp.numel())]
    return x, torch.randn(n, generator=gen)


def _same(got, want) -> None:
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    assert got.shape == want.shape and got.stride() == want.stride() and got.dtype == want.dtype
    compare = checks.mismatches if got.element_size() == 4 else checks.mismatches16
    assert compare(got.reshape(-1), want.reshape(-1)) == 0


LENGTHS = [1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 80] + [
    g + d for g in (16384, 32768, 65536) for d in (-1, 0, 1, 17, 33)
]


@contextlib.contextmanager
def _threads(n: int):
    """PyTorch's thread count set to `n` while the block runs, restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", (1, 2))
def test_chains_are_eagers_bits(ns, threads):
    gen = torch.Generator().manual_seed(threads)
    with _threads(threads):
        for n in LENGTHS:
            x, y = _inputs(n, gen)
            with torch.no_grad():
                _same(ns["gelu"](x), gelu(x))
                _same(ns["mixed"](x, y, 0.3, 2), mixed(x, y, 0.3, 2))
                _same(ns["two_grains"](x), two_grains(x))
                _same(ns["shared"](x), shared(x))
            with torch.inference_mode():
                _same(ns["gelu"](x.reshape(1, n)), gelu(x.reshape(1, n)))
    assert ns["gelu"].fallbacks == 0 and ns["mixed"].fallbacks == 0


def _aten_ops(f, *args) -> set[str]:
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        f(*args)
    return {e.name for e in prof.events() if e.name.startswith("aten::")}


def test_a_cell_with_chains_builds_against_the_fused_prelude(compiled):
    """Its C++ starts with the fused prelude, whose PCH (built with fusion's flags) gcc really reads."""
    from ppy_magic import backend
    from ppy_magic.backend import prelude

    _, report = compiled
    includes = [ln for ln in report.cpp.splitlines() if ln.startswith("#include")]
    assert includes[0] == prelude.FUSED_INCLUDE_LINE
    fused = backend.shared_cache().prelude(fused=True)
    assert fused.status().usable, fused.status()
    assert fused.directory != backend.shared_cache().prelude().directory
    assert f"! {fused.pch}" in headers_gcc_reads(report.module_name)  # "!": gcc used this PCH
    # The cache keeps both preludes as this toolchain's (a prune by hand takes other toolchains' only).
    current = {e.name for e in backend.shared_cache().scan() if e.kind == "prelude" and e.current}
    assert os.path.basename(fused.directory) in current
    assert "fused prelude (cells with fused chains): ready" in backend.shared_cache().info()


def test_the_fused_pass_runs(ns):
    """While nothing observes, a chain is one pass: none of its ops reaches the dispatcher (only empty)."""
    x, y = _inputs(1000, torch.Generator().manual_seed(5))
    assert not _aten_ops(ns["gelu"], x) & {"aten::mul", "aten::tanh", "aten::pow", "aten::add"}
    assert not _aten_ops(ns["two_grains"], x) & {"aten::gelu", "aten::sigmoid", "aten::mul"}
    # a refused call runs the ops
    for refused in (x.double(), x.reshape(50, 20).t()):
        ops = _aten_ops(ns["gelu"], refused)
        assert "aten::pow" in ops and ops & {"aten::tanh", "aten::tanh_"}


def test_refused_operands_run_op_by_op(ns):
    gen = torch.Generator().manual_seed(7)
    x, y = _inputs(4096, gen)
    cases = [
        ("non-contiguous", x.reshape(64, 64).t(), y.reshape(64, 64).t()),
        ("broadcast", x.reshape(64, 64), y[:64]),
        ("double", x.double(), y.double()),
        ("0-dim", x[0], y[0]),
    ]
    with torch.no_grad():
        for _name, a, b in cases:
            _same(ns["gelu"](a), gelu(a))
            _same(ns["mixed"](a, b, 0.3, 2), mixed(a, b, 0.3, 2))
        _same(ns["mixed"](x, y, float("nan"), 2), mixed(x, y, float("nan"), 2))
    # autograd recording: the ops one by one, with the graph eager builds
    xr = x.clone().requires_grad_()
    got, want = ns["gelu"](xr), gelu(xr)
    _same(got.detach(), want.detach())
    (g1,) = torch.autograd.grad(got.sum(), xr)
    (g2,) = torch.autograd.grad(want.sum(), xr)
    _same(g1, g2)


def _special(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    n = math.prod(shape)
    return _inputs(n, gen)[0][torch.randperm(n, generator=gen)].reshape(shape)


# (the full shape, the row's shape): rows of every length around the vector step, broadcast over one or
# more leading dimensions, past the grain (60000 elements: two chunks on two threads), and a full operand.
ROW_CASES = [((m, n), (n,)) for m in (1, 3, 64) for n in (1, 15, 16, 17, 33, 100)] + [
    ((2, 3, 17), (17,)),
    ((2, 3, 17), (1, 17)),
    ((2, 3, 17), (3, 17)),
    ((2, 3, 17), (1, 1, 17)),
    ((600, 100), (100,)),
    ((1200, 31), (31,)),
    ((40, 40), (40, 40)),
]


@pytest.mark.parametrize("threads", (1, 2))
def test_row_operands_are_eagers_bits(ns, threads):
    """A bias row broadcast into add (and a value made from rows alone, into sub), fused: eager's bits."""
    gen = torch.Generator().manual_seed(11 + threads)
    with _threads(threads), torch.no_grad():
        for full, row in ROW_CASES:
            h, b, c = _special(full, gen), _special(row, gen), _special(row, gen)
            _same(ns["rows"](h, b, c), rows(h, b, c))
            x, w = torch.randn(full[:-1] + (8,), generator=gen), torch.randn(8, full[-1], generator=gen)
            _same(ns["biased"](x, w, b), biased(x, w, b))
    assert ns["rows"].fallbacks == 0 and ns["biased"].fallbacks == 0


def test_row_operands_fuse_and_others_run_op_by_op(ns):
    gen = torch.Generator().manual_seed(13)
    x, w, b = torch.randn(8, 32, generator=gen), torch.randn(32, 32, generator=gen), torch.randn(32, generator=gen)
    assert not _aten_ops(ns["biased"], x, w, b) & {"aten::add", "aten::add_", "aten::relu", "aten::relu_"}
    h, c = torch.randn(8, 32, generator=gen), torch.randn(32, generator=gen)
    assert not _aten_ops(ns["rows"], h, b, c) & {"aten::add", "aten::sigmoid", "aten::div", "aten::sub"}
    refused = [
        (h, torch.randn(8, 1, generator=gen), c[:1]),  # a column
        (h[0], torch.randn(8, 32, generator=gen), c),  # the row is the wider one
        (h.expand(4, 8, 32).contiguous(), torch.randn(4, 1, 32, generator=gen), c),  # broadcast in the middle
        (h, b, c[:16]),  # a length that does not broadcast: eager raises, so must the region
    ]
    with torch.no_grad():
        for args in refused[:3]:
            assert _aten_ops(ns["rows"], *args) & {"aten::sigmoid", "aten::sigmoid_"}
            _same(ns["rows"](*args), rows(*args))
        with pytest.raises(RuntimeError, match="must match the size"):
            ns["rows"](*refused[3])
    # sigmoid(h + b): h is taken to have the chain's shape, so b is the row (not h)
    text = str(ppy_magic.explain(ns["rows"]))
    assert "row_fits(ppy_in1" in text and "row_fits(ppy_in0" not in text


@pytest.mark.parametrize("threads", (1, 2))
def test_comparisons_and_where_are_eagers_bits(ns, threads):
    """Comparisons as where's condition: NaN, ±0, ±inf and equal pairs on both sides, numbers too."""
    gen = torch.Generator().manual_seed(21 + threads)
    with _threads(threads), torch.no_grad():
        for n in LENGTHS:
            x, y = _inputs(n, gen)
            y[: n // 2] = y[: n // 2].flip(0)
            y[::3] = x[::3]  # equal pairs, NaN pairs among them
            for t in (0.5, -0.0, math.inf):
                _same(ns["select"](x, y, t), select(x, y, t))
            _same(ns["masks"](x, y), masks(x, y))
    assert ns["select"].fallbacks == 0


@pytest.mark.parametrize("threads", (1, 2))
def test_0_dim_operands_are_read_as_numbers(ns, threads):
    """A 0-dim float32 tensor in any position (mul, which is position-dependent, too) is read as eager's
    loop reads a Python number; a NaN one, a 0-dim double, or all of them 0-dim run op by op."""
    gen = torch.Generator().manual_seed(31 + threads)
    values = [torch.tensor(v) for v in (0.5, -3.0, math.inf, -0.0, 1e-40, math.nan)] + [torch.tensor(2.0).double()]
    with _threads(threads), torch.no_grad():
        for n in LENGTHS:
            x, y = _inputs(n, gen)
            for t in values:
                for args in ((x, t, y), (t, x, y), (t, t, x), (x, x[:1].reshape(()).clone(), t), (t, t, t)):
                    _same(ns["scaled"](*args), scaled(*args))
    x, y = _inputs(1000, gen)
    assert not _aten_ops(ns["scaled"], x, torch.tensor(0.5), y) & {"aten::mul", "aten::sigmoid", "aten::add"}
    assert _aten_ops(ns["scaled"], x, torch.tensor(math.nan), y) & {"aten::mul", "aten::mul_"}


def test_comparisons_fuse_only_into_a_where(ns):
    x, y = _inputs(1000, torch.Generator().manual_seed(23))
    ops = _aten_ops(ns["select"], x, y, 0.5)
    assert not ops & {"aten::gt", "aten::le", "aten::ne", "aten::ge", "aten::eq", "aten::lt", "aten::where"}
    text = str(ppy_magic.explain(ns["masks"]))
    assert "a where of two numbers has the default dtype" in text
    assert "ppy::fused::Gt" not in text  # (x > y) * 2.0 is a bool tensor times a number: not a condition


def test_disagreeing_chunks_are_refused(ns):
    """sigmoid(gelu(x)) on 2 threads at 16385..32768 elements: gelu's grain splits, sigmoid's does not."""
    n = 32766  # gelu: two chunks of 16383, a tail of 31 in each; sigmoid: one chunk, a tail of 30 at the end
    gen = torch.Generator().manual_seed(3)
    # inputs where sigmoid's body and tail formulas differ on gelu's tail result: fused at gelu's chunks
    # (which a check must refuse), those elements of the first chunk's tail would take sigmoid's tail
    cand = torch.randn(1 << 16, generator=gen) * 4
    g = F.gelu(torch.empty(2 * cand.numel())[::2].copy_(cand), approximate="tanh")  # strided: the tail formula
    body, tail = torch.sigmoid(g.contiguous()), torch.sigmoid(torch.empty(2 * g.numel())[::2].copy_(g))
    differing = cand[body.view(torch.int32) != tail.view(torch.int32)]
    assert differing.numel() >= 31
    x = torch.randn(n, generator=gen)
    x[16352:16383] = differing[:31]
    with _threads(2), torch.no_grad():
        _same(ns["two_grains"](x), two_grains(x))


def test_explain_names_chains_and_what_stays_out(ns):
    text = str(ppy_magic.explain(ns["mixed"]))
    assert "compiled at level 4" in text
    assert "run as one fused pass" in text
    assert "ppy::fused::Sigmoid::apply" in text and "ppy::fused::Exp::block" in text
    shared_text = str(ppy_magic.explain(ns["shared"]))
    # h is returned: it is read twice, so `x * 2.0 + 1.0` is a chain and tanh * 3 another
    assert shared_text.count("run as one fused pass") >= 2


def test_an_op_outside_the_set_says_why():
    src = """
import torch
import torch.nn.functional as F
import ppy


@ppy.opt(4)
def f(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x * 2.0) + torch.sub(x, x, alpha=2)
"""
    ns, _ = compile_cell(src, filename="<fusion-level-out>")
    text = str(ppy_magic.explain(ns["f"]))
    assert "gelu's erf form is not in the fused set" in text
    assert "alpha other than 1" in text
    x = torch.randn(100)
    with torch.no_grad():
        _same(ns["f"](x), F.gelu(x * 2.0) + torch.sub(x, x, alpha=2))


def test_annotate_marks_fused_lines(ns):
    a = ppy_magic.annotate(ns["gelu"])
    (fn,) = a.functions
    fused = [ln for ln in fn.lines if ln.fused]
    assert [ln.text.strip()[:6] for ln in fused] == ["return"]
    assert "<- fused" in str(a) and "ppy-fused" in a._repr_mimebundle_()["text/html"]


@pytest.mark.parametrize("threads", (1, 2))
def test_calls_of_one_op_helpers_join_chains(ns, threads):
    """A compiled helper that makes one op (F.silu from torch's source, a user's one-line function) is
    that op in a chain: the whole body is one pass, eager's bits."""
    gen = torch.Generator().manual_seed(11)
    with _threads(threads), torch.no_grad():
        for n in LENGTHS:
            x, y = _inputs(n, gen)
            _same(ns["helpers"](x, y), helpers(x, y))
    x, y = _inputs(1000, gen)
    assert _aten_ops(ns["helpers"], x, y) == {"aten::empty"}
    assert "silu, mul, sigmoid, sub run as one fused pass" in str(ppy_magic.explain(ns["helpers"]))


def _bfloat16(n: int, gen: torch.Generator) -> torch.Tensor:
    """bfloat16 values: random bit patterns (NaNs with payloads, infinities, subnormals) and normal ones."""
    bits = torch.randint(-(1 << 15), 1 << 15, (n,), generator=gen, dtype=torch.int32).to(torch.int16)
    normal = (torch.randn(n, generator=gen) * 3).bfloat16()
    return torch.where(torch.rand(n, generator=gen) < 0.5, bits.view(torch.bfloat16), normal)


@pytest.mark.parametrize("threads", (1, 2))
def test_casts_to_float32_join_chains(ns, threads):
    """x.float() / x.to(torch.float32) of a bfloat16 leaf is read widened (exact: a shift); of a float32
    one it is the leaf. float16 leaves, and casts to other dtypes, run op by op."""
    gen = torch.Generator().manual_seed(12)
    with _threads(threads), torch.no_grad():
        for n in LENGTHS:
            x, y = _inputs(n, gen)
            for a, b in (
                (_bfloat16(n, gen), y),
                (x, _bfloat16(n, gen)),
                (_bfloat16(n, gen), _bfloat16(n, gen)),
                (x, y),
            ):
                _same(ns["widened"](a, b), widened(a, b))
            h = x.half()
            _same(ns["widened"](h, y), widened(h, y))
            _same(ns["narrowed"](x), narrowed(x))
    x, y = _inputs(1000, gen)
    assert _aten_ops(ns["widened"], _bfloat16(1000, gen), y) == {"aten::empty"}
    assert _aten_ops(ns["widened"], x, y) == {"aten::empty"}
    assert "aten::_to_copy" in _aten_ops(ns["widened"], x.half(), y)  # float16: op by op
    text = str(ppy_magic.explain(ns["widened"]))
    assert "to, abs, neg, exp, to, mul, to, sigmoid, add run as one fused pass" in text
    assert "a cast to another dtype than float32 is not in the fused set" in str(ppy_magic.explain(ns["narrowed"]))
