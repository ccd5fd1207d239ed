"""Writing an artifact directory, and ``ppy build FILE``: a program's regions built and written beside it.

``write_artifact`` is shared with ``%ppy_export`` (``export``): it copies the
built extensions out of the cache (checking the sha256 the cache recorded),
writes the program, its loader and the manifest into a staging directory and
renames it into place, so a reader never sees half an artifact.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass

from .. import backend, decorator, region
from ..errors import PpyError
from ..language.namespace import Key, function_key
from . import load
from .manifest import (
    MANIFEST,
    ArtifactError,
    CallModule,
    ExtensionFile,
    Manifest,
    RegionRecord,
    compiler_facts,
    process_facts,
    region_record,
    sha256_file,
)

PROGRAM_SUFFIX = ".ppy"
# A loader with one of these names would shadow the module the program itself imports.
RESERVED_STEMS = frozenset({"ppy", "ppy_magic", "torch"})

# Loaders already written call exactly this line: `ppy_magic.artifact.exec_program` stays where it is.
LOADER = """\
# Built by ppy_magic {version} from {origin}.
# Runs {program} with its @ppy.opt regions loaded from the extensions beside this file,
# with no compiler: `python {loader}` or `torchrun ... {loader}` runs the program;
# `import {stem}` (this directory on sys.path) binds its regions;
# `python {program}` runs it as plain Python.
try:
    __import__("ppy_magic.artifact")
except ImportError as exc:
    raise ImportError("{loader} needs ppy_magic (built with {version}): pip install ppy-magic") from exc
