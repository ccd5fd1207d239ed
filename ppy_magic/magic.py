"""The IPython side: ``%%ppy`` and ``%ppy_cache``. IPython is imported only here.

Parse options -> compile and build (``compiler``) -> run the cell with the
binder active -> one summary line. The magics class is a traitlets
``Configurable``, so ``%config PpyMagics`` lists and sets its options.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Int, Unicode

from . import build, compiler, region
from .errors import BuildError, CompileError


@magics_class
class PpyMagics(Magics):
    """Compile ``@ppy.opt`` functions of a cell into ATen regions."""

    strict = Bool(False, help="Raise instead of leaving a function Python when it cannot be compiled.").tag(
        config=True)
    verbose = Bool(False, help="Show the generated C++ and the build outcome after each %%ppy cell.").tag(
        config=True)
    cache_dir = Unicode("", help="Where built extensions are cached (default: $PPY_CACHE_DIR, else "
                                 "$XDG_CACHE_HOME/ppy_magic or ~/.cache/ppy_magic).").tag(config=True)
    show_build_status = Bool(True, help="Show a live 'building ...' line while a cell builds.").tag(config=True)
    default_level = Int(3, help="The level of a bare @ppy.opt (0 never compiles; 1-3 compile).").tag(config=True)
    warn_fallback = Bool(False, help="Warn once per function and reason when a region runs its Python "
                                     "body because a guard failed.").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._cache: build.Cache | None = None
        self.observe(self._on_warn_fallback, names=["warn_fallback"])

    def _on_warn_fallback(self, change: dict) -> None:
        region.FALLBACKS.warn = bool(change["new"])

    @property
    def cache(self) -> build.Cache:
        root = self.cache_dir or build.default_cache_dir()
        if self._cache is None or self._cache.root != os.path.abspath(root):
            self._cache = build.shared_cache(root)
        return self._cache

    # -- %%ppy ------------------------------------------------------------------
    @magic_arguments()
    @argument("-f", "--force", action="store_true", help="Rebuild even if this cell is cached.")
    @argument("--strict", action="store_true",
              help="Raise a located CompileError for a function that cannot be compiled, instead of "
                   "leaving it Python.")
    @argument("-v", "--verbose", action="store_true", help="Show the generated C++ and how it was built.")
    @cell_magic
    def ppy(self, line: str, cell: str) -> None:
        """Run the cell, compiling each top-level ``@ppy.opt(N)`` function into an ATen region.

        All regions of the cell go into one C++ extension (one build, cached in
        memory for this kernel and on disk across kernels). Each region is bound
        when its ``def`` runs, so later code in the same cell already calls it.
        A function that cannot be compiled stays Python and the output says why.
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
            binder = compiler.compile_source(source, shell.user_ns, filename, cache=self.cache,
                                             force=args.force, strict=strict, on_build=status.start)
        except SyntaxError:
            status.stop()
            shell.showsyntaxerror(filename)
            raise _Quiet() from None
        except (CompileError, BuildError):
            status.stop()
            raise
        status.stop()
        report = binder.report
        code = shell.compile(source, filename, "exec")
        try:
            compiler.run(code, shell.user_ns, binder)
        except BaseException as exc:
            _trim_traceback(shell, exc, filename)
            raise
        finally:
            status.show(report.summary())
            if verbose and report.cpp:
                print(f"ppy: module {report.module_name}; flags {' '.join(build.CFLAGS)}")
                print(report.cpp)

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
    @argument("-o", "--output", metavar="DIR", default=None,
              help="The artifact directory (default: ./NAME-ppy); a previous artifact there is replaced.")
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

        from . import artifact

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
    @argument("-r", "--repeat", type=int, default=None,
              help="Rounds per variant (default 5); best, median and IQR are over rounds.")
    @argument("--threads", type=int, default=None,
              help="PyTorch threads while timing (default 1); the previous setting is restored afterwards.")
    @argument("--grad", action="store_true",
              help="Time forward + backward: torch.autograd.grad of the summed output with respect to the "
                   "floating-point tensor arguments.")
    @argument("--no-compile", action="store_true",
              help="Leave out torch.compile (its first call compiles, which takes tens of seconds on a CPU).")
    @argument("-o", "--output", action="store_true",
              help="Return the result instead of displaying it: .df is a pandas DataFrame, .metadata a dict.")
    @argument("-q", "--quiet", action="store_true", help="No progress bar or header while measuring.")
    @argument("func", metavar="FUNC", help="The function to time: a %%ppy region.")
    @argument("args", metavar="ARG", nargs="...",  # argparse.REMAINDER: an ARG may start with '-'
              help="Its arguments: names or expressions in the namespace, separated by spaces "
                   "(parenthesise an expression that contains spaces).")
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
        from . import bench, report, widget

        a = self.ppy_bench.parser.parse_args(bench.split_line(line))  # raises UsageError on a bad flag
        given = {"number": a.number, "repeat": a.repeat, "threads": a.threads}
        try:
            options = bench.BenchOptions(**{k: v for k, v in given.items() if v is not None},
                                         grad=a.grad, compile=not a.no_compile)
        except bench.BenchUsageError as err:
            raise UsageError(f"%ppy_bench: {err}") from None

        def evaluate(expression: str, what: str) -> Any:
            try:
                return self.shell.ev(expression)
            except Exception as err:
                raise UsageError(f"%ppy_bench: {what} {expression!r} cannot be evaluated in the namespace: "
                                 f"{type(err).__name__}: {err}") from None

        func = evaluate(a.func, "FUNC")
        if not callable(func):
            raise UsageError(f"%ppy_bench: FUNC {a.func!r} is a {type(func).__name__}, not a function; "
                             "write %ppy_bench FUNC ARG ...")
        values = [evaluate(expr, "ARG") for expr in a.args]
        shown = widget.progress(self.shell, f"%ppy_bench {a.func}", options.repeat, compiling=options.compile,
                                quiet=a.quiet)
        try:
            result = bench.measure(func, values, options, arg_names=a.args, on_progress=shown.update)
        except bench.BenchUsageError as err:
            raise UsageError(f"%ppy_bench: {err}") from None
        except bench.EagerError as failed:  # eager's own error, once, from the user's frames down
            err = failed.error
            if hasattr(err, "add_note"):  # Python >= 3.11
                err.add_note(f"%ppy_bench: PyTorch eager ({failed.function}) raised this on the given "
                             "arguments; nothing was timed.")
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
        try:
            return parse_argstring(func, line)
        except UsageError:
            raise
        except SystemExit:  # argparse on a bad flag
            raise UsageError(f"bad options: {line!r}; see %%ppy?") from None


