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
// float32 throughout; bfloat16 and float16 for the unary ops, each op computed through float and rounded
// back as eager's reduced-precision kernels do (so a chain rounds per op).
//
// How a chain is written: for_each_block(n, grain, step, body) calls body(begin, nvec, ntail) for each
// run of positions; body evaluates the chain over them with map() (ops with a Vectorized and a scalar form,
// composed in one generic functor evaluated in registers) and, for the ops eager computes through MKL's
// vector math library, with their block() into a stack buffer.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/TensorIterator.h>
#include <ATen/Version.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/core/GradMode.h>
#include <c10/util/bit_cast.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
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
template <class T>
constexpr int64_t vec_step = 2 * at::vec::Vectorized<T>::size();
constexpr int64_t kVecStep = vec_step<float>;
// Elements one body call sees at most (a multiple of every type's step): a stack buffer of this many
// floats (8 KB) stays in L1, and an MKL call over it costs little more than its elements (with 512,
// GELU-tanh on 1024x1024 made four times as many vmsTanh calls and was slower than op by op on 2 threads).
constexpr int64_t kBlock = 64 * kVecStep;

// The formulas below are eager's AVX512 kernels' (checked on this build of torch): where eager runs
// another capability (ATEN_CPU_CAPABILITY, an older CPU), a chain runs op by op.
inline bool capability_matches() {
  static const bool same = at::get_cpu_capability() == "AVX512";
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

template <class V, class S>
inline V load(const S* p, int64_t i) {
  if constexpr (std::is_same_v<V, S>) {
    return p[i];
  } else {
    return V::loadu(p + i);
  }
}
template <class V>
inline V load(Bcast s, int64_t) {
  return V(s.v);
}

// ---- Ops ------------------------------------------------------------------------------------------
// Each op: vec() is eager's Vectorized lambda, scalar() its scalar lambda, as libtorch compiled them;
// apply() picks by type so one generic functor serves body and tail. kPositionDependent: for float32,
// vec and scalar round differently, so which elements take the tail matters (position_dependent() for
// any type); grain_of() and step_of() give the op's loop.

namespace detail {
template <class T>
constexpr bool is_reduced = std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;
template <class T>
struct reduced_vec : std::false_type {};
template <class T>
struct reduced_vec<at::vec::Vectorized<T>> : std::bool_constant<is_reduced<T>> {};
template <class T>
constexpr bool is_reduced_vec = reduced_vec<T>::value;

// A half or bfloat16 vector through float (opmath): both halves computed in float, rounded back once,
// as eager's reduced-precision kernels do (convert_to_float / convert_from_float).
template <class V, class F>
inline V through_float(V a, const F& f) {
  using S = typename V::value_type;
  auto [a0, a1] = at::vec::convert_to_float<S>(a);
  return at::vec::convert_from_float<S>(f(a0), f(a1));
}
}  // namespace detail

// float: vec or scalar; half/bfloat16 (vector or element): the float formulas through float, rounded
// once at the end of the op. An op whose reduced-precision kernel is not that declares its own apply.
#define PPY_FUSED_APPLY1                                                    \
  template <class T>                                                        \
  static T apply(T a) {                                                     \
    if constexpr (std::is_same_v<T, float>) {                               \
      return scalar(a);                                                     \
    } else if constexpr (std::is_same_v<T, VecF>) {                         \
      return vec(a);                                                        \
    } else if constexpr (detail::is_reduced_vec<T>) {                       \
      return detail::through_float(a, [](VecF v) { return vec(v); });       \
    } else {                                                                \
      return T(scalar(static_cast<float>(a)));                              \
    }                                                                       \
  }
// half/bfloat16 where eager's lambdas work on the reduced type itself (no trip through float): the op's
// own reduced_vec (a vector) and reduced (an element).
#define PPY_FUSED_APPLY_REDUCED                       \
  template <class T>                                  \
  static T apply(T a) {                               \
    if constexpr (std::is_same_v<T, float>) {         \
      return scalar(a);                               \
    } else if constexpr (std::is_same_v<T, VecF>) {   \
      return vec(a);                                  \
    } else if constexpr (detail::is_reduced_vec<T>) { \
      return reduced_vec(a);                          \
    } else {                                          \
      return reduced(a);                              \
    }                                                 \
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
  template <class V>
  static V reduced_vec(V a) { return a.neg(); }
  template <class T>
  static T reduced(T a) { return -a; }
  PPY_FUSED_APPLY_REDUCED
};
struct Abs {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return a.abs(); }
  static float scalar(float a) { return std::abs(a); }
  template <class V>
  static V reduced_vec(V a) { return a.abs(); }
  template <class T>
  static T reduced(T a) { return T(std::abs(static_cast<float>(a))); }
  PPY_FUSED_APPLY_REDUCED
};
// relu is clamp_min(x, 0): vec::clamp_min (max with the operand second: NaN and -0 pass through) and
// std::max(a, 0) (the same for NaN and -0).
struct Relu {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return at::vec::clamp_min(a, VecF(0.f)); }
  static float scalar(float a) { return std::max(a, 0.f); }
  template <class V>
  static V reduced_vec(V a) { return at::vec::clamp_min(a, V(typename V::value_type(0.f))); }
  template <class T>
  static T reduced(T a) { return std::max(a, T(0.f)); }
  PPY_FUSED_APPLY_REDUCED
};
// pow(x, 2) and pow(x, 3): pow_tensor_scalar_optimized_kernel (PowKernel.cpp) special-cases these
// exponents as base * base and base * base * base, left to right, in both forms. One operand, so
// whichever comes first, a NaN comes out as itself, quieted. float32 only: bfloat16's vector product
// rounds after each multiplication, and float16 takes another path.
#define PPY_FUSED_APPLY_FLOAT                                                           \
  template <class T>                                                                    \
  static T apply(T a) {                                                                 \
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, VecF>, "float32 only"); \
    if constexpr (std::is_same_v<T, float>) {                                           \
      return scalar(a);                                                                 \
    } else {                                                                            \
      return vec(a);                                                                    \
    }                                                                                   \
  }
