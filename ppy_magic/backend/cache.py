"""Build and cache compiled extensions: the runtime, once per toolchain, and one module per cell.

A module is named by the sha256 of everything that affects its binary (source
text, flags, torch version and ABI, Python, compiler identity, package version,
and for a cell the prelude it includes). Lookup order: this process (memory) ->
``lib/<name>.so`` on disk, imported directly (no compiler, no ninja, no
subprocess) -> a build through ``torch.utils.cpp_extension.load_inline`` under
our own ``flock``, copied to a temporary name and renamed into place.

A cell's C++ starts with the prelude (``prelude.py``), whose precompiled form
is built here once per toolchain, before the first cell that needs it; on a
cold machine that happens while the runtime builds on the other core.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import stat
import tempfile
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BuildError
from . import prelude
from .diagnostics import first_error
from .toolchain import (
    CELL_CFLAGS,
    CFLAGS,
    EXT_SUFFIX,
    RUNTIME_DIR,
    build_jobs,
    compiler_name,
    ninja_on_path,
    prelude_identity,
    read_text,
    toolchain_key,
    toolchain_ready,
)

# ---- where the cache lives ---------------------------------------------------


def default_cache_dir() -> str:
    env = os.environ.get("PPY_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ppy_magic")


def unsafe_reason(path: str) -> str | None:
    """Why a directory must not hold modules we load, or None if it is private to us."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot use {path}: {exc.strerror}"
    if st.st_uid != os.getuid():
        return f"{path} is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


_SUBDIRS = ("lib", "build", "locks", "prelude")


def _prepare(root: str) -> str | None:
    """Create `root` and its subdirectories (mode 0700); why they are unusable, or None."""
    try:
        for d in (root, *(os.path.join(root, s) for s in _SUBDIRS)):
            os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError as exc:
        return f"cannot create {exc.filename or root}: {exc.strerror}"
    for d in (root, *(os.path.join(root, s) for s in _SUBDIRS)):
        problem = unsafe_reason(d)
        if problem:
            return problem
    return None


def module_name(prefix: str, text: str) -> str:
    """The module's name: a sha256 of the toolchain, the prelude it includes, and its code.

    Comments are left out of the key: they do not change the binary, and the
    generated ones name the cell's file, which a new kernel names differently.
    """
    key = toolchain_key()
    if prelude.INCLUDE_LINE in text:
        key += "\nprelude " + prelude_identity()
    digest = hashlib.sha256((key + "\n--\n" + code_without_comments(text)).encode()).hexdigest()
    return f"{prefix}_{digest[:24]}"


