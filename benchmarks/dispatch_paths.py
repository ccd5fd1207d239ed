"""What each way of calling an ATen op costs from C++, for level 3's choices (issue: optimisation levels).

A region calls ops through the dispatcher (``at::_ops::<op>::call``), as eager
does below Python. Two shorter paths exist when autograd is not recording:

- ``redispatch`` on a key set without Autograd and ADInplaceOrView: the backend
  kernel directly, past the autograd kernel (which, with nothing requiring grad,
  only redispatches) and the ADInplaceOrView kernel (which bumps version counters
  of in-place ops and records the base of views);
- ``at::cpu::<op>``: the structured CPU kernel, called as a C++ function, with no
  dispatcher at all (no device guard, no mode or backend check: valid only for CPU
  tensors with nothing else in their key set and no mode active).

This script times each path in a C++ loop (so no Python is measured) on 8×32 and
32×32 float tensors under ``torch.no_grad()`` and prints ns per op and the ratio
to the dispatcher call. It also checks that every path gives eager's bits.

    python -m benchmarks.dispatch_paths [--iters N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>
#include <chrono>

using Clock = std::chrono::steady_clock;

// The keys below ADInplaceOrView (the dense CPU backend here), as the region's write_into computes them.
static c10::DispatchKeySet below_autograd(const at::Tensor& t) {
  return t.key_set() & c10::after_ADInplaceOrView_keyset;
}

template <class F>
static double ns_per_call(int64_t iters, F&& f) {
  for (int64_t i = 0; i < 200; ++i) f();
  auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; ++i) f();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / iters;
}

std::vector<double> time_paths(at::Tensor a, at::Tensor b, at::Tensor x, at::Tensor w, int64_t iters) {
  const auto ks = below_autograd(a);
  at::Tensor scratch = a.clone();
  std::vector<double> out;
  // add: dispatcher / redispatch / at::cpu
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::add_Tensor::call(a, b, 1); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::add_Tensor::redispatch(ks, a, b, 1); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::cpu::add(a, b, 1); }));
  // tanh
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::tanh::call(a); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::tanh::redispatch(ks, a); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::cpu::tanh(a); }));
  // tanh_ into a temporary (level 3's in-place write)
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::tanh_::call(scratch); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::tanh_::redispatch(ks, scratch); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::cpu::tanh_(scratch); }));
  // x @ w: matmul (eager's Python entry) / mm via dispatcher / mm redispatch / at::cpu::mm
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::matmul::call(x, w); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::mm::call(x, w); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::_ops::mm::redispatch(ks, x, w); }));
  out.push_back(ns_per_call(iters, [&] { (void)at::cpu::mm(x, w); }));
  return out;
}

std::vector<at::Tensor> results(at::Tensor a, at::Tensor b, at::Tensor x, at::Tensor w) {
  const auto ks = below_autograd(a);
  at::Tensor s1 = a.clone(), s2 = a.clone(), s3 = a.clone();
  at::_ops::tanh_::call(s1);
  at::_ops::tanh_::redispatch(ks, s2);
  at::cpu::tanh_(s3);
  return {at::_ops::add_Tensor::call(a, b, 1), at::_ops::add_Tensor::redispatch(ks, a, b, 1), at::cpu::add(a, b, 1),
          at::_ops::tanh::call(a), at::_ops::tanh::redispatch(ks, a), at::cpu::tanh(a), s1, s2, s3,
          at::_ops::matmul::call(x, w), at::_ops::mm::call(x, w), at::_ops::mm::redispatch(ks, x, w),
          at::cpu::mm(x, w)};
}
"""

PATHS = ("dispatcher", "redispatch below autograd", "at::cpu::")
OPS = ("add", "tanh", "tanh_ (in place)", "x @ w")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    mod = load_inline("ppy_dispatch_paths", CPP, functions=["time_paths", "results"], verbose=False)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 32, generator=g), torch.randn(8, 32, generator=g)
    x, w = torch.randn(8, 32, generator=g), torch.randn(32, 32, generator=g)
    with torch.no_grad():
        outs = mod.results(a, b, x, w)
        eager = [a + b] * 3 + [torch.tanh(a)] * 6 + [x @ w] * 4
        same = all(torch.equal(o, e) for o, e in zip(outs, eager, strict=True))
        print(f"every path gives eager's bits: {same}")
        rounds = [mod.time_paths(a, b, x, w, args.iters) for _ in range(args.rounds)]
    med = [statistics.median(r[i] for r in rounds) for i in range(len(rounds[0]))]
    print(f"\nns per op (median of {args.rounds} rounds of {args.iters:,} calls), torch.no_grad(), 1 thread")
    print(f"{'op':<18}" + "".join(f"{p:>28}" for p in PATHS) + f"{'matmul (eager)':>18}")
    for k, op in enumerate(OPS):
        row = med[3 * k : 3 * k + 3] if op != "x @ w" else med[10:13]
        base = row[0]
        cells = "".join(f"{v:>20.0f} ({v / base:4.2f})" for v in row)
        extra = f"{med[9]:>18.0f}" if op == "x @ w" else ""
        print(f"{op:<18}{cells}{extra}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
