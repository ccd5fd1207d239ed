"""Build and cache compiled extensions: the runtime, once per toolchain, and one module per cell.

A module is named by the sha256 of everything that affects its binary (source
text, flags, torch version and ABI, Python, compiler identity, package version).
Lookup order: this process (memory) -> ``lib/<name>.so`` on disk, imported
directly (no compiler, no ninja, no subprocess) -> a build through
``torch.utils.cpp_extension.load_inline`` under our own ``flock``, written to a
temporary name and renamed into place.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import stat
import sys
import sysconfig
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Callable

import torch

from .errors import BuildError

RUNTIME_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime")
CFLAGS = ("-O2", "-DAT_PER_OPERATOR_HEADERS", "-Wno-unused-variable", "-Wno-unused-function")
EXT_SUFFIX = ".so"


def package_version() -> str:
    from . import __version__

    return __version__


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
        return f"cannot stat {path}: {exc.strerror}"
    if st.st_uid != os.getuid():
        return f"{path} is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


# ---- toolchain ------------------------------------------------------------------


def _find_ninja() -> str | None:
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # the pip wheel; its binary may not be on a kernel's PATH

        candidate = os.path.join(ninja.BIN_DIR, "ninja")
        if os.access(candidate, os.X_OK):
            return candidate
    except ImportError:
        pass
    return None


def _compiler_name() -> str:
    return os.environ.get("CXX", "c++")


@dataclass(frozen=True)
class ToolchainStatus:
    compiler: str | None
    ninja: str | None
    python_headers: str | None

    @property
    def missing(self) -> list[str]:
        out = []
        if not self.compiler:
            out.append(f"a C++ compiler ('{_compiler_name()}' is not on PATH; install g++ or set CXX)")
        if not self.ninja:
            out.append("ninja (pip install ninja)")
        if not self.python_headers:
            out.append("the Python development headers (Python.h; e.g. apt-get install python3-dev)")
        return out

    def __bool__(self) -> bool:
        return not self.missing

    def __str__(self) -> str:
        if not self.missing:
            return f"toolchain ready: {self.compiler}, {self.ninja}, {self.python_headers}"
        return "missing: " + "; ".join(self.missing)


def toolchain_ready() -> ToolchainStatus:
    """Whether a C++ compiler, ninja and the Python headers are usable; ``str()`` names what is missing."""
    inc = sysconfig.get_paths().get("include")
    headers = inc if inc and os.path.exists(os.path.join(inc, "Python.h")) else None
    return ToolchainStatus(shutil.which(_compiler_name()), _find_ninja(), headers)


def _file_identity(path: str | None) -> str:
    if not path:
        return "none"
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


def toolchain_key() -> str:
    """Everything about this process and machine that affects a binary. No subprocess."""
    parts = [
        f"ppy_magic {package_version()}",
        f"torch {torch.__version__} cxx11abi={int(torch._C._GLIBCXX_USE_CXX11_ABI)} cuda={torch.version.cuda}",
        f"python {sys.version} {sys.implementation.cache_tag} {sysconfig.get_config_var('SOABI')}",
        f"compiler {_compiler_name()} {_file_identity(shutil.which(_compiler_name()))}",
        f"flags {' '.join(CFLAGS)}",
        f"abi-header {_read(os.path.join(RUNTIME_DIR, 'ppy_abi.h'))}",
    ]
    return "\n".join(parts)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def module_name(prefix: str, text: str) -> str:
    digest = hashlib.sha256((toolchain_key() + "\n--\n" + text).encode()).hexdigest()
    return f"{prefix}_{digest[:24]}"


# ---- the cache -------------------------------------------------------------------


@dataclass
class BuildResult:
    module: types.ModuleType
    name: str
    source: str  # "memory", "disk" or "build"
    seconds: float


@dataclass
class Cache:
    root: str
    memory: dict[str, types.ModuleType] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = os.path.abspath(self.root)

    # directories
    @property
    def lib(self) -> str:
        return os.path.join(self.root, "lib")

    def build_dir(self, name: str) -> str:
        return os.path.join(self.root, "build", name)

    def lock_path(self, name: str) -> str:
        return os.path.join(self.root, "locks", f"{name}.lock")

    def ensure_dirs(self) -> None:
        for d in (self.root, self.lib, os.path.join(self.root, "build"), os.path.join(self.root, "locks")):
            os.makedirs(d, mode=0o700, exist_ok=True)
        problem = unsafe_reason(self.root) or unsafe_reason(self.lib)
        if problem:
            raise BuildError(
                f"refusing to load compiled code from an unsafe cache directory: {problem}. "
                "Set PPY_CACHE_DIR to a directory only you can write (it is created with mode 0700).")

    # lookup and build
    def load(self, name: str, text: str, *, include_paths: tuple[str, ...] = (), force: bool = False,
             on_build: Callable[[], None] | None = None) -> BuildResult:
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
        with _flock(self.lock_path(name)):
            # Another process may have built it while we waited for the lock.
            mod = None if force else self._load_from_disk(name)
            source = "disk"
            if mod is None:
                if on_build:
                    on_build()
                mod = self._build(name, text, include_paths)
                source = "build"
        with self._lock:
            self.memory[name] = mod
        return BuildResult(mod, name, source, time.perf_counter() - t0)

    def so_path(self, name: str) -> str:
        return os.path.join(self.lib, name + EXT_SUFFIX)

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
                raise ValueError("checksum mismatch")
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
            raise BuildError(f"cannot build: {status}")
        if status.ninja and not shutil.which("ninja"):
            os.environ["PATH"] = os.path.dirname(status.ninja) + os.pathsep + os.environ.get("PATH", "")
        bdir = self.build_dir(name)
        os.makedirs(bdir, mode=0o700, exist_ok=True)
        stale = os.path.join(bdir, "lock")
        if os.path.exists(stale):  # we hold the flock, so whoever left this is gone
            self.notes.append(f"cleared a stale build lock left by an interrupted build of {name}")
            os.remove(stale)
        from torch.utils import cpp_extension

        # load_inline remembers sources per name for the process; forget them so
        # a failed build can be retried and a forced one really rebuilds.
        cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)
        for leftover in ("build.ninja", ".ninja_log", ".ninja_deps"):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(bdir, leftover))
        try:
            # verbose=False: ninja's output is captured and, on failure, part of the exception.
            module = cpp_extension.load_inline(
                name=name, cpp_sources=[text], extra_cflags=list(CFLAGS),
                extra_include_paths=[RUNTIME_DIR, *include_paths], build_directory=bdir,
                verbose=False, is_python_module=True, no_implicit_headers=True)
        except Exception as exc:
            raise BuildError(f"C++ build of {name} failed", str(exc)) from None
        built = os.path.join(bdir, name + EXT_SUFFIX)
        tmp = self.so_path(name) + f".tmp{os.getpid()}"
        shutil.copyfile(built, tmp)
        with open(tmp, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        with open(tmp + ".json", "w", encoding="utf-8") as fh:
            json.dump({"name": name, "sha256": digest, "built": time.time(),
                       "toolchain": toolchain_key().splitlines()[:5]}, fh)
        os.replace(tmp + ".json", self.so_path(name) + ".json")
        os.replace(tmp, self.so_path(name))
        return module


    # reporting and cleaning
    def entries(self) -> list[tuple[str, int]]:
        if not os.path.isdir(self.lib):
            return []
        return sorted((f, os.path.getsize(os.path.join(self.lib, f))) for f in os.listdir(self.lib)
                      if f.endswith(EXT_SUFFIX))

    def info(self) -> str:
        entries = self.entries()
        total = sum(size for _, size in entries)
        runtime = [n for n, _ in entries if n.startswith("ppy_runtime_")]
        cells = [n for n, _ in entries if n.startswith("ppy_cell_")]
        lines = [f"cache directory: {self.root}",
                 f"built modules: {len(entries)} ({total / 1e6:.1f} MB): {len(cells)} cell(s), "
                 f"{len(runtime)} runtime(s)",
                 f"loaded in this process: {len(self.memory)}",
                 f"runtime for this toolchain: {'built' if self.has(runtime_name()) else 'not built yet'}"]
        return "\n".join(lines)

    def has(self, name: str) -> bool:
        return os.path.exists(self.so_path(name))

    def clear(self) -> str:
        """Remove every built module from disk; loaded ones stay loaded, so bound regions keep working."""
        n = len(self.entries())
        for sub in ("lib", "build", "locks"):
            shutil.rmtree(os.path.join(self.root, sub), ignore_errors=True)
        with self._lock:
            self.memory.clear()
        return f"removed {n} built module(s) from {self.root}"


_caches: dict[str, Cache] = {}
_caches_lock = threading.Lock()


def shared_cache(root: str | None = None) -> Cache:
    """The one Cache object per directory in this process (its memory level is per kernel)."""
    root = os.path.abspath(root or default_cache_dir())
    with _caches_lock:
        if root not in _caches:
            _caches[root] = Cache(root)
        return _caches[root]


def import_extension(name: str, path: str) -> types.ModuleType:
    """Import a built extension module from its file: no compiler, no ninja."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _flock(path: str):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if this process dies
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# ---- the runtime --------------------------------------------------------------------

_runtime_lock = threading.Lock()
_runtime: types.ModuleType | None = None


def runtime_source() -> str:
    return _read(os.path.join(RUNTIME_DIR, "region_function.cpp"))


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
