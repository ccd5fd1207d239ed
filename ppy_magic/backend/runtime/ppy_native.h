// Tensors made from Python numbers and numbers read from tensors, as PyTorch's Python layer makes
// and reads them: torch.tensor(...) and the legacy typed constructors (internal_new_from_data and
// tensor_ctor in torch/csrc/utils/tensor_new.cpp, store_scalar in utils/python_scalars.h),
// Tensor.tolist() (tensor_to_list in utils/tensor_list.cpp), Tensor.type() (options_to_string in
// utils/tensor_types.cpp), grad-mode blocks (`with torch.no_grad():`) and CPU autocast blocks
// (torch/amp/autocast_mode.py's autocast). Included by ppy_region.h.
#pragma once

#include <ATen/InitialTensorOptions.h>
#include <ATen/TracerMode.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/lift_fresh.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/TypeCast.h>

// ATen/autocast_mode.h's state functions (libtorch's own), declared as that header declares them: the
// header itself brings in ATen.h, NativeFunctions.h and torch/library.h, which every region would compile.
namespace at::autocast {
TORCH_API bool is_autocast_enabled(at::DeviceType device_type);
TORCH_API void set_autocast_enabled(at::DeviceType device_type, bool enabled);
TORCH_API at::ScalarType get_autocast_dtype(at::DeviceType device_type);
TORCH_API void set_autocast_dtype(at::DeviceType device_type, at::ScalarType dtype);
TORCH_API void clear_cache();
TORCH_API int increment_nesting();
TORCH_API int decrement_nesting();
TORCH_API bool is_autocast_cache_enabled();
TORCH_API void set_autocast_cache_enabled(bool enabled);
}  // namespace at::autocast

