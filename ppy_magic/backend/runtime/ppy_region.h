// Helpers for generated region code: Python's semantics for the few things a
// region computes itself (int/float arithmetic on sizes and parameters,
// math.*, unpacking checks) and eager's wrapped numbers. Everything else a
// region does is an at:: call through the dispatcher.
#pragma once
#include <Python.h>

#include <ATen/DeviceGuard.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIndexing.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/GradMode.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <ATen/ops/to.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ppy_abi.h"

namespace ppy {

// A Python exception raised by region code; the entry turns it into Out::error.
struct Raise {
  PyError kind;
  std::string message;
};

[[noreturn]] inline void raise(PyError kind, std::string message) {
  throw Raise{kind, std::move(message)};
}

// raise SomeError(message) of a class a module defines ("module:qualname"), such as a library's own error.
[[noreturn]] inline void raise_custom(const char* type, const std::string& message) {
  throw Raise{PyError::Custom, std::string(type) + '\n' + message};
}

// warnings.warn(message[, DeprecationWarning]): the runtime's warning handler issues it as a Python warning
// when the call ends (no C++ source location: Python attributes it to the region's caller).
inline void warn(const std::string& message, bool deprecation) {
  const c10::SourceLocation nowhere{nullptr, nullptr, 0};
  c10::Warning::warning_variant_t type = c10::UserWarning();
  if (deprecation) type = c10::DeprecationWarning();
  c10::warn(c10::Warning(type, nowhere, message, /*verbatim=*/true));
}

// A Python number where ATen wants a Tensor, exactly as PyTorch's argument
// parser makes it: a CPU 0-dim tensor flagged as a wrapped number.
inline at::Tensor wrapped_number(const at::Scalar& s) {
  at::Tensor t = at::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// A wrapped number built once and kept for the life of the process: level 2's
// hoisted constants, passed only while Out::unobserved holds (no autograd graph,
// dispatch mode or transform can keep a reference to them). Never freed: a
// static at::Tensor destroyed at exit could outlive the allocator of its memory.
inline const at::Tensor& constant_number(const at::Scalar& s) { return *new at::Tensor(wrapped_number(s)); }

// ---- level 3: an element-wise op's result written into a dead temporary ----
// Which ops, and why the out= call is then bit-for-bit the functional call:
// backend/reuse.py. The region asks only when Out::unobserved is set (autograd is
// not recording, and nothing else can observe the write).

// The strides empty() gives a tensor of t's sizes.
inline bool standard_strides(const at::Tensor& t) {
  const at::IntArrayRef sizes = t.sizes(), strides = t.strides();
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (strides[d] != expected) return false;
    expected *= std::max<int64_t>(sizes[d], 1);
  }
  return true;
}

// t may receive the result in place of a fresh tensor: nothing else refers to it
// or to its storage (no view, no alias, not an argument: the caller would hold
// a reference), and it is a real floating tensor laid out as a fresh result is,
// storage included (offset 0, exactly its elements): an op whose schema promises a
// new tensor may still hand back a view into a larger buffer it made, and the
// result would then differ from eager's fresh one in storage_offset or storage size.
inline bool reusable(const at::Tensor& t) {
  if (!t.defined() || t.use_count() != 1 || !t.has_storage() || t.storage().use_count() != 1) return false;
  const at::ScalarType dt = t.scalar_type();
  if (dt != at::kFloat && dt != at::kDouble && dt != at::kHalf && dt != at::kBFloat16) return false;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return t.layout() == at::kStrided && !impl->is_wrapped_number() && !t.is_conj() && !t.is_neg() &&
         t.numel() > 0 && standard_strides(t) && t.storage_offset() == 0 &&
         t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

// Another operand o leaves the result t's shape and does not change how the
// op iterates: 0-dim, or laid out as a fresh tensor and broadcast into t's shape.
inline bool fits(const at::Tensor& t, const at::Tensor& o) {
  if (!o.defined()) return true;
  if (o.layout() != at::kStrided || o.is_conj() || o.is_neg()) return false;
  if (o.dim() == 0) return o.device() == t.device() || o.is_cpu();
  if (o.device() != t.device() || o.dim() > t.dim() || !standard_strides(o)) return false;
  const at::IntArrayRef ts = t.sizes(), os = o.sizes();
  const size_t off = ts.size() - os.size();
  for (size_t d = 0; d < os.size(); ++d) {
    if (os[d] != 1 && os[d] != ts[off + d]) return false;
  }
  return true;
}
inline bool fits(const at::Tensor& t, const ::std::optional<at::Tensor>& o) { return !o || fits(t, *o); }
inline bool fits(const at::Tensor&, ::std::nullopt_t) { return true; }

// No operand of the op is recorded by autograd. Out::unobserved already says no
// argument requires grad (or grad mode is off); this also covers tensors a region
// obtains otherwise, so that a reused temporary is never in, or saved by, a graph.
template <typename T>
inline bool records(const T&) { return false; }  // a number, a Scalar, a size: not a tensor
inline bool records(const at::Tensor& t) { return t.defined() && t.requires_grad(); }
inline bool records(const ::std::optional<at::Tensor>& t) { return t && records(*t); }
template <typename... T>
inline bool grad_free(const T&... t) {
  return !c10::GradMode::is_enabled() || !(records(t) || ...);
}

// The dispatch keys of an op's operands (none for an operand that is not a tensor), for write_into and call_below.
template <typename T>
inline c10::DispatchKeySet key_set_of(const T&) { return c10::DispatchKeySet(); }
inline c10::DispatchKeySet key_set_of(const at::Tensor& t) { return t.defined() ? t.key_set() : c10::DispatchKeySet(); }
inline c10::DispatchKeySet key_set_of(const ::std::optional<at::Tensor>& t) {
  return t ? key_set_of(*t) : c10::DispatchKeySet();
}
template <typename... T>
inline c10::DispatchKeySet keys_of(const T&... t) {
  return (key_set_of(t) | ...);
}

// The key set to redispatch an op to, skipping the Autograd and ADInplaceOrView
// kernels, or empty when it must dispatch as usual: only with `direct`
// (Out::unobserved, and no profiler or other RecordFunction observer) and operands
// that carry no dispatch key below ADInplaceOrView but their dense backend's.
inline c10::DispatchKeySet below_autograd(bool direct, c10::DispatchKeySet keys) {
  const c10::DispatchKeySet below = keys & c10::after_ADInplaceOrView_keyset;
  static const uint64_t dense = c10::DispatchKeySet(c10::DispatchKey::Dense).raw_repr() |
                                c10::backend_bitset_mask.raw_repr();
  if (direct && !below.empty() && (below.raw_repr() & ~dense) == 0) return below;
  return c10::DispatchKeySet();
}

// Runs the in-place or out= overload Op that writes into a dead temporary. When
// below_autograd allows it, the call goes straight to the backend kernel: the
// Autograd kernel would only check that no tensor requires grad (none does) and the
// ADInplaceOrView kernel only bumps the temporary's version counter, which
// nothing else can read. Otherwise it dispatches as usual.
template <typename Op, typename... A>
inline void write_into(bool direct, c10::DispatchKeySet keys, A&&... args) {
  const c10::DispatchKeySet below = below_autograd(direct, keys);
  if (!below.empty()) {
    Op::redispatch(below, std::forward<A>(args)...);
  } else {
    Op::call(std::forward<A>(args)...);
  }
}

// Level 3: a functional op of the allow-list (reuse.py) or mm, called where no
// temporary is reused. While nothing can observe the region (`direct`) and no
// operand requires grad, it goes straight to the backend kernel: with nothing
// requiring grad the Autograd kernel only redispatches, and a functional op's
// ADInplaceOrView kernel is a fallthrough (no version counter to bump, no view to
// record). The result is the backend kernel's, as eager's is.
template <typename Op, typename... A>
inline at::Tensor call_below(bool direct, A&&... args) {
  if (direct && grad_free(args...)) {
    const c10::DispatchKeySet below = below_autograd(true, keys_of(args...));
    if (!below.empty()) return Op::redispatch(below, std::forward<A>(args)...);
  }
  return Op::call(std::forward<A>(args)...);
}

// No profiler (or other RecordFunction callback) would see a call that skips the dispatcher's entry.
inline bool unprofiled() { return !at::hasCallbacks(); }

// The dtype PyTorch's type promotion gives these operands (what TensorIterator computes in).
inline void promote(at::native::ResultTypeState& s, const at::Tensor& t) { s = at::native::update_result_type_state(t, s); }
inline void promote(at::native::ResultTypeState& s, const at::Scalar& v) { s = at::native::update_result_type_state(v, s); }
inline void promote(at::native::ResultTypeState& s, const ::std::optional<at::Tensor>& t) {
  if (t) promote(s, *t);
}
inline void promote(at::native::ResultTypeState& s, const ::std::optional<at::Scalar>& v) {
  if (v) promote(s, *v);
}
inline void promote(at::native::ResultTypeState&, ::std::nullopt_t) {}
template <typename... A>
inline at::ScalarType result_dtype(const A&... a) {
  at::native::ResultTypeState s;
  (promote(s, a), ...);
  return at::native::result_type(s);
}

// `x[index] = number`, as PyTorch's __setitem__ makes the value tensor
// (valueToTensor in torch/csrc/autograd/python_variable_indexing.cpp).
inline void set_item_scalar(const at::Tensor& self, at::ArrayRef<at::indexing::TensorIndex> index,
                            const at::Scalar& v) {
  at::Tensor value;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    const at::Device device = self.device();
    if (c10::isQIntType(self.scalar_type())) {
      value = at::indexing::scalarToTensor(v, at::device(at::kCPU).dtype(at::kFloat), at::Device(at::kCPU));
    } else if (device.is_cuda()) {
      value = at::indexing::scalarToTensor(v, self.options(), at::Device(at::kCPU));
    } else {
      value = at::indexing::scalarToTensor(v, self.options(), device);
    }
  }
  at::indexing::set_item(self, index, value);
}

// `x[[0, -1]]`: PyTorch turns a list of ints into a Long tensor on the indexed tensor's device
// (sequenceToVariable in python_variable_indexing.cpp).
inline at::Tensor index_list(const at::Tensor& self, at::ArrayRef<int64_t> values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t v : values) *p++ = v;
  return self.device().is_cpu() ? t : t.to(self.device());
}
inline at::Tensor index_list(const at::Tensor& self, std::initializer_list<int64_t> values) {
  return index_list(self, at::ArrayRef<int64_t>(values.begin(), values.size()));
}

