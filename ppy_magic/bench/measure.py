"""Timing a function as an ATen region, as PyTorch eager and under torch.compile: measurement as data.

``measure`` checks each variant's output against eager (the region bit for bit
with ``compare.same_as_eager``, torch.compile with ``assert_close``), then times the
variants interleaved round by round in this one process, so that noise from
other work on the machine falls on each of them alike. It returns a frozen
``BenchResult``; turning that into a DataFrame, text, HTML or a widget is the
business of ``report`` and ``widget``. The clock and ``torch.compile`` are
parameters, so tests can put fakes in their place.
"""

from __future__ import annotations

import copy
import gc
import itertools
import statistics
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import PpyError
from ..library import compiled_methods
from .compare import same_as_eager

REGION = "PPy ATen region"
EAGER = "PyTorch eager"
COMPILE = "torch.compile"
LABELS = (REGION, EAGER, COMPILE)
# What a region's "matches eager" means: compare.same_as_eager found no difference.
BITWISE = "bitwise equal (values, dtype, shape, strides, device, requires_grad)"

Timer = Callable[[], float]
# on_progress(rounds done, rounds in all, what is happening now)
Progress = Callable[[int, int, str], None]


class BenchUsageError(PpyError, ValueError):
    """The options or the arguments cannot be benchmarked as given; the message says what to change."""


class EagerError(PpyError):
    """PyTorch eager raised on the given arguments, so nothing was timed.

    ``error`` is eager's own exception; its traceback starts at the function's
    own frames (none of this module's).
    """

    def __init__(self, function: str, error: BaseException):
        self.function = function
        self.error = error
        super().__init__(
            f"PyTorch eager ({function}) raised {type(error).__name__} on these arguments, "
            f"so nothing was timed: {error}"
        )


@dataclass(frozen=True)
class BenchOptions:
    number: int = 20_000  # calls per round
    repeat: int = 5  # rounds
    warmup: int = 300  # untimed calls per variant before the first round
    threads: int = 1  # torch.set_num_threads while timing; restored afterwards
    grad: bool = False  # time forward + backward
    compile: bool = True  # include torch.compile

    def __post_init__(self) -> None:
        if self.number < 1:
            raise BenchUsageError(f"-n/--number is the calls per round and must be at least 1, got {self.number}")
        if self.repeat < 1:
            raise BenchUsageError(f"-r/--repeat is the number of rounds and must be at least 1, got {self.repeat}")
        if self.warmup < 0:
            raise BenchUsageError(f"warm-up calls cannot be negative, got {self.warmup}")
        if self.threads < 1:
            raise BenchUsageError(f"--threads must be at least 1, got {self.threads}")


@dataclass(frozen=True)
class ArgumentInfo:
    expression: str  # as the user wrote it
    type_name: str
    shape: tuple[int, ...] | None = None  # tensors only
    dtype: str | None = None  # e.g. "float32"
    device: str | None = None
    requires_grad: bool = False

    @property
    def summary(self) -> str:
        """``float32[8, 32]`` for a tensor, the type name otherwise."""
        if self.shape is None:
            return self.type_name
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class VariantTiming:
    label: str
    per_call_s: tuple[float, ...] = ()  # mean seconds per call, one value per round
    first_call_s: float | None = None  # torch.compile: the call that compiles
    matches_eager: bool | None = None  # None: did not run
    check: str = ""  # how the output was compared with eager, or how it differed
    skipped: str | None = None  # why this variant did not run

    @property
    def ran(self) -> bool:
        return self.skipped is None and bool(self.per_call_s)

    @property
    def best_s(self) -> float | None:
        return min(self.per_call_s) if self.per_call_s else None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.per_call_s) if self.per_call_s else None

    @property
    def iqr_s(self) -> float | None:
        if not self.per_call_s:
            return None
        if len(self.per_call_s) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.per_call_s, n=4, method="inclusive")
        return q3 - q1


