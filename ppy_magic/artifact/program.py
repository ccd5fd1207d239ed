"""Built artifacts: a program's regions, loadable where no compiler is (``ppy build``, ``%ppy_export``).

An artifact is a directory::

    <stem>.py           the loader: running it runs the program, importing it binds the regions
    <stem>.ppy          the program itself (``python <stem>.ppy`` still runs it as plain Python)
    ppy_cell_*.so       the compiled regions, one extension per cell
    ppy_runtime_*.so    the runtime (``RegionFunction``) they were built against
    ppy_manifest.json   what it was built for, a sha256 per file, and how to bind each region

Loading imports the ``.so`` files directly: no compiler, no ninja, no ``load_inline``.
The program is compiled under its own file name, so tracebacks and line numbers are
the program's. If the manifest does not describe this process (torch version or C++
ABI, CUDA, Python, platform) or a file is missing or altered, nothing is loaded: one
warning, and every function runs its Python body.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import hashlib
import importlib
import json
import linecache
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import backend, decorator, region
from ..backend import RegionSpec
from ..errors import PpyError
from ..language import ir
from ..language.namespace import Key, function_key

FORMAT = "ppy_magic.artifact"
FORMAT_VERSION = 1
MANIFEST = "ppy_manifest.json"
PROGRAM_SUFFIX = ".ppy"
EXPORTED = "%ppy_export"  # the origin of an artifact written from a notebook
# A loader with one of these names would shadow the module the program itself imports.
RESERVED_STEMS = frozenset({"ppy", "ppy_magic", "torch"})


class ArtifactError(PpyError):
    """An artifact cannot be written, or a region cannot be exported."""

    def _render_traceback_(self) -> list[str]:
        return [f"ArtifactError: {self}"]


class PpyArtifactWarning(RuntimeWarning):
    """An artifact's regions (or one of them) were not loaded; those functions run as Python."""


# ---- what a binary depends on ---------------------------------------------------------


def process_facts() -> dict[str, Any]:
    """The facts about this process that decide whether a built extension may be loaded into it."""
    return {
        "torch": {
            "version": torch.__version__,
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
        },
        "python": {
            "version": platform.python_version(),
            "implementation": sys.implementation.name,
            "soabi": sysconfig.get_config_var("SOABI"),
        },
        "platform": {"tag": sysconfig.get_platform(), "libc": " ".join(platform.libc_ver()).strip() or None},
    }


