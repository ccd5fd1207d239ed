// Reading nn.Module (and plain object) parameters of a region, once per call, before any
// operator runs: what the region's plan (language/modules.py) says it reads, from where
// Python itself would find it, checked to be of the kind the region was compiled for.
//
// A module is read as an array of ppy::Arg, one per slot of its layout: the exact class
// is checked; each slot is an attribute (Python's lookup: a data descriptor of the class,
// the instance __dict__, a class attribute, then nn.Module.__getattr__'s _parameters,
// _buffers and _modules), a key or a position in _modules, a length check, or the whole
// _modules of a ModuleList / Sequential. A module whose forward the region runs inline
// must have no hooks (nn.Module.__call__ would run them). Anything else is a reason to
// run the Python method instead, with nothing run yet.
//
// Included once, by region_function.cpp (the runtime); Python.h and python_variable.h first.
#pragma once
#include <c10/util/SmallVector.h>
#include <torch/csrc/Device.h>

#include <string>
#include <utility>
#include <vector>

namespace ppy_modules {

struct SlotPlan {
  PyObject* name = nullptr;  // interned str (owned)
  char how = 'a';            // 'a' attribute, 'k' key, 'p' position, 'n' length, 'l' all, 'x' a method check
  char kind = 'T';           // T O f i b s I J Q N M U m -, K (a value the region was specialised for)
  bool optional = false;     // the value may be None
  std::vector<int> subs;     // layouts (-1: None)
  Py_ssize_t pos = 0;
  PyObject* expected = nullptr;  // 'x': the method the region runs inline (none: the name must be absent);
                                 // kind 'K': the value (owned)
};

struct LayoutPlan {
  PyObject* cls = nullptr;  // owned; nullptr: any class
  bool module = true;
  bool inline_call = false;
  bool keyed = false;  // a ModuleList: keys "0".."n-1"
  std::string name;
  std::vector<SlotPlan> slots;
};

struct Plan {
  std::vector<int> params;  // per parameter: its layout, or -1
  std::vector<LayoutPlan> layouts;
  std::vector<PyObject*> global_hooks;  // torch.nn.modules.module's global hook dicts (owned)
  bool any_inline = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {  // the GIL is held: regions are freed by Python
    for (auto& l : layouts) {
      Py_XDECREF(l.cls);
      for (auto& s : l.slots) {
        Py_XDECREF(s.name);
        Py_XDECREF(s.expected);
      }
    }
    for (PyObject* d : global_hooks) Py_XDECREF(d);
  }
};

// What one call read: the slots of every module, and the references that keep them valid.
// Small inline buffers: a call of a small model allocates nothing here. Pointers between
// them are set by link(), once everything is read (the buffers may move while they grow).
struct Gathered {
  using Link = std::pair<uint32_t, uint32_t>;
  c10::SmallVector<ppy::Arg, 32> args;
  c10::SmallVector<at::Tensor, 16> tensors;
  c10::SmallVector<std::vector<int64_t>, 4> ints;
  c10::SmallVector<PyObject*, 4> refs;  // strs read: their UTF-8 stays valid while held
  c10::SmallVector<Link, 32> links;     // args[first].m = &args[second]
  c10::SmallVector<Link, 16> tensor_links;  // args[first].t = &tensors[second]
  c10::SmallVector<Link, 4> ints_links;     // args[first].ints = &ints[second]
  std::string reason;
  std::vector<std::string> trail;  // where the reason arose, innermost first
  int64_t work = 0;

