"""Differential testing against eager: many generated ``@ppy.opt`` functions, each run as a region and as Python.

Shared by tests/test_opinfo.py, tests/test_fuzz.py, tests/test_models.py and the
benchmarks. A batch of cases is written as ``%%ppy``-style sources (a chunk of
about 150 functions each, so every C++ build stays small), compiled with the
public path (``pipeline.compile_source`` + ``pipeline.run``), and every function
that became a region is called twice on identical fresh clones of its inputs:
once as the region, once as ``f.__wrapped__``. The global generator is reseeded
before each of the two calls, so random ops can be compared too.

Compared bitwise: outputs (values by their bits, so NaN payloads and the sign of
zero count; dtype, shape, strides, device, layout, requires_grad, grad_fn
presence, aliasing of inputs; tuples, namedtuples and lists by type and
structure; Python scalars by type and value), the inputs after the call (in-place
ops), the generator's state after the call, raised exceptions (type and message;
the region may add notes), and gradients of the sum of the floating outputs with
respect to every input that requires grad. A region must also have run (its
``calls`` went up, no guard fallback).

Outcomes, per case: MATCH; PYTHON (stayed Python, with the compiler's reason:
not a failure by itself); MISMATCH (a wrong result: always a failure); NO_RUN
(compiled, but the call ran the Python body); NONDETERMINISTIC (eager disagrees
with itself on these inputs, e.g. uninitialised memory, so nothing can be
compared); CRASH (compiling, building or running the batch raised).
"""

from __future__ import annotations

import linecache
import math
import re
import struct
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

MATCH = "match"
PYTHON = "python"
MISMATCH = "mismatch"
NO_RUN = "no-run"
NONDETERMINISTIC = "eager-nondeterministic"
CRASH = "crash"
FAILURES = (MISMATCH, NO_RUN, CRASH)

SEED = 1234  # the global generator's seed before each of the two calls
EAGER_RETRIES = 20  # extra eager calls before a difference is blamed on the region
CHUNK = 150  # functions per generated source: one C++ build each

HEADER = "import math\nimport torch\nimport torch.nn.functional as F\nimport ppy\n\n"
BUILD_FAILED = "the C++ build failed"  # the compiler's reason when a whole cell's build failed


@dataclass(frozen=True)
class Case:
    """One generated function and the arguments to call it with."""

    name: str  # the function's name; unique within a batch
    source: str  # the decorated definition
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    label: str = ""  # what the case belongs to (an OpInfo entry, a program); free-form
    grad: bool = True  # compare gradients when the outputs allow


@dataclass(frozen=True)
class Outcome:
    case: Case
    status: str
    detail: str = ""  # why it stayed Python, or what differed

    def __str__(self) -> str:
        return f"{self.case.name} [{self.case.label}]: {self.status}" + (f": {self.detail}" if self.detail else "")


# ---- compiling ------------------------------------------------------------------------------------


def compile_text(source: str, filename: str, namespace: dict | None = None) -> tuple[dict, Any]:
    """Compile and run `source` as one %%ppy cell; return (namespace, report)."""
    from ppy_magic import backend, pipeline

    ns = {"__name__": "__ppy_differential__"} if namespace is None else namespace
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    binder = pipeline.compile_source(source, ns, filename, cache=backend.shared_cache())
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    return ns, binder.report


def is_region(f: Any) -> bool:
    return getattr(f, "__ppy_region__", False) is True


def python_reason(f: Any, report: Any) -> str:
    name = getattr(f, "__name__", "")
    for fn, reason in getattr(report, "python", ()):
        if fn == name:
            return reason
    return getattr(f, "__ppy_reason__", None) or "stayed Python (no reason given)"


def python_outcome(f: Any, report: Any) -> tuple[str, str]:
    """(PYTHON, reason) for a function that stayed Python; CRASH when the reason is a failed C++ build."""
    reason = python_reason(f, report)
    return (CRASH if reason.startswith(BUILD_FAILED) else PYTHON), reason


def source_of(cases: Sequence[Case]) -> str:
    return HEADER + "\n\n".join(c.source.rstrip() + "\n" for c in cases)


@dataclass
class BatchStats:
    chunks: int = 0
    builds: int = 0  # compiles in which at least one function compiled
    functions: int = 0  # distinct functions compiled (identical bodies are compiled once)
    compile_seconds: float = 0.0
    run_seconds: float = 0.0
    # C++ builds that failed: each is a compiler bug. A failed chunk is split in halves and rebuilt
    # (within a budget), so that one bad function does not hide the rest of its chunk.
    build_failures: list[str] = field(default_factory=list)
    split_budget: int = 40


Pool = dict  # canonical source -> (region or Python function or None, status, reason)


def canonical(source: str) -> str:
    """A function's source with its name left out: cases with the same body share one compiled function."""
    return re.sub(r"^def \w+\(", "def _(", source, count=1, flags=re.M)


