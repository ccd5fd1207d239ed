// The ppy runtime: the RegionFunction type that stands in for a compiled
// Python function. Built once per (torch, Python, compiler) and cached; the
// per-cell region translation units never include Python or pybind headers
// beyond Python.h, so they stay cheap to compile.
//
// A call: guard (exact tensor types, no TorchFunctionMode, device types the
// region was built for, argument kinds as compiled) -> ONE call into the
// region's C++ entry with the GIL released -> results wrapped. When the guard
// fails the Python function runs instead and the fallback is counted.
// A function may have several variants (built for the kinds and values its calls
// brought): they share the binding of the arguments and are tried in order; when
// none of them takes a call, the miss hook hears of it (and may build another).
// Argument and result handling allocate nothing on the heap once a thread has
// made its first call (see Frame); only the Python result objects are new.
#include <Python.h>
#include <structmember.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Size.h>
#include <torch/csrc/autograd/forward_grad.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ppy_abi.h"
#include "module_plan.h"

#ifndef TORCH_EXTENSION_NAME
#error "TORCH_EXTENSION_NAME must name this module"
#endif
#define PPY_CAT_(a, b) a##b
#define PPY_CAT(a, b) PPY_CAT_(a, b)
#define PPY_STR_(a) #a
#define PPY_STR(a) PPY_STR_(a)

namespace {

constexpr Py_ssize_t kMaxArgs = 64;
// Calls whose tensor arguments hold at least this many elements in all run
// with the GIL released.
constexpr int64_t kReleaseGilElements = 1 << 16;

PyObject* g_fallback_hook = nullptr;  // callable(region, reason) or nullptr

struct RegionFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* dict;        // __dict__: __wrapped__, __name__, __doc__, ...
  PyObject* func;        // the Python function (fallback)
  PyObject* owner;       // the region module: keeps the .so loaded
  PyObject* param_names; // tuple of str
  PyObject* defaults;    // tuple: values for the last len(defaults) params
  PyObject* line_notes;  // dict: line -> "region 'f', line L: <source>"
  PyObject* result_types;// tuple of structseq types named by 'R<k>' in ret
  PyObject* last_reason; // str or None
  ppy::Entry entry;
  std::string* kinds;    // one letter per parameter
  std::string* ret;      // return spec
  uint64_t device_mask;  // bit per c10::DeviceType the region was built for
  bool has_list;         // some parameter is a tensor list ('L') or a sequence of ints ('I')
  bool check_unobserved; // level 2-3 code: establish Out::unobserved on each call
  int extras;            // what the body ignores: 1 extra positional arguments (*args), 2 extra keywords;
                         // 4: it reads **kwargs, and a variant takes extra keywords as its last parameters,
                         // by name (those it was built for, in the call's order); 8: the parameters are
                         // positional-only (a segment passed **kwargs): every keyword goes to **kwargs
  PyObject* constants;   // tuple, one item per parameter: the value a 'K' parameter must hold (or nullptr)
  PyObject* global_guards;  // tuple of (dict, name, value): globals read at the call, checked to be the same
  PyObject* variants;    // list of the other variants (RegionFunction), tried in order after this one
  PyObject* miss;        // callable(region, bound args, reason) when no variant takes a call, or nullptr
  bool has_entry;        // false: a function whose variants are built at its calls, none built yet
  Py_ssize_t calls;
  Py_ssize_t fallbacks;
  ppy_modules::Plan* plan;  // what is read of module parameters ('M'); set by set_plan
  PyObject* resolver;       // callable(region) -> None once it set the plan, or a str why not yet
  PyObject* owner_class;    // the class this region is a method of (__set_name__), or nullptr
  PyObject* delegate;       // a function split around what a region cannot take: its Python driver, or nullptr
  PyObject* parts;          // with a delegate: the regions (RegionFunctions) the driver calls, a tuple
};

// ---- building results ------------------------------------------------------

struct OutCursor {
  ppy::Out& out;
  size_t t = 0, f = 0, i = 0;
};

PyObject* build_result(RegionFunction* self, const char*& spec, OutCursor& cur);

// Past one item of a return spec (a letter, "(...)", "[...]" or "R<k>(...)").
void skip_item(const char*& spec) {
  const char c = *spec++;
  if (c == 'R') spec += 2;  // the result type's digit and its '('
  if (c == '(' || c == '[' || c == 'R') {
    while (*spec && *spec != ')' && *spec != ']') skip_item(spec);
    if (*spec) ++spec;
  }
}

// How many items follow `spec` up to the matching ')' or ']'.
Py_ssize_t count_items(const char* spec) {
  Py_ssize_t n = 0;
  while (*spec && *spec != ')' && *spec != ']') {
    skip_item(spec);
    ++n;
  }
  return n;
}

// Fills the n slots of a tuple, list or structseq (through `set`) from the items after '(' or '['.
template <typename Set>
bool fill_items(RegionFunction* self, const char*& spec, OutCursor& cur, Py_ssize_t n, Set set) {
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* item = build_result(self, spec, cur);
    if (!item) return false;
    set(k, item);  // steals
  }
  if (*spec == ')' || *spec == ']') ++spec;
  return true;
}

// The next `n` ints of the results into `seq`, a new tuple (or torch.Size) of that length; nullptr, with
// `seq` released, if one cannot be made.
PyObject* fill_ints(PyObject* seq, OutCursor& cur, int64_t n) {
  if (!seq) return nullptr;
  for (int64_t k = 0; k < n; ++k) {
    PyObject* v = PyLong_FromLongLong(cur.out.i[cur.i++]);
    if (!v) { Py_DECREF(seq); return nullptr; }
    PyTuple_SET_ITEM(seq, k, v);
  }
  return seq;
}