def code_without_comments(text: str) -> str:
    """C++ `text` with its comments removed; string and character literals kept as they are."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            j = i
            while j < n and text[j] not in "\"'/":
                j += 1
            if j == i:  # a lone '/'
                j += 1
            out.append(text[i:j])
            i = j
    return "".join(out)


# ---- the cache -------------------------------------------------------------------


@dataclass
class BuildResult:
    module: types.ModuleType
    name: str
    source: str  # "memory", "disk" or "build"
    seconds: float


@dataclass
class Cache:
    """Built modules under one directory: ``lib/`` (what is loaded), ``build/``, ``locks/``, ``prelude/``.

    ``root`` is the directory asked for. If it is unsafe (others can write it),
    this process builds in a private temporary directory instead (``base``).
    """

    root: str
    memory: dict[str, types.ModuleType] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    notes: list[str] = field(default_factory=list)
    _private: str | None = None
    _unsafe: str | None = None

    def __post_init__(self) -> None:
        self.root = os.path.abspath(self.root)

    # directories
    @property
    def base(self) -> str:
        return self._private or self.root

    @property
    def lib(self) -> str:
        return os.path.join(self.base, "lib")

    def build_dir(self, name: str) -> str:
        return os.path.join(self.base, "build", name)

    def lock_path(self, name: str) -> str:
        return os.path.join(self.base, "locks", f"{name}.lock")

    def so_path(self, name: str) -> str:
        return os.path.join(self.lib, name + EXT_SUFFIX)

    def loaded(self, name: str) -> types.ModuleType | None:
        """The module `name` if this cache built or loaded it in this process."""
        with self._lock:
            return self.memory.get(name)

    def ensure_dirs(self) -> str:
        """Create the cache's directories (mode 0700) and return the one this process uses.

        Code is never loaded from a directory others can write (or one owned by
        someone else): then this process builds in a private temporary
        directory instead and says so once.
        """
        with self._lock:
            if self._private is not None:
                return self._private
            problem = _prepare(self.root)
            if problem is None:
                return self.root
            private = tempfile.mkdtemp(prefix="ppy-private-cache-")
            still = _prepare(private)
            if still:
                raise BuildError(
                    f"cannot use the cache directory ({problem}) nor a private one ({still}); "
                    "set PPY_CACHE_DIR to a directory only you can write"
                )
            self._private, self._unsafe = private, problem
            self.notes.append(
                f"not loading compiled code from the cache directory: {problem}. This session builds in "
                f"the private directory {private} instead (nothing is reused across sessions). Fix it with "
                f"`chmod go-w {self.root}`, or set PPY_CACHE_DIR to a directory only you can write."
            )
            return private

    # lookup and build
    def load(
        self,
        name: str,
        text: str,
        *,
        include_paths: tuple[str, ...] = (),
        force: bool = False,
        on_build: Callable[[], None] | None = None,
    ) -> BuildResult:
        t0 = time.perf_counter()
        with self._lock:
            if not force and name in self.memory:
                return BuildResult(self.memory[name], name, "memory", time.perf_counter() - t0)
        self.ensure_dirs()
        if not force:
            mod = self._load_from_disk(name)
            if mod is not None:
                with self._lock:
                    self.memory[name] = mod
                return BuildResult(mod, name, "disk", time.perf_counter() - t0)
        announced = []

        def announce() -> None:
            if on_build and not announced:
                announced.append(True)
                on_build()

        # Waits while another kernel builds the same module (announced as building), then finds it on disk.
        with _flock(self.lock_path(name), on_wait=announce):
            mod = None if force else self._load_from_disk(name)
            source = "disk"
            if mod is None:
                announce()
                mod = self._build(name, text, include_paths)
                source = "build"
        with self._lock:
            self.memory[name] = mod
        return BuildResult(mod, name, source, time.perf_counter() - t0)

    def _load_from_disk(self, name: str) -> types.ModuleType | None:
        path = self.so_path(name)
        meta_path = path + ".json"
        if not os.path.exists(path):
            return None
        try:
            with open(meta_path, encoding="utf-8") as fh:
                meta = json.load(fh)
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            if digest != meta.get("sha256"):
                raise ValueError("its checksum does not match the one recorded when it was built")
            return import_extension(name, path)
        except (OSError, ValueError, ImportError) as exc:
            self.notes.append(f"cached {name}{EXT_SUFFIX} was unusable ({exc}); rebuilding it")
            for p in (path, meta_path):
                with contextlib.suppress(OSError):
                    os.remove(p)
            return None

    def _build(self, name: str, text: str, include_paths: tuple[str, ...]) -> types.ModuleType:
        status = toolchain_ready()
        if not status:
            raise BuildError(f"cannot build C++ here: {status}. Run ppy_magic.toolchain_ready() to check again.")
        ninja_on_path(status.ninja)
        includes = [RUNTIME_DIR, *include_paths]
        if prelude.INCLUDE_LINE not in text:
            return self._compile(name, text, list(CFLAGS), includes)
        pre = self.ready_prelude()
        includes.append(pre.directory)
        try:
            return self._compile(name, text, list(CELL_CFLAGS), includes)
        except BuildError as err:
            rejected = prelude.rejection(err.log)
            if rejected is None:
                raise
            reason, recurs = rejected
            with _flock(self._prelude_lock()):
                pre.mark_unusable("rejected", reason, permanent=recurs)
            self.notes.append(
                f"the compiler rejected the precompiled prelude ({reason}); {name} is built "
                "with plain includes" + ("" if recurs else "; the prelude is rebuilt next time")
            )
            return self._compile(name, text, list(CELL_CFLAGS), includes)

    def _compile(self, name: str, text: str, cflags: list[str], includes: list[str]) -> types.ModuleType:
        """``load_inline`` into a fresh ``build/<name>``; the caller holds the module's lock."""
        bdir = self.build_dir(name)
        self._set_aside(bdir, name)
        os.makedirs(bdir, mode=0o700)
        from torch.utils import cpp_extension

        # load_inline remembers sources per name for the process, and after a
        # failure would neither retry nor rebuild: forget them each time.
        cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)
        try:
            # verbose=False: ninja's output is captured and, on failure, part of the exception.
            module = cpp_extension.load_inline(
                name=name,
                cpp_sources=[text],
                extra_cflags=cflags,
                extra_include_paths=includes,
                build_directory=bdir,
                verbose=False,
                is_python_module=True,
                no_implicit_headers=True,
            )
        except Exception as exc:
            log = str(exc)
            raise BuildError(f"C++ build of {name} failed{first_error(log)}", log) from None
        finally:
            cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)
        self._publish(name, os.path.join(bdir, name + EXT_SUFFIX))
        return module

    def _set_aside(self, bdir: str, name: str) -> None:
        """Move an earlier build directory of `name` out of the way and delete it.

        Renamed first: a compiler orphaned by a killed build may still be
        writing there (relative to its working directory), and must not write
        into the new build.
        """
        if not os.path.exists(bdir):
            return
        if os.path.exists(os.path.join(bdir, "lock")):  # torch's own lock: we hold ours, so its owner is gone
            self.notes.append(f"cleared a stale build lock left by an interrupted build of {name}")
        aside = os.path.join(os.path.dirname(bdir), f".old-{name}-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(bdir, aside)
        shutil.rmtree(aside, ignore_errors=True)

    def _publish(self, name: str, built: str) -> None:
        """Copy a built module into ``lib/`` under a temporary name, with its checksum, then rename."""
        tmp = self.so_path(name) + f".tmp{os.getpid()}"
        shutil.copyfile(built, tmp)
        with open(tmp, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        with open(tmp + ".json", "w", encoding="utf-8") as fh:
            json.dump(
                {"name": name, "sha256": digest, "built": time.time(), "toolchain": toolchain_key().splitlines()[:5]},
                fh,
            )
        os.replace(tmp + ".json", self.so_path(name) + ".json")
        os.replace(tmp, self.so_path(name))

    # the prelude
    def prelude(self) -> prelude.Prelude:
        return prelude.Prelude(os.path.join(self.base, "prelude", prelude_identity()))

    def _prelude_lock(self) -> str:
        return self.lock_path("prelude-" + prelude_identity())

    def ready_prelude(self, *, force: bool = False) -> prelude.Prelude:
        """The prelude for cell builds: its header written and, unless that cannot work, its PCH built.

        ``force`` builds the PCH again, even one found unusable before.
        """
        self.ensure_dirs()
        pre = self.prelude()
        pre.write_header()
        if not force and pre.status().usable:
            return pre
        with _flock(self._prelude_lock()):
            if force:
                pre.mark_unusable("rebuilding", "", permanent=False)
                pre.forget_verdict()
            if pre.status().state != "not built":
                return pre
            compiler = os.path.basename(os.path.realpath(shutil.which(compiler_name()) or compiler_name()))
            if "clang" in compiler:  # clang reads a PCH only when told to (-include-pch), never by lookup
                pre.mark_unusable("unsupported", f"{compiler} does not pick up a .gch by itself", permanent=True)
                return pre
            try:
                cxx, flags = prelude.ninja_compile_command(list(CELL_CFLAGS), [RUNTIME_DIR, pre.directory])
            except Exception as exc:  # torch's private ninja writer changed shape
                reason = f"cannot read torch's compile flags ({exc!r})"
                pre.mark_unusable("failed", reason, permanent=True)
                self.notes.append(f"no precompiled prelude: {reason}; cells build with plain includes")
                return pre
            try:
                seconds = pre.build(cxx, flags)
            except prelude.PreludeError as err:
                self.notes.append(f"{err}; cells build with plain includes")
                return pre
            self.notes.append(f"built the precompiled prelude in {seconds:.1f} s (once per toolchain)")
        return pre

    # reporting and cleaning
    def entries(self) -> list[tuple[str, int]]:
        if not os.path.isdir(self.lib):
            return []
        return sorted(
            (f, os.path.getsize(os.path.join(self.lib, f))) for f in os.listdir(self.lib) if f.endswith(EXT_SUFFIX)
        )

    def info(self, listed: int = 12) -> str:
        """Directory, entries with sizes, prelude status: what ``%ppy_cache info`` prints."""
        entries = self.entries()
        total = sum(size for _, size in entries)
        runtimes = [n for n, _ in entries if n.startswith("ppy_runtime_")]
        lines = [f"cache directory: {self.root}"]
        if self._private:
            lines.append(f"  not used ({self._unsafe}); this session builds in {self._private}")
        lines.append(
            f"entries: {len(entries)} module(s), {_size(total)}: {len(entries) - len(runtimes)} "
            f"cell module(s), {len(runtimes)} runtime(s)"
        )
        by_age = sorted(entries, key=lambda e: _mtime(os.path.join(self.lib, e[0])), reverse=True)
        for file, size in by_age[:listed]:
            kind = "runtime" if file.startswith("ppy_runtime_") else "cell"
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(_mtime(os.path.join(self.lib, file))))
            lines.append(f"  {file:<44} {_size(size):>9}  {kind:<7} {when}")
        if len(by_age) > listed:
            lines.append(f"  ... and {len(by_age) - listed} more")
        current = self.prelude()
        lines.append(f"prelude: {current.status().describe()}")
        others = [d for d in glob.glob(os.path.join(self.base, "prelude", "*")) if d != current.directory]
        if others:
            size = sum(_mtime_size(f)[1] for d in others for f in glob.glob(os.path.join(d, "*")))
            lines.append(
                f"  and {len(others)} older prelude(s), {_size(size)}, from other toolchains or op "
                "tables (`%ppy_cache clear` removes them)"
            )
        lines.append(f"runtime for this toolchain: {'built' if self.has(runtime_name()) else 'not built yet'}")
        lines.append(f"loaded in this process: {len(self.memory)}")
        return "\n".join(lines)

    def has(self, name: str) -> bool:
        return os.path.exists(self.so_path(name))

    def clear(self) -> str:
        """Remove built modules and the prelude from disk; loaded ones stay loaded, so bound regions keep working.

        ``locks/`` stays: another kernel may hold one of its locks right now.
        """
        n = len(self.entries())
        for sub in ("lib", "build", "prelude"):
            shutil.rmtree(os.path.join(self.base, sub), ignore_errors=True)
        with self._lock:
            self.memory.clear()
        return f"removed {n} built module(s) and the precompiled prelude from {self.base}"


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


_caches: dict[str, Cache] = {}
_caches_lock = threading.Lock()


def shared_cache(root: str | None = None) -> Cache:
    """The one Cache object per directory in this process (its memory level is per kernel)."""
    root = os.path.abspath(root or default_cache_dir())
    with _caches_lock:
        if root not in _caches:
            _caches[root] = Cache(root)
        return _caches[root]


def recorded_sha256(path: str) -> str | None:
    """The sha256 the cache recorded beside the extension `path` when it published it; None if it did not."""
    try:
        with open(path + ".json", encoding="utf-8") as fh:
            return json.load(fh).get("sha256")
    except (OSError, ValueError):
        return None  # a module loaded from a build directory has no record


def import_extension(name: str, path: str) -> types.ModuleType:
    """Import a built extension module from its file: no compiler, no ninja."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _flock(path: str, on_wait: Callable[[], None] | None = None):
    """An exclusive lock on `path`; the kernel releases it if this process dies, so it never goes stale."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# ---- the runtime --------------------------------------------------------------------

_runtime_lock = threading.Lock()
_runtime: types.ModuleType | None = None


def runtime_source() -> str:
    return read_text(os.path.join(RUNTIME_DIR, "region_function.cpp"))


def runtime_name() -> str:
    return module_name("ppy_runtime", runtime_source())


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
    cache.ensure_dirs()
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
        state = pre.result().status()
    notes = tuple(cache.notes)
    cache.notes.clear()
    return WarmupReport(runtime_text, state.describe(), time.perf_counter() - t0, ok and state.usable, notes)


def loaded_runtime() -> types.ModuleType | None:
    """The runtime this process built or loaded from the cache, if any (artifacts reuse its type)."""
    with _runtime_lock:
        return _runtime
