"""Compiling around what a region cannot take: a function split at its breaks.

When a call's values still leave a function outside the language, and the reason is one
statement (a ``.tolist()`` into a dict, a ``print``, a ``try``, a call into another
library), that statement becomes a *break*: it runs as Python, and the runs of statements
around it become regions of their own (``language/splitting.py`` cuts the function into a
driver and its segments). The function object the user holds stays the same: the runtime
hands each call to the driver (``set_delegate``), and ``__ppy_region__`` is True once one
of its segments is a region.

Each segment is a function compiled at its calls like any other (``variants.Variants``):
the values that reach it from the Python around it give it its kinds. A segment that
cannot be compiled for the statement that stopped it adds that statement to the breaks,
and the function is split again; segments that did not change keep their regions. The
driver runs the user's statements with their lines, so a traceback names them.
"""

from __future__ import annotations

import ast
import copy
import functools
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import backend, region, variants
from .errors import CompileError
from .language import hoisting, segment_edges, splitting, statement_facts
from .language.function import ignored_extras


@dataclass
class Part:
    """One segment of a split function and the region that runs it."""

    segment: splitting.Segment
    region: Any
    hook: variants.Variants

    @property
    def lines(self) -> str:
        s = self.segment
        return f"line {s.first_line}" if s.first_line == s.last_line else f"lines {s.first_line}-{s.last_line}"

    def status(self) -> str:
        reg = self.region
        if getattr(reg, "__ppy_region__", False):
            return f"region ({reg.calls} calls, {reg.fallbacks} in Python)"
        why = reg.__dict__.get("__ppy_call_reason__")
        if why:
            return f"Python: {why}"
        if any(r.status == "building" for r in self.hook.records):
            return "building (runs as Python until it lands)"
        return "compiled at its first call"


