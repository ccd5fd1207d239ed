"""The progress shown while ``%ppy_bench`` measures: an ipywidgets bar in a notebook, a line in a terminal.

ipywidgets is imported only here, and nothing in the package imports this
module but the ``%ppy_bench`` magic. The bar lives only while measuring: its
output is then replaced in place by the result (or by a line saying what
became of the run), so a saved notebook keeps neither a widget whose model is
gone nor an empty output where the bar was.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets


class Progress:
    """An IntProgress bar of rounds with a line saying what runs now; replaced when measuring ends."""

    def __init__(self, title: str, total: int):
        from IPython.display import display

        self.title = title
        self.bar = widgets.IntProgress(value=0, min=0, max=total, description="rounds")
        self.stage = widgets.Label(f"{title}: starting")
        self.box = widgets.HBox([self.bar, self.stage])
        self.handle = display(self.box, display_id=True)

    def update(self, done: int, total: int, stage: str) -> None:
        self.bar.max = total
        self.bar.value = done
        self.stage.value = f"{self.title}: {stage}"

    def finish(self, shown: Any) -> bool:
        """Put `shown` (the result, or a line of text) where the bar was; True: it is shown there."""
        if self.handle is not None:
            if isinstance(shown, str):
                self.handle.update({"text/plain": shown}, raw=True)
            else:
                self.handle.update(shown)
        self._close()
        return self.handle is not None

    def _close(self) -> None:
        # Every model the bar made, its layouts and styles too: each is a comm the kernel would keep open.
        for w in (self.box, self.bar, self.stage):
            for part in (w, getattr(w, "layout", None), getattr(w, "style", None)):
                if part is not None:
                    part.close()


class TextProgress:
    """Outside a notebook (terminal IPython): one line saying what is being timed and for how long."""

    def __init__(self, title: str, total: int, compiling: bool):
        slow = "; torch.compile compiles first, which can take tens of seconds" if compiling else ""
        print(f"{title}: timing {total} round{'s' if total != 1 else ''} per variant{slow} ...", flush=True)

    def update(self, done: int, total: int, stage: str) -> None:
        pass

    def finish(self, shown: Any) -> bool:
        """Nothing to replace: the caller shows the result itself."""
        return False


class NoProgress(TextProgress):
    def __init__(self) -> None:
        pass


def progress(shell: Any, title: str, total: int, *, compiling: bool, quiet: bool) -> Progress | TextProgress:
    """A widget bar in a notebook kernel, a line of text in a terminal, nothing with ``-q``."""
    if quiet:
        return NoProgress()
    if getattr(shell, "kernel", None) is not None:
        return Progress(title, total)
    return TextProgress(title, total, compiling)
