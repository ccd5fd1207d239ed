"""The IPython side: ``%%ppy`` and ``%ppy_cache``. IPython is imported only here.

Parse options -> compile and build (``compiler``) -> run the cell with the
binder active -> one summary line. The magics class is a traitlets
``Configurable``, so ``%config PpyMagics`` lists and sets its options.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import threading
import time
import types
from typing import Any

from IPython.core import magic as _ipy_magic
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Int, TraitError, Unicode, observe, validate

from .. import backend, decorator, pipeline, region
from ..errors import BuildError, CompileError, debug

# `f(x);` at the end of a cell shows nothing, as in a plain cell (IPython >= 8.8 has this).
_silenceable = getattr(_ipy_magic, "output_can_be_silenced", lambda fn: fn)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ppy_magic/


def _level(text: str) -> int:
    try:
        level = int(text)
    except ValueError:
        level = -1
    if not 0 <= level <= decorator.MAX_LEVEL:
        raise argparse.ArgumentTypeError(
            f"LEVEL must be 0 (leave every function Python) to {decorator.MAX_LEVEL}, got {text!r}"
        )
    return level


@magics_class
class PpyMagics(Magics):
    """Compile ``@ppy.opt`` functions of a cell into ATen regions."""

    strict = Bool(
        False,
        help="Raise instead of leaving a function Python when it cannot be compiled "
        "(like %%ppy --strict on every cell).",
    ).tag(config=True)
    verbose = Bool(
        False, help="Show the generated C++ and the build command after each %%ppy cell (like %%ppy -v on every cell)."
    ).tag(config=True)
    cache_dir = Unicode(
        "",
        help="Where built extensions are cached (default: $PPY_CACHE_DIR, else "
        "$XDG_CACHE_HOME/ppy_magic or ~/.cache/ppy_magic).",
    ).tag(config=True)
    show_build_status = Bool(True, help="Show a live 'building ...' line while a cell builds.").tag(config=True)
    default_level = Int(
        decorator.DEFAULT_LEVEL,
        help="The level of a bare @ppy.opt or @ppy.opt() (0 never compiles; 1-3 compile). "
        "%%ppy -O LEVEL overrides every level of one cell.",
    ).tag(config=True)
    warn_fallback = Bool(
        False,
        help="Warn once per function and reason when a region runs its Python "
        "body because a guard failed (ppy_magic.explain(f) shows the counts).",
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._cache: backend.Cache | None = None
        region.FALLBACKS.warn = self.warn_fallback  # a profile's config was applied before observers ran

    @observe("warn_fallback")
    def _on_warn_fallback(self, change: dict) -> None:
        region.FALLBACKS.warn = bool(change["new"])

    @validate("default_level")
    def _check_default_level(self, proposal: dict) -> int:
        value = proposal["value"]
        if not 0 <= value <= decorator.MAX_LEVEL:
            raise TraitError(f"PpyMagics.default_level must be 0 (never compile) to {decorator.MAX_LEVEL}, got {value}")
        return value

    @property
    def cache(self) -> backend.Cache:
        root = self.cache_dir or backend.default_cache_dir()
        if self._cache is None or self._cache.root != os.path.abspath(root):
            self._cache = backend.shared_cache(root)
        return self._cache

    # -- %%ppy ------------------------------------------------------------------
    @magic_arguments("%ppy")  # shown as `%%ppy` in the usage line
    @argument("-f", "--force", action="store_true", help="Rebuild even if this cell is cached.")
    @argument(
        "--strict",
        action="store_true",
        help="Raise a located CompileError naming the first function that cannot be compiled, "
        "before anything in the cell runs, instead of leaving it Python.",
    )
    @argument("-v", "--verbose", action="store_true", help="Show the generated C++ and the build command.")
    @argument(
        "-O",
        dest="level",
        metavar="LEVEL",
        type=_level,
        default=None,
        help="Compile every @ppy.opt function of this cell at LEVEL, whatever its decorator says; "
        "-O 0 leaves all of them Python.",
    )
    @_silenceable
    @cell_magic
    def ppy(self, line: str, cell: str) -> Any:
        """Run the cell, compiling each top-level ``@ppy.opt(N)`` function into an ATen region.

        All regions of the cell go into one C++ extension (one build, cached in
        memory for this kernel and on disk across kernels). Each region is bound
        when its ``def`` runs, so later code in the same cell already calls it.
        A function that cannot be compiled stays Python and the output says why.
        The value of a last expression is shown, as in a plain cell.
        ``%config PpyMagics`` lists the options that apply to every cell.
        """
        args = self._parse(self.ppy, line)
        strict = args.strict or self.strict
        verbose = args.verbose or self.verbose
        shell = self.shell
        # A leading blank line keeps line numbers as the user sees them: line 1 is `%%ppy`.
        source = "\n" + shell.transform_cell(cell)
        filename = shell.compile.cache(source, shell.execution_count, raw_code=cell)
        status = _Status(self.show_build_status)
        try:
            binder = pipeline.compile_source(
                source,
                shell.user_ns,
                filename,
                cache=self.cache,
                force=args.force,
                strict=strict,
                on_build=status.start,
                default_level=self.default_level,
                level_override=args.level,
            )
        except SyntaxError:
            status.stop()
            shell.showsyntaxerror(filename)
            raise _Quiet() from None
        except CompileError as err:
            status.stop()
            if strict:
                _mark_strict(err)
            raise
        except BuildError:
            status.stop()
            raise
        status.stop()
        report = binder.report
        body, last = _split_last_expression(source, filename)
        try:
            pipeline.run(shell.compile(body, filename, "exec"), shell.user_ns, binder)
            if last is None:
                return None
            return _evaluate(shell.compile(last, filename, "eval"), shell.user_ns, binder)
        except BaseException as exc:
            _trim_traceback(shell, exc, filename)
            raise
        finally:
            summary = report.summary()
            if not summary and not binder.failures:
                summary = "ppy: nothing to compile in this cell; it ran as plain Python"
            status.show(summary)
            if verbose:
                _show_build(self.cache, report)

    # -- %ppy_cache ----------------------------------------------------------------
    @line_magic
    def ppy_cache(self, line: str) -> None:
        """%ppy_cache [info|clear]: show or empty the cache of built regions.

        ``clear`` removes built modules from disk and memory; regions already
        bound keep working (their code stays loaded in this kernel).
        """
        action = line.strip() or "info"
        if action == "info":
            print(self.cache.info())
        elif action == "clear":
            print(self.cache.clear())
        else:
            raise UsageError(f"%ppy_cache: unknown action {action!r}; use 'info' or 'clear'")

    # -- %ppy_export -----------------------------------------------------------------
    @magic_arguments()
    @argument("name", metavar="NAME", help="The module name the artifact is imported as.")
    @argument(
        "-o",
        "--output",
        metavar="DIR",
        default=None,
        help="The artifact directory (default: ./NAME-ppy); a previous artifact there is replaced.",
    )
    @argument("functions", metavar="FUNC", nargs="*", help="Regions to export (default: every region).")
    @line_magic
    def ppy_export(self, line: str) -> None:
        """Write the regions compiled in this kernel as an artifact that loads with no compiler.

        DIR gets NAME.py, the compiled extensions and ppy_manifest.json; with DIR
        on ``sys.path``, ``import NAME`` in any process with the same torch and
        Python (a ``torchrun`` worker, say) binds the regions, no compiler needed.
        Example: ``%ppy_export mylayers -o dist/mylayers layer residual``.
        """
        from IPython.utils.process import arg_split

        from .. import artifact

        args = self.ppy_export.parser.parse_intermixed_args(arg_split(line))  # UsageError on bad input
        try:
            functions = artifact.regions_in(self.shell.user_ns, args.functions)
            written = artifact.export_regions(args.name, functions, args.output, cache=self.cache)
        except artifact.ArtifactError as err:
            raise UsageError(f"%ppy_export: {err}") from None
        print(written.summary())

    # -- %ppy_bench ------------------------------------------------------------------
    @magic_arguments()
    @argument("-n", "--number", type=int, default=None, help="Calls per round (default 20,000).")
    @argument(
        "-r",
        "--repeat",
        type=int,
        default=None,
        help="Rounds per variant (default 5); best, median and IQR are over rounds.",
    )
    @argument(
        "--threads",
        type=int,
        default=None,
        help="PyTorch threads while timing (default 1); the previous setting is restored afterwards.",
    )
    @argument(
        "--grad",
        action="store_true",
        help="Time forward + backward: torch.autograd.grad of the summed output with respect to the "
        "floating-point tensor arguments.",
    )
    @argument(
        "--no-compile",
        action="store_true",
        help="Leave out torch.compile (its first call compiles, which takes tens of seconds on a CPU).",
    )
    @argument(
        "-o",
        "--output",
        action="store_true",
        help="Return the result instead of displaying it: .df is a pandas DataFrame, .metadata a dict.",
    )
    @argument("-q", "--quiet", action="store_true", help="No progress bar or header while measuring.")
    @argument("func", metavar="FUNC", help="The function to time: a %%ppy region.")
    @argument(
        "args",
        metavar="ARG",
        nargs="...",  # argparse.REMAINDER: an ARG may start with '-'
        help="Its arguments: names or expressions in the namespace, separated by spaces "
        "(parenthesise an expression that contains spaces).",
    )
    @line_magic
    def ppy_bench(self, line: str) -> Any:
        """Time FUNC(ARG, ...) as an ATen region, as PyTorch eager and under torch.compile.

        Rows: ``PPy ATen region`` (FUNC), ``PyTorch eager`` (``FUNC.__wrapped__``)
        and ``torch.compile`` (of ``FUNC.__wrapped__``, default mode). Each
        variant's output is first compared with eager's (the region's bit for
        bit, torch.compile's with ``torch.testing.assert_close``); then the
        variants are timed interleaved, round by round, in this process, after
        300 warm-up calls each, with the garbage collector off and
        ``torch.cuda.synchronize()`` around each round for CUDA tensors.
        torch.compile's first call compiles; it is reported apart
        (``first_call_s``). A variant that cannot run gets a row saying why.

        Shows a widget with the table (ms per call to four places), a bar
        chart and a note on the method; with ``-o``, returns that object
        instead: ``.df`` is a DataFrame indexed by the three labels with
        columns best_ms, median_ms, iqr_ms, speedup_vs_eager, first_call_s,
        matches_eager; ``.metadata`` holds the torch version, device,
        threads, argument shapes and dtypes, number, repeat and the region's
        fallbacks to Python during the run.

        Example: ``%ppy_bench layer x w b``, ``%ppy_bench -n 1000 --grad layer x w b``.
        """
        from ..bench import measure as bench
        from ..bench import report, widget

        a = self.ppy_bench.parser.parse_args(bench.split_line(line))  # raises UsageError on a bad flag
        given = {"number": a.number, "repeat": a.repeat, "threads": a.threads}
        try:
            options = bench.BenchOptions(
                **{k: v for k, v in given.items() if v is not None}, grad=a.grad, compile=not a.no_compile
            )
        except bench.BenchUsageError as err:
            raise UsageError(f"%ppy_bench: {err}") from None

        def evaluate(expression: str, what: str) -> Any:
            try:
                return self.shell.ev(expression)
            except Exception as err:
                raise UsageError(
                    f"%ppy_bench: {what} {expression!r} cannot be evaluated in the namespace: "
                    f"{type(err).__name__}: {err}"
                ) from None

        func = evaluate(a.func, "FUNC")
        if not callable(func):
            raise UsageError(
                f"%ppy_bench: FUNC {a.func!r} is a {type(func).__name__}, not a function; write %ppy_bench FUNC ARG ..."
            )
        values = [evaluate(expr, "ARG") for expr in a.args]
        shown = widget.progress(
            self.shell, f"%ppy_bench {a.func}", options.repeat, compiling=options.compile, quiet=a.quiet
        )
        try:
            result = bench.measure(func, values, options, arg_names=a.args, on_progress=shown.update)
        except bench.BenchUsageError as err:
            raise UsageError(f"%ppy_bench: {err}") from None
        except bench.EagerError as failed:  # eager's own error, once, from the user's frames down
            err = failed.error
            if hasattr(err, "add_note"):  # Python >= 3.11
                err.add_note(
                    f"%ppy_bench: PyTorch eager ({failed.function}) raised this on the given "
                    "arguments; nothing was timed."
                )
            stb = self.shell.InteractiveTB.structured_traceback(type(err), err, err.__traceback__, tb_offset=0)
            shown_text = "\n".join(stb)
            stb += [note for note in getattr(err, "__notes__", ()) if note not in shown_text]  # older IPython
            err._render_traceback_ = lambda: stb  # type: ignore[attr-defined]
            raise err from None
        finally:
            shown.close()
        out = report.BenchReport(result)
        if a.output:
            return out
        from IPython.display import display

        display(out)
        return None

    def _parse(self, func: Any, line: str) -> Any:
        name = getattr(func, "argcmd_name", func.__name__).lstrip("%")
        try:
            return parse_argstring(func, line)
        except UsageError as exc:
            raise UsageError(f"%%{name} {line.strip()}: {exc}; see %%{name}? for the options") from None
        except SystemExit:  # argparse on a bad flag
            raise UsageError(f"%%{name}: bad options {line!r}; see %%{name}? for the options") from None


class _Quiet(Exception):
    """The error was already shown (a SyntaxError in the cell)."""

    def _render_traceback_(self) -> list[str]:
        return []


def _split_last_expression(source: str, filename: str) -> tuple[ast.Module, ast.Expression | None]:
    """The cell without its last expression statement, and that expression (shown like Out[n])."""
    tree = ast.parse(source, filename)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
        return tree, last
    return tree, None


def _evaluate(code: types.CodeType, namespace: dict[str, Any], binder: pipeline.CellBinder) -> Any:
    token = decorator.activate(binder)
    try:
        return eval(code, namespace)
    finally:
        decorator.deactivate(token)


def _mark_strict(err: CompileError) -> None:
    """Under --strict nothing "stays Python": say the cell did not run, and how to go on."""
    who = f"'{err.function}'" if err.function else "a function"
    lines = [
        f"CompileError: {who} cannot be compiled: {err.reason}",
        *err.render().splitlines()[1:],
        f"--strict: the cell did not run, so nothing it defines changed. Fix {who}, or run the cell "
        "without --strict to keep it as Python.",
    ]
    err._render_traceback_ = lambda: lines  # type: ignore[method-assign]


def _show_build(cache: backend.Cache, report: pipeline.CellReport) -> None:
    """-v: the generated C++ and the commands that built it."""
    if not report.cpp:
        print("ppy: -v: no C++ was generated (no function of this cell compiles)")
        return
    print("ppy: -v: generated C++:")
    print(report.cpp)
    if not report.module_name:
        print("ppy: -v: the build failed; the notes above have the compiler's first lines")
        return
    how = {
        "memory": "already loaded in this kernel",
        "disk": "loaded from the disk cache, not rebuilt",
        "build": "built now",
    }.get(report.build_source or "", report.build_source or "")
    print(f"ppy: -v: module {report.module_name}: {how}; {cache.so_path(report.module_name)}")
    commands = _build_commands(cache.build_dir(report.module_name))
    if commands:
        print(f"ppy: -v: build commands (ninja in {cache.build_dir(report.module_name)}):")
        print(commands)
    else:
        print(f"ppy: -v: no build commands on record for it (flags: {' '.join(backend.CFLAGS)})")


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


def _trim_traceback(shell: Any, exc: BaseException, filename: str) -> None:
    """Show the user's own frames only, starting at the cell, when IPython renders `exc`.

    Frames inside this package (the decorator checking its level, the fallback
    warning) are cut: the error is about the user's line, not our code.
    PPY_DEBUG=1 keeps them.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None or hasattr(exc, "_render_traceback_"):
        return
    if not debug():
        tb = _without_package_tail(tb)
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


class _Status:
    """A live 'ppy: building 2 regions ... 3 s' line while a cell builds, replaced by the final summary.

    The summary (``CellReport.summary``) says whether the module came from
    memory, the disk cache or a build, and how long it took. The line ticks
    once a second only where a display can be updated in place (a kernel, a
    capture); a terminal gets the first line and the summary.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.handle: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self, n: int) -> None:
        if not self.enabled or self.handle is not None:
            return
        import contextvars

        from IPython import get_ipython
        from IPython.core.displaypub import DisplayPublisher
        from IPython.display import display

        self._t0 = time.perf_counter()
        what = f"ppy: building {n} region{'s' if n != 1 else ''} ..."
        self.handle = display({"text/plain": what}, raw=True, display_id=True)
        shell = get_ipython()
        if self.handle is None or shell is None or type(shell.display_pub) is DisplayPublisher:
            return  # a terminal prints every update on a new line: no ticking there

        def tick() -> None:
            while not self._stop.wait(1.0):
                self.handle.update({"text/plain": f"{what} {time.perf_counter() - self._t0:.0f} s"}, raw=True)

        # The copied context carries the cell's output routing (ipykernel keeps it in a contextvar).
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(tick,), name="ppy-build-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def show(self, text: str) -> None:
        """Replace the live line with `text` (the final summary), or print it if nothing was shown."""
        self.stop()
        if self.handle is not None:
            self.handle.update({"text/plain": text}, raw=True)
        elif text:
            print(text, file=sys.stdout)


_loaded: dict[int, PpyMagics] = {}


def load(ipython: Any) -> None:
    """Register the magics once per shell; ``parent=ipython`` applies the profile's ``c.PpyMagics``."""
    if id(ipython) in _loaded:
        return
    magics = PpyMagics(shell=ipython, parent=ipython)  # Magics.__init__ lists it in shell.configurables
    ipython.register_magics(magics)
    if magics not in ipython.configurables:  # for %config; older IPython does not add it
        ipython.configurables.append(magics)
    _loaded[id(ipython)] = magics


def unload(ipython: Any) -> None:
    """Remove the magics; regions already bound keep working (they hold their own modules)."""
    magics = _loaded.pop(id(ipython), None)
    if magics is None:
        return
    manager = ipython.magics_manager
    for kind in ("cell", "line"):
        table = manager.magics[kind]
        for name, fn in list(table.items()):
            if getattr(fn, "__self__", None) is magics:
                del table[name]
    if manager.registry.get(type(magics).__name__) is magics:
        del manager.registry[type(magics).__name__]
    ipython.configurables[:] = [c for c in ipython.configurables if c is not magics]
