"""``%%ppy`` and the options of every magic: ``PpyMagics``.

Parse options -> compile and build (``pipeline``) -> run the cell with the
binder active -> one summary line. ``PpyMagics`` is a traitlets
``Configurable``: ``%config PpyMagics`` lists its options with their help,
``%config PpyMagics.strict = True`` sets one, a profile's ``c.PpyMagics``
applies at load. The other families (``bench``, ``cache``) read its options.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import tokenize
import types
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Int, TraitError, Unicode, observe, validate

from .. import backend, decorator, pipeline, region, variants
from ..annotate import annotate
from ..backend import eviction
from ..errors import BuildError, CompileError
from . import display
from .status import BuildStatus, variant_status


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
    cache_max_size = Unicode(
        "",
        help="The size limit of the build cache, e.g. 5G or 500M, or 'unlimited' (default: $PPY_CACHE_MAX_SIZE, "
        "else 5G). Over it, a build evicts least recently used entries, never what a live kernel loaded; "
        "%ppy_cache info shows what would go, %ppy_cache prune removes it now.",
    ).tag(config=True)
    show_build_status = Bool(True, help="Show a live 'building ...' line while a cell builds.").tag(config=True)
    default_level = Int(
        decorator.DEFAULT_LEVEL,
        help="The level of a bare @ppy.opt or @ppy.opt() (0 never compiles; 1-3 compile). "
        "%%ppy -O LEVEL overrides every level of one cell.",
    ).tag(config=True)
    max_variants = Int(
        8,
        help="At most this many variants per function, each built at a call for the kinds and values it brought "
        "(a flag, a callable, a config's fields); past it, calls with new kinds or values run as Python and "
        "ppy_magic.explain(f) names what changed. Annotating that parameter keeps one variant for all.",
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
        variants.settings.max_variants = self.max_variants
        variants.settings.notify = variant_status if shell is not None else None

    @observe("max_variants")
    def _on_max_variants(self, change: dict) -> None:
        variants.settings.max_variants = int(change["new"])

    @validate("max_variants")
    def _check_max_variants(self, proposal: dict) -> int:
        if proposal["value"] < 1:
            raise TraitError(f"PpyMagics.max_variants must be at least 1, got {proposal['value']}")
        return proposal["value"]

    @observe("warn_fallback")
    def _on_warn_fallback(self, change: dict) -> None:
        region.FALLBACKS.warn = bool(change["new"])

    @validate("default_level")
    def _check_default_level(self, proposal: dict) -> int:
        value = proposal["value"]
        if not 0 <= value <= decorator.MAX_LEVEL:
            raise TraitError(f"PpyMagics.default_level must be 0 (never compile) to {decorator.MAX_LEVEL}, got {value}")
        return value

    @validate("cache_max_size")
    def _check_cache_max_size(self, proposal: dict) -> str:
        try:
            eviction.parse_size(proposal["value"])
        except ValueError as exc:
            raise TraitError(f"PpyMagics.cache_max_size: {exc}") from None
        return proposal["value"]

    @property
    def cache(self) -> backend.Cache:
        """The build cache at ``cache_dir`` (re-opened when the option changes); every family uses this one.

        Its size limit is ``cache_max_size``, else ``$PPY_CACHE_MAX_SIZE``, else the default.
        """
        root = self.cache_dir or backend.default_cache_dir()
        if self._cache is None or self._cache.root != os.path.abspath(root):
            self._cache = backend.shared_cache(root)
        limit = self.cache_max_size.strip()
        self._cache.max_size = eviction.parse_size(limit) if limit else eviction.max_size_from_env()
        return self._cache

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
        "-a",
        "--annotate",
        action="store_true",
        help="After the cell runs, show each line of each @ppy.opt function: compiled (click it for the "
        "ATen calls it became) or left Python, and why; like %%cython -a. ppy_magic.annotate(f) shows it later.",
    )
    @argument(
        "-O",
        dest="level",
        metavar="LEVEL",
        type=_level,
        default=None,
        help="Compile every @ppy.opt function of this cell at LEVEL, whatever its decorator says; "
        "-O 0 leaves all of them Python, 1 is the straight translation, 2 builds constants once, "
        "3 also reuses dead temporaries in place while autograd is not recording.",
    )
    @cell_magic
    def ppy(self, line: str, cell: str) -> Any:
        """Run the cell, compiling each top-level ``@ppy.opt(N)`` function into an ATen region.

        All regions of the cell go into one C++ extension (one build, cached in
        memory for this kernel and on disk across kernels). Each region is bound
        when its ``def`` runs, so later code in the same cell already calls it.
        A function that cannot be compiled stays Python and the output says why.
        The value of a last expression is shown, as in a plain cell.

        Where the source leaves a kind open (an unannotated parameter, a callable
        or module passed in, ``self.<attr>`` from a plain config object), the
        first call's values close it: that call runs the Python body and builds a
        *variant* for its kinds (and, where a value decides a branch or a kind,
        its values) in the background; calls after it lands run the region. Each
        variant is guarded at every call; at most ``PpyMagics.max_variants`` per
        function. ``ppy_magic.wait()`` waits for pending builds.
        ``%config PpyMagics`` lists the options that apply to every cell.

        Levels (``@ppy.opt(N)``, ``-O N``, ``PpyMagics.default_level``); every
        level gives results bitwise equal to eager:

        - 0: never compiled, the function stays Python.
        - 1: the straight translation: the same ATen calls as eager, in one C++
          call; each Python number passed as a tensor is a fresh 0-dim tensor.
        - 2: work done once, not per call: constant numbers, int lists and
          strings are built once; results are moved; ``x @ w`` of two matrices
          calls ``mm`` and ``F.linear`` of a matrix with a bias calls ``addmm``,
          as eager's own composites do.
        - 3 (the default): level 2, and while autograd is not recording (grad
          mode off, or no tensor argument or module attribute requires grad;
          no forward AD, functorch transform, dispatch mode or autocast), an
          element-wise op whose operand is a temporary nothing uses afterwards
          (made in the same block, and read by nothing else in the function:
          never a value a loop carries, a list holds or a later path reads)
          writes its result into it, when dtype and shape allow; otherwise the
          ordinary op. Under the same condition the element-wise ops and ``mm``
          that reuse nothing call their backend kernel past the autograd one
          (the same kernel; not while a profiler is attached).

        ``ppy_magic.explain(f)`` lists, per level, the constants built once and
        the temporaries reused in ``f``.
        """
        args = _parse(self.ppy, line)
        strict = args.strict or self.strict
        verbose = args.verbose or self.verbose
        shell = self.shell
        # A leading blank line keeps line numbers as the user sees them: line 1 is `%%ppy`.
        source = "\n" + shell.transform_cell(cell)
        filename = shell.compile.cache(source, _cell_number(shell), raw_code=cell)
        status = BuildStatus(self.show_build_status)
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
        except SyntaxError as err:
            status.stop()
            if display.syntax_error(shell, err, filename):
                return None
            raise
        except CompileError as err:
            status.stop()
            if strict:
                display.strict_failure(err)
            raise
        except BuildError:
            status.stop()
            raise
        status.stop()
        report = binder.report
        body, last = _split_last_expression(source, filename)
        ran = False
        try:
            pipeline.run(shell.compile(body, filename, "exec"), shell.user_ns, binder)
            value = None if last is None else _evaluate(shell.compile(last, filename, "eval"), shell.user_ns, binder)
            ran = True
            # `f(x);` at the end shows nothing, as in a plain cell. (IPython's own check for this,
            # `output_can_be_silenced`, tokenizes the cell after the magic returns, which fails with a
            # second error on a cell with an unclosed bracket: a SyntaxError this magic shows itself.)
            return None if _ends_with_semicolon(source) else value
        except BaseException as exc:
            display.cell_traceback(shell, exc, filename)
            raise
        finally:
            summary = report.summary()
            if not summary and not binder.failures:
                summary = "ppy: nothing to compile in this cell; it ran as plain Python"
            status.show(summary)
            if verbose:
                display.build_details(self.cache, report)
            if args.annotate and ran:  # under the summary, as the regions stand after the cell
                display.rich(annotate(*_decorated(source, filename, shell.user_ns)))


def _cell_number(shell: Any) -> int:
    """The number IPython gave the running cell (``In [N]``), which tracebacks name as ``Cell In[N]``.

    IPython 9 counts the cell before running it, so ``shell.execution_count``
    is then the next cell's number; the running cell's own is on the
    ExecutionResult the display hook holds while the cell runs.
    """
    number = getattr(display.running_cell(shell), "execution_count", None)
    return number if isinstance(number, int) else shell.execution_count


def _parse(func: Any, line: str) -> Any:
    name = getattr(func, "argcmd_name", func.__name__).lstrip("%")
    try:
        return parse_argstring(func, line)
    except UsageError as exc:
        raise UsageError(f"%%{name} {line.strip()}: {exc}; see %%{name}? for the options") from None
    except SystemExit:  # argparse on a bad flag
        raise UsageError(f"%%{name}: bad options {line!r}; see %%{name}? for the options") from None


def _split_last_expression(source: str, filename: str) -> tuple[ast.Module, ast.Expression | None]:
    """The cell without its last expression statement, and that expression (shown like Out[n])."""
    tree = ast.parse(source, filename)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
        return tree, last
    return tree, None


def _ends_with_semicolon(source: str) -> bool:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    skip = (tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    last = next((t for t in reversed(tokens) if t.type not in skip), None)
    return last is not None and last.type == tokenize.OP and last.string == ";"


def _decorated(source: str, filename: str, namespace: dict[str, Any]) -> list[Any]:
    """The cell's top-level ``@ppy.opt`` functions, as the cell left them (regions or Python)."""
    found = []
    for node in ast.parse(source, filename).body:
        f = namespace.get(node.name) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        python = getattr(f, "__wrapped__", f)
        if getattr(getattr(python, "__code__", None), "co_filename", None) != filename:
            continue  # not (or no longer) this cell's function
        if getattr(f, "__ppy_region__", False) or getattr(f, "__ppy_opt__", None) is not None:
            found.append(f)
    return found


def _evaluate(code: types.CodeType, namespace: dict[str, Any], binder: pipeline.CellBinder) -> Any:
    token = decorator.activate(binder)
    try:
        return eval(code, namespace)
    finally:
        decorator.deactivate(token)
