"""``ppy.opt(level)``: mark a function for compilation.

In plain Python the decorator only marks the function. While a ``%%ppy`` cell
or a ``ppy FILE`` run executes, a binder is active and the decorator returns
the compiled region instead, so a region is bound as soon as its ``def`` ran.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable
from typing import Any, Protocol

MAX_LEVEL = 4  # 4: level 3 with exact fusion (backend/fusion.py); not the default
DEFAULT_LEVEL = 3  # of a bare @ppy.opt when nothing configures another (PpyMagics.default_level)


class Binder(Protocol):
    def bind(self, fn: Callable, level: int | None) -> Callable:
        """The region for `fn`, or `fn` itself; `level` None means the binder's default level."""
        ...


_active: contextvars.ContextVar[Binder | None] = contextvars.ContextVar("ppy_binder", default=None)


def opt(level: Any = None, *, strict: bool = False) -> Any:
    """Mark a function to be compiled into an ATen region by ``%%ppy`` or ``ppy FILE``.

    ``level`` is 0 (never compile) to 3; every level gives results bitwise
    equal to eager. 1 is the straight translation; 2 builds constants once and
    calls ``mm``/``addmm`` where eager's composites do; 3 also reuses dead
    temporaries in place while autograd is not recording. ``@ppy.opt`` and
    ``@ppy.opt()`` use the default level: 3, or ``%config
    PpyMagics.default_level`` in a notebook. ``strict=True`` asks for one region
    of the whole function: where a statement would run as Python (a break), the
    cell raises the reason instead (as ``%%ppy --strict`` does for every function).
    """
    if type(strict) is not bool:
        raise TypeError(f"ppy.opt(strict=...): strict must be True or False, got {strict!r}")
    if callable(level) and not isinstance(level, type):
        return opt()(level)  # bare @ppy.opt: `level` is the function
    if level is not None:
        _check_level(level)

    def mark(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"@ppy.opt decorates functions, not {type(fn).__name__}")
        # What a plain-Python run records; a binder decides the level it compiles at. Some callables
        # (builtins, slotted objects) take no attributes: they are still decorated, just unmarked.
        with contextlib.suppress(AttributeError, TypeError):
            fn.__ppy_opt__ = DEFAULT_LEVEL if level is None else level  # type: ignore[attr-defined]
        binder = _active.get()
        if binder is not None:
            return binder.bind(fn, level)
        return fn

    return mark


def _check_level(level: Any) -> None:
    # Raised where the decorator is written, so the user's traceback points at it.
    if type(level) is not int:
        raise TypeError(
            f"ppy.opt(level): level must be an int from 0 to {MAX_LEVEL}, "
            f"got {type(level).__name__} {level!r}; write @ppy.opt({DEFAULT_LEVEL})"
        )
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(
            f"ppy.opt(level): level must be from 0 (never compile) to {MAX_LEVEL}, got {level}; "
            f"write @ppy.opt({min(max(level, 0), MAX_LEVEL)})"
        )


def activate(binder: Binder) -> contextvars.Token:
    return _active.set(binder)


def deactivate(token: contextvars.Token) -> None:
    _active.reset(token)