def mismatches(built: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """What differs between the process an artifact was built for and this one, one phrase each."""

    def minor(version: str) -> str:
        return ".".join(str(version).split(".")[:2])

    checks = [
        ("torch", built["torch"]["version"], here["torch"]["version"]),
        ("torch C++ ABI (_GLIBCXX_USE_CXX11_ABI)", built["torch"]["cxx11_abi"], here["torch"]["cxx11_abi"]),
        ("CUDA", built["torch"]["cuda"], here["torch"]["cuda"]),
        ("ROCm", built["torch"]["hip"], here["torch"]["hip"]),
        ("Python", minor(built["python"]["version"]), minor(here["python"]["version"])),
        ("Python implementation", built["python"]["implementation"], here["python"]["implementation"]),
        ("Python extension ABI", built["python"]["soabi"], here["python"]["soabi"]),
        ("platform", built["platform"]["tag"], here["platform"]["tag"]),
    ]
    return [f"{what} {_show(b)} (this process: {_show(h)})" for what, b, h in checks if b != h]


def _show(value: Any) -> str:
    return "none" if value is None else str(value)


def compiler_facts() -> dict[str, Any]:
    """The compiler that built the extensions (informational: loading needs none)."""
    name = backend.compiler_name()
    path = shutil.which(name)
    version = None
    if path:
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
            version = out.splitlines()[0].strip() if out.strip() else None
        except (OSError, subprocess.SubprocessError):
            pass
    return {"name": name, "path": path, "version": version, "flags": list(backend.CELL_CFLAGS)}


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_sha256(lines: list[str], first: int, last: int) -> str:
    """The hash of a function's lines (decorators included): what the region was compiled from."""
    return hashlib.sha256("\n".join(lines[first - 1 : last]).encode()).hexdigest()


# ---- globals a region froze at compile time, as JSON ----------------------------------


def encode_global(value: Any) -> dict[str, Any]:
    """A frozen global as JSON that can be compared with the value the program binds at run time."""
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if type(value) is bool:
        return {"bool": value}
    if type(value) is int:
        return {"int": value}
    if type(value) is float:
        return {"float": value.hex()}  # exact, and NaN compares equal to itself as text
    where = importable_name(value)
    if where is not None:
        return {"object": f"{where[0]}:{where[1]}"}
    return {"repr": repr(value)}


def importable_name(value: Any) -> tuple[str, str] | None:
    """(module, attribute) such that ``from module import attribute`` gives `value` back, if any."""
    mod_name, name = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if not isinstance(mod_name, str) or not isinstance(name, str):
        return None
    try:
        mod = importlib.import_module(mod_name)
    except Exception:  # importing arbitrary modules may fail in many ways; then it is not importable
        return None
    return (mod_name, name) if getattr(mod, name, None) is value else None


class _Shown(str):
    """A frozen global as the manifest describes it, for ``explain``."""

    def __repr__(self) -> str:
        return str(self)


def _describe_global(enc: dict[str, Any]) -> _Shown:
    if "module" in enc:
        return _Shown(f"<module {enc['module']}>")
    if "float" in enc:
        return _Shown(repr(float.fromhex(enc["float"])))
    for kind in ("bool", "int"):
        if kind in enc:
            return _Shown(repr(enc[kind]))
    return _Shown(enc.get("object") or enc.get("repr") or "?")


# ---- the manifest ------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtensionFile:
    module: str  # the extension's module name (its PyInit_ symbol)
    file: str  # file name inside the artifact directory
    sha256: str


@dataclass(frozen=True)
class RegionRecord:
    """One region: what the user sees (name, signature) and what the runtime needs to bind it."""

    name: str
    qualname: str
    signature: str
    extension: str  # module name of the extension holding it
    index: int
    symbol: str
    kinds: str
    ret: str
    param_names: tuple[str, ...]
    defaults: tuple
    line_notes: dict[int, str]
    first_line: int  # in the program: the function's co_firstlineno
    last_line: int
    source_sha256: str
    device_types: tuple[str, ...]
    level: int
    frozen_globals: dict[str, dict]
    cpp: str
    result_types: tuple[str, ...] = ()  # names in torch.return_types of the named tuples it returns

    @property
    def key(self) -> Key:
        return (self.name, self.first_line)

    def spec(self, filename: str) -> RegionSpec:
        return RegionSpec(
            index=self.index,
            name=self.name,
            qualname=self.qualname,
            symbol=self.symbol,
            kinds=self.kinds,
            ret=self.ret,
            param_names=self.param_names,
            defaults=self.defaults,
            line_notes=dict(self.line_notes),
            first_line=self.first_line,
            filename=filename,
            frozen_globals={k: _describe_global(v) for k, v in self.frozen_globals.items()},
            cpp=self.cpp,
            result_types=tuple(getattr(torch.return_types, n) for n in self.result_types),
        )


@dataclass(frozen=True)
class Manifest:
    program: str  # file name of the program inside the artifact
    loader: str
    origin: str  # where the program came from, for messages
    package_version: str
    built_for: dict[str, Any]  # process_facts() of the building process
    compiler: dict[str, Any]
    runtime: ExtensionFile
    extensions: tuple[ExtensionFile, ...]
    regions: tuple[RegionRecord, ...]
    python_functions: dict[Key, str]  # decorated functions that stayed Python, and why

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "ppy_magic": self.package_version,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "program": self.program,
            "loader": self.loader,
            "origin": self.origin,
            **self.built_for,
            "compiler": self.compiler,
            "runtime": vars(self.runtime),
            "extensions": [vars(e) for e in self.extensions],
            "regions": [_region_json(r) for r in self.regions],
            "python_functions": [
                {"name": k[0], "first_line": k[1], "reason": v} for k, v in sorted(self.python_functions.items())
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> Manifest:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"it is not a {FORMAT} manifest")
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"it has format version {data.get('format_version')!r}, and this ppy_magic "
                f"({backend.package_version()}) reads version {FORMAT_VERSION}"
            )
        try:
            return cls(
                program=_plain_file(data["program"]),
                loader=_plain_file(data["loader"]),
                origin=str(data.get("origin", "")),
                package_version=str(data["ppy_magic"]),
                built_for={k: dict(data[k]) for k in ("torch", "python", "platform")},
                compiler=dict(data.get("compiler") or {}),
                runtime=_extension_from_json(data["runtime"]),
                extensions=tuple(_extension_from_json(e) for e in data["extensions"]),
                regions=tuple(_region_from_json(r) for r in data["regions"]),
                python_functions={
                    (p["name"], int(p["first_line"])): str(p["reason"]) for p in data.get("python_functions", [])
                },
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"it is incomplete ({type(exc).__name__}: {exc})") from None


