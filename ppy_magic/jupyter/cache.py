"""``%ppy_cache`` and ``%ppy_export``: what this kernel has built, and taking it elsewhere.

Both work on the build cache of ``PpyMagics`` (its ``cache_dir`` option).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from .. import variants
from . import display
from .cell import PpyMagics


def variants_info() -> str:
    """The variants built at calls in this kernel: building, ready or why not."""
    records = variants.all_records()
    if not records:
        return ""
    lines = [f"\nvariants built at calls ({len(records)}):"]
    lines += [f"  {r.function}: {r}" for r in records]
    return "\n".join(lines)


@magics_class
class CacheMagics(Magics):
    """The build cache and the artifacts made from it."""

    def __init__(self, shell: Any, options: PpyMagics) -> None:
        super().__init__(shell=shell)
        self.options = options

    @line_magic
    def ppy_cache(self, line: str) -> None:
        """%ppy_cache [info|prune|clear]: show, trim or empty the cache of built regions.

        ``info`` (the default) shows the directory, what it holds, its size
        limit (``%config PpyMagics.cache_max_size``) and what a prune would
        remove. ``prune`` removes leftovers of killed builds, preludes of other
        toolchains and the least recently used modules until the cache is under
        its limit; what a live kernel has loaded or is building stays.
        ``clear`` removes every built module from disk and memory. Regions
        already bound keep working either way (their code stays loaded).
        """
        action = line.strip() or "info"
        if action == "info":
            display.text(self.options.cache.info() + variants_info())
        elif action == "prune":
            display.text(self.options.cache.prune())
        elif action == "clear":
            display.text(self.options.cache.clear())
        else:
            raise UsageError(f"%ppy_cache: unknown action {action!r}; use 'info', 'prune' or 'clear'")

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
            artifact.check_module_name(args.name)  # a bad name first, whatever the kernel holds
            functions = artifact.regions_in(self.shell.user_ns, args.functions)
            written = artifact.export_regions(args.name, functions, args.output, cache=self.options.cache)
        except artifact.ArtifactError as err:
            raise UsageError(f"%ppy_export: {err}") from None
        display.text(written.summary())
