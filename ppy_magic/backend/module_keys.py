"""What names a built module: a sha256 of the toolchain, the prelude (plain or fused) it includes, and its code.

``module_name`` is the cache's key for every module (cells and the runtime); comments are left out
of it, so that a cell's file name in a generated comment does not make a new module.
"""

from __future__ import annotations

import hashlib
import os

from . import fusion, prelude
from .toolchain import RUNTIME_DIR, prelude_identity, read_text, toolchain_key


def module_name(prefix: str, text: str) -> str:
    """The module's name: a sha256 of the toolchain, the prelude it includes, and its code.

    Comments are left out of the key: they do not change the binary, and the
    generated ones name the cell's file, which a new kernel names differently.
    """
    key = toolchain_key()
    if prelude.INCLUDE_LINE in text:
        key += "\nprelude " + prelude_identity()
    if prelude.FUSED_INCLUDE_LINE in text:  # its flags and the formulas it restates; eager's capability
        key += f"\nfused prelude {prelude_identity(fused=True)} {fusion.capability()}"
    digest = hashlib.sha256((key + "\n--\n" + code_without_comments(text)).encode()).hexdigest()
    return f"{prefix}_{digest[:24]}"


def code_without_comments(text: str) -> str:
    """C++ `text` with its comments removed; string and character literals kept as they are."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            j = i
            while j < n and text[j] not in "\"'/":
                j += 1
            if j == i:  # a lone '/'
                j += 1
            out.append(text[i:j])
            i = j
    return "".join(out)


def runtime_source() -> str:
    return read_text(os.path.join(RUNTIME_DIR, "region_function.cpp"))


RUNTIME_HEADERS = ("module_plan.h",)


def runtime_name() -> str:
    # The headers the runtime includes from its own directory are part of what it is built from.
    headers = "".join(read_text(os.path.join(RUNTIME_DIR, h)) for h in RUNTIME_HEADERS)
    return module_name("ppy_runtime", runtime_source() + "\n" + headers)