PyObject* build_result(RegionFunction* self, const char*& spec, OutCursor& cur) {
  const char c = *spec++;
  switch (c) {
    case 'T':
      return THPVariable_Wrap(std::move(cur.out.t[cur.t++]));
    case 'f':
      return PyFloat_FromDouble(cur.out.f[cur.f++]);
    case 'i':
      return PyLong_FromLongLong(cur.out.i[cur.i++]);
    case 'b':
      return PyBool_FromLong(static_cast<long>(cur.out.i[cur.i++]));
    case 'N':
      Py_RETURN_NONE;
    case 'D': {  // a torch.device: its type, then its index
      const auto type = static_cast<c10::DeviceType>(cur.out.i[cur.i++]);
      const auto index = static_cast<c10::DeviceIndex>(cur.out.i[cur.i++]);
      return THPDevice_New(c10::Device(type, index));
    }
    case 'd': {  // a torch.dtype (the registry's own object, as tensor.dtype gives it)
      PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<at::ScalarType>(cur.out.i[cur.i++])));
      Py_XINCREF(dtype);
      return dtype;
    }
    case 'O': {  // a tensor or None (an undefined tensor)
      at::Tensor& t = cur.out.t[cur.t++];
      if (!t.defined()) Py_RETURN_NONE;
      return THPVariable_Wrap(std::move(t));
    }
    case 'n': {  // a number whose type the region decided at run time: a tag, then the value
      const int64_t tag = cur.out.i[cur.i++];
      if (tag == 0) return PyLong_FromLongLong(cur.out.i[cur.i++]);
      if (tag == 1) return PyFloat_FromDouble(cur.out.f[cur.f++]);
      if (tag == 2) return PyBool_FromLong(static_cast<long>(cur.out.i[cur.i++]));
      const double re = cur.out.f[cur.f++];
      const double im = cur.out.f[cur.f++];
      return PyComplex_FromDoubles(re, im);
    }
    case 'l':    // a list of tensors, ints or floats: the length, then the items
    case 'j':
    case 'g': {
      const int64_t n = cur.out.i[cur.i++];
      PyObject* list = PyList_New(n);
      if (!list) return nullptr;
      for (int64_t k = 0; k < n; ++k) {
        PyObject* v = c == 'l'   ? THPVariable_Wrap(std::move(cur.out.t[cur.t++]))
                      : c == 'j' ? PyLong_FromLongLong(cur.out.i[cur.i++])
                                 : PyFloat_FromDouble(cur.out.f[cur.f++]);
        if (!v) { Py_DECREF(list); return nullptr; }
        PyList_SET_ITEM(list, k, v);
      }
      return list;
    }
    case '[': {  // a list of a length known when the region was compiled
      const Py_ssize_t n = count_items(spec);
      PyObject* list = PyList_New(n);
      if (!list) return nullptr;
      if (!fill_items(self, spec, cur, n, [&](Py_ssize_t k, PyObject* v) { PyList_SET_ITEM(list, k, v); })) {
        Py_DECREF(list);
        return nullptr;
      }
      return list;
    }
    case 'V': {  // a tuple of as many tensors as the next int says
      const int64_t n = cur.out.i[cur.i++];
      PyObject* tup = PyTuple_New(n);
      if (!tup) return nullptr;
      for (int64_t k = 0; k < n; ++k) {
        PyObject* v = THPVariable_Wrap(std::move(cur.out.t[cur.t++]));
        if (!v) { Py_DECREF(tup); return nullptr; }
        PyTuple_SET_ITEM(tup, k, v);
      }
      return tup;
    }
    case 'S': {  // a torch.Size (a tuple subclass): the count, then the sizes
      const int64_t n = cur.out.i[cur.i++];
      return fill_ints(THPSizeType.tp_alloc(&THPSizeType, n), cur, n);
    }
    case 'Y': {  // a plain tuple of ints (tuple(x.shape), a slice of one): the count, then the ints
      const int64_t n = cur.out.i[cur.i++];
      return fill_ints(PyTuple_New(n), cur, n);
    }
    case '(': {
      const Py_ssize_t n = count_items(spec);
      PyObject* tup = PyTuple_New(n);
      if (!tup) return nullptr;
      if (!fill_items(self, spec, cur, n, [&](Py_ssize_t k, PyObject* v) { PyTuple_SET_ITEM(tup, k, v); })) {
        Py_DECREF(tup);
        return nullptr;
      }
      return tup;
    }
    case 'R': {  // R<digit>( ... ): a torch.return_types structseq
      const int k = *spec++ - '0';
      if (*spec++ != '(') break;
      PyTypeObject* tp = (PyTypeObject*)PyTuple_GET_ITEM(self->result_types, k);
      PyObject* seq = PyStructSequence_New(tp);
      if (!seq) return nullptr;
      const Py_ssize_t n = count_items(spec);
      if (!fill_items(self, spec, cur, n, [&](Py_ssize_t j, PyObject* v) { PyStructSequence_SetItem(seq, j, v); })) {
        Py_DECREF(seq);
        return nullptr;
      }
      return seq;
    }
    default:
      break;
  }
  PyErr_Format(PyExc_SystemError, "ppy: bad return spec '%s'", self->ret->c_str());
  return nullptr;
}

// ---- per-thread call frames ------------------------------------------------------

// The scratch one call needs: its argument array, the vectors of its tensor-list and sizes
// arguments and its results. Kept per thread and reused, so they keep their
// capacity and a warm call allocates nothing for them. A stack of frames,
// because an op may call into Python (a Python kernel) and that may call a region.
struct Frame {
  std::vector<ppy::Arg> args;
  std::vector<std::vector<at::Tensor>> lists;
  std::vector<std::vector<int64_t>> int_lists;
  ppy::Out out;
};

thread_local std::vector<std::unique_ptr<Frame>> t_frames;
thread_local size_t t_depth = 0;

class FrameLease {
 public:
  explicit FrameLease(Py_ssize_t nparams, bool lists) {
    if (t_depth == t_frames.size()) t_frames.push_back(std::make_unique<Frame>());
    frame_ = t_frames[t_depth++].get();
    frame_->args.assign(static_cast<size_t>(nparams), ppy::Arg{});
    if (lists && frame_->lists.size() < static_cast<size_t>(nparams)) {
      frame_->lists.resize(nparams);
      frame_->int_lists.resize(nparams);
    }
  }
  ~FrameLease() {
    // Drop this call's tensors now, as the call would have; keep the capacity.
    for (auto& l : frame_->lists) l.clear();
    for (auto& l : frame_->int_lists) l.clear();
    ppy::Out& out = frame_->out;
    out.t.clear();
    out.f.clear();
    out.i.clear();
    out.message.clear();
    out.line = 0;
    out.error = ppy::PyError::None;
    out.unobserved = false;
    --t_depth;
  }
  FrameLease(const FrameLease&) = delete;
  FrameLease& operator=(const FrameLease&) = delete;
  Frame* operator->() const { return frame_; }

 private:
  Frame* frame_;
};

// ---- levels 2-3: can anything outside the region see its intermediates? ----------

// Dispatch keys a tensor argument may carry: a dense backend,
// autograd (not recording, checked apart), conjugate/negative bits (materialised by
// their fallbacks before any kernel writes) and the autocast keys every tensor carries
// (autocast itself is checked on the thread). Anything else (Python, functorch
// wrappers, functionalisation, quantized, ...) runs level 2's code.
constexpr c10::DispatchKeySet kReuseTensorKeys =
    c10::DispatchKeySet({c10::DispatchKey::Dense, c10::DispatchKey::ADInplaceOrView,
                         c10::DispatchKey::AutogradFunctionality, c10::DispatchKey::Conjugate,
                         c10::DispatchKey::Negative}) |
    c10::autocast_dispatch_keyset;

struct UnobservedCheck {
  bool requires_grad = false;
  bool blocked = false;

  void tensor(const at::Tensor& t) {
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (c10::AutogradMetaInterface* meta = impl->autograd_meta()) {
      if (meta->requires_grad()) requires_grad = true;
      const auto* m = static_cast<const torch::autograd::AutogradMeta*>(meta);
      if (m->fw_grad_ && !m->fw_grad_->empty()) blocked = true;  // a forward-AD dual tensor
    }
    const uint64_t keys = impl->key_set().raw_repr();
    if (keys & ~(kReuseTensorKeys.raw_repr() | c10::backend_bitset_mask.raw_repr())) blocked = true;
  }

  // Once per call, after every tensor argument was seen.
  bool ok() const {
    if (blocked) return false;
    if (requires_grad && c10::GradMode::is_enabled()) return false;  // autograd records this call
    const c10::impl::LocalDispatchKeySet tls = c10::impl::tls_local_dispatch_key_set();
    // Beyond the default (BackendSelect, ADInplaceOrView): functorch transforms, Python
    // dispatch modes and the tracer include their keys here.
    const uint64_t extra = (tls.included_ - c10::default_included_set).raw_repr() &
                           ~c10::backend_bitset_mask.raw_repr();
    if (extra) return false;
    // Autocast is on for a device when its key is no longer excluded.
    return tls.excluded_.isSupersetOf(c10::autocast_dispatch_keyset);
  }
};

