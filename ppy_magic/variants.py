"""Variants built at a call: where the source leaves a kind open, the call's values close it.

Every region of a cell (and every function the cell could not compile, but might with
the values of a call) has a miss hook: the runtime calls it when none of the function's
variants takes a call. ``Variants`` (the hook) asks the call's values what the source
did not say (``language/call_values.py``): an unannotated parameter's kind, a callable
or a flag compiled in as a constant, the attributes of ``self`` and of the modules and
configs passed in. It compiles the function for them, with run-time kinds first and,
where those leave the body outside the language, with the Python values as constants;
the C++ is the variant's identity (a call that compiles to an existing variant's text
adds nothing). The build runs on one background worker: that call and the ones until it
lands run the Python body (the same results), then the variant is added to the
function's list, which the runtime tries in order with its guards in C.

``PpyMagics.max_variants`` (``settings.max_variants``) bounds the list; ``blocking()``
(``ppy FILE``, ``%ppy_bench``) builds in the foreground instead, and
``wait()`` returns once every build started has landed or failed.
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from . import backend, region
from .errors import BuildError, CompileError
from .language import call_values, frontend, param_kinds
from .language.function import located_error
from .language.ir import Kind
from .language.namespace import Globals, collect_globals


@dataclass
class Settings:
    max_variants: int = 8  # per function (PpyMagics.max_variants)
    blocking: bool = False  # build in the foreground (ppy FILE, %ppy_bench)
    notify: Callable[[VariantRecord], Callable[[VariantRecord], None] | None] | None = None  # the notebook's status


settings = Settings()
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pending: set[concurrent.futures.Future] = set()
_lock = threading.Lock()


@dataclass
class VariantRecord:
    """One variant of a function: what it was specialised on, why and by which call it was built, and where it is."""

    number: int
    function: str
    specialised: list[str]  # per open parameter: its kind or its value
    why: str  # the guard failure of the call that asked for it
    call: int  # which call of the function asked for it (1 = the first)
    status: str = "building"  # "building", "ready", or why it is not
    seconds: float = 0.0
    module_name: str | None = None
    lines: tuple[int, ...] = ()  # lines whose code depends on a value compiled in
    values: dict[str, str] = field(default_factory=dict)  # what each open parameter held (the limit's message)

    def __str__(self) -> str:
        spec = "; ".join(self.specialised) or "the kinds the source states"
        done = f", built in {self.seconds:.1f} s" if self.status == "ready" else ""
        return f"variant {self.number} [{self.status}{done}]: {spec} (built for call {self.call}: {self.why})"


@contextlib.contextmanager
def blocking() -> Iterator[None]:
    """Builds at a call happen in the foreground and the call runs the new variant (a program, a benchmark)."""
    before, settings.blocking = settings.blocking, True
    try:
        yield
    finally:
        settings.blocking = before


def wait(timeout: float | None = None) -> bool:
    """Return once every variant build started so far has landed or failed; False if `timeout` ran out."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _lock:
            pending = list(_pending)
        if not pending:
            return True
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, _ = concurrent.futures.wait(pending, timeout=left)
        if deadline is not None and time.monotonic() >= deadline and len(done) < len(pending):
            return False


def all_records() -> list[VariantRecord]:
    with _lock:
        return list(_RECORDS)


_RECORDS: list[VariantRecord] = []  # every variant asked for in this process, for %ppy_cache info


@dataclass
class _Build:
    """One variant waiting for its build: who asked, its IR and C++, and where it goes."""

    hook: Variants
    reg: Any
    record: VariantRecord
    function: Any  # ir.Function
    code: Any  # its own backend.CellCode
    guards: tuple
    done: Callable[[VariantRecord], None] | None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    recorders: tuple = field(default_factory=backend.shipped.active)  # a ppy build --run that queued it


_queue: list[_Build] = []


