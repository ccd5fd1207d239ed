"""The ``ppy`` command: run a file with its ``@ppy.opt`` functions compiled.

ppy FILE [ARGS...]        same as `ppy run FILE`
ppy run FILE [ARGS...]    run FILE as __main__; a file is compiled like one %%ppy cell
ppy build FILE [-o DIR]   write DIR: FILE with its regions built, runnable with no compiler (torchrun);
                          --run runs FILE once and ships what its calls build (ppy_magic.compile(model))
ppy warmup [--force]      build the runtime and the precompiled prelude now (Binder postBuild, CI)
ppy cache [info|prune|clear] [--max-size SIZE]
                          show the build cache, bring it under its size limit, or empty it
"""

from __future__ import annotations

import argparse
import os
import sys

COMMANDS = ("run", "build", "warmup", "cache")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppy", description="Run Python files with @ppy.opt functions compiled into ATen regions."
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run FILE as __main__ with its regions compiled")
    run.add_argument("file")
    run.add_argument("args", nargs=argparse.REMAINDER)
    run.add_argument("--strict", action="store_true", help="fail if a decorated function cannot be compiled")
    run.add_argument("-f", "--force", action="store_true", help="rebuild even if cached")
    run.add_argument("-q", "--quiet", action="store_true", help="do not print the build summary")
    art = sub.add_parser("build", help="write DIR: FILE with its regions built, loadable with no compiler")
    art.add_argument("file")
    art.add_argument("-o", "--output", metavar="DIR", help="the artifact directory (default: ./STEM-ppy)")
    art.add_argument("--strict", action="store_true", help="fail if a decorated function cannot be compiled")
    art.add_argument("-f", "--force", action="store_true", help="rebuild even if cached")
    art.add_argument(
        "--run",
        action="store_true",
        help="run FILE once (with ARGS) and ship what its calls build too: ppy_magic.compile(model), variants",
    )
    art.add_argument(
        "args", nargs="*", help="with --run: the program's arguments (after --, where options follow FILE)"
    )
    warm = sub.add_parser("warmup", help="build the runtime and the precompiled prelude ahead of time")
    warm.add_argument("--force", action="store_true", help="rebuild both, even a prelude found unusable")
    warm.add_argument("--cache-dir", help="the cache directory (default: $PPY_CACHE_DIR or ~/.cache/ppy_magic)")
    cache = sub.add_parser("cache", help="show the build cache, bring it under its size limit, or empty it")
    cache.add_argument(
        "action",
        nargs="?",
        default="info",
        choices=("info", "prune", "clear"),
        help="info (default): what it holds, its limit and what a prune would remove; prune: remove leftovers, "
        "preludes of other toolchains and least recently used modules until under the limit (never what a "
        "live process has loaded or is building); clear: remove every built module and prelude",
    )
    cache.add_argument("--cache-dir", help="the cache directory (default: $PPY_CACHE_DIR or ~/.cache/ppy_magic)")
    cache.add_argument(
        "--max-size",
        metavar="SIZE",
        help="the size limit for this command, e.g. 2G or 500M (default: $PPY_CACHE_MAX_SIZE, else 5G)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "run")  # `ppy FILE` is `ppy run FILE`
    program_args: list[str] = []
    if argv and argv[0] == "build" and "--" in argv:  # ppy build --run FILE [options] -- ARGS
        cut = argv.index("--")
        argv, program_args = argv[:cut], argv[cut + 1 :]
    args = _parser().parse_args(argv)
    if args.command == "run":
        return run_file(args.file, args.args, strict=args.strict, force=args.force, quiet=args.quiet)
    if args.command == "build":
        from .artifact import build_command

        return build_command(
            args.file,
            args.output,
            strict=args.strict,
            force=args.force,
            run=args.run,
            argv=(*args.args, *program_args),
        )
    if args.command == "warmup":
        from .backend import shared_cache, warmup

        report = warmup(shared_cache(args.cache_dir), force=args.force)
        print("\n".join(f"ppy warmup: {line}" for line in str(report).splitlines()))
        return 0 if report.ok else 1
    if args.command == "cache":
        return cache_command(args.action, args.cache_dir, args.max_size)
    _parser().print_help()
    return 2


def cache_command(action: str, cache_dir: str | None, max_size: str | None) -> int:
    from .backend import eviction, shared_cache

    cache = shared_cache(cache_dir)
    if max_size is not None:
        try:
            cache.max_size = eviction.parse_size(max_size)
        except ValueError as exc:
            print(f"ppy cache: --max-size: {exc}", file=sys.stderr)
            return 2
    if action == "info":
        print(cache.info())
    elif action == "prune":
        print(f"ppy cache: {cache.prune()}")
    else:
        print(f"ppy cache: {cache.clear()}")
    return 0


def run_file(path: str, argv: list[str], *, strict: bool = False, force: bool = False, quiet: bool = False) -> int:
    """Run `path` as ``__main__``, compiled like one cell; the files it imports that use ``@ppy.opt`` are
    compiled too, each as its own cell, with the same options (``imports``)."""
    from . import backend, pipeline, program
    from .errors import PpyError

    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError as exc:
        print(f"ppy: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 2
    path = os.path.abspath(path)
    namespace = program.main_namespace(path, argv)
    cache = backend.shared_cache()
    try:
        binder = pipeline.compile_source(source, namespace, path, cache=cache, force=force, strict=strict)
    except PpyError as exc:
        print(f"ppy: {exc}", file=sys.stderr)
        return 1
    if not quiet and binder.report.summary():
        print(binder.report.summary(), file=sys.stderr)
    program.run_program(source, path, namespace, binder, cache=cache, strict=strict, force=force, quiet=quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