def _plain_file(name: Any) -> str:
    """A file name inside the artifact directory: never a path that leaves it."""
    if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", ".."):
        raise ValueError(f"it names a file outside the artifact ({name!r})")
    return name


def _extension_from_json(e: dict[str, Any]) -> ExtensionFile:
    file = _plain_file(e["file"])
    if not file.endswith(backend.EXT_SUFFIX) or file != e["module"] + backend.EXT_SUFFIX:
        raise ValueError(f"it names an extension file that does not match its module ({file!r})")
    return ExtensionFile(str(e["module"]), file, str(e["sha256"]))


def _region_json(r: RegionRecord) -> dict[str, Any]:
    out = {k: getattr(r, k) for k in RegionRecord.__dataclass_fields__}
    out["line_notes"] = {str(k): v for k, v in r.line_notes.items()}
    return out


def _region_from_json(d: dict[str, Any]) -> RegionRecord:
    return RegionRecord(
        name=d["name"],
        qualname=d["qualname"],
        signature=d["signature"],
        extension=d["extension"],
        index=int(d["index"]),
        symbol=d["symbol"],
        kinds=d["kinds"],
        ret=d["ret"],
        param_names=tuple(d["param_names"]),
        defaults=tuple(d["defaults"]),
        line_notes={int(k): v for k, v in d["line_notes"].items()},
        first_line=int(d["first_line"]),
        last_line=int(d["last_line"]),
        source_sha256=d["source_sha256"],
        device_types=tuple(d["device_types"]),
        level=int(d["level"]),
        frozen_globals=dict(d["frozen_globals"]),
        cpp=d.get("cpp", ""),
        result_types=tuple(d.get("result_types", ())),
    )


def signature_text(spec: RegionSpec) -> str:
    """``name(x: Tensor, s: float = 0.5) -> Tensor``, from what the region was compiled for."""
    names = {**ir.KIND_NAMES, "O": "Tensor | None", "L": "list[Tensor]", "s": "str"}
    first_default = len(spec.param_names) - len(spec.defaults)
    params = []
    for i, (p, k) in enumerate(zip(spec.param_names, spec.kinds)):
        text = f"{p}: {names.get(k, k)}"
        if i >= first_default:
            text += f" = {spec.defaults[i - first_default]!r}"
        params.append(text)
    ret = spec.ret
    if ret.startswith("(") and ret.endswith(")"):
        ret_text = "tuple[" + ", ".join(names.get(k, k) for k in ret[1:-1]) + "]"
    else:
        ret_text = names.get(ret, ret)
    return f"{spec.name}({', '.join(params)}) -> {ret_text}"