namespace ppy {

// THPUtils_unpackDouble of a Python number: PyFloat_AsDouble (an int rounds to nearest).
inline double unpack_double(const at::Scalar& s) {
  switch (num_type(s)) {
    case NumType::Float: return s.toDouble();
    case NumType::Complex: raise(PyError::TypeError, "must be real number, not complex");
    default: return static_cast<double>(num_int(s));
  }
}
// unpackIntegral<T>: a float through checked_convert from double, an int (or bool) from int64.
template <typename T>
inline T unpack_integral(const at::Scalar& s, const char* name) {
  switch (num_type(s)) {
    case NumType::Float: return c10::checked_convert<T, double>(s.toDouble(), name);
    case NumType::Complex: raise(PyError::TypeError, "'complex' object cannot be interpreted as an integer");
    default: return c10::checked_convert<T, int64_t>(num_int(s), name);
  }
}
inline c10::complex<double> unpack_complex(const at::Scalar& s) {
  return num_type(s) == NumType::Complex ? s.toComplexDouble() : c10::complex<double>(unpack_double(s), 0.0);
}

// store_scalar: one Python number written as an element of `type`.
inline void store_number(char* data, at::ScalarType type, const at::Scalar& s) {
  switch (type) {
    case at::kByte: *reinterpret_cast<uint8_t*>(data) = unpack_integral<uint8_t>(s, "uint8"); break;
    case at::kUInt16: *reinterpret_cast<uint16_t*>(data) = unpack_integral<uint16_t>(s, "uint16"); break;
    case at::kUInt32: *reinterpret_cast<uint32_t*>(data) = unpack_integral<uint32_t>(s, "uint32"); break;
    case at::kUInt64:  // PyLong_AsUnsignedLongLong: no float, no negative int
      if (num_type(s) == NumType::Float || num_type(s) == NumType::Complex)
        raise(PyError::TypeError, "an integer is required");
      if (num_int(s) < 0) raise(PyError::OverflowError, "can't convert negative int to unsigned");
      *reinterpret_cast<uint64_t*>(data) = static_cast<uint64_t>(num_int(s));
      break;
    case at::kChar: *reinterpret_cast<int8_t*>(data) = unpack_integral<int8_t>(s, "int8"); break;
    case at::kShort: *reinterpret_cast<int16_t*>(data) = unpack_integral<int16_t>(s, "int16"); break;
    case at::kInt: *reinterpret_cast<int32_t*>(data) = unpack_integral<int32_t>(s, "int32"); break;
    case at::kLong: *reinterpret_cast<int64_t*>(data) = unpack_integral<int64_t>(s, "int64"); break;
    case at::kHalf: *reinterpret_cast<at::Half*>(data) = c10::convert<at::Half, double>(unpack_double(s)); break;
    case at::kFloat: *reinterpret_cast<float*>(data) = static_cast<float>(unpack_double(s)); break;
    case at::kDouble: *reinterpret_cast<double*>(data) = unpack_double(s); break;
    case at::kComplexHalf:
      *reinterpret_cast<c10::complex<at::Half>*>(data) =
          static_cast<c10::complex<at::Half>>(static_cast<c10::complex<float>>(unpack_complex(s)));
      break;
    case at::kComplexFloat:
      *reinterpret_cast<c10::complex<float>*>(data) = static_cast<c10::complex<float>>(unpack_complex(s));
      break;
    case at::kComplexDouble: *reinterpret_cast<c10::complex<double>*>(data) = unpack_complex(s); break;
    case at::kBool: *reinterpret_cast<bool*>(data) = num_truth(s); break;  // THPUtils_unpackNumberAsBool
    case at::kBFloat16:
      *reinterpret_cast<at::BFloat16*>(data) = c10::convert<at::BFloat16, double>(unpack_double(s));
      break;
    case at::kFloat8_e5m2:
      *reinterpret_cast<at::Float8_e5m2*>(data) = c10::convert<at::Float8_e5m2, double>(unpack_double(s));
      break;
    case at::kFloat8_e5m2fnuz:
      *reinterpret_cast<at::Float8_e5m2fnuz*>(data) = c10::convert<at::Float8_e5m2fnuz, double>(unpack_double(s));
      break;
    case at::kFloat8_e4m3fn:
      *reinterpret_cast<at::Float8_e4m3fn*>(data) = c10::convert<at::Float8_e4m3fn, double>(unpack_double(s));
      break;
    case at::kFloat8_e4m3fnuz:
      *reinterpret_cast<at::Float8_e4m3fnuz*>(data) = c10::convert<at::Float8_e4m3fnuz, double>(unpack_double(s));
      break;
    case at::kFloat8_e8m0fnu:
      *reinterpret_cast<at::Float8_e8m0fnu*>(data) = c10::convert<at::Float8_e8m0fnu, double>(unpack_double(s));
      break;
    default: TORCH_CHECK(false, "store_scalar: invalid type");
  }
}

// infer_scalar_type of a Python number: a float is the default dtype, an int Long, a bool Bool.
inline at::ScalarType number_dtype(const at::Scalar& s) {
  const at::ScalarType fallback = c10::get_default_dtype_as_scalartype();
  switch (num_type(s)) {
    case NumType::Bool: return at::kBool;
    case NumType::Int: return at::kLong;
    case NumType::Float: return fallback;
    default:
      if (fallback == at::kFloat) return at::kComplexFloat;
      if (fallback == at::kDouble) return at::kComplexDouble;
      TORCH_CHECK(false, "invalid default scalar type for complex");
  }
}
// ... of a (nested) sequence of them, its items promoted in order; an empty one is the default dtype.
inline at::ScalarType numbers_dtype(const std::vector<at::Scalar>& values) {
  if (values.empty()) return c10::get_default_dtype_as_scalartype();
  at::ScalarType t = number_dtype(values[0]);
  for (size_t k = 1; k < values.size() && t != at::kComplexDouble; ++k) t = at::promoteTypes(t, number_dtype(values[k]));
  return t;
}

inline std::optional<at::Device> device_of(std::nullopt_t) { return std::nullopt; }
inline std::optional<at::Device> device_of(const at::Device& d) { return d; }
inline std::optional<at::Device> device_of(const std::string& s) { return at::Device(s); }

// internal_new_from_data of a (nested, rectangular) sequence of numbers: `values` in row-major order of
// `sizes`; `dtype` given (no inference: torch.tensor(..., dtype=), torch.FloatTensor(...)) or inferred.
inline at::Tensor tensor_from_numbers(std::optional<at::ScalarType> dtype, std::optional<at::Device> device_opt,
                                      const std::vector<int64_t>& sizes, const std::vector<at::Scalar>& values) {
  const at::ScalarType type = dtype ? *dtype : numbers_dtype(values);
  const at::Device device = device_opt ? *device_opt : at::Device(at::kCPU);
  at::Tensor tensor;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    c10::impl::ExcludeDispatchKeyGuard python(c10::DispatchKey::Python);
    c10::impl::ExcludeDispatchKeyGuard snapshot(c10::DispatchKey::PythonTLSSnapshot);
    c10::impl::ExcludeDispatchKeyGuard front(c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
    c10::impl::ExcludeDispatchKeyGuard back(c10::DispatchKey::FuncTorchDynamicLayerBackMode);
    c10::impl::ExcludeDispatchKeyGuard fake(c10::DispatchKeySet{c10::DispatchKey::Fake, c10::DispatchKey::DeferredInit});
    c10::impl::ExcludeDispatchKeyGuard functionalize(c10::DispatchKey::Functionalize);
    {
      at::tracer::impl::NoTracerDispatchMode tracer;
      const at::TensorOptions opts = at::initialTensorOptions().dtype(type);
      if (device == at::kMeta) return at::empty(sizes, opts.device(device));
      tensor = at::empty(sizes, opts.pinned_memory(false));
      if (tensor.numel() != 0) {
        char* data = static_cast<char*>(tensor.data_ptr());
        const size_t size = tensor.dtype().itemsize();
        for (const at::Scalar& v : values) {  // a fresh tensor: contiguous, so row-major order is memory order
          store_number(data, type, v);
          data += size;
        }
      }
    }
    tensor = tensor.to(device, type, /*non_blocking=*/false, /*copy=*/false);
  }
  at::tracer::impl::NoTracerDispatchMode tracer;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    tensor = at::lift_fresh(tensor);
  }
  return tensor;
}

