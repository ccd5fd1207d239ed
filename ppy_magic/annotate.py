"""``annotate(f)`` and ``%%ppy -a``: each line of a decorated function, compiled or left Python, and why.

Like ``%%cython -a``: the function's source, a line at a time. A line a
region compiled is marked so, and opens to the C++ it became (its ATen calls,
which the backend reads out of the region's generated C++ by its line
marks); a function left Python has its lines marked so, with the reason on
the line the reason points at. Each region also shows its calls and guard
fallbacks so far. Data first (``Annotation``), then text and HTML; the HTML
takes its colours from the notebook's theme (``theme``).
"""

from __future__ import annotations

import ast
import html
import inspect
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import theme
from .backend import cpp_by_line
from .region import FALLBACKS, counters

COMPILED, PYTHON, PLAIN = "compiled", "python", "plain"

_AT = re.compile(r"^at (\d+):(\d+): ")


@dataclass(frozen=True)
class Line:
    number: int  # as the user numbers the cell's (or file's) lines
    text: str
    kind: str  # COMPILED, PYTHON or PLAIN (decorators, the def line, blank lines, comments, a docstring)
    cpp: tuple[str, ...] = ()  # COMPILED: the C++ statements this line became (on a statement's first line)
    reason: str | None = None  # PYTHON: why the function (or this break) stays Python, on the line that says so
    specialised: bool = False  # its code depends on a value a variant compiled in (a flag, a callable, ...)
    fused: bool = False  # level 4: its element-wise ops run as one fused pass (checked per call)


@dataclass(frozen=True)
class FunctionAnnotation:
    name: str
    is_region: bool
    reason: str | None  # why it stays Python
    lines: tuple[Line, ...]  # empty when the source cannot be found
    calls: int = 0
    fallbacks: int = 0
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    split: bool = False  # split around breaks: its Python lines run between regions

    def heading(self) -> str:
        if self.split:
            return (
                f"{self.name}: ATen regions around Python lines (breaks) · {self.calls:,} segment calls as regions, "
                f"{self.fallbacks:,} in Python"
            )
        if not self.is_region:
            return f"{self.name}: stays Python"
        fell = f"{self.fallbacks:,} fallback{'s' if self.fallbacks != 1 else ''} to Python"
        return f"{self.name}: ATen region · {self.calls:,} call{'s' if self.calls != 1 else ''} as region, {fell}"


