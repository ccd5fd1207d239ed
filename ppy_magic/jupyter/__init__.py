"""The notebook side: the magics, one family per module.

``extension`` registers them (``%load_ext ppy_magic``); ``cell`` is ``%%ppy``
and ``PpyMagics``, the options of all of them (``%config PpyMagics``);
``bench`` is ``%ppy_bench``; ``cache`` is ``%ppy_cache`` and ``%ppy_export``;
``status`` is the live build line; ``display`` is how all of it (output and
tracebacks) reaches the user.
"""
