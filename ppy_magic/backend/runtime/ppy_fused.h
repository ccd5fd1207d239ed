// Exact fusion of element-wise float32 chains (issue 25): one pass over contiguous data that computes
// each element with the formula eager's CPU kernel uses for that op, in eager's loop shape (the same
// at::parallel_for chunks, a vector body in steps of 2 * Vectorized<float>::size() from each chunk's
// start, a scalar tail), so every element is eager's bits. docs/fusion.md gives each op's kernel, how
// its formula was established and how it is checked (benchmarks/fusion_exact.py).
//
// A translation unit including this header is compiled for the capability eager's kernels run with
// (AVX512 here: -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -DCPU_CAPABILITY=AVX512
// -DCPU_CAPABILITY_AVX512), with -ffp-contract=off (no FMA may form across ops; the FMAs eager's own
// compiler formed inside an op are written out below) and with -fopenmp (at::parallel_for's OpenMP
// region is compiled into the caller, and its chunks must be libtorch's).
//
// How a chain is written: for_each_block(n, grain, body) calls body(begin, nvec, ntail) for each run of
// positions; body evaluates the chain over them with map() (ops with a Vectorized and a scalar form,
// composed in one generic functor evaluated in registers) and, for the ops eager computes through MKL's
// vector math library, with their block() into a stack buffer.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/Version.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#if !defined(CPU_CAPABILITY_AVX512)
#error "ppy_fused.h holds eager's AVX512 formulas: compile with CPU_CAPABILITY_AVX512 and its -m flags"
#endif
#if !defined(_OPENMP)
#error "ppy_fused.h needs -fopenmp: at::parallel_for's chunks must be the ones libtorch's kernels get"
#endif

// MKL's vector math (LP64 Fortran entry points with 64-bit counts), exported by libtorch_cpu: eager's
// exp and tanh of float call vmsExp/vmsTanh through ATen/cpu/vml.h with exactly this mode.
extern "C" {
void VMSEXP_64_(const int64_t* n, const float* a, float* r, const int64_t* mode);
void VMSTANH_64_(const int64_t* n, const float* a, float* r, const int64_t* mode);
}

namespace ppy::fused {

using VecF = at::vec::Vectorized<float>;

// vectorized_loop (ATen/native/cpu/Loops.h) steps two vectors at a time; what is left of a chunk
// (fewer than kVecStep elements, even a whole vector's worth) goes through the scalar formula.
constexpr int64_t kVecStep = 2 * VecF::size();
// Elements one body call sees at most: a stack buffer of this many floats stays in L1.
constexpr int64_t kBlock = 16 * kVecStep;

// The capability this translation unit's Vectorized<float> is, spelled as at::get_cpu_capability().
#if defined(CPU_CAPABILITY_AVX512)
constexpr const char* kCapability = "AVX512";
#elif defined(CPU_CAPABILITY_AVX2)
constexpr const char* kCapability = "AVX2";
#else
constexpr const char* kCapability = "DEFAULT";
#endif

// The formulas below are eager's AVX512 kernels' (checked on this build of torch); anything else runs
// op by op.
inline bool capability_matches() {
  static const bool same = at::get_cpu_capability() == kCapability && std::string(kCapability) == "AVX512";
  return same;
}

// VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (mkl_vml_defines.h), as vml.h passes them.
constexpr int64_t kVmlMode = 0x00000002 | 0x00140000 | 0x00000100;

// ---- Operands -------------------------------------------------------------------------------------

// A broadcast operand: a Python number (cast to float as TensorIterator casts the wrapped number) or a
// 0-dim tensor's value. vectorized_loop broadcasts it into a vector once and reads it as a scalar in the
// tail, as load() does here.
struct Bcast {
  float v;
};

template <class T>
inline T load(const float* p, int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return p[i];
  } else {
    return VecF::loadu(p + i);
  }
}
template <class T>
inline T load(Bcast s, int64_t) {
  return T(s.v);
}

// ---- Ops ------------------------------------------------------------------------------------------
// Each op: vec() is eager's Vectorized lambda, scalar() its scalar lambda, as libtorch compiled them;
// apply() picks by type so one generic functor serves body and tail. kPositionDependent: vec and scalar
// round differently, so which elements take the tail matters and grain(n) is the op's grain size.