  Gathered() = default;
  Gathered(const Gathered&) = delete;
  Gathered& operator=(const Gathered&) = delete;
  ~Gathered() {
    for (PyObject* r : refs) Py_DECREF(r);
  }
  bool fail(std::string why) {
    reason = std::move(why);
    return false;
  }
  void link() {
    for (auto& [from, to] : links) args[from].m = args.data() + to;
    for (auto& [from, to] : tensor_links) args[from].t = &tensors[to];
    for (auto& [from, to] : ints_links) args[from].ints = &ints[to];
  }
};

struct Names {
  PyObject *parameters, *buffers, *modules, *forward_hooks, *forward_pre_hooks, *backward_hooks,
      *backward_pre_hooks, *forward, *compiled_call_impl, *ppy_compiles;
};

inline const Names& names() {
  static Names n = [] {
    Names x;
    x.parameters = PyUnicode_InternFromString("_parameters");
    x.buffers = PyUnicode_InternFromString("_buffers");
    x.modules = PyUnicode_InternFromString("_modules");
    x.forward_hooks = PyUnicode_InternFromString("_forward_hooks");
    x.forward_pre_hooks = PyUnicode_InternFromString("_forward_pre_hooks");
    x.backward_hooks = PyUnicode_InternFromString("_backward_hooks");
    x.backward_pre_hooks = PyUnicode_InternFromString("_backward_pre_hooks");
    x.forward = PyUnicode_InternFromString("forward");
    x.compiled_call_impl = PyUnicode_InternFromString("_compiled_call_impl");
    x.ppy_compiles = PyUnicode_InternFromString("__ppy_compiles__");
    return x;
  }();
  return n;
}

inline std::string type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

inline std::string short_name(PyObject* cls) {
  const char* n = reinterpret_cast<PyTypeObject*>(cls)->tp_name;
  const char* dot = std::strrchr(n, '.');
  return dot ? dot + 1 : n;
}

inline std::string describe(PyObject* v) {
  if (v == Py_None) return "None";
  if (PyBool_Check(v)) return "a bool";
  if (PyLong_CheckExact(v)) return "an int";
  if (PyFloat_CheckExact(v)) return "a float";
  if (PyUnicode_Check(v)) return "a str";
  if (PyTuple_Check(v)) return "a tuple";
  if (PyList_Check(v)) return "a list";
  if (THPVariable_Check(v)) return THPVariable_CheckExact(v) ? "a Tensor" : "a " + type_name(v) + " (a Tensor subclass)";
  std::string n = type_name(v);
  const char* dot = std::strrchr(n.c_str(), '.');
  return "a " + std::string(dot ? dot + 1 : n.c_str());
}

inline bool same_constant(PyObject* v, PyObject* want);

// functools.partial itself (a subclass may call differently), looked up once.
inline PyTypeObject* partial_type() {
  static PyTypeObject* t = [] {
    PyObject* m = PyImport_ImportModule("functools");
    PyObject* p = m ? PyObject_GetAttrString(m, "partial") : nullptr;
    Py_XDECREF(m);
    if (!p || !PyType_Check(p)) {
      PyErr_Clear();
      Py_XDECREF(p);
      return static_cast<PyTypeObject*>(nullptr);
    }
    return reinterpret_cast<PyTypeObject*>(p);  // kept for the process
  }();
  return t;
}

// Two functools.partial objects that call alike: the same function, and the same constants bound
// (each per same_constant). Their members are C slots: reading them runs no Python code.
inline bool same_partial(PyObject* v, PyObject* want) {
  bool same = true;
  for (const char* member : {"func", "args", "keywords"}) {
    PyObject* a = PyObject_GetAttrString(v, member);
    PyObject* b = a ? PyObject_GetAttrString(want, member) : nullptr;
    if (!a || !b) {
      PyErr_Clear();
      same = false;
    } else if (PyDict_Check(a) && PyDict_Check(b)) {
      if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) same = false;
      Py_ssize_t i = 0;
      PyObject *key, *value;
      while (same && PyDict_Next(a, &i, &key, &value)) {
        PyObject* other = PyDict_GetItemWithError(b, key);
        if (!other) PyErr_Clear();
        same = other && same_constant(value, other);
      }
    } else {
      same = same_constant(a, b);
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (!same) return false;
  }
  return true;
}

// Whether `v` is the value a region was specialised for (`want`): the same object, or an int, float,
// str or tuple of them of exactly the same type and value (a float by its bits: -0.0 is not 0.0, a NaN
// is its own payload), a torch.device of the same type and index (`x.device` is a new object each time),
// or a functools.partial binding such values to the same function. Anything else (None, bools, dtypes,
// modules, callables, objects) by identity. Runs no Python code.
inline bool same_constant(PyObject* v, PyObject* want) {
  if (v == want) return true;
  if (!want || Py_TYPE(v) != Py_TYPE(want)) return false;
  if (THPDevice_Check(v))
    return reinterpret_cast<THPDevice*>(v)->device == reinterpret_cast<THPDevice*>(want)->device;
  if (Py_TYPE(v) == partial_type()) return same_partial(v, want);
  if (PyLong_CheckExact(v)) {
    const int r = PyObject_RichCompareBool(v, want, Py_EQ);
    if (r < 0) PyErr_Clear();
    return r == 1;
  }
  if (PyFloat_CheckExact(v)) {
    const double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(want);
    return std::memcmp(&a, &b, sizeof a) == 0;
  }
  if (PyUnicode_CheckExact(v)) return PyUnicode_Compare(v, want) == 0;
  if (PyTuple_CheckExact(v)) {
    const Py_ssize_t n = PyTuple_GET_SIZE(v);
    if (n != PyTuple_GET_SIZE(want)) return false;
    for (Py_ssize_t k = 0; k < n; ++k)
      if (!same_constant(PyTuple_GET_ITEM(v, k), PyTuple_GET_ITEM(want, k))) return false;
    return true;
  }
  return false;
}

inline const char* wanted(char kind) {
  switch (kind) {
    case 'T': return "a Tensor";
    case 'O': return "a Tensor or None";
    case 'f': return "a float";
    case 'i': return "an int";
    case 'b': return "a bool";
    case 's': return "a str";
    case 'I': return "a tuple of ints";
    case 'J': return "a list of ints";
    case 'Q': return "a tuple or list of ints";
    case 'N': return "None";
    default: return "a module";
  }
}

// The instance __dict__ (borrowed), or nullptr.
inline PyObject* instance_dict(PyObject* obj) {
  PyObject** p = _PyObject_GetDictPtr(obj);
  return p ? *p : nullptr;
}

inline PyObject* dict_item(PyObject* dict, PyObject* key) {
  if (!dict) return nullptr;
  PyObject* v = PyDict_GetItemWithError(dict, key);
  if (!v) PyErr_Clear();
  return v;
}

// obj.<name> as Python finds it, when that runs no Python code; nullptr with `why` otherwise.
inline PyObject* lookup(PyObject* obj, PyObject* dict, PyObject* name, bool module, std::string& why) {
  PyObject* desc = _PyType_Lookup(Py_TYPE(obj), name);
  if (desc && Py_TYPE(desc)->tp_descr_set) {
    why = "is a property (or another data descriptor) of its class";
    return nullptr;
  }
  if (PyObject* v = dict_item(dict, name)) return v;
  if (desc) {
    if (Py_TYPE(desc)->tp_descr_get) {
      why = "is a method (or another descriptor) of its class";
      return nullptr;
    }
    return desc;  // a class attribute
  }
  if (module) {
    const Names& n = names();
    for (PyObject* where : {n.parameters, n.buffers, n.modules}) {
      if (PyObject* v = dict_item(dict_item(dict, where), name)) return v;
    }
  }
  why = "does not exist";
  return nullptr;
}

// A method ppy_magic.compile set on this instance (`v`, found in its __dict__ under `name`): the class's own
// method made a region for it, bound to it, naming in __ppy_compiles__ the class attribute it stands for. It
// runs what the class's method runs, so a region calling the method inline may still do so.
inline bool compiled_binding(PyObject* obj, PyObject* v, PyObject* name) {
  if (!PyMethod_Check(v) || PyMethod_GET_SELF(v) != obj) return false;
  PyObject* stands = PyObject_GetAttr(PyMethod_GET_FUNCTION(v), names().ppy_compiles);
  if (!stands) {
    PyErr_Clear();
    return false;
  }
  const bool same = stands == _PyType_Lookup(Py_TYPE(obj), name);
  Py_DECREF(stands);
  return same;
}

inline bool hooks_free(PyObject* obj, PyObject* dict, Gathered& g) {
  const Names& n = names();
  struct { PyObject* key; const char* what; } kinds[] = {
      {n.forward_hooks, "a forward hook"},
      {n.forward_pre_hooks, "a forward pre-hook"},
      {n.backward_hooks, "a backward hook"},
      {n.backward_pre_hooks, "a backward pre-hook"},
  };
  for (auto& k : kinds) {
    PyObject* d = dict_item(dict, k.key);
    if (d && PyDict_Check(d) && PyDict_GET_SIZE(d) > 0)
      return g.fail(std::string("has ") + k.what + ", which nn.Module.__call__ runs (the region runs its forward inline)");
  }
  PyObject* own = dict_item(dict, n.forward);
  if (own && !compiled_binding(obj, own, n.forward)) return g.fail("has its own forward set on the instance");
  PyObject* c = dict_item(dict, n.compiled_call_impl);
  if (c && c != Py_None) return g.fail("was compiled with module.compile()");
  return true;
}

class Reader {
 public:
  Reader(const Plan& plan, Gathered& g, uint64_t device_mask) : plan_(plan), g_(g), mask_(device_mask) {}

