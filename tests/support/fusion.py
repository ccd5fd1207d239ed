"""Exact fusion's checks (issue 25): ``ppy_fused.h``'s ops and chains against eager, bit for bit.

One small extension (built with ``load_inline``) runs each op of the fused set, and a few chains of
them, through ``ppy_fused.h``'s loop; the checks here compare it with eager's result as int32 bit
patterns, so a NaN must carry eager's sign and payload too. ``benchmarks/fusion_exact.py`` runs them
exhaustively (every float32 for each unary op), ``tests/test_fusion_exact.py`` on a sample.

Each unary op is checked along both of eager's paths: a contiguous tensor takes the vector body
(a length that is a multiple of the vector step has no tail), a strided one the scalar formula for
every element (``basic_loop``), which is what the fused loop uses in a chunk's tail.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

CPP = r"""
#include <torch/extension.h>
#include "ppy_fused.h"

namespace fz = ppy::fused;

template <class Op, class S>
static at::Tensor unary_typed(const at::Tensor& x, bool scalar_path) {
  at::Tensor out = at::empty_like(x);
  S* o = out.data_ptr<S>();
  const S* p = x.data_ptr<S>();
  const int64_t n = x.numel();
  if (!scalar_path) {
    fz::run_op<Op>(o, n, p);
  } else if constexpr (fz::has_block<Op>::value && std::is_same_v<S, float>) {
    Op::block(o, p, n);
  } else {
    fz::map(o, 0, n, [](auto v) { return Op::apply(v); }, p);
  }
  return out;
}

// float32, bfloat16 or float16, by x's dtype.
template <class Op>
static at::Tensor unary_op(const at::Tensor& x, bool scalar_path) {
  switch (x.scalar_type()) {
    case at::kFloat: return unary_typed<Op, float>(x, scalar_path);
    default: break;
  }
  if constexpr (!fz::float_only<Op>) {
    switch (x.scalar_type()) {
      case at::kBFloat16: return unary_typed<Op, c10::BFloat16>(x, scalar_path);
      case at::kHalf: return unary_typed<Op, c10::Half>(x, scalar_path);
      default: break;
    }
  }
  TORCH_CHECK(false, "no fused form for ", x.scalar_type());
}

// The order of UNARY in fusion.py.
at::Tensor unary(int64_t op, const at::Tensor& x, bool scalar_path) {
  switch (op) {
    case 0: return unary_op<fz::Neg>(x, scalar_path);
    case 1: return unary_op<fz::Abs>(x, scalar_path);
    case 2: return unary_op<fz::Relu>(x, scalar_path);
    case 3: return unary_op<fz::Sigmoid>(x, scalar_path);
    case 4: return unary_op<fz::Silu>(x, scalar_path);
    case 5: return unary_op<fz::GeluTanh>(x, scalar_path);
    case 6: return unary_op<fz::Exp>(x, scalar_path);
    case 7: return unary_op<fz::Tanh>(x, scalar_path);
    case 8: return unary_op<fz::Reciprocal>(x, scalar_path);
    case 9: return unary_op<fz::Square>(x, scalar_path);
    case 10: return unary_op<fz::Cube>(x, scalar_path);
  }
  TORCH_CHECK(false, "no unary op ", op);
}

template <class Op, class A, class B>
static void binary_into(float* o, int64_t n, A a, B b) {
  fz::run_op<Op>(o, n, a, b);
}

// where(a cmp b, a, b): a comparison as a where's condition, as a chain computes it.
template <class Cmp>
struct WhereOf {
  static constexpr bool kPositionDependent = false;
  template <class T>
  static T apply(T a, T b) { return fz::Where::apply(Cmp::apply(a, b), a, b); }
};