#define PPY_FUSED_APPLY1                             \
  template <class T>                                 \
  static T apply(T a) {                              \
    if constexpr (std::is_same_v<T, float>) {        \
      return scalar(a);                              \
    } else {                                         \
      return vec(a);                                 \
    }                                                \
  }
#define PPY_FUSED_APPLY2                             \
  template <class T>                                 \
  static T apply(T a, T b) {                         \
    if constexpr (std::is_same_v<T, float>) {        \
      return scalar(a, b);                           \
    } else {                                         \
      return vec(a, b);                              \
    }                                                \
  }

// at::internal::GRAIN_SIZE: cpu_kernel_vec's default.
inline int64_t default_grain(int64_t) {
  return at::internal::GRAIN_SIZE;
}

// Where both operands of one instruction are NaN, x86 returns its first source, quieted. Which operand
// that is in eager's kernels is whatever libtorch's compiler chose (b for add, sub and mul, a for div,
// the 0.5 * x side of gelu's last product), and GCC reorders the operands of a commutative operation
// freely, across inlined ops too; so those sums and products are single instructions with their first
// source fixed. Values are IEEE's either way: only the NaN that comes out depends on it.
namespace detail {
inline VecF add_first(VecF first, VecF second) {
  __m512 r;
  asm("vaddps %2, %1, %0" : "=v"(r) : "v"(static_cast<__m512>(first)), "v"(static_cast<__m512>(second)));
  return r;
}
inline VecF mul_first(VecF first, VecF second) {
  __m512 r;
  asm("vmulps %2, %1, %0" : "=v"(r) : "v"(static_cast<__m512>(first)), "v"(static_cast<__m512>(second)));
  return r;
}
// first * k + addend rounded once; NaN priority first, k, addend.
inline VecF fmadd_first(VecF first, VecF k, VecF addend) {
  __m512 r = first;
  asm("vfmadd213ps %2, %1, %0" : "+v"(r) : "v"(static_cast<__m512>(k)), "v"(static_cast<__m512>(addend)));
  return r;
}
inline float add_first(float first, float second) {
  float r;
  asm("vaddss %2, %1, %0" : "=v"(r) : "v"(first), "v"(second));
  return r;
}
inline float mul_first(float first, float second) {
  float r;
  asm("vmulss %2, %1, %0" : "=v"(r) : "v"(first), "v"(second));
  return r;
}
inline float fmadd_first(float first, float k, float addend) {
  float r = first;
  asm("vfmadd213ss %2, %1, %0" : "+v"(r) : "v"(k), "v"(addend));
  return r;
}
// The tail run map() is computing (its length and the element's index in it): read by the one op whose
// scalar form depends on it, Mul.
struct TailLane {
  int64_t length = 0;
  int64_t index = 0;
};
inline thread_local TailLane tail_lane;

// Eager's scalar tail of mul is GCC's vectorised epilogue of basic_loop: 8-wide, 4-wide, 2-wide and
// 1-wide pieces whose products take different operands first. Bit j of entry t is set where, in a
// tail of t elements, element j keeps a's NaN when both are NaN (b's elsewhere, as in the body).
// Read off libtorch (benchmarks/fusion_exact.py's "mul tensor-tensor" rows check it); a tail is
// shorter than kVecStep, so the table is complete.
constexpr uint32_t kMulTailKeepsA[32] = {
    0x0, 0x0, 0x0, 0x0, 0xf, 0xf, 0xf, 0x4f, 0x0, 0x0, 0x0, 0x400, 0xf00, 0xf00, 0xf00, 0x4f00,
    0x0, 0x0, 0x0, 0x0, 0xf0000, 0xf0000, 0xf0000, 0x4f0000, 0x0, 0x0, 0x0, 0x4000000, 0xf000000,
    0xf000000, 0xf000000, 0x4f000000,
};
}  // namespace detail