// ---- the call ---------------------------------------------------------------

PyObject* fall_back(RegionFunction* self, const char* reason, PyObject* const* args,
                    size_t nargsf, PyObject* kwnames) {
  self->fallbacks++;
  PyObject* r = PyUnicode_FromString(reason);
  if (r) Py_XSETREF(self->last_reason, r);
  if (g_fallback_hook && r) {
    PyObject* res = PyObject_CallFunctionObjArgs(g_fallback_hook, (PyObject*)self, r, nullptr);
    if (!res) return nullptr;  // the hook raised (e.g. warnings as errors)
    Py_DECREF(res);
  }
  return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
}

void add_line_note(RegionFunction* self, int line) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value && line > 0) {
    PyObject* key = PyLong_FromLong(line);
    PyObject* note = key ? PyDict_GetItemWithError(self->line_notes, key) : nullptr;
    Py_XDECREF(key);
    if (note) {
      PyObject* res = PyObject_CallMethod(value, "add_note", "O", note);
      Py_XDECREF(res);
    }
    PyErr_Clear();  // a failed note must not replace the real error
  }
  if (tb) PyException_SetTraceback(value, tb);
  PyErr_Restore(type, value, tb);
}

PyObject* python_error_type(ppy::PyError e) {
  switch (e) {
    case ppy::PyError::AssertionError: return PyExc_AssertionError;
    case ppy::PyError::ValueError: return PyExc_ValueError;
    case ppy::PyError::ZeroDivisionError: return PyExc_ZeroDivisionError;
    case ppy::PyError::OverflowError: return PyExc_OverflowError;
    case ppy::PyError::IndexError: return PyExc_IndexError;
    case ppy::PyError::TypeError: return PyExc_TypeError;
    case ppy::PyError::RuntimeError: return PyExc_RuntimeError;
    case ppy::PyError::UnboundLocalError: return PyExc_UnboundLocalError;
    case ppy::PyError::NotImplementedError: return PyExc_NotImplementedError;
    default: return PyExc_SystemError;
  }
}

// Out::error of PyError::Custom: "module:qualname\n" + message, raised as that class(message).
void set_custom_error(const std::string& encoded) {
  const size_t nl = encoded.find('\n');
  const std::string path = encoded.substr(0, nl), message = nl == std::string::npos ? "" : encoded.substr(nl + 1);
  const size_t colon = path.find(':');
  PyObject* obj = PyImport_ImportModule(path.substr(0, colon).c_str());
  size_t start = colon + 1;
  while (obj && start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    PyObject* next = PyObject_GetAttrString(obj, path.substr(start, dot - start).c_str());
    Py_DECREF(obj);
    obj = next;
    start = dot + 1;
  }
  if (obj && PyExceptionClass_Check(obj)) {
    PyErr_SetString(obj, message.c_str());
  } else {
    PyErr_Clear();
    PyErr_Format(PyExc_SystemError, "ppy: the region raised %s, which is no longer importable: %s", path.c_str(),
                 message.c_str());
  }
  Py_XDECREF(obj);
}

// One variant's attempt at a call whose arguments are bound: its guards, then its entry.
// Returns the result (or nullptr with a Python error set) with *done = true; with *done = false
// the variant does not take this call and `reason` says why (nothing of it ran).
// "ppy region <qualname>": the profiler's name for a region's calls.
std::string region_scope_name(RegionFunction* self) {
  PyObject* name = self->dict ? PyDict_GetItemString(self->dict, "__qualname__") : nullptr;
  const char* text = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
  if (!text) PyErr_Clear();
  return std::string("ppy region ") + (text ? text : "?");
}

// The extra keywords of a call (into a **kwargs the body reads): bound after the parameters, in order.
struct Extras {
  PyObject* names[kMaxArgs];
  Py_ssize_t n = 0;
};

// Whether variant `self` was built for these extra keywords: its parameters past the function's own
// are named by them, in this order.
bool takes_extras(RegionFunction* self, Py_ssize_t declared, const Extras& extras) {
  const Py_ssize_t n = PyTuple_GET_SIZE(self->param_names);
  if (n != declared + extras.n) return false;
  for (Py_ssize_t k = 0; k < extras.n; ++k) {
    PyObject* want = PyTuple_GET_ITEM(self->param_names, declared + k);
    if (want != extras.names[k] && PyUnicode_Compare(want, extras.names[k]) != 0) return false;
  }
  return true;
}