// ---- int arithmetic: Python ints on int64, overflow is an error, not a wrap ----
[[noreturn]] inline void int_overflow() {
  raise(PyError::OverflowError, "integer result does not fit in 64 bits (Python would use a big int)");
}
inline int64_t py_add(int64_t a, int64_t b) { int64_t r; if (__builtin_add_overflow(a, b, &r)) int_overflow(); return r; }
inline int64_t py_sub(int64_t a, int64_t b) { int64_t r; if (__builtin_sub_overflow(a, b, &r)) int_overflow(); return r; }
inline int64_t py_mul(int64_t a, int64_t b) { int64_t r; if (__builtin_mul_overflow(a, b, &r)) int_overflow(); return r; }
inline int64_t py_neg(int64_t a) { if (a == std::numeric_limits<int64_t>::min()) int_overflow(); return -a; }
inline int64_t py_floordiv(int64_t a, int64_t b) {
  if (b == 0) raise(PyError::ZeroDivisionError, "integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) int_overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0) raise(PyError::ZeroDivisionError, "integer modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
inline int64_t py_lshift(int64_t a, int64_t b) {
  if (b < 0) raise(PyError::ValueError, "negative shift count");
  if (a == 0) return 0;
  if (b >= 63) int_overflow();
  const int64_t r = static_cast<int64_t>(static_cast<uint64_t>(a) << b);
  if ((r >> b) != a) int_overflow();
  return r;
}
inline int64_t py_rshift(int64_t a, int64_t b) {
  if (b < 0) raise(PyError::ValueError, "negative shift count");
  if (b >= 63) return a < 0 ? -1 : 0;
  return a >> b;  // arithmetic shift: floor division by 2**b, as Python
}
inline int64_t py_pow(int64_t a, int64_t b) {  // b >= 0, checked by the caller's kinds
  int64_t r = 1;
  while (b > 0) {
    if (b & 1) r = py_mul(r, a);
    b >>= 1;
    if (b) a = py_mul(a, a);
  }
  return r;
}
inline double py_int_truediv(int64_t a, int64_t b) {
  if (b == 0) raise(PyError::ZeroDivisionError, "division by zero");
  constexpr int64_t exact = int64_t(1) << 53;
  if (a > exact || a < -exact || b > exact || b < -exact)
    raise(PyError::OverflowError, "int / int beyond 2**53 is not computed exactly in a region");
  return static_cast<double>(a) / static_cast<double>(b);
}

// ---- float arithmetic, as CPython's floatobject.c does it ----
inline double py_truediv(double a, double b) {
  if (b == 0.0) raise(PyError::ZeroDivisionError, "float division by zero");
  return a / b;
}
inline double py_fmod(double vx, double wx) {
  if (wx == 0.0) raise(PyError::ZeroDivisionError, "float modulo");
  double mod = std::fmod(vx, wx);
  if (mod) {
    if ((wx < 0) != (mod < 0)) mod += wx;
  } else {
    mod = std::copysign(0.0, wx);
  }
  return mod;
}
inline double py_ffloordiv(double vx, double wx) {
  if (wx == 0.0) raise(PyError::ZeroDivisionError, "float floor division by zero");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod) {
    if ((wx < 0) != (mod < 0)) div -= 1.0;
  }
  double floordiv;
  if (div) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return floordiv;
}
inline double py_fpow(double a, double b) {
  if (b == 0.0) return 1.0;
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return a == 1.0 ? 1.0 : b;
  if (a == 0.0 && b < 0.0 && std::isfinite(b))
    raise(PyError::ZeroDivisionError, "0.0 cannot be raised to a negative power");
  if (a < 0.0 && std::isfinite(a) && std::isfinite(b) && std::floor(b) != b)
    raise(PyError::ValueError, "a negative number to a fractional power is complex in Python; "
                               "a region computes real numbers only");
  double r = std::pow(a, b);
  if (std::isinf(r) && std::isfinite(a) && std::isfinite(b))
    raise(PyError::OverflowError, "(34, 'Numerical result out of range')");
  return r;
}

// int vs float comparisons are exact in Python; long double holds any int64 exactly on x86-64.
inline long double exact(int64_t v) { return static_cast<long double>(v); }
inline long double exact(double v) { return static_cast<long double>(v); }
inline long double exact(bool v) { return v ? 1.0L : 0.0L; }

// ---- math.* with CPython's domain and range errors ----
inline double math_checked(double x, double r, bool can_overflow = true) {
  if (std::isnan(r) && !std::isnan(x)) raise(PyError::ValueError, "math domain error");
  if (can_overflow && std::isinf(r) && std::isfinite(x)) raise(PyError::OverflowError, "math range error");
  return r;
}
inline double math_log(double x) {
  if (std::isfinite(x) && x <= 0.0) raise(PyError::ValueError, "math domain error");
  return std::log(x);
}
inline double math_log2(double x) {
  if (std::isfinite(x) && x <= 0.0) raise(PyError::ValueError, "math domain error");
  return std::log2(x);
}
inline double math_log10(double x) {
  if (std::isfinite(x) && x <= 0.0) raise(PyError::ValueError, "math domain error");
  return std::log10(x);
}
inline int64_t math_floor(double x) {
  if (std::isnan(x)) raise(PyError::ValueError, "cannot convert float NaN to integer");
  if (std::isinf(x)) raise(PyError::OverflowError, "cannot convert float infinity to integer");
  double f = std::floor(x);
  if (f < -9223372036854775808.0 || f >= 9223372036854775808.0) int_overflow();
  return static_cast<int64_t>(f);
}
inline int64_t math_ceil(double x) {
  if (std::isnan(x)) raise(PyError::ValueError, "cannot convert float NaN to integer");
  if (std::isinf(x)) raise(PyError::OverflowError, "cannot convert float infinity to integer");
  double f = std::ceil(x);
  if (f < -9223372036854775808.0 || f >= 9223372036854775808.0) int_overflow();
  return static_cast<int64_t>(f);
}

inline int64_t math_trunc(double x) {  // int(x) for a float x
  if (std::isnan(x)) raise(PyError::ValueError, "cannot convert float NaN to integer");
  if (std::isinf(x)) raise(PyError::OverflowError, "cannot convert float infinity to integer");
  double f = std::trunc(x);
  if (f < -9223372036854775808.0 || f >= 9223372036854775808.0) int_overflow();
  return static_cast<int64_t>(f);
}

// ---- str() of values, for f-string error messages ----
inline std::string py_str(const std::string& s) { return s; }
inline std::string py_str(bool v) { return v ? "True" : "False"; }
inline std::string py_str(int64_t v) { return std::to_string(v); }
inline std::string py_str(double v) {  // repr(float): shortest round trip, Python's layout
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // d[.ddd]e±XX
  const size_t e = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  bool negative = false;
  for (size_t k = 0; k < e; ++k) {
    if (sci[k] == '-') negative = true;
    else if (sci[k] != '.') digits += sci[k];
  }
  const int decpt = exp10 + 1;  // digits are 0.d1d2... x 10**decpt
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int x = decpt - 1;
  out += (x < 0 ? "e-" : "e+");
  const std::string mag = std::to_string(x < 0 ? -x : x);
  out += (mag.size() < 2 ? "0" : "") + mag;
  return out;
}
inline std::string py_str(at::ScalarType t) {  // str(torch.float32) == "torch.float32"
  switch (t) {
    case at::ScalarType::Float: return "torch.float32";
    case at::ScalarType::Double: return "torch.float64";
    case at::ScalarType::Half: return "torch.float16";
    case at::ScalarType::BFloat16: return "torch.bfloat16";
    case at::ScalarType::ComplexHalf: return "torch.complex32";
    case at::ScalarType::ComplexFloat: return "torch.complex64";
    case at::ScalarType::ComplexDouble: return "torch.complex128";
    case at::ScalarType::Byte: return "torch.uint8";
    case at::ScalarType::Char: return "torch.int8";
    case at::ScalarType::Short: return "torch.int16";
    case at::ScalarType::Int: return "torch.int32";
    case at::ScalarType::Long: return "torch.int64";
    case at::ScalarType::UInt16: return "torch.uint16";
    case at::ScalarType::UInt32: return "torch.uint32";
    case at::ScalarType::UInt64: return "torch.uint64";
    case at::ScalarType::Bool: return "torch.bool";
    case at::ScalarType::QInt8: return "torch.qint8";
    case at::ScalarType::QUInt8: return "torch.quint8";
    case at::ScalarType::QInt32: return "torch.qint32";
    case at::ScalarType::QUInt4x2: return "torch.quint4x2";
    case at::ScalarType::QUInt2x4: return "torch.quint2x4";
    case at::ScalarType::Float8_e5m2: return "torch.float8_e5m2";
    case at::ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case at::ScalarType::Float8_e5m2fnuz: return "torch.float8_e5m2fnuz";
    case at::ScalarType::Float8_e4m3fnuz: return "torch.float8_e4m3fnuz";
    case at::ScalarType::Float8_e8m0fnu: return "torch.float8_e8m0fnu";
    case at::ScalarType::Float4_e2m1fn_x2: return "torch.float4_e2m1fn_x2";
    case at::ScalarType::Bits1x8: return "torch.bits1x8";
    case at::ScalarType::Bits2x4: return "torch.bits2x4";
    case at::ScalarType::Bits4x2: return "torch.bits4x2";
    case at::ScalarType::Bits8: return "torch.bits8";
    case at::ScalarType::Bits16: return "torch.bits16";
    case at::ScalarType::UInt1: return "torch.uint1";
    case at::ScalarType::UInt2: return "torch.uint2";
    case at::ScalarType::UInt3: return "torch.uint3";
    case at::ScalarType::UInt4: return "torch.uint4";
    case at::ScalarType::UInt5: return "torch.uint5";
    case at::ScalarType::UInt6: return "torch.uint6";
    case at::ScalarType::UInt7: return "torch.uint7";
    case at::ScalarType::Int1: return "torch.int1";
    case at::ScalarType::Int2: return "torch.int2";
    case at::ScalarType::Int3: return "torch.int3";
    case at::ScalarType::Int4: return "torch.int4";
    case at::ScalarType::Int5: return "torch.int5";
    case at::ScalarType::Int6: return "torch.int6";
    case at::ScalarType::Int7: return "torch.int7";
    default: return std::string("torch.") + c10::toString(t);
  }
}
inline std::string py_str(const at::Device& d) { return d.str(); }
template <typename T>
inline std::string py_str(const std::optional<T>& v) {  // an X or None
  return v.has_value() ? py_str(*v) : std::string("None");
}  // str(torch.device("cuda", 0)) == "cuda:0"
inline std::string py_str(const std::vector<int64_t>& v) {  // a torch.Size
  std::string out = "torch.Size([";
  for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + std::to_string(v[k]);
  return out + "])";
}

// `a is b` of two tensors: PyTorch pairs each TensorImpl with one Python object.
inline bool same_tensor(const at::Tensor& a, const at::Tensor& b) {
  return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
}
inline bool same_tensor(const std::optional<at::Tensor>& a, const at::Tensor& b) {
  return a.has_value() && same_tensor(*a, b);
}
inline bool same_tensor(const at::Tensor& a, const std::optional<at::Tensor>& b) { return same_tensor(b, a); }
inline bool same_tensor(const std::optional<at::Tensor>& a, const std::optional<at::Tensor>& b) {
  return a.has_value() ? same_tensor(*a, b) : !b.has_value();
}

// ---- sequences: run-time tuples (std::vector: sizes, a split's tensors) ----
template <typename T>
inline T seq_index(const std::vector<T>& v, int64_t i) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (i < -n || i >= n) raise(PyError::IndexError, "tuple index out of range");
  return v[i < 0 ? i + n : i];
}
inline void check_unpack(size_t have, size_t want, bool starred) {
  if (starred) {
    if (have < want)
      raise(PyError::ValueError, "not enough values to unpack (expected at least " + std::to_string(want) +
                                     ", got " + std::to_string(have) + ")");
  } else if (have > want) {
    raise(PyError::ValueError, "too many values to unpack (expected " + std::to_string(want) + ")");
  } else if (have < want) {
    raise(PyError::ValueError, "not enough values to unpack (expected " + std::to_string(want) + ", got " +
                                   std::to_string(have) + ")");
  }
}
template <typename T>
inline std::vector<T> seq_slice(const std::vector<T>& v, std::optional<int64_t> start, std::optional<int64_t> stop,
                                std::optional<int64_t> step) {
  const int64_t n = static_cast<int64_t>(v.size());
  const int64_t st = step.value_or(1);
  if (st == 0) raise(PyError::ValueError, "slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> x, int64_t dflt) -> int64_t {
    if (!x) return dflt;
    int64_t i = *x;
    if (i < 0) i += n;
    if (st > 0) return i < 0 ? 0 : (i > n ? n : i);
    return i < -1 ? -1 : (i >= n ? n - 1 : i);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, st > 0 ? n : -1);
  std::vector<T> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(v[i]);
  return out;
}
template <typename T>
inline std::vector<T> seq_concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
template <typename T>
inline std::vector<T> seq_repeat(const std::vector<T>& a, int64_t n) {
  std::vector<T> out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), a.begin(), a.end());
  return out;
}
inline int64_t checked_len_dim0(const at::Tensor& t) {
  if (t.dim() == 0) raise(PyError::TypeError, "len() of a 0-d tensor");
  return t.size(0);
}
inline void check_range_step(int64_t step) {
  if (step == 0) raise(PyError::ValueError, "range() arg 3 must not be zero");
}
inline void check_nonempty(int64_t n, const char* message) {
  if (n == 0) raise(PyError::ValueError, message);
}
// len(range(start, stop, step)), step != 0; in 128 bits, where the difference of two int64 fits.
inline int64_t range_len(int64_t start, int64_t stop, int64_t step) {
  const __int128 lo = start, hi = stop, st = step;
  __int128 n = 0;
  if (st > 0 && lo < hi) n = (hi - lo - 1) / st + 1;
  if (st < 0 && lo > hi) n = (lo - hi - 1) / (-st) + 1;
  return n > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(n);
}
inline int64_t range_item(int64_t start, int64_t step, int64_t k) {  // in range: no overflow
  return static_cast<int64_t>(static_cast<__int128>(start) + static_cast<__int128>(step) * k);
}