def _submit(build: _Build) -> None:
    """Queue `build`; the worker builds what queued while it was busy as one module (a split function's
    segments, a notebook's first calls), and what the cache already holds on its own."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ppy-variant")
        _queue.append(build)
        _pending.add(build.future)
        _pool.submit(_drain)
    build.future.add_done_callback(_discard)


def _discard(future: concurrent.futures.Future) -> None:
    with _lock:
        _pending.discard(future)


def _drain() -> None:
    with _lock:
        batch = list(_queue)
        _queue.clear()
    if not batch:
        return
    try:
        by_cache: dict[int, list[_Build]] = {}
        for b in batch:
            by_cache.setdefault(id(b.hook.cache), []).append(b)
        for builds in by_cache.values():
            cache = builds[0].hook.cache
            alone = [b for b in builds if _cached(cache, b.code.text)]
            together = [b for b in builds if b not in alone]
            for b in alone:
                with backend.shipped.into(b.recorders):
                    b.hook._build(b, None)
            if len(together) == 1:
                with backend.shipped.into(together[0].recorders):
                    together[0].hook._build(together[0], None)
            elif together:
                with backend.shipped.into(_union(b.recorders for b in together)):
                    _build_together(cache, together)
    finally:
        for b in batch:
            if not b.future.done():
                b.future.set_result(None)


def _union(groups: Iterable[tuple]) -> tuple:
    """Every recording that queued one of a batch built as one module, each once."""
    seen: dict[int, Any] = {}
    for group in groups:
        for rec in group:
            seen.setdefault(id(rec), rec)
    return tuple(seen.values())


def _cached(cache: backend.Cache, text: str) -> bool:
    name = backend.module_name("ppy_cell", text)
    return cache.loaded(name) is not None or cache.has(name)


def _build_together(cache: backend.Cache, builds: list[_Build]) -> None:
    code = backend.generate([b.function for b in builds])
    try:
        cell = cache.load(backend.module_name("ppy_cell", code.text), code.text)
    except (BuildError, OSError):
        for b in builds:  # each on its own: one variant's failure does not fail the others
            b.hook._build(b, None)
        return
    for b, spec in zip(builds, code.regions, strict=True):
        b.hook._build(b, (cell, spec))


# Reasons a new variant cannot change: the call is not one a region takes, whatever its kinds.
_NOT_KINDS = (
    "subclass of torch.Tensor",
    "not strided",
    "device type",
    "TorchFunctionMode",
    "TorchDispatchMode",
    "hook",
    "was replaced",
    "compiled with module.compile",
    "own forward set on the instance",
    "arity",
    "keyword arguments",
    "is not defined yet",
    "does not fit in 64 bits",
)
# A submodule the region calls inline has a hook (the runtime's reason ends so). A hook registered for a few
# calls (a debugging print) only sends those calls to Python; once HOOKED_CALLS calls of the function were
# refused for one, a hook met again is taken to stay (a library's output capture): the function is compiled
# again, and the compiler, seeing the hook on the call's module, makes the statement calling it run as
# Python (``breaks``).
_HOOKED = "which nn.Module.__call__ runs (the region runs its forward inline)"
HOOKED_CALLS = 4


_SEEN_LIMIT = 1024  # calls remembered per function as needing no new variant


@dataclass
class Source:
    """How to compile a function again: its definition, the cell's globals, lines and level, its class."""

    node: ast.FunctionDef
    g: Globals
    filename: str
    lines: list[str]
    level: int
    owner: ast.ClassDef | None = None
    cell_error: CompileError | None = None  # why the cell did not compile it, if it did not
    bind_in_python: bool = False  # its signature is the only thing no region takes: a driver binds it


