"""Loading an artifact: check its manifest against this process, import its extensions, bind its regions.

The loader ``<stem>.py`` calls ``exec_program``: it opens the artifact
(``open_artifact``: the manifest must describe this process and every ``.so``
must match its sha256, or nothing is imported), then runs the program under
its own file name with an ``ArtifactBinder`` active, so each ``@ppy.opt``
function gets its region as its ``def`` runs. A bad artifact costs one
warning, and the program runs as plain Python.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import backend, decorator, region
from ..binding import Binder, StaysPython, Target
from ..language.namespace import Key
from .manifest import (
    EXPORTED,
    MANIFEST,
    ArtifactError,
    ExtensionFile,
    FrozenGlobal,
    Manifest,
    PpyArtifactWarning,
    encode_global,
    mismatches,
    process_facts,
    sha256_file,
    source_sha256,
)


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


class ImportedExtensions:
    """The extensions this process imported from artifacts: each file once, and the runtimes among them."""

    def __init__(self) -> None:
        self._modules: dict[tuple[str, str], types.ModuleType] = {}  # (real path, sha256) -> module
        self._runtimes: list[types.ModuleType] = []
        self._lock = threading.Lock()

    def by_name(self, name: str) -> types.ModuleType | None:
        with self._lock:
            return next((m for m in self._modules.values() if m.__name__ == name), None)

    def runtimes(self) -> list[types.ModuleType]:
        with self._lock:
            return list(self._runtimes)

    def extension(self, directory: str, ext: ExtensionFile) -> types.ModuleType:
        """Import an extension of the artifact after checking its sha256; never a file that fails it."""
        path = _verify(directory, ext)
        key = (os.path.realpath(path), ext.sha256)
        with self._lock:
            if key in self._modules:
                return self._modules[key]
            try:
                module = backend.import_extension(ext.module, path)
            except (ImportError, OSError) as exc:
                raise _NotLoaded(f"{ext.file} could not be loaded ({exc})") from None
            self._modules[key] = module
            return module

    def runtime(self, directory: str, ext: ExtensionFile) -> types.ModuleType:
        # One RegionFunction type per toolchain: reuse the one this process already built or loaded.
        built = backend.loaded_runtime()
        if built is not None and built.__name__ == ext.module:
            return built
        module = self.extension(directory, ext)
        with self._lock:
            if module not in self._runtimes:
                self._runtimes.append(module)
        return module


IMPORTED = ImportedExtensions()


@dataclass
class ArtifactBinder(Binder):
    """Hands each decorated function of the program its region from the artifact, as its ``def`` runs.

    ``filename`` is the program's path: functions defined elsewhere are not the artifact's.
    """

    directory: str = ""
    program_lines: list[str] = field(default_factory=list)
    manifest: Manifest | None = None
    problem: str | None = None  # why nothing was loaded; the functions run as Python
    runtime: Any = None
    modules: dict[str, Any] = field(default_factory=dict)

    def find(self, key: Key, fn: Callable, level: int) -> Target | StaysPython:
        if self.problem is not None:
            return StaysPython(f"the artifact's regions were not loaded: {self.problem}", tell=False)
        assert self.manifest is not None
        record = self.manifest.region(key)
        if record is None:
            reason = self.manifest.python_functions.get(key) or (
                "the artifact has no region for it (the program changed since it was built?)"
            )
            return StaysPython(reason, tell=False)
        if source_sha256(self.program_lines, record.spec.first_line, record.last_line) != record.source_sha256:
            return StaysPython(f"its source in {os.path.basename(self.filename)} changed since the artifact was built")
        # The level it was built at: the written one only decides whether it is compiled at all.
        return Target(record.spec_for(self.filename), self.modules[record.extension], self.runtime, record.level)

    def same_global(self, then: FrozenGlobal, now: Any) -> bool:
        return then.matches(now)

    def changed_global(self, name: str, then: FrozenGlobal, now: Any) -> str:
        now_shown = FrozenGlobal(encode_global(now))
        return f"the global '{name}' is {now_shown} here, but the region was compiled with {then}"

    def make(self, target: Target, fn: Callable) -> Any:
        try:
            return super().make(target, fn)
        except Exception as exc:  # an extension that does not fit this runtime: run the Python body
            return self.stays_python(fn, StaysPython(f"it could not be bound ({type(exc).__name__}: {exc})"))

    def tell(self, fn: Callable, reason: str, hint: str | None) -> None:
        warnings.warn(
            f"ppy: '{fn.__name__}' from the artifact in {self.directory} runs as Python: {reason}. "
            f"Rebuild the artifact to compile it again.",
            PpyArtifactWarning,
            stacklevel=_stacklevel_in(self.filename),
        )

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


def _stacklevel_in(filename: str) -> int:
    """The ``stacklevel`` that points a warning at the innermost frame running `filename` (the ``def``)."""
    frame, level = sys._getframe(1), 1  # the caller of warnings.warn is level 1
    while frame is not None and frame.f_code.co_filename != filename:
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 1


def open_artifact(directory: str, program_path: str, source: str) -> ArtifactBinder:
    """Check the manifest against this process and import the extensions; never raises for a bad artifact.

    On any problem the binder's ``problem`` says what, and it binds nothing.
    """
    binder = ArtifactBinder(program_path, directory, source.splitlines())
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
        for m in manifest.at_calls:
            _verify(directory, m.extension)
        binder.runtime = IMPORTED.runtime(directory, manifest.runtime)
        backend.adopt_runtime(binder.runtime)  # regions built at calls are made by the same RegionFunction type
        for m in manifest.at_calls:  # found by their code where a call would build them (backend.shipped)
            backend.shipped.register(m.code, m.module, os.path.join(directory, m.file), m.sha256)
        binder.modules = {e.module: IMPORTED.extension(directory, e) for e in manifest.extensions}
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
    finder, foreground = None, contextlib.nullcontext()
    if binder.problem is None and binder.manifest.at_calls:  # imported files' cells may be among them
        from .. import imports, variants

        finder = imports.install(lambda: imports.Settings(cache=backend.shared_cache(), show=None))
        foreground = variants.blocking()  # calls find their modules as the run that built them did
    token = decorator.activate(binder)
    try:
        with foreground:
            exec(code, namespace)
    finally:
        decorator.deactivate(token)
        if finder is not None:
            imports.uninstall(finder)