// ---- tensors as Python numbers and iterables ----
// dispatch_to<double> of python_variable_methods.cpp: one element, read as a double.
inline double item_as_double(const at::Tensor& t) {
  c10::OptionalDeviceGuard guard(at::device_of(t));
  TORCH_CHECK_VALUE(t.sym_numel() == 1, "only one element tensors can be converted to Python scalars");
  return t.item<double>();
}
// float(t): Tensor.__float__, which warns (once) about a tensor that requires grad.
inline double tensor_to_float(const at::Tensor& t) {
  if (t.requires_grad()) {
    TORCH_WARN_ONCE("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
                    "Consider using tensor.detach() first.");
  }
  return item_as_double(t);
}
// int(t): Tensor.__int__: a floating tensor's value goes through a double, as int(float) truncates it.
inline int64_t tensor_to_int(const at::Tensor& t) {
  if (at::isFloatingType(t.scalar_type())) return math_trunc(item_as_double(t));
  c10::OptionalDeviceGuard guard(at::device_of(t));
  TORCH_CHECK_VALUE(t.sym_numel() == 1, "only one element tensors can be converted to Python scalars");
  return t.item<int64_t>();
}
inline void check_iterable(const at::Tensor& t) {
  if (t.dim() == 0) raise(PyError::TypeError, "iteration over a 0-d tensor");
}

