"""The ipywidgets view of a ``BenchResult``, and the progress shown while measuring.

ipywidgets is imported only here, and nothing in the package imports this
module but the ``%ppy_bench`` magic, which hands ``view`` to the report it
shows. The view reuses ``report``'s HTML for the header, table and note, and
draws the bar chart with ipywidgets' own bars, so it needs no plotting
library; a toggle switches the bars between the best and the median round.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from . import report
from .measure import BenchResult


def view(result: BenchResult) -> widgets.VBox:
    """Header (function, shapes, device, threads), table, bar chart, note on the method."""
    return widgets.VBox(
        [
            widgets.HTML(report.header_html(result)),
            widgets.HTML(report.table_html(result)),
            bar_chart(result),
            widgets.HTML(report.note_html(result)),
        ]
    )


def bar_chart(result: BenchResult) -> widgets.VBox:
    timed = [v for v in result.variants if v.ran]
    statistic = widgets.ToggleButtons(
        options=[("best round", "best"), ("median", "median")],
        value="best",
        description="per call:",
        style={"button_width": "90px"},
    )
    rows, bars, values = [], [], []
    for v in timed:
        bar = widgets.FloatProgress(
            min=0.0,
            max=1.0,
            bar_style="success" if v.label == result.fastest else "info",
            layout=widgets.Layout(width="320px"),
        )
        value = widgets.Label()
        rows.append(widgets.HBox([widgets.Label(v.label, layout=widgets.Layout(width="130px")), bar, value]))
        bars.append(bar)
        values.append(value)

    def draw(_change: Any = None) -> None:
        seconds = [v.best_s if statistic.value == "best" else v.median_s for v in timed]
        longest = max(seconds, default=0.0) or 1.0
        for bar, label, s in zip(bars, values, seconds, strict=True):
            bar.value = s / longest
            label.value = report.seconds_text(s)

    draw()
    statistic.observe(draw, names="value")
    return widgets.VBox([statistic] + rows)


class Progress:
    """An IntProgress bar of rounds with a line saying what runs now; removed when measuring ends."""

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

    def close(self) -> None:
        # Replace the output too, so a saved notebook keeps no dead progress widget.
        if self.handle is not None:
            self.handle.update({"text/plain": ""}, raw=True)
        self.box.close()


class TextProgress:
    """Outside a notebook (terminal IPython): one line saying what is being timed and for how long."""

    def __init__(self, title: str, total: int, compiling: bool):
        slow = "; torch.compile compiles first, which can take tens of seconds" if compiling else ""
        print(f"{title}: timing {total} round{'s' if total != 1 else ''} per variant{slow} ...", flush=True)

    def update(self, done: int, total: int, stage: str) -> None:
        pass

    def close(self) -> None:
        pass


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
