"""What a region knows of torch, apart from compiling Python (``language``).

``schemas`` and ``ops``: the op table, generated from PyTorch's bindings and ATen schemas.
``torch_source``: which of torch's Python-level functions and ``torch.nn`` classes a region compiles
from the installed torch's own source. ``adapters`` (registered in ``adapter_registry``, written in
``nn_*.py`` and ``torch_functional.py``) and ``nn_modules``: the few restatements still taken where
that source does not compile, each saying why, and the attribute kinds of ``torch.nn`` modules a cell
builds for ahead of the first call. ``coverage``: which public functions of ``torch.nn.functional``
and ``torch.functional`` a region reaches, and how.
"""
