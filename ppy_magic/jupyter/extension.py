"""``%load_ext ppy_magic``: register the magic families on a shell, and take them off again.

One ``Magics`` class per family, each in its own module: ``cell.PpyMagics``
(``%%ppy`` and the options of all the magics, so ``%config PpyMagics``; the
other families are handed it and read what they need),
``bench.BenchMagics`` (``%ppy_bench``) and ``cache.CacheMagics``
(``%ppy_cache``, ``%ppy_export``).
"""

from __future__ import annotations

from typing import Any

from IPython.core.magic import Magics

from .bench import BenchMagics
from .cache import CacheMagics
from .cell import PpyMagics

_loaded: dict[int, list[Magics]] = {}  # id(shell) -> its families, PpyMagics first


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


def unload(ipython: Any) -> None:
    """Remove the magics; regions already bound keep working (they hold their own modules)."""
    families = _loaded.pop(id(ipython), None)
    if families is None:
        return
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