// A cast to float32 (x.float(), x.to(torch.float32)). Of a float32 value, the value itself (eager returns
// the tensor). Of a bfloat16 leaf, the chain reads the leaf widened block by block (widen_at): eager's
// copy kernel gives the 16 bits shifted left, in its vector body and its tail alike (NaN payloads and
// signalling NaNs kept; all 65536 patterns, every length to 140). float16 stays out: eager's copy turns
// a NaN into 0x7FFFFFFF in the last n % 8 elements of a loop and keeps its payload elsewhere.
struct Widen {
  static constexpr bool kPositionDependent = false;
  template <class T>
  static T apply(T a) {
    return a;
  }
};
struct Square {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return a * a; }
  static float scalar(float a) { return a * a; }
  PPY_FUSED_APPLY_FLOAT
};
struct Cube {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF a) { return a * a * a; }
  static float scalar(float a) { return a * a * a; }
  PPY_FUSED_APPLY_FLOAT
};
// Ops with a float32 form only.
template <class Op>
constexpr bool float_only = std::is_same_v<Op, Square> || std::is_same_v<Op, Cube>;

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
  // Which side's NaN the last product keeps differs between libtorch's float and bfloat16 builds of the
  // kernel (0.5 * x's) and its float16 one (the tanh side's); bfloat16 rounds every NaN alike anyway.
  template <bool kTanhSideFirst = false>
  static VecF vec(VecF x) {
    const VecF kBeta(float(M_SQRT2 * M_2_SQRTPI * 0.5));
    const VecF kKappa(float(0.044715));
    const VecF x_cube = x * x * x;
    const VecF inner = kBeta * at::vec::fmadd(kKappa, x_cube, x);
    if constexpr (kTanhSideFirst) {
      return detail::mul_first(VecF(1.f) + inner.tanh(), VecF(0.5f) * x);
    } else {
      return detail::mul_first(VecF(0.5f) * x, VecF(1.f) + inner.tanh());
    }
  }
  static float scalar(float x) {
    const float kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;
    const float kKappa = 0.044715;
    const float x_cube = x * x * x;
    const float inner = kBeta * std::fma(kKappa, x_cube, x);
    return 0.5f * x * (1.f + std::tanh(inner));
  }
  template <class T>
  static T apply(T a) {
    if constexpr (std::is_same_v<T, float>) {
      return scalar(a);
    } else if constexpr (std::is_same_v<T, VecF>) {
      return vec(a);
    } else if constexpr (std::is_same_v<T, at::vec::Vectorized<c10::Half>>) {
      return detail::through_float(a, [](VecF v) { return vec<true>(v); });
    } else if constexpr (detail::is_reduced_vec<T>) {
      return detail::through_float(a, [](VecF v) { return vec(v); });
    } else {
      return T(scalar(static_cast<float>(a)));
    }
  }
};