// tensor_ctor's end: a leaf that requires grad as asked.
inline at::Tensor as_leaf(at::Tensor t, bool requires_grad) {
  t.detach_();
  t.set_requires_grad(requires_grad);
  return t;
}

// torch.tensor(data, dtype=, device=, requires_grad=) of numbers.
inline at::Tensor tensor_new(std::optional<at::ScalarType> dtype, std::optional<at::Device> device, bool requires_grad,
                             const std::vector<int64_t>& sizes, const std::vector<at::Scalar>& values) {
  return as_leaf(tensor_from_numbers(dtype, device, sizes, values), requires_grad);
}
// ... of a run-time sequence of numbers (a torch.Size, a list of ints or floats): one dimension.
template <typename S>
inline at::Tensor tensor_new_seq(std::optional<at::ScalarType> dtype, std::optional<at::Device> device,
                                 bool requires_grad, const S& seq) {
  std::vector<at::Scalar> values;
  values.reserve(seq.size());
  for (size_t k = 0; k < seq.size(); ++k) values.emplace_back(seq[k]);
  return tensor_new(dtype, device, requires_grad, {static_cast<int64_t>(values.size())}, values);
}
// The legacy typed constructors (torch.FloatTensor([...])): the type's dtype (or the default dtype for
// torch.Tensor), no inference, not made a leaf again.
inline at::Tensor legacy_tensor(std::optional<at::ScalarType> dtype, const std::vector<int64_t>& sizes,
                                const std::vector<at::Scalar>& values) {
  return tensor_from_numbers(dtype ? *dtype : c10::get_default_dtype_as_scalartype(), std::nullopt, sizes, values);
}

// torch.tensor(t) of a tensor: eager's warning, a detached copy converted as asked, a new leaf.
inline at::Tensor tensor_copy(const at::Tensor& t, std::optional<at::ScalarType> dtype,
                              std::optional<at::Device> device, bool requires_grad) {
  warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
       "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor).",
       false);
  at::Tensor var = t.detach();
  const at::ScalarType type = dtype ? *dtype : var.scalar_type();
  const at::Device where = device ? *device : var.device();
  return as_leaf(var.to(where, type, /*non_blocking=*/false, /*copy=*/true), requires_grad);
}

// Tensor.type(): options_to_string, "torch.FloatTensor", "torch.cuda.LongTensor", ...
inline std::string tensor_type_name(const at::Tensor& t) {
  std::string backend;
  switch (t.device().type()) {
    case at::kCPU: backend = "torch"; break;
    case at::kCUDA: backend = "torch.cuda"; break;
    case at::kXPU: backend = "torch.xpu"; break;
    case at::kMPS: backend = "torch.mps"; break;
    case at::kMeta: backend = "torch.meta"; break;
    default: raise(PyError::NotImplementedError, "Tensor.type() of a tensor on this device in a region");
  }
  return backend + "." + c10::toString(t.scalar_type()) + "Tensor";
}

