"""PyTorch's OpInfo samples as generated ``@ppy.opt(3)`` functions, run as regions against eager.

For each OpInfo entry (op + variant), the first samples become one function each per form
the op is called in (``torch.f(...)``, ``x.f(...)``, an operator). ``plan_opinfo`` writes
them, ``run_opinfo`` compiles and compares them (``batch.run_cases``), ``opinfo_table``
prints the coverage table. Used by tests/test_opinfo.py and benchmarks/opinfo_coverage.py.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from tests.support.batch import CHUNK, BatchStats, Pool, run_cases
from tests.support.outcomes import (
    CRASH,
    FAILURES,
    MATCH,
    MISMATCH,
    NO_RUN,
    NONDETERMINISTIC,
    PYTHON,
    Case,
    Outcome,
    count,
    first_line,
)
from tests.support.source import Inexpressible, Params, function_source


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


def _reflected(symbol: str) -> Template:
    """``x.__radd__(y)`` is what ``y + x`` calls."""
    return lambda a: f"{a.arg(0)} {symbol} {a.input}"


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
_SPECIAL.update({name: {"operator": _reflected(sym)} for name, sym in _REFLECTED.items()})


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
                EntryPlan(key, str(dtype), 0, {}, f"sample_inputs raised {type(exc).__name__}: {first_line(exc)}")
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
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    lines.append("")
    lines += [f"{k}: {v}" for k, v in run.totals().items()]
    return "\n".join(lines)


def _shorten(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."