  // Reads `obj` as layout `li` into the slots at args[base...].
  bool module(PyObject* obj, int li, size_t base) {
    const LayoutPlan& L = plan_.layouts[li];
    if (L.cls && reinterpret_cast<PyObject*>(Py_TYPE(obj)) != L.cls) {
      if (PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(L.cls)))
        return g_.fail("is a " + type_name(obj) + ", a subclass of " + short_name(L.cls) +
                       ": the region was compiled for " + short_name(L.cls) + " itself");
      return g_.fail("is " + describe(obj) + "; the region was compiled for a " + L.name);
    }
    PyObject* dict = instance_dict(obj);
    if (L.inline_call && !hooks_free(obj, dict, g_)) return false;
    PyObject* children = nullptr;  // _modules, for keys and positions
    for (size_t k = 0; k < L.slots.size(); ++k) {
      const SlotPlan& s = L.slots[k];
      const size_t at = base + k;
      PyObject* v = nullptr;
      std::string why;
      if (s.how != 'a' && s.how != 'x' && !children) {
        children = dict_item(dict, names().modules);
        if (!children || !PyDict_Check(children)) return g_.fail("has no _modules dict");
      }
      switch (s.how) {
        case 'a':
          v = lookup(obj, dict, s.name, L.module, why);
          if (!v) return trail("." + str(s.name), why);
          break;
        case 'k':
          v = dict_item(children, s.name);
          if (!v) return trail("[" + repr(s.name) + "]", "does not exist");
          break;
        case 'p': {
          Py_ssize_t i = 0, j = 0;
          PyObject *key, *value;
          while (PyDict_Next(children, &i, &key, &value))
            if (j++ == s.pos) { v = value; break; }
          if (!v) return trail("[" + std::to_string(s.pos) + "]", "does not exist");
          break;
        }
        case 'n':
          if (PyDict_GET_SIZE(children) != s.pos)
            return g_.fail("has " + std::to_string(PyDict_GET_SIZE(children)) + " modules; the region was compiled for " +
                           std::to_string(s.pos));
          continue;
        case 'x':
          if (!s.expected) {  // getattr(obj, name, default) compiled as its default: still no such attribute
            std::string why;
            if (lookup(obj, dict, s.name, L.module, why) || why != "does not exist")
              return trail("." + str(s.name), "exists now; the region was compiled for its absence (getattr's default)");
            continue;
          }
          if (PyObject* own = dict_item(dict, s.name); own && !compiled_binding(obj, own, s.name))
            return trail("." + str(s.name), "is set on the instance, over the compiled method");
          if (_PyType_Lookup(Py_TYPE(obj), s.name) != s.expected)
            return g_.fail("is a " + short_name(reinterpret_cast<PyObject*>(Py_TYPE(obj))) + " whose " + str(s.name) +
                           " is not the method compiled into the region (it was replaced)");
          continue;
        case 'l':
          if (!list(children, L.keyed, s.subs[0], at)) return false;
          continue;
      }
      if (!value(v, s, at)) {
        if (s.how == 'p') return trail("[" + std::to_string(s.pos) + "]", "");
        if (s.how == 'k') return trail("[" + repr(s.name) + "]", "");
        return trail("." + str(s.name), "");
      }
    }
    return true;
  }

