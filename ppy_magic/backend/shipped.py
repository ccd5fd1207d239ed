"""Modules an artifact ships that were built at calls (``ppy build --run``), found again by their code.

A module's cache name hashes the toolchain that built it, which a process with no compiler cannot
name. A region built at a call (a variant, ``ppy_magic.compile(model)``) is therefore found again
by its *code key*: the sha256 of its C++ without comments, which the front end writes the same in
any process that compiles the same code for the same call. ``ppy build --run`` records the
modules a run of the program used (``recording``) and the artifact ships them; its loader
registers them (``register``) and the cache imports one, checked by its sha256, where it would
otherwise have to build it.

A recording belongs to the context that opened it (a ``ContextVar``): a module another thread of the
process loads (a notebook's background variant, another program's build) is not the program's. Work
the program hands to a thread takes its recordings along (``active`` at the hand-over, ``into``
where the thread runs it), as the variant builds its calls queue do.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Shipped:
    module: str  # the module's own name (its PyInit_ symbol)
    path: str
    sha256: str


_lock = threading.Lock()
_by_code: dict[str, Shipped] = {}
Recorder = dict[str, tuple[str, str]]  # module name -> (code key, its file)
_recorders: contextvars.ContextVar[tuple[Recorder, ...]] = contextvars.ContextVar("ppy_recorders", default=())


def code_key(code_without_comments: str) -> str:
    return hashlib.sha256(code_without_comments.encode()).hexdigest()


def register(code: str, module: str, path: str, sha256: str) -> None:
    """An artifact's module built at a call: `code` is its code key."""
    with _lock:
        _by_code.setdefault(code, Shipped(module, path, sha256))


def any_registered() -> bool:
    """Whether an artifact registered any module (else no code needs a key to be looked up)."""
    return bool(_by_code)


def find(code: str) -> Shipped | None:
    with _lock:
        return _by_code.get(code)


def recording_now() -> bool:
    """Whether a recording runs in this context (else no module's use needs its code key)."""
    return bool(_recorders.get())


def note_use(name: str, code: str, path: str) -> None:
    """The cache gave out module `name` (its code key, its file): every recording of this context keeps it."""
    with _lock:
        for rec in _recorders.get():
            rec.setdefault(name, (code, path))


def active() -> tuple[Recorder, ...]:
    """The recordings of this context, for work handed to another thread (``into``)."""
    return _recorders.get()


@contextlib.contextmanager
def into(recorders: tuple[Recorder, ...]) -> Iterator[None]:
    """Run work handed over from the context whose recordings (``active``) are `recorders`."""
    token = _recorders.set(recorders)
    try:
        yield
    finally:
        _recorders.reset(token)


@contextlib.contextmanager
def recording() -> Iterator[Recorder]:
    """While it runs, every module the cache gives out in this context: name -> (code key, file)."""
    rec: Recorder = {}
    token = _recorders.set((*_recorders.get(), rec))
    try:
        yield rec
    finally:
        _recorders.reset(token)