// Comparisons and where. eager's comparison kernels with a bool result (BinaryOpsKernel.cpp) are
// scalar `a > b` (and ==, !=, <, <=, >=) over the operands in their common dtype; where_kernel
// (TensorCompare.cpp) is `cond ? a : b`. Both exact, so position-free. In a chain the condition is a
// lane mask, as at::vec's comparison operators give it (all bits set where true; their predicates are
// C's: ordered and quiet, != unordered), and an element a float with the same bits; where selects with
// blendv, copying the chosen operand's bits. A condition is only ever read by a where.
namespace detail {
inline float lane_mask(bool c) {
  return c ? c10::bit_cast<float>(~uint32_t(0)) : 0.f;
}
inline bool lane_true(float m) {
  return c10::bit_cast<uint32_t>(m) != 0;
}
}  // namespace detail
#define PPY_FUSED_COMPARE(Name, op)                                             \
  struct Name {                                                                 \
    static constexpr bool kPositionDependent = false;                           \
    static VecF vec(VecF a, VecF b) { return a op b; }                          \
    static float scalar(float a, float b) { return detail::lane_mask(a op b); } \
    PPY_FUSED_APPLY2                                                            \
  };
PPY_FUSED_COMPARE(Eq, ==)
PPY_FUSED_COMPARE(Ne, !=)
PPY_FUSED_COMPARE(Lt, <)
PPY_FUSED_COMPARE(Le, <=)
PPY_FUSED_COMPARE(Gt, >)
PPY_FUSED_COMPARE(Ge, >=)
#undef PPY_FUSED_COMPARE
struct Where {
  static constexpr bool kPositionDependent = false;
  static VecF vec(VecF cond, VecF a, VecF b) { return VecF::blendv(b, a, cond); }
  static float scalar(float cond, float a, float b) { return detail::lane_true(cond) ? a : b; }
  template <class T>
  static T apply(T cond, T a, T b) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, VecF>, "float32 only");
    if constexpr (std::is_same_v<T, float>) {
      return scalar(cond, a, b);
    } else {
      return vec(cond, a, b);
    }
  }
};

#undef PPY_FUSED_APPLY1
#undef PPY_FUSED_APPLY_FLOAT
#undef PPY_FUSED_APPLY_REDUCED
#undef PPY_FUSED_APPLY2

// exp and tanh of float: eager runs them through MKL (vml::vexp / vml::vtanh on each chunk), one
// formula for every element wherever it lies, so they take a block of any length.
// For half and bfloat16 they are vml.h's generic path instead: vec::map through float with Sleef's
// u10 functions, a tail element in a partial vector, so one formula everywhere again (apply()).
#define PPY_FUSED_APPLY_VML(fn)                                                                  \
  template <class T>                                                                             \
  static T apply(T a) {                                                                          \
    static_assert(!std::is_same_v<T, float> && !std::is_same_v<T, VecF>, "float's is MKL's: block()"); \
    if constexpr (detail::is_reduced_vec<T>) {                                                   \
      return detail::through_float(a, [](VecF v) { return v.fn(); });                            \
    } else {                                                                                     \
      T lanes[at::vec::Vectorized<T>::size()];                                                   \
      detail::through_float(at::vec::Vectorized<T>(a), [](VecF v) { return v.fn(); }).store(lanes); \
      return lanes[0];                                                                           \
    }                                                                                            \
  }
struct Exp {
  static constexpr bool kPositionDependent = false;
  static void block(float* out, const float* in, int64_t n) { VMSEXP_64_(&n, in, out, &kVmlMode); }
  PPY_FUSED_APPLY_VML(exp)
};
struct Tanh {
  static constexpr bool kPositionDependent = false;
  static void block(float* out, const float* in, int64_t n) { VMSTANH_64_(&n, in, out, &kVmlMode); }
  PPY_FUSED_APPLY_VML(tanh)
};
#undef PPY_FUSED_APPLY_VML

// ---- Operands a chain takes ------------------------------------------------------------------------