 private:
  const Plan& plan_;
  Gathered& g_;
  uint64_t mask_;

  static std::string str(PyObject* s) {
    const char* u = PyUnicode_AsUTF8(s);
    return u ? u : "?";
  }
  static std::string repr(PyObject* s) { return "'" + str(s) + "'"; }

  // A failure at this level: where (".weight", "[0]") and, if new, why.
  bool trail(std::string where, const std::string& why) {
    if (!why.empty()) g_.reason = why;
    g_.trail.push_back(std::move(where));
    return false;
  }

  size_t alloc(int li) {
    const size_t base = g_.args.size();
    g_.args.resize(base + plan_.layouts[li].slots.size());
    return base;
  }

  bool tensor(PyObject* v, size_t at) {
    if (!THPVariable_CheckExact(v)) return false;
    const at::Tensor& t = THPVariable_Unpack(v);
    if (t.layout() != c10::kStrided) return g_.fail("is not a strided tensor (sparse, nested or MKL-DNN)");
    if (!((mask_ >> static_cast<int>(t.device().type())) & 1))
      return g_.fail("is a tensor on a device type the region was not built for");
    g_.work += t.unsafeGetTensorImpl()->numel();
    g_.tensor_links.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(g_.tensors.size()));
    g_.tensors.push_back(t);
    return true;
  }

  bool ints(PyObject* v, char kind, size_t at) {
    const bool tuple = PyTuple_Check(v), is_list = PyList_CheckExact(v);
    if (!((tuple && kind != 'J') || (is_list && kind != 'I'))) return false;
    std::vector<int64_t> out;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    out.reserve(n);
    for (Py_ssize_t j = 0; j < n; ++j) {
      PyObject* item = PySequence_Fast_GET_ITEM(v, j);
      if (!PyLong_CheckExact(item)) return false;
      int overflow = 0;
      out.push_back(PyLong_AsLongLongAndOverflow(item, &overflow));
      if (overflow) return false;
    }
    g_.ints_links.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(g_.ints.size()));
    g_.ints.push_back(std::move(out));
    return true;
  }

  bool value(PyObject* v, const SlotPlan& s, size_t at) {
    ppy::Arg a;
    bool ok = true;
    if (v == Py_None && (s.optional || s.kind == 'O' || s.kind == 'N')) {
      a.none = true;
      g_.args[at] = a;
      return true;
    }
    g_.reason.clear();
    if (s.kind == 'K') {  // compiled in: compared, nothing passed
      if (same_constant(v, s.expected)) return true;
      g_.reason = "is " + describe(v) + ", not the value the region was specialised for";
      return false;
    }
    switch (s.kind) {
      case 'T':
      case 'O':
        ok = tensor(v, at);
        break;
      case 'f':
        ok = PyFloat_CheckExact(v);
        if (ok) a.f = PyFloat_AS_DOUBLE(v);
        break;
      case 'i': {
        ok = PyLong_CheckExact(v);
        int overflow = 0;
        if (ok) a.i = PyLong_AsLongLongAndOverflow(v, &overflow);
        ok = ok && !overflow;
        break;
      }
      case 'b':
        ok = PyBool_Check(v);
        a.i = v == Py_True;
        break;
      case 's':
        ok = PyUnicode_CheckExact(v) && (a.s = PyUnicode_AsUTF8(v)) != nullptr;
        if (ok) {
          Py_INCREF(v);
          g_.refs.push_back(v);
        } else {
          PyErr_Clear();
        }
        break;
      case 'I':
      case 'J':
      case 'Q':
        ok = ints(v, s.kind, at);
        break;
      case 'N':
        ok = false;  // not None
        break;
      case 'M': {
        const size_t base = alloc(s.subs[0]);
        g_.links.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(base));
        g_.args[at] = a;
        return module(v, s.subs[0], base);
      }
      case 'U':
        return option(v, s, at);
      default:
        return g_.fail("has a slot of an unknown kind (a bug in ppy_magic)");
    }
    if (!ok) {
      if (g_.reason.empty())
        g_.reason = "is " + describe(v) + "; the region was compiled for " + wanted(s.kind) +
                    (s.optional ? " or None" : "");
      return false;
    }
    g_.args[at] = a;
    return true;
  }

  // One of several modules (or None): the first option it reads as.
  bool option(PyObject* v, const SlotPlan& s, size_t at) {
    std::string first;
    for (size_t o = 0; o < s.subs.size(); ++o) {
      const int li = s.subs[o];
      ppy::Arg a;
      a.i = static_cast<int64_t>(o);
      if (li < 0) {
        if (v != Py_None) continue;
        a.none = true;
        g_.args[at] = a;
        return true;
      }
      if (v == Py_None) continue;
      const size_t args = g_.args.size(), links = g_.links.size(), tensors = g_.tensors.size(),
                   tlinks = g_.tensor_links.size(), ints = g_.ints.size(), ilinks = g_.ints_links.size(),
                   refs = g_.refs.size(), trail = g_.trail.size();
      const size_t base = alloc(li);
      g_.args[at] = a;
      if (module(v, li, base)) {
        g_.links.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(base));
        return true;
      }
      if (first.empty()) first = g_.reason;
      g_.args.resize(args);  // not this one: forget what it read
      g_.links.resize(links);
      g_.tensors.resize(tensors);
      g_.tensor_links.resize(tlinks);
      g_.ints.resize(ints);
      g_.ints_links.resize(ilinks);
      while (g_.refs.size() > refs) { Py_DECREF(g_.refs.back()); g_.refs.pop_back(); }
      g_.trail.resize(trail);
    }
    return g_.fail(v == Py_None ? std::string("is None; the region was compiled for a module there")
                                : "is " + describe(v) + ", which is none of the modules the region was compiled for" +
                                      (first.empty() ? "" : " (" + first + ")"));
  }

  // The modules of a ModuleList / Sequential of one class: i of them at m, each read as `li`.
  bool list(PyObject* children, bool keyed, int li, size_t at) {
    const Py_ssize_t n = PyDict_GET_SIZE(children);
    const size_t items = g_.args.size();
    g_.args.resize(items + n);
    ppy::Arg a;
    a.i = n;
    g_.args[at] = a;
    g_.links.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(items));
    Py_ssize_t pos = 0, j = 0;
    PyObject *key, *value;
    while (PyDict_Next(children, &pos, &key, &value)) {
      if (keyed) {
        const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
        if (!k || std::to_string(j) != k) {
          PyErr_Clear();
          return g_.fail("has a module under the key " + (k ? std::string("'") + k + "'" : std::string("?")) +
                         " where a ModuleList keeps '" + std::to_string(j) + "'");
        }
      }
      const size_t base = alloc(li);
      g_.links.emplace_back(static_cast<uint32_t>(items + j), static_cast<uint32_t>(base));
      if (!module(value, li, base)) {
        g_.trail.push_back("[" + std::to_string(j) + "]");
        return false;
      }
      ++j;
    }
    return true;
  }
};