class Variants:
    """The miss hook of one function: builds the variant a call needs (``runtime.set_miss``)."""

    def __init__(self, source: Source, fn: Callable, cache: backend.Cache, runtime: Any):
        self.source = source
        self.fn = fn
        self.cache = cache
        self.runtime = runtime
        self.records: list[VariantRecord] = []
        # Each variant asked for: its C++ and the values its parameters were specialised for, which its guard
        # compares at the call (two values whose code is the same, `if mode == "c":` for "a" and "f", are two).
        self.texts: set[tuple[str, tuple]] = set()
        self.seen: dict[tuple, str | None] = {}  # (reason, call's signature) -> why nothing was built
        # Called with the error of a call's values that cannot compile the function: True when it split the
        # function around the statement the error names (``breaks.Splitter``), so the call runs its driver.
        self.around: Callable[[Any, CompileError], bool] | None = None
        self.last_call: call_values.CallValues | None = None  # what the last call compiled for said
        self.repeats = 0  # calls in a row like one already refused (``_GIVE_UP``)
        self.hooked = 0  # calls refused for a hook on a submodule, in all (``HOOKED_CALLS``)

    # -- the hook --------------------------------------------------------------------------------
    def __call__(self, reg: Any, bound: tuple, reason: str) -> bool:
        if reason.endswith(_HOOKED):
            self.hooked += 1
            if self.hooked < HOOKED_CALLS:
                return False
        elif any(s in reason for s in _NOT_KINDS):
            return False
        try:
            key = (reason, _signature(bound))
        except TypeError:  # an unhashable value: no memo
            key = None
        if key is not None and key in self.seen:
            self.repeats += 1
            if self.repeats >= _GIVE_UP and not self.records:  # the same calls, the same refusal: stop asking
                self.runtime.set_miss(reg, None)
            return False
        self.repeats = 0
        why = self._ask(reg, bound, reason)
        if key is not None and why is not False:
            if len(self.seen) >= _SEEN_LIMIT:  # calls of ever new values past the limit: forget, not grow
                self.seen.clear()
            self.seen[key] = why
        return why is True

    def _ask(self, reg: Any, bound: tuple, reason: str) -> bool | str:
        """True: a variant is ready for this call; False: one is building; a str: why none will be."""
        failure = None
        function = None
        for constant_scalars in (False, True):
            try:
                cv = self.last_call = self.call_values(bound, constant_scalars)
                function = self.compile(cv)
                break
            except CompileError as err:
                failure = err
            except _StaysPython as why:
                failure = CompileError(str(why))
        if function is None:
            assert failure is not None
            if self.around is not None and self.around(reg, failure):
                return True
            why = reg.__dict__["__ppy_call_reason__"] = f"not compiled for a call's values: {failure.reason}"
            first = self.source.cell_error
            if first is not None and not self.records and (failure.reason, failure.loc) == (first.reason, first.loc):
                self.runtime.set_miss(reg, None)  # the values changed nothing: no call will; calls stay Python cheaply
            return why
        code = backend.generate([function])
        identity = (code.text, tuple(_constant_identity(c) for c in function.constants))
        if identity in self.texts:
            return "the variant for these values exists"  # its guards refused the call for another reason
        if len(self.records) >= settings.max_variants:
            why = reg.__dict__["__ppy_call_reason__"] = self._limit_message(cv)
            return why
        calls = getattr(reg, "calls", 0) + getattr(reg, "fallbacks", 0) + 1
        record = VariantRecord(
            len(self.records) + 1,
            getattr(reg, "__qualname__", "?"),
            cv.describe(),
            reason,
            calls,
            lines=_lines_of(self.source, function.specialised_reads),
            values=_values_of(cv),
        )
        with _lock:
            _RECORDS.append(record)
        self.records.append(record)
        self.texts.add(identity)
        reg.__dict__["__ppy_variant_records__"] = self.records
        guards = _global_guards(self.source.g, function.frozen_globals, getattr(self.fn, "__globals__", None))
        if settings.blocking:
            self._build(_Build(self, reg, record, function, code, guards, None), None)
            return record.status == "ready"
        done = settings.notify(record) if settings.notify is not None else None
        _submit(_Build(self, reg, record, function, code, guards, done))
        return False

    def _build(self, build: _Build, built: tuple[Any, Any] | None) -> None:
        """Build `build`'s variant on its own (`built` None) or bind it from a module built with others
        (`built`: the module and its spec there), and add it to the function's variants."""
        reg, record, code, guards, done = build.reg, build.record, build.code, build.guards, build.done
        t0 = time.perf_counter()
        name = backend.module_name("ppy_cell", code.text)
        try:
            cell, spec = built if built is not None else (self.cache.load(name, code.text), code.regions[0])
            variant = region.make_region(self.runtime, cell.module, spec, self.fn, self.source.level, guards)
            variant.__dict__["__ppy_variant__"] = record
            self.runtime.add_variant(reg, variant)
            record.module_name = cell.name
            record.status = "ready"
        except (BuildError, OSError) as err:
            record.status = f"failed: {_first_line(str(err))}"
            reg.__dict__["__ppy_call_reason__"] = f"a variant's build failed (the function runs as Python): {err}"
        except BaseException as err:  # an interrupted build leaves the function working in Python
            record.status = f"failed: {type(err).__name__}: {_first_line(str(err))}"
            reg.__dict__["__ppy_call_reason__"] = f"a variant's build was interrupted: {record.status}"
            if not isinstance(err, Exception):
                raise
        finally:
            record.seconds = time.perf_counter() - t0
            if done is not None:
                with contextlib.suppress(Exception):
                    done(record)
            if not build.future.done():
                build.future.set_result(None)

    # -- what a call says ----------------------------------------------------------------------------
    def call_values(self, bound: tuple, constant_scalars: bool) -> call_values.CallValues:
        node, src = self.source.node, self.source
        args = node.args.args
        defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
        kinds: dict[str, Kind] = {}
        constants: dict[str, Any] = {}
        samples: dict[str, Any] = {}
        # A **kwargs the body reads: the runtime passes the call's extra keywords last, as a dict.
        extra = bound[len(args)] if len(bound) == len(args) + 1 and isinstance(bound[-1], dict) else {}
        params = list(zip(args, defaults, strict=True)) + [(ast.arg(arg=k), None) for k in extra]
        values = list(bound[: len(args)]) + list(extra.values())
        for i, ((arg, default), value) in enumerate(zip(params, values, strict=True)):
            if src.owner is not None and i == 0:
                samples[arg.arg] = value
                continue
            stated = _stated_kind(arg, default, src.g)
            if stated is not None and _fits(stated, value) and not (constant_scalars and _is_scalar(value)):
                continue  # the source says it, and the call agrees
            how, what = call_values.argument(value, constant_scalars)
            if how == "kind":
                kinds[arg.arg] = what
            elif how == "constant":
                constants[arg.arg] = what
            elif how == "object":
                samples[arg.arg] = what
            else:
                raise self._refused(arg.arg, f"the argument '{arg.arg}' cannot be taken by a region: {what}")
        return call_values.CallValues(kinds, constants, samples, constant_scalars, tuple(extra))

    def _refused(self, name: str, message: str) -> Exception:
        """Why a call's value stays out: at the first line that reads it, where there is one (the function may
        be split around it, ``breaks``)."""
        src = self.source
        uses = [
            n
            for st in src.node.body
            for n in ast.walk(st)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        ]
        if not uses:
            return _StaysPython(message)
        first = min(uses, key=lambda n: (n.lineno, n.col_offset))
        err = located_error(
            first,
            message,
            "Keep it out of the function, or let the lines that read it run as Python.",
            filename=src.filename,
            lines=src.lines,
            function=src.node.name,
        )
        err.uses = tuple(uses)  # every read of it: each is read in Python (``breaks``)
        return err

    def compile(self, cv: call_values.CallValues, node: ast.FunctionDef | None = None) -> Any:
        """The IR of the function (or of `node`, a function of the same parameters) for the call `cv`."""
        src = self.source
        g = call_globals(src.g, getattr(self.fn, "__globals__", {}))
        return frontend.compile_function(node or src.node, g, src.filename, src.lines, src.level, src.owner, call=cv)

    def _limit_message(self, cv: call_values.CallValues) -> str:
        now = _values_of(cv)
        changed = sorted(
            name
            for name in {n for r in self.records for n in r.values} | set(now)
            if len({r.values.get(name) for r in self.records} | {now.get(name)}) > 1
        )
        what = ", ".join(f"'{n}'" for n in changed) or "the attributes it reads"
        return (
            f"it already has {len(self.records)} variants (PpyMagics.max_variants): a call with new kinds or values "
            f"runs as Python. What changed between them: {what}. Annotate it (e.g. `n: int`, `scale: float`) so "
            "that one variant serves every value, or raise %config PpyMagics.max_variants."
        )


