"""A bounded cache: a size limit, least-recently-used eviction, and what live kernels hold.

What the cache holds, as entries: a module (``lib/<name>.so``, its manifest
and ``build/<name>/``), a prelude (``prelude/<identity>/``, ~300 MB) and
leftovers (partial files of a killed publish, set-aside or orphaned build
directories). Over the limit (``PPY_CACHE_MAX_SIZE``, default 5 GB),
entries go in this order until the cache is back under 90 % of the limit:
leftovers, preludes of other toolchains (another torch, compiler or op table),
modules from least to most recently used, and last the prelude of this
toolchain.

Never removed: what a live process has loaded or is building. Each process
lists what it loaded (and the prelude it compiles with) in its own file under
``live/``, which it holds an exclusive ``flock`` on for as long as it lives;
the kernel drops the lock when the process dies, so a file nobody holds is
stale and is removed. A build holds the module's lock in ``locks/``; eviction
takes that lock (without waiting) before it removes anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_MAX_SIZE = 5 * 10**9
LOW_WATER = 0.9  # eviction brings the cache down to this fraction of the limit
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_size(text: str | int | None) -> int | None:
    """Bytes from "5G", "500M", "1.5GB", "2GiB" or a number; None for "unlimited"/"none"/"0"/"".

    Raises ValueError naming the accepted forms.
    """
    if text is None:
        return None
    if isinstance(text, int):
        return text if text > 0 else None
    s = text.strip().lower().replace(" ", "")
    if s in ("", "0", "none", "unlimited", "inf"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d*)?)([kmgt]?)(i?b?)", s)
    if not m:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 5G, 500M, 1.5GB or a number of bytes")
    base = 1024 if m[3].startswith("i") else 1000
    power = "kmgt".find(m[2]) + 1 if m[2] else 0
    return int(float(m[1]) * base**power)


def max_size_from_env() -> int | None:
    """The limit ``PPY_CACHE_MAX_SIZE`` sets, else the default (5 GB)."""
    env = os.environ.get("PPY_CACHE_MAX_SIZE")
    if env is None:
        return DEFAULT_MAX_SIZE
    try:
        return parse_size(env)
    except ValueError:
        return DEFAULT_MAX_SIZE


def size_text(n: int | None) -> str:
    if n is None:
        return "no limit"
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


# ---- what live processes hold -----------------------------------------------------------------


class LiveRecord:
    """This process's file under ``<base>/live/``: what it loaded, locked for as long as it lives."""

    def __init__(self, base: str):
        self.base = base
        self.path: str | None = None
        self._fd: int | None = None
        self._names: set[str] = set()
        self._lock = threading.Lock()
        self._failed = False

    def _open(self) -> int | None:
        if self._fd is not None or self._failed:
            return self._fd
        live = os.path.join(self.base, "live")
        try:
            os.makedirs(live, mode=0o700, exist_ok=True)
            # Locked under a temporary name, then renamed: a sweeper never sees it unlocked.
            tmp = os.path.join(live, f".new-{os.getpid()}-{time.monotonic_ns()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            path = os.path.join(live, f"{os.getpid()}-{time.monotonic_ns()}")
            os.replace(tmp, path)
        except OSError:
            self._failed = True  # a read-only cache: nothing here can be evicted by this process either
            return None
        self._fd, self.path = fd, path
        return fd

    def add(self, kind: str, name: str) -> None:
        key = f"{kind} {name}"
        with self._lock:
            if key in self._names:
                return
            fd = self._open()
            if fd is None:
                return
            try:
                os.write(fd, (key + "\n").encode())
            except OSError:
                return
            self._names.add(key)

    def close(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            with contextlib.suppress(OSError):
                os.remove(self.path)
            os.close(self._fd)
            self._fd = None


def live_holds(base: str) -> set[str]:
    """``"module NAME"``/``"prelude ID"`` lines of every live process; stale records are removed."""
    live = os.path.join(base, "live")
    try:
        files = os.listdir(live)
    except OSError:
        return set()
    held: set[str] = set()
    for f in files:
        if f.startswith(".new-"):
            continue
        path = os.path.join(live, f)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # its process is alive
                with os.fdopen(os.dup(fd), encoding="utf-8", errors="replace") as fh:
                    held.update(line.strip() for line in fh if line.strip())
                continue
            with contextlib.suppress(OSError):
                os.remove(path)  # nobody holds it: its process is gone
        finally:
            os.close(fd)
    return held


def anyone_alive(base: str) -> bool:
    """Whether a live process holds a record under `base` (a private cache still in use)."""
    live = os.path.join(base, "live")
    try:
        files = [f for f in os.listdir(live) if not f.startswith(".new-")]
    except OSError:
        return False
    for f in files:
        try:
            fd = os.open(os.path.join(live, f), os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


# ---- entries ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    kind: str  # "module", "prelude", "leftover"
    name: str
    paths: tuple[str, ...]
    size: int
    last_used: float
    lock: str | None = None  # the name of the build lock in locks/ that protects it
    current: bool = False  # the prelude of this toolchain

    @property
    def hold(self) -> str:
        return f"{self.kind} {self.name}"

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.last_used)) if self.last_used else "?"
        what = {
            "module": "module",
            "prelude": "prelude" + (" (this toolchain)" if self.current else " of another toolchain"),
            "leftover": "leftover",
        }[self.kind]
        return f"{self.name} ({what}, {size_text(self.size)}, last used {when})"


def _tree_size(path: str) -> tuple[int, float]:
    """Bytes under `path` and its newest mtime."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0, 0.0
    if not os.path.isdir(path):
        return st.st_size, st.st_mtime
    total, newest = 0, st.st_mtime
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                fst = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            total += fst.st_size
            newest = max(newest, fst.st_mtime)
    return total, newest


def scan(base: str, suffix: str, current_preludes: tuple[str, ...]) -> list[Entry]:
    """Every entry under the cache directory `base`."""
    entries: list[Entry] = []
    lib, build, prelude = (os.path.join(base, d) for d in ("lib", "build", "prelude"))
    modules: dict[str, list[str]] = {}
    leftovers: list[tuple[str, str | None]] = []  # (path, protecting lock)
    for f in _listdir(lib):
        path = os.path.join(lib, f)
        if ".tmp" in f:  # a publish killed mid-way: <name>.so.tmp<pid>[.json]
            leftovers.append((path, f.split(suffix + ".tmp", 1)[0]))
        elif f.endswith(suffix):
            modules.setdefault(f[: -len(suffix)], []).insert(0, path)
        elif f.endswith(suffix + ".json"):
            modules.setdefault(f[: -len(suffix) - 5], []).append(path)
    for d in _listdir(build):
        path = os.path.join(build, d)
        if d.startswith(".old-"):
            leftovers.append((path, None))
        elif d in modules:
            modules[d].append(path)
        else:
            leftovers.append((path, d))  # a failed or interrupted build
    for name, paths in modules.items():
        size, newest = 0, 0.0
        for p in paths:
            s, m = _tree_size(p)
            size += s
            if not p.startswith(build):  # a build directory's files do not say when the module was last used
                newest = max(newest, m)
        entries.append(Entry("module", name, tuple(paths), size, newest, lock=name))
    for path, lock in leftovers:
        size, newest = _tree_size(path)
        entries.append(Entry("leftover", os.path.relpath(path, base), (path,), size, newest, lock=lock))
    for ident in _listdir(prelude):
        path = os.path.join(prelude, ident)
        size, newest = _tree_size(path)
        entries.append(
            Entry("prelude", ident, (path,), size, newest, lock=f"prelude-{ident}", current=ident in current_preludes)
        )
    return entries


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def plan(
    entries: Iterable[Entry], limit: int | None, held: set[str], *, target: int | None = None, tidy: bool = False
) -> list[Entry]:
    """What to remove, in order, to bring the cache to `target` bytes (default: the limit).

    `tidy` (a prune by hand) also takes every leftover and every prelude of
    another toolchain, under the limit or not. Entries in `held` never go.
    """
    entries = list(entries)
    total = sum(e.size for e in entries)
    goal = target if target is not None else limit
    order = (
        sorted((e for e in entries if e.kind == "leftover"), key=lambda e: e.last_used)
        + sorted((e for e in entries if e.kind == "prelude" and not e.current), key=lambda e: e.last_used)
        + sorted((e for e in entries if e.kind == "module"), key=lambda e: e.last_used)
        + [e for e in entries if e.kind == "prelude" and e.current]
    )
    victims = []
    for e in order:
        if e.hold in held:
            continue
        garbage = e.kind == "leftover" or (e.kind == "prelude" and not e.current)
        if (tidy and garbage) or (goal is not None and total > goal):
            victims.append(e)
            total -= e.size
    return victims


def remove(entry: Entry, locks_dir: str, base: str, suffix: str) -> bool:
    """Remove `entry` unless it is being built or a live process now holds it; whether it was removed."""
    fd = None
    lock_path = os.path.join(locks_dir, f"{entry.lock}.lock") if entry.lock else None
    if lock_path:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # being built right now
            os.close(fd)
            return False
        except OSError:
            if fd is not None:
                os.close(fd)
            return False
    try:
        if entry.kind != "leftover" and entry.hold in live_holds(base):  # loaded since the plan was made
            return False
        for path in entry.paths:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(path)
        if lock_path and entry.kind != "leftover":
            with contextlib.suppress(OSError):
                os.remove(lock_path)  # lockers check that the file they locked is still the one in place
        return not any(os.path.lexists(p) for p in entry.paths)
    finally:
        if fd is not None:
            os.close(fd)