// Reads module parameter `p` (the object `obj`, named `param` in messages) as the plan says.
// Returns the offset of its slots in g.args, or -1 with g.reason set (the full path in it).
inline ptrdiff_t read_param(const Plan& plan, int li, PyObject* obj, const char* param, Gathered& g,
                            uint64_t device_mask) {
  Reader r(plan, g, device_mask);
  const size_t base = g.args.size();
  g.args.resize(base + plan.layouts[li].slots.size());
  if (r.module(obj, li, base)) return static_cast<ptrdiff_t>(base);
  std::string where = param;
  for (auto it = g.trail.rbegin(); it != g.trail.rend(); ++it) where += *it;
  g.reason = where + " " + g.reason;
  return -1;
}

// A global module hook (register_module_forward_hook and friends) runs for every module:
// the region, which calls submodules inline, cannot.
inline bool global_hooks_free(const Plan& plan, Gathered& g) {
  if (!plan.any_inline) return true;
  for (PyObject* d : plan.global_hooks) {
    if (PyDict_Check(d) && PyDict_GET_SIZE(d) > 0)
      return g.fail("a global module hook is registered (torch.nn.modules.module), which nn.Module.__call__ "
                    "runs for the submodules the region calls inline");
  }
  return true;
}

// The plan from Python: (params, layouts, global hook dicts); layouts as
// (cls | None, module, inline, keyed, name, slots), slots as (name, how, kind, optional, subs, pos,
// expected method | None).
inline Plan* parse_plan(PyObject* spec) {
  auto plan = std::make_unique<Plan>();
  PyObject *params, *layouts, *hooks;
  if (!PyArg_ParseTuple(spec, "O!O!O!", &PyTuple_Type, &params, &PyTuple_Type, &layouts, &PyTuple_Type, &hooks))
    return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(params); ++i) {
    const long li = PyLong_AsLong(PyTuple_GET_ITEM(params, i));
    if (li == -1 && PyErr_Occurred()) return nullptr;
    plan->params.push_back(static_cast<int>(li));
  }
  const Py_ssize_t nl = PyTuple_GET_SIZE(layouts);
  plan->layouts.resize(nl);
  for (Py_ssize_t i = 0; i < nl; ++i) {
    PyObject *cls, *slots;
    int module, inl, keyed;
    const char* name;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(layouts, i), "OpppsO!", &cls, &module, &inl, &keyed, &name,
                          &PyTuple_Type, &slots))
      return nullptr;
    LayoutPlan& L = plan->layouts[i];
    if (cls != Py_None) {
      if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "a layout's class must be a type or None");
        return nullptr;
      }
      Py_INCREF(cls);
      L.cls = cls;
    }
    L.module = module;
    L.inline_call = inl;
    L.keyed = keyed;
    L.name = name;
    plan->any_inline = plan->any_inline || inl;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); ++k) {
      PyObject *sname, *subs, *expected;
      const char *how, *kind;
      int optional;
      Py_ssize_t pos;
      if (!PyArg_ParseTuple(PyTuple_GET_ITEM(slots, k), "UsspO!nO", &sname, &how, &kind, &optional, &PyTuple_Type,
                            &subs, &pos, &expected))
        return nullptr;
      SlotPlan s;
      Py_INCREF(sname);
      PyUnicode_InternInPlace(&sname);
      s.name = sname;
      if (expected != Py_None || kind[0] == 'K') {  // a constant may be None itself
        Py_INCREF(expected);
        s.expected = expected;
      }
      s.how = how[0];
      s.kind = kind[0];
      s.optional = optional;
      s.pos = pos;
      for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(subs); ++j) {
        const long sub = PyLong_AsLong(PyTuple_GET_ITEM(subs, j));
        if ((sub == -1 && PyErr_Occurred()) || sub >= nl) {
          if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a slot names a layout that does not exist");
          Py_DECREF(sname);
          return nullptr;
        }
        s.subs.push_back(static_cast<int>(sub));
      }
      const bool needs_sub = s.kind == 'M' || s.kind == 'U' || s.kind == 'm';
      if ((needs_sub && s.subs.empty()) || std::strchr("aknplx", s.how) == nullptr) {
        PyErr_SetString(PyExc_ValueError, "a slot of the plan is malformed");
        Py_DECREF(sname);
        return nullptr;
      }
      L.slots.push_back(std::move(s));
    }
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hooks); ++i) {
    PyObject* d = PyTuple_GET_ITEM(hooks, i);
    Py_INCREF(d);
    plan->global_hooks.push_back(d);
  }
  return plan.release();
}

}  // namespace ppy_modules
