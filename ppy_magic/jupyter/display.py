"""Everything the magics put in front of the user: text, rich output, the live line, tracebacks.

The magics decide *what* to show; this module is *how* it reaches a notebook
or a terminal. Tracebacks: IPython calls ``_render_traceback_()`` on an
exception that has it, so an error can be shown from the user's own frames
(none of this package's, unless ``PPY_DEBUG=1``) and still be caught as usual.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from typing import Any

from .. import backend, pipeline
from ..errors import CompileError, debug

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ppy_magic/


# -- text and rich output ------------------------------------------------------------------------


def text(message: str) -> None:
    """A line (or lines) of plain output: the cell's stdout."""
    print(message, file=sys.stdout)


def rich(obj: Any) -> None:
    """An object shown through its ``_repr_mimebundle_`` (a widget, HTML, text), like a cell's result."""
    from IPython.display import display

    display(obj)


class LiveLine:
    """One line of output that can be replaced in place, where the front end allows it.

    ``ticks`` says whether replacing it again and again is worth it: a kernel
    or a capture replaces the line; a terminal prints every update anew.
    """

    def __init__(self, message: str):
        from IPython import get_ipython
        from IPython.core.displaypub import DisplayPublisher
        from IPython.display import display

        self._handle = display({"text/plain": message}, raw=True, display_id=True)
        shell = get_ipython()
        self.shown = self._handle is not None
        self.ticks = self.shown and shell is not None and type(shell.display_pub) is not DisplayPublisher

    def replace(self, message: str) -> None:
        if self._handle is not None:
            self._handle.update({"text/plain": message}, raw=True)


# -- %%ppy -v --------------------------------------------------------------------------------------


def build_details(cache: backend.Cache, report: pipeline.CellReport) -> None:
    """-v: the generated C++ and the commands that built it."""
    if not report.cpp:
        text("ppy: -v: no C++ was generated (no function of this cell compiles)")
        return
    text("ppy: -v: generated C++:")
    text(report.cpp)
    if not report.module_name:
        text("ppy: -v: the build failed; the notes above have the compiler's first lines")
        return
    how = {
        "memory": "already loaded in this kernel",
        "disk": "loaded from the disk cache, not rebuilt",
        "artifact": "loaded from an artifact's modules, not rebuilt",
        "build": "built now",
    }.get(report.build_source or "", report.build_source or "")
    text(f"ppy: -v: module {report.module_name}: {how}; {cache.so_path(report.module_name)}")
    commands = _build_commands(cache.build_dir(report.module_name))
    if commands:
        text(f"ppy: -v: build commands (ninja in {cache.build_dir(report.module_name)}):")
        text(commands)
    else:
        text(f"ppy: -v: no build commands on record for it (flags: {' '.join(backend.CFLAGS)})")


def _build_commands(build_dir: str) -> str | None:
    """The compiler and linker command lines ninja ran (or would run) for a module."""
    ninja = backend.toolchain_ready().ninja
    if not ninja or not os.path.exists(os.path.join(build_dir, "build.ninja")):
        return None
    try:
        done = subprocess.run(
            [ninja, "-C", build_dir, "-t", "commands"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


# -- tracebacks ------------------------------------------------------------------------------------


def running_cell(shell: Any) -> Any:
    """The ExecutionResult of the cell running now (IPython's display hook holds it), or None."""
    return getattr(getattr(shell, "displayhook", None), "exec_result", None)


def syntax_error(shell: Any, err: SyntaxError, filename: str) -> bool:
    """Show a SyntaxError in the cell as IPython shows one in a plain cell: the line and a caret, no frames.

    Call it while handling `err`. The running cell then fails with `err`, so
    the front end stops a Run All there and the kernel replies with an error,
    but no second error output appears (a raised exception would bring the
    magic's frames, or an empty error line of its own). False where no cell is
    running (``run_cell_magic`` called directly): the caller raises `err`.
    """
    running = running_cell(shell)
    if running is None:
        return False
    shell.showsyntaxerror(filename)
    running.error_in_exec = err
    return True


def cell_traceback(shell: Any, exc: BaseException, filename: str) -> None:
    """Show `exc`, raised while the cell ran, from the cell's own frames down.

    Frames above the cell (the magic) are cut; so are frames inside this
    package below the user's last one (the decorator checking its level, the
    fallback warning): the error is about the user's line, not our code.
    PPY_DEBUG=1 keeps the latter. An error that renders itself is left alone.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None or hasattr(exc, "_render_traceback_"):
        return
    if not debug():
        tb = _without_package_tail(tb)
    _show_from(shell, exc, tb)


def eager_traceback(shell: Any, err: BaseException, note: str) -> None:
    """Show eager's own error `err` once, from the user's frames down, with `note` saying what it stopped."""
    if hasattr(err, "add_note"):  # Python >= 3.11
        err.add_note(note)
    _show_from(shell, err, err.__traceback__)


def strict_failure(err: CompileError) -> None:
    """Under --strict nothing "stays Python": say the cell did not run, and how to go on."""
    who = f"'{err.function}'" if err.function else "a function"
    lines = [
        f"CompileError: {who} cannot be compiled: {err.reason}",
        *err.render().splitlines()[1:],
        f"--strict: the cell did not run, so nothing it defines changed. Fix {who}, or run the cell "
        "without --strict to keep it as Python.",
    ]
    err._render_traceback_ = lambda: lines  # type: ignore[method-assign]


def _show_from(shell: Any, exc: BaseException, tb: types.TracebackType | None) -> None:
    """Make IPython show `exc` with the traceback `tb` (and its notes) instead of the one it has."""
    try:
        stb = shell.InteractiveTB.structured_traceback(type(exc), exc, tb, tb_offset=0)
        shown = "\n".join(stb)
        stb += [note for note in getattr(exc, "__notes__", ()) if note not in shown]  # older IPython omits notes
        exc._render_traceback_ = lambda: stb  # type: ignore[attr-defined]
    except Exception:  # an exception type that refuses attributes: keep IPython's rendering
        pass


def _without_package_tail(tb: types.TracebackType) -> types.TracebackType:
    """A copy of `tb` that stops before the first frame inside ppy_magic."""
    frames = []
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR + os.sep):
        frames.append(tb)
        tb = tb.tb_next
    if tb is None:
        return frames[0]
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out
