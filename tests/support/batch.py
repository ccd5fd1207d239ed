"""Many generated cases compiled in chunks and compared with eager: the differential suites' engine.

Shared by tests/test_opinfo.py, tests/test_fuzz.py, tests/test_models.py and the
benchmarks. A batch of cases is written as ``%%ppy``-style sources (a chunk of about
150 functions each, so every C++ build stays small), compiled with the public path
(``pipeline.compile_source`` + ``pipeline.run``), and every function that became a
region is compared with its Python body (``eager.compare_call``).
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.cells import compile_cell, is_region
from tests.support.eager import compare_call
from tests.support.outcomes import CRASH, MATCH, PYTHON, Case, Outcome, first_line
from tests.support.source import HEADER

CHUNK = 150  # functions per generated source: one C++ build each
BUILD_FAILED = "the C++ build failed"  # the compiler's reason when a whole cell's build failed


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
            ns, report = compile_cell(source_of([c for _, c in part]), filename=filename)
    except Exception as exc:  # noqa: BLE001 - the compiler must never raise on valid Python
        for key, _ in part:
            pool[key] = (None, CRASH, f"compiling the batch {filename} raised {type(exc).__name__}: {first_line(exc)}")
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
