"""Which function gets which region as its ``def`` runs: the one base of the cell's and the artifact's binders.

While a cell, a file or an artifact's program runs, ``@ppy.opt`` hands each
function to the active binder (``decorator.activate``). ``Binder.bind`` leaves
alone what another file defined, leaves Python what is never compiled (level 0),
finds the region by the function's key ``(co_name, co_firstlineno)``, checks that
the globals the region froze still hold, and returns the region, or the function
itself with ``__ppy_reason__`` saying why it stays Python. Where regions come from
(this cell's build: ``pipeline.CellBinder``; an artifact's extensions:
``artifact.load.ArtifactBinder``) and how a function left Python is told (the
cell's report, a warning) is each subclass's part.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import decorator, region
from .backend import RegionSpec
from .language.namespace import Key, function_key


def effective_level(written: int | None, default_level: int, override: int | None) -> int:
    """The level a function compiles at: `-O` wins, then the written level, then the default."""
    if override is not None:
        return override
    return default_level if written is None else written


def same_value(then: Any, now: Any) -> bool:
    """Whether a global still holds the value compiled in: the same object, or a number bit for bit.

    Numbers compare by type and bits: ``1`` is not ``True``, ``-0.0`` is not
    ``0.0`` (a product's sign would differ), and NaN matches NaN.
    """
    if then is now:
        return True
    if type(then) is not type(now) or type(then) not in (int, float, bool):
        return False
    return then.hex() == now.hex() if type(then) is float else then == now


@dataclass(frozen=True)
class Target:
    """A region ready to bind: its spec, the extension and runtime that hold it, and its level."""

    spec: RegionSpec | None  # None: compiled at its calls (``variants``), no variant built yet
    module: Any
    runtime: Any
    level: int
    extras: int = 0  # a function compiled at its calls: what its regions ignore of a call


@dataclass(frozen=True)
class StaysPython:
    """Why a function stays Python; ``tell`` says whether the binder tells the user (``Binder.tell``)."""

    reason: str
    hint: str | None = None
    tell: bool = True


@dataclass
class Binder:
    """Hands each decorated function of one file its region when its ``def`` runs.

    Subclasses say where a region comes from (``find``) and how a function
    left Python is told (``tell``); they may add checks (``stale``) and
    comparisons of frozen globals (``same_global``, ``changed_global``).
    """

    filename: str  # the file whose functions this binder binds; functions of other files are not ours
    bound: list[Any] = field(default_factory=list, kw_only=True)
    default_level: int = field(default=decorator.DEFAULT_LEVEL, kw_only=True)  # of a bare @ppy.opt
    level_override: int | None = field(default=None, kw_only=True)  # %%ppy -O LEVEL

    def bind(self, fn: Callable, level: int | None) -> Callable:
        code = getattr(fn, "__code__", None)
        if code is not None and code.co_filename != self.filename:
            return fn  # defined elsewhere (an imported module): not ours to compile
        effective = effective_level(level, self.default_level, self.level_override)
        if effective == 0:
            return self.stays_python(fn, StaysPython(self._never_compiled(level), tell=self.level_override == 0))
        key = function_key(fn)
        found = self.find(key, fn, effective)
        if isinstance(found, StaysPython):
            return self.stays_python(fn, found)
        stale = self.stale(found, fn)
        if stale is not None:
            return self.stays_python(fn, StaysPython(stale))
        return self.make(found, fn)

    def _never_compiled(self, written: int | None) -> str:
        if self.level_override == 0:
            return "-O 0 leaves every function of the cell Python"
        if written is None:
            return "a bare @ppy.opt has the default level, 0 (PpyMagics.default_level): never compiled"
        return "ppy.opt(0): never compiled"

    def find(self, key: Key, fn: Callable, level: int) -> Target | StaysPython:
        """The region of the function `key` compiled at `level`, or why there is none."""
        raise NotImplementedError

    def stale(self, target: Target, fn: Callable) -> str | None:
        """Why `target` would no longer compute what `fn` does, if it would not: a global it froze changed."""
        g = getattr(fn, "__globals__", {})
        if target.spec is None:
            return None
        for name, then in target.spec.frozen_globals.items():
            if name in g and not self.same_global(then, g[name]):  # absent: a builtin, or the source's own
                return self.changed_global(name, then, g[name])
        return None

    def same_global(self, then: Any, now: Any) -> bool:
        return same_value(then, now)

    def changed_global(self, name: str, then: Any, now: Any) -> str:
        return f"global '{name}' changed between compiling and running the cell, so the compiled value would be wrong"

    def make(self, target: Target, fn: Callable) -> Any:
        if target.spec is None:
            reg = region.make_pending(target.runtime, fn, target.extras)
        else:
            reg = region.make_region(target.runtime, target.module, target.spec, fn, target.level)
        self.bound.append(reg)
        return reg

    def stays_python(self, fn: Callable, why: StaysPython) -> Callable:
        """`fn` itself, carrying the reason (``explain`` shows it); told to the user if ``why.tell``."""
        with contextlib.suppress(AttributeError, TypeError):  # an object that takes no attributes
            fn.__ppy_reason__ = why.reason  # type: ignore[attr-defined]
        if why.tell:
            self.tell(fn, why.reason, why.hint)
        return fn

    def tell(self, fn: Callable, reason: str, hint: str | None) -> None:
        """Tell the user that `fn` stays Python, and why."""