// add/sub (ufunc add: vec::fmadd(b, alpha, a) and a + alpha * b) with alpha 1 and -1: b * alpha is
// exact, so both round a + b (a - b) once. torch.sub and rsub are add with alpha -1.
struct Add {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a, VecF b) { return detail::add_first(b, a); }
  static float scalar(float a, float b) { return detail::add_first(b, a); }
  PPY_FUSED_APPLY2
};
struct Sub {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a, VecF b) { return detail::fmadd_first(b, VecF(-1.f), a); }
  static float scalar(float a, float b) { return detail::fmadd_first(b, -1.f, a); }
  PPY_FUSED_APPLY2
};
// mul_kernel and div_true_kernel (BinaryOpsKernel.cpp): a * b and a / b in both forms. A Python number
// over a tensor is not a div: Tensor.__rtruediv__ is reciprocal(x) * number. Mul is position-dependent
// for NaN * NaN only (see kMulTailKeepsA): its value is IEEE's everywhere.
struct Mul {
  static constexpr bool kPositionDependent = true;
  static int64_t grain(int64_t n) { return default_grain(n); }
  static VecF vec(VecF a, VecF b) { return detail::mul_first(b, a); }
  static float scalar(float a, float b) {
    const detail::TailLane lane = detail::tail_lane;
    const bool keep_a = lane.length < kVecStep && ((detail::kMulTailKeepsA[lane.length] >> lane.index) & 1u);
    return keep_a ? detail::mul_first(a, b) : detail::mul_first(b, a);
  }
  PPY_FUSED_APPLY2
};
struct Div {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a, VecF b) { return a / b; }
  static float scalar(float a, float b) { return a / b; }
  PPY_FUSED_APPLY2
};
// reciprocal_kernel: 1 / a in both forms.
struct Reciprocal {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return a.reciprocal(); }
  static float scalar(float a) { return 1.f / a; }
  PPY_FUSED_APPLY1
};
// neg_kernel and abs_kernel (UnaryOpsKernel.cpp): sign-bit operations in both forms.
struct Neg {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return a.neg(); }
  static float scalar(float a) { return -a; }
  PPY_FUSED_APPLY1
};
struct Abs {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return a.abs(); }
  static float scalar(float a) { return std::abs(a); }
  PPY_FUSED_APPLY1
};
// relu is clamp_min(x, 0): vec::clamp_min (max with the operand second: NaN and -0 pass through) and
// std::max(a, 0) (the same for NaN and -0).
struct Relu {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return at::vec::clamp_min(a, VecF(0.f)); }
  static float scalar(float a) { return std::max(a, 0.f); }
  PPY_FUSED_APPLY1
};
// sigmoid_kernel: Sleef's expf (u10) in the body, libm's expf in the tail.
struct Sigmoid {
  static constexpr bool kPositionDependent = true;
  static int64_t grain(int64_t n) { return default_grain(n); }
  static VecF vec(VecF a) { return (VecF(1.f) + a.neg().exp()).reciprocal(); }
  static float scalar(float a) { return 1.f / (1.f + std::exp(-a)); }
  PPY_FUSED_APPLY1
};
// silu_kernel (Activation.cpp): x / (1 + exp(-x)), Sleef's expf in the body, libm's in the tail.
struct Silu {
  static constexpr bool kPositionDependent = true;
  static int64_t grain(int64_t n) { return default_grain(n); }
  static VecF vec(VecF a) { return a / (VecF(1.f) + a.neg().exp()); }
  static float scalar(float a) { return a / (1.f + std::exp(-a)); }
  PPY_FUSED_APPLY1
};
// GeluKernelImpl, approximate="tanh": 0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3))). libtorch's
// compiler contracted x + kKappa * x_cube into one FMA in both forms (nothing else in it is a product
// feeding a sum), so it is written as one here; Sleef's tanhf (u10) in the body, libm's in the tail.
// Its grain is numel / threads above 16384 elements.
struct GeluTanh {
  static constexpr bool kPositionDependent = true;
  static int64_t grain(int64_t n) { return n > 16384 ? n / at::get_num_threads() : default_grain(n); }
  static VecF vec(VecF x) {
    const VecF kBeta(float(M_SQRT2 * M_2_SQRTPI * 0.5));
    const VecF kKappa(float(0.044715));
    const VecF x_cube = x * x * x;
    const VecF inner = kBeta * at::vec::fmadd(kKappa, x_cube, x);
    return detail::mul_first(VecF(0.5f) * x, VecF(1.f) + inner.tanh());
  }
  static float scalar(float x) {
    const float kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;
    const float kKappa = 0.044715;
    const float x_cube = x * x * x;
    const float inner = kBeta * std::fma(kKappa, x_cube, x);
    return 0.5f * x * (1.f + std::tanh(inner));
  }
  PPY_FUSED_APPLY1
};

#undef PPY_FUSED_APPLY1
#undef PPY_FUSED_APPLY2