// The order of BINARY in fusion.py; `scalar` (with `scalar_first`) makes one operand a Python number.
at::Tensor binary(int64_t op, const at::Tensor& a, const at::Tensor& b, c10::optional<double> scalar,
                  bool scalar_first) {
  at::Tensor out = at::empty_like(a);
  float* o = out.data_ptr<float>();
  const int64_t n = a.numel();
  auto go = [&](auto tag) {
    using Op = decltype(tag);
    const float* pa = a.data_ptr<float>();
    if (!scalar) {
      binary_into<Op>(o, n, pa, b.data_ptr<float>());
    } else if (scalar_first) {
      binary_into<Op>(o, n, fz::Bcast{static_cast<float>(*scalar)}, pa);
    } else {
      binary_into<Op>(o, n, pa, fz::Bcast{static_cast<float>(*scalar)});
    }
  };
  switch (op) {
    case 0: go(fz::Add{}); break;
    case 1: go(fz::Sub{}); break;
    case 2: go(fz::Mul{}); break;
    case 3: go(fz::Div{}); break;
    case 4: go(WhereOf<fz::Eq>{}); break;
    case 5: go(WhereOf<fz::Ne>{}); break;
    case 6: go(WhereOf<fz::Lt>{}); break;
    case 7: go(WhereOf<fz::Le>{}); break;
    case 8: go(WhereOf<fz::Gt>{}); break;
    case 9: go(WhereOf<fz::Ge>{}); break;
    case 100: {
      // number / tensor as eager computes it: reciprocal(x) * number.
      const float k = static_cast<float>(*scalar);
      const float* pa = a.data_ptr<float>();
      fz::for_each_block(n, at::internal::GRAIN_SIZE, fz::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {
        fz::map(o + i, nv, nt, [](auto v, auto c) { return fz::Mul::apply(fz::Reciprocal::apply(v), c); },
                pa + i, fz::Bcast{k});
      });
      break;
    }
    default: TORCH_CHECK(false, "no binary op ", op);
  }
  return out;
}

// Chains, in the order of CHAINS in fusion.py. Each is what a generated region would emit.
static at::Tensor gelu_tanh_chain(const at::Tensor& x) {
  // 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x)))): tanh goes through MKL,
  // so the chain is two register passes around a block call.
  at::Tensor out = at::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const float c = static_cast<float>(0.7978845608028654), k = static_cast<float>(0.044715);
  fz::for_each_block(x.numel(), at::internal::GRAIN_SIZE, fz::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {
    alignas(64) float t[fz::kBlock];
    fz::map(t, nv, nt, [&](auto v) {
      using T = decltype(v);
      const T cube = fz::Mul::apply(fz::Mul::apply(v, v), v);
      return fz::Mul::apply(fz::Add::apply(v, fz::Mul::apply(cube, T(k))), T(c));
    }, px + i);
    fz::Tanh::block(t, t, nv + nt);
    fz::map(o + i, nv, nt, [](auto v, auto th) {
      using T = decltype(v);
      return fz::Mul::apply(fz::Mul::apply(v, T(0.5f)), fz::Add::apply(th, T(1.f)));
    }, px + i, static_cast<const float*>(t));
  });
  return out;
}

static at::Tensor x_sigmoid_x(const at::Tensor& x) {
  at::Tensor out = at::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = x.numel();
  fz::for_each_block(n, fz::Sigmoid::grain(n), fz::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {
    fz::map(o + i, nv, nt, [](auto v) { return fz::Mul::apply(v, fz::Sigmoid::apply(v)); }, px + i);
  });
  return out;
}

static at::Tensor relu_add(const at::Tensor& x, const at::Tensor& b) {
  at::Tensor out = at::empty_like(x);
  const float* px = x.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* o = out.data_ptr<float>();
  fz::for_each_block(x.numel(), at::internal::GRAIN_SIZE, fz::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {
    fz::map(o + i, nv, nt, [](auto v, auto w) { return fz::Relu::apply(fz::Add::apply(v, w)); }, px + i, pb + i);
  });
  return out;
}

// exp(-abs((x - y) / 3)) - 1: MKL's exp between two register passes.
static at::Tensor exp_decay(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor out = at::empty_like(x);
  const float* px = x.data_ptr<float>();
  const float* py = y.data_ptr<float>();
  float* o = out.data_ptr<float>();
  fz::for_each_block(x.numel(), at::internal::GRAIN_SIZE, fz::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {
    fz::map(o + i, nv, nt, [](auto v, auto w) {
      using T = decltype(v);
      return fz::Neg::apply(fz::Abs::apply(fz::Div::apply(fz::Sub::apply(v, w), T(3.f))));
    }, px + i, py + i);
    fz::Exp::block(o + i, o + i, nv + nt);
    fz::map(o + i, nv, nt, [](auto v) { return fz::Sub::apply(v, decltype(v)(1.f)); },
            static_cast<const float*>(o + i));
  });
  return out;
}

