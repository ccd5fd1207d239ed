"""Subprocesses the tests start: the interpreter they run, on a PATH of the test's choosing."""

from __future__ import annotations

import os
import shlex
import sys


def python_wrapper(directory, name: str = "python") -> str:
    """`directory/name`: a script that runs this interpreter, for a PATH with no compiler on it.

    Not a symlink to ``sys.executable``: a virtualenv's python linked from another
    directory starts without the virtualenv (no torch, no ppy_magic).
    """
    path = os.path.join(str(directory), name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    os.chmod(path, 0o755)
    return path