// A defined, contiguous, strided float32 CPU tensor recorded by no autograd graph, and no dispatch key
// beyond a plain CPU tensor's (CPU, ADInplaceOrView, AutogradCPU, AutocastCPU; an inference tensor has
// fewer); with at least one dimension (operand_fits), what eager runs through vectorized_loop with a
// fresh contiguous output of its shape.
inline bool plain_operand(const at::Tensor& t, bool widened = false) {
  if (!t.defined() || t.layout() != at::kStrided || !t.is_cpu() || !t.is_contiguous() || t.is_conj() ||
      t.is_neg() || t._is_zerotensor()) {
    return false;
  }
  const at::ScalarType dtype = t.scalar_type();
  if (dtype != at::kFloat && !(widened && dtype == at::kBFloat16)) {
    return false;
  }
  if (c10::GradMode::is_enabled() && t.requires_grad()) {
    return false;
  }
  static const c10::DispatchKeySet plain({c10::DispatchKey::CPU, c10::DispatchKey::ADInplaceOrView,
                                          c10::DispatchKey::AutogradCPU, c10::DispatchKey::AutocastCPU});
  // DispatchKeySet's difference keeps backend bits: compare the functionality bits alone.
  const uint64_t extra = (t.key_set() - plain).raw_repr() & ~c10::backend_bitset_mask.raw_repr();
  return t.key_set().has(c10::DispatchKey::CPU) && extra == 0;
}
inline bool operand_fits(const at::Tensor& t) {
  return t.dim() > 0 && plain_operand(t);
}
// A 0-dim operand that is not NaN: vectorized_loop takes it as it takes a Python number (a scalar
// operand broadcast into a vector, read as itself in the tail), so a chain reads it from a buffer
// filled with its value. NaN is left out as NaN numbers are (the tail's epilogue was not measured).
inline bool scalar_fits(const at::Tensor& t) {
  return t.defined() && t.dim() == 0 && plain_operand(t) && !std::isnan(*t.const_data_ptr<float>());
}
// An operand of the chain's shape `full`, or a 0-dim one.
inline bool full_or_scalar(const at::Tensor& t, at::IntArrayRef full) {
  return t.dim() == 0 ? scalar_fits(t) : operand_fits(t) && t.sizes() == full;
}
// A leaf only casts to float32 read: float32 or bfloat16, of the chain's shape `full`.
inline bool widenable(const at::Tensor& t, at::IntArrayRef full) {
  return t.dim() > 0 && plain_operand(t, /*widened=*/true) && t.sizes() == full;
}
// A widenable leaf's elements [begin, begin + len) as float32: its data, or widened into `buf`.
inline const float* widen_at(float* buf, const at::Tensor& t, int64_t begin, int64_t len) {
  if (t.scalar_type() != at::kBFloat16) {
    return t.const_data_ptr<float>() + begin;
  }
  const uint16_t* p = reinterpret_cast<const uint16_t*>(t.const_data_ptr<c10::BFloat16>()) + begin;
  int64_t k = 0;
  for (; k + 16 <= len; k += 16) {  // 16 values: zero-extended to 32 bits, shifted into the high half
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + k));
    _mm512_storeu_si512(buf + k, _mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  }
  for (; k < len; ++k) {
    const uint32_t bits = static_cast<uint32_t>(p[k]) << 16;
    std::memcpy(buf + k, &bits, sizeof bits);
  }
  return buf;
}
// Of operands that have the chain's shape or none, the first that has one.
inline const at::Tensor& first_shaped(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts) {
    if (t->defined() && t->dim() > 0) {
      return *t;
    }
  }
  return **ts.begin();
}
// A kBlock buffer of one 0-dim operand's value.
inline void fill_scalar(float* buf, const at::Tensor& t) {
  std::fill(buf, buf + kBlock, *t.const_data_ptr<float>());
}

// A row operand: an operand that fits, with `full`'s trailing sizes after leading ones of size 1 (a
// bias of the chain's last dimensions), or `full` itself, or a 0-dim one. Eager broadcasts it over the
// leading sizes.
inline bool row_fits(const at::Tensor& t, at::IntArrayRef full) {
  if (t.dim() == 0) {
    return scalar_fits(t);  // a row of one element
  }
  if (!operand_fits(t) || t.dim() > static_cast<int64_t>(full.size())) {
    return false;
  }
  const auto sizes = t.sizes();
  const int64_t offset = static_cast<int64_t>(full.size()) - t.dim();
  int64_t d = 0;
  while (d < t.dim() && sizes[d] == 1 && full[offset + d] != 1) {
    ++d;  // a leading dimension the row is broadcast over
  }
  for (; d < t.dim(); ++d) {
    if (sizes[d] != full[offset + d]) {
      return false;
    }
  }
  return true;
}

// Of candidate operands that are all rows of one another, the one with the chain's shape: the most elements.
inline const at::Tensor& widest(std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor* best = *ts.begin();
  for (const at::Tensor* t : ts) {
    if (t->defined() && (!best->defined() || t->numel() > best->numel())) {
      best = t;
    }
  }
  return *best;
}