PyObject* attempt_variant(RegionFunction* self, RegionFunction* head, PyObject* const* bound,
                          std::string& reason_out, bool* done, const Extras& extras) {
  *done = false;
  if ((head->extras & 4) && !takes_extras(self, PyTuple_GET_SIZE(head->param_names), extras)) {
    reason_out = extras.n ? "no variant has been built for these keywords into **kwargs yet"
                          : "the variant was built for keywords into **kwargs that this call does not pass";
    return nullptr;
  }
  const std::string& kinds = *self->kinds;
  const Py_ssize_t nparams = static_cast<Py_ssize_t>(kinds.size());
  if (self->resolver) {  // a method: the classes its plan names exist once the cell has run
    PyObject* resolver = self->resolver;
    Py_INCREF(resolver);  // resolving clears self->resolver
    PyObject* why = PyObject_CallOneArg(resolver, (PyObject*)self);
    Py_DECREF(resolver);
    if (!why) { *done = true; return nullptr; }
    if (why != Py_None) {
      reason_out = PyUnicode_Check(why) ? PyUnicode_AsUTF8(why) : "its classes are not defined yet";
      Py_DECREF(why);
      return nullptr;
    }
    Py_DECREF(why);
  }
  // Globals read when the variant was compiled at a call: still the same objects (or equal numbers, strs).
  for (Py_ssize_t k = 0; self->global_guards && k < PyTuple_GET_SIZE(self->global_guards); ++k) {
    PyObject* g = PyTuple_GET_ITEM(self->global_guards, k);
    PyObject* now = PyDict_GetItemWithError(PyTuple_GET_ITEM(g, 0), PyTuple_GET_ITEM(g, 1));
    if (!now) PyErr_Clear();
    if (!now || !ppy_modules::same_constant(now, PyTuple_GET_ITEM(g, 2))) {
      const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(g, 1));
      reason_out = std::string("the global '") + (name ? name : "?") + "' is not the object the region was built for";
      return nullptr;
    }
  }

  FrameLease frame(nparams, self->has_list);
  ppy::Arg* cargs = frame->args.data();
  UnobservedCheck unobserved;
  const char* reason = nullptr;
  int64_t work = 0;  // elements in all tensor arguments
  auto check_tensor = [&](PyObject* o) -> const at::Tensor* {
    if (!THPVariable_CheckExact(o)) {
      reason = THPVariable_Check(o) ? "a tensor argument is a subclass of torch.Tensor"
                                    : "an argument is not a torch.Tensor";
      return nullptr;
    }
    const at::Tensor& t = THPVariable_Unpack(o);
    // Regions are compiled for strided tensors (adapters such as torch.norm take the strided
    // path); sparse, nested and MKL-DNN tensors run the Python body.
    if (t.layout() != c10::kStrided) {
      reason = "a tensor argument is not strided (sparse, nested or MKL-DNN)";
      return nullptr;
    }
    work += t.unsafeGetTensorImpl()->numel();
    if (!((self->device_mask >> static_cast<int>(t.device().type())) & 1)) {
      reason = "a tensor is on a device type the region was not built for";
      return nullptr;
    }
    if (self->check_unobserved) unobserved.tensor(t);
    return &t;
  };
  std::string constant_reason;
  for (Py_ssize_t p = 0; p < nparams && !reason; ++p) {
    PyObject* o = bound[p];
    ppy::Arg& a = cargs[p];
    const char kind = kinds[p];
    if ((kind == 'J' || kind == 'G' || kind == 'C' || kind == 'E') && o == Py_None) {
      a.none = true;  // an optional kind holding None
      continue;
    }
    switch (kind) {
      case 'K': {  // a value the variant was specialised for: compiled in, compared here
        PyObject* want = self->constants ? PyTuple_GET_ITEM(self->constants, p) : nullptr;
        if (!want || !ppy_modules::same_constant(o, want)) {
          const char* pname = PyUnicode_AsUTF8(PyTuple_GET_ITEM(self->param_names, p));
          constant_reason = std::string("the argument '") + (pname ? pname : "?") + "' is " +
                            ppy_modules::describe(o) + ", not the value the region was specialised for";
          reason = constant_reason.c_str();
        }
        break;
      }
      case 'T':
        a.t = check_tensor(o);
        break;
      case 'F':  // an int or a float, told apart: Python keeps the value's type
        if (PyFloat_CheckExact(o)) {
          a.f = PyFloat_AS_DOUBLE(o);
        } else if (PyLong_CheckExact(o)) {
          int overflow = 0;
          a.i = PyLong_AsLongLongAndOverflow(o, &overflow);
          a.variant = true;
          if (overflow) reason = "an int argument does not fit in 64 bits";
        } else {
          reason = "a number argument is neither exactly a Python int nor a float";
        }
        break;
      case 'G':
        if (PyFloat_CheckExact(o)) a.f = PyFloat_AS_DOUBLE(o);
        else reason = "a float-or-None argument is neither exactly a Python float nor None";
        break;
      case 'J': {
        if (!PyLong_CheckExact(o)) { reason = "an int-or-None argument is neither exactly a Python int nor None"; break; }
        int overflow = 0;
        a.i = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) reason = "an int argument does not fit in 64 bits";
        break;
      }
      case 'C':
        if (PyBool_Check(o)) a.i = (o == Py_True);
        else reason = "a bool-or-None argument is neither a Python bool nor None";
        break;
      case 'd':
      case 'E':
        if (THPDtype_Check(o)) a.i = static_cast<int64_t>(reinterpret_cast<THPDtype*>(o)->scalar_type);
        else reason = "a dtype argument is not a torch.dtype";
        break;
      case 'D':
        if (THPDevice_Check(o)) a.device = reinterpret_cast<THPDevice*>(o)->device;
        else reason = "a device argument is not a torch.device";
        break;
      case 'V':  // a torch.device, or a device string (kept a str: Python does not convert it)
        if (THPDevice_Check(o)) {
          a.device = reinterpret_cast<THPDevice*>(o)->device;
        } else if (PyUnicode_CheckExact(o)) {
          a.s = PyUnicode_AsUTF8(o);
          a.variant = true;
          if (!a.s) { PyErr_Clear(); reason = "a device string is not valid UTF-8"; }
        } else {
          reason = "a device argument is neither a torch.device nor a str";
        }
        break;
      case 'Z':  // exactly a torch.Size (a tuple's `+` and slices are tuples; a Size's are Sizes)
        if (Py_TYPE(o) != &THPSizeType) {
          reason = "a torch.Size argument is not a torch.Size";
          break;
        }
        [[fallthrough]];
      case 'I': {  // a sequence of ints: a list, a tuple or a torch.Size
        if (!PyList_CheckExact(o) && !PyTuple_Check(o)) {
          reason = "a sizes argument is not a list or tuple of ints";
          break;
        }
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        frame->int_lists[p].reserve(n);
        for (Py_ssize_t j = 0; j < n && !reason; ++j) {
          PyObject* item = PySequence_Fast_GET_ITEM(o, j);
          int overflow = 0;
          const long long v = PyLong_CheckExact(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : 0;
          if (!PyLong_CheckExact(item) || overflow) reason = "a sizes argument holds something other than ints";
          else frame->int_lists[p].push_back(v);
        }
        a.ints = &frame->int_lists[p];
        break;
      }
      case 'O':
        if (o == Py_None) a.none = true;
        else a.t = check_tensor(o);
        break;
      case 'f':
        if (PyFloat_CheckExact(o)) a.f = PyFloat_AS_DOUBLE(o);
        else reason = "a float argument is not exactly a Python float";
        break;
      case 'i': {
        if (!PyLong_CheckExact(o)) { reason = "an int argument is not exactly a Python int"; break; }
        int overflow = 0;
        a.i = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) reason = "an int argument does not fit in 64 bits";
        break;
      }
      case 'b':
        if (PyBool_Check(o)) a.i = (o == Py_True);
        else reason = "a bool argument is not a Python bool";
        break;
      case 's':
        if (PyUnicode_CheckExact(o)) a.s = PyUnicode_AsUTF8(o);
        if (!a.s) { PyErr_Clear(); reason = "a str argument is not a Python str"; }
        break;
      case 'N':
        if (o == Py_None) a.none = true;
        else reason = "an argument compiled as None is not None";
        break;
      case 'M':  // a module: read below, once every other argument is checked
        if (!self->plan) reason = "internal: a module parameter without a plan";
        break;
      case 'L': {
        if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o)) {
          reason = "a tensor-list argument is not a list or tuple";
          break;
        }
        PyObject* seq = o;
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        std::vector<at::Tensor>& list = frame->lists[p];
        list.reserve(n);
        for (Py_ssize_t j = 0; j < n && !reason; ++j) {
          const at::Tensor* t = check_tensor(PySequence_Fast_GET_ITEM(seq, j));
          if (t) list.push_back(*t);
        }
        a.tl = &list;
        break;
      }
      default:
        reason = "internal: unknown parameter kind";
    }
  }
  if (reason) {
    reason_out = reason;
    return nullptr;
  }

  // Module parameters: every attribute the region reads, before any operator runs.
  std::optional<ppy_modules::Gathered> modules;
  if (self->plan) {
    modules.emplace();
    c10::SmallVector<std::pair<Py_ssize_t, ptrdiff_t>, 2> bases;
    for (Py_ssize_t p = 0; p < nparams; ++p) {
      const int li = p < static_cast<Py_ssize_t>(self->plan->params.size()) ? self->plan->params[p] : -1;
      if (li < 0) continue;
      const char* pname = PyUnicode_AsUTF8(PyTuple_GET_ITEM(self->param_names, p));
      const ptrdiff_t base =
          ppy_modules::read_param(*self->plan, li, bound[p], pname ? pname : "self", *modules, self->device_mask);
      if (base < 0) {
        PyErr_Clear();
        reason_out = modules->reason;
        return nullptr;  // `modules` lets go of what was read before the Python method runs
      }
      bases.emplace_back(p, base);
    }
    if (!ppy_modules::global_hooks_free(*self->plan, *modules)) {
      reason_out = modules->reason;
      return nullptr;
    }
    modules->link();
    for (auto& [p, base] : bases) cargs[p].m = modules->args.data() + base;
    work += modules->work;
    // The attributes are tensors the region is given too: a parameter that requires grad makes autograd record.
    if (self->check_unobserved)
      for (const at::Tensor& t : modules->tensors) unobserved.tensor(t);
  }

  *done = true;
  self->calls++;
  if (head != self) head->calls++;
  ppy::Out& out = frame->out;
  out.unobserved = self->check_unobserved && unobserved.ok();
  bool failed = false;
  out.gil_released = work >= kReleaseGilElements;  // the region then takes the GIL to poll for signals
  // A profiler sees the region's ATen calls inside a scope of its own ("ppy region f"), as it sees a
  // record_function block's; with no profiler attached this is a thread-local check.
  at::RecordFunction record(at::RecordScope::USER_SCOPE);
  if (C10_UNLIKELY(record.isActive())) record.before(region_scope_name(head));
  try {
    // ATen's warnings (TORCH_WARN) become Python warnings when the call ends, as in eager's bindings.
    torch::PyWarningHandler warnings;
    if (!out.gil_released) {
      // Small inputs: releasing and re-taking the GIL would cost more than the
      // ops themselves (measured: ~0.2 us of a 2.6 us call).
      try {
        self->entry(cargs, &out);
      } catch (...) {
        failed = true;
        torch::translate_exception_to_python(std::current_exception());
      }
    } else {
      // Large inputs: let other Python threads run meanwhile, as eager does per op.
      Py_BEGIN_ALLOW_THREADS
      try {
        self->entry(cargs, &out);
      } catch (...) {
        failed = true;
        PyGILState_STATE st = PyGILState_Ensure();  // translation needs the GIL
        torch::translate_exception_to_python(std::current_exception());
        PyGILState_Release(st);
      }
      Py_END_ALLOW_THREADS
    }
    if (!failed && out.error == ppy::PyError::Pending) {
      failed = true;  // a signal handler raised while the region polled (KeyboardInterrupt): already set
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ppy: a region stopped for a Python error it lost");
    } else if (!failed && out.error != ppy::PyError::None) {
      failed = true;
      if (out.error == ppy::PyError::Custom) {
        set_custom_error(out.message);
      } else {
        PyErr_SetString(python_error_type(out.error), out.message.c_str());
      }
    }
    if (failed) warnings.set_in_exception();
  } catch (python_error& e) {  // a warning that the warning filters turned into an error
    e.restore();
    failed = true;
  }
  if (failed) {
    add_line_note(self, out.line);
    return nullptr;
  }
  OutCursor cur{out};
  const char* spec = self->ret->c_str();
  return build_result(self, spec, cur);
}