# A function no variant was ever built for, called this many times in a row like calls already refused, is
# left Python for good (its calls then skip the hook: a segment of library code that never compiles).
_GIVE_UP = 8


class _StaysPython(Exception):
    pass


def call_globals(cell: Globals, namespace: dict[str, Any]) -> Globals:
    """The cell's globals as a call sees them: everything the cell bound has its value now."""
    g = collect_globals(ast.Module(body=[], type_ignores=[]), namespace)
    g.functions, g.plain_functions, g.classes = cell.functions, cell.plain_functions, cell.classes
    g.reach = cell.reach
    for name in cell.functions:
        g.values.pop(name, None)  # another @ppy.opt function of the source: compiled inline, as at the cell
    return g


def _global_guards(cell: Globals, frozen: dict[str, Any], namespace: dict | None) -> tuple:
    """(namespace, name, value) of each global a variant read that the cell did not know: checked at each call."""
    if namespace is None:
        return ()
    return tuple(
        (namespace, name, value)
        for name, value in frozen.items()
        if (name in cell.unknown or name not in cell.values) and namespace.get(name) is value
    )


def _stated_kind(arg: ast.arg, default: ast.expr | None, g: Globals) -> Kind | None:
    """The kind the source states for a parameter (its annotation, or its default's), if a region reads it."""
    if arg.annotation is not None:
        try:
            kind = param_kinds.annotation_kind(arg.annotation, g)
        except param_kinds.NotUnderstood:
            return None
        return kind if isinstance(kind, Kind) else None
    if default is None:
        return None
    ok, value = param_kinds.default_value(default, g)
    kind = param_kinds.default_kind(value) if ok else None
    return kind if isinstance(kind, Kind) and kind != Kind.OPT_TENSOR else None


