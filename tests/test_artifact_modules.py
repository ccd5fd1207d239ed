"""Artifacts carry classes: `ppy build` of a program whose model classes have compiled forwards.

The artifact loads with no compiler, and trains under `torchrun` with
DistributedDataParallel to the same parameters, bit for bit, as the program run
as plain Python under `torchrun`. This file costs one build and two torchrun runs.
"""

from __future__ import annotations

import ast
import json
import os
import runpy
import subprocess
import sys
import textwrap

import pytest
import torch

from ppy_magic import artifact, cli
from tests.support.cells import assert_same

TRAIN = textwrap.dedent("""\
    # A small residual MLP trained with DistributedDataParallel; each forward is a region.
    import argparse
    import os
    import sys

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    import ppy


    class Block(nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.proj = nn.Linear(4 * d, d)
            self.drop = nn.Dropout(0.1)

        @ppy.opt(3)
        def forward(self, x):
            return x + self.drop(self.proj(F.gelu(self.fc(self.ln(x)))))


    class Model(nn.Module):
        def __init__(self, d: int = 8, depth: int = 2):
            super().__init__()
            self.blocks = nn.ModuleList([Block(d) for _ in range(depth)])
            self.head = nn.Linear(d, 1)

        @ppy.opt(3)
        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)


    def batch(rank: int, step: int):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(16, 8, generator=g)
        return x, torch.sin(x.sum(dim=1, keepdim=True))


    def main() -> None:
        p = argparse.ArgumentParser()
        p.add_argument("--steps", type=int, default=4)
        p.add_argument("--out", required=True)
        args = p.parse_args()
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(Model())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for step in range(args.steps):
            x, y = batch(rank, step)
            torch.manual_seed(100 * step + rank)  # dropout
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        forward = type(model.module).__dict__["forward"]
        torch.save({
            "params": {k: v.detach().clone() for k, v in model.module.named_parameters()},
            "losses": losses,
            "region": (getattr(forward, "__ppy_region__", False), getattr(forward, "calls", 0),
                       getattr(forward, "fallbacks", 0), getattr(forward, "last_fallback_reason", None)),
            "cpp_extension_imported": "torch.utils.cpp_extension" in sys.modules,
        }, os.path.join(args.out, f"rank{rank}.pt"))
        dist.destroy_process_group()


    if __name__ == "__main__":
        main()
""")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    src = tmp_path_factory.mktemp("src") / "train.ppy"
    src.write_text(TRAIN)
    out = str(tmp_path_factory.mktemp("artifacts") / "train-ppy")
    assert cli.main(["build", str(src), "-o", out]) == 0
    return out


def test_the_manifest_names_the_methods_and_what_they_read(built):
    with open(os.path.join(built, artifact.MANIFEST), encoding="utf-8") as fh:
        regions = {r["qualname"]: r for r in json.load(fh)["regions"]}
    assert set(regions) == {"Block.forward", "Model.forward"}
    model = regions["Model.forward"]
    assert model["owner"] == "Model" and model["signature"].startswith("Model.forward(self, x: Tensor)")
    classes = [lay["class"] for lay in model["plan"]["layouts"]]
    lines = {n.name: [n.name, n.lineno, n.end_lineno] for n in ast.parse(TRAIN).body if isinstance(n, ast.ClassDef)}
    assert {"program": lines["Model"]} in classes and {"program": lines["Block"]} in classes
    assert {"import": ["torch.nn.modules.linear", "Linear"]} in classes


def test_the_artifact_binds_methods_that_match_eager(built):
    with_regions = runpy.run_path(os.path.join(built, "train.py"), run_name="train_artifact")
    plain = runpy.run_path(os.path.join(built, "train.ppy"), run_name="train_plain")
    forward = with_regions["Model"].__dict__["forward"]
    assert forward.__ppy_region__ is True
    assert getattr(plain["Model"].__dict__["forward"], "__ppy_region__", False) is False
    torch.manual_seed(0)
    r = with_regions["Model"]()
    torch.manual_seed(0)
    e = plain["Model"]()
    x, _ = plain["batch"](0, 0)
    for mode in ("train", "eval"):
        getattr(r, mode)()
        getattr(e, mode)()
        torch.manual_seed(3)
        out_r = r(x)
        torch.manual_seed(3)
        assert_same(out_r, e(x))
    assert (forward.calls, forward.fallbacks) == (2, 0), forward.last_fallback_reason


def _torchrun(script: str, out, tmp_path, no_compiler_env) -> list[dict]:
    out.mkdir()
    proc = subprocess.run(
        [
            "torchrun",
            "--standalone",
            "--nproc_per_node=2",
            script,
            "--steps",
            "4",
            "--out",
            str(out),
        ],
        cwd=str(tmp_path),
        env=no_compiler_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PpyArtifactWarning" not in proc.stderr
    return [torch.load(out / f"rank{r}.pt") for r in range(2)]


@pytest.mark.slow
def test_torchrun_trains_the_model_as_plain_python_does(built, tmp_path_factory, tmp_path):
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    (bin_dir / "torchrun").write_text(
        f"#!{sys.executable}\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n"
    )
    (bin_dir / "torchrun").chmod(0o755)
    env = dict(os.environ)
    env.update(
        PATH=str(bin_dir),
        CXX="/nonexistent/c++",
        CC="/nonexistent/cc",
        OMP_NUM_THREADS="1",
        PPY_CACHE_DIR=str(tmp_path / "empty-cache"),
    )
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    regions = _torchrun(os.path.join(built, "train.py"), tmp_path / "regions", tmp_path, env)
    plain = _torchrun(os.path.join(built, "train.ppy"), tmp_path / "plain", tmp_path, env)
    for r, p in zip(regions, plain, strict=True):
        is_region, calls, fallbacks, reason = r["region"]
        assert is_region is True and calls == 4 and fallbacks == 0, reason  # DDP's forward called the region
        assert p["region"][0] is False
        assert r["cpp_extension_imported"] is False
        assert r["losses"] == p["losses"]
        for k, v in r["params"].items():
            assert torch.equal(v, p["params"][k]), k
    assert regions[0]["losses"] != regions[1]["losses"]
    for k, v in regions[0]["params"].items():
        assert torch.equal(v, regions[1]["params"][k]), k  # DDP kept the replicas identical