@dataclass(frozen=True)
class BenchResult:
    function: str
    variants: tuple[VariantTiming, ...]  # in LABELS order
    arguments: tuple[ArgumentInfo, ...]
    options: BenchOptions
    torch_version: str
    device: str
    threads: int
    region_calls: int | None = None  # during this run; None when FUNC is not a region
    region_fallbacks: int | None = None
    last_fallback_reason: str | None = None

    def __getitem__(self, label: str) -> VariantTiming:
        for v in self.variants:
            if v.label == label:
                return v
        raise KeyError(label)

    def speedup_vs_eager(self, label: str) -> float | None:
        """Eager's best time over this variant's: above 1 means faster than eager."""
        mine, eager = self[label].best_s, self[EAGER].best_s
        if mine is None or eager is None or mine <= 0:
            return None
        return eager / mine

    @property
    def fastest(self) -> str | None:
        timed = [v for v in self.variants if v.ran]
        return min(timed, key=lambda v: v.best_s).label if timed else None


def pure_python(func: Callable) -> Callable:
    """``func.__wrapped__``, calling the Python bodies of the regions it calls too (those of its module).

    Otherwise the eager and torch.compile rows of a region that calls other regions would time those
    regions, not PyTorch eager.
    """
    body = getattr(func, "__wrapped__", func)
    scope = getattr(body, "__globals__", None)
    if scope is None:
        return body
    regions = {
        k: v
        for k, v in scope.items()
        if not isinstance(v, type) and getattr(v, "__ppy_region__", False) is True and hasattr(v, "__wrapped__")
    }
    if not regions:
        return body
    plain = _plain_scope(scope)

    def rebind(f: Any) -> Any:
        if not isinstance(f, types.FunctionType) or f.__globals__ is not scope:
            return f
        g = types.FunctionType(f.__code__, plain, f.__name__, f.__defaults__, f.__closure__)
        g.__dict__.update(f.__dict__)
        g.__qualname__, g.__doc__, g.__module__ = f.__qualname__, f.__doc__, f.__module__
        return g

    for name, region in regions.items():
        plain[name] = rebind(region.__wrapped__)
    return rebind(body)


def region_of(func: Any) -> Any:
    """The region `func` runs: itself, or for an ``nn.Module`` its class's ``forward``; else None."""
    if getattr(func, "__ppy_region__", False) is True:
        return func
    if isinstance(func, torch.nn.Module):
        compiled = compiled_methods(func)  # ppy_magic.compile(model): the instance's own
        if "forward" in compiled:
            return compiled["forward"].region
        forward = getattr(type(func), "forward", None)
        if getattr(forward, "__ppy_region__", False) is True:
            return forward
    return None


def pure_python_module(model: torch.nn.Module) -> torch.nn.Module:
    """A twin of `model` whose methods are the Python bodies of its classes' regions.

    It shares every parameter, buffer and hook with `model` (a shallow copy of each module,
    submodules twinned too), so eager and torch.compile time the same model as PyTorch
    runs it; each class with regions gets a subclass of the same name holding their bodies.
    """
    shadows: dict[type, type] = {}

    def shadow(cls: type) -> type:
        if cls not in shadows:
            bodies = {}
            for klass in reversed(cls.__mro__):
                for name, value in vars(klass).items():
                    if getattr(value, "__ppy_region__", False) is True and hasattr(value, "__wrapped__"):
                        bodies[name] = pure_python(value)
                    elif name in bodies:
                        del bodies[name]  # overridden below the class that compiled it
            if not bodies:
                shadows[cls] = cls
            else:
                extra = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
                shadows[cls] = type(cls.__name__, (cls,), {**bodies, **extra})
        return shadows[cls]

    def twin(module: torch.nn.Module) -> torch.nn.Module:
        copied = copy.copy(module)  # the same _parameters, _buffers and hooks
        for name in compiled_methods(module):  # ppy_magic.compile's bindings: the class's own methods run
            copied.__dict__.pop(name, None)
        copied.__dict__["_modules"] = {k: None if m is None else twin(m) for k, m in module._modules.items()}
        copied.__class__ = shadow(type(module))
        return copied

    return twin(model)


# One copy of each namespace, refreshed on every run, never a new one: torch.compile keys its compiled code
# by code object and puts the compiled functions into the globals it ran with, so a later run of the same
# code with a fresh copy finds a cached entry whose functions are not there (NameError: __compiled_fn_3...).
_PLAIN_SCOPES: dict[int, tuple[dict, dict]] = {}


