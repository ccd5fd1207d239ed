"""The runtime extension (``RegionFunction``): one per process, built once per toolchain; and ``ppy warmup``.

Every region of a process must share one ``RegionFunction`` type, so the runtime is loaded once
(``load_runtime``) or, in a process that loads an artifact with no compiler, adopted from it.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import BuildError
from .disk import try_flock
from .module_keys import runtime_name, runtime_source
from .safety import CacheWriteError
from .toolchain import build_jobs, ninja_on_path, toolchain_ready

if TYPE_CHECKING:
    from .cache import Cache

# ---- the runtime --------------------------------------------------------------------

_runtime_lock = threading.Lock()
_runtime: types.ModuleType | None = None


def load_runtime(cache: Cache) -> types.ModuleType:
    """The runtime extension (RegionFunction), built once per toolchain and cached on disk.

    One per process: every region must share the RegionFunction type.
    """
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = cache.load(runtime_name(), runtime_source()).module
        return _runtime


# ---- ahead of time ----------------------------------------------------------------------


@dataclass(frozen=True)
class WarmupReport:
    runtime: str  # how the runtime was obtained, or why not
    prelude: str  # the prelude's status after warming up
    seconds: float
    ok: bool
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [
            f"runtime: {self.runtime}",
            f"prelude: {self.prelude}",
            f"{'ready' if self.ok else 'not ready'} after {self.seconds:.1f} s",
        ]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def warmup(cache: Cache, *, force: bool = False) -> WarmupReport:
    """Build the runtime and the prelude ahead of time, at the same time (``ppy warmup``).

    ``force`` rebuilds both, and tries a prelude again that was found unusable.
    """
    t0 = time.perf_counter()
    status = toolchain_ready()
    if not status:
        return WarmupReport(
            f"cannot build: {status}", cache.prelude().status().describe(), time.perf_counter() - t0, False
        )
    ninja_on_path(status.ninja)
    # Warming up is for later sessions: a cache this process cannot write gets nothing built.
    try:
        if cache.ensure_dirs() == cache.root:
            probe = try_flock(cache.lock_path("warmup"))
            if probe is not None:
                os.close(probe)
    except (BuildError, CacheWriteError) as err:
        advice = f"; {err.advice}" if isinstance(err, CacheWriteError) else ""
        return WarmupReport(f"not built: {err}{advice}", "not built", time.perf_counter() - t0, False)
    if cache.base != cache.root:
        notes = tuple(cache.notes)
        cache.notes.clear()
        return WarmupReport("not built", "not built", time.perf_counter() - t0, False, notes)
    with concurrent.futures.ThreadPoolExecutor(max_workers=build_jobs()) as pool:
        runtime = pool.submit(cache.load, runtime_name(), runtime_source(), force=force)
        pre = pool.submit(cache.ready_prelude, force=force)
        try:
            got = runtime.result()
            runtime_text = {"memory": "already loaded", "disk": "already built (on disk)", "build": "built"}[
                got.source
            ] + f" in {got.seconds:.1f} s"
            ok = True
        except BuildError as err:
            runtime_text, ok = f"build failed: {err}", False
        try:
            state = pre.result().status().describe()
            ok = ok and pre.result().status().usable
        except CacheWriteError as err:  # warming a cache this process cannot write builds nothing lasting
            state, ok = f"not built: {err}; {err.advice}", False
    notes = tuple(cache.notes)
    cache.notes.clear()
    return WarmupReport(runtime_text, state, time.perf_counter() - t0, ok, notes)


def adopt_runtime(module: types.ModuleType) -> None:
    """An artifact's runtime, imported with no compiler: the one regions built at calls use too (one
    RegionFunction type per process), unless this process has one already."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = module


def loaded_runtime() -> types.ModuleType | None:
    """The runtime this process built or loaded from the cache, if any (artifacts reuse its type)."""
    with _runtime_lock:
        return _runtime