// ---- numbers whose Python type a tensor's dtype decides (t.item()): an at::Scalar, Python's semantics ----
[[noreturn]] inline void complex_number() {
  raise(PyError::TypeError, "a complex number from .item() supports only ==, != and bool() in a region");
}
enum class NumType { Bool, Int, Float, Complex };
inline NumType num_type(const at::Scalar& s) {
  if (s.isBoolean()) return NumType::Bool;
  if (s.isIntegral(false)) return NumType::Int;
  if (s.isFloatingPoint()) return NumType::Float;
  return NumType::Complex;
}
inline int64_t num_int(const at::Scalar& s) { return s.isBoolean() ? (s.toBool() ? 1 : 0) : s.toLong(); }
inline bool num_truth(const at::Scalar& s) {
  switch (num_type(s)) {
    case NumType::Bool: return s.toBool();
    case NumType::Int: return s.toLong() != 0;
    case NumType::Float: return s.toDouble() != 0.0;
    default: return s.toComplexDouble() != c10::complex<double>(0.0, 0.0);
  }
}
inline double num_to_float(const at::Scalar& s) {
  switch (num_type(s)) {
    case NumType::Float: return s.toDouble();
    case NumType::Complex: raise(PyError::TypeError, "float() argument must be a string or a real number, not 'complex'");
    default: return static_cast<double>(num_int(s));
  }
}
inline int64_t num_to_int(const at::Scalar& s) {
  switch (num_type(s)) {
    case NumType::Float: return math_trunc(s.toDouble());
    case NumType::Complex:
      raise(PyError::TypeError, "int() argument must be a string, a bytes-like object or a real number, not 'complex'");
    default: return num_int(s);
  }
}
inline int64_t num_index(const at::Scalar& s) {
  switch (num_type(s)) {
    case NumType::Float: raise(PyError::TypeError, "'float' object cannot be interpreted as an integer");
    case NumType::Complex: raise(PyError::TypeError, "'complex' object cannot be interpreted as an integer");
    default: return num_int(s);
  }
}
inline bool num_is_float(const at::Scalar& a, const at::Scalar& b) {
  const NumType x = num_type(a), y = num_type(b);
  if (x == NumType::Complex || y == NumType::Complex) complex_number();
  return x == NumType::Float || y == NumType::Float;
}
inline at::Scalar num_neg(const at::Scalar& a) {
  switch (num_type(a)) {
    case NumType::Float: return at::Scalar(-a.toDouble());
    case NumType::Complex: complex_number();
    default: return at::Scalar(py_neg(num_int(a)));
  }
}
inline at::Scalar num_abs(const at::Scalar& a) {
  switch (num_type(a)) {
    case NumType::Float: return at::Scalar(std::fabs(a.toDouble()));
    case NumType::Complex: complex_number();
    default: {
      const int64_t v = num_int(a);
      return at::Scalar(v < 0 ? py_neg(v) : v);
    }
  }
}
inline at::Scalar num_add(const at::Scalar& a, const at::Scalar& b) {
  if (num_is_float(a, b)) return at::Scalar(num_to_float(a) + num_to_float(b));
  return at::Scalar(py_add(num_int(a), num_int(b)));
}
inline at::Scalar num_sub(const at::Scalar& a, const at::Scalar& b) {
  if (num_is_float(a, b)) return at::Scalar(num_to_float(a) - num_to_float(b));
  return at::Scalar(py_sub(num_int(a), num_int(b)));
}
inline at::Scalar num_mul(const at::Scalar& a, const at::Scalar& b) {
  if (num_is_float(a, b)) return at::Scalar(num_to_float(a) * num_to_float(b));
  return at::Scalar(py_mul(num_int(a), num_int(b)));
}
inline at::Scalar num_truediv(const at::Scalar& a, const at::Scalar& b) {
  if (num_is_float(a, b)) return at::Scalar(py_truediv(num_to_float(a), num_to_float(b)));
  return at::Scalar(py_int_truediv(num_int(a), num_int(b)));
}
inline at::Scalar num_floordiv(const at::Scalar& a, const at::Scalar& b) {
  if (num_is_float(a, b)) return at::Scalar(py_ffloordiv(num_to_float(a), num_to_float(b)));
  return at::Scalar(py_floordiv(num_int(a), num_int(b)));
}
inline at::Scalar num_mod(const at::Scalar& a, const at::Scalar& b) {
  if (num_is_float(a, b)) return at::Scalar(py_fmod(num_to_float(a), num_to_float(b)));
  return at::Scalar(py_mod(num_int(a), num_int(b)));
}
// Python compares ints and floats exactly; long double holds both exactly on x86-64.
inline long double num_exact(const at::Scalar& s) {
  return num_type(s) == NumType::Float ? static_cast<long double>(s.toDouble())
                                       : static_cast<long double>(num_int(s));
}
inline bool num_eq(const at::Scalar& a, const at::Scalar& b) {
  if (num_type(a) == NumType::Complex || num_type(b) == NumType::Complex) {
    auto real = [](const at::Scalar& s) {
      return num_type(s) == NumType::Complex ? static_cast<long double>(s.toComplexDouble().real()) : num_exact(s);
    };
    auto imag = [](const at::Scalar& s) { return num_type(s) == NumType::Complex ? s.toComplexDouble().imag() : 0.0; };
    return real(a) == real(b) && imag(a) == imag(b);
  }
  return num_exact(a) == num_exact(b);
}
inline bool num_ne(const at::Scalar& a, const at::Scalar& b) { return !num_eq(a, b); }
inline bool num_lt(const at::Scalar& a, const at::Scalar& b) { num_is_float(a, b); return num_exact(a) < num_exact(b); }
inline bool num_le(const at::Scalar& a, const at::Scalar& b) { num_is_float(a, b); return num_exact(a) <= num_exact(b); }
inline bool num_gt(const at::Scalar& a, const at::Scalar& b) { num_is_float(a, b); return num_exact(a) > num_exact(b); }
inline bool num_ge(const at::Scalar& a, const at::Scalar& b) { num_is_float(a, b); return num_exact(a) >= num_exact(b); }