def _plain_scope(scope: dict) -> dict:
    held = _PLAIN_SCOPES.get(id(scope))
    plain = held[1] if held is not None and held[0] is scope else {}
    _PLAIN_SCOPES[id(scope)] = (scope, plain)
    plain.update(scope)
    return plain


def measure(
    func: Callable,
    args: Sequence[Any],
    options: BenchOptions = BenchOptions(),
    *,
    name: str | None = None,
    arg_names: Sequence[str] | None = None,
    timer: Timer = time.perf_counter,
    compile_fn: Callable[[Callable], Callable] | None = None,
    on_progress: Progress | None = None,
) -> BenchResult:
    """Check and time `func` (a region), its ``__wrapped__`` body, and torch.compile of that body.

    `func` may be an ``nn.Module`` whose class's ``forward`` is a region: then ``model(*args)``
    is timed as it is, and through a twin that runs its classes' Python bodies
    (``pure_python_module``), as PyTorch eager and under torch.compile.

    Raises ``EagerError`` when eager itself rejects `args` (nothing else runs)
    and ``BenchUsageError`` when ``--grad`` has nothing to differentiate.
    A variant that cannot run gets a row saying why; the others are measured.
    """
    region = region_of(func)
    is_region = region is not None
    if isinstance(func, torch.nn.Module):  # model(x): the region is its class's forward
        eager_fn = pure_python_module(func) if is_region else func
        name = name or type(func).__name__
    else:
        eager_fn = pure_python(func) if is_region else func
    name = name or getattr(eager_fn, "__name__", None) or repr(func)
    arg_names = list(arg_names) if arg_names is not None else [f"arg{i}" for i in range(len(args))]
    if len(arg_names) != len(args):
        raise ValueError(f"measure: {len(arg_names)} arg_names for {len(args)} arguments")
    compile_fn = compile_fn or torch.compile
    progress = on_progress or (lambda done, total, stage: None)
    counters_before = _region_counters(region) if is_region else None

    threads_before = torch.get_num_threads()
    torch.set_num_threads(options.threads)
    try:
        step = _Step.prepare(args, options.grad)
        sync = torch.cuda.synchronize if any(_on_cuda(a) for a in step.args) else None
        progress(0, options.repeat, "checking outputs against eager")
        rng = _RandomState.now()  # each variant's checked call draws what eager's drew (dropout)
        expected = step.reference(eager_fn, name)

        runnable: list[tuple[str, Callable]] = []
        rows: dict[str, dict[str, Any]] = {label: {} for label in LABELS}
        if is_region:
            rng.restore()
            rows[REGION] = _check(step, func, expected, exact=True)
            if "skipped" not in rows[REGION]:
                runnable.append((REGION, func))
        else:
            rows[REGION] = {"skipped": f"{name} is not an ATen region: {_not_region_reason(func)}"}
        rows[EAGER] = {"matches_eager": True, "check": "the reference"}
        runnable.append((EAGER, eager_fn))
        if options.compile:
            progress(0, options.repeat, "torch.compile: compiling on the first call")
            rng.restore()
            rows[COMPILE] = _compile_variant(step, eager_fn, compile_fn, expected, timer, sync)
            if "skipped" not in rows[COMPILE]:
                runnable.append((COMPILE, rows[COMPILE].pop("fn")))
        else:
            rows[COMPILE] = {"skipped": "not measured (--no-compile)"}

        progress(0, options.repeat, f"warm-up: {options.warmup:,} calls each")
        for _label, fn in runnable:
            step.loop(fn, options.warmup)
        times: dict[str, list[float]] = {label: [] for label, _ in runnable}
        for r in range(options.repeat):
            progress(r, options.repeat, f"round {r + 1} of {options.repeat}")
            for label, fn in runnable:
                times[label].append(_time_round(step, fn, options.number, timer, sync))
        progress(options.repeat, options.repeat, "done")
    finally:
        torch.set_num_threads(threads_before)

    variants = tuple(VariantTiming(label, tuple(times.get(label, ())), **rows[label]) for label in LABELS)
    calls = fallbacks = None
    last_reason = None
    if counters_before is not None:
        calls_after, fallbacks_after = _region_counters(region)
        calls, fallbacks = calls_after - counters_before[0], fallbacks_after - counters_before[1]
        last_reason = getattr(region, "last_fallback_reason", None) if fallbacks else None
    return BenchResult(
        function=name,
        variants=variants,
        arguments=tuple(_describe(n, a) for n, a in zip(arg_names, step.args, strict=True)),
        options=options,
        torch_version=torch.__version__,
        device=_devices(step.args),
        threads=options.threads,
        region_calls=calls,
        region_fallbacks=fallbacks,
        last_fallback_reason=last_reason,
    )


