"""Colours for the HTML this package shows (the ``%ppy_bench`` report, ``annotate``), from the notebook's theme.

JupyterLab keeps its colours in CSS variables (``--jp-...``) that change with
the theme, so HTML that uses them reads as well in the dark theme as in the
light one. Where those variables are not defined (nbconvert's classic
template, other front ends) the styles fall back to what reads on any
background: text in the inherited colour, and tints that are translucent, so
they darken a dark background and lighten... no: they tint whatever is behind
them without hiding the text on it.
"""

from __future__ import annotations

# (JupyterLab variable, fallback) pairs for the accent colours.
SUCCESS = ("--jp-success-color1", "#388e3c")
BRAND = ("--jp-brand-color1", "#1976d2")
WARN = ("--jp-warn-color1", "#f57c00")

# Secondary text: JupyterLab's second text colour; without it, the inherited colour (an undefined
# variable makes the declaration fall back to inheriting).
MUTED = "color:var(--jp-content-font-color2)"
# The empty part of a bar's track, and the rule under a heading. Each style that uses a variable comes after
# the same property without one: JupyterLab's sanitizer (an untrusted notebook) drops values with var().
TRACK = "background:rgba(127,127,127,0.2);background:var(--jp-layout-color2, rgba(127,127,127,0.2))"
RULE = "var(--jp-border-color2, rgba(127,127,127,0.35))"


def solid(colour: tuple[str, str]) -> str:
    """``background`` in an accent colour (bars)."""
    var, fallback = colour
    return f"background:{fallback};background:var({var}, {fallback})"


def tint(colour: tuple[str, str], percent: int) -> str:
    """A ``background`` of `percent` of an accent colour over whatever is behind: text keeps its contrast.

    ``color-mix`` with ``transparent`` gives the accent at that opacity; a
    browser without ``color-mix`` keeps the first declaration, the fallback
    colour at the same opacity.
    """
    var, fallback = colour
    r, g, b = (int(fallback[i : i + 2], 16) for i in (1, 3, 5))
    return (
        f"background:rgba({r},{g},{b},{percent / 100:.2f});"
        f"background:color-mix(in srgb, var({var}, {fallback}) {percent}%, transparent)"
    )
