"""A generated case, how it came out, and the summaries the tests and benchmarks print.

Outcomes, per case: MATCH; PYTHON (stayed Python, with the compiler's reason: not a
failure by itself); MISMATCH (a wrong result: always a failure); NO_RUN (compiled, but
the call ran the Python body); NONDETERMINISTIC (eager disagrees with itself on these
inputs, e.g. uninitialised memory, so nothing can be compared); CRASH (compiling,
building or running the batch raised).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from tests.support.source import HEADER

MATCH = "match"
PYTHON = "python"
MISMATCH = "mismatch"
NO_RUN = "no-run"
NONDETERMINISTIC = "eager-nondeterministic"
CRASH = "crash"
FAILURES = (MISMATCH, NO_RUN, CRASH)


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


def count(outcomes: Iterable[Outcome]) -> dict[str, int]:
    totals = {s: 0 for s in (MATCH, PYTHON, MISMATCH, NO_RUN, NONDETERMINISTIC, CRASH)}
    for o in outcomes:
        totals[o.status] += 1
    return totals


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


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""