// ---- Tensor.tolist() of a 1-d tensor: its items as Python numbers ----
// A 0-d tensor's tolist() is a number, which Python neither iterates nor measures: the errors come
// where the list is used, as they would.
// A tensor of more dimensions gives a list of lists: len() of it is its rows, but its items are not
// numbers, so iterating it raises (a region has no kind for them) rather than guess.
struct Numbers {
  std::vector<at::Scalar> items;
  int64_t dim = 1;
  int64_t rows = 0;  // size(0)
  const char* type = "int";  // of a 0-d tensor's number, for the errors
  size_t size() const {
    if (dim == 0) raise(PyError::TypeError, std::string("'") + type + "' object is not iterable");
    if (dim > 1) {
      raise(PyError::NotImplementedError,
            "iterating x.tolist() of a " + std::to_string(dim) +
                "-d tensor in a region: its items are lists; only a 1-d tensor's are numbers there");
    }
    return items.size();
  }
  const at::Scalar& operator[](size_t k) const { return items[k]; }
};
inline int64_t numbers_len(const Numbers& n) {
  if (n.dim == 0) raise(PyError::TypeError, std::string("object of type '") + n.type + "' has no len()");
  return n.dim > 1 ? n.rows : static_cast<int64_t>(n.items.size());
}
// load_scalar: one element as the Python number tolist() makes of it.
inline at::Scalar load_number(const char* p, at::ScalarType type) {
  switch (type) {
    case at::kByte: return at::Scalar(static_cast<int64_t>(*reinterpret_cast<const uint8_t*>(p)));
    case at::kUInt16: return at::Scalar(static_cast<int64_t>(*reinterpret_cast<const uint16_t*>(p)));
    case at::kUInt32: return at::Scalar(static_cast<int64_t>(*reinterpret_cast<const uint32_t*>(p)));
    case at::kUInt64: return at::Scalar(*reinterpret_cast<const uint64_t*>(p));
    case at::kChar: return at::Scalar(static_cast<int64_t>(*reinterpret_cast<const int8_t*>(p)));
    case at::kShort: return at::Scalar(static_cast<int64_t>(*reinterpret_cast<const int16_t*>(p)));
    case at::kInt: return at::Scalar(static_cast<int64_t>(*reinterpret_cast<const int32_t*>(p)));
    case at::kLong: return at::Scalar(*reinterpret_cast<const int64_t*>(p));
    case at::kHalf: return at::Scalar(static_cast<double>(*reinterpret_cast<const at::Half*>(p)));
    case at::kFloat: return at::Scalar(static_cast<double>(*reinterpret_cast<const float*>(p)));
    case at::kDouble: return at::Scalar(*reinterpret_cast<const double*>(p));
    case at::kBFloat16: return at::Scalar(static_cast<double>(*reinterpret_cast<const at::BFloat16*>(p)));
    case at::kBool: return at::Scalar(static_cast<bool>(*reinterpret_cast<const uint8_t*>(p)));
    case at::kComplexHalf: {
      const auto z = *reinterpret_cast<const c10::complex<at::Half>*>(p);
      return at::Scalar(c10::complex<double>(static_cast<double>(z.real()), static_cast<double>(z.imag())));
    }
    case at::kComplexFloat:
      return at::Scalar(static_cast<c10::complex<double>>(*reinterpret_cast<const c10::complex<float>*>(p)));
    case at::kComplexDouble: return at::Scalar(*reinterpret_cast<const c10::complex<double>*>(p));
    default: raise(PyError::NotImplementedError, "x.tolist() of a tensor of this dtype in a region");
  }
}
inline Numbers tensor_tolist(const at::Tensor& tensor) {
  at::Tensor data = tensor.resolve_conj().resolve_neg();
  if (!data.device().is_cpu()) data = data.toBackend(c10::Backend::CPU);
  TORCH_CHECK(tensor.numel() == 0 || data.const_data_ptr(), "tolist() shouldn't be called on a tensor with unallocated storage");
  Numbers out;
  out.dim = data.dim();
  if (out.dim > 1) {
    out.rows = data.size(0);
    return out;
  }
  const at::ScalarType type = data.scalar_type();
  const char* p = static_cast<const char*>(data.const_data_ptr());
  const int64_t size = static_cast<int64_t>(data.dtype().itemsize());
  if (out.dim == 0) {
    out.items.push_back(load_number(p, type));
    switch (num_type(out.items[0])) {
      case NumType::Float: out.type = "float"; break;
      case NumType::Bool: out.type = "bool"; break;
      case NumType::Complex: out.type = "complex"; break;
      default: out.type = "int";
    }
    return out;
  }
  const int64_t n = data.size(0), stride = data.stride(0);
  out.items.reserve(n);
  for (int64_t k = 0; k < n; ++k) out.items.push_back(load_number(p + k * stride * size, type));
  return out;
}

