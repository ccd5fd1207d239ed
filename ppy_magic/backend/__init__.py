"""The backend: IR -> C++ -> a loaded extension. The only package that writes C++.

``codegen`` turns the front end's ``ir.Function``s into one translation unit
(text + line map + one ``RegionSpec`` per region); ``cache`` returns the module
from memory, from disk, or from a build, named by ``module_keys`` (a sha256
of everything that affects the binary); ``runtime_module`` loads the one
runtime a process shares; ``toolchain`` says what is installed;
``diagnostics`` maps compiler errors back to Python lines; ``safety``,
``disk`` and ``eviction`` keep the cache directory trustworthy, its files
consistent and its size bounded; ``runtime/`` is the
C++ ``RegionFunction`` type, built once per toolchain. The names below are the
interface the rest of the package (the pipeline, artifacts, the magics) uses.
"""

from __future__ import annotations

from . import shipped
from .cache import BuildResult, Cache, default_cache_dir, shared_cache
from .codegen import CellCode, RegionSpec, cpp_by_line, generate
from .diagnostics import located_errors
from .disk import import_extension, recorded_sha256
from .module_keys import module_name
from .runtime_module import WarmupReport, adopt_runtime, load_runtime, loaded_runtime, warmup
from .toolchain import (
    CELL_CFLAGS,
    CFLAGS,
    EXT_SUFFIX,
    ToolchainStatus,
    build_jobs,
    compiler_name,
    package_version,
    toolchain_ready,
)

__all__ = [
    "CELL_CFLAGS",
    "CFLAGS",
    "EXT_SUFFIX",
    "BuildResult",
    "Cache",
    "CellCode",
    "RegionSpec",
    "ToolchainStatus",
    "WarmupReport",
    "adopt_runtime",
    "build_jobs",
    "compiler_name",
    "cpp_by_line",
    "default_cache_dir",
    "generate",
    "import_extension",
    "load_runtime",
    "loaded_runtime",
    "located_errors",
    "module_name",
    "package_version",
    "recorded_sha256",
    "shared_cache",
    "shipped",
    "toolchain_ready",
    "warmup",
]