class _RandomState:
    """The default generators' state (CPU, and CUDA once initialised), to replay before a checked call."""

    def __init__(self, cpu: torch.Tensor, cuda: list[torch.Tensor] | None):
        self.cpu = cpu
        self.cuda = cuda

    @classmethod
    def now(cls) -> _RandomState:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        return cls(torch.get_rng_state(), cuda)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


# -- one call, and many -------------------------------------------------------------


class _Step:
    """One call of a variant: forward, or forward + ``torch.autograd.grad`` with ``--grad``.

    With ``--grad`` the floating-point tensor arguments are made leaves that
    require grad once, before timing (no copy per call), and gradients are
    taken with ``torch.autograd.grad`` so nothing accumulates in ``.grad``.
    """

    def __init__(self, args: tuple, targets: tuple[torch.Tensor, ...], grad: bool):
        self.args = args
        self.targets = targets
        self.grad = grad
        self.loss: Callable[[Any], torch.Tensor] = _sum_outputs
        self._loop = _make_loop(len(args), grad)

    @classmethod
    def prepare(cls, args: Sequence[Any], grad: bool) -> _Step:
        if not grad:
            return cls(tuple(args), (), False)
        prepared = tuple(
            a.detach().requires_grad_(True) if _differentiable(a) and not a.requires_grad else a for a in args
        )
        targets = tuple(a for a in prepared if _differentiable(a))
        if not targets:
            raise BenchUsageError(
                "--grad: no argument is a floating-point or complex tensor, so there is "
                "nothing to differentiate; drop --grad"
            )
        return cls(prepared, targets, True)

    def reference(self, eager_fn: Callable, name: str) -> Any:
        """Eager's output (and gradients): what the other variants are compared with.

        Eager's own error on these arguments becomes an ``EagerError``, raised
        before any other variant runs, so the user sees it once.
        """
        try:
            out = eager_fn(*self.args)
        except Exception as err:
            raise EagerError(name, err.with_traceback(_below_this_frame(err))) from err
        if not self.grad:
            return out
        if not any(t.requires_grad for t in _tensors(out)):
            raise BenchUsageError(
                f"--grad: no output of {name} requires grad, so there is no backward pass to time; drop --grad"
            )
        single_real = isinstance(out, torch.Tensor) and not out.is_complex()
        self.loss = torch.Tensor.sum if single_real else _sum_outputs
        try:
            return out, torch.autograd.grad(self.loss(out), self.targets, allow_unused=True)
        except Exception as err:
            raise EagerError(name, err.with_traceback(_below_this_frame(err))) from err

    def call(self, fn: Callable) -> Any:
        """One call as the timed loop makes it; returns the output, and the gradients with --grad."""
        out = fn(*self.args)
        if not self.grad:
            return out
        return out, torch.autograd.grad(self.loss(out), self.targets, allow_unused=True)

    def loop(self, fn: Callable, n: int) -> None:
        self._loop(itertools.repeat(None, n), fn, torch.autograd.grad, self.loss, self.targets, *self.args)


def _make_loop(n_args: int, grad: bool) -> Callable:
    # Like timeit: a loop compiled for this arity calls fn(a0, a1, ...) directly,
    # avoiding the cost of fn(*args) in every iteration.
    params = "".join(f", a{i}" for i in range(n_args))
    call = f"fn({params[2:]})"
    body = f"grad(loss({call}), targets, allow_unused=True)" if grad else call
    source = f"def loop(it, fn, grad, loss, targets{params}):\n    for _ in it:\n        {body}\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<ppy_bench loop>", "exec"), namespace)
    return namespace["loop"]


