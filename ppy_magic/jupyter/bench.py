"""``%ppy_bench``: parse the line, measure (``bench.measure``), choose how to show the result.

The measurement returns data; ``bench.report`` renders it (DataFrame, text,
HTML). ``bench.widget`` is the progress bar while measuring, which the
result then replaces in place: one output per run, and nothing in it that a
reopened notebook cannot show.
"""

from __future__ import annotations

import time
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from .. import variants
from . import display


@magics_class
class BenchMagics(Magics):
    """Timing a region against PyTorch eager and torch.compile (it reads none of ``PpyMagics``' options)."""

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
    @argument(
        "func",
        metavar="FUNC",
        help="The function to time: a %%ppy region, or an nn.Module whose forward is one (times model(ARG, ...)).",
    )
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
        and ``torch.compile`` (of ``FUNC.__wrapped__``, default mode). For a
        model (an ``nn.Module`` whose forward is a region), ``model(ARG, ...)``,
        then the same model with its classes' Python methods, eager and under
        ``torch.compile(model)``. Each
        variant's output is first compared with eager's (the region's bit for
        bit, torch.compile's with ``torch.testing.assert_close``); then the
        variants are timed interleaved, round by round, in this process, after
        300 warm-up calls each, with the garbage collector off and
        ``torch.cuda.synchronize()`` around each round for CUDA tensors.
        torch.compile's first call compiles; it is reported apart
        (``first_call_s``). A variant that cannot run gets a row saying why.

        Shows the table (ms per call to four places), a bar chart with a
        best/median toggle and a note on the method, as HTML that a saved
        notebook keeps; with ``-o``, returns that object
        instead: ``.df`` is a DataFrame indexed by the three labels with
        columns best_ms, median_ms, iqr_ms, speedup_vs_eager, first_call_s,
        matches_eager; ``.metadata`` holds the torch version, device,
        threads, argument shapes and dtypes, number, repeat and the region's
        fallbacks to Python during the run.

        Example: ``%ppy_bench layer x w b``, ``%ppy_bench -n 1000 --grad layer x w b``,
        ``%ppy_bench model idx``.
        """
        from ..bench import measure as bench
        from ..bench import report, widget

        a = self.ppy_bench.parser.parse_args(split_line(line))  # raises UsageError on a bad flag
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
        title = f"%ppy_bench {a.func}"
        shown = widget.progress(self.shell, title, options.repeat, compiling=options.compile, quiet=a.quiet)
        t0 = time.perf_counter()
        try:
            with variants.blocking():  # a variant the arguments need is built first, so the region is measured
                result = bench.measure(func, values, options, arg_names=a.args, on_progress=shown.update)
        except bench.BenchUsageError as err:
            shown.finish(f"{title}: not timed")
            raise UsageError(f"%ppy_bench: {err}") from None
        except bench.EagerError as failed:  # eager's own error, once, from the user's frames down
            shown.finish(f"{title}: not timed (the error is below)")
            note = (
                f"%ppy_bench: PyTorch eager ({failed.function}) raised this on the given arguments; nothing was timed."
            )
            display.eager_traceback(self.shell, failed.error, note)
            raise failed.error from None
        except BaseException:  # an interrupt, or an error of the measurement itself
            shown.finish(f"{title}: stopped")
            raise
        out = report.BenchReport(result)
        if a.output:
            shown.finish(f"{title}: timed in {time.perf_counter() - t0:.1f} s; -o returns the result")
            return out
        # The result takes the progress bar's place; where there was none it is shown as a new output.
        if not shown.finish(out):
            display.rich(out)
        return None


def split_line(line: str) -> list[str]:
    """Split ``%ppy_bench``'s line at spaces outside brackets and quotes.

    ``f x[0] torch.ones(2, 3) 'a b'`` gives four words, so an argument can be
    any expression without spaces at its top level (parenthesise one that has
    them). Quotes are kept: a word is evaluated as written.
    """
    words: list[str] = []
    current: list[str] = []
    depth = 0
    quote = ""
    for ch in line:
        if quote:
            current.append(ch)
            if ch == quote and (len(current) < 2 or current[-2] != "\\"):
                quote = ""
            continue
        if ch.isspace() and depth == 0:
            if current:
                words.append("".join(current))
                current = []
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        current.append(ch)
    if current:
        words.append("".join(current))
    return words