// sigmoid(gelu(x, approximate="tanh")): two position-dependent ops whose grains differ (gelu's is
// numel / threads above 16384); it fuses only where their chunks agree, else returns an empty tensor
// (the caller runs op by op). `force` fuses anyway, at gelu's grain: the check that refusing matters.
static at::Tensor sigmoid_gelu(const at::Tensor& x, bool force) {
  const int64_t n = x.numel();
  if (!force && !fz::same_chunks(n, fz::GeluTanh::grain(n), fz::Sigmoid::grain(n))) {
    return at::empty({0}, x.options());
  }
  at::Tensor out = at::empty_like(x);
  const float* px = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  fz::for_each_block(n, fz::GeluTanh::grain(n), fz::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {
    fz::map(o + i, nv, nt, [](auto v) { return fz::Sigmoid::apply(fz::GeluTanh::apply(v)); }, px + i);
  });
  return out;
}

at::Tensor chain(int64_t which, const at::Tensor& x, const at::Tensor& y, bool force) {
  switch (which) {
    case 0: return gelu_tanh_chain(x);
    case 1: return x_sigmoid_x(x);
    case 2: return relu_add(x, y);
    case 3: return exp_decay(x, y);
    case 4: return sigmoid_gelu(x, force);
  }
  TORCH_CHECK(false, "no chain ", which);
}

// x.float() as a chain reads a leaf only casts read: widen_at block by block, then Widen's pass.
at::Tensor widen(const at::Tensor& x) {
  TORCH_CHECK(fz::widenable(x, x.sizes()), "not a leaf a chain widens: ", x.scalar_type());
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(at::kFloat));
  float* o = out.data_ptr<float>();
  fz::for_each_block(x.numel(), at::internal::GRAIN_SIZE, fz::kVecStep, [&](int64_t i, int64_t nv, int64_t nt) {
    alignas(64) float w[fz::kBlock];
    const float* q = fz::widen_at(w, x, i, nv + nt);
    fz::map(o + i, nv, nt, [](auto v) { return fz::Widen::apply(v); }, q);
  });
  return out;
}

bool capability_matches() { return fz::capability_matches(); }
"""

AVX512_FLAGS = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma"]
CFLAGS = ["-O2", "-ffp-contract=off", "-fopenmp", "-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", *AVX512_FLAGS]


def build(cache_dir: str | None = None):
    """The check extension, built once per cache directory (``PPY_CACHE_DIR``, else a temporary one)."""
    from torch.utils.cpp_extension import load_inline

    from ppy_magic.backend.toolchain import RUNTIME_DIR

    cache_dir = cache_dir or os.environ.get("PPY_CACHE_DIR") or os.path.join(os.environ.get("TMPDIR", "/tmp"), "ppy")
    # named by the header's text too: load_inline's ninja file does not see a change to an included header
    with open(os.path.join(RUNTIME_DIR, "ppy_fused.h"), "rb") as fh:
        name = "ppy_fusion_exact_" + hashlib.sha256(fh.read() + CPP.encode()).hexdigest()[:16]
    build_dir = os.path.join(cache_dir, name)
    os.makedirs(build_dir, exist_ok=True)
    os.environ.setdefault("MAX_JOBS", "1")
    return load_inline(
        name,
        CPP,
        functions=["unary", "binary", "chain", "widen", "capability_matches"],
        extra_cflags=CFLAGS,
        extra_ldflags=["-fopenmp"],
        extra_include_paths=[RUNTIME_DIR],
        build_directory=build_dir,
        verbose=False,
    )


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


# name -> eager function; the index is the extension's op number.
UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "neg": torch.neg,
    "abs": torch.abs,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu_tanh": gelu_tanh,
    "exp": torch.exp,
    "tanh": torch.tanh,
    "reciprocal": torch.reciprocal,
    "square": lambda x: torch.pow(x, 2),
    "cube": lambda x: torch.pow(x, 3.0),
}
# Unary ops fused for float32 only (their reduced-precision kernels round differently).
FLOAT_ONLY = ("square", "cube")
BINARY_PYTHON = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "where(a == b, a, b)": lambda a, b: torch.where(a == b, a, b),
    "where(a != b, a, b)": lambda a, b: torch.where(a != b, a, b),
    "where(a < b, a, b)": lambda a, b: torch.where(a < b, a, b),
    "where(a <= b, a, b)": lambda a, b: torch.where(a <= b, a, b),
    "where(a > b, a, b)": lambda a, b: torch.where(a > b, a, b),
    "where(a >= b, a, b)": lambda a, b: torch.where(a >= b, a, b),
}
# name -> eager form; the index is the extension's binary op number.
BINARY: dict[str, Callable] = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div} | {
    name: fn for name, fn in BINARY_PYTHON.items() if name.startswith("where")
}
DIV_NUMBER_FIRST = 100  # number / tensor: reciprocal(x) * number, as eager computes it


def _gelu_tanh_chain(x, y):
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


# name -> eager form; the index is the extension's chain number.
CHAINS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "gelu_tanh as a chain": _gelu_tanh_chain,
    "x * sigmoid(x)": lambda x, y: x * torch.sigmoid(x),
    "relu(x + b)": lambda x, y: torch.relu(x + y),
    "exp(-abs((x - y) / 3)) - 1": lambda x, y: torch.exp(-torch.abs((x - y) / 3.0)) - 1,
    "sigmoid(gelu_tanh(x))": lambda x, y: torch.sigmoid(gelu_tanh(x)),
}
REFUSING_CHAIN = "sigmoid(gelu_tanh(x))"

# Forms whose NaN * NaN inputs are counted apart ("[open: ...]" rows, reported and not counted): none
# now that Mul's tail follows libtorch's epilogue (kMulTailKeepsA); a form goes here, with its reason,
# when a change leaves its NaN pairs unmatched.
NAN_PAIR_OPEN: tuple[str, ...] = ()

# Python numbers a binary op meets (each cast to float32 as eager casts a wrapped number).
PYTHON_SCALARS = (0.5, 1.0, -1.0, 3.0, 0.044715, 0.7978845608028654, 1e-3, 1e30, -2.5e-39, 0.0, -0.0, float("inf"))


def mismatches(a: torch.Tensor, b: torch.Tensor) -> int:
    """Elements whose bit patterns differ (NaNs included: sign and payload count)."""
    if a.shape != b.shape:
        return max(a.numel(), b.numel())
    return int((a.contiguous().view(torch.int32) != b.contiguous().view(torch.int32)).sum())


def _bits(values: list[int]) -> torch.Tensor:
    return torch.tensor([v - (1 << 32) if v >= 1 << 31 else v for v in values], dtype=torch.int32).view(torch.float32)


def special_values() -> torch.Tensor:
    """NaNs (quiet, signalling, signed, with payloads), infinities, zeros, subnormals, the edges of
    float32's range and of exp's and tanh's interesting regions."""
    patterns = [
        0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7FA00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF,
        0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF,
        0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000,
    ]  # fmt: skip
    numbers = [88.72283, 88.7228394, 89.0, -87.33654, -103.97208, -104.0, 9.0, 9.01, -9.0, 1e-20, -1e-20, 0.5, 20.0]
    return torch.cat([_bits(patterns), torch.tensor(numbers, dtype=torch.float32)])


