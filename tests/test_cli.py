"""The terminal and the notebook run the same program the same way (subprocesses)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "torch_region.ppy")
PPY = [sys.executable, "-m", "ppy_magic.cli"]

IN_A_CELL = textwrap.dedent("""
    import sys
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "ppy_magic")
    source = open(sys.argv[1]).read()
    result = shell.run_cell("%%ppy\\n" + source)
    sys.exit(0 if result.success else 1)
""")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600, **kw)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def facts(stdout: str) -> tuple[str, str, str]:
    active = re.search(r"# region active: (True|False)", stdout).group(1)
    sample = re.search(r"sample=(\S+)", stdout).group(1)
    autograd = re.search(r"autograd survives the region: (True|False)", stdout).group(1)
    return active, sample, autograd


def test_the_example_runs_the_same_everywhere():
    plain = facts(run([sys.executable, EXAMPLE]).stdout)
    ppy_file = run(PPY + [EXAMPLE])
    ppy_run = run(PPY + ["run", EXAMPLE])
    cell = run([sys.executable, "-c", IN_A_CELL, EXAMPLE])
    assert plain[0] == "False"
    for proc in (ppy_file, ppy_run, cell):
        active, sample, autograd = facts(proc.stdout)
        assert active == "True", proc.stdout + proc.stderr
        assert sample == plain[1]
        assert autograd == "True"
    assert "2 regions (layer, residual)" in ppy_file.stderr


def test_ppy_file_runs_as_main_with_argv(tmp_path):
    prog = tmp_path / "prog.ppy"
    prog.write_text(
        textwrap.dedent("""
        import sys
        import torch
        import ppy

        @ppy.opt(3)
        def double(x):
            return x + x

        @ppy.opt(3)
        def stays(x):
            try:
                pass
            finally:
                pass
            return x

        def annotated(x: int) -> int:
            return x

        if __name__ == "__main__":
            print("argv", sys.argv[1:])
            print("annotations", annotated.__annotations__["x"] is int)  # not ppy's own __future__ import
            print("region", double.__ppy_region__, getattr(stays, "__ppy_region__", False))
            print("value", double(torch.ones(2)).tolist())
    """)
    )
    proc = run(PPY + [str(prog), "a", "--b"])
    assert "argv ['a', '--b']" in proc.stdout
    assert "region True False" in proc.stdout
    assert "annotations True" in proc.stdout
    assert "value [2.0, 2.0]" in proc.stdout
    assert re.search(r"'stays' stays Python: at 12:5: `try`", proc.stderr), proc.stderr


def test_ppy_file_builds_a_variant_a_call_needs_before_running_it(tmp_path):
    """A program waits for the variant its call needs (no background build): that very call runs the region."""
    prog = tmp_path / "prog.ppy"
    prog.write_text(
        textwrap.dedent("""
        import torch
        import torch.nn.functional as F
        import ppy

        @ppy.opt(3)
        def apply(x, act):
            return act(x) * 2

        x = torch.randn(3)
        y = apply(x, F.gelu)
        print("region", apply.__ppy_region__, apply.calls, torch.equal(y, F.gelu(x) * 2))
    """)
    )
    proc = run(PPY + [str(prog)])
    assert "region True 1 True" in proc.stdout, proc.stdout + proc.stderr


def test_ppy_reports_a_missing_file():
    proc = subprocess.run(PPY + ["no/such/file.ppy"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert "cannot read no/such/file.ppy" in proc.stderr


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"]])
def test_help(args):
    proc = run(PPY + args)
    assert "usage: ppy" in proc.stdout