def _time_round(step: _Step, fn: Callable, number: int, timer: Timer, sync: Callable[[], None] | None) -> float:
    """Mean seconds per call over `number` calls, with the garbage collector off as timeit does."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if sync:
            sync()
        t0 = timer()
        step.loop(fn, number)
        if sync:
            sync()
        t1 = timer()
    finally:
        if gc_was_enabled:
            gc.enable()
    return (t1 - t0) / number


def _sum_outputs(out: Any) -> torch.Tensor:
    """A real scalar that depends on every output requiring grad (autograd.grad needs one)."""
    parts = [(t.real if t.is_complex() else t).sum() for t in _tensors(out) if t.requires_grad]
    return sum(parts[1:], parts[0])


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _tensors(item)]
    return []


def _differentiable(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex())


def _on_cuda(a: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return a.device.type == "cuda"
    if isinstance(a, (tuple, list)):
        return any(_on_cuda(x) for x in a)
    return False


def _below_this_frame(err: BaseException):
    tb = err.__traceback__
    return tb.tb_next if tb is not None else None


# -- the variants that may not run ------------------------------------------------------------


def _check(step: _Step, fn: Callable, expected: Any, *, exact: bool) -> dict[str, Any]:
    try:
        got = step.call(fn)
    except Exception as err:
        return {"skipped": f"raised {type(err).__name__} where eager did not: {_first_line(err)}"}
    return _compare(got, expected, exact)


def _compare(got: Any, expected: Any, exact: bool) -> dict[str, Any]:
    if exact:
        diff = same_as_eager(got, expected, "output")
        if diff is None:
            return {"matches_eager": True, "check": BITWISE}
        return {"matches_eager": False, "check": f"differs from eager: {diff}"}
    try:
        torch.testing.assert_close(got, expected)
    except AssertionError as err:
        return {"matches_eager": False, "check": f"differs from eager: {_first_line(err)}"}
    except Exception as err:  # an output assert_close cannot take (a model's cache object): compared exactly
        diff = same_as_eager(got, expected, "output")
        if diff is None:
            return {"matches_eager": True, "check": BITWISE}
        return {"matches_eager": False, "check": f"not comparable by assert_close ({type(err).__name__}): {diff}"}
    return {"matches_eager": True, "check": "close (torch.testing.assert_close)"}


def _compile_variant(
    step: _Step, eager_fn: Callable, compile_fn: Callable, expected: Any, timer: Timer, sync: Callable[[], None] | None
) -> dict[str, Any]:
    try:
        compiled = compile_fn(eager_fn)
        t0 = timer()
        got = step.call(compiled)
        if sync:
            sync()
        first_call = timer() - t0
    except Exception as err:  # no C++ compiler, an unsupported construct, ...
        return {"skipped": f"torch.compile failed: {type(err).__name__}: {_first_line(err)}"}
    return {"fn": compiled, "first_call_s": first_call, **_compare(got, expected, exact=False)}


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _not_region_reason(func: Callable) -> str:
    from ..region import explain  # the reason a function stayed Python lives there

    if isinstance(func, torch.nn.Module):
        forward = region_of(func) or getattr(type(func), "forward", None)
        return f"{type(func).__name__}.forward: " + (explain(forward).reason or "it is not a region")
    return explain(func).reason or "it is not a region"


def _region_counters(func: Any) -> tuple[int, int]:
    """(region calls, Python calls) so far; a function split around breaks counts its segments' calls."""
    from ..region import counters

    return counters(func)


# -- metadata -------------------------------------------------------------------------


def _describe(expression: str, value: Any) -> ArgumentInfo:
    if isinstance(value, torch.Tensor):
        return ArgumentInfo(
            expression,
            type(value).__name__,
            tuple(value.shape),
            str(value.dtype).replace("torch.", ""),
            str(value.device),
            value.requires_grad,
        )
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return ArgumentInfo(expression, f"{type(value).__name__} of {len(value)} tensors", device=_devices(value))
    return ArgumentInfo(expression, type(value).__name__)


def _devices(args: Sequence[Any]) -> str:
    found = []
    for a in args:
        if isinstance(a, torch.Tensor):
            found.append(str(a.device))
        elif isinstance(a, (tuple, list)):
            found += [str(t.device) for t in a if isinstance(t, torch.Tensor)]
    return ", ".join(dict.fromkeys(found)) or "cpu"