def random_floats(n: int, gen: torch.Generator) -> torch.Tensor:
    """n floats: a quarter random bit patterns (every exponent, NaNs among them), the rest normal
    values of a few scales, with the special values strewn in."""
    q = n // 4
    bits = torch.randint(-(1 << 31), (1 << 31) - 1, (q,), generator=gen, dtype=torch.int32).view(torch.float32)
    scales = torch.tensor([1e-3, 1.0, 4.0, 30.0], dtype=torch.float32)
    normal = torch.randn(n - q, generator=gen) * scales[torch.randint(0, 4, (n - q,), generator=gen)]
    x = torch.cat([bits, normal])[torch.randperm(n, generator=gen)]
    sp = special_values()
    where = torch.randint(0, n, (min(n, 4 * sp.numel()),), generator=gen)
    x[where] = sp[torch.randint(0, sp.numel(), (where.numel(),), generator=gen)]
    return x


def boundary_lengths(full: bool = True) -> list[int]:
    """Lengths around every vector step and chunk boundary: 1..80 (vector steps of 32 and their tails),
    around 16384 (gelu's own grain), 32768 (GRAIN_SIZE: one chunk or two), 65536 and 98304 (two and
    three chunks of a grain) and an odd large one."""
    near = (-33, -32, -31, -17, -16, -15, -1, 0, 1, 15, 16, 17, 31, 32, 33) if full else (-33, -1, 0, 1, 17, 33)
    return list(range(1, 81)) + [g + d for g in (16384, 32768, 65536, 98304) for d in near] + [100003]


@dataclass
class Tally:
    """Inputs checked and mismatches found, per check name."""

    checked: dict[str, int]
    bad: dict[str, int]

    @classmethod
    def empty(cls) -> Tally:
        return cls({}, {})

    def add(self, name: str, inputs: int, wrong: int) -> None:
        self.checked[name] = self.checked.get(name, 0) + inputs
        self.bad[name] = self.bad.get(name, 0) + wrong

    def total_bad(self) -> int:
        """Mismatches in the checks that must hold (the open cases' rows are reported, not counted)."""
        return sum(v for k, v in self.bad.items() if "[open:" not in k)