// ---- lists: Python lists, shared by every variable bound to one (as names share a list object) ----
template <typename T>
class List {
 public:
  List() : v_(std::make_shared<std::vector<T>>()) {}
  explicit List(std::vector<T> v) : v_(std::make_shared<std::vector<T>>(std::move(v))) {}
  size_t size() const { return v_->size(); }
  bool empty() const { return v_->empty(); }
  const T& operator[](size_t k) const { return (*v_)[k]; }
  std::vector<T>& vec() const { return *v_; }

 private:
  std::shared_ptr<std::vector<T>> v_;
};
template <typename T>
inline std::string py_str(const List<T>& l) {  // str() of a list of ints or floats: "[1, 2]", "[0.5]"
  std::string out = "[";
  for (size_t k = 0; k < l.size(); ++k) out += (k ? ", " : "") + py_str(l[k]);
  return out + "]";
}
template <typename T, typename... R>
inline List<T> list_of(const T& first, const R&... rest) {
  std::vector<T> v;
  v.reserve(1 + sizeof...(rest));
  v.push_back(first);
  (v.push_back(rest), ...);
  return List<T>(std::move(v));
}
template <typename T>
inline List<T> list_from(const std::vector<T>& v) { return List<T>(v); }
template <typename T>
inline List<T> list_from(const List<T>& l) { return List<T>(l.vec()); }
template <typename T>
inline std::vector<T> tuple_from(const List<T>& l) { return l.vec(); }
template <typename T>
inline T seq_index(const List<T>& l, int64_t i) {
  const int64_t n = static_cast<int64_t>(l.size());
  if (i < -n || i >= n) raise(PyError::IndexError, "list index out of range");
  return l[i < 0 ? i + n : i];
}
template <typename T>
inline List<T> seq_slice(const List<T>& l, std::optional<int64_t> start, std::optional<int64_t> stop,
                         std::optional<int64_t> step) {
  return List<T>(seq_slice(l.vec(), start, stop, step));
}
template <typename T>
inline List<T> list_concat(const List<T>& a, const List<T>& b) {
  std::vector<T> v = a.vec();
  v.insert(v.end(), b.vec().begin(), b.vec().end());
  return List<T>(std::move(v));
}
template <typename T>
inline List<T> list_repeat(const List<T>& a, int64_t n) { return List<T>(seq_repeat(a.vec(), n)); }
template <typename T>
inline void list_append(const List<T>& l, const T& v) { l.vec().push_back(v); }
template <typename T>
inline void list_extend(const List<T>& l, const std::vector<T>& s) {
  const std::vector<T> items = s;  // s may be l's own items (l.extend(l))
  l.vec().insert(l.vec().end(), items.begin(), items.end());
}
template <typename T>
inline void list_extend(const List<T>& l, const List<T>& s) { list_extend(l, s.vec()); }
template <typename T>
inline void list_insert(const List<T>& l, int64_t i, const T& v) {
  const int64_t n = static_cast<int64_t>(l.size());
  if (i < 0) i = i + n < 0 ? 0 : i + n;
  if (i > n) i = n;
  l.vec().insert(l.vec().begin() + i, v);
}
template <typename T>
inline T list_pop(const List<T>& l, int64_t i) {
  const int64_t n = static_cast<int64_t>(l.size());
  if (n == 0) raise(PyError::IndexError, "pop from empty list");
  if (i < 0) i += n;
  if (i < 0 || i >= n) raise(PyError::IndexError, "pop index out of range");
  T v = std::move(l.vec()[i]);
  l.vec().erase(l.vec().begin() + i);
  return v;
}
template <typename T>
inline void list_set(const List<T>& l, int64_t i, const T& v) {
  const int64_t n = static_cast<int64_t>(l.size());
  if (i < -n || i >= n) raise(PyError::IndexError, "list assignment index out of range");
  l.vec()[i < 0 ? i + n : i] = v;
}
template <typename T>
inline void list_clear(const List<T>& l) { l.vec().clear(); }
template <typename T>
inline void list_reverse(const List<T>& l) { std::reverse(l.vec().begin(), l.vec().end()); }
template <typename T>
inline void list_repeat_inplace(const List<T>& l, int64_t n) { l.vec() = seq_repeat(l.vec(), n); }

