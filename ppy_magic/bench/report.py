"""A ``BenchResult`` as a pandas DataFrame, as text and as HTML, and the object ``%ppy_bench -o`` returns.

Rendering only: the numbers come from ``bench.measure``. pandas is imported
when a DataFrame is asked for, so loading the extension stays cheap. The
report is HTML and text, never a widget: a widget's output needs its model,
which a notebook reopened with a fresh kernel does not have (JupyterLab saves
no widget state by default), while HTML shows wherever the notebook is read.
"""

from __future__ import annotations

import functools
import html
import uuid
from typing import Any

from .. import theme
from .measure import COMPILE, EAGER, REGION, BenchResult, VariantTiming

COLUMNS = ("best_ms", "median_ms", "iqr_ms", "speedup_vs_eager", "first_call_s", "matches_eager")


class BenchReport:
    """What ``%ppy_bench`` shows and ``%ppy_bench -o`` returns.

    ``.df``: a DataFrame indexed by the variant labels with the columns in
    ``COLUMNS`` (times in ms per call, ``first_call_s`` in seconds) and the
    metadata in ``.df.attrs``; ``.metadata``: that dict; ``.result``: the
    measurement itself. Displays as HTML (table, bars with a best/median
    toggle, the method) and as plain text for terminals.
    """

    def __init__(self, result: BenchResult):
        self.result = result

    @functools.cached_property
    def df(self) -> Any:
        return to_frame(self.result)

    @property
    def metadata(self) -> dict[str, Any]:
        return metadata(self.result)

    @property
    def fallbacks(self) -> int | None:
        """Calls during the run on which the region ran its Python body instead (None: not a region)."""
        return self.result.region_fallbacks

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": to_html(self.result), "text/plain": to_text(self.result)}

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(to_text(self.result))

    def __repr__(self) -> str:
        return f"<BenchReport {self.result.function}: {summary(self.result)}>"


# -- data ------------------------------------------------------------------------------


def to_frame(result: BenchResult) -> Any:
    import pandas as pd

    rows = {}
    for v in result.variants:
        rows[v.label] = {
            "best_ms": _ms(v.best_s),
            "median_ms": _ms(v.median_s),
            "iqr_ms": _ms(v.iqr_s),
            "speedup_vs_eager": result.speedup_vs_eager(v.label),
            "first_call_s": v.first_call_s,
            "matches_eager": v.matches_eager,
        }
    df = pd.DataFrame.from_dict(rows, orient="index", columns=list(COLUMNS))
    for col in COLUMNS[:-1]:
        df[col] = df[col].astype("float64")  # None -> NaN for rows that did not run
    df["matches_eager"] = df["matches_eager"].astype("object")
    df.index.name = "variant"
    df.attrs.update(metadata(result))
    return df


