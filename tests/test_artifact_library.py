"""``ppy build --run``: a program that compiles a library model with ``ppy_magic.compile`` runs once while
it builds, and the modules its calls built ship with the artifact. Loaded where there is no compiler,
the program's calls find them by their code: the same regions run, bit for bit the same output, and
nothing is built (the empty cache stays empty)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from ppy_magic import artifact
from tests.support.processes import python_wrapper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent("""\
    # A library model compiled with ppy_magic.compile, called a few times; writes its output and how it ran.
    import json
    import sys

    import torch

    import ppy_magic
    from tests.support import library_code as lib

    torch.manual_seed(0)
    model = lib.Model(lib.Config()).eval()
    ppy_magic.compile(model)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for _ in range(8):
            y = model(x)
    info = ppy_magic.explain(model.forward)
    torch.save(y.last_hidden_state, sys.argv[1] + ".pt")
    with open(sys.argv[1] + ".json", "w") as fh:
        json.dump({"calls": info.calls, "fallbacks": info.fallbacks, "tree": str(ppy_magic.explain(model))}, fh)
""")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def _read(stem: str) -> tuple[dict, torch.Tensor]:
    with open(stem + ".json", encoding="utf-8") as fh:
        return json.load(fh), torch.load(stem + ".pt")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("library-artifact")
    program = d / "infer.py"
    program.write_text(PROGRAM)
    out = d / "infer-ppy"
    done = subprocess.run(
        # options after FILE are ppy build's; the program's arguments follow --
        [sys.executable, "-m", "ppy_magic.cli", "build", "--run", str(program), "-o", str(out), "--", str(d / "built")],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "module(s) its run built at calls" in done.stderr, done.stderr
    return str(out), str(d)


def test_the_manifest_lists_the_modules_built_at_calls_with_their_code(built):
    out, _ = built
    with open(os.path.join(out, artifact.MANIFEST), encoding="utf-8") as fh:
        data = json.load(fh)
    at_calls = data["built_at_calls"]
    assert at_calls and not data["regions"]  # nothing decorated: every region came from a call
    for m in at_calls:
        assert os.path.exists(os.path.join(out, m["file"])) and len(m["code"]) == 64
    manifest = artifact.Manifest.from_json(data)
    assert len(manifest.at_calls) == len(at_calls)


def test_with_no_compiler_the_same_regions_run_and_nothing_is_built(built, tmp_path):
    out, d = built
    info, y = _read(os.path.join(d, "built"))
    assert info["calls"] > 0 and info["fallbacks"] == 0, info
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python_wrapper(bin_dir)
    empty = tmp_path / "empty-cache"
    done = subprocess.run(
        ["python", os.path.join(out, "infer.py"), str(tmp_path / "loaded")],
        env=_env(PATH=str(bin_dir), CXX="/nonexistent/c++", CC="/nonexistent/cc", PPY_CACHE_DIR=str(empty)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    loaded, y2 = _read(str(tmp_path / "loaded"))
    assert torch.equal(y, y2)
    assert loaded["tree"] == info["tree"], loaded["tree"]  # the same regions, the same calls of each
    assert (loaded["calls"], loaded["fallbacks"]) == (info["calls"], 0)
    assert "build failed" not in loaded["tree"]
    assert not os.listdir(empty / "lib")  # every module came from the artifact


def test_without_run_a_program_with_no_decorated_function_is_refused_with_the_way_out(tmp_path):
    program = tmp_path / "infer.py"
    program.write_text(PROGRAM)
    done = subprocess.run(
        [sys.executable, "-m", "ppy_magic.cli", "build", "-o", str(tmp_path / "out"), str(program)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert "ppy build --run FILE" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_recording_keeps_the_modules_of_its_own_context_and_of_the_work_it_hands_over():
    """``ppy build`` ships what its program's calls built, never a module another thread of the
    process loads meanwhile (a notebook's background variant, an earlier program's queued build)."""
    import threading

    from ppy_magic import variants
    from ppy_magic.backend import shipped

    def elsewhere(name: str, recorders: tuple | None = None) -> None:
        def use() -> None:
            if recorders is None:
                shipped.note_use(name, "0" * 64, "/x.so")
            else:
                with shipped.into(recorders):
                    shipped.note_use(name, "1" * 64, "/y.so")

        t = threading.Thread(target=use)
        t.start()
        t.join()

    with shipped.recording() as outer:
        elsewhere("other_thread")  # not this program's
        queued = variants._Build(None, None, None, None, None, (), None)  # a variant its call queued
        with shipped.recording() as inner:
            shipped.note_use("own", "2" * 64, "/z.so")
        elsewhere("handed_over", queued.recorders)
    assert set(outer) == {"own", "handed_over"} and set(inner) == {"own"}
    assert outer["handed_over"] == ("1" * 64, "/y.so")
    assert not shipped.recording_now() and shipped.active() == ()