def check_unary_bits(ext, x: torch.Tensor, tally: Tally, names: list[str] | None = None) -> None:
    """Each unary op on x along both paths: vector body (x.numel() a multiple of 32) and scalar."""
    strided = torch.empty(2 * x.numel(), dtype=torch.float32)[::2]
    strided.copy_(x)
    for k, (name, fn) in enumerate(UNARY.items()):
        if names is not None and name not in names:
            continue
        tally.add(f"{name} (vector body)", x.numel(), mismatches(ext.unary(k, x, False), fn(x)))
        tally.add(f"{name} (scalar tail)", x.numel(), mismatches(ext.unary(k, x, True), fn(strided)))


def check_lengths(ext, lengths: list[int], threads: tuple[int, ...], gen: torch.Generator, tally: Tally) -> None:
    """Every op, binary form and chain at each length and thread count, on random and special inputs."""
    before = torch.get_num_threads()
    try:
        for t in threads:
            torch.set_num_threads(t)
            for n in lengths:
                x, y = random_floats(n, gen), random_floats(n, gen)
                _check_one_length(ext, x, y, t, tally)
    finally:
        torch.set_num_threads(before)


def _check_one_length(ext, x: torch.Tensor, y: torch.Tensor, threads: int, tally: Tally) -> None:
    n = x.numel()
    for k, (name, fn) in enumerate(UNARY.items()):
        tally.add(f"{name} (lengths, {threads}t)", n, mismatches(ext.unary(k, x, False), fn(x)))
    both_nan = x.isnan() & y.isnan()
    for k, (name, fn) in enumerate(BINARY.items()):
        got, want = ext.binary(k, x, y, None, False), fn(x, y)
        if name in NAN_PAIR_OPEN:
            _add_split(tally, f"{name} tensor-tensor ({threads}t)", got, want, both_nan)
        else:
            tally.add(f"{name} tensor-tensor ({threads}t)", n, mismatches(got, want))
        op = BINARY_PYTHON[name]
        for s in PYTHON_SCALARS[: 3 if n > 80 else None]:
            got = ext.binary(k, x, x, s, False)
            tally.add(f"{name} tensor-number ({threads}t)", n, mismatches(got, op(x, s)))
            # number / tensor is reciprocal(x) * number in eager: the extension's DIV_NUMBER_FIRST.
            got = ext.binary(DIV_NUMBER_FIRST if name == "div" else k, x, x, s, True)
            tally.add(f"{name} number-tensor ({threads}t)", n, mismatches(got, op(s, x)))
    for k, (name, fn) in enumerate(CHAINS.items()):
        got = ext.chain(k, x, y, False)
        if name == REFUSING_CHAIN and got.numel() == 0 and n > 0:
            tally.add(f"{name}: refused ({threads}t)", n, 0)
            continue
        if name in NAN_PAIR_OPEN:
            _add_split(tally, f"{name} ({threads}t)", got, fn(x, y), x.isnan())
        else:
            tally.add(f"{name} ({threads}t)", n, mismatches(got, fn(x, y)))


def _add_split(tally: Tally, name: str, got: torch.Tensor, want: torch.Tensor, open_case: torch.Tensor) -> None:
    keep = ~open_case
    tally.add(name, int(keep.sum()), mismatches(got[keep], want[keep]))
    tally.add(f"{name} [open: NaN meets NaN]", int(open_case.sum()), mismatches(got[open_case], want[open_case]))


def check_special_pairs(ext, tally: Tally) -> None:
    """Every binary op over every pair of special values (and each with random values)."""
    sp = special_values()
    a = sp.repeat_interleave(sp.numel())
    b = sp.repeat(sp.numel())
    for k, (name, fn) in enumerate(BINARY.items()):
        got, want = ext.binary(k, a, b, None, False), fn(a, b)
        if name in NAN_PAIR_OPEN:
            _add_split(tally, f"{name} special pairs", got, want, a.isnan() & b.isnan())
        else:
            tally.add(f"{name} special pairs", a.numel(), mismatches(got, want))


