// The contract between the runtime (RegionFunction, built once per toolchain)
// and the per-cell region translation units (built per cell, ATen headers only).
// Both sides include this header; bump kAbiVersion on any layout change.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <cstdint>
#include <string>
#include <vector>

namespace ppy {

constexpr int kAbiVersion = 6;

// One call argument, filled by the runtime from the Python argument according
// to the parameter's kind letter (language/ir.py: Kind). A module ('M') is an
// array of them, one per attribute the region reads (its plan's slots): `m` points
// at a submodule's array; a list of modules has `i` items at `m`, each with its `m`;
// a module that is one of several options has the option's index in `i`.
struct Arg {
  const at::Tensor* t = nullptr;                 // 'T', and 'O' when not None
  const std::vector<at::Tensor>* tl = nullptr;   // 'L'
  const std::vector<int64_t>* ints = nullptr;    // 'I' (a list, tuple or torch.Size of ints); a module's tuple of ints
  double f = 0.0;                                // 'f', 'G', 'F' (a float)
  int64_t i = 0;                                 // 'i', 'b', 'J', 'C', 'F' (an int); 'd', 'E': the ScalarType
  const char* s = nullptr;                       // 's', 'V' (UTF-8)
  c10::Device device = c10::Device(c10::kCPU);  // 'D', 'V'
  bool variant = false;                          // 'F': an int (else a float); 'V': a str (else a torch.device)
  bool none = false;                             // 'O', 'N', and the optional kinds 'J', 'G', 'C', 'E'
  const Arg* m = nullptr;                        // 'M': a module's slots; a list's items
};

// Python exceptions a region raises itself (where Python, not ATen, would
// raise: assert, unpacking, int division by zero, ...).
// Pending: a Python exception is already set in the calling thread (a signal handler raised
// KeyboardInterrupt while the region polled for signals).
enum class PyError : int {
  None = 0, AssertionError, ValueError, ZeroDivisionError, OverflowError, IndexError, TypeError,
  RuntimeError, Pending, UnboundLocalError, NotImplementedError,
  Custom,  // another exception class: Out::message is "module:qualname\n" + the message
};

// Results in the order the return spec names them: tensors in `t`, floats in
// `f`, ints and bools in `i` (a list's or a run-time tuple's length first; a
// number's type tag first: 0 int, 1 float, 2 bool, 3 complex). `line` is the
// Python line that raised, if any; `error` and `message` a Python exception
// the region raised by returning.
// The runtime reuses one Out per thread (and call depth): the entry appends to
// empty vectors and must not assume anything about their capacity.
//
// Two input fields, set by the runtime before the entry runs:
// `gil_released`: the region then takes the GIL itself to look for signals.
// `unobserved` (for regions built at level 2 or 3; false otherwise): true when
// nothing outside the region can see its intermediate tensors, so it may pass
// hoisted constants and overwrite dead temporaries. Autograd is not recording
// (grad mode off, or no tensor the region was given requires grad), no such
// tensor is a forward-AD dual tensor or carries dispatch keys beyond a dense
// backend, autograd, conjugate/negative bits and autocast, and no functorch
// transform, Python dispatch mode, tracer or autocast is active. "Given" means
// every tensor the runtime hands the region: tensor and tensor-list arguments
// and the module attributes it read for the call (a parameter that requires
// grad makes autograd record, so hoisted constants could be saved by a graph).
// Level 3's writes also check their own operands (ppy::grad_free).
struct Out {
  c10::SmallVector<at::Tensor, 4> t;
  c10::SmallVector<double, 2> f;
  c10::SmallVector<int64_t, 2> i;
  int line = 0;
  PyError error = PyError::None;
  std::string message;
  bool gil_released = false;
  bool unobserved = false;
};

using Entry = void (*)(const Arg* args, Out* out);

struct RegionInfo {
  const char* name;
  Entry entry;
};

struct RegionTable {
  int abi_version;
  int count;
  const RegionInfo* regions;
};

}  // namespace ppy