def _fits(kind: Kind, value: Any) -> bool:
    if kind == Kind.TENSOR:
        return type(value) in (torch.Tensor, torch.nn.Parameter)
    if kind == Kind.OPT_TENSOR:
        return value is None or type(value) in (torch.Tensor, torch.nn.Parameter)
    if kind == Kind.TENSORS:
        return isinstance(value, (list, tuple)) and all(type(v) in (torch.Tensor, torch.nn.Parameter) for v in value)
    return param_kinds.default_fits(kind, value)


def _is_scalar(value: Any) -> bool:
    return type(value) in (bool, int, float, str) or isinstance(value, (torch.dtype, tuple)) or value is None


def _signature(bound: tuple) -> tuple:
    """A cheap, hashable picture of a call: types, and the values of Python scalars."""
    out = []
    for v in bound:
        t = type(v)
        if (
            t in (bool, int, float, str)
            or v is None
            or isinstance(v, torch.dtype)
            or t is tuple
            and all(type(i) is int for i in v)
        ):
            out.append((t, v))
        elif t in (list, tuple):
            out.append((t, len(v), tuple(type(i) for i in v)))
        elif t is dict:  # the extra keywords into **kwargs
            out.append((t, _signature(tuple(v)), _signature(tuple(v.values()))))
        elif isinstance(v, torch.Tensor):
            out.append((t,))
        elif isinstance(v, torch.nn.Module) or callable(v) or isinstance(v, type):
            out.append((t, id(v)))  # a module's own attributes, a callable compiled in: the object itself
        else:
            out.append((t,))  # a plain object (a config, an output, a cache): a new one per call, often
    return tuple(out)


def _constant_identity(value: Any) -> tuple:
    """A parameter's value compiled in, as its guard tells it apart: by type and value, or where it has no
    hash (a list), by identity."""
    try:
        hash(value)
    except Exception:  # noqa: BLE001 - unhashable, or a __hash__ that fails: told apart by identity
        return (type(value), id(value))
    return (type(value), value)


def _values_of(cv: call_values.CallValues) -> dict[str, str]:
    out = {name: f"any {kind.name.lower()}" for name, kind in cv.kinds.items()}
    out.update({name: call_values.short_repr(v) for name, v in cv.constants.items()})
    out.update({name: type(v).__name__ for name, v in cv.samples.items()})
    return out


def _lines_of(source: Source, reads: tuple) -> tuple[int, ...]:
    """Lines of the function whose code depends on a value compiled in: a read of it, or of a parameter so held."""
    lines = {line for _what, line in reads if line}
    params = {what for what, line in reads if line == 0}
    for n in ast.walk(source.node):
        if isinstance(n, ast.Name) and n.id in params and hasattr(n, "lineno"):
            lines.add(n.lineno)
    return tuple(sorted(lines))


def _first_line(text: str) -> str:
    return next((ln for ln in text.splitlines() if ln.strip()), text)[:200]


__all__ = ["Settings", "Source", "VariantRecord", "Variants", "blocking", "settings", "wait"]
