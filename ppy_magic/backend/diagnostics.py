"""Compiler messages: errors in a cell's C++, named by the Python line they came from."""

from __future__ import annotations

import bisect
import re

_DIAGNOSTIC = re.compile(
    r"^(?P<file>\S*?main\.cpp):(?P<line>\d+):(?:\d+:)?\s*(?P<kind>fatal error|error):\s*"
    r"(?P<message>.*)$",
    re.M,
)


def located_errors(log: str, line_map: dict[int, tuple[str, int]], limit: int = 5) -> list[str]:
    """The compiler's errors in a cell's C++, each named by the Python function and line it came from.

    `line_map` is codegen's ``CellCode.line_map`` (C++ line -> (function, Python
    line)); an error maps to the nearest mark at or above it.
    """
    marks = sorted(line_map)
    out: list[str] = []
    for m in _DIAGNOSTIC.finditer(log):
        cline = int(m["line"])
        i = bisect.bisect_right(marks, cline) - 1
        if i >= 0:
            function, pyline = line_map[marks[i]]
            where = f"line {pyline} (in '{function}')"
        else:
            where = f"line {cline} of the generated C++"
        entry = f"{where}: C++ {m['kind']}: {m['message'].strip()}"
        if entry not in out:
            out.append(entry)
        if len(out) >= limit:
            break
    return out


def first_error(log: str) -> str:
    m = _DIAGNOSTIC.search(log)
    if m:
        return f": {m['kind']}: {m['message'].strip()}"
    return ""