@dataclass(frozen=True)
class Annotation:
    """What ``annotate`` returns: shows as HTML in a notebook, as text in a terminal."""

    functions: tuple[FunctionAnnotation, ...]

    def __str__(self) -> str:
        return to_text(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(to_text(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": to_html(self), "text/plain": to_text(self)}


def annotate(*functions: Callable) -> Annotation:
    """Each line of each function: compiled into its region (with the C++ it became) or left Python, and why."""
    return Annotation(tuple(_function(f) for f in functions))


def _function(f: Callable) -> FunctionAnnotation:
    name = getattr(f, "__qualname__", None) or repr(f)
    split = getattr(f, "__dict__", {}).get("__ppy_split__")
    if split is not None and getattr(f, "__ppy_driver__", None) is not None:
        return _split_function(f, name, split)
    info = getattr(f, "__ppy_info__", None) if getattr(f, "__ppy_region__", False) else None
    built = getattr(f, "__ppy_variants__", ())
    if info is None and built:  # compiled at its calls: its first variant's
        info = getattr(built[0], "__ppy_info__", None)
    records = getattr(f, "__dict__", {}).get("__ppy_variant_records__", ())
    specialised = {n for r in records for n in r.lines}
    python_fn = getattr(f, "__wrapped__", f) if info is not None or built else f
    try:
        source, first = inspect.getsourcelines(python_fn)
    except (OSError, TypeError):
        source, first = [], 0
    if info is not None:
        marks = cpp_by_line(info.spec.cpp)
        return FunctionAnnotation(
            name,
            True,
            None,
            _lines(source, first, marks=marks, specialised=specialised, fused=set(info.spec.fused_lines)),
            calls=f.calls,
            fallbacks=f.fallbacks,
            fallback_reasons=FALLBACKS.for_region(f),
        )
    reason = getattr(f, "__ppy_reason__", None)
    if reason is None:
        reason = (
            "it is not decorated with @ppy.opt"
            if getattr(f, "__ppy_opt__", None) is None
            else "it was not defined in a %%ppy cell or a file run with `ppy`"
        )
    return FunctionAnnotation(name, False, reason, _lines(source, first, reason=reason))


def _lines(
    source: list[str],
    first: int,
    *,
    marks: dict[int, list[str]] | None = None,
    reason: str | None = None,
    specialised: set[int] = frozenset(),  # type: ignore[assignment]
    fused: set[int] = frozenset(),  # type: ignore[assignment]
) -> tuple[Line, ...]:
    if not source:
        return ()
    texts = [s.rstrip("\n") for s in source]
    numbers = range(first, first + len(texts))
    owner = _statement_owners(texts, first)
    at = _AT.match(reason or "")
    reason_line = int(at.group(1)) if at and int(at.group(1)) in numbers else None
    if reason is not None and reason_line is None:  # no location: the reason goes on the def line
        reason_line = next((n for n, t in zip(numbers, texts, strict=True) if t.lstrip().startswith("def ")), first)
    lines = []
    for n, text in zip(numbers, texts, strict=True):
        stmt = owner.get(n)
        if marks is not None:
            cpp = marks.get(stmt, []) if stmt is not None else []
            compiled = stmt is not None and stmt in marks
            kind = COMPILED if compiled else PLAIN
            cpp_lines = tuple(cpp) if n == stmt else ()
            lines.append(Line(n, text, kind, cpp_lines, specialised=n in specialised, fused=n in fused))
        else:
            kind = PYTHON if stmt is not None or n == reason_line else PLAIN
            lines.append(Line(n, text, kind, reason=reason if n == reason_line else None))
    return tuple(lines)


def _split_function(f: Callable, name: str, split: Any) -> FunctionAnnotation:
    """A function split around its breaks: the breaks' lines (and what runs in the driver) Python, with the
    reason on each break, and the lines of each segment built as a region compiled, with their C++."""
    try:
        source, first = inspect.getsourcelines(f.__wrapped__)
    except (OSError, TypeError):
        source, first = [], 0
    python = split.python_lines()
    marks: dict[int, list[str]] = {}
    compiled: set[int] = set()
    calls, fallbacks = counters(f)
    for part in split.parts:
        built = part.region.__ppy_variants__
        info = getattr(built[0], "__ppy_info__", None) if built else None
        if info is not None:
            marks.update(cpp_by_line(info.spec.cpp))
            compiled |= set(range(part.segment.first_line, part.segment.last_line + 1))
    texts = [s.rstrip("\n") for s in source]
    owner = _statement_owners(texts, first)
    starts = split.break_starts()
    lines = []
    for n, text in enumerate(texts, first):
        stmt = owner.get(n)
        if n in python:
            lines.append(Line(n, text, PYTHON, reason=starts.get(n)))
        elif stmt is not None and stmt in compiled and n in compiled:
            lines.append(Line(n, text, COMPILED, tuple(marks.get(stmt, [])) if n == stmt else ()))
        else:
            lines.append(Line(n, text, PYTHON if stmt is not None else PLAIN))
    return FunctionAnnotation(
        name,
        bool(f.__ppy_region__),
        None if f.__ppy_region__ else "split around its breaks; no segment is a region yet",
        tuple(lines),
        calls=calls,
        fallbacks=fallbacks,
        split=True,
    )


def _statement_owners(texts: list[str], first: int) -> dict[int, int]:
    """Each body line that belongs to a statement -> that statement's first line (a compound's header line)."""
    try:
        tree = ast.parse(textwrap.dedent("\n".join(texts)))
    except SyntaxError:
        return {}
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return {}
    owner: dict[int, int] = {}
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the docstring compiles to nothing

    def visit(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            children = [c for name in ("body", "orelse", "finalbody") for c in getattr(s, name, [])]
            children += [c for h in getattr(s, "handlers", []) for c in h.body]
            end = (min(c.lineno for c in children) - 1) if children else s.end_lineno
            for ln in range(s.lineno, (end or s.lineno) + 1):
                owner.setdefault(ln + first - 1, s.lineno + first - 1)
            visit(children)

    visit(body)
    return owner


# -- text ---------------------------------------------------------------------------------------------------


def to_text(a: Annotation) -> str:
    out = []
    for fn in a.functions:
        out.append(fn.heading())
        if not fn.is_region:
            out.append(f"  why: {fn.reason}")
        for reason, n in sorted(fn.fallback_reasons.items()):
            out.append(f"  {n:,} x {reason}")
        if not fn.lines:
            out.append("  (the source of this function is not available)")
        for ln in fn.lines:
            tag = {COMPILED: "C", PYTHON: "P", PLAIN: " "}[ln.kind]
            note = "    <- specialised: depends on a value a variant compiled in" if ln.specialised else ""
            if ln.fused:
                note += "    <- fused: its element-wise ops run as one pass (level 4)"
            out.append(f"{ln.number:5d} {tag} | {ln.text}{note}")
            out += [f"        |     {c}" for c in ln.cpp]
            if ln.reason and fn.split:
                out.append(f"        |     ^ runs as Python: {ln.reason}")
        out.append("")
    return "\n".join(out).rstrip("\n")


# -- HTML ---------------------------------------------------------------------------------------------------
# Inline styles coloured from the theme; <details> opens a compiled line to its C++ without a script, in a
# live notebook, a saved one and a static render alike.

_MONO = "font-family:var(--jp-code-font-family, monospace);font-size:var(--jp-code-font-size, 13px)"
_ROW = "display:block;white-space:pre;padding:0 6px;line-height:1.5"
_KIND_STYLE = {
    COMPILED: theme.tint(theme.SUCCESS, 16),
    PYTHON: theme.tint(theme.WARN, 18),
    PLAIN: "",
}
_GUTTER = "display:inline-block;width:4.5em;text-align:right;padding-right:1em;" + theme.MUTED


def to_html(a: Annotation) -> str:
    legend = (
        f"<div style='margin:2px 0 6px;{theme.MUTED}'>"
        f"<span style='{_KIND_STYLE[COMPILED]};padding:0 6px'>compiled into the region</span> "
        f"(+: click a line for the C++ it became) · "
        f"<span style='{_KIND_STYLE[PYTHON]};padding:0 6px'>left Python</span></div>"
    )
    parts = [f"<div class='ppy-annotate' style='text-align:left'>{legend}"]
    for fn in a.functions:
        parts.append(_function_html(fn))
    parts.append("</div>")
    return "".join(parts)


def _function_html(fn: FunctionAnnotation) -> str:
    head = f"<div style='font-weight:bold;margin:8px 0 2px'>{_e(fn.heading())}</div>"
    notes = []
    if not fn.is_region and not any(ln.reason for ln in fn.lines):  # else the reason sits under its line
        notes.append(f"why: {fn.reason}")
    notes += [f"{n:,} × {reason}" for reason, n in sorted(fn.fallback_reasons.items())]
    if not fn.lines:
        notes.append("the source of this function is not available")
    note_html = "".join(f"<div style='{theme.MUTED};margin:0 0 2px 1em'>{_e(n)}</div>" for n in notes)
    rows = "".join(_line_html(ln) for ln in fn.lines)
    block = f"<div style='{_MONO};border-left:3px solid {theme.RULE};margin:2px 0 4px'>{rows}</div>"
    return f"<div class='ppy-function'>{head}{note_html}{block}</div>"


def _line_html(ln: Line) -> str:
    kind = f"ppy-line ppy-{ln.kind}"
    style = f"{_ROW};{_KIND_STYLE[ln.kind]}"
    gutter = "+" if ln.cpp else " "
    number = f"<span style='{_GUTTER}'>{ln.number} {gutter}</span>"
    if ln.fused:
        kind += " ppy-fused"
        style += ";border-right:4px solid currentColor"
    if ln.specialised:
        kind += " ppy-specialised"
        style += ";border-left:3px dashed currentColor"
    source = f"<span class='ppy-source'>{_e(ln.text) or ' '}</span>"
    if ln.cpp:
        calls = _e("\n".join(ln.cpp))
        pre = (
            f"<pre class='ppy-calls' style='{_MONO};margin:0;padding:0 6px 4px calc(5.5em + 6px + 4ch);white-space:pre;"
            f"background:transparent;{theme.MUTED}'>{calls}</pre>"
        )
        return (
            f"<details class='{kind}' style='{_KIND_STYLE[ln.kind]}'>"
            f"<summary style='{_ROW};cursor:pointer'>{number}{source}</summary>{pre}</details>"
        )
    reason = ""
    if ln.reason:
        why = f"{' ' * 8}↑ stays Python: {_e(ln.reason)}"
        reason = f"<div class='ppy-reason' style='{_ROW};{theme.MUTED}'>{why}</div>"
    return f"<div class='{kind}' style='{style}'>{number}{source}</div>{reason}"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