PyObject* region_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                            PyObject* kwnames) {
  auto* self = reinterpret_cast<RegionFunction*>(callable);
  // Split around statements a region cannot take: the driver runs them and calls the parts' regions.
  if (self->delegate) return PyObject_Vectorcall(self->delegate, args, nargsf, kwnames);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  const Py_ssize_t nparams = PyTuple_GET_SIZE(self->param_names);
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

  // Bind positional and keyword arguments to parameter slots; anything
  // Python would reject (arity, unknown or repeated keyword) runs the Python
  // function so the user sees Python's own TypeError. Every variant has the function's signature.
  if ((nargs > nparams && !(self->extras & 1)) || nparams > kMaxArgs)
    return fall_back(self, "arity differs from the compiled signature", args, nargsf, kwnames);
  PyObject* bound[kMaxArgs];
  for (Py_ssize_t k = 0; k < nparams; ++k) bound[k] = k < nargs ? args[k] : nullptr;  // beyond: *args, unread
  Extras extras;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t slot = -1;
    for (Py_ssize_t p = 0; p < nparams && !(self->extras & 8); ++p) {
      PyObject* pname = PyTuple_GET_ITEM(self->param_names, p);
      if (pname == key || PyUnicode_Compare(pname, key) == 0) { slot = p; break; }
    }
    if (slot < 0 && (self->extras & 2)) continue;  // into **kwargs, which the body never reads
    if (slot < 0 && (self->extras & 4)) {  // into **kwargs, which the body reads: after the parameters
      if (nparams + extras.n >= kMaxArgs)
        return fall_back(self, "too many keyword arguments for a region", args, nargsf, kwnames);
      extras.names[extras.n] = key;
      bound[nparams + extras.n++] = args[nargs + k];
      continue;
    }
    if (slot < 0 || bound[slot])
      return fall_back(self, "keyword arguments do not match the signature", args, nargsf, kwnames);
    bound[slot] = args[nargs + k];
  }
  const Py_ssize_t ndefaults = PyTuple_GET_SIZE(self->defaults);
  for (Py_ssize_t p = 0; p < nparams; ++p) {
    if (bound[p]) continue;
    const Py_ssize_t d = p - (nparams - ndefaults);
    if (d < 0)
      return fall_back(self, "arity differs from the compiled signature", args, nargsf, kwnames);
    bound[p] = PyTuple_GET_ITEM(self->defaults, d);
  }

  if (at::impl::torch_function_mode_enabled())
    return fall_back(self, "a TorchFunctionMode is active", args, nargsf, kwnames);
  // A TorchDispatchMode sees every ATen call: it gets eager's (a region may pick another overload, e.g.
  // rsub.Tensor of a wrapped number where eager's `1 - x` calls rsub.Scalar).
  if (c10::impl::dispatch_mode_enabled())
    return fall_back(self, "a TorchDispatchMode is active", args, nargsf, kwnames);

  // The reason a call is not taken is the first variant's (the one the cell built, if any): the others
  // were built for other kinds, and their reasons say less about this call.
  std::string reason = "no variant has been built for these arguments yet", other;
  for (int round = 0; round < 2; ++round) {
    bool done = false;
    bool first = true;
    if (self->has_entry) {
      PyObject* r = attempt_variant(self, self, bound, reason, &done, extras);
      if (done) return r;
      first = false;
    }
    const Py_ssize_t nvariants = self->variants ? PyList_GET_SIZE(self->variants) : 0;
    for (Py_ssize_t k = 0; k < nvariants; ++k) {
      PyObject* v = PyList_GET_ITEM(self->variants, k);
      Py_INCREF(v);  // a miss hook may change the list
      PyObject* r =
          attempt_variant(reinterpret_cast<RegionFunction*>(v), self, bound, first ? reason : other, &done, extras);
      Py_DECREF(v);
      if (done) return r;
      first = false;
    }
    if (round > 0 || !self->miss) break;
    // No variant takes the call: the hook may build one for it (returning true when it is ready now).
    // The hook sees the parameters and, where the body reads **kwargs, a dict of the extra keywords last.
    const bool keywords = self->extras & 4;
    PyObject* bound_args = PyTuple_New(nparams + (keywords ? 1 : 0));
    if (!bound_args) return nullptr;
    for (Py_ssize_t p = 0; p < nparams; ++p) {
      Py_INCREF(bound[p]);
      PyTuple_SET_ITEM(bound_args, p, bound[p]);
    }
    if (keywords) {
      PyObject* kw = PyDict_New();
      for (Py_ssize_t k = 0; kw && k < extras.n; ++k)
        if (PyDict_SetItem(kw, extras.names[k], bound[nparams + k]) < 0) Py_CLEAR(kw);
      if (!kw) { Py_DECREF(bound_args); return nullptr; }
      PyTuple_SET_ITEM(bound_args, nparams, kw);
    }
    PyObject* why = PyUnicode_FromString(reason.c_str());
    PyObject* hook = self->miss;
    Py_INCREF(hook);
    PyObject* res = why ? PyObject_CallFunctionObjArgs(hook, callable, bound_args, why, nullptr) : nullptr;
    Py_DECREF(bound_args);
    Py_XDECREF(why);
    if (!res) {
      // A KeyboardInterrupt reaches the caller; any other failure of the hook never fails the call.
      if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) { Py_DECREF(hook); return nullptr; }
      PyErr_WriteUnraisable(hook);
      Py_DECREF(hook);
      break;
    }
    Py_DECREF(hook);
    const int again = PyObject_IsTrue(res);
    Py_DECREF(res);
    if (again <= 0) {
      PyErr_Clear();
      break;
    }
    // The hook split the function: its driver runs this call.
    if (self->delegate) return PyObject_Vectorcall(self->delegate, args, nargsf, kwnames);
  }
  return fall_back(self, reason.c_str(), args, nargsf, kwnames);
}