__import__("ppy_magic.artifact").artifact.exec_program(__file__, globals(), {program!r})
"""


@dataclass(frozen=True)
class Written:
    """What ``ppy build`` or ``%ppy_export`` wrote."""

    directory: str
    loader: str
    manifest: Manifest
    module_name: str | None = None  # set when the artifact is meant to be imported (%ppy_export)

    def summary(self) -> str:
        names = ", ".join(r.name for r in self.manifest.regions)
        n = len(self.manifest.regions)
        rel = os.path.relpath(self.loader)
        shown = rel if not rel.startswith("..") else self.loader
        if self.module_name is None:
            use = f"run it with no compiler: python {shown}   or   torchrun --nproc_per_node=N {shown}"
        else:
            use = f"use it with no compiler: sys.path.insert(0, {self.directory!r}); import {self.module_name}"
        at_calls = len(self.manifest.at_calls)
        called = f", {at_calls} module(s) its run built at calls" if at_calls else ""
        lines = [
            f"ppy: wrote {self.directory}: {n} region{'s' if n != 1 else ''}{f' ({names})' if n else ''}, "
            f"{len(self.manifest.extensions)} region extension(s){called} and the runtime, {MANIFEST}",
            f"ppy: {use}",
        ]
        for (name, _line), reason in sorted(self.manifest.python_functions.items()):
            lines.append(f"ppy: '{name}' stays Python in the artifact: {reason}")
        return "\n".join(lines)


def check_stem(stem: str, what: str) -> None:
    if stem in RESERVED_STEMS:
        raise ArtifactError(
            f"{what} '{stem}' would shadow the '{stem}' module the program imports; choose another name"
        )
    if not stem or os.sep in stem or stem.startswith("."):
        raise ArtifactError(f"{what} {stem!r} cannot name an artifact's files")


def check_output(out_dir: str) -> str:
    """`out_dir` as an absolute path, if an artifact may be written there (checked before any build)."""
    out_dir = os.path.abspath(out_dir)
    if os.path.lexists(out_dir):
        if not os.path.isdir(out_dir):
            raise ArtifactError(f"{out_dir} exists and is not a directory; choose another output with -o DIR")
        if os.listdir(out_dir) and not os.path.exists(os.path.join(out_dir, MANIFEST)):
            raise ArtifactError(
                f"{out_dir} is not empty and holds no ppy artifact, so nothing there is "
                "replaced; choose another output with -o DIR, or empty it"
            )
    return out_dir


def default_output(stem: str) -> str:
    return os.path.abspath(f"{stem}-ppy")


def write_artifact(
    out_dir: str,
    stem: str,
    program_source: str,
    origin: str,
    regions: list[RegionRecord],
    extensions: dict[str, str],
    runtime: tuple[str, str],
    python_functions: dict[Key, str],
    at_calls: dict[str, tuple[str, str]] | None = None,
) -> Written:
    """Write the artifact directory; `extensions` maps module name -> built .so, `runtime` is (name, .so),
    `at_calls` module name -> (code key, built .so) for the modules a run built at its calls.

    The new directory is assembled beside `out_dir` and renamed into place, so a
    reader never sees half an artifact; a previous artifact there is replaced,
    anything else there is left alone (an error says so).
    """
    check_stem(stem, "the name")
    out_dir = check_output(out_dir)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.", dir=parent)
    try:
        os.chmod(staging, 0o755)
        program, loader = stem + PROGRAM_SUFFIX, stem + ".py"
        with open(os.path.join(staging, program), "w", encoding="utf-8") as fh:
            fh.write(program_source)
        version = backend.package_version()
        with open(os.path.join(staging, loader), "w", encoding="utf-8") as fh:
            fh.write(LOADER.format(version=version, origin=origin, program=program, loader=loader, stem=stem))
        files = [_copy_extension(name, src, staging) for name, src in sorted(extensions.items())]
        runtime_file = _copy_extension(runtime[0], runtime[1], staging)
        called = []
        for name, (code, src) in sorted((at_calls or {}).items()):
            f = _copy_extension(name, src, staging)
            called.append(CallModule(f.module, f.file, f.sha256, code))
        manifest = Manifest(
            program=program,
            loader=loader,
            origin=origin,
            package_version=version,
            built_for=process_facts(),
            compiler=compiler_facts(),
            runtime=runtime_file,
            extensions=tuple(files),
            regions=tuple(regions),
            python_functions=dict(python_functions),
            at_calls=tuple(called),
        )
        with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as fh:
            json.dump(manifest.to_json(), fh, indent=1)
            fh.write("\n")
        old = None
        if os.path.exists(out_dir):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.old.", dir=parent)
            os.rename(out_dir, os.path.join(old, "artifact"))
        os.rename(staging, out_dir)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Written(out_dir, os.path.join(out_dir, loader), manifest)


def _copy_extension(name: str, src: str, directory: str) -> ExtensionFile:
    file = name + backend.EXT_SUFFIX
    expected = backend.recorded_sha256(src)
    shutil.copyfile(src, os.path.join(directory, file))
    digest = sha256_file(os.path.join(directory, file))
    if expected is not None and digest != expected:
        raise ArtifactError(
            f"the cached {file} does not match its recorded checksum (a corrupt cache?); "
            "rebuild it (`ppy build -f`, or `%%ppy -f` in the notebook) and retry"
        )
    return ExtensionFile(name, file, digest)


def extension_path(cache: backend.Cache, module: types.ModuleType | str) -> str:
    """Where the built file of an extension loaded in this process lies."""
    name = module if isinstance(module, str) else module.__name__
    candidates = [cache.so_path(name)]
    loaded = module if not isinstance(module, str) else cache.loaded(name) or load.IMPORTED.by_name(name)
    if loaded is not None:
        candidates.append(getattr(loaded, "__file__", None))
    for path in candidates:
        if path and os.path.exists(path):
            return path
    raise ArtifactError(
        f"the built extension {name} is no longer on disk (was the cache cleared?); "
        "build it again (`ppy build -f`, or re-run its %%ppy cell) and retry"
    )


# ---- ppy build ----------------------------------------------------------------------------------


def build_program(
    path: str,
    out_dir: str | None = None,
    *,
    cache: backend.Cache,
    strict: bool = False,
    force: bool = False,
    run: bool = False,
    argv: tuple[str, ...] = (),
) -> tuple[Written, str]:
    """Compile FILE's regions (like ``ppy run``, without running it) and write its artifact. With `run`,
    FILE also runs once (as ``ppy run FILE ARGS`` does), and the modules its calls built (the variants,
    ``ppy_magic.compile(model)``'s regions, imported files' cells) are shipped with it, found again by
    their code where it is loaded (``backend.shipped``).

    Returns what was written and the build summary.
    """
    from .. import pipeline, program
    from ..language.frontend import decorated_functions, method_owners
    from ..language.namespace import collect_globals

    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError as exc:
        raise ArtifactError(f"cannot read {path}: {exc.strerror}") from None
    path = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    check_stem(stem, "the file name")
    out_dir = check_output(out_dir or default_output(stem))
    if run:
        namespace = program.main_namespace(path, list(argv))
    else:
        namespace = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
    with backend.shipped.recording() as used:
        binder = pipeline.compile_source(source, namespace, path, cache=cache, force=force, strict=strict)
        if run:
            program.run_program(source, path, namespace, binder, cache=cache, strict=strict, force=force)
    report = binder.report
    runtime = binder.runtime if binder.module is not None else (backend.loaded_runtime() if run else None)
    cell_modules = {binder.module.__name__} if binder.module is not None else set()
    at_calls = {n: u for n, u in used.items() if n not in cell_modules and runtime and n != runtime.__name__}
    if runtime is None or not (binder.regions or at_calls):
        why = "; ".join(f"'{n}': {r}" for n, r in report.python) or "it has no @ppy.opt function"
        if not run:
            why += " (ppy build --run FILE runs it, and ships what its calls build: ppy_magic.compile(model))"
        raise ArtifactError(f"no region of {path} was built, so there is no artifact to write ({why})")
    lines = source.splitlines()
    tree = ast.parse(source, path)
    top_level = [*tree.body, *method_owners(tree)]  # functions, and methods of the top-level classes
    last_lines = {
        function_key(node): node.end_lineno
        for node in top_level
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    devices = region.built_device_types()
    top, _nested = decorated_functions(tree, collect_globals(tree, namespace))
    levels = {function_key(node): level for node, level in top}
    records = [
        region_record(
            spec,
            binder.module.__name__,
            lines,
            spec.first_line,
            last_lines.get(key) or spec.first_line,
            devices,
            levels.get(key, decorator.DEFAULT_LEVEL),
        )
        for key, spec in sorted(binder.regions.items(), key=lambda kv: kv[0][1])
    ]
    extensions = {binder.module.__name__: extension_path(cache, binder.module)} if binder.module is not None else {}
    written = write_artifact(
        out_dir,
        stem,
        source,
        os.path.basename(path),
        records,
        extensions,
        (runtime.__name__, extension_path(cache, runtime)),
        {k: e.reason for k, e in binder.failures.items()},
        {n: (code, file or extension_path(cache, n)) for n, (code, file) in at_calls.items()},
    )
    return written, report.summary()


def build_command(
    file: str,
    output: str | None,
    *,
    strict: bool = False,
    force: bool = False,
    run: bool = False,
    argv: tuple[str, ...] = (),
) -> int:
    """``ppy build [--run] FILE [-o DIR] [ARGS]``: messages on stderr, an exit status."""
    try:
        written, summary = build_program(
            file, output, cache=backend.shared_cache(), strict=strict, force=force, run=run, argv=argv
        )
    except PpyError as exc:
        print(f"ppy build: {exc}", file=sys.stderr)
        return 1
    except SyntaxError as exc:
        print(f"ppy build: {file} is not valid Python: {exc}", file=sys.stderr)
        return 1
    if summary:
        print(summary, file=sys.stderr)
    print(written.summary(), file=sys.stderr)
    return 0