// ---- results ----
inline void push_number(Out& out, const at::Scalar& s) {
  switch (num_type(s)) {
    case NumType::Int: out.i.push_back(0); out.i.push_back(s.toLong()); break;
    case NumType::Float: out.i.push_back(1); out.f.push_back(s.toDouble()); break;
    case NumType::Bool: out.i.push_back(2); out.i.push_back(s.toBool() ? 1 : 0); break;
    default: {
      const c10::complex<double> c = s.toComplexDouble();
      out.i.push_back(3);
      out.f.push_back(c.real());
      out.f.push_back(c.imag());
    }
  }
}
inline void push_list(Out& out, const List<at::Tensor>& l) {
  out.i.push_back(static_cast<int64_t>(l.size()));
  for (const at::Tensor& t : l.vec()) out.t.push_back(t);
}
inline void push_list(Out& out, const List<int64_t>& l) {
  out.i.push_back(static_cast<int64_t>(l.size()));
  for (int64_t v : l.vec()) out.i.push_back(v);
}
inline void push_list(Out& out, const List<double>& l) {
  out.i.push_back(static_cast<int64_t>(l.size()));
  for (double v : l.vec()) out.f.push_back(v);
}

// ---- interrupts: a loop (and every few ops) polls, as the interpreter does between bytecodes ----
// A Python exception is set in this thread (a signal handler raised, e.g. KeyboardInterrupt).
struct PythonError {};