// A row operand's elements at positions [begin, begin + len) of the n the chain computes: its own
// data where it has all n, else the row repeated, copied into buf (len <= kBlock).
inline const float* row_at(float* buf, const float* row, int64_t period, int64_t n, int64_t begin, int64_t len) {
  if (period == n) {
    return row + begin;
  }
  int64_t at = begin % period;
  for (int64_t k = 0; k < len;) {
    const int64_t take = std::min(len - k, period - at);
    std::copy(row + at, row + at + take, buf + k);
    k += take;
    at = 0;
  }
  return buf;
}

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
// a chain fuses only if all its position-dependent ops agree, on this and on their vector step
// (step_of; the same for every float32 op).
inline bool same_chunks(int64_t n, int64_t g, int64_t h) {
  return g == h || chunk_length(n, g) == chunk_length(n, h);
}

// Calls body(begin, nvec, ntail) over [0, n) in eager's loop shape for this grain and vector step
// (step_of): positions [begin, begin + nvec) are vector-body positions (nvec a multiple of step), the
// ntail after them scalar-tail ones; each call covers at most kBlock positions.
template <class Body>
inline void for_each_block(int64_t n, int64_t grain, int64_t step, const Body& body) {
  auto chunk = [&](int64_t b, int64_t e) {
    const int64_t vec_end = b + (e - b) / step * step;
    for (int64_t i = b; i < vec_end; i += kBlock) {
      body(i, std::min(kBlock, vec_end - i), int64_t(0));
    }
    // The tail is shorter than step <= kBlock: one call.
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
template <class F, class S, class... In>
inline void map(S* out, int64_t nvec, int64_t ntail, const F& f, In... in) {
  using V = at::vec::Vectorized<S>;
  int64_t i = 0;
  for (; i < nvec; i += V::size()) {
    f(load<V>(in, i)...).store(out + i);
  }
  for (; i < nvec + ntail; ++i) {
    detail::tail_lane = {ntail, i - nvec};
    out[i] = f(load<S>(in, i)...);
  }
}

// In a block: a pointer advanced to the run, or a broadcast operand as it is.
template <class S>
inline const S* at_offset(const S* p, int64_t begin) {
  return p + begin;
}
inline Bcast at_offset(Bcast s, int64_t) {
  return s;
}

template <class Op, class = void>
struct has_block : std::false_type {};
template <class Op>
struct has_block<Op, std::void_t<decltype(&Op::block)>> : std::true_type {};

// Whether an op's tail rounds differently from its body for element type S. For half and bfloat16 every
// op's may (its scalar form rounds through c10's conversions, its vector form through vec's, which treat
// NaN differently), except the vml ones, whose tail is a partial vector.
template <class Op, class S>
constexpr bool position_dependent() {
  if constexpr (detail::is_reduced<S>) {
    return !has_block<Op>::value;
  } else {
    return Op::kPositionDependent;
  }
}

// The vector step of eager's loop for Op on S: two vectors of the kernel's capability. neg, abs and
// relu run their AVX2 build (DispatchStub gives a REGISTER_DISPATCH kernel's AVX512 slot to AVX2), which
// only shows where body and tail differ: for half and bfloat16.
template <class Op, class S>
constexpr int64_t step_of() {
  constexpr bool avx2_kernel = std::is_same_v<Op, Neg> || std::is_same_v<Op, Abs> || std::is_same_v<Op, Relu>;
  if constexpr (detail::is_reduced<S> && avx2_kernel) {
    return 2 * 16;  // two AVX2 vectors of 16 half/bfloat16 values
  } else {
    return vec_step<S>;
  }
}

// The grain eager's kernel for Op uses for n elements.
template <class Op>
inline int64_t grain_of(int64_t n) {
  if constexpr (std::is_same_v<Op, GeluTanh>) {
    return Op::grain(n);
  } else {
    return default_grain(n);
  }
}

// One op over whole tensors as the fused loop runs it: the single-op chain, used to check each op on
// its own against eager (benchmarks/fusion_exact.py) and the simplest example of a chain.
template <class Op, class S, class... In>
inline void run_op(S* out, int64_t n, In... in) {
  for_each_block(n, grain_of<Op>(n), step_of<Op, S>(), [&](int64_t begin, int64_t nvec, int64_t ntail) {
    if constexpr (has_block<Op>::value && std::is_same_v<S, float>) {
      Op::block(out + begin, at_offset(in, begin)..., nvec + ntail);
    } else {
      map(out + begin, nvec, ntail, [](auto... v) { return Op::apply(v...); }, at_offset(in, begin)...);
    }
  });
}

}  // namespace ppy::fused