def metadata(result: BenchResult) -> dict[str, Any]:
    o = result.options
    return {
        "function": result.function,
        "torch_version": result.torch_version,
        "device": result.device,
        "threads": result.threads,
        "arguments": [
            {
                "expression": a.expression,
                "type": a.type_name,
                "shape": a.shape,
                "dtype": a.dtype,
                "device": a.device,
                "requires_grad": a.requires_grad,
            }
            for a in result.arguments
        ],
        "number": o.number,
        "repeat": o.repeat,
        "warmup": o.warmup,
        "grad": o.grad,
        "region_calls": result.region_calls,
        "region_fallbacks": result.region_fallbacks,
        "last_fallback_reason": result.last_fallback_reason,
        "skipped": {v.label: v.skipped for v in result.variants if v.skipped},
        "checks": {v.label: v.check for v in result.variants if v.check},
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


# -- words -------------------------------------------------------------------------------


def header(result: BenchResult) -> str:
    args = ", ".join(f"{a.expression}: {a.summary}" for a in result.arguments)
    threads = f"{result.threads} thread{'s' if result.threads != 1 else ''}"
    what = "forward + backward" if result.options.grad else "forward"
    return f"{result.function}({args}) · {result.device} · {threads} · {what} · torch {result.torch_version}"


def summary(result: BenchResult) -> str:
    """The figures in a sentence or two: region vs eager, torch.compile vs region."""
    region, eager, comp = result[REGION], result[EAGER], result[COMPILE]
    parts = []
    if region.ran and eager.ran:
        ratio = eager.best_s / region.best_s
        how = f"{ratio:.2f}× faster than" if ratio >= 1 else f"{1 / ratio:.2f}× slower than"
        parts.append(
            f"The region takes {seconds_text(region.best_s)} per call, {how} eager ({seconds_text(eager.best_s)})."
        )
    elif eager.ran:
        parts.append(f"Eager takes {seconds_text(eager.best_s)} per call.")
    if comp.ran:
        base, base_name = (region, "the region") if region.ran else (eager, "eager")
        parts.append(
            f"torch.compile takes {seconds_text(comp.best_s)} per call, {comp.best_s / base.best_s:.1f}× "
            f"{base_name}'s time; its first call (compiling) took {comp.first_call_s:.1f} s."
        )
    if result.region_fallbacks:
        parts.append(
            f"The region ran its Python body on {result.region_fallbacks:,} of "
            f"{result.region_calls + result.region_fallbacks:,} calls "
            f"({result.last_fallback_reason}), so its row times that."
        )
    for v in result.variants:
        if v.matches_eager is False:
            parts.append(f"{v.label}: output {v.check}.")
    return " ".join(parts)


def method_note(result: BenchResult) -> str:
    o = result.options
    threads = f"{result.threads} PyTorch thread{'s' if result.threads != 1 else ''}"
    text = (
        f"Method: {o.repeat} round{'s' if o.repeat != 1 else ''} of {o.number:,} calls per variant, "
        f"interleaved round by round in this process after {o.warmup:,} warm-up calls, with {threads} and "
        "the garbage collector off while timing. Best is the fastest round's mean per call; median and IQR "
        "are over rounds; speedup is eager's best over the variant's. The region's output is compared with "
        "eager's bit for bit (torch.equal, dtype, shape), torch.compile's (default mode) with "
        "torch.testing.assert_close; torch.compile's first call compiles and is reported apart."
    )
    if o.grad:
        text += " Each call is forward + torch.autograd.grad of the summed output."
    if "cuda" in result.device:
        text += " torch.cuda.synchronize() runs before and after each round."
    return text


def seconds_text(seconds: float) -> str:
    """A time per call in µs below a millisecond, else in ms."""
    return f"{seconds * 1e6:.2f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def _cells(result: BenchResult, v: VariantTiming) -> list[str]:
    """The table's cells for a variant that ran: ms/call to four places like the seed's table."""
    speedup = result.speedup_vs_eager(v.label)
    first = f"{v.first_call_s:.1f} s" if v.first_call_s is not None else ""
    if v.label == EAGER:
        check = "reference"
    elif v.matches_eager:
        check = "yes, bitwise" if v.label == REGION else "yes, assert_close"
        if v.label == REGION and result.region_fallbacks:
            check += " (ran as Python)"
    else:
        check = f"NO: {v.check}"
    return [
        f"{v.best_s * 1e3:.4f}",
        f"{v.median_s * 1e3:.4f}",
        f"{v.iqr_s * 1e3:.4f}",
        f"{speedup:.2f}×" if speedup is not None else "",
        first,
        check,
    ]


HEADINGS = ("best ms/call", "median", "IQR", "vs eager", "first call", "matches eager")


def to_text(result: BenchResult) -> str:
    rows = [[v.label] + (_cells(result, v) if v.ran else [f"not run: {v.skipped}"]) for v in result.variants]
    table = [["variant"] + list(HEADINGS)] + rows
    full = [r for r in table if len(r) == len(table[0])]  # rows that did not run span the line
    widths = [max(len(r[i]) for r in full) for i in range(len(table[0]))]
    lines = [header(result)]
    for r in table:
        if len(r) == len(widths):
            cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:-1], widths[1:-1], strict=True)] + [r[-1]]
            lines.append("  ".join(cells).rstrip())
        else:
            lines.append(f"{r[0].ljust(widths[0])}  {r[1]}")
    text_summary = summary(result)
    if text_summary:
        lines.append(text_summary)
    lines.append(method_note(result))
    return "\n".join(lines)


# -- HTML ----------------------------------------------------------------------------------------------
# One self-contained block with inline styles, coloured from the notebook's theme (``theme``), so a saved
# notebook, nbconvert and GitHub show the table and bars as the notebook did. The best/median toggle is two
# radio buttons and a <style> scoped to this block: no widget, no kernel, no script. Where <style> is
# stripped (an untrusted notebook, GitHub) the toggle stays hidden and the best-round bars show.

_CELL = "padding:2px 10px;text-align:right;font-variant-numeric:tabular-nums"
_LEFT = "padding:2px 10px;text-align:left"
_ROW = "background:transparent"  # not JupyterLab's zebra stripes: only the best row stands out
_BEST = f"{theme.tint(theme.SUCCESS, 22)};font-weight:bold"
_BAR_PX = 320


def header_html(result: BenchResult) -> str:
    return f"<div style='font-weight:bold;margin:4px 0'>%ppy_bench {_e(header(result))}</div>"