// ---- `with torch.no_grad():` and friends: the grad mode for a block, restored however it is left ----
// As the context managers do: __enter__ saves the mode and sets it, __exit__ sets the saved one back.
// The block's end calls exit(); a return, break, continue or exception out of it runs the destructor.
struct GradMode {
  explicit GradMode(bool enabled) : prev(c10::GradMode::is_enabled()) { c10::GradMode::set_enabled(enabled); }
  ~GradMode() { exit(); }
  GradMode(const GradMode&) = delete;
  GradMode& operator=(const GradMode&) = delete;
  void exit() {
    if (armed) c10::GradMode::set_enabled(prev);
    armed = false;
  }
  bool prev;
  bool armed = true;
};

// ---- `with torch.autocast("cpu", dtype=, enabled=, cache_enabled=)`: torch/amp/autocast_mode.py ----
// The constructor is autocast.__init__ then __enter__, step for step; exit() (the block's end) and the
// destructor (a return, break, continue or exception out of it) are __exit__. `enabled` is the argument
// as passed (a bool, or an int, float or None whose Python type name is `enabled_type`): __init__ tests
// its truth, __enter__'s torch.set_autocast_enabled takes only a bool. Likewise `cache` (None: the
// current setting; another non-bool: `cache_type`, which torch.set_autocast_cache_enabled refuses
// last, after the other settings were made: eager leaves them made, and so does this, unarmed).
struct Autocast {
  template <typename E, typename C>
  Autocast(at::DeviceType device, const std::string& name, std::optional<at::ScalarType> dtype, const E& enabled,
           std::string enabled_type, const C& cache, const std::string& cache_type)
      : device(device) {
    // __init__
    const at::ScalarType fast = dtype ? *dtype : at::autocast::get_autocast_dtype(device);
    bool cache_enabled = false;
    if constexpr (std::is_same_v<C, bool>) {
      cache_enabled = cache;
    } else if constexpr (std::is_same_v<C, std::optional<bool>>) {
      cache_enabled = cache.has_value() ? *cache : at::autocast::is_autocast_cache_enabled();
    } else if constexpr (std::is_same_v<C, std::nullopt_t>) {
      cache_enabled = at::autocast::is_autocast_cache_enabled();
    }
    bool on = false;
    if constexpr (std::is_same_v<E, std::nullopt_t>) {
      on = false;
    } else {
      on = enabled != 0;  // `if enabled:`
    }
    if (on && fast != at::kBFloat16 && fast != at::kHalf) {
      warn("In " + name + " autocast, but the target dtype is not supported. Disabling autocast.\n" + name +
               " Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
           false);
      on = false;
      enabled_type.clear();  // enabled = False
    }
    // __enter__
    prev_cache = at::autocast::is_autocast_cache_enabled();
    prev = at::autocast::is_autocast_enabled(device);
    prev_fast = at::autocast::get_autocast_dtype(device);
    if (!enabled_type.empty())
      raise(PyError::TypeError, "set_autocast_enabled(): argument 'enabled' (position 2) must be bool, not " +
                                    enabled_type);
    at::autocast::set_autocast_enabled(device, on);
    at::autocast::set_autocast_dtype(device, fast);
    at::autocast::increment_nesting();
    if (!cache_type.empty()) raise(PyError::TypeError, "enabled must be a bool (got " + cache_type + ")");
    at::autocast::set_autocast_cache_enabled(cache_enabled);
    armed = true;
  }
  ~Autocast() { exit(); }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;
  // __exit__: the cast cache is dropped when the nesting returns to 0, then the saved state comes back.
  void exit() {
    if (!armed) return;
    armed = false;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device, prev);
    at::autocast::set_autocast_dtype(device, prev_fast);
    at::autocast::set_autocast_cache_enabled(prev_cache);
  }
  at::DeviceType device;
  bool prev_cache = false;
  bool prev = false;
  at::ScalarType prev_fast = at::ScalarType::Undefined;
  bool armed = false;
};

// x[range(a, b, c)]: the range's ints, as PyTorch turns the sequence into an index.
inline List<int64_t> range_list(int64_t start, int64_t stop, int64_t step) {
  check_range_step(step);
  const int64_t n = range_len(start, stop, step);
  std::vector<int64_t> v;
  v.reserve(n);
  for (int64_t k = 0; k < n; ++k) v.push_back(range_item(start, step, k));
  return List<int64_t>(std::move(v));
}

}  // namespace ppy
