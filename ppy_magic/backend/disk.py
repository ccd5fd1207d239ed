"""The cache's files on disk: locks, manifests, private directories.

A build takes its module's lock (``flock``: released by the kernel when the
process dies, so it never goes stale); a published module has a manifest
(name, size, sha256) checked before it is loaded, and is imported from its file
(``import_extension``); a session that cannot use
the configured directory gets a private one, removed when it ends.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
import types
from collections.abc import Callable

from . import eviction, safety
from .safety import CacheWriteError

SUBDIRS = ("lib", "build", "locks", "prelude", "live")


def verify_manifest(name: str, path: str) -> str | None:
    """Why the library at `path` is not the module `name` published (None if it is): checked before loading."""
    try:
        with open(path + ".json", encoding="utf-8") as fh:
            meta = json.load(fh)
        if not isinstance(meta, dict):
            raise ValueError("not an object")
    except FileNotFoundError:
        return "it has no manifest"
    except (OSError, ValueError) as exc:
        return f"its manifest is unreadable ({exc})"
    if meta.get("name") != name:
        return f"its manifest names another module ({meta.get('name')!r})"
    try:
        size = os.path.getsize(path)
        if meta.get("size") != size:
            return f"its size ({size} bytes) is not the {meta.get('size')} recorded when it was built"
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    except OSError as exc:
        return f"it cannot be read ({safety.cause_of(exc)})"
    if digest != meta.get("sha256"):
        return "its checksum does not match the one recorded when it was built"
    return None


_PRIVATE_PREFIX = "ppy-private-cache-"


def make_private_dir() -> str:
    """A new private cache directory (mode 0700), removed when this process exits.

    Private directories of sessions that were killed (no atexit) are removed
    first: one nobody holds a record in, older than a minute.
    """
    tmp = tempfile.gettempdir()
    for old in glob.glob(os.path.join(tmp, _PRIVATE_PREFIX + "*")):
        try:
            st = os.stat(old)
        except OSError:
            continue
        if st.st_uid == os.geteuid() and time.time() - st.st_mtime > 60 and not eviction.anyone_alive(old):
            shutil.rmtree(old, ignore_errors=True)
    private = tempfile.mkdtemp(prefix=_PRIVATE_PREFIX)
    try:
        for s in SUBDIRS:
            os.makedirs(os.path.join(private, s), mode=0o700)
    except OSError:
        shutil.rmtree(private, ignore_errors=True)
        raise
    atexit.register(shutil.rmtree, private, True)
    return private


@contextlib.contextmanager
def flock(path: str, on_wait: Callable[[], None] | None = None):
    """An exclusive lock on `path`; the kernel releases it if this process dies, so it never goes stale.

    A lock file may be removed by eviction (while it holds it): after the lock
    is granted, it is checked to still be the file at `path`, else taken again.
    """
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise CacheWriteError(exc, "creating the lock directory", directory) from None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise CacheWriteError(exc, "creating a lock file", directory) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait:
                    on_wait()
                fcntl.flock(fd, fcntl.LOCK_EX)
            if same_file(fd, path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def try_flock(path: str) -> int | None:
    """`path` locked exclusively without waiting: its fd (close it to unlock), or None if someone holds it."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise CacheWriteError(exc, "creating a lock file", directory) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def same_file(fd: int, path: str) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


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