def region_record(
    spec: RegionSpec,
    extension: str,
    lines: list[str],
    first_line: int,
    last_line: int,
    device_types: tuple[str, ...],
    level: int,
) -> RegionRecord:
    """The manifest entry of `spec`, placed at `first_line`..`last_line` of the program `lines`."""
    shift = first_line - spec.first_line
    # The C++ reports the line it was compiled from (the keys); the notes name the program's line.
    notes = {ln: re.sub(r", line \d+:", f", line {ln + shift}:", note, count=1) for ln, note in spec.line_notes.items()}
    return RegionRecord(
        name=spec.name,
        qualname=spec.qualname,
        signature=signature_text(spec),
        extension=extension,
        index=spec.index,
        symbol=spec.symbol,
        kinds=spec.kinds,
        ret=spec.ret,
        param_names=tuple(spec.param_names),
        defaults=tuple(spec.defaults),
        line_notes=notes,
        first_line=first_line,
        last_line=last_line,
        source_sha256=source_sha256(lines, first_line, last_line),
        device_types=tuple(device_types),
        level=level,
        frozen_globals={k: encode_global(v) for k, v in sorted(spec.frozen_globals.items())},
        cpp=spec.cpp,
        result_types=tuple(t.__name__ for t in spec.result_types),
    )