// ---- the type ------------------------------------------------------------------

int region_traverse(RegionFunction* self, visitproc visit, void* arg) {
  Py_VISIT(self->dict);
  Py_VISIT(self->func);
  Py_VISIT(self->owner);
  Py_VISIT(self->param_names);
  Py_VISIT(self->defaults);
  Py_VISIT(self->line_notes);
  Py_VISIT(self->result_types);
  Py_VISIT(self->last_reason);
  Py_VISIT(self->constants);
  Py_VISIT(self->global_guards);
  Py_VISIT(self->variants);
  Py_VISIT(self->miss);
  Py_VISIT(self->resolver);
  Py_VISIT(self->owner_class);
  Py_VISIT(self->delegate);
  Py_VISIT(self->parts);
  return 0;
}

int region_clear(RegionFunction* self) {
  Py_CLEAR(self->dict);
  Py_CLEAR(self->func);
  Py_CLEAR(self->owner);
  Py_CLEAR(self->param_names);
  Py_CLEAR(self->defaults);
  Py_CLEAR(self->line_notes);
  Py_CLEAR(self->result_types);
  Py_CLEAR(self->last_reason);
  Py_CLEAR(self->constants);
  Py_CLEAR(self->global_guards);
  Py_CLEAR(self->variants);
  Py_CLEAR(self->miss);
  Py_CLEAR(self->resolver);
  Py_CLEAR(self->owner_class);
  Py_CLEAR(self->delegate);
  Py_CLEAR(self->parts);
  return 0;
}

void region_dealloc(RegionFunction* self) {
  PyObject_GC_UnTrack(self);
  region_clear(self);
  delete self->kinds;
  delete self->ret;
  delete self->plan;
  Py_TYPE(self)->tp_free((PyObject*)self);
}

PyObject* region_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static const char* kw[] = {"func", "owner", "index", "kinds", "ret", "device_mask",
                             "param_names", "defaults", "line_notes", "result_types", "check_unobserved", "extras",
                             "constants", "global_guards", nullptr};
  PyObject *func, *owner, *param_names, *defaults, *line_notes, *result_types;
  int index;
  int extras = 0;
  const char *kinds, *ret;
  unsigned long long mask;
  int check_unobserved = 0;  // level 2-3 code that reads Out::unobserved
  PyObject* constants = nullptr;      // per parameter: the value of a 'K' one
  PyObject* global_guards = nullptr;  // (dict, name, value) of the globals read at the call
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOissKO!O!O!O!|piO!O!", const_cast<char**>(kw), &func,
                                   &owner, &index, &kinds, &ret, &mask, &PyTuple_Type, &param_names,
                                   &PyTuple_Type, &defaults, &PyDict_Type, &line_notes,
                                   &PyTuple_Type, &result_types, &check_unobserved, &extras,
                                   &PyTuple_Type, &constants, &PyTuple_Type, &global_guards))
    return nullptr;
  // No module: a function compiled at its calls, whose variants are added as they are built.
  const bool has_entry = owner != Py_None;
  if (!PyCallable_Check(func)) {
    PyErr_SetString(PyExc_TypeError, "func must be callable");
    return nullptr;
  }
  if ((has_entry && static_cast<Py_ssize_t>(std::strlen(kinds)) != PyTuple_GET_SIZE(param_names)) ||
      PyTuple_GET_SIZE(defaults) > PyTuple_GET_SIZE(param_names) ||
      PyTuple_GET_SIZE(param_names) > kMaxArgs ||
      (constants && PyTuple_GET_SIZE(constants) != PyTuple_GET_SIZE(param_names))) {
    PyErr_SetString(PyExc_ValueError, "kinds, param_names and defaults disagree");
    return nullptr;
  }
  // The return spec indexes result_types ('R<k>'): check it here, not on every call.
  for (const char* c = ret; *c; ++c) {
    if (std::strchr("Tfib()NVSYOnljg[]Dd", *c) == nullptr && *c != 'R') {
      PyErr_Format(PyExc_ValueError, "bad return spec '%s'", ret);
      return nullptr;
    }
    if (*c == 'R') {
      const int k = c[1] - '0';
      if (k < 0 || k >= PyTuple_GET_SIZE(result_types) || c[2] != '(' ||
          !PyType_Check(PyTuple_GET_ITEM(result_types, k))) {
        PyErr_Format(PyExc_ValueError, "return spec '%s' names a result type that was not given", ret);
        return nullptr;
      }
      ++c;
    }
  }
  for (Py_ssize_t g = 0; global_guards && g < PyTuple_GET_SIZE(global_guards); ++g) {
    PyObject* item = PyTuple_GET_ITEM(global_guards, g);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 || !PyDict_Check(PyTuple_GET_ITEM(item, 0)) ||
        !PyUnicode_Check(PyTuple_GET_ITEM(item, 1))) {
      PyErr_SetString(PyExc_TypeError, "global_guards holds (dict, name, value) triples");
      return nullptr;
    }
  }
  ppy::Entry entry = nullptr;
  if (has_entry) {
    PyObject* capsule = PyObject_GetAttrString(owner, "__ppy_regions__");
    if (!capsule) return nullptr;
    auto* table = static_cast<const ppy::RegionTable*>(PyCapsule_GetPointer(capsule, "ppy.RegionTable"));
    Py_DECREF(capsule);
    if (!table) return nullptr;
    if (table->abi_version != ppy::kAbiVersion) {
      PyErr_Format(PyExc_ImportError, "region module ABI %d, runtime ABI %d", table->abi_version,
                   ppy::kAbiVersion);
      return nullptr;
    }
    if (index < 0 || index >= table->count) {
      PyErr_SetString(PyExc_IndexError, "region index out of range");
      return nullptr;
    }
    entry = table->regions[index].entry;
  }
  auto* self = reinterpret_cast<RegionFunction*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  self->vectorcall = region_vectorcall;
  self->dict = PyDict_New();
  Py_INCREF(func); self->func = func;
  Py_INCREF(owner); self->owner = owner;
  Py_INCREF(param_names); self->param_names = param_names;
  Py_INCREF(defaults); self->defaults = defaults;
  Py_INCREF(line_notes); self->line_notes = line_notes;
  Py_INCREF(result_types); self->result_types = result_types;
  Py_INCREF(Py_None); self->last_reason = Py_None;
  self->entry = entry;
  self->has_entry = has_entry;
  Py_XINCREF(constants); self->constants = constants;
  Py_XINCREF(global_guards); self->global_guards = global_guards;
  self->variants = nullptr;
  self->miss = nullptr;
  self->kinds = new std::string(kinds);
  self->ret = new std::string(ret);
  self->device_mask = mask;
  self->has_list = std::strchr(kinds, 'L') != nullptr || std::strchr(kinds, 'I') != nullptr ||
                   std::strchr(kinds, 'Z') != nullptr;
  self->check_unobserved = check_unobserved != 0;
  self->extras = extras;
  self->plan = nullptr;
  self->resolver = nullptr;
  self->owner_class = nullptr;
  self->delegate = nullptr;
  self->parts = nullptr;
  if (!self->dict) { Py_DECREF(self); return nullptr; }
  return (PyObject*)self;
}

