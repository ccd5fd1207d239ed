"""``%load_ext ppy_magic``: register the magic families on a shell, and take them off again.

One ``Magics`` class per family, each in its own module: ``cell.PpyMagics``
(``%%ppy`` and the options of all the magics, so ``%config PpyMagics``; the
other families are handed it and read what they need),
``bench.BenchMagics`` (``%ppy_bench``) and ``cache.CacheMagics``
(``%ppy_cache``, ``%ppy_export``). Loading also installs the import hook
(``imports``): ``import mymodel`` then compiles that file's ``@ppy.opt``
functions as a ``%%ppy`` cell would, with the options ``%config PpyMagics``
sets (``cache_dir``, ``cache_max_size``, ``default_level``, ``strict``,
``show_build_status``), read at each import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from IPython.core.magic import Magics

from .. import imports
from .bench import BenchMagics
from .cache import CacheMagics
from .cell import PpyMagics
from .status import BuildStatus

_loaded: dict[int, list[Magics]] = {}  # id(shell) -> its families, PpyMagics first
_finders: dict[int, imports.RegionFinder] = {}  # id(shell) -> its import hook


def import_settings(options: PpyMagics) -> Callable[[], imports.Settings]:
    """What an import in this shell compiles with: the magics' options now, and the cell's live build line."""

    def settings() -> imports.Settings:
        status = BuildStatus(options.show_build_status)
        return imports.Settings(
            cache=options.cache,
            default_level=options.default_level,
            strict=options.strict,
            on_build=status.start,
            show=status.show,  # the summary replaces the live line, as under a %%ppy cell
        )

    return settings


def load(ipython: Any) -> None:
    """Register the magics once per shell; ``parent=ipython`` applies the profile's ``c.PpyMagics``."""
    if id(ipython) in _loaded:
        return
    options = PpyMagics(shell=ipython, parent=ipython)  # Magics.__init__ lists it in shell.configurables
    families = [options, BenchMagics(shell=ipython), CacheMagics(ipython, options)]
    for magics in families:
        ipython.register_magics(magics)
    if options not in ipython.configurables:  # for %config; older IPython does not add it
        ipython.configurables.append(options)
    _loaded[id(ipython)] = families
    _finders[id(ipython)] = imports.install(import_settings(options))


def unload(ipython: Any) -> None:
    """Remove the magics; regions already bound keep working (they hold their own modules)."""
    families = _loaded.pop(id(ipython), None)
    if families is None:
        return
    finder = _finders.pop(id(ipython), None)
    if finder is not None:
        imports.uninstall(finder)  # modules it imported keep their regions
    manager = ipython.magics_manager
    for magics in families:
        for kind in ("cell", "line"):
            table = manager.magics[kind]
            for name, fn in list(table.items()):
                if getattr(fn, "__self__", None) is magics:
                    del table[name]
        if manager.registry.get(type(magics).__name__) is magics:
            del manager.registry[type(magics).__name__]
    ipython.configurables[:] = [c for c in ipython.configurables if not any(c is m for m in families)]