# ---- writing ----------------------------------------------------------------------------------

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
        lines = [
            f"ppy: wrote {self.directory}: {n} region{'s' if n != 1 else ''} ({names}), "
            f"{len(self.manifest.extensions)} region extension(s) and the runtime, {MANIFEST}",
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


def write_artifact(
    out_dir: str,
    stem: str,
    program_source: str,
    origin: str,
    regions: list[RegionRecord],
    extensions: dict[str, str],
    runtime: tuple[str, str],
    python_functions: dict[Key, str],
) -> Written:
    """Write the artifact directory; `extensions` maps module name -> built .so, `runtime` is (name, .so).

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
    expected = _cache_checksum(src)
    shutil.copyfile(src, os.path.join(directory, file))
    digest = sha256_file(os.path.join(directory, file))
    if expected is not None and digest != expected:
        raise ArtifactError(
            f"the cached {file} does not match its recorded checksum (a corrupt cache?); "
            "rebuild it (`ppy build -f`, or `%%ppy -f` in the notebook) and retry"
        )
    return ExtensionFile(name, file, digest)


def _cache_checksum(path: str) -> str | None:
    try:
        with open(path + ".json", encoding="utf-8") as fh:
            return json.load(fh).get("sha256")
    except (OSError, ValueError):
        return None  # a module loaded from a build directory has no sidecar


def _extension_path(cache: backend.Cache, module: types.ModuleType | str) -> str:
    """Where the built file of an extension loaded in this process lies."""
    name = module if isinstance(module, str) else module.__name__
    candidates = [cache.so_path(name)]
    loaded = module if not isinstance(module, str) else cache.memory.get(name) or _imported_by_name(name)
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


def default_output(stem: str) -> str:
    return os.path.abspath(f"{stem}-ppy")


def build_program(
    path: str, out_dir: str | None = None, *, cache: backend.Cache, strict: bool = False, force: bool = False
) -> tuple[Written, str]:
    """Compile FILE's regions (like ``ppy run``, without running it) and write its artifact.

    Returns what was written and the build summary.
    """
    from .. import pipeline
    from ..language.frontend import decorated_functions
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
    namespace = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
    binder = pipeline.compile_source(source, namespace, path, cache=cache, force=force, strict=strict)
    report = binder.report
    if binder.module is None or not binder.regions:
        why = "; ".join(f"'{n}': {r}" for n, r in report.python) or "it has no @ppy.opt function"
        raise ArtifactError(f"no region of {path} was built, so there is no artifact to write ({why})")
    lines = source.splitlines()
    tree = ast.parse(source, path)
    last_lines = {
        function_key(node): node.end_lineno
        for node in tree.body
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
    written = write_artifact(
        out_dir,
        stem,
        source,
        os.path.basename(path),
        records,
        {binder.module.__name__: _extension_path(cache, binder.module)},
        (binder.runtime.__name__, _extension_path(cache, binder.runtime)),
        {k: e.reason for k, e in binder.failures.items()},
    )
    return written, report.summary()


def build_command(file: str, output: str | None, *, strict: bool = False, force: bool = False) -> int:
    """``ppy build FILE [-o DIR]``: messages on stderr, an exit status."""
    try:
        written, summary = build_program(file, output, cache=backend.shared_cache(), strict=strict, force=force)
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


# ---- %ppy_export ----------------------------------------------------------------------------------


def regions_in(namespace: dict[str, Any], names: list[str]) -> list[Any]:
    """The regions named (or, with no names, every region bound under its own name in `namespace`)."""
    if not names:
        found = [
            v
            for k, v in namespace.items()
            if getattr(v, "__ppy_region__", False) is True
            and getattr(v, "__name__", None) == k
            and hasattr(v, "__ppy_info__")
        ]
        if not found:
            raise ArtifactError(
                "there is no region in this kernel to export; run a %%ppy cell with @ppy.opt functions first"
            )
        return found
    out = []
    for name in names:
        if name not in namespace:
            raise ArtifactError(f"'{name}' is not defined in this kernel")
        fn = namespace[name]
        if getattr(fn, "__ppy_region__", False) is not True or not hasattr(fn, "__ppy_info__"):
            why = region.explain(fn).reason if callable(fn) else f"it is a {type(fn).__name__}"
            raise ArtifactError(f"'{name}' is not a region ({why}), so it cannot be exported")
        out.append(fn)
    return out


def export_regions(name: str, functions: list[Any], out_dir: str | None = None, *, cache: backend.Cache) -> Written:
    """Write the artifact of regions bound in this process, importable as `name`.

    Its program holds each function's source as it was compiled, and the
    globals those functions read (modules, numbers, importable functions), with
    the values the regions froze at compile time.
    """
    if not name.isidentifier() or name in sys.stdlib_module_names:
        raise ArtifactError(
            f"'{name}' cannot be a module name of its own: use a Python identifier that "
            "is not a standard library module"
        )
    check_stem(name, "the module name")
    out_dir = check_output(out_dir or default_output(name))
    header: dict[str, str] = {}  # global name -> the statement that binds it
    values: dict[str, Any] = {}
    chunks: list[tuple[Any, RegionSpec, list[str]]] = []
    runtime_types = {type(fn) for fn in functions}
    if len(runtime_types) != 1:
        raise ArtifactError("these regions were built by different runtimes; export them separately")
    for fn in functions:
        spec = fn.__ppy_info__.spec
        py = fn.__wrapped__
        node, lines = _function_source(py, spec)
        for gname in _free_names(node):
            frozen = gname in spec.frozen_globals
            g = py.__globals__
            if not frozen and (gname not in g):
                continue  # a builtin, or a name the function would not find either
            value = spec.frozen_globals[gname] if frozen else g[gname]
            if gname in values and not _same_value(values[gname], value):
                raise ArtifactError(
                    f"the regions disagree on the global '{gname}' ({values[gname]!r} vs "
                    f"{value!r} in '{spec.name}'); export them separately"
                )
            values[gname] = value
            header[gname] = _binding(gname, value, spec.name)
        chunks.append((fn, spec, lines))
    program = [
        f"# Exported from a notebook by %ppy_export: {', '.join(s.name for _, s, _ in chunks)}.",
        f"# `import {name}` binds them as regions loaded from the extensions beside this file.",
        *sorted(header.values(), key=_statement_order),
    ]
    records, extensions = [], {}
    devices_of = {}
    for fn, spec, lines in chunks:
        program += ["", ""]
        first = len(program) + 1
        program += lines
        devices_of[spec.name] = fn.__ppy_info__.device_types
        records.append((spec, first, len(program), fn.__ppy_info__.module_name, fn.__ppy_info__.level))
        extensions[fn.__ppy_info__.module_name] = _extension_path(cache, fn.__ppy_info__.module_name)
    program_lines = program + [""]
    regions = [
        region_record(spec, ext, program_lines, first, last, devices_of[spec.name], level)
        for spec, first, last, ext, level in records
    ]
    runtime = _runtime_of(next(iter(runtime_types)))
    written = write_artifact(
        out_dir,
        name,
        "\n".join(program_lines),
        EXPORTED,
        regions,
        extensions,
        (runtime.__name__, _extension_path(cache, runtime)),
        {},
    )
    return dataclasses.replace(written, module_name=name)


def _function_source(py: Callable, spec: RegionSpec) -> tuple[ast.FunctionDef, list[str]]:
    code = py.__code__
    text = "".join(linecache.getlines(code.co_filename))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and function_key(node) == function_key(py):
                lines = text.splitlines()[code.co_firstlineno - 1 : node.end_lineno]
                return node, lines
    raise ArtifactError(
        f"the source of '{spec.name}' is no longer available (its cell's text is gone from "
        "this kernel); re-run its %%ppy cell and export again"
    )


def _statement_order(statement: str) -> tuple[int, str]:
    return (0 if statement.startswith("import ") else 1 if statement.startswith("from ") else 2, statement)


def _free_names(node: ast.FunctionDef) -> list[str]:
    """Global names `node` reads: in decorators, annotations and defaults, and in its body."""
    outer: list[ast.AST] = [
        *node.decorator_list,
        *node.args.defaults,
        *[d for d in node.args.kw_defaults if d is not None],
    ]
    args = [
        *node.args.posonlyargs,
        *node.args.args,
        *node.args.kwonlyargs,
        *[a for a in (node.args.vararg, node.args.kwarg) if a is not None],
    ]
    outer += [a.annotation for a in args if a.annotation is not None]
    if node.returns is not None:
        outer.append(node.returns)
    params = {a.arg for a in args}
    local = {
        n.id for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    names: list[str] = []
    for root, skip in [(o, set()) for o in outer] + [(s, params | local) for s in node.body]:
        for n in ast.walk(root):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in skip | set(names):
                names.append(n.id)
    return names


def _same_value(a: Any, b: Any) -> bool:
    numbers = type(a) is type(b) and type(a) in (int, float, bool)
    return a is b or (numbers and encode_global(a) == encode_global(b))


def _binding(gname: str, value: Any, function: str) -> str:
    """The statement that binds `gname` to `value` in the exported program."""
    if isinstance(value, types.ModuleType):
        mod = value.__name__
        return f"import {mod}" if mod == gname else f"import {mod} as {gname}"
    if type(value) in (int, bool):
        return f"{gname} = {value!r}"
    if type(value) is float:
        return (
            f"{gname} = {value!r}"
            if value == value and abs(value) != float("inf")
            else f"{gname} = float({str(value)!r})"
        )
    where = importable_name(value)
    if where is not None:
        mod, attr = where
        return f"from {mod} import {attr}" if attr == gname else f"from {mod} import {attr} as {gname}"
    raise ArtifactError(
        f"'{function}' reads the global '{gname}' (a {type(value).__name__}), which an "
        "exported module cannot recreate; make it a number or a module attribute, or pass it "
        "as an argument"
    )


def _runtime_of(region_type: type) -> types.ModuleType:
    candidates = [backend.loaded_runtime(), *_imported_runtimes()]
    for mod in candidates:
        if mod is not None and getattr(mod, "RegionFunction", None) is region_type:
            return mod
    raise ArtifactError("the runtime these regions were built with is not known to this process")


# ---- loading ------------------------------------------------------------------------------------

_imported: dict[tuple[str, str], types.ModuleType] = {}  # (real path, sha256) -> module
_runtimes: list[types.ModuleType] = []
_imported_lock = threading.Lock()


def _imported_by_name(name: str) -> types.ModuleType | None:
    with _imported_lock:
        return next((m for m in _imported.values() if m.__name__ == name), None)


def _imported_runtimes() -> list[types.ModuleType]:
    with _imported_lock:
        return list(_runtimes)


class _NotLoaded(Exception):
    """Why an artifact's extensions must not be loaded into this process."""


def _verify(directory: str, ext: ExtensionFile) -> str:
    """The path of an extension of the artifact whose sha256 matches the manifest."""
    path = os.path.join(directory, ext.file)
    if not os.path.isfile(path):
        raise _NotLoaded(f"{ext.file} is missing")
    try:
        digest = sha256_file(path)
    except OSError as exc:
        raise _NotLoaded(f"{ext.file} cannot be read ({exc.strerror})") from None
    if digest != ext.sha256:
        raise _NotLoaded(f"{ext.file} does not match the sha256 in {MANIFEST} (altered or corrupt)")
    return path


def _import_checked(directory: str, ext: ExtensionFile) -> types.ModuleType:
    """Import an extension of the artifact after checking its sha256; never a file that fails it."""
    path = _verify(directory, ext)
    key = (os.path.realpath(path), ext.sha256)
    with _imported_lock:
        if key in _imported:
            return _imported[key]
        try:
            module = backend.import_extension(ext.module, path)
        except (ImportError, OSError) as exc:
            raise _NotLoaded(f"{ext.file} could not be loaded ({exc})") from None
        _imported[key] = module
        return module


def _load_runtime(directory: str, ext: ExtensionFile) -> types.ModuleType:
    # One RegionFunction type per toolchain: reuse the one this process already built or loaded.
    built = backend.loaded_runtime()
    if built is not None and built.__name__ == ext.module:
        return built
    module = _import_checked(directory, ext)
    with _imported_lock:
        if module not in _runtimes:
            _runtimes.append(module)
    return module


@dataclass
class ArtifactBinder:
    """Hands each decorated function of the program its region from the artifact, as its ``def`` runs."""

    directory: str
    program_path: str
    program_lines: list[str]
    manifest: Manifest | None = None
    problem: str | None = None  # why nothing was loaded; the functions run as Python
    runtime: Any = None
    modules: dict[str, Any] = field(default_factory=dict)
    bound: list[Any] = field(default_factory=list)

    def bind(self, fn: Callable, level: int | None) -> Callable:
        code = getattr(fn, "__code__", None)
        if code is None or code.co_filename != self.program_path:
            return fn  # defined elsewhere: not this artifact's
        if level == 0:
            fn.__ppy_reason__ = "ppy.opt(0): never compiled"  # type: ignore[attr-defined]
            return fn
        if self.problem is not None:
            fn.__ppy_reason__ = f"the artifact's regions were not loaded: {self.problem}"  # type: ignore
            return fn
        assert self.manifest is not None
        key = function_key(fn)
        record = next((r for r in self.manifest.regions if r.key == key), None)
        if record is None:
            reason = self.manifest.python_functions.get(key) or (
                "the artifact has no region for it (the program changed since it was built?)"
            )
            fn.__ppy_reason__ = reason  # type: ignore[attr-defined]
            return fn
        stale = self._stale(record, fn)
        if stale is None:
            try:
                reg = region.make_region(
                    self.runtime, self.modules[record.extension], record.spec(self.program_path), fn, record.level
                )
            except Exception as exc:  # an extension that does not fit this runtime: run the Python body
                stale = f"it could not be bound ({type(exc).__name__}: {exc})"
            else:
                self.bound.append(reg)
                return reg
        fn.__ppy_reason__ = stale  # type: ignore[attr-defined]
        warnings.warn(
            f"ppy: '{record.name}' from the artifact in {self.directory} runs as Python: {stale}. "
            f"Rebuild the artifact to compile it again.",
            PpyArtifactWarning,
            stacklevel=3,
        )
        return fn

    def _stale(self, record: RegionRecord, fn: Callable) -> str | None:
        if source_sha256(self.program_lines, record.first_line, record.last_line) != record.source_sha256:
            return f"its source in {os.path.basename(self.program_path)} changed since the artifact was built"
        g = getattr(fn, "__globals__", {})
        for name, enc in record.frozen_globals.items():
            if name in g and encode_global(g[name]) != enc:
                now, then = _describe_global(encode_global(g[name])), _describe_global(enc)
                return f"the global '{name}' is {now} here, but the region was compiled with {then}"
        return None

    def message(self) -> str:
        """The one warning a process gets when the artifact's regions were not loaded."""
        regions = self.manifest.regions if self.manifest else ()
        what = (
            f"its {len(regions)} region{'s' if len(regions) != 1 else ''} ({', '.join(r.name for r in regions)})"
            if regions
            else "its functions"
        )
        origin = self.manifest.origin if self.manifest and self.manifest.origin else "FILE.ppy"
        if origin == EXPORTED:
            again = "export it again with %ppy_export from a kernel with this torch and Python"
        else:
            again = f"rebuild it with this torch and Python: ppy build {origin} -o {self.directory}"
        return (
            f"ppy: the artifact in {self.directory} was not loaded, so {what} run as Python "
            f"(same results, without the speed-up): {self.problem}. To load it, {again}"
        )


def open_artifact(directory: str, program_path: str, source: str) -> ArtifactBinder:
    """Check the manifest against this process and import the extensions; never raises for a bad artifact.

    On any problem the binder's ``problem`` says what, and it binds nothing.
    """
    binder = ArtifactBinder(directory, program_path, source.splitlines())
    try:
        try:
            with open(os.path.join(directory, MANIFEST), encoding="utf-8") as fh:
                data = json.load(fh)
        except OSError as exc:
            raise _NotLoaded(f"{MANIFEST} cannot be read ({exc.strerror})") from None
        except ValueError as exc:
            raise _NotLoaded(f"{MANIFEST} is not valid JSON ({exc})") from None
        try:
            binder.manifest = Manifest.from_json(data)
            problems = mismatches(binder.manifest.built_for, process_facts())
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise _NotLoaded(f"{MANIFEST} cannot be used: {exc}") from None
        if problems:
            raise _NotLoaded("it was built for " + "; ".join(problems))
        manifest = binder.manifest
        for ext in (manifest.runtime, *manifest.extensions):  # all of them, before importing any
            _verify(directory, ext)
        binder.runtime = _load_runtime(directory, manifest.runtime)
        binder.modules = {e.module: _import_checked(directory, e) for e in manifest.extensions}
        missing = {r.extension for r in manifest.regions} - set(binder.modules)
        if missing:
            raise _NotLoaded(f"{MANIFEST} names no file for {', '.join(sorted(missing))}")
        binder.runtime.set_fallback_hook(region.FALLBACKS)
    except _NotLoaded as exc:
        binder.problem = str(exc)
    return binder


def exec_program(loader_file: str, namespace: dict[str, Any], program: str) -> None:
    """Run the artifact's program in `namespace` (the loader's module) with its regions bound.

    Called by the generated ``<stem>.py``; a bad artifact costs one warning, and
    the program runs as plain Python.
    """
    directory = os.path.dirname(os.path.abspath(loader_file))
    program_path = os.path.join(directory, program)
    try:
        with open(program_path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError as exc:
        raise ArtifactError(
            f"the artifact in {directory} is incomplete: cannot read {program} "
            f"({exc.strerror}); copy the whole directory or rebuild it"
        ) from None
    binder = open_artifact(directory, program_path, source)
    if binder.problem is not None:
        warnings.warn(binder.message(), PpyArtifactWarning, stacklevel=2)
    code = compile(source, program_path, "exec", dont_inherit=True)
    token = decorator.activate(binder)
    try:
        exec(code, namespace)
    finally:
        decorator.deactivate(token)