// exp and tanh of float: eager runs them through MKL (vml::vexp / vml::vtanh on each chunk), one
// formula for every element wherever it lies, so they take a block of any length.
struct Exp {
  static constexpr bool kPositionDependent = false;
  static void block(float* out, const float* in, int64_t n) { VMSEXP_64_(&n, in, out, &kVmlMode); }
};
struct Tanh {
  static constexpr bool kPositionDependent = false;
  static void block(float* out, const float* in, int64_t n) { VMSTANH_64_(&n, in, out, &kVmlMode); }
};

// ---- The loop -------------------------------------------------------------------------------------

// The length of the chunks eager's loop gives n elements at this grain (TensorIteratorBase::for_each,
// at::parallel_for, invoke_parallel in ATen/ParallelOpenMP.h); n when it runs serially.
inline int64_t chunk_length(int64_t n, int64_t grain) {
  const int64_t threads = at::get_num_threads();
  if (n <= grain || n <= 1 || threads == 1 || at::in_parallel_region()) {
    return n;
  }
  const int64_t used = std::min<int64_t>(threads, (n + grain - 1) / grain);
  return (n + used - 1) / used;
}

// Whether ops whose tails matter, at grains g and h, end their tails at the same places for n elements:
// a chain fuses only if all its position-dependent ops agree.
inline bool same_chunks(int64_t n, int64_t g, int64_t h) {
  return g == h || chunk_length(n, g) == chunk_length(n, h);
}

// Calls body(begin, nvec, ntail) over [0, n) in eager's loop shape for this grain: positions
// [begin, begin + nvec) are vector-body positions (nvec a multiple of kVecStep), the ntail after them
// scalar-tail ones; each call covers at most kBlock positions.
template <class Body>
inline void for_each_block(int64_t n, int64_t grain, const Body& body) {
  auto chunk = [&](int64_t b, int64_t e) {
    const int64_t vec_end = b + (e - b) / kVecStep * kVecStep;
    for (int64_t i = b; i < vec_end; i += kBlock) {
      body(i, std::min(kBlock, vec_end - i), int64_t(0));
    }
    // The tail is shorter than kVecStep <= kBlock: one call.
    if (vec_end < e) {
      body(vec_end, int64_t(0), e - vec_end);
    }
  };
  if (n <= 0) {
    return;
  }
  if (n < grain || at::get_num_threads() == 1) {
    chunk(0, n);  // TensorIteratorBase::for_each's serial case
    return;
  }
  at::parallel_for(0, n, grain, chunk);
}

// out[i] = f(in[i]...) for the nvec body positions with f over VecF, then the ntail tail positions with
// f over float (ntail is a chunk's whole tail: what kMulTailKeepsA is indexed by). Pointers are already
// offset to the run's first position; out may alias an input.
template <class F, class... In>
inline void map(float* out, int64_t nvec, int64_t ntail, const F& f, In... in) {
  int64_t i = 0;
  for (; i < nvec; i += VecF::size()) {
    f(load<VecF>(in, i)...).store(out + i);
  }
  for (; i < nvec + ntail; ++i) {
    detail::tail_lane = {ntail, i - nvec};
    out[i] = f(load<float>(in, i)...);
  }
}

// In a block: a pointer advanced to the run, or a broadcast operand as it is.
inline const float* at_offset(const float* p, int64_t begin) {
  return p + begin;
}
inline Bcast at_offset(Bcast s, int64_t) {
  return s;
}

template <class Op, class = void>
struct has_block : std::false_type {};
template <class Op>
struct has_block<Op, std::void_t<decltype(&Op::block)>> : std::true_type {};

// One op over whole tensors as the fused loop runs it: the single-op chain, used to check each op on
// its own against eager (benchmarks/fusion_exact.py) and the simplest example of a chain.
template <class Op, class... In>
inline void run_op(float* out, int64_t n, In... in) {
  int64_t grain = at::internal::GRAIN_SIZE;
  if constexpr (Op::kPositionDependent) {
    grain = Op::grain(n);
  }
  for_each_block(n, grain, [&](int64_t begin, int64_t nvec, int64_t ntail) {
    if constexpr (has_block<Op>::value) {
      Op::block(out + begin, at_offset(in, begin)..., nvec + ntail);
    } else {
      map(out + begin, nvec, ntail, [](auto... v) { return Op::apply(v...); }, at_offset(in, begin)...);
    }
  });
}

}  // namespace ppy::fused