// One call's state: the Python line running (for an error's note) and the poll's clock.
struct Frame {
  explicit Frame(bool gil_released) : gil(!gil_released) {}
  int line = 0;
  bool gil;  // the call holds the GIL
  // Levels 2-3: Out::unobserved for this call, and "unobserved and no profiler" (write_into may
  // skip the dispatcher's entry). The entry sets them; helpers read them here.
  bool unobserved = false;
  bool direct = false;
  uint32_t ticks = 0;
  std::chrono::steady_clock::time_point next{};
};

// Every 5 ms: without the GIL, take it to run Python's signal handlers; with it, let other threads
// take it for a moment, as the interpreter's switch interval does (a SIGINT sender may be one).
inline void poll_slow(Frame& f) {
  const auto now = std::chrono::steady_clock::now();
  if (now < f.next) return;
  f.next = now + std::chrono::milliseconds(5);
  if (f.gil) {
    PyThreadState* state = PyEval_SaveThread();
    PyEval_RestoreThread(state);
    if (PyErr_CheckSignals() != 0) throw PythonError{};
  } else {
    const PyGILState_STATE state = PyGILState_Ensure();
    const int failed = PyErr_CheckSignals();
    PyGILState_Release(state);
    if (failed) throw PythonError{};
  }
}
// With the GIL, PyErr_CheckSignals is a load of Python's "signal tripped" flag when none is pending.
inline void poll(Frame& f) {
  if (f.gil) {
    if (PyErr_CheckSignals() != 0) throw PythonError{};
    if ((++f.ticks & 15) == 0) poll_slow(f);
  } else {
    poll_slow(f);
  }
}

// ---- modules: the slots the runtime read before the region ran ----
// modules[i] of a ModuleList or Sequential, as they index (`index {i} is out of range`).
inline const Arg* module_item(const Arg* list, int64_t i) {
  const int64_t n = list->i;
  if (i < -n || i >= n) raise(PyError::IndexError, "index " + std::to_string(i) + " is out of range");
  return list->m[i < 0 ? i + n : i].m;
}

}  // namespace ppy

#include "ppy_native.h"