PyObject* region_repr(RegionFunction* self) {
  PyObject* name = self->dict ? PyDict_GetItemString(self->dict, "__qualname__") : nullptr;
  if (name) return PyUnicode_FromFormat("<ppy region %U>", name);
  return PyUnicode_FromString("<ppy region>");
}

// True once some variant can run: a function compiled at its calls is not a region before its first build lands.
// A split function is a region when one of its parts is.
PyObject* region_get_region_flag(RegionFunction* self, void*) {
  if (self->has_entry || (self->variants && PyList_GET_SIZE(self->variants) > 0)) Py_RETURN_TRUE;
  if (self->delegate && self->parts) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(self->parts); ++k) {
      PyObject* flag = region_get_region_flag(reinterpret_cast<RegionFunction*>(PyTuple_GET_ITEM(self->parts, k)), nullptr);
      if (flag != Py_False) return flag;
      Py_DECREF(flag);
    }
  }
  Py_RETURN_FALSE;
}

PyObject* region_get_parts(RegionFunction* self, void*) {
  if (!self->delegate || !self->parts) return PyTuple_New(0);
  Py_INCREF(self->parts);
  return self->parts;
}

PyObject* region_get_delegate(RegionFunction* self, void*) {
  if (!self->delegate) Py_RETURN_NONE;
  Py_INCREF(self->delegate);
  return self->delegate;
}

// Every variant that may take a call, in the order they are tried.
PyObject* region_get_variants(RegionFunction* self, void*) {
  const Py_ssize_t n = self->variants ? PyList_GET_SIZE(self->variants) : 0;
  PyObject* out = PyTuple_New(n + (self->has_entry ? 1 : 0));
  if (!out) return nullptr;
  Py_ssize_t k = 0;
  if (self->has_entry) {
    Py_INCREF(self);
    PyTuple_SET_ITEM(out, k++, (PyObject*)self);
  }
  for (Py_ssize_t j = 0; j < n; ++j) {
    PyObject* v = PyList_GET_ITEM(self->variants, j);
    Py_INCREF(v);
    PyTuple_SET_ITEM(out, k++, v);
  }
  return out;
}

PyObject* region_get_owner(RegionFunction* self, void*) {
  if (!self->owner_class) Py_RETURN_NONE;
  Py_INCREF(self->owner_class);
  return self->owner_class;
}

// A region binds like the function it stands for: Cls.__dict__["forward"].__get__(obj) is a
// bound method, so model.forward(x) and nn.Module.__call__ call the region with the instance.
PyObject* region_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

// type.__new__ calls it for each attribute of a new class: the class a method region belongs to.
PyObject* region_set_name(RegionFunction* self, PyObject* args) {
  PyObject *owner, *name;
  if (!PyArg_ParseTuple(args, "OU", &owner, &name)) return nullptr;
  if (!self->owner_class) {
    Py_INCREF(owner);
    self->owner_class = owner;
  }
  Py_RETURN_NONE;
}

PyMethodDef region_methods[] = {
    {"__set_name__", (PyCFunction)region_set_name, METH_VARARGS,
     "records the class this region is a method of"},
    {nullptr}};

PyMemberDef region_members[] = {
    {"calls", T_PYSSIZET, offsetof(RegionFunction, calls), READONLY,
     "calls that ran the region"},
    {"fallbacks", T_PYSSIZET, offsetof(RegionFunction, fallbacks), READONLY,
     "calls that ran the Python function because a guard failed"},
    {"last_fallback_reason", T_OBJECT, offsetof(RegionFunction, last_reason), READONLY,
     "why the most recent fallback happened (None if none)"},
    {nullptr}};