class Splitter:
    """Splits one function at its breaks, at the call whose values could not compile it whole.

    It is the function's ``Variants.around``: called with the compile error of a call no variant takes.
    """

    def __init__(self, source: variants.Source, fn: Callable, cache: backend.Cache, runtime: Any):
        self.source = source
        self.fn = fn
        self.cache = cache
        self.runtime = runtime
        self.region: Any = None
        self.breaks: dict[int, tuple[ast.stmt, str]] = {}  # id(statement) -> (statement, why it is Python)
        self.parts: list[Part] = []
        self.left: list[tuple[int, int, str]] = []  # runs of statements left Python, and why
        self._made: dict[tuple, Part] = {}  # segments by what they are: kept across splits
        self.hoists: dict[int, list[ast.expr]] = {}  # id(statement) -> values read in Python just before it
        self.origins: dict[int, ast.stmt] = {}  # id(a statement rewritten to read them) -> the statement
        self.hoisted: dict[str, ast.expr] = {}  # the installed split's hoisted names -> the values as written
        self.signature: str | None = None  # why the arguments are bound in Python, if that split it
        self.lifts: dict[int, list[ast.stmt]] = {}  # id(a call no region takes) -> it, argument by argument
        self.lifted: dict[int, ast.stmt] = {}  # id(one of those statements) -> the statement written
        # Segments no call's values compiled, by (first line, last line, inputs): their statements run in
        # the driver, where a region's call that always fell back cost a miss each time; and why.
        self.python_runs: dict[tuple[int, int, tuple[str, ...]], str] = {}
        self._lock = threading.RLock()

    # -- Variants.around ----------------------------------------------------------------------------
    def __call__(self, reg: Any, failure: CompileError) -> bool:
        """Split the function at the statement `failure` names; True if the call can run the driver."""
        if getattr(reg, "__ppy_variants__", ()) or self.source.level <= 0:
            return False  # a function with regions for other values keeps them; this call runs Python
        with self._lock:
            self.region = reg
            return self.add_break(failure)

    def add_break(self, failure: CompileError) -> bool:
        """Where `failure` points, read the value in Python just before the statement (a hoist) where the
        statement only reads it, else make the statement a break. True if the function was split again."""
        points = self._points(failure)
        if not points:
            return self._split_at_signature(failure)
        hoists: list[tuple[ast.stmt, ast.expr]] = []
        breaks: list[ast.stmt] = []
        refused = bool(getattr(failure, "uses", ()))  # a value no region takes (a dict, an object): read in Python
        for compiled, original, line, col in points:
            expr = hoisting.hoistable(compiled, line, col) if refused else None
            if (
                expr is not None
                and not any(isinstance(n, ast.Name) and n.id.startswith("__ppy_") for n in ast.walk(expr))
                and not any(e is expr for e in self.hoists.get(id(original), ()))  # no progress: it breaks
            ):
                hoists.append((original, expr))
            elif id(original) not in self.breaks:
                lifted = self._lift(original, line, col) if not refused else None
                breaks.extend(lifted or [original])
        if not hoists and not breaks:
            return False
        saved = ({k: list(v) for k, v in self.hoists.items()}, dict(self.breaks))
        for original, expr in hoists:
            self.hoists.setdefault(id(original), []).append(expr)
        for st in breaks:
            self.breaks[id(st)] = (st, self._as_written(failure.message))
            self.hoists.pop(id(st), None)
        try:
            self._install()
        except splitting.NotSplittable:
            self.hoists, self.breaks = saved
            return False
        return True

    def _as_written(self, message: str) -> str:
        """`message` naming the values it is about as the source writes them, not the names a hoist read
        them into (`cache.update`, not `__ppy_value0_0`)."""
        return splitting.HOISTED_NAME.sub(
            lambda m: ast.unparse(self.hoisted[m[0]]) if m[0] in self.hoisted else m[0], message
        )

    def _lift(self, st: ast.stmt, line: int, col: int) -> list[ast.stmt] | None:
        """A call no region can make, with arguments that compute: the arguments become statements of their
        own (regions, if they can), and only the call breaks (returned, to be a break)."""
        if id(st) in self.lifts or id(st) in self.lifted:
            return None
        call = getattr(st, "value", None)
        inside = st.lineno <= line <= (st.end_lineno or st.lineno)  # else: in a function it calls
        if not isinstance(call, ast.Call) or inside and (call.lineno, call.col_offset) != (line, col):
            return None  # the error is about an argument, not the call
        written = hoisting.lift_call(st, len(self.lifts))
        if written is None:
            return None
        self.lifts[id(st)] = written
        for new in written:
            self.lifted[id(new)] = st
        return [written[0], written[-1]]  # the callee's read and the call stay Python

    def bind_in_python(self, reg: Any, why: CompileError) -> None:
        """A function whose parameters no region binds (keyword-only, positional-only): the driver binds
        them from the start, and its body is a segment compiled at its calls."""
        with self._lock:
            self.region = reg
            self.signature = why.reason
            self._install()

    def _split_at_signature(self, failure: CompileError) -> bool:
        """An error in the parameters' annotations or defaults (`device: torch.device = None`): the driver
        binds the arguments in Python and the body, as one segment, takes their values at its calls."""
        node, loc = self.source.node, failure.loc
        if loc is None or loc.filename != self.source.filename or self.signature is not None or self.parts:
            return False
        if not node.lineno <= loc.line < node.body[0].lineno:
            return False
        self.signature = failure.reason
        self._install()
        return True

    def add_breaks(self, statements: list[ast.stmt], why: str) -> bool:
        new = [s for s in {id(s): s for s in map(self._original, statements) if s is not None}.values()]
        new = [s for s in new if id(s) not in self.breaks]
        if not new:
            return False
        for s in new:
            self.breaks[id(s)] = (s, self._as_written(why))
            self.hoists.pop(id(s), None)
        self._install()
        return True

    def _original(self, st: ast.stmt) -> ast.stmt | None:
        """The statement of the split `st` is (one of the function's own, or one written from one of them),
        if it is one."""
        st = self.origins.get(id(st), st)
        if id(st) in self.lifted:
            return st
        return st if any(st is s for s in statement_facts.statements(self.source.node)) else None

    def _points(self, failure: CompileError) -> list[tuple[ast.stmt, ast.stmt, int, int]]:
        """(statement as compiled, the function's own statement, line, column) of each place `failure` is
        about: the statement being compiled when it was raised, or each read of a value a region refused."""
        out = []
        uses = getattr(failure, "uses", ())
        if uses:
            for use in uses:
                compiled = self._holding(use)
                original = self._original(compiled) if compiled is not None else None
                if original is not None:
                    out.append((compiled, original, use.lineno, use.col_offset))
            if out:
                return out
        compiled = getattr(failure, "statement", None)  # (or its reads were in a function it calls)
        loc = failure.loc
        if compiled is None and loc is not None and loc.filename == self.source.filename:
            compiled = statement_facts.statement_at(self.source.node, loc.line)
        original = self._original(compiled) if compiled is not None else None
        if original is None:
            return []
        line, col = (loc.line, loc.col) if loc is not None else (0, 0)
        return [(compiled, original, line, col)]

    def _holding(self, node: ast.AST) -> ast.stmt | None:
        """The innermost statement (of the function or of one of its segments) holding `node`."""
        found = None
        for fn in [p.segment.node for p in self.parts] + [self.source.node]:  # as compiled, then as written
            for st in statement_facts.statements(fn):
                nodes = _header(st) if isinstance(st, statement_facts.COMPOUND) else ast.walk(st)
                if any(n is node for n in nodes):
                    found = st
            if found is not None:
                return found
        return None

    def part_failed(self, part_region: Any, failure: CompileError) -> bool:
        """A segment's own compile failed: its statement joins the breaks, and the function is split again.
        The call runs the segment's Python body (False)."""
        with self._lock:
            part = next((p for p in self.parts if p.region is part_region), None)
            if part is not None and getattr(failure, "unbound", None) in part.segment.unbound:
                # The form of the segment for calls where the name has no value reads it: Python raises there.
                why = f"'{failure.unbound}' has no value on this path: Python raises UnboundLocalError there"
                return self._stays_python(part, why)
            if self.add_break(failure):
                return False
            if part is None:
                return False
            if getattr(failure, "statement", None) is part.segment.node.body[-1] and not part.segment.returns:
                # It cannot return what it assigns: the statements binding the names it cannot return break.
                names = self._unreturnable(part)
                seg_statements = statement_facts.statements(part.segment.node)
                binding = [st for st in seg_statements if statement_facts.binds(st, names)]
                why = f"{failure.message} ({', '.join(repr(n) for n in names)}, which Python code after it reads)"
                if names and self.add_breaks(binding, why):
                    return False
            return self._stays_python(part, failure.reason)

    def _stays_python(self, part: Part, why: str) -> bool:
        """A segment no variant compiled, and no break helps: its statements run in the driver from now on
        (a segment that has run as a region for other values keeps its region). The call runs its Python."""
        seg = part.segment
        key = (seg.first_line, seg.last_line, seg.ins)
        if part.region.calls == 0 and key not in self.python_runs:
            self.python_runs[key] = why
            self._install()
        else:
            self.left.append((seg.first_line, seg.last_line, why))
        return False

    def _unreturnable(self, part: Part) -> list[str]:
        """The segment's live-outs a region cannot return, for the values of its last call."""
        seg, cv = part.segment, part.hook.last_call
        if cv is None:
            return []
        out = []
        for name in seg.outs:
            node = copy.copy(seg.node)
            ret = ast.Return(value=segment_edges.returned_value(name, seg.unset))
            node.body = [*seg.node.body[:-1], ast.copy_location(ret, seg.node.body[-1])]
            ast.fix_missing_locations(node)
            try:
                part.hook.compile(cv, node)
            except CompileError as err:
                if getattr(err, "statement", None) is node.body[-1]:
                    out.append(name)
        return out

    # -- the split -----------------------------------------------------------------------------------
    def _install(self) -> None:
        node, fn = self.source.node, self.fn
        free = tuple(fn.__code__.co_freevars)
        layout = splitting.split(
            node, set(self.breaks), free, hoists=self.hoists, lifts=self.lifts, python_runs=self.python_runs
        )
        self.origins.update(layout.origins)
        self.hoisted = layout.hoisted  # this split's: the names restart at each split
        parts = []
        for seg in layout.segments:
            key = (seg.first_line, seg.last_line, seg.ins, seg.outs, seg.returns)
            part = self._made.get(key)
            if part is None:
                part = self._made[key] = self._part(seg)
            part.segment = seg
            parts.append(part)
        calls = {seg.name: p.region for seg, p in zip(layout.segments, parts, strict=True)}
        driver = _function(layout.driver, fn, calls, fn.__defaults__)
        driver.__kwdefaults__ = getattr(fn, "__kwdefaults__", None)
        driver.__ppy_split__ = self
        self.parts = parts
        self.left = list(layout.python)
        self.runtime.set_delegate(self.region, driver, tuple(p.region for p in parts))
        self.region.__dict__["__ppy_split__"] = self

    def _part(self, seg: splitting.Segment) -> Part:
        src, fn = self.source, self.fn
        python = _function(splitting.factory(seg.python_node(), list(fn.__code__.co_freevars)), fn, {})
        # 8: its inputs are positional-only, so every keyword is one of the **kwargs it was passed
        reg = region.make_pending(self.runtime, python, ignored_extras(seg.node) | (8 if seg.keywords else 0))
        reg.__qualname__ = f"{getattr(fn, '__qualname__', fn.__name__)} (line {seg.first_line}"
        reg.__qualname__ += ")" if seg.first_line == seg.last_line else f"-{seg.last_line})"
        self_name = src.node.args.args[0].arg if src.owner is not None and src.node.args.args else None
        owner = src.owner if seg.ins and seg.ins[0] == self_name else None
        part_source = variants.Source(seg.node, src.g, src.filename, src.lines, src.level, owner)
        hook = variants.Variants(part_source, python, self.cache, self.runtime)
        hook.around = self.part_failed
        self.runtime.set_miss(reg, hook)
        return Part(seg, reg, hook)

    # -- what explain says -----------------------------------------------------------------------------
    def describe(self) -> list[str]:
        lines = ["split around what a region cannot take: these lines run as Python (breaks),"]
        lines.append("the runs between them are regions of their own")
        if self.signature is not None:
            lines.append(f"  the arguments are bound in Python (the driver's signature): {self.signature}")
        for st, why in sorted(self.breaks.values(), key=lambda b: b[0].lineno):
            lines.append(f"  break at line {st.lineno}: {why}")
        for exprs in self.hoists.values():
            for e in exprs:
                lines.append(f"  read in Python just before line {e.lineno}'s region: {ast.unparse(e)}")
        for first, last, why in self.left:
            where = f"line {first}" if first == last else f"lines {first}-{last}"
            lines.append(f"  Python at {where}: {why}")
        for p in self.parts:
            lines.append(
                f"  segment at {p.lines} ({', '.join(p.segment.ins) or 'no inputs'} -> "
                f"{'its result' if p.segment.returns else _outs(p.segment) or 'nothing'})"
                + _no_value(p.segment.unbound)
                + f": {p.status()}"
            )
        return lines

    def break_starts(self) -> dict[int, str]:
        """The first line of each break (and of each run left Python) -> why it runs as Python."""
        out = {st.lineno: why for st, why in self.breaks.values()}
        out.update({first: why for first, _last, why in self.left if first not in out})
        return out

    def python_lines(self) -> dict[int, str]:
        """Line -> why, for every line the driver runs as Python (a break, or a run left Python)."""
        out: dict[int, str] = {}
        for st, why in self.breaks.values():
            last = st.end_lineno or st.lineno
            if isinstance(st, statement_facts.COMPOUND):
                last = st.lineno  # its header: its blocks are split in their turn
            for line in range(st.lineno, last + 1):
                out.setdefault(line, why)
        for first, last, why in self.left:
            for line in range(first, last + 1):
                out.setdefault(line, why)
        return out


