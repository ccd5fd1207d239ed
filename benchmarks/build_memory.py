"""Peak memory of building regions, against Binder's budget (a session gets 1-2 GB; the limit here is 1.5 GB).

Builds the GPT-style block of notebook 4 (layer norm, causal self-attention, GELU MLP, embeddings) with
the `ppy` command in a fresh cache directory, three ways, each in its own process tree:

- ``cold``: ``ppy run MODEL`` from an empty cache: runtime, prelude and cell in one go (no warmup);
- ``warmup``: ``ppy warmup`` from an empty cache: the runtime and the precompiled prelude, as Binder's
  postBuild does while the image is built;
- ``cell after warmup``: ``ppy run MODEL`` once warmup is done: a session's first %%ppy cell on Binder.

For each it prints the peak of the whole process tree's summed resident memory (python, ninja, the
compilers; sampled every 10 ms from /proc; shared pages counted in each process, so an upper bound),
the largest single process's peak (getrusage, exact) and the tree's ratio to the limit. When the
runtime and the prelude are built at the same time (warmup, cold), two compilers run side by side,
so the tree's peak is about the sum of theirs.

    python -m benchmarks.build_memory [--limit-mb 1536]

Exits 1 only when the measurement is broken (a build failed or the block did not compile), not when
the limit is exceeded: figures are for reading. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass

MODEL = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    import ppy


    @ppy.opt(3)
    def block(x, p: list, n_head: int):
        ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b = p
        B, T, C = x.size()
        h = F.layer_norm(x, (C,), ln1_w, ln1_b)
        q, k, v = F.linear(h, attn_w, attn_b).split(C, dim=2)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, proj_w, proj_b)
        h = F.layer_norm(x, (C,), ln2_w, ln2_b)
        return x + F.linear(F.gelu(F.linear(h, fc_w, fc_b)), fc2_w, fc2_b)


    @ppy.opt(3)
    def embed(idx, wte, wpe):
        T = idx.size(1)
        return F.embedding(idx, wte) + wpe[:T]


    if not (getattr(block, "__ppy_region__", False) and getattr(embed, "__ppy_region__", False)):
        raise SystemExit("build_memory: the block did not compile")
""")


@dataclass(frozen=True)
class Peak:
    label: str
    tree_mb: float  # peak of the summed RSS of the process tree
    largest_process_mb: float  # peak RSS of the largest single process in the tree (getrusage)
    seconds: float


def _children_of() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # the process ended while we looked
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])  # the name may contain spaces and parentheses
        children.setdefault(ppid, []).append(int(entry))
    return children


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants now."""
    children = _children_of()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _rss_bytes(pid)
        todo += children.get(pid, [])
    return total


# Runs the command as its own child, so that RUSAGE_CHILDREN covers this one build's processes only.
WRAPPER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[1:])\n"
    "print('build_memory: largest KiB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(rc)\n"
)


def measure(label: str, argv: list[str], env: dict[str, str], cwd: str) -> Peak:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            done.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"build_memory: {label}: `{' '.join(argv)}` failed ({proc.returncode}):\n{output}")
    largest_kib = [int(line.split()[-1]) for line in output.splitlines() if line.startswith("build_memory: largest")]
    return Peak(label, peak / 2**20, largest_kib[-1] / 1024, seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-mb", type=float, default=1536.0, help="the budget to compare with (default 1536)")
    args = parser.parse_args(argv)
    if not os.path.isdir("/proc/self"):
        sys.exit("build_memory: needs Linux's /proc")

    ppy = [sys.executable, "-m", "ppy_magic.cli"]
    peaks = []
    with tempfile.TemporaryDirectory(prefix="ppy-build-memory-") as tmp:
        model = os.path.join(tmp, "model.ppy")
        with open(model, "w", encoding="utf-8") as fh:
            fh.write(MODEL)
        for label, cache, command in [
            ("cold (no warmup)", "cold", [*ppy, "run", model]),
            ("warmup", "binder", [*ppy, "warmup"]),
            ("cell after warmup", "binder", [*ppy, "run", model]),
        ]:
            env = dict(os.environ, PPY_CACHE_DIR=os.path.join(tmp, cache), OMP_NUM_THREADS="1")
            peaks.append(measure(label, command, env, tmp))

    print(f"peak resident memory while building regions (limit {args.limit_mb:,.0f} MB)")
    print(f"{'build':<20} {'process tree':>13} {'largest process':>16} {'tree / limit':>13} {'seconds':>8}")
    for p in peaks:
        verdict = "within the limit" if p.tree_mb <= args.limit_mb else "OVER the limit"
        print(
            f"{p.label:<20} {p.tree_mb:>10,.0f} MB {p.largest_process_mb:>13,.0f} MB "
            f"{p.tree_mb / args.limit_mb:>13.2f} {p.seconds:>8.1f}  {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
