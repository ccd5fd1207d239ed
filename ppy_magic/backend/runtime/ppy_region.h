// Helpers for generated region code: Python's semantics for the few things a
// region computes itself (int/float arithmetic on sizes and parameters,
// math.*, unpacking checks) and eager's wrapped numbers. Everything else a
// region does is an at:: call through the dispatcher.
#pragma once
#include <ATen/ScalarOps.h>
#include <ATen/TensorIndexing.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/to.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
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
inline at::Tensor index_list(const at::Tensor& self, std::initializer_list<int64_t> values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t v : values) *p++ = v;
  return self.device().is_cpu() ? t : t.to(self.device());
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

// ---- sequences of ints (sizes) ----
inline int64_t seq_index(const std::vector<int64_t>& v, int64_t i) {
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
inline std::vector<int64_t> seq_slice(const std::vector<int64_t>& v, c10::optional<int64_t> start,
                                      c10::optional<int64_t> stop, c10::optional<int64_t> step) {
  const int64_t n = static_cast<int64_t>(v.size());
  const int64_t st = step.value_or(1);
  if (st == 0) raise(PyError::ValueError, "slice step cannot be zero");
  auto clamp = [&](c10::optional<int64_t> x, int64_t dflt) -> int64_t {
    if (!x) return dflt;
    int64_t i = *x;
    if (i < 0) i += n;
    if (st > 0) return i < 0 ? 0 : (i > n ? n : i);
    return i < -1 ? -1 : (i >= n ? n - 1 : i);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, st > 0 ? n : -1);
  std::vector<int64_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(v[i]);
  return out;
}
inline std::vector<int64_t> seq_concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
inline int64_t checked_len_dim0(const at::Tensor& t) {
  if (t.dim() == 0) raise(PyError::TypeError, "len() of a 0-d tensor");
  return t.size(0);
}
inline void check_range_step(int64_t step) {
  if (step == 0) raise(PyError::ValueError, "range() arg 3 must not be zero");
}

}  // namespace ppy
