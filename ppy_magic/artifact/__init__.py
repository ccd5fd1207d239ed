"""Built artifacts: a program's regions, loadable where no compiler is (``ppy build``, ``%ppy_export``).

An artifact is a directory::

    <stem>.py           the loader: running it runs the program, importing it binds the regions
    <stem>.ppy          the program itself (``python <stem>.ppy`` still runs it as plain Python)
    ppy_cell_*.so       the compiled regions, one extension per cell
    ppy_runtime_*.so    the runtime (``RegionFunction``) they were built against
    ppy_manifest.json   what it was built for, a sha256 per file, and how to bind each region

``manifest`` is the format and its checks against this process; ``write``
writes the directory (and is ``ppy build``); ``export`` is ``%ppy_export``;
``load`` verifies and imports the extensions and runs the program with its
regions bound. Loaders already written call ``ppy_magic.artifact.exec_program``,
and ``ppy_magic.artifact.PpyArtifactWarning`` is documented: both stay here.
"""

from __future__ import annotations

from .export import check_module_name, export_regions, regions_in
from .load import ArtifactBinder, exec_program, open_artifact
from .manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    ArtifactError,
    Manifest,
    PpyArtifactWarning,
    RegionRecord,
    source_sha256,
)
from .write import Written, build_command, build_program

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "ArtifactBinder",
    "ArtifactError",
    "Manifest",
    "PpyArtifactWarning",
    "RegionRecord",
    "Written",
    "build_command",
    "build_program",
    "exec_program",
    "check_module_name",
    "export_regions",
    "open_artifact",
    "regions_in",
    "source_sha256",
]
