"""The errors users see, with a location in their own source.

``CompileError`` says why one function stays Python: ``at L:C``, the source line,
a caret under the construct and what to do instead. It never mentions this
package's own files. ``BuildError`` is a failed C++ build, mapped back to Python
lines where it can be. Both are ``ShownError``s: IPython shows their message,
not a traceback. ``debug()`` is the one reading of the ``PPY_DEBUG`` switch.
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass


def debug() -> bool:
    """``PPY_DEBUG=1``: internal errors propagate raw and tracebacks keep this package's frames."""
    return os.environ.get("PPY_DEBUG", "") not in ("", "0")


@dataclass(frozen=True)
class Location:
    filename: str
    line: int  # 1-based, in the file the user sees (cell or script)
    col: int  # 0-based, as in the ast
    end_col: int | None = None
    shown_file: str | None = None  # where the line is not in the file the user compiled: that file, short

    def source_line(self) -> str:
        return linecache.getline(self.filename, self.line).rstrip("\n")


class PpyError(Exception):
    """Base class of every error this package raises on purpose."""


class ShownError(PpyError):
    """An error whose message is the whole story: IPython shows ``Name: message``, no traceback.

    It stays an ordinary exception: ``except`` catches it and a terminal prints its traceback.
    """

    def render(self) -> str:
        return str(self)

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self.render()}"]


class CompileError(ShownError):
    """A function (or the cell) is outside the compiled language; it stays Python."""

    def __init__(
        self,
        message: str,
        loc: Location | None = None,
        hint: str | None = None,
        function: str | None = None,
        source_line: str | None = None,
    ):
        self.message = message
        self.loc = loc
        self.hint = hint
        self.function = function
        self._source_line = source_line
        super().__init__(self.render())

    def with_function(self, name: str) -> CompileError:
        return CompileError(self.message, self.loc, self.hint, name, self._source_line)

    @property
    def reason(self) -> str:
        """One line: ``at L:C: message``."""
        file = f"{self.loc.shown_file}:" if self.loc and self.loc.shown_file else ""
        where = f"at {file}{self.loc.line}:{self.loc.col + 1}: " if self.loc else ""
        return f"{where}{self.message}"

    def render(self) -> str:
        head = f"'{self.function}' stays Python: " if self.function else ""
        lines = [head + self.reason]
        if self.loc is not None:
            src = self._source_line if self._source_line is not None else self.loc.source_line()
            if src:
                lines.append("    " + src)
                width = 1
                if self.loc.end_col is not None and self.loc.end_col > self.loc.col:
                    width = self.loc.end_col - self.loc.col
                lines.append("    " + " " * self.loc.col + "^" * width)
        if self.hint:
            lines.append(self.hint)
        return "\n".join(lines)


class BuildError(ShownError):
    """The C++ build of a cell failed; the cell's functions stay Python."""

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(message)


class CacheError(BuildError):
    """No cache directory could be written (nor a private one made): nothing was built; the functions stay Python."""
