"""Built artifacts: a program's regions as extensions beside a manifest, loaded with no compiler."""

from .program import *  # noqa: F403  (split by responsibility below)
from .program import ArtifactBinder, PpyArtifactWarning, build_command, exec_program, export_regions, open_artifact
