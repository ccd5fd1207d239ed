"""Built artifacts: `ppy build` and `%ppy_export` write regions that load with no compiler.

One artifact is built per test session (a tiny DistributedDataParallel training
program); most tests load copies of it in this process, and a few run it the way
users do: `torchrun` and plain `python` with no compiler on PATH.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import runpy
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from ppy_magic import artifact, backend, cli, explain
from tests.support.processes import python_wrapper

TRAIN = textwrap.dedent("""\
    # A tiny model trained with DistributedDataParallel; its forward and its loss call regions.
    import argparse
    import os
    import sys

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import ppy

    SCALE = 0.5


    @ppy.opt(3)
    def hidden(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ w + b)


    @ppy.opt(3)
    def head(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor, scale: float) -> torch.Tensor:
        return (h @ w + b) * scale


    @ppy.opt(3)
    def squared_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        d = pred - target
        return d * d * SCALE


    @ppy.opt(3)
    def stays_python(x: torch.Tensor) -> torch.Tensor:
        print("a region has no Python side effects")
        return x + 1


    class TinyNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.w1 = nn.Parameter(torch.randn(4, 8, generator=g) * 0.5)
            self.b1 = nn.Parameter(torch.zeros(8))
            self.w2 = nn.Parameter(torch.randn(8, 1, generator=g) * 0.5)
            self.b2 = nn.Parameter(torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return head(hidden(x, self.w1, self.b1), self.w2, self.b2, 2.0)


    def batch(rank: int, step: int):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(16, 4, generator=g)
        return x, torch.sin(x.sum(dim=1, keepdim=True))


    def main() -> None:
        p = argparse.ArgumentParser()
        p.add_argument("--steps", type=int, default=5)
        p.add_argument("--out", required=True)
        args = p.parse_args()
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        model = nn.parallel.DistributedDataParallel(TinyNet())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for step in range(args.steps):
            x, y = batch(rank, step)
            loss = squared_error(model(x), y).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        import ppy_magic

        torch.save({
            "world": world,
            "params": {k: v.detach().clone() for k, v in model.module.named_parameters()},
            "losses": losses,
            "regions": {f.__name__: (getattr(f, "__ppy_region__", False), getattr(f, "calls", 0),
                                     getattr(f, "fallbacks", 0)) for f in (hidden, head, squared_error)},
            "stays_python": getattr(stays_python, "__ppy_region__", False),
            "toolchain": str(ppy_magic.toolchain_ready()),
            "cpp_extension_imported": "torch.utils.cpp_extension" in sys.modules,
        }, os.path.join(args.out, f"rank{rank}.pt"))
        dist.destroy_process_group()


    if __name__ == "__main__":
        main()
""")

REGIONS = ("hidden", "head", "squared_error")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    """`ppy build train.ppy -o DIR`, once; tests copy DIR before changing anything in it."""
    src = tmp_path_factory.mktemp("src") / "train.ppy"
    src.write_text(TRAIN)
    out = str(tmp_path_factory.mktemp("artifacts") / "train-ppy")
    assert cli.main(["build", str(src), "-o", out]) == 0
    return out


@pytest.fixture
def artifact_copy(built, tmp_path) -> str:
    copy = str(tmp_path / "train-ppy")
    shutil.copytree(built, copy)
    return copy


@pytest.fixture(scope="module")
def no_compiler_bin(tmp_path_factory) -> str:
    """A PATH with python and torchrun and nothing else: no c++, gcc, g++ or ninja."""
    bin_dir = tmp_path_factory.mktemp("bin")
    python_wrapper(bin_dir)  # a script, not a symlink: a symlinked venv python loses the venv
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(f"#!{sys.executable}\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n")
    torchrun.chmod(0o755)
    return str(bin_dir)


def test_the_python_on_the_no_compiler_path_is_this_interpreter(no_compiler_bin, tmp_path):
    """In a virtualenv too: the workers must run with this venv's torch and ppy_magic, not the base Python's."""
    done = subprocess.run(
        ["python", "-c", "import sys; print(sys.prefix)"],
        env=no_compiler_env(no_compiler_bin, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.strip() == sys.prefix, done.stdout + done.stderr


def no_compiler_env(bin_dir: str, tmp_path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PATH=bin_dir,
        CXX="/nonexistent/c++",
        CC="/nonexistent/cc",
        OMP_NUM_THREADS="1",
        PPY_CACHE_DIR=str(tmp_path / "empty-cache"),
    )  # nothing to hit, and it must stay empty
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # a CI container's hostname may not resolve
    return env


def manifest_of(directory: str) -> dict:
    with open(os.path.join(directory, artifact.MANIFEST), encoding="utf-8") as fh:
        return json.load(fh)


def rewrite_manifest(directory: str, change) -> None:
    data = manifest_of(directory)
    change(data)
    with open(os.path.join(directory, artifact.MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(data, fh)


def load_in_process(directory: str, monkeypatch=None, forbid_imports: bool = False):
    """Import the artifact's loader as a module (its `main()` does not run); return (namespace, warnings)."""
    if forbid_imports:

        def refuse(name, path):
            raise AssertionError(f"{path} was imported although the artifact is not usable")

        monkeypatch.setattr(backend, "import_extension", refuse)
        monkeypatch.setattr(backend.cache, "import_extension", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ns = runpy.run_path(os.path.join(directory, "train.py"), run_name="train_artifact")
    ours = [w for w in caught if issubclass(w.category, artifact.PpyArtifactWarning)]
    return ns, ours


def assert_runs_as_python(ns: dict) -> None:
    x, w, b = torch.randn(3, 4), torch.randn(4, 8), torch.randn(8)
    for name in REGIONS:
        assert getattr(ns[name], "__ppy_region__", False) is False, name
    assert torch.equal(ns["hidden"](x, w, b), torch.tanh(x @ w + b))


# ---- what `ppy build` writes ---------------------------------------------------------------


def test_build_writes_program_loader_extensions_and_manifest(built):
    m = manifest_of(built)
    assert m["format"] == artifact.FORMAT and m["format_version"] == artifact.FORMAT_VERSION
    assert m["torch"] == {
        "version": torch.__version__,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
    }
    assert m["python"]["version"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    assert m["platform"]["tag"] and m["compiler"]["name"] and m["ppy_magic"]
    with open(os.path.join(built, m["program"]), encoding="utf-8") as fh:
        assert fh.read() == TRAIN  # the program travels unchanged: its line numbers are the user's
    for ext in [m["runtime"], *m["extensions"]]:
        with open(os.path.join(built, ext["file"]), "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == ext["sha256"]
    assert m["runtime"]["module"].startswith("ppy_runtime_") and len(m["extensions"]) == 1
    regions = {r["name"]: r for r in m["regions"]}
    assert sorted(regions) == sorted(REGIONS)
    assert regions["head"]["signature"] == "head(h: Tensor, w: Tensor, b: Tensor, scale: float) -> Tensor"
    assert regions["head"]["kinds"] == "TTTF" and regions["head"]["device_types"][0] == "cpu"
    lines = TRAIN.splitlines()
    for r in regions.values():
        assert lines[r["first_line"] - 1].startswith("@ppy.opt") and lines[r["first_line"]].startswith("def ")
        assert r["source_sha256"] == artifact.source_sha256(lines, r["first_line"], r["last_line"])
    assert regions["squared_error"]["frozen_globals"]["SCALE"] == {"float": (0.5).hex()}
    assert [p["name"] for p in m["python_functions"]] == ["stays_python"]
    assert sorted(os.listdir(built)) == sorted(
        ["train.py", "train.ppy", artifact.MANIFEST, m["runtime"]["file"], m["extensions"][0]["file"]]
    )


def test_the_artifact_binds_regions_that_match_eager(artifact_copy):
    ns, warned = load_in_process(artifact_copy)
    assert warned == []
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(5, 4, generator=g), torch.randn(4, 8, generator=g), torch.randn(8, generator=g)
    for name in REGIONS:
        assert ns[name].__ppy_region__ is True
    assert torch.equal(ns["hidden"](x, w, b), ns["hidden"].__wrapped__(x, w, b))
    assert ns["hidden"].calls == 1 and ns["hidden"].fallbacks == 0
    assert ns["stays_python"].__ppy_reason__.startswith("at 33:")  # the build's own reason, located
    why = explain(ns["squared_error"])
    assert why.is_region and "SCALE" in str(why) and "at::_ops::mul" in str(why)
    with pytest.raises(RuntimeError) as info:  # shapes that do not multiply: eager's error, with our line
        ns["hidden"](x, torch.randn(3, 8), b)
    assert any("line 17" in note for note in getattr(info.value, "__notes__", []))


def test_a_second_build_replaces_the_artifact(built, tmp_path):
    src = tmp_path / "train.ppy"
    src.write_text(TRAIN)
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.so").write_text("not ours")
    assert cli.main(["build", str(src), "-o", str(out)]) == 1  # not an artifact: left alone
    assert os.listdir(out) == ["stale.so"]
    shutil.rmtree(out)
    assert cli.main(["build", str(src), "-o", str(out)]) == 0
    (out / "leftover.txt").write_text("from an earlier artifact")
    assert cli.main(["build", str(src), "-o", str(out)]) == 0
    assert "leftover.txt" not in os.listdir(out) and "train.py" in os.listdir(out)


def test_build_explains_what_it_cannot_do(tmp_path, capsys):
    assert cli.main(["build", str(tmp_path / "missing.ppy")]) == 1
    assert "cannot read" in capsys.readouterr().err
    plain = tmp_path / "plain.ppy"
    plain.write_text("import torch\n\ndef f(x):\n    return x\n")
    assert cli.main(["build", str(plain), "-o", str(tmp_path / "plain-out")]) == 1
    assert "no @ppy.opt function" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "plain-out")
    named = tmp_path / "ppy.ppy"
    named.write_text("import ppy\n")
    assert cli.main(["build", str(named)]) == 1
    assert "shadow" in capsys.readouterr().err


# ---- an artifact that must not load: one warning, Python bodies ---------------------------------


MISMATCHES = {
    "torch version": lambda m: m["torch"].update(version="2.0.0+cpu"),
    "C++ ABI": lambda m: m["torch"].update(cxx11_abi=not m["torch"]["cxx11_abi"]),
    "CUDA": lambda m: m["torch"].update(cuda="99.9"),
    "Python": lambda m: m["python"].update(version="3.99.0"),
    "platform": lambda m: m["platform"].update(tag="plan9-mips"),
}


@pytest.mark.parametrize("what", sorted(MISMATCHES))
def test_a_manifest_for_another_process_warns_once_and_loads_nothing(artifact_copy, monkeypatch, what):
    rewrite_manifest(artifact_copy, MISMATCHES[what])
    ns, warned = load_in_process(artifact_copy, monkeypatch, forbid_imports=True)
    assert len(warned) == 1
    text = str(warned[0].message)
    assert "was not loaded" in text and "run as Python" in text and "ppy build train.ppy" in text
    assert "this process:" in text
    assert_runs_as_python(ns)
    assert "not loaded" in ns["hidden"].__ppy_reason__


def test_the_mismatch_message_names_both_versions(artifact_copy, monkeypatch):
    rewrite_manifest(artifact_copy, MISMATCHES["torch version"])
    _, warned = load_in_process(artifact_copy, monkeypatch, forbid_imports=True)
    assert f"torch 2.0.0+cpu (this process: {torch.__version__})" in str(warned[0].message)


def _flip_bytes(path: str) -> None:
    with open(path, "r+b") as fh:
        fh.seek(4096)
        chunk = fh.read(16)
        fh.seek(4096)
        fh.write(bytes(b ^ 0xFF for b in chunk))


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


BREAKAGES = {
    "corrupt cell extension": lambda d, m: _flip_bytes(os.path.join(d, m["extensions"][0]["file"])),
    "truncated runtime": lambda d, m: open(os.path.join(d, m["runtime"]["file"]), "wb").close(),
    "missing cell extension": lambda d, m: os.remove(os.path.join(d, m["extensions"][0]["file"])),
    "manifest not JSON": lambda d, m: _write(os.path.join(d, artifact.MANIFEST), "{"),
    "manifest from the future": lambda d, m: rewrite_manifest(d, lambda x: x.update(format_version=99)),
    "extension outside the directory": lambda d, m: rewrite_manifest(
        d, lambda x: x["extensions"][0].update(file="../" + x["extensions"][0]["file"])
    ),
}


@pytest.mark.parametrize("what", sorted(BREAKAGES))
def test_a_broken_artifact_warns_once_and_runs_python(artifact_copy, monkeypatch, what):
    BREAKAGES[what](artifact_copy, manifest_of(artifact_copy))
    monkeypatch.setattr(backend.runtime_module, "_runtime", None)  # so the artifact's own runtime file is checked too
    ns, warned = load_in_process(artifact_copy, monkeypatch, forbid_imports=True)
    assert len(warned) == 1, [str(w.message) for w in warned]
    assert "was not loaded" in str(warned[0].message)
    assert_runs_as_python(ns)


def test_an_edited_region_runs_as_python_and_the_others_still_load(artifact_copy):
    program = os.path.join(artifact_copy, "train.ppy")
    with open(program, encoding="utf-8") as fh:
        text = fh.read()
    text = text.replace("return torch.tanh(x @ w + b)", "return torch.sigmoid(x @ w + b)")
    text = text.replace("SCALE = 0.5", "SCALE = 0.25")
    with open(program, "w", encoding="utf-8") as fh:
        fh.write(text)
    ns, warned = load_in_process(artifact_copy)
    messages = sorted(str(w.message) for w in warned)
    assert len(messages) == 2
    assert "'hidden'" in messages[0] and "source" in messages[0] and "changed" in messages[0]
    assert "'squared_error'" in messages[1] and "SCALE" in messages[1] and "0.25" in messages[1]
    assert {w.filename for w in warned} == {program}  # each warning points at the function in the program
    lines = {w.lineno for w in warned}
    assert all(text.splitlines()[n - 1].startswith(("@ppy.opt", "def ")) for n in lines), lines
    assert getattr(ns["hidden"], "__ppy_region__", False) is False
    assert getattr(ns["squared_error"], "__ppy_region__", False) is False
    assert ns["head"].__ppy_region__ is True
    x = torch.randn(2, 4)
    assert torch.equal(ns["hidden"](x, torch.eye(4), torch.zeros(4)), torch.sigmoid(x))  # the new body
    assert torch.equal(ns["squared_error"](x, torch.zeros(2, 4)), x * x * 0.25)


# ---- what earlier versions wrote keeps working --------------------------------------------------

# The loader `ppy build` wrote since the first version: it names ppy_magic.artifact.exec_program.
EARLIER_LOADER = """\
# Built by ppy_magic 0.1.0 from train.ppy.
# Runs train.ppy with its @ppy.opt regions loaded from the extensions beside this file,
# with no compiler: `python train.py` or `torchrun ... train.py` runs the program;
# `import train` (this directory on sys.path) binds its regions;
# `python train.ppy` runs it as plain Python.
try:
    __import__("ppy_magic.artifact")
except ImportError as exc:
    raise ImportError("train.py needs ppy_magic (built with 0.1.0): pip install ppy-magic") from exc
__import__("ppy_magic.artifact").artifact.exec_program(__file__, globals(), 'train.ppy')
"""

# The keys of a region in ppy_manifest.json, format version 1, as every version so far wrote them.
REGION_KEYS_V1 = {
    "name", "qualname", "signature", "extension", "index", "symbol", "kinds", "ret", "param_names", "defaults",
    "line_notes", "first_line", "last_line", "source_sha256", "device_types", "level", "frozen_globals", "cpp",
    "result_types",
}  # fmt: skip


def test_a_loader_written_by_an_earlier_version_still_binds_the_regions(artifact_copy):
    with open(os.path.join(artifact_copy, "train.py"), "w", encoding="utf-8") as fh:
        fh.write(EARLIER_LOADER)
    ns, warned = load_in_process(artifact_copy)
    assert warned == []
    assert all(ns[name].__ppy_region__ is True for name in REGIONS)
    # The documented name of the warning (docs/artifacts.md), and the package's.
    import ppy_magic

    assert ppy_magic.artifact.PpyArtifactWarning is ppy_magic.PpyArtifactWarning
    assert issubclass(ppy_magic.artifact.PpyArtifactWarning, RuntimeWarning)


def test_the_artifact_package_exports_what_it_lists():
    assert len(set(artifact.__all__)) == len(artifact.__all__)
    assert [name for name in artifact.__all__ if not hasattr(artifact, name)] == []
    used = {"exec_program", "PpyArtifactWarning", "ArtifactError", "build_command", "export_regions", "regions_in"}
    assert used <= set(artifact.__all__)  # by loaders, the docs, the CLI and %ppy_export


def test_a_region_is_recorded_as_its_region_spec_and_the_artifact_fields(built):
    m = manifest_of(built)
    spec_fields = {f.name for f in dataclasses.fields(backend.RegionSpec)} - {"filename"}
    own = {f.name for f in dataclasses.fields(artifact.RegionRecord)} - {"spec"}
    for r in m["regions"]:
        assert set(r) == spec_fields | own
        assert set(r) >= REGION_KEYS_V1  # what readers of format version 1 need
    again = artifact.Manifest.from_json(m).to_json()
    assert {**again, "built_at": None} == {**m, "built_at": None}  # read and written back: the same JSON


def test_a_new_region_spec_field_is_recorded_unless_its_type_has_no_json_form():
    from ppy_magic.artifact import manifest

    @dataclasses.dataclass(frozen=True)
    class Wider(backend.RegionSpec):
        unroll: int = 0
        notes: dict[int, str] = dataclasses.field(default_factory=dict)

    recorded = [name for name, _, _ in manifest._recorded_fields(Wider, {"filename"})]
    assert recorded[-2:] == ["unroll", "notes"]

    @dataclasses.dataclass(frozen=True)
    class Odd(backend.RegionSpec):
        ratio: complex = 0j

    with pytest.raises(TypeError, match=r"Odd\.ratio .*_CODECS"):
        manifest._recorded_fields(Odd, {"filename"})


def test_a_manifest_written_before_named_tuple_results_still_loads(artifact_copy):
    rewrite_manifest(artifact_copy, lambda m: [r.pop("result_types") for r in m["regions"]])
    ns, warned = load_in_process(artifact_copy)
    assert warned == []
    assert all(ns[name].__ppy_region__ is True for name in REGIONS)


def test_a_manifest_missing_a_region_field_loads_nothing_and_says_which(artifact_copy, monkeypatch):
    rewrite_manifest(artifact_copy, lambda m: m["regions"][0].pop("kinds"))
    ns, warned = load_in_process(artifact_copy, monkeypatch, forbid_imports=True)
    assert len(warned) == 1 and "it is incomplete (KeyError: 'kinds')" in str(warned[0].message)
    assert_runs_as_python(ns)


# ---- running it as users do: no compiler on PATH -----------------------------------------------


def _reference_training(steps: int, world: int, tmp_path) -> dict[str, torch.Tensor]:
    """What DDP computes, by hand and in eager: the mean of the ranks' gradients, then SGD."""
    plain = tmp_path / "reference.py"
    plain.write_text(TRAIN)
    prog = runpy.run_path(str(plain), run_name="reference")  # plain Python: @ppy.opt only marks
    model = prog["TinyNet"]()
    params = dict(model.named_parameters())
    for step in range(steps):
        grads = {k: torch.zeros_like(p) for k, p in params.items()}
        for rank in range(world):
            x, y = prog["batch"](rank, step)
            loss = prog["squared_error"](model(x), y).mean()
            for k, g in zip(params, torch.autograd.grad(loss, list(params.values())), strict=True):
                grads[k] += g / world
        with torch.no_grad():
            for k, p in params.items():
                p -= 0.1 * grads[k]
    return {k: p.detach() for k, p in params.items()}


@pytest.mark.slow
def test_torchrun_trains_ddp_in_every_rank_with_regions_and_no_compiler(built, no_compiler_bin, tmp_path):
    out = tmp_path / "ranks"
    out.mkdir()
    env = no_compiler_env(no_compiler_bin, tmp_path)
    steps = 5
    proc = subprocess.run(
        [
            "torchrun",
            "--standalone",
            "--nproc_per_node=2",
            os.path.join(built, "train.py"),
            "--steps",
            str(steps),
            "--out",
            str(out),
        ],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PpyArtifactWarning" not in proc.stderr
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
    for r in ranks:
        assert r["world"] == 2
        assert "missing: a C++ compiler" in r["toolchain"]  # the workers really had none
        assert r["cpp_extension_imported"] is False  # nothing went near load_inline
        for name, (is_region, calls, fallbacks) in r["regions"].items():
            assert is_region is True, name
            assert calls == steps and fallbacks == 0, (name, calls, fallbacks)
        assert r["stays_python"] is False
    assert ranks[0]["losses"] != ranks[1]["losses"]  # each rank saw its own data ...
    for k, p in ranks[0]["params"].items():
        assert torch.equal(p, ranks[1]["params"][k]), k  # ... and DDP kept the replicas identical
    expected = _reference_training(steps, 2, tmp_path)
    for k, p in ranks[0]["params"].items():
        torch.testing.assert_close(p, expected[k], rtol=1e-5, atol=1e-6)
    assert not os.path.exists(env["PPY_CACHE_DIR"]) or not os.listdir(env["PPY_CACHE_DIR"])


@pytest.mark.slow
def test_python_with_a_mismatched_manifest_prints_one_warning_and_trains(artifact_copy, no_compiler_bin, tmp_path):
    rewrite_manifest(artifact_copy, MISMATCHES["torch version"])
    out = tmp_path / "ranks"
    out.mkdir()
    env = no_compiler_env(no_compiler_bin, tmp_path)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1")
    cmd = ["python", os.path.join(artifact_copy, "train.py"), "--steps", "2", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("PpyArtifactWarning") == 1, proc.stderr
    assert f"torch 2.0.0+cpu (this process: {torch.__version__})" in proc.stderr
    result = torch.load(out / "rank0.pt")
    assert all(not is_region for is_region, _, _ in result["regions"].values())
    assert len(result["losses"]) == 2


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- %ppy_export ----------------------------------------------------------------------------------


EXPORT_CELL = textwrap.dedent("""\
    import torch
    import ppy
    from torch import sigmoid


    @ppy.opt(3)
    def art_gate(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return sigmoid(x @ w) * ART_SCALE


    @ppy.opt
    def art_blend(a: torch.Tensor, b: torch.Tensor, t: float = 0.25) -> torch.Tensor:
        return a * (1.0 - t) + b * t
""")

IMPORT_EXPORTED = textwrap.dedent("""\
    import sys
    import torch
    sys.path.insert(0, sys.argv[1])
    import artlayers
    from ppy_magic import toolchain_ready

    assert not toolchain_ready(), "this check needs a process with no compiler"
    x, w = torch.randn(3, 4), torch.randn(4, 4)
    for f in (artlayers.art_gate, artlayers.art_blend):
        assert f.__ppy_region__ is True, f
    assert torch.equal(artlayers.art_gate(x, w), torch.sigmoid(x @ w) * 1.5)
    y = torch.randn(3, 4)
    assert torch.equal(artlayers.art_blend(x, y), x * 0.75 + y * 0.25)
    assert artlayers.art_gate.calls == 1 and artlayers.art_blend.calls == 1
    try:
        artlayers.art_gate(x, torch.randn(5, 4))
    except RuntimeError as exc:
        print("NOTES", exc.__notes__)
    print("OK", "torch.utils.cpp_extension" in sys.modules)
""")


@pytest.mark.slow
def test_ppy_export_writes_a_module_that_imports_with_no_compiler(ip, no_compiler_bin, tmp_path):
    ip.run_cell("ART_SCALE = 1.5")
    result = ip.run_cell("%%ppy\n" + EXPORT_CELL)
    assert result.success, result.error_in_exec
    assert ip.user_ns["art_gate"].__ppy_region__ is True
    out = tmp_path / "artlayers-dist"
    ip.run_line_magic("ppy_export", f"artlayers -o {out} art_gate art_blend")
    program = (out / "artlayers.ppy").read_text()
    assert "ART_SCALE = 1.5" in program and "import torch" in program and "from torch import sigmoid" in program
    m = manifest_of(str(out))
    assert sorted(r["name"] for r in m["regions"]) == ["art_blend", "art_gate"]
    assert {r["level"] for r in m["regions"]} == {3}
    proc = subprocess.run(
        ["python", "-c", IMPORT_EXPORTED, str(out)],
        cwd=str(tmp_path),
        env=no_compiler_env(no_compiler_bin, tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK False" in proc.stdout
    gate = next(r for r in m["regions"] if r["name"] == "art_gate")
    # The error note names the line in the exported file, where the function now lives.
    assert f"line {gate['first_line'] + 2}" in proc.stdout.split("NOTES", 1)[1].splitlines()[0]


def test_ppy_export_refuses_what_it_cannot_export(ip, tmp_path):
    from IPython.core.error import UsageError

    ip.run_cell("def art_plain(x):\n    return x\n")
    with pytest.raises(UsageError, match="not a region"):
        ip.run_line_magic("ppy_export", f"artx -o {tmp_path / 'x'} art_plain")
    with pytest.raises(UsageError, match="not defined"):
        ip.run_line_magic("ppy_export", f"artx -o {tmp_path / 'x'} art_no_such_function")
    with pytest.raises(UsageError, match="identifier"):
        ip.run_line_magic("ppy_export", f"not-a-name -o {tmp_path / 'x'}")
    with pytest.raises(UsageError, match="standard library"):
        ip.run_line_magic("ppy_export", f"json -o {tmp_path / 'x'}")
    assert not os.path.exists(tmp_path / "x")


def test_regions_in_a_namespace_are_those_bound_under_their_own_name(artifact_copy):
    ns, _ = load_in_process(artifact_copy)
    found = artifact.regions_in({**ns, "alias": ns["hidden"]}, [])
    assert sorted(f.__name__ for f in found) == sorted(REGIONS)
    with pytest.raises(artifact.ArtifactError, match="no region"):
        artifact.regions_in({"f": len}, [])


NAMED = textwrap.dedent("""\
    import torch
    import ppy


    @ppy.opt(3)
    def top(x):
        return torch.max(x, 1), x.shape


    if __name__ == "__main__":
        print(type(top(torch.ones(2, 3))[0]).__name__)
""")


def test_named_tuple_results_survive_the_artifact(tmp_path):
    src = tmp_path / "named.ppy"
    src.write_text(NAMED)
    out = str(tmp_path / "named-ppy")
    assert cli.main(["build", str(src), "-o", out]) == 0
    assert manifest_of(out)["regions"][0]["result_types"] == ["max"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ns = runpy.run_path(os.path.join(out, "named.py"), run_name="named_artifact")
    assert not [w for w in caught if issubclass(w.category, artifact.PpyArtifactWarning)]
    top = ns["top"]
    assert top.__ppy_region__ is True
    x = torch.randn(3, 4)
    got, want = top(x), top.__wrapped__(x)
    assert type(got[0]) is torch.return_types.max and type(got[1]) is torch.Size
    assert torch.equal(got[0].values, want[0].values) and torch.equal(got[0].indices, want[0].indices)
    assert got[1] == want[1]