def table_html(result: BenchResult) -> str:
    fastest = result.fastest
    head = "".join(f"<th style='{_CELL}'>{_e(h)}</th>" for h in HEADINGS)
    rows = []
    for v in result.variants:
        best = v.label == fastest
        label = f"<td style='{_LEFT}'>{_e(v.label)}</td>"
        if v.ran:
            cells = "".join(f"<td style='{_CELL}'>{_e(c)}</td>" for c in _cells(result, v))
        else:
            cells = f"<td colspan='{len(HEADINGS)}' style='{_LEFT};{theme.MUTED}'>not run: {_e(v.skipped or '')}</td>"
        attrs = " class='ppy-best'" if best else ""
        rows.append(f"<tr{attrs} style='{_BEST if best else _ROW}'>{label}{cells}</tr>")
    return (
        f"<table style='border-collapse:collapse;margin:0'><thead><tr style='{_ROW}'>"
        f"<th style='{_LEFT}'>variant</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def bars_html(result: BenchResult, uid: str) -> str:
    """Bars of the time per call, best round and median, the fastest variant's in the success colour.

    The bars start at one edge and share one scale per statistic; the
    radio buttons (hidden unless the block's <style> applies) choose which
    set shows.
    """
    timed = [v for v in result.variants if v.ran]
    if not timed:
        return ""
    sets = []
    for statistic, seconds in (("best", [v.best_s for v in timed]), ("median", [v.median_s for v in timed])):
        longest = max(seconds) or 1.0
        fastest = min(zip(seconds, timed, strict=True), key=lambda p: p[0])[1].label
        rows = []
        for v, s in zip(timed, seconds, strict=True):
            colour = theme.SUCCESS if v.label == fastest else theme.BRAND
            px = max(1, round(_BAR_PX * s / longest))
            value = seconds_text(s)
            rows.append(
                f"<tr style='{_ROW}'><td style='{_LEFT};padding-left:0'>{_e(v.label)}</td>"
                f"<td style='padding:2px 0;text-align:left'><div style='width:{_BAR_PX}px;height:14px;{theme.TRACK}'>"
                f"<div class='ppy-bench-bar' data-label='{_e(v.label)}' data-value='{_e(value)}' "
                f"style='width:{px}px;height:14px;{theme.solid(colour)}'></div></div></td>"
                f"<td style='{_LEFT};font-variant-numeric:tabular-nums'>{_e(value)}</td></tr>"
            )
        hidden = ";display:none" if statistic == "median" else ""
        sets.append(
            f"<table class='ppy-bars ppy-bars-{statistic}' style='border-collapse:collapse;margin:0{hidden}'>"
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    hide = "position:absolute;opacity:0;width:1px;height:1px;margin:0"
    picks = "".join(
        f"<input type='radio' class='ppy-pick-{s}' id='{uid}-{s}' name='{uid}' value='{s}'"
        f"{' checked' if s == 'best' else ''} style='{hide}'>"
        for s in ("best", "median")
    )
    button = f"padding:1px 10px;border:1px solid {theme.RULE};cursor:pointer;user-select:none"
    toggle = (
        f"<div class='ppy-toggle' style='display:none;align-items:center;gap:0;margin:8px 0 4px'>"
        f"<span style='margin-right:8px'>per call:</span>"
        f"<label for='{uid}-best' style='{button};border-radius:3px 0 0 3px'>best round</label>"
        f"<label for='{uid}-median' style='{button};border-left:none;border-radius:0 3px 3px 0'>median</label></div>"
    )
    chosen = f"{theme.tint(theme.BRAND, 25)};font-weight:bold"
    style = (
        f"<style>#{uid} .ppy-toggle{{display:flex!important}}"
        f"#{uid} .ppy-pick-median:checked~.ppy-bars-best{{display:none!important}}"
        f"#{uid} .ppy-pick-median:checked~.ppy-bars-median{{display:table!important}}"
        f"#{uid} .ppy-pick-best:checked~.ppy-toggle label[for$='-best'],"
        f"#{uid} .ppy-pick-median:checked~.ppy-toggle label[for$='-median']{{{chosen}}}"
        f"#{uid} input:focus-visible~.ppy-toggle{{outline:1px dotted}}"
        f"#{uid} .ppy-static-title{{display:none}}</style>"
    )
    # What a render without the <style> shows above the bars instead of the toggle.
    static_title = "<div class='ppy-static-title' style='margin:8px 0 4px'>time per call (best round)</div>"
    return f"{style}{picks}{toggle}{static_title}{''.join(sets)}"


def note_html(result: BenchResult) -> str:
    text = summary(result)
    parts = [f"<div style='margin:8px 0 4px;line-height:1.4'>{_e(text)}</div>"] if text else []
    parts.append(
        f"<div style='{theme.MUTED};font-size:90%;line-height:1.4;max-width:60em'>{_e(method_note(result))}</div>"
    )
    return "".join(parts)


def to_html(result: BenchResult, uid: str | None = None) -> str:
    """The report as one block of HTML; `uid` (default: a fresh one) ties the toggle to this block."""
    uid = uid or f"ppy-bench-{uuid.uuid4().hex[:12]}"
    body = f"{header_html(result)}{table_html(result)}{bars_html(result, uid)}{note_html(result)}"
    return f"<div class='ppy-bench' id='{uid}' style='position:relative;text-align:left'>{body}</div>"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
