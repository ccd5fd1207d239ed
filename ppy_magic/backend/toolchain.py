"""The toolchain: compiler, ninja, Python headers, and the identity of everything that affects a binary."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass

import torch

from . import prelude

RUNTIME_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime")
CFLAGS = ("-O2", "-DAT_PER_OPERATOR_HEADERS", "-Wno-unused-variable", "-Wno-unused-function")
# A cell that includes the prelude is compiled with these, and its PCH with exactly the same.
CELL_CFLAGS = CFLAGS + prelude.PCH_CHECK_FLAGS
# A cell holding fused chains (fusion.py) is compiled with these on top of CELL_CFLAGS, and includes the
# fused prelude, precompiled with the same: eager's capability, so that at::vec is its AVX512 code; no
# FMA may form across ops (nor in the region's Python arithmetic, now that FMA is there); and
# at::parallel_for's OpenMP region (inline) compiled in, for its chunks to be eager's. Chains are planned
# only where eager runs AVX512 (``fusion.available``), which the CPU must then have.
FUSED_CFLAGS = (
    "-ffp-contract=off",
    "-fopenmp",
    "-DCPU_CAPABILITY=AVX512",
    "-DCPU_CAPABILITY_AVX512",
    "-mavx512f",
    "-mavx512bw",
    "-mavx512vl",
    "-mavx512dq",
    "-mfma",
)
FUSED_LDFLAGS = ("-fopenmp",)


def cell_cflags(fused: bool = False) -> tuple[str, ...]:
    """The flags of a cell that includes the prelude (`fused`: the fused prelude), and of that prelude's PCH."""
    return CELL_CFLAGS + FUSED_CFLAGS if fused else CELL_CFLAGS


EXT_SUFFIX = ".so"


def package_version() -> str:
    from ..version import __version__

    return __version__


def find_ninja() -> str | None:
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # the pip wheel; its binary may not be on a kernel's PATH

        candidate = os.path.join(ninja.BIN_DIR, "ninja")
        if os.access(candidate, os.X_OK):
            return candidate
    except ImportError:
        pass
    return None


def compiler_name() -> str:
    return os.environ.get("CXX", "c++")


@dataclass(frozen=True)
class ToolchainStatus:
    compiler: str | None
    ninja: str | None
    python_headers: str | None

    @property
    def missing(self) -> list[str]:
        out = []
        if not self.compiler:
            out.append(f"a C++ compiler ('{compiler_name()}' is not on PATH; install g++ or set CXX)")
        if not self.ninja:
            out.append("ninja (pip install ninja)")
        if not self.python_headers:
            out.append("the Python development headers (Python.h; e.g. apt-get install python3-dev)")
        return out

    def __bool__(self) -> bool:
        return not self.missing

    def __str__(self) -> str:
        if not self.missing:
            return f"toolchain ready: {self.compiler}, {self.ninja}, {self.python_headers}"
        return "missing: " + "; ".join(self.missing)


def toolchain_ready() -> ToolchainStatus:
    """Whether a C++ compiler, ninja and the Python headers are usable; ``str()`` names what is missing."""
    inc = sysconfig.get_paths().get("include")
    headers = inc if inc and os.path.exists(os.path.join(inc, "Python.h")) else None
    return ToolchainStatus(shutil.which(compiler_name()), find_ninja(), headers)


# A compiler building the runtime or the prelude peaks near 0.9 GB: two at once only where memory
# allows it (Binder gives a session 1-2 GB). PPY_BUILD_JOBS=1|2 overrides.
_PARALLEL_BUILD_BYTES = 3 * 2**30


def memory_available() -> int | None:
    """Bytes this process may still use: MemAvailable, capped by a cgroup memory limit."""
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    for limit_path, usage_path in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_path, encoding="ascii") as fh:
                limit = fh.read().strip()
            with open(usage_path, encoding="ascii") as fh:
                usage = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:
            found.append(int(limit) - usage)
    return min(found) if found else None


def build_jobs() -> int:
    """How many C++ builds (runtime, prelude) may run at once here: 2, or 1 where memory is short."""
    env = os.environ.get("PPY_BUILD_JOBS", "").strip()
    if env in ("1", "2"):
        return int(env)
    available = memory_available()
    return 1 if available is not None and available < _PARALLEL_BUILD_BYTES else 2


def ninja_on_path(ninja: str | None) -> None:
    """torch runs plain ``ninja``: make the pip wheel's binary findable (appended, so it shadows nothing)."""
    if ninja and not shutil.which("ninja"):
        os.environ["PATH"] = os.environ.get("PATH", "") + os.pathsep + os.path.dirname(ninja)


def _file_identity(path: str | None) -> str:
    if not path:
        return "none"
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


def toolchain_key() -> str:
    """Everything about this process and machine that affects a binary. No subprocess."""
    parts = [
        f"ppy_magic {package_version()}",
        f"torch {torch.__version__} cxx11abi={int(torch._C._GLIBCXX_USE_CXX11_ABI)} cuda={torch.version.cuda}",
        f"python {sys.version} {sys.implementation.cache_tag} {sysconfig.get_config_var('SOABI')}",
        f"compiler {compiler_name()} {_file_identity(shutil.which(compiler_name()))}",
        f"flags {' '.join(CFLAGS)}",
        f"abi-header {read_text(os.path.join(RUNTIME_DIR, 'ppy_abi.h'))}",
    ]
    return "\n".join(parts)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def prelude_identity(fused: bool = False) -> str:
    """The prelude cells of this toolchain include (`fused`: cells with fused chains): part of their cache
    key and its directory name."""
    return prelude.identity(toolchain_key(), cell_cflags(fused), (RUNTIME_DIR,), fused=fused)