def _header(st: ast.stmt) -> list[ast.AST]:
    """The nodes of a compound statement's header (its test, its iterable, its items), not of its blocks."""
    parts = [getattr(st, f, None) for f in ("test", "iter", "target")]
    parts += [i for i in getattr(st, "items", ())]
    return [n for p in parts if p is not None for n in ast.walk(p)]


def _function(module: ast.Module, fn: Callable, cells: dict[str, Any], defaults: Any = None) -> types.FunctionType:
    """The function of `module` (``splitting.factory``) with `fn`'s globals and cells, `cells` for the
    segments it calls, and `defaults`."""
    code = compile(module, fn.__code__.co_filename, "exec")
    outer = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in outer.co_consts if isinstance(c, types.CodeType) and c.co_name == splitting.INNER)
    inner = inner.replace(co_name=fn.__code__.co_name)
    if hasattr(inner, "co_qualname"):
        inner = inner.replace(co_qualname=fn.__code__.co_qualname)
    own = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
    closure = tuple(own[n] if n in own else types.CellType(cells[n]) for n in inner.co_freevars)
    out = types.FunctionType(inner, fn.__globals__, fn.__name__, defaults, closure)
    functools.update_wrapper(out, fn, updated=())
    del out.__wrapped__
    return out


__all__ = ["Part", "Splitter"]


def _outs(seg: splitting.Segment) -> str:
    """A segment's live-outs, each it may leave with no value marked: the driver unbinds it where it has none."""
    return ", ".join(f"{n} (if bound)" if n in seg.unset else n for n in seg.outs)


def _no_value(names: tuple[str, ...]) -> str:
    """What a form of a segment is for (``Segment.unbound``), or nothing."""
    if not names:
        return ""
    return f" where {' and '.join(map(repr, names))} {'has' if len(names) == 1 else 'have'} no value"
