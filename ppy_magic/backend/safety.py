"""Faults around the build cache, in plain words: unsafe directories, failed writes, starved compilers.

The cache holds shared libraries this process loads, so who can write to its
directory decides who can run code in the kernel. ``unsafe_directory`` checks
it the way OpenSSH's ``StrictModes`` checks ``~/.ssh``: symlinks resolved
first, then every directory from the cache up to ``/`` must belong to this
user or to root, and none may be writable by group or others, except an
ancestor with the sticky bit (``/tmp``), where others cannot rename or remove
what is ours. A group that is this user's private group (same name, no other
members, as on Debian) does not count as others. The advice fits the cause: ``chmod go-w`` only where this user
owns the directory.

``cause_of`` names a failed write (``OSError``) in plain words with what to do,
and ``starved_build`` finds in a compiler log that a build ran out of space, of
a file-size limit or of memory, so a cell's headline can say so.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

CACHE_ADVICE = "set PPY_CACHE_DIR (or %config PpyMagics.cache_dir) to a directory only you can write"


@dataclass(frozen=True)
class Unsafe:
    """Why a cache directory must not hold code this process loads, and what to do about it."""

    directory: str  # the directory at fault (the cache, one of its subdirectories, or an ancestor)
    reason: str
    advice: str

    def __str__(self) -> str:
        return self.reason


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _writable_by_others(st: os.stat_result) -> bool:
    """Writable by someone but its owner: by others, or by a group that is not this user's private group."""
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and not _private_group(st.st_gid)


def _private_group(gid: int) -> bool:
    """Whether `gid` is this user's own group (same name, no other members), as on user-private-group systems."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    return gid == user.pw_gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def unsafe_directory(path: str, *, inside: tuple[str, ...] = ()) -> Unsafe | None:
    """Why `path` (a cache directory) is unsafe to load code from, or None if only this user (or root) can write it.

    `inside` names subdirectories of `path` that are checked like `path` itself
    (those that exist). Symlinks are resolved first: the directories checked are
    those the files really live in.
    """
    given = os.path.abspath(path)
    real = os.path.realpath(given)
    via = f" (reached through a symlink: {given} -> {real})" if real != given else ""
    me = os.geteuid()
    own = [real]
    for sub in inside:
        target = os.path.realpath(os.path.join(real, sub))
        if not os.path.isdir(target):
            continue
        if os.path.dirname(target) != real:  # a subdirectory that is a symlink elsewhere: check its own chain
            elsewhere = unsafe_directory(target)
            if elsewhere:
                return elsewhere
        own.append(target)
    for d in own:
        try:
            st = os.stat(d)
        except OSError as exc:
            return Unsafe(d, f"cannot use {d}: {cause_of(exc)}", CACHE_ADVICE)
        if st.st_uid not in (me, 0):
            return Unsafe(d, f"{d} belongs to another {_owner(st.st_uid)}{via}", CACHE_ADVICE)
        if _writable_by_others(st):
            mode = f"mode {stat.S_IMODE(st.st_mode):o}"
            fix = f"run `chmod go-w {d}`, or {CACHE_ADVICE}" if st.st_uid == me else CACHE_ADVICE
            return Unsafe(d, f"{d} is writable by group or others ({mode}){via}", fix)
    parent = os.path.dirname(real)
    while True:
        try:
            st = os.stat(parent)
        except OSError as exc:
            return Unsafe(parent, f"cannot check {parent}: {cause_of(exc)}", CACHE_ADVICE)
        if st.st_uid not in (me, 0):
            return Unsafe(
                parent,
                f"{real} lies inside {parent}, which belongs to another {_owner(st.st_uid)}{via}",
                f"{CACHE_ADVICE}, outside {parent}",
            )
        if _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
            mode = f"mode {stat.S_IMODE(st.st_mode):o}, no sticky bit"
            outside = f"{CACHE_ADVICE}, outside {parent}"
            fix = f"run `chmod go-w {parent}` (or `chmod +t` if others must write there), or {outside}"
            return Unsafe(
                parent,
                f"{real} lies inside {parent}, which others can write ({mode}), so they could replace it{via}",
                fix if st.st_uid == me else outside,
            )
        if parent == os.path.dirname(parent):
            return None
        parent = os.path.dirname(parent)


# ---- failed writes -------------------------------------------------------------------------------

_PLAIN = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EFBIG: "file size limit exceeded",
    errno.EMFILE: "too many open files",
    errno.ENFILE: "too many open files",
    errno.ENOENT: "no such file or directory",
}
FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def cause_of(exc: OSError) -> str:
    """`exc` in plain words: "no space left on device", "read-only file system", ..."""
    return _PLAIN.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()


def advice_for(exc: OSError, directory: str) -> str:
    """What to do about a failed write in `directory`."""
    if exc.errno in FULL:
        return f"free space in {directory}, run `ppy cache prune`, or set PPY_CACHE_DIR to a disk with room"
    if exc.errno in NOT_WRITABLE:
        return "set PPY_CACHE_DIR (or %config PpyMagics.cache_dir) to a directory you can write"
    return "check that directory, or set PPY_CACHE_DIR to another one"


class CacheWriteError(OSError):
    """A write into the cache directory failed: the cache may fall back to a private one."""

    def __init__(self, exc: OSError, what: str, directory: str):
        super().__init__(exc.errno, exc.strerror)
        self.original = exc
        self.what = what  # "creating the lock file", "publishing the module", ...
        self.directory = directory

    @property
    def cause(self) -> str:
        return cause_of(self.original)

    @property
    def advice(self) -> str:
        return advice_for(self.original, self.directory)

    def __str__(self) -> str:
        return f"{self.what} in {self.directory} failed: {self.cause}"


# ---- starved builds -------------------------------------------------------------------------------

# What compilers, linkers, ninja and the shell print when a build runs out of a resource.
_STARVED = (
    ("no space left on device", "no space left on device", "space"),
    ("disk quota exceeded", "disk quota exceeded", "space"),
    ("file size limit exceeded", "a file-size limit (ulimit -f) was exceeded", "limit"),
    ("file too large", "a file-size limit (ulimit -f) was exceeded", "limit"),
    ("killed signal terminated program", "the compiler was killed, most likely out of memory", "memory"),
    ("virtual memory exhausted", "the compiler ran out of memory", "memory"),
    ("out of memory", "the compiler ran out of memory", "memory"),
    ("cannot allocate memory", "the compiler ran out of memory", "memory"),
)


def starved_build(log: str, directory: str) -> str | None:
    """If a failed build's log shows it ran out of space, a file-size limit or memory: that, and what to do."""
    low = log.lower()
    for needle, cause, kind in _STARVED:
        if needle in low:
            if kind == "space":
                return f"{cause} in {directory}: free space there, or set PPY_CACHE_DIR to a disk with room"
            if kind == "limit":
                return f"{cause} while building in {directory}: raise the limit (`ulimit -f unlimited`) and retry"
            return f"{cause}: close other programs, or set PPY_BUILD_JOBS=1, and retry with %%ppy -f"
    return None