def check_nan_pairs(ext, tally: Tally) -> None:
    """Two NaNs meeting in one op, at every tail length 0..31 after two vector steps: which operand's
    NaN comes out is fixed per position by eager's compiled loop (kMulTailKeepsA for mul's tail)."""
    a_nan, b_nan = _bits([0x7FC00001]), _bits([0xFF800002])  # a quiet NaN, a signalling one
    for t in range(32):
        n = 2 * 32 + t
        a, b = a_nan.repeat(n), b_nan.repeat(n)
        for k, (name, fn) in enumerate(BINARY.items()):
            tally.add(f"{name} NaN pairs", n, mismatches(ext.binary(k, a, b, None, False), fn(a, b)))
        for k, (name, fn) in enumerate(CHAINS.items()):
            tally.add(f"{name} NaN input", n, mismatches(ext.chain(k, a, b, False), fn(a, b)))


REDUCED = (torch.bfloat16, torch.float16)


def all_patterns(dtype: torch.dtype) -> torch.Tensor:
    """Every 16-bit pattern of a half or bfloat16 type, NaNs included (65536 elements)."""
    return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(dtype)


def mismatches16(a: torch.Tensor, b: torch.Tensor) -> int:
    """`mismatches` for 16-bit types (bfloat16, float16)."""
    if a.shape != b.shape:
        return max(a.numel(), b.numel())
    return int((a.contiguous().view(torch.int16) != b.contiguous().view(torch.int16)).sum())


def check_reduced_unary(ext, dtype: torch.dtype, tally: Tally, gen: torch.Generator, full: bool = True) -> None:
    """Each unary op on every pattern of dtype along both paths (65536 is a multiple of every step),
    then at lengths around its vector steps (32 and 64) and chunk boundaries with 1 and 2 threads."""
    x = all_patterns(dtype)
    strided = torch.empty(2 * x.numel(), dtype=dtype)[::2]
    strided.copy_(x)
    tag = str(dtype).removeprefix("torch.")
    reduced = [(k, name, fn) for k, (name, fn) in enumerate(UNARY.items()) if name not in FLOAT_ONLY]
    for k, name, fn in reduced:
        tally.add(f"{name} {tag} (vector body)", x.numel(), mismatches16(ext.unary(k, x, False), fn(x)))
        tally.add(f"{name} {tag} (scalar tail)", x.numel(), mismatches16(ext.unary(k, x, True), fn(strided)))
    near = (-65, -64, -63, -33, -32, -1, 0, 1, 31, 32, 33, 63, 64, 65) if full else (-65, -33, -1, 0, 1, 33, 65)
    lengths = list(range(1, 141)) + [g + d for g in (16384, 32768, 65536) for d in near]
    before = torch.get_num_threads()
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            for n in lengths:
                y = x[torch.randint(0, x.numel(), (n,), generator=gen)]
                for k, name, fn in reduced:
                    got = ext.unary(k, y, False)
                    tally.add(f"{name} {tag} (lengths, {t}t)", n, mismatches16(got, fn(y)))
    finally:
        torch.set_num_threads(before)


def check_widen(ext, tally: Tally, gen: torch.Generator) -> None:
    """``x.float()`` of bfloat16 as a chain reads it, against eager's copy: every pattern along both of
    eager's paths (contiguous, and strided: the scalar loop), then every length to 140 and around the
    chunk boundaries with 1 and 2 threads, at offsets that move the tails. float16 is not widened
    (eager's copy is position-dependent there): the check confirms a chain refuses it."""
    x = all_patterns(torch.bfloat16)
    strided = torch.empty(2 * x.numel(), dtype=x.dtype)[::2]
    strided.copy_(x)
    tally.add("float() of bfloat16 (vector body)", x.numel(), mismatches(ext.widen(x), x.float()))
    tally.add("float() of bfloat16 (scalar loop)", x.numel(), mismatches(ext.widen(x), strided.float()))
    lengths = list(range(1, 141)) + [g + d for g in (16384, 32768, 65536) for d in (-33, -1, 0, 1, 33)]
    before = torch.get_num_threads()
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            for n in lengths:
                y = x[torch.randint(0, x.numel(), (n + 7,), generator=gen)]
                for off in (0, 7):
                    part = y[off : off + n]
                    tally.add(f"float() of bfloat16 (lengths, {t}t)", n, mismatches(ext.widen(part), part.float()))
    finally:
        torch.set_num_threads(before)
    try:
        ext.widen(all_patterns(torch.float16))
    except RuntimeError:
        tally.add("float() of float16: refused", 1, 0)
    else:
        tally.add("float() of float16: refused", 1, 1)
