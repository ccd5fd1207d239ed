"""The live 'ppy: building 2 regions ... 3 s' line of a ``%%ppy`` cell, replaced by the cell's summary."""

from __future__ import annotations

import contextvars
import threading
import time

from .. import variants
from . import display


class BuildStatus:
    """A live 'ppy: building 2 regions ... 3 s' line while a cell builds, replaced by the final summary.

    The summary (``CellReport.summary``) says whether the module came from
    memory, the disk cache or a build, and how long it took. The line ticks
    once a second only where a display can be updated in place (a kernel, a
    capture); a terminal gets the first line and the summary.
    ``PpyMagics.show_build_status = False`` shows the summary only.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.line: display.LiveLine | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, n: int) -> None:
        """The build of `n` regions begins (``compile_source``'s ``on_build``)."""
        if not self.enabled or (self.line is not None and self.line.shown):
            return
        t0 = time.perf_counter()
        what = f"ppy: building {n} region{'s' if n != 1 else ''} ..."
        line = self.line = display.LiveLine(what)
        if not line.ticks:
            return

        def tick() -> None:
            while not self._stop.wait(1.0):
                line.replace(f"{what} {time.perf_counter() - t0:.0f} s")

        # The copied context carries the cell's output routing (ipykernel keeps it in a contextvar).
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(tick,), name="ppy-build-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def show(self, summary: str) -> None:
        """Replace the live line with `summary`, or print it if nothing was shown."""
        self.stop()
        if self.line is not None and self.line.shown:
            self.line.replace(summary)
        elif summary:
            display.text(summary)


def variant_status(record: variants.VariantRecord):  # noqa: ANN201 - the callback it returns
    """Where a call asked for a variant: a line in that call's cell output, updated in place when the build lands
    (the build runs in the background; the calls meanwhile run the Python body)."""
    what = "; ".join(record.specialised) or "its kinds"
    try:
        line = display.LiveLine(f"ppy: building variant {record.number} of {record.function} for {what} ...")
    except Exception:  # no display (a plain script): nothing to update
        return None

    def done(r: variants.VariantRecord) -> None:
        if r.status == "ready":
            line.replace(
                f"ppy: variant {r.number} of {r.function} ready ({r.seconds:.1f} s): calls like it run the region"
            )
        else:
            line.replace(f"ppy: variant {r.number} of {r.function} not built ({r.status}): calls run the Python body")

    return done
