"""What ``%ppy_cache info`` and ``ppy cache info`` print about a cache directory."""

from __future__ import annotations

import glob
import os
import time
from typing import Any

from . import eviction
from .module_keys import runtime_name


def describe(cache: Any, listed: int = 12) -> str:  # a cache.Cache (which imports this module)
    """What ``%ppy_cache info`` prints: directory, entries, prelude, size limit, what a prune would take."""
    entries = cache.entries()
    total = sum(size for _, size in entries)
    runtimes = [n for n, _ in entries if n.startswith("ppy_runtime_")]
    lines = [f"cache directory: {cache.root}"]
    if cache._private:
        lines.append(f"  not used ({cache._unsafe}); this session builds in {cache._private}")
    lines.append(
        f"entries: {len(entries)} module(s), {_size(total)}: {len(entries) - len(runtimes)} "
        f"cell module(s), {len(runtimes)} runtime(s)"
    )
    by_age = sorted(entries, key=lambda e: _mtime(os.path.join(cache.lib, e[0])), reverse=True)
    for file, size in by_age[:listed]:
        kind = "runtime" if file.startswith("ppy_runtime_") else "cell"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(_mtime(os.path.join(cache.lib, file))))
        lines.append(f"  {file:<44} {_size(size):>9}  {kind:<7} {when}")
    if len(by_age) > listed:
        lines.append(f"  ... and {len(by_age) - listed} more")
    current, fused = cache.prelude(), cache.prelude(fused=True)
    lines.append(f"prelude: {current.status().describe()}")
    if os.path.isdir(fused.directory):
        lines.append(f"fused prelude (cells with fused chains): {fused.status().describe()}")
    ours = (current.directory, fused.directory)
    others = [d for d in glob.glob(os.path.join(cache.base, "prelude", "*")) if d not in ours]
    if others:
        size = sum(_mtime_size(f)[1] for d in others for f in glob.glob(os.path.join(d, "*")))
        lines.append(
            f"  and {len(others)} older prelude(s), {_size(size)}, from other toolchains or op "
            "tables (`%ppy_cache prune` removes them)"
        )
    lines.append(f"runtime for this toolchain: {'built' if cache.has(runtime_name()) else 'not built yet'}")
    lines.append(f"loaded in this process: {len(cache.memory)}")
    lines += _limit_lines(cache)
    return "\n".join(lines)


def _limit_lines(cache: Any, listed: int = 5) -> list[str]:
    everything = cache.scan()
    used = sum(e.size for e in everything)
    held = eviction.live_holds(cache.base)
    lines = [
        f"size limit: {eviction.size_text(cache.max_size)} (PPY_CACHE_MAX_SIZE, %config PpyMagics.cache_max_size);"
        f" on disk: {eviction.size_text(used)}"
    ]
    now = eviction.plan(everything, cache.max_size, held, tidy=True)
    if now:
        lines.append(
            f"prune would remove {len(now)} entr{'y' if len(now) == 1 else 'ies'} "
            f"({eviction.size_text(sum(e.size for e in now))}) now (`%ppy_cache prune`, `ppy cache prune`):"
        )
        lines += [f"  {e.describe()}" for e in now[:listed]]
        if len(now) > listed:
            lines.append(f"  ... and {len(now) - listed} more")
    else:
        lines.append("prune would remove nothing now (under the limit, no leftovers)")
    nxt = [e for e in eviction.plan(everything, None, held, target=0) if e not in now]
    if nxt:
        lines.append(f"next to go when over the limit: {nxt[0].describe()}")
    in_use = len({h for h in held if h.startswith(("module ", "prelude "))})
    if in_use:
        lines.append(f"held by live processes (never evicted): {in_use} module(s) and prelude(s)")
    return lines


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def _mtime(path: str) -> float:
    return _mtime_size(path)[0]


def _mtime_size(path: str) -> tuple[float, int]:
    try:
        st = os.stat(path)
    except OSError:
        return 0.0, 0
    return st.st_mtime, st.st_size