PyGetSetDef region_getset[] = {
    {"__ppy_region__", (getter)region_get_region_flag, nullptr,
     "True: this callable runs an ATen region (once a variant is built)", nullptr},
    {"__ppy_variants__", (getter)region_get_variants, nullptr, "the variants that may take a call, in order",
     nullptr},
    {"__ppy_parts__", (getter)region_get_parts, nullptr,
     "a split function: the regions its driver calls (empty otherwise)", nullptr},
    {"__ppy_driver__", (getter)region_get_delegate, nullptr,
     "a split function: the Python function that runs each call (None otherwise)", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {"__ppy_owner__", (getter)region_get_owner, nullptr, "the class this region is a method of, or None",
     nullptr},
    {nullptr}};

PyTypeObject RegionFunctionType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* set_fallback_hook(PyObject*, PyObject* hook) {
  if (hook != Py_None && !PyCallable_Check(hook)) {
    PyErr_SetString(PyExc_TypeError, "hook must be callable or None");
    return nullptr;
  }
  Py_XDECREF(g_fallback_hook);
  g_fallback_hook = hook == Py_None ? nullptr : (Py_INCREF(hook), hook);
  Py_RETURN_NONE;
}

PyObject* set_plan(PyObject*, PyObject* args) {
  PyObject *obj, *spec;
  if (!PyArg_ParseTuple(args, "OO", &obj, &spec)) return nullptr;
  if (!PyObject_TypeCheck(obj, &RegionFunctionType)) {
    PyErr_SetString(PyExc_TypeError, "expected a RegionFunction");
    return nullptr;
  }
  auto* self = reinterpret_cast<RegionFunction*>(obj);
  ppy_modules::Plan* plan = ppy_modules::parse_plan(spec);
  if (!plan) return nullptr;
  if (plan->params.size() != self->kinds->size()) {
    delete plan;
    PyErr_SetString(PyExc_ValueError, "the plan does not have one entry per parameter");
    return nullptr;
  }
  for (size_t p = 0; p < plan->params.size(); ++p) {
    const bool module = (*self->kinds)[p] == 'M';
    if (module != (plan->params[p] >= 0) || plan->params[p] >= static_cast<int>(plan->layouts.size())) {
      delete plan;
      PyErr_SetString(PyExc_ValueError, "the plan's layouts do not match the module parameters");
      return nullptr;
    }
  }
  delete self->plan;
  self->plan = plan;
  Py_CLEAR(self->resolver);
  Py_RETURN_NONE;
}

PyObject* set_resolver(PyObject*, PyObject* args) {
  PyObject *obj, *resolver;
  if (!PyArg_ParseTuple(args, "OO", &obj, &resolver)) return nullptr;
  if (!PyObject_TypeCheck(obj, &RegionFunctionType) || (resolver != Py_None && !PyCallable_Check(resolver))) {
    PyErr_SetString(PyExc_TypeError, "set_resolver(region, callable | None)");
    return nullptr;
  }
  auto* self = reinterpret_cast<RegionFunction*>(obj);
  Py_XSETREF(self->resolver, resolver == Py_None ? nullptr : (Py_INCREF(resolver), resolver));
  Py_RETURN_NONE;
}

PyObject* reset_counters(PyObject*, PyObject* obj) {
  if (!PyObject_TypeCheck(obj, &RegionFunctionType)) {
    PyErr_SetString(PyExc_TypeError, "expected a RegionFunction");
    return nullptr;
  }
  auto* self = reinterpret_cast<RegionFunction*>(obj);
  self->calls = 0;
  self->fallbacks = 0;
  Py_INCREF(Py_None);
  Py_XSETREF(self->last_reason, Py_None);
  Py_RETURN_NONE;
}

PyObject* set_miss(PyObject*, PyObject* args) {
  PyObject *obj, *hook;
  if (!PyArg_ParseTuple(args, "O!O", &RegionFunctionType, &obj, &hook)) return nullptr;
  if (hook != Py_None && !PyCallable_Check(hook)) {
    PyErr_SetString(PyExc_TypeError, "set_miss(region, callable | None)");
    return nullptr;
  }
  auto* self = reinterpret_cast<RegionFunction*>(obj);
  Py_XSETREF(self->miss, hook == Py_None ? nullptr : (Py_INCREF(hook), hook));
  Py_RETURN_NONE;
}

// `variant` (a RegionFunction of the same function, built for other kinds or values) is tried after
// the region's own entry and the variants added before it.
PyObject* add_variant(PyObject*, PyObject* args) {
  PyObject *a, *b;
  if (!PyArg_ParseTuple(args, "O!O!", &RegionFunctionType, &a, &RegionFunctionType, &b)) return nullptr;
  auto* self = reinterpret_cast<RegionFunction*>(a);
  auto* other = reinterpret_cast<RegionFunction*>(b);
  // One taking extra keywords into **kwargs (extras & 4) has them as its last parameters.
  const Py_ssize_t mine = PyTuple_GET_SIZE(self->param_names), theirs = PyTuple_GET_SIZE(other->param_names);
  if (a == b || !other->has_entry || other->variants || theirs < mine || (theirs > mine && !(self->extras & 4))) {
    PyErr_SetString(PyExc_ValueError, "a variant is a built region of the same signature, with no variants of its own");
    return nullptr;
  }
  if (!self->variants && !(self->variants = PyList_New(0))) return nullptr;
  if (PyList_Append(self->variants, b) < 0) return nullptr;
  Py_RETURN_NONE;
}

// A function split around what a region cannot take: `driver` (Python) runs every call and calls `parts`
// (RegionFunctions) for the statements compiled. No variant of the region itself runs any more.
PyObject* set_delegate(PyObject*, PyObject* args) {
  PyObject *obj, *driver, *parts;
  if (!PyArg_ParseTuple(args, "O!OO!", &RegionFunctionType, &obj, &driver, &PyTuple_Type, &parts)) return nullptr;
  if (driver != Py_None && !PyCallable_Check(driver)) {
    PyErr_SetString(PyExc_TypeError, "set_delegate(region, callable | None, tuple of regions)");
    return nullptr;
  }
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(parts); ++k) {
    if (!PyObject_TypeCheck(PyTuple_GET_ITEM(parts, k), &RegionFunctionType) || PyTuple_GET_ITEM(parts, k) == obj) {
      PyErr_SetString(PyExc_TypeError, "a split function's parts are other RegionFunctions");
      return nullptr;
    }
  }
  auto* self = reinterpret_cast<RegionFunction*>(obj);
  Py_XSETREF(self->delegate, driver == Py_None ? nullptr : (Py_INCREF(driver), driver));
  Py_INCREF(parts);
  Py_XSETREF(self->parts, parts);
  Py_RETURN_NONE;
}

PyMethodDef module_methods[] = {
    {"set_delegate", set_delegate, METH_VARARGS,
     "set_delegate(region, driver | None, parts): a split function; the driver runs every call"},
    {"set_miss", set_miss, METH_VARARGS,
     "set_miss(region, callable | None): callable(region, bound args, reason) when no variant takes a call; "
     "a true result tries the variants once more"},
    {"add_variant", add_variant, METH_VARARGS, "add_variant(region, other): other is tried when the guards before it fail"},
    {"set_fallback_hook", set_fallback_hook, METH_O,
     "set_fallback_hook(callable | None): called as hook(region, reason) on each fallback"},
    {"reset_counters", reset_counters, METH_O, "reset_counters(region): zero calls and fallbacks"},
    {"set_plan", set_plan, METH_VARARGS,
     "set_plan(region, (params, layouts, hook dicts)): what the region reads of its module parameters"},
    {"set_resolver", set_resolver, METH_VARARGS,
     "set_resolver(region, callable | None): called as callable(region) before a call while the plan is unset"},
    {nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, PPY_STR(TORCH_EXTENSION_NAME),
                          "ppy runtime: the RegionFunction type", -1, module_methods};

}  // namespace

PyMODINIT_FUNC PPY_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
  RegionFunctionType.tp_name = "ppy_magic.RegionFunction";
  RegionFunctionType.tp_basicsize = sizeof(RegionFunction);
  RegionFunctionType.tp_flags =
      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  RegionFunctionType.tp_doc = "A Python function compiled into an ATen region.";
  RegionFunctionType.tp_new = region_new;
  RegionFunctionType.tp_dealloc = (destructor)region_dealloc;
  RegionFunctionType.tp_traverse = (traverseproc)region_traverse;
  RegionFunctionType.tp_clear = (inquiry)region_clear;
  RegionFunctionType.tp_repr = (reprfunc)region_repr;
  RegionFunctionType.tp_call = PyVectorcall_Call;
  RegionFunctionType.tp_vectorcall_offset = offsetof(RegionFunction, vectorcall);
  RegionFunctionType.tp_dictoffset = offsetof(RegionFunction, dict);
  RegionFunctionType.tp_members = region_members;
  RegionFunctionType.tp_getset = region_getset;
  RegionFunctionType.tp_methods = region_methods;
  RegionFunctionType.tp_descr_get = region_descr_get;
  if (PyType_Ready(&RegionFunctionType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&module_def);
  if (!m) return nullptr;
  Py_INCREF(&RegionFunctionType);
  if (PyModule_AddObject(m, "RegionFunction", (PyObject*)&RegionFunctionType) < 0 ||
      PyModule_AddIntConstant(m, "ABI_VERSION", ppy::kAbiVersion) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
