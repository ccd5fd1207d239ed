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

Faults end in a working cell: an unsafe directory (``safety``) or a failed
write sends the session to a private directory (``disk``), a module is
checked against its manifest before it is loaded, and the cache is kept
under its size limit (``eviction``).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BuildError, CacheError
from . import eviction, prelude, safety, shipped
from .diagnostics import first_error
from .disk import SUBDIRS, import_extension, make_private_dir, try_flock, verify_manifest
from .disk import flock as _flock
from .module_keys import code_without_comments
from .safety import CacheWriteError
from .toolchain import (
    CFLAGS,
    EXT_SUFFIX,
    FUSED_LDFLAGS,
    RUNTIME_DIR,
    cell_cflags,
    compiler_name,
    ninja_on_path,
    prelude_identity,
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


# ---- the cache ----
@dataclass
class BuildResult:
    module: types.ModuleType
    name: str
    source: str  # "memory", "disk", "artifact" (shipped by one, ``shipped``) or "build"
    seconds: float


@dataclass
class Cache:
    """Built modules under one directory: ``lib/`` (what is loaded), ``build/``, ``locks/``, ``prelude/``.

    ``root`` is the directory asked for. If it is unsafe (see ``safety``), or a
    write into it fails (read-only, not ours, full), this process uses a private
    temporary directory instead (``base``), removed when the process ends; a
    root that is only unwritable is still read from (``_read_through``).
    ``max_size`` bounds the cache (``eviction``); None means no limit.
    """

    root: str
    memory: dict[str, types.ModuleType] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    notes: list[str] = field(default_factory=list)
    max_size: int | None = field(default_factory=eviction.max_size_from_env)
    _private: str | None = None
    _unsafe: str | None = None  # why `root` is not written (or not used at all)
    _read_through: str | None = None  # `root`, when it is safe to read but this process cannot write it
    _live: dict[str, eviction.LiveRecord] = field(default_factory=dict)

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

        Code is never loaded from a directory others could write (see
        ``safety.unsafe_directory``): then this process builds in a private
        temporary directory instead and says so once, with what to do.
        """
        with self._lock:
            if self._private is not None:
                return self._private
            failed = None
            try:
                for d in (self.root, *(os.path.join(self.root, s) for s in SUBDIRS)):
                    os.makedirs(d, mode=0o700, exist_ok=True)
            except OSError as exc:
                failed = CacheWriteError(exc, "creating the cache directory", exc.filename or self.root)
            unsafe = safety.unsafe_directory(self.root, inside=SUBDIRS) if os.path.isdir(self.root) else None
            if unsafe is not None:
                self._use_private(
                    f"not loading compiled code from the cache directory: {unsafe.reason}",
                    f"to reuse builds across sessions, {unsafe.advice}",
                    unsafe.reason,
                    read_through=False,
                )
            elif failed is not None:
                self._fall_back(failed)
            return self.base

    def _fall_back(self, err: CacheWriteError) -> None:
        """A write into `root` failed: go on in a private directory, reading what `root` already has."""
        readable = os.path.isdir(os.path.join(self.root, "lib"))
        self._use_private(
            f"cannot write to the cache directory {self.root} ({err.what}: {err.cause})",
            err.advice,
            f"{err.cause} ({err.what})",
            read_through=readable,
        )

    def _use_private(self, why: str, advice: str, short: str, *, read_through: bool) -> None:
        try:
            private = make_private_dir()
        except OSError as exc:
            raise CacheError(
                f"{why}, and a private cache directory cannot be made either ({safety.cause_of(exc)} in "
                f"{tempfile.gettempdir()}): {advice}"
            ) from None
        self._private, self._unsafe = private, short
        self._read_through = self.root if read_through else None
        self._record(private, "session", "private")
        reuse = "it reuses what the cache directory already holds" if read_through else "nothing is reused"
        self.notes.append(
            f"{why}. This session builds in the private directory {private} instead ({reuse}; it is removed "
            f"when the session ends); {advice}."
        )

    def _record(self, base: str, kind: str, name: str) -> None:
        """List `name` as held by this process, so that eviction leaves it alone."""
        with self._lock:
            record = self._live.get(base)
            if record is None:
                record = self._live[base] = eviction.LiveRecord(base)
                atexit.register(record.close)
        record.add(kind, name)

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
                mod = self.memory[name]
                _note_use(name, text, mod)
                return BuildResult(mod, name, "memory", time.perf_counter() - t0)
        announced = []

        def announce() -> None:
            if on_build and not announced:
                announced.append(True)
                on_build()

        while True:
            private_before = self.ensure_dirs() != self.root
            try:
                mod, source = self._load_or_build(name, text, include_paths, force, announce)
                break
            except CacheWriteError as err:
                with self._lock:
                    if private_before:  # the private directory failed too: the function stays Python
                        raise CacheError(f"cannot build {name}: {err}; {err.advice}") from None
                    if self._private is None:
                        self._fall_back(err)
        with self._lock:
            self.memory[name] = mod
        _note_use(name, text, mod)
        if source == "build":
            self.evict_if_over()
        return BuildResult(mod, name, source, time.perf_counter() - t0)

    def _load_or_build(
        self, name: str, text: str, include_paths: tuple[str, ...], force: bool, announce: Callable[[], None]
    ) -> tuple[types.ModuleType, str]:
        if not force:
            mod = self._load_from_disk(name, remove_bad=False)
            if mod is not None:
                return mod, "disk"
            mod = self._load_shipped(text)
            if mod is not None:
                return mod, "artifact"
        # Waits while another kernel builds the same module (announced as building), then finds it on disk.
        with _flock(self.lock_path(name), on_wait=announce):
            mod = None if force else self._load_from_disk(name, remove_bad=True)
            if mod is not None:
                return mod, "disk"
            announce()
            return self._build(name, text, include_paths), "build"

    def _load_from_disk(self, name: str, *, remove_bad: bool) -> types.ModuleType | None:
        """The module from ``lib/`` (this directory's, else the read-only root's), checked before it is loaded.

        Its manifest must name it and give its size and sha256, all equal to
        the file's: a library that is not the one published under this name
        is never loaded, so its static initialisers never run. A bad one is
        removed (`remove_bad`, under the module's lock) and rebuilt.
        """
        bases = [self.base] + ([self._read_through] if self._read_through else [])
        for base in bases:
            path = os.path.join(base, "lib", name + EXT_SUFFIX)
            if not os.path.exists(path):
                continue
            self._record(self.base, "module", name)  # before reading it: eviction now leaves it alone
            problem = verify_manifest(name, path)
            if problem is None:
                try:
                    module = import_extension(name, path)
                except ImportError as exc:
                    problem = f"it does not import ({exc})"
                else:
                    with contextlib.suppress(OSError):
                        os.utime(path + ".json")  # last used: what eviction orders by
                    return module
            if not remove_bad:
                return None  # looked at again under the lock, where it is removed and rebuilt
            self.notes.append(f"cached {name}{EXT_SUFFIX} was not loaded ({problem}); rebuilding it")
            for p in (path, path + ".json"):
                with contextlib.suppress(OSError):
                    os.remove(p)
        return None

    def _load_shipped(self, text: str) -> types.ModuleType | None:
        """The module an artifact shipped for this code (``shipped``), checked by its sha256, or None."""
        if not shipped.any_registered():
            return None
        found = shipped.find(shipped.code_key(code_without_comments(text)))
        if found is None:
            return None
        try:
            with open(found.path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            return None
        if digest != found.sha256:
            self.notes.append(f"{found.path} does not match the artifact's checksum: not loaded")
            return None
        try:
            return import_extension(found.module, found.path)
        except ImportError as exc:
            self.notes.append(f"{found.path} does not import ({exc})")
            return None

    def _build(self, name: str, text: str, include_paths: tuple[str, ...]) -> types.ModuleType:
        status = toolchain_ready()
        if not status:
            raise BuildError(f"cannot build C++ here: {status}. Run ppy_magic.toolchain_ready() to check again.")
        ninja_on_path(status.ninja)
        includes = [RUNTIME_DIR, *include_paths]
        fused = prelude.FUSED_INCLUDE_LINE in text
        if not fused and prelude.INCLUDE_LINE not in text:
            return self._compile(name, text, list(CFLAGS), includes)
        cflags = list(cell_cflags(fused))
        ldflags = list(FUSED_LDFLAGS) if fused else None
        pre = self.ready_prelude(fused=fused)
        includes.append(pre.directory)
        try:
            return self._compile(name, text, cflags, includes, ldflags)
        except BuildError as err:
            rejected = prelude.rejection(err.log)
            if rejected is None:
                raise
            reason, recurs = rejected
            if pre.directory == self.prelude(fused).directory:
                with _flock(self._prelude_lock(fused)):
                    pre.mark_unusable("rejected", reason, permanent=recurs)
            else:  # the read-only cache's prelude: use our own header, as plain text
                own = self.prelude(fused)
                try:
                    own.write_header()
                except OSError as exc:
                    raise CacheWriteError(exc, "writing the prelude header", own.directory) from None
                includes[-1] = own.directory
            self.notes.append(
                f"the compiler rejected the precompiled {'fused ' if fused else ''}prelude ({reason}); {name} is "
                "built with plain includes" + ("" if recurs else "; the prelude is rebuilt next time")
            )
            return self._compile(name, text, cflags, includes, ldflags)

    def _compile(
        self, name: str, text: str, cflags: list[str], includes: list[str], ldflags: list[str] | None = None
    ) -> types.ModuleType:
        """``load_inline`` into a fresh ``build/<name>``; the caller holds the module's lock."""
        bdir = self.build_dir(name)
        try:
            self._set_aside(bdir, name)
            os.makedirs(bdir, mode=0o700)
        except OSError as exc:
            raise CacheWriteError(exc, "creating the build directory", os.path.dirname(bdir)) from None
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
                extra_ldflags=ldflags,
                extra_include_paths=includes,
                build_directory=bdir,
                verbose=False,
                is_python_module=True,
                no_implicit_headers=True,
            )
        except OSError as exc:  # writing the sources or the build file
            shutil.rmtree(bdir, ignore_errors=True)
            raise CacheWriteError(exc, "writing the build files", bdir) from None
        except Exception as exc:
            log = str(exc)
            starved = safety.starved_build(log, os.path.dirname(bdir))
            if starved is None:
                raise BuildError(f"C++ build of {name} failed{first_error(log)}", log) from None
            shutil.rmtree(bdir, ignore_errors=True)  # half-written objects: give the space back
            raise BuildError(starved, log) from None
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
        """Copy a built module into ``lib/`` under a temporary name, with its manifest, then rename.

        The manifest (name, size, sha256) is what a later load checks before
        loading. A failed copy (a full disk) leaves no partial file: the module
        this process loaded keeps working, and the next kernel builds it again.
        """
        final = self.so_path(name)
        tmp = final + f".tmp{os.getpid()}"
        try:
            shutil.copyfile(built, tmp)
            with open(tmp, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            manifest = {
                "name": name,
                "size": os.path.getsize(tmp),
                "sha256": digest,
                "built": time.time(),
                "toolchain": toolchain_key().splitlines()[:5],
            }
            with open(tmp + ".json", "w", encoding="utf-8") as fh:
                json.dump(manifest, fh)
            os.replace(tmp, final)
            os.replace(tmp + ".json", final + ".json")
        except OSError as exc:
            for p in (tmp, tmp + ".json"):
                with contextlib.suppress(OSError):
                    os.remove(p)
            self.notes.append(
                f"built {name} but could not save it in the cache ({safety.cause_of(exc)} in {self.lib}); "
                f"it works in this session and is built again next time: {safety.advice_for(exc, self.lib)}"
            )
            return
        self._record(self.base, "module", name)

    # the prelude
    def prelude(self, fused: bool = False) -> prelude.Prelude:
        return prelude.Prelude(os.path.join(self.base, "prelude", prelude_identity(fused)), fused)

    def _prelude_lock(self, fused: bool = False) -> str:
        return self.lock_path("prelude-" + prelude_identity(fused))

    def ready_prelude(self, *, force: bool = False, fused: bool = False) -> prelude.Prelude:
        """The prelude for cell builds (`fused`: for cells with fused chains): its header written and,
        unless that cannot work, its PCH built.

        ``force`` builds the PCH again, even one found unusable before.
        """
        self.ensure_dirs()
        pre = self.prelude(fused)
        if self._read_through and not force and not pre.status().usable:
            shared = prelude.Prelude(os.path.join(self._read_through, "prelude", prelude_identity(fused)), fused)
            if shared.status().usable:
                return shared  # read-only, and complete: gcc only reads it
        self._record(self.base, "prelude", prelude_identity(fused))
        try:
            pre.write_header()
        except OSError as exc:
            raise CacheWriteError(exc, "writing the prelude header", pre.directory) from None
        if not force and pre.status().usable:
            with contextlib.suppress(OSError):
                os.utime(pre.header)  # last used: what eviction orders by
            return pre
        with _flock(self._prelude_lock(fused)):
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
                cxx, flags = prelude.ninja_compile_command(list(cell_cflags(fused)), [RUNTIME_DIR, pre.directory])
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
            except OSError as exc:
                self.notes.append(
                    f"no precompiled prelude: {safety.cause_of(exc)} in {pre.directory}; cells build with plain "
                    f"includes ({safety.advice_for(exc, pre.directory)})"
                )
                return pre
            what = "fused prelude (for cells with fused chains)" if fused else "prelude"
            self.notes.append(f"built the precompiled {what} in {seconds:.1f} s (once per toolchain)")
        return pre

    # size, eviction, reporting and cleaning
    def scan(self) -> list[eviction.Entry]:
        return eviction.scan(self.base, EXT_SUFFIX, (prelude_identity(), prelude_identity(fused=True)))

    def eviction_plan(self, *, tidy: bool = False) -> list[eviction.Entry]:
        """What a prune would remove now (nothing a live process holds), first to last."""
        return eviction.plan(self.scan(), self.max_size, eviction.live_holds(self.base), tidy=tidy)

    def prune(self, *, tidy: bool = True, target: int | None = None) -> str:
        """Remove leftovers, preludes of other toolchains (`tidy`), and least recently used entries
        until the cache is under its limit (or `target` bytes). What is loaded or being built stays."""
        if not os.path.isdir(self.base):
            return f"nothing to prune: {self.base} does not exist"
        try:
            guard = try_flock(self.lock_path("prune"))
        except CacheWriteError as err:
            return f"cannot prune {self.base}: {err}"
        if guard is None:
            return "another process is pruning this cache right now"
        try:
            entries = self.scan()
            total = sum(e.size for e in entries)
            victims = eviction.plan(entries, self.max_size, eviction.live_holds(self.base), target=target, tidy=tidy)
            removed = [
                e for e in victims if eviction.remove(e, os.path.join(self.base, "locks"), self.base, EXT_SUFFIX)
            ]
        finally:
            os.close(guard)
        freed = sum(e.size for e in removed)
        with self._lock:
            for e in removed:
                if e.kind == "module":
                    self.memory.pop(e.name, None)  # still loaded where bound; only not found by name again
        skipped = len(victims) - len(removed)
        line = (
            f"pruned {self.base}: removed {len(removed)} entr{'y' if len(removed) == 1 else 'ies'} "
            f"({eviction.size_text(freed)}); {eviction.size_text(total - freed)} left, "
            f"limit {eviction.size_text(self.max_size)}"
        )
        if skipped:
            line += f"; {skipped} in use by a live process or a build, kept"
        return line

    def evict_if_over(self) -> None:
        """After a build: if the cache is over its limit, bring it to 90 % of it, least recently used first."""
        if self.max_size is None:
            return
        entries = self.scan()
        total = sum(e.size for e in entries)
        if total <= self.max_size:
            return
        message = self.prune(tidy=False, target=int(self.max_size * eviction.LOW_WATER))
        self.notes.append(f"the cache was over its size limit ({eviction.size_text(total)}); {message}")

    def entries(self) -> list[tuple[str, int]]:
        if not os.path.isdir(self.lib):
            return []
        return sorted(
            (f, os.path.getsize(os.path.join(self.lib, f))) for f in os.listdir(self.lib) if f.endswith(EXT_SUFFIX)
        )

    def info(self, listed: int = 12) -> str:
        """What ``%ppy_cache info`` prints (``cache_info.describe``)."""
        from .cache_info import describe

        return describe(self, listed)

    def has(self, name: str) -> bool:
        return os.path.exists(self.so_path(name))

    def clear(self) -> str:
        """Remove built modules and the prelude from disk; loaded ones stay loaded, so bound regions keep working.

        ``locks/`` and ``live/`` stay: another kernel may hold one of their locks right now.
        """
        n = len(self.entries())
        for sub in ("lib", "build", "prelude"):
            shutil.rmtree(os.path.join(self.base, sub), ignore_errors=True)
        with self._lock:
            self.memory.clear()
        return f"removed {n} built module(s) and the precompiled prelude from {self.base}"


_caches: dict[str, Cache] = {}
_caches_lock = threading.Lock()


def shared_cache(root: str | None = None) -> Cache:
    """The one Cache object per directory in this process (its memory level is per kernel)."""
    root = os.path.abspath(root or default_cache_dir())
    with _caches_lock:
        if root not in _caches:
            _caches[root] = Cache(root)
        return _caches[root]


def _note_use(name: str, text: str, mod: types.ModuleType) -> None:
    """Tell a running ``ppy build --run`` (``shipped.recording``) the cache gave out this module."""
    if shipped.recording_now():  # its code key only then: a sha256 of the whole text
        shipped.note_use(name, shipped.code_key(code_without_comments(text)), getattr(mod, "__file__", ""))
