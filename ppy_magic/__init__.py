"""ppy_magic: compile small PyTorch functions into ATen regions from a notebook.

``%load_ext ppy_magic``, then a ``%%ppy`` cell compiles every ``@ppy.opt``
function into one C++ extension that calls ATen operators through the
dispatcher: one Python round trip per call, autograd unchanged.
"""

from __future__ import annotations

from .annotate import annotate
from .artifact import PpyArtifactWarning
from .backend.cache import toolchain_ready
from .errors import BuildError, CompileError, PpyError
from .library import compile, explain
from .region import PpyFallbackWarning
from .torchlib.coverage import functional_coverage
from .torchlib.ops import supported_ops
from .variants import wait
from .version import __version__

__all__ = [
    "BuildError",
    "CompileError",
    "PpyArtifactWarning",
    "PpyError",
    "PpyFallbackWarning",
    "__version__",
    "annotate",
    "compile",
    "explain",
    "functional_coverage",
    "load_ipython_extension",
    "supported_ops",
    "toolchain_ready",
    "unload_ipython_extension",
    "wait",
]


def load_ipython_extension(ipython):  # noqa: ANN001 - IPython's hook
    from .jupyter.extension import load

    load(ipython)


def unload_ipython_extension(ipython):  # noqa: ANN001
    from .jupyter.extension import unload

    unload(ipython)