class _Quiet(Exception):
    """The error was already shown (a SyntaxError in the cell)."""

    def _render_traceback_(self) -> list[str]:
        return []


def _trim_traceback(shell: Any, exc: BaseException, filename: str) -> None:
    """Show the user's own frames only, starting at the cell, when IPython renders `exc`."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None or hasattr(exc, "_render_traceback_"):
        return
    try:
        stb = shell.InteractiveTB.structured_traceback(type(exc), exc, tb, tb_offset=0)
        shown = "\n".join(stb)
        stb += [note for note in getattr(exc, "__notes__", ()) if note not in shown]  # older IPython omits notes
        exc._render_traceback_ = lambda: stb  # type: ignore[attr-defined]
    except Exception:  # an exception type that refuses attributes: keep IPython's rendering
        pass


class _Status:
    """A live 'building N regions ... 3 s' line, replaced by the final summary."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.handle = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self, n: int) -> None:
        if not self.enabled:
            return
        from IPython.display import display

        self._t0 = time.perf_counter()
        what = f"{n} region{'s' if n != 1 else ''}"
        self.handle = display({"text/plain": f"ppy: building {what} ..."}, raw=True, display_id=True)

        def tick() -> None:
            while not self._stop.wait(1.0):
                secs = time.perf_counter() - self._t0
                if self.handle is not None:
                    self.handle.update({"text/plain": f"ppy: building {what} ... {secs:.0f} s"}, raw=True)

        self._thread = threading.Thread(target=tick, name="ppy-build-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def show(self, text: str) -> None:
        if not text:
            if self.handle is not None:
                self.handle.update({"text/plain": ""}, raw=True)
            return
        if self.handle is not None:
            self.handle.update({"text/plain": text}, raw=True)
        else:
            print(text, file=sys.stdout)


_loaded: dict[int, PpyMagics] = {}


def load(ipython: Any) -> None:
    if id(ipython) in _loaded:
        return
    magics = PpyMagics(shell=ipython, parent=ipython)
    ipython.register_magics(magics)
    ipython.configurables.append(magics)
    _loaded[id(ipython)] = magics


def unload(ipython: Any) -> None:
    magics = _loaded.pop(id(ipython), None)
    if magics is None:
        return
    for kind in ("cell", "line"):
        table = ipython.magics_manager.magics[kind]
        for name, fn in list(table.items()):
            if getattr(fn, "__self__", None) is magics:
                del table[name]
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)