def run_cases(
    cases: Sequence[Case],
    *,
    prefix: str = "ppy-diff",
    chunk: int = CHUNK,
    stats: BatchStats | None = None,
    pool: Pool | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Compile `cases` in chunks and compare each region with eager. One Outcome per case, in order.

    Cases whose functions differ only in name are compiled once (and across calls that share
    `pool`), then each is called on its own arguments.
    """
    stats = stats if stats is not None else BatchStats()
    pool = pool if pool is not None else {}
    todo: dict[str, Case] = {}
    for c in cases:
        key = canonical(c.source)
        if key not in pool and key not in todo:
            todo[key] = c
    reps = list(todo.items())
    for start in range(0, len(reps), chunk):
        stats.chunks += 1
        stats.functions += len(reps[start : start + chunk])
        _compile_chunk(reps[start : start + chunk], f"{prefix}-{start // chunk}", stats, pool)
        if progress is not None:
            progress(f"{prefix}: compiled {min(start + chunk, len(reps))}/{len(reps)} functions; {stats.builds} builds")
    t0 = time.perf_counter()
    outcomes = []
    for c in cases:
        f, status, reason = pool[canonical(c.source)]
        if status != MATCH:
            outcomes.append(Outcome(c, status, reason))
        else:
            outcomes.append(Outcome(c, *compare_call(f, c.args, c.kwargs, grad=c.grad)))
    stats.run_seconds += time.perf_counter() - t0
    return outcomes


def _compile_chunk(part: list[tuple[str, Case]], name: str, stats: BatchStats, pool: Pool) -> None:
    filename = f"<{name}>"
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns, report = compile_text(source_of([c for _, c in part]), filename)
    except Exception as exc:  # noqa: BLE001 - the compiler must never raise on valid Python
        for key, _ in part:
            pool[key] = (None, CRASH, f"compiling the batch {filename} raised {type(exc).__name__}: {_first_line(exc)}")
        return
    finally:
        stats.compile_seconds += time.perf_counter() - t0
    failed = next((r for _, r in getattr(report, "python", ()) if r.startswith(BUILD_FAILED)), None)
    if failed is not None:
        stats.build_failures.append(f"{filename} ({len(part)} functions): {failed}")
        if len(part) > 1 and stats.split_budget >= 2:
            stats.split_budget -= 2
            half = len(part) // 2
            _compile_chunk(part[:half], name + "a", stats, pool)
            _compile_chunk(part[half:], name + "b", stats, pool)
            return
    if getattr(report, "compiled", None):
        stats.builds += 1
    for key, c in part:
        f = ns.get(c.name)
        if f is None:
            pool[key] = (None, CRASH, "the function is missing after running its source")
        elif is_region(f):
            pool[key] = (f, MATCH, "")
        else:
            pool[key] = (f, *python_outcome(f, report))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


# ---- one comparison ---------------------------------------------------------------------------------


@dataclass
class _Run:
    value: Any = None
    error: BaseException | None = None
    args: Any = None  # the (cloned) arguments after the call
    rng: torch.Tensor | None = None


def clone_tree(v: Any) -> Any:
    """Fresh copies of every tensor in `v`, with the same strides (when dense) and requires_grad."""
    if isinstance(v, torch.Tensor):
        c = v.detach().clone()
        return c.requires_grad_() if v.requires_grad else c
    if isinstance(v, list):
        return [clone_tree(x) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(clone_tree(x) for x in v)
    if isinstance(v, dict):
        return {k: clone_tree(x) for k, x in v.items()}
    return v


def tensors_in(v: Any) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in tensors_in(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in tensors_in(x)]
    return []


def _call(f: Callable, args: tuple, kwargs: dict) -> _Run:
    args, kwargs = clone_tree(args), clone_tree(kwargs)
    run = _Run(args=(args, kwargs))
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run.value = f(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - compared with eager's
            run.error = exc
    run.rng = torch.get_rng_state()
    return run


def compare_call(f: Any, args: tuple = (), kwargs: dict | None = None, *, grad: bool = True) -> tuple[str, str]:
    """Call region `f` and ``f.__wrapped__`` on the same inputs; (status, what differed)."""
    kwargs = kwargs or {}
    calls, fallbacks = f.calls, f.fallbacks
    region = _call(f, args, kwargs)
    ran = f.calls == calls + 1 and f.fallbacks == fallbacks
    fell_back = f.fallbacks != fallbacks
    eager = _call(f.__wrapped__, args, kwargs)
    diffs = _diff_runs(region, eager)
    if not diffs and grad:
        diffs = _diff_grads(region, eager)
    if diffs:
        # Some kernels differ from call to call (LAPACK's gelsy depends on buffer alignment): eager is
        # asked a few more times before a difference counts as the region's.
        for _ in range(EAGER_RETRIES):
            again = _call(f.__wrapped__, args, kwargs)
            if _diff_runs(again, eager) or (grad and _diff_grads(again, _call(f.__wrapped__, args, kwargs))):
                return NONDETERMINISTIC, "eager differs from itself: " + "; ".join(diffs[:3])
        return MISMATCH, "; ".join(diffs[:5])
    if not ran:
        if fell_back:
            return NO_RUN, f"the region fell back to Python: {f.last_fallback_reason}"
        return NO_RUN, f"the region's call count went from {calls} to {f.calls}"
    return MATCH, ""


def _diff_runs(r: _Run, e: _Run) -> list[str]:
    if r.error is not None or e.error is not None:
        return _diff_errors(r.error, e.error)
    diffs = diff_values(r.value, e.value, "result")
    in_r, in_e = tensors_in(r.args), tensors_in(e.args)
    diffs += diff_values(in_r, in_e, "inputs after the call")
    diffs += _diff_aliasing(r.value, in_r, e.value, in_e)
    if not torch.equal(r.rng, e.rng):
        diffs.append("the global generator's state after the call differs (random numbers consumed differently)")
    return diffs


def _diff_errors(r: BaseException | None, e: BaseException | None) -> list[str]:
    if r is None:
        return [f"eager raised {type(e).__name__}: {_first_line(e)}; the region returned"]
    if e is None:
        return [f"the region raised {type(r).__name__}: {_first_line(r)}; eager returned"]
    if type(r) is not type(e):
        return [
            f"the region raised {type(r).__name__}: {_first_line(r)}; eager raised {type(e).__name__}: {_first_line(e)}"
        ]
    if str(r) != str(e):
        return [f"{type(e).__name__} messages differ: region {str(r)!r} vs eager {str(e)!r}"]
    eager_notes = getattr(e, "__notes__", [])
    region_notes = getattr(r, "__notes__", [])
    if region_notes[: len(eager_notes)] != eager_notes:
        return [f"exception notes differ: region {region_notes!r} vs eager {eager_notes!r}"]
    return []


def _diff_aliasing(r_out: Any, r_in: list, e_out: Any, e_in: list) -> list[str]:
    """Which inputs each output tensor shares memory with: a view in eager must be a view in the region."""

    def pattern(out: Any, inputs: list) -> list[tuple[int, ...]]:
        ptrs = [_storage_ptr(t) for t in inputs]
        return [tuple(i for i, p in enumerate(ptrs) if p is not None and p == _storage_ptr(t)) for t in tensors_in(out)]

    a, b = pattern(r_out, r_in), pattern(e_out, e_in)
    if a != b:
        return [f"outputs share memory with inputs differently: region {a} vs eager {b}"]
    same_r = [next((i for i, t in enumerate(r_in) if t is o), None) for o in tensors_in(r_out)]
    same_e = [next((i for i, t in enumerate(e_in) if t is o), None) for o in tensors_in(e_out)]
    if same_r != same_e:  # `x.add_(y); return x` returns the very object it was given
        return [f"outputs are input objects differently: region {same_r} vs eager {same_e}"]
    return []


def _storage_ptr(t: torch.Tensor) -> int | None:
    try:
        if t.layout != torch.strided or t.untyped_storage().nbytes() == 0:
            return None
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


_INT_VIEW = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.complex128: torch.int64,
    torch.complex64: torch.int32,
    torch.complex32: torch.int16,
}


def bits(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values as integers with the same bits (NaN payloads and -0.0 included)."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.resolve_conj().resolve_neg().contiguous()
    if t.is_complex():
        t = torch.view_as_real(t)
    target = _INT_VIEW.get(t.dtype)
    return t.view(target) if target is not None else t


def diff_values(r: Any, e: Any, where: str) -> list[str]:
    """Every way `r` differs from `e` (empty when they are the same), by path."""
    if isinstance(e, torch.Tensor):
        if not isinstance(r, torch.Tensor):
            return [f"{where}: region gave {type(r).__name__}, eager gave a Tensor"]
        return _diff_tensors(r, e, where)
    if type(r) is not type(e):
        return [f"{where}: region gave {type(r).__name__}, eager gave {type(e).__name__}"]
    if isinstance(e, (tuple, list)):
        if len(r) != len(e):
            return [f"{where}: region gave {len(r)} items, eager {len(e)}"]
        return [d for i, (a, b) in enumerate(zip(r, e)) for d in diff_values(a, b, f"{where}[{i}]")]
    if isinstance(e, float):
        same = struct.pack("<d", r) == struct.pack("<d", e) or (math.isnan(r) and math.isnan(e))
        return [] if same else [f"{where}: region {r!r} vs eager {e!r}"]
    if isinstance(e, complex):
        same = diff_values(r.real, e.real, where) == [] and diff_values(r.imag, e.imag, where) == []
        return [] if same else [f"{where}: region {r!r} vs eager {e!r}"]
    return [] if r == e else [f"{where}: region {r!r} vs eager {e!r}"]


def _diff_tensors(r: torch.Tensor, e: torch.Tensor, where: str) -> list[str]:
    out = []
    for what in ("dtype", "shape", "device", "layout", "requires_grad"):
        a, b = getattr(r, what), getattr(e, what)
        if a != b:
            out.append(f"{where}: {what} {a} vs eager {b}")
    if type(r) is not type(e):
        out.append(f"{where}: type {type(r).__name__} vs eager {type(e).__name__}")
    if (r.grad_fn is None) != (e.grad_fn is None):
        out.append(f"{where}: grad_fn {type(r.grad_fn).__name__} vs eager {type(e.grad_fn).__name__}")
    if out:
        return out
    if r.layout == torch.strided and r.numel() > 1 and r.stride() != e.stride():
        out.append(f"{where}: strides {r.stride()} vs eager {e.stride()}")
    if r.is_conj() != e.is_conj() or r.is_neg() != e.is_neg():
        out.append(f"{where}: conj/neg bits differ")
    if not torch.equal(bits(r), bits(e)):
        out.append(f"{where}: values differ ({_value_diff(r, e)})")
    return out


def _value_diff(r: torch.Tensor, e: torch.Tensor) -> str:
    r, e = r.detach(), e.detach()
    if r.layout != torch.strided:
        r, e = r.to_dense(), e.to_dense()
    if r.is_floating_point() or r.is_complex():
        close = torch.equal(r.isnan(), e.isnan()) and torch.equal(r.nan_to_num(), e.nan_to_num())
        if close:
            return "equal as numbers; differ in NaN payloads or the sign of zero"
        diff = (r.double() - e.double()).abs().nan_to_num(nan=math.inf) if not r.is_complex() else (r - e).abs()
        return f"max abs difference {diff.max().item():.3g} over {int((diff != 0).sum())} of {r.numel()} elements"
    return f"{int((r != e).sum())} of {r.numel()} elements differ"


def _grad_inputs(run: _Run) -> list[torch.Tensor]:
    return [t for t in tensors_in(run.args) if t.requires_grad and t.is_leaf]


def _loss(value: Any) -> torch.Tensor | None:
    outs = [
        t
        for t in tensors_in(value)
        if t.requires_grad and t.layout == torch.strided and (t.is_floating_point() or t.is_complex())
    ]
    if not outs:
        return None
    total = None
    for t in outs:
        s = torch.view_as_real(t.resolve_conj()).sum() if t.is_complex() else t.sum()
        total = s if total is None else total + s
    return total


def _grads(run: _Run) -> tuple[Any, BaseException | None]:
    inputs = _grad_inputs(run)
    if not inputs:
        return None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            loss = _loss(run.value)
            if loss is None:
                return None, None
            return list(torch.autograd.grad(loss, inputs, allow_unused=True)), None
        except Exception as exc:  # noqa: BLE001 - compared with eager's
            return None, exc


def _diff_grads(r: _Run, e: _Run) -> list[str]:
    if r.error is not None or e.error is not None:
        return []
    gr, err_r = _grads(r)
    ge, err_e = _grads(e)
    if err_r is not None or err_e is not None:
        return [f"backward: {d}" for d in _diff_errors(err_r, err_e)]
    if gr is None and ge is None:
        return []
    return diff_values(gr, ge, "gradients")


# ---- summaries -------------------------------------------------------------------------------------------


def count(outcomes: Iterable[Outcome]) -> dict[str, int]:
    totals = {s: 0 for s in (MATCH, PYTHON, MISMATCH, NO_RUN, NONDETERMINISTIC, CRASH)}
    for o in outcomes:
        totals[o.status] += 1
    return totals


def build_failures_text(stats: BatchStats) -> str:
    """Each distinct build error once, with the chunks it broke (a split chunk's halves included)."""
    by_error: dict[str, list[str]] = {}
    for line in stats.build_failures:
        where, _, error = line.partition(": ")
        by_error.setdefault(error.split(" failed: ", 1)[-1], []).append(where.split(" ", 1)[0])
    return "\n".join(
        f"{error}\n    in {len(chunks)} builds: {', '.join(chunks[:6])}" + (" ..." if len(chunks) > 6 else "")
        for error, chunks in by_error.items()
    )


def failures_text(outcomes: Iterable[Outcome], limit: int = 40) -> str:
    bad = [o for o in outcomes if o.status in FAILURES]
    lines = [str(o) for o in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"... and {len(bad) - limit} more")
    return "\n".join(lines)


def reproduction(o: Outcome) -> str:
    """A self-contained cell that reproduces one case (shapes and dtypes of its tensors as comments)."""
    lines = [HEADER.rstrip(), "", o.case.source.rstrip(), ""]
    for i, a in enumerate(o.case.args):
        lines.append(f"# arg {i}: {_describe_value(a)}")
    for k, v in o.case.kwargs.items():
        lines.append(f"# {k}: {_describe_value(v)}")
    return "\n".join(lines)


def _describe_value(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return (
            f"tensor{tuple(v.shape)} {v.dtype}"
            + (" requires_grad" if v.requires_grad else "")
            + ("" if v.layout == torch.strided else f" {v.layout}")
            + ("" if v.layout != torch.strided or v.is_contiguous() else f" strides {v.stride()}")
        )
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_describe_value(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    return repr(v)


# ---- writing values as source -------------------------------------------------------------------------------


class Inexpressible(Exception):
    """A value that cannot be written as a literal or passed as a parameter of a generated function."""


class Params:
    """The parameters a generated function takes: each tensor (or list of tensors) becomes one."""

    def __init__(self) -> None:
        self.decls: list[str] = []
        self.values: list[Any] = []

    def add(self, value: Any, annotation: str = "") -> str:
        name = f"x{len(self.decls)}"
        self.decls.append(f"{name}: {annotation}" if annotation else name)
        self.values.append(value)
        return name

    def literal(self, v: Any, *, in_index: bool = False) -> str:
        """`v` as a Python expression; tensors become parameters."""
        if isinstance(v, torch.Tensor):
            return self.add(v)
        if (
            isinstance(v, (list, tuple))
            and not isinstance(v, torch.Size)
            and v
            and not in_index
            and all(isinstance(x, torch.Tensor) for x in v)
        ):
            return self.add(list(v), "list")  # a TensorList argument: one list parameter
        if v is None or isinstance(v, (bool, str)):
            return repr(v)
        if isinstance(v, int):
            return repr(int(v))
        if isinstance(v, float):
            if math.isnan(v):
                return "math.nan"
            if math.isinf(v):
                return "math.inf" if v > 0 else "-math.inf"
            return repr(v)
        if isinstance(v, complex):
            return f"complex({self.literal(v.real)}, {self.literal(v.imag)})"
        if isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
            return str(v)  # torch.float64, torch.contiguous_format, torch.strided
        if isinstance(v, torch.device):
            return repr(str(v))
        if v is Ellipsis and in_index:
            return "..."
        if isinstance(v, slice) and in_index:
            parts = ["" if p is None else self.literal(p) for p in (v.start, v.stop, v.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
        if isinstance(v, (tuple, list)):  # torch.Size included: eager treats it as a tuple of ints
            items = [self.literal(x, in_index=in_index) for x in v]
            if isinstance(v, list):
                return "[" + ", ".join(items) + "]"
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        raise Inexpressible(f"a {type(v).__module__}.{type(v).__qualname__} argument cannot be written in source")

    def index(self, v: Any) -> str:
        """`v` as what goes between the brackets of ``x[...]``."""
        if isinstance(v, tuple) and not isinstance(v, torch.Size):
            if not v:
                return "()"
            return ", ".join(self.literal(x, in_index=True) for x in v) + ("," if len(v) == 1 else "")
        return self.literal(v, in_index=True)


def function_source(name: str, params: Params, body: str | list[str], level: int = 3) -> str:
    lines = [body] if isinstance(body, str) else body
    return f"@ppy.opt({level})\ndef {name}({', '.join(params.decls)}):\n" + "".join(f"    {ln}\n" for ln in lines)


# ---- OpInfo cases --------------------------------------------------------------------------------------------


class SampleArgs:
    """A sample input seen by a call template: each part is written (and becomes parameters) when used."""

    def __init__(self, sample: Any, params: Params) -> None:
        self.sample, self.params = sample, params

    @property
    def input(self) -> str:
        return self.params.literal(self.sample.input)

    def arg(self, i: int) -> str:
        return self.params.literal(self.sample.args[i])

    def rest(self, start: int = 0) -> str:
        """Positional args from `start` as ``, a, b`` (empty when there are none)."""
        return "".join(", " + self.params.literal(a) for a in self.sample.args[start:])

    @property
    def kw(self) -> str:
        return "".join(f", {k}={self.params.literal(v)}" for k, v in self.sample.kwargs.items())

    def call(self, callee: str, first: str, start: int = 0) -> str:
        inner = (first + self.rest(start) + self.kw).lstrip(", ")
        return f"{callee}({inner})"


Template = Callable[[SampleArgs], str]


def _function(path: str) -> Template:
    return lambda a: a.call(path, a.input)


def _method(name: str) -> Template:
    return lambda a: a.call(f"{a.input}.{name}", "")


def python_path(opinfo_name: str) -> str:
    """How user code spells the function an OpInfo name refers to (``nn.functional.x`` is ``F.x``)."""
    if opinfo_name.startswith("nn.functional."):
        return "F." + opinfo_name[len("nn.functional.") :]
    return "torch." + opinfo_name


def _resolve(opinfo_name: str) -> Any:
    obj: Any = torch
    for part in opinfo_name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


_REFLECTED = {
    "__radd__": "+",
    "__rsub__": "-",
    "__rmul__": "*",
    "__rdiv__": "/",
    "__rpow__": "**",
    "__rmatmul__": "@",
    "__rmod__": "%",
    "__rand__": "&",
    "__ror__": "|",
    "__rxor__": "^",
}

# Entries whose OpInfo `op` is a test wrapper (argument order, a clone, a seeded call) or not a plain call:
# the call a user would write. Keyed by name or (name, variant_test_name).
_SPECIAL: dict[Any, dict[str, Template]] = {
    "__getitem__": {"operator": lambda a: f"{a.input}[{a.params.index(a.sample.args[0])}]"},
    "T": {"property": lambda a: f"{a.input}.T"},
    "H": {"property": lambda a: f"{a.input}.H"},
    "mT": {"property": lambda a: f"{a.input}.mT"},
    "mH": {"property": lambda a: f"{a.input}.mH"},
    "item": {"method": _method("item")},
    "cauchy": {"method": _method("cauchy_")},
    "exponential": {"method": _method("exponential_")},
    "geometric": {"method": _method("geometric_")},
    "log_normal": {"method": _method("log_normal_")},
    "uniform": {"method": _method("uniform_")},
    ("normal", "in_place"): {"method": _method("normal_")},
    ("normal", "number_mean"): {"function": lambda a: a.call("torch.normal", a.arg(0) + ", " + a.input, 1)},
    "resize_": {"method": lambda a: a.call(f"{a.input}.clone().resize_", "")},
    "resize_as_": {"function": lambda a: a.call("torch.resize_as_", f"{a.input}.clone()")},
    "zero_": {"function": lambda a: f"torch.zero_({a.input}.clone())"},
    "polygamma": {
        "function": lambda a: a.call("torch.polygamma", a.arg(0) + ", " + a.input, 1),
        "method": lambda a: a.call(f"{a.input}.polygamma", a.arg(0), 1),
    },
    "special.polygamma": {"function": lambda a: a.call("torch.special.polygamma", a.arg(0) + ", " + a.input, 1)},
    "where": {
        "function": lambda a: a.call("torch.where", f"{a.arg(0)}, {a.input}, {a.arg(1)}", 2),
        "method": lambda a: a.call(f"{a.input}.where", f"{a.arg(0)}, {a.arg(1)}", 2),
    },
    "nn.functional.embedding": {"function": lambda a: a.call("F.embedding", f"{a.arg(0)}, {a.input}", 1)},
    "nn.functional.embedding_bag": {"function": lambda a: a.call("F.embedding_bag", f"{a.arg(0)}, {a.input}", 1)},
    "einsum": {"function": lambda a: a.call("torch.einsum", f"{a.arg(0)}, {a.input}", 1)},
    ("linalg.pinv", "singular"): {"function": lambda a: f"torch.linalg.pinv({a.input} @ {a.arg(0)}.mT)"},
    ("linalg.lstsq", "grad_oriented"): {"function": lambda a: a.call("torch.linalg.lstsq", a.input) + "[:2]"},
    "rand_like": {"function": _function("torch.rand_like")},  # its OpInfo wrapper calls randn_like
    "svd_lowrank": {"function": lambda a: a.call("torch.svd_lowrank", f"{a.input} @ {a.arg(0)}.mT", 1)},
    "pca_lowrank": {"function": lambda a: a.call("torch.pca_lowrank", f"{a.input} @ {a.arg(0)}.mT", 1)},
}
_SPECIAL.update(
    {name: {"operator": (lambda sym: lambda a: f"{a.arg(0)} {sym} {a.input}")(sym)} for name, sym in _REFLECTED.items()}
)


def opinfo_key(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def opinfo_forms(op: Any) -> tuple[dict[str, Template], str | None]:
    """The ways user code calls this entry's op ({form: template}), or why none is generated."""
    special = _SPECIAL.get((op.name, op.variant_test_name)) or _SPECIAL.get(op.name)
    if special is not None:
        return special, None
    if op.name.startswith("jiterator_"):
        return {}, "CUDA-only (jiterator)"
    if isinstance(op.op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return {}, "tests an ATen overload through torch.ops.aten, not a Python API"
    forms: dict[str, Template] = {}
    fn = _resolve(op.name)
    if callable(fn) and not isinstance(fn, torch.dtype) and (fn is op.op or _seeded_wrapper_of(op.op, op.name)):
        forms["function"] = _function(python_path(op.name))
    if op.method_variant is not None and "." not in op.name and callable(getattr(torch.Tensor, op.name, None)):
        forms["method"] = _method(op.name)
    if not forms:
        return {}, "the entry's op is a test-only wrapper with no Python API call to write"
    return forms, None


def _seeded_wrapper_of(fn: Any, name: str) -> bool:
    """OpInfo wraps random ops as ``lambda ...: wrapper_set_seed(torch.<name>, ...)``."""
    names = getattr(getattr(fn, "__code__", None), "co_names", ())
    return "wrapper_set_seed" in names and name.rsplit(".", 1)[-1] in names


_DTYPE_PREFERENCE = (torch.float32, torch.int64, torch.bool, torch.float64, torch.complex64)


def opinfo_dtype(op: Any) -> torch.dtype | None:
    """float32 (the issue's dtype), or the first dtype the op supports on CPU when it lacks float32."""
    supported = op.supported_dtypes("cpu")
    return next((d for d in _DTYPE_PREFERENCE if d in supported), None)


@dataclass
class EntryPlan:
    """One OpInfo entry: its generated cases per form, in sample order (a str where a sample is inexpressible)."""

    key: str
    dtype: str
    samples: int
    forms: dict[str, list[Case | str]]
    skip: str | None = None


# Ops whose results are uninitialized memory: two eager calls may agree by chance, a region's may not.
UNINITIALIZED = frozenset({"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"})


def plan_opinfo(ops: Sequence[Any], cap: int = 8) -> list[EntryPlan]:
    """Cases for every entry of `ops`: one function per sample (first `cap`) and form."""
    import itertools

    plans = []
    for i, op in enumerate(ops):
        key = opinfo_key(op)
        forms, skip = opinfo_forms(op)
        if op.name in UNINITIALIZED:
            skip = "returns uninitialized memory: its values are not comparable with anything"
        dtype = opinfo_dtype(op)
        if skip is None and dtype is None:
            skip = "supports none of float32, int64, bool, float64, complex64 on the CPU"
        if skip is not None:
            plans.append(EntryPlan(key, "", 0, {}, skip))
            continue
        torch.manual_seed(0)  # sample inputs are random: the same samples on every run
        grad = op.supports_autograd and (dtype.is_floating_point or dtype.is_complex)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=grad), cap))
        except Exception as exc:  # noqa: BLE001 - a broken generator skips its entry, loudly in the table
            plans.append(
                EntryPlan(key, str(dtype), 0, {}, f"sample_inputs raised {type(exc).__name__}: {_first_line(exc)}")
            )
            continue
        if not samples:
            plans.append(EntryPlan(key, str(dtype), 0, {}, "no sample inputs for this dtype"))
            continue
        plan = EntryPlan(key, str(dtype).replace("torch.", ""), len(samples), {})
        for form, template in forms.items():
            cases: list[Case | str] = []
            for s, sample in enumerate(samples):
                params = Params()
                try:
                    expr = template(SampleArgs(sample, params))
                except Inexpressible as exc:
                    cases.append(f"sample {s}: {exc}")
                    continue
                except IndexError:
                    cases.append(f"sample {s}: the call template needs more arguments than the sample has")
                    continue
                name = f"op{i}_{form[0]}{s}"
                cases.append(
                    Case(
                        name,
                        function_source(name, params, f"return {expr}"),
                        tuple(params.values),
                        label=key,
                        grad=grad,
                    )
                )
            plan.forms[form] = cases
        plans.append(plan)
    return plans


@dataclass
class EntryResult:
    key: str
    dtype: str
    samples: int
    functions: int  # functions the entry needs to count: samples x forms
    tried: int  # functions compiled or attempted
    compiled: int
    matched: int
    first_reason: str | None
    failures: list[Outcome]
    forms: tuple[str, ...] = ()

    @property
    def counts(self) -> bool:
        return self.functions > 0 and self.matched == self.functions and not self.failures


@dataclass
class OpInfoRun:
    entries: list[EntryResult]
    outcomes: list[Outcome]
    stats: BatchStats

    @property
    def counting(self) -> list[str]:
        return [e.key for e in self.entries if e.counts]

    def totals(self) -> dict[str, int]:
        t = count(self.outcomes)
        return {
            "entries": len(self.entries),
            "entries tried": sum(1 for e in self.entries if e.tried),
            "entries that count": len(self.counting),
            "functions": sum(e.functions for e in self.entries),
            "functions compiled": sum(e.compiled for e in self.entries),
            "functions matched": t[MATCH],
            "mismatches": t[MISMATCH],
            "no-run": t[NO_RUN],
            "crashes": t[CRASH],
            "eager-nondeterministic": t[NONDETERMINISTIC],
            "C++ build failures": len(self.stats.build_failures),
        }


def run_opinfo(
    ops: Sequence[Any] | None = None,
    *,
    cap: int = 8,
    probe_first: bool = True,
    chunk: int = CHUNK,
    progress: Callable[[str], None] | None = None,
) -> OpInfoRun:
    """Compile and compare every OpInfo entry's samples.

    With `probe_first`, the first sample of each (entry, form) is compiled first and the
    other samples only where it compiled: a form whose first sample stays Python cannot
    make its entry count, and leaving its other samples out keeps the builds few.
    """
    if ops is None:
        from torch.testing._internal.common_methods_invocations import op_db

        ops = op_db
    plans = plan_opinfo(ops, cap)
    stats = BatchStats()
    pool: Pool = {}
    firsts: list[Case] = []
    for p in plans:
        for cases in p.forms.values():
            first = next((c for c in cases if isinstance(c, Case)), None)
            if first is not None:
                firsts.append(first)
    if probe_first:
        done = {
            o.case.name: o
            for o in run_cases(
                firsts, prefix="ppy-opinfo-probe", chunk=chunk, stats=stats, pool=pool, progress=progress
            )
        }
        rest = []
        for p in plans:
            for cases in p.forms.values():
                real = [c for c in cases if isinstance(c, Case)]
                if real and done[real[0].name].status not in (PYTHON, CRASH):
                    rest += real[1:]
        done.update(
            {
                o.case.name: o
                for o in run_cases(rest, prefix="ppy-opinfo", chunk=chunk, stats=stats, pool=pool, progress=progress)
            }
        )
    else:
        every = [c for p in plans for cases in p.forms.values() for c in cases if isinstance(c, Case)]
        done = {
            o.case.name: o for o in run_cases(every, prefix="ppy-opinfo", chunk=chunk, stats=stats, progress=progress)
        }
    entries = []
    for p in plans:
        tried = compiled = matched = 0
        reason = p.skip
        failures: list[Outcome] = []
        for form, cases in p.forms.items():
            for s, c in enumerate(cases):
                if isinstance(c, str):
                    reason = reason or f"{form}: {c}"
                    continue
                o = done.get(c.name)
                if o is None:
                    continue  # not tried: its form's first sample stayed Python
                tried += 1
                compiled += o.status != PYTHON and o.status != CRASH
                matched += o.status == MATCH
                if o.status in FAILURES:
                    failures.append(o)
                if o.status != MATCH:
                    reason = reason or f"{form} sample {s}: {o.status if o.status != PYTHON else ''} {o.detail}"
        functions = p.samples * len(p.forms)
        entries.append(
            EntryResult(
                p.key, p.dtype, p.samples, functions, tried, compiled, matched, reason, failures, tuple(p.forms)
            )
        )
    return OpInfoRun(entries, list(done.values()), stats)


def opinfo_table(run: OpInfoRun) -> str:
    """The coverage table: one line per entry, then the totals."""
    rows = [("entry", "dtype", "forms", "samples", "compiled", "matched", "counts", "first reason it stays Python")]
    for e in run.entries:
        rows.append(
            (
                e.key,
                e.dtype,
                "+".join(e.forms) or "-",
                str(e.functions),
                str(e.compiled),
                str(e.matched),
                "yes" if e.counts else "no",
                _shorten((e.first_reason or "") if not e.counts else "", 110),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
    lines.append("")
    lines += [f"{k}: {v}" for k, v in run.totals().items()]
    return "\n".join(lines)


def _shorten(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# ---- random straight-line programs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Form:
    """One way to write an op in a program: a template over operands ``{a}``, ``{b}`` and options ``{d}``, ``{k}``.

    ``arity`` 1 takes one tensor; 2 a tensor and another tensor or a literal (``sides`` says which
    operands may be literals: "tt", "tl", "lt"); "matmul" a tensor and a new weight; "reduce" a
    tensor and a dim. ``ints``: also generated for integer tensors.
    """

    template: str
    arity: Any
    ints: bool = True
    sides: str = "tt"

    @property
    def label(self) -> str:
        return f"{self.template} [{self.sides}]" if self.arity == 2 else self.template


_UNARY_ANY = ("relu", "neg", "abs", "sigmoid", "tanh", "exp", "sin", "cos", "reciprocal", "square", "sign")
_UNARY_FLOAT = ("sqrt", "rsqrt", "log", "log1p", "expm1", "erf", "floor", "ceil", "round", "trunc", "frac")


def fuzz_forms() -> list[Form]:
    """Every op form the fuzzer knows; a probe keeps the ones the compiler supports."""
    forms: list[Form] = []
    for name in _UNARY_ANY + _UNARY_FLOAT:
        ints = name in _UNARY_ANY
        forms += [Form(f"torch.{name}({{a}})", 1, ints), Form(f"{{a}}.{name}()", 1, ints)]
    forms += [
        Form("-{a}", 1),
        Form("F.relu({a})", 1),
        Form("F.silu({a})", 1, False),
        Form("F.gelu({a})", 1, False),
        Form("torch.softmax({a}, dim={d})", 1, False),
        Form("F.softmax({a}, dim={d})", 1, False),
        Form("F.log_softmax({a}, dim={d})", 1, False),
    ]
    for sym in ("+", "-", "*", "/"):
        for sides in ("tt", "tl", "lt"):
            forms.append(Form(f"{{a}} {sym} {{b}}", 2, True, sides))
    for sym in ("//", "%", "**"):
        forms.append(Form(f"{{a}} {sym} {{b}}", 2, False, "tl"))
    for fn in ("add", "sub", "mul", "div", "maximum", "minimum"):
        forms.append(Form(f"torch.{fn}({{a}}, {{b}})", 2, True, "tt"))
        if fn in ("add", "sub", "mul", "div"):
            forms.append(Form(f"torch.{fn}({{a}}, {{b}})", 2, True, "tl"))
            forms.append(Form(f"{{a}}.{fn}({{b}})", 2, True, "tt"))
    forms += [Form("torch.add({a}, {b}, alpha=2)", 2, True, "tt"), Form("torch.sub({a}, {b}, alpha=0.5)", 2, False)]
    forms += [Form("{a} @ {b}", "matmul"), Form("torch.matmul({a}, {b})", "matmul"), Form("{a}.matmul({b})", "matmul")]
    forms += [
        Form("{a}.sum()", "reduce"),
        Form("{a}.sum(dim={d})", "reduce"),
        Form("{a}.sum(dim={d}, keepdim={k})", "reduce"),
        Form("torch.sum({a}, {d}, keepdim={k})", "reduce"),
        Form("{a}.mean(dim={d}, keepdim={k})", "reduce", False),
        Form("torch.mean({a}, {d})", "reduce", False),
        Form("{a}.mean()", "reduce", False),
        Form("{a}.amax(dim={d}, keepdim={k})", "reduce"),
    ]
    return forms


_EVAL_GLOBALS = {"torch": torch, "math": math}


def _eval_globals() -> dict:
    import torch.nn.functional as F

    return {**_EVAL_GLOBALS, "F": F}


def probe_cases(forms: Sequence[Form]) -> list[Case]:
    """One small function per form, on float32 tensors (3x4, with a 4x2 weight for matmul)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for i, form in enumerate(forms):
        params = Params()
        a = params.add(torch.randn(3, 4, generator=g))
        if form.arity == 2:
            a_text, b_text = a, None
            if form.sides == "tt":
                b_text = params.add(torch.randn(4, generator=g))
            elif form.sides == "tl":
                b_text = "0.75"
            else:
                a_text, b_text = "0.75", a
            expr = form.template.format(a=a_text, b=b_text)
        elif form.arity == "matmul":
            expr = form.template.format(a=a, b=params.add(torch.randn(4, 2, generator=g)))
        else:
            expr = form.template.format(a=a, d=-1, k=True)
        name = f"probe{i}"
        cases.append(
            Case(name, function_source(name, params, f"return {expr}"), tuple(params.values), label=form.label)
        )
    return cases


@dataclass(frozen=True)
class FuzzSupport:
    forms: tuple[Form, ...]  # the forms whose probe compiled and matched eager
    tuple_returns: bool  # whether `return a, b` compiles
    outcomes: tuple[Outcome, ...]  # every probe's outcome (a probe mismatch is a failure like any other)


def probe_fuzz(forms: Sequence[Form], stats: BatchStats | None = None, pool: Pool | None = None) -> FuzzSupport:
    """Compile one small function per form (and one tuple return) in one build; keep what matched."""
    cases = probe_cases(forms)
    g = torch.Generator().manual_seed(1)
    cases.append(
        Case(
            "probe_tuple",
            "@ppy.opt(3)\ndef probe_tuple(x0, x1):\n    return x0, x1\n",
            (torch.randn(3, generator=g), torch.randn(2, generator=g)),
            label="tuple return",
        )
    )
    outcomes = run_cases(cases, prefix="ppy-fuzz-probe", stats=stats, pool=pool)
    kept = tuple(f for f, o in zip(forms, outcomes) if o.status == MATCH)
    return FuzzSupport(kept, outcomes[-1].status == MATCH, tuple(outcomes))


@dataclass(frozen=True)
class ParamSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype
    requires_grad: bool


@dataclass(frozen=True)
class Program:
    params: tuple[ParamSpec, ...]
    lines: tuple[str, ...]  # the body, ending with a return
    seed: int

    def case(self, name: str, label: str = "") -> Case:
        decls = Params()
        values = make_inputs(self)
        for v in values:
            decls.add(v)
        return Case(name, function_source(name, decls, list(self.lines)), tuple(values), label=label or name)


def make_inputs(p: Program) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(p.seed)
    out = []
    for spec in p.params:
        if spec.dtype.is_floating_point:
            t = (torch.randn(spec.shape, generator=g, dtype=torch.float64) * 2).to(spec.dtype)
            out.append(t.requires_grad_(spec.requires_grad))
        else:  # no zeros: integer // and % by zero raise
            mag = torch.randint(1, 6, spec.shape, generator=g)
            sign = torch.randint(0, 2, spec.shape, generator=g) * 2 - 1
            out.append((mag * sign).to(spec.dtype))
    return out


_LITERALS = ("0.5", "2", "3", "-1", "1.5", "2.0", "0.1", "-0.25", "1e-3", "7")


def programs_strategy(forms: Sequence[Form], max_statements: int = 6, tuple_returns: bool = False):
    """Hypothesis strategy: one straight-line program over `forms` (shapes and dtypes tracked on meta tensors)."""
    from hypothesis import strategies as st

    float_forms = list(forms)
    int_forms = [f for f in forms if f.ints]

    @st.composite
    def program(draw):
        dtype = draw(
            st.sampled_from(
                [torch.float32, torch.float64, torch.int64] if int_forms else [torch.float32, torch.float64]
            )
        )
        pool_forms = float_forms if dtype.is_floating_point else int_forms
        rank = draw(st.integers(0, 3))
        shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
        specs: list[ParamSpec] = []
        env: dict[str, torch.Tensor] = {}

        def new_param(shape_: tuple[int, ...], dt: torch.dtype) -> str:
            grad = dt.is_floating_point and draw(st.booleans())
            specs.append(ParamSpec(shape_, dt, grad))
            name = f"x{len(specs) - 1}"
            env[name] = torch.empty(shape_, dtype=dt, device="meta")
            return name

        def other_dtype(dt: torch.dtype) -> torch.dtype:
            if dt.is_floating_point and draw(st.integers(0, 5)) == 0:
                return torch.float64 if dt == torch.float32 else torch.float32  # promotion between floats
            return dt

        def broadcastable(s: tuple[int, ...]) -> tuple[int, ...]:
            keep = draw(st.integers(0, len(s)))
            out = [d if draw(st.integers(0, 2)) else 1 for d in s[len(s) - keep :]]
            if draw(st.integers(0, 5)) == 0:
                out.insert(0, draw(st.integers(1, 3)))  # the other operand broadcasts up
            return tuple(out)

        new_param(shape, dtype)
        lines: list[str] = []
        results: list[str] = []
        for i in range(draw(st.integers(1, max_statements))):
            # Mostly the latest result, so that statements chain; then earlier ones and the parameters.
            names = results[::-1] + [n for n in env if n.startswith("x")]
            name = names[draw(st.integers(0, len(names) - 1))]
            expr, value = name, env[name]
            for _ in range(1 + draw(st.integers(0, 1))):  # sometimes nest one op inside another
                usable = [f for f in pool_forms if _applies(f, value)]
                if not usable:
                    break
                form = draw(st.sampled_from(usable))
                nested = expr != name and not form.template.startswith(("torch.", "F."))
                operand = f"({expr})" if nested else expr
                candidate = _instantiate(form, operand, value, draw, st, new_param, broadcastable, other_dtype)
                try:
                    got = eval(candidate, _eval_globals(), dict(env))  # noqa: S307 - our own generated text
                except Exception:  # noqa: BLE001 - invalid in eager too (e.g. an op without int support): skip
                    break
                if not isinstance(got, torch.Tensor):
                    break
                expr, value = candidate, got
            if expr == name:
                continue
            target = f"t{i}"
            env[target] = value
            results.append(target)
            lines.append(f"{target} = {expr}")
        if not results:
            results = ["x0"]
        if tuple_returns and len(results) > 1 and draw(st.integers(0, 4)) == 0:
            ret = f"return {results[-1]}, {draw(st.sampled_from(results[:-1]))}"
        else:
            ret = f"return {results[-1]}"
        seed = draw(st.integers(0, 2**31 - 1))
        return Program(tuple(specs), tuple(lines) + (ret,), seed)

    return program()


def _applies(form: Form, a: torch.Tensor) -> bool:
    if form.arity == "matmul":
        return a.dim() >= 1
    if "{d}" in form.template:
        return a.dim() >= 1
    return True


def _instantiate(
    form: Form, name: str, a: torch.Tensor, draw: Any, st: Any, new_param: Any, broadcastable: Any, other_dtype: Any
) -> str:
    if form.arity == 2:
        if form.sides == "tt":
            b = new_param(broadcastable(tuple(a.shape)), other_dtype(a.dtype))
            first, second = (name, b) if draw(st.booleans()) else (b, name)
            return form.template.format(a=first, b=second)
        lit = draw(st.sampled_from(_LITERALS))
        if form.template.endswith("** {b}"):
            lit = draw(st.sampled_from(("2", "0.5", "3", "-1", "1.5")))
        return form.template.format(a=name, b=lit) if form.sides == "tl" else form.template.format(a=lit, b=name)
    if form.arity == "matmul":
        k = a.shape[-1]
        w_shape = (k,) if draw(st.integers(0, 4)) == 0 else (k, draw(st.integers(1, 4)))
        return form.template.format(a=name, b=new_param(w_shape, a.dtype))
    d = draw(st.integers(-a.dim(), max(a.dim() - 1, -a.dim()))) if a.dim() else 0
    return form.template.format(a=name, d=d, k=draw(st.booleans()))


def generate_programs(
    forms: Sequence[Form], n: int, seed: int | None = None, max_statements: int = 6, tuple_returns: bool = False
) -> list[Program]:
    """`n` distinct programs drawn by hypothesis: the same every run unless a seed is given.

    Hypothesis repeats small examples, so rounds with further seeds top the list up
    until `n` programs differ in their text or their parameters' shapes and dtypes.
    """
    found: list[Program] = []
    seen: set = set()
    for round_ in range(50):
        if len(found) >= n:
            break
        round_seed = seed if round_ == 0 else (seed or 0) * 1000 + round_
        want = max(2 * (n - len(found)), 100)  # a small round would only redraw the simplest programs
        for p in _draw_programs(forms, want, round_seed, max_statements, tuple_returns):
            key = (p.lines, p.params)
            if key not in seen:
                seen.add(key)
                found.append(p)
    return found[:n]


def _draw_programs(
    forms: Sequence[Form], n: int, seed: int | None, max_statements: int, tuple_returns: bool
) -> list[Program]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    drawn: list[Program] = []

    @settings(
        max_examples=n,
        deadline=None,
        derandomize=seed is None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs_strategy(forms, max_statements, tuple_returns))
    def collect(p: Program) -> None:
        drawn.append(p)

    if seed is not None:
        collect = hypothesis_seed(seed)(collect)
    collect()
    return drawn


def program_text(p: Program, name: str = "f") -> str:
    return function_source(name, _decls(len(p.params)), list(p.lines))


def _decls(n: int) -> Params:
    params = Params()
    for _ in range(n):
        params.add(None)
    return params
