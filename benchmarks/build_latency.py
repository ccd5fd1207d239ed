"""How long a %%ppy cell waits for its build, from an empty cache to a rerun (issue #4).

    python -m benchmarks.build_latency [--keep]

Measures, in one run on an empty cache directory:
  1. the first cell (the runtime and the precompiled prelude build at the same time, then the cell);
  2. a new cell with the prelude warm (median of 3), and one with the PCH hidden (plain includes);
  3. the same cell in a new process (a disk hit; median of 3 processes), counting the processes it
     starts: Python-level (subprocess, os.fork/posix_spawn/system/exec*) and, where strace exists,
     every execve of the process tree;
  4. an unchanged rerun in the same process (a memory hit; median of 5).
Prints seconds, processes started, the ratios that explain them, and issue #4's targets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CELL = """
import torch
import ppy

@ppy.opt(3)
def layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b)

@ppy.opt(3)
def residual(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x + {c} * y)
"""

# Counts the processes this Python process starts from the moment it is installed.
SPAWN_COUNTER = """
import os as _os, subprocess as _subprocess
spawned = []
_popen_init = _subprocess.Popen.__init__
def _record_popen(self, args, *a, **k):
    spawned.append(str(args)[:100])
    return _popen_init(self, args, *a, **k)
_subprocess.Popen.__init__ = _record_popen
for _name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve", "execvp",
              "execvpe", "spawnv", "spawnve"):
    if hasattr(_os, _name):
        def _wrap(fn, _name=_name):
            def recorded(*a, **k):
                spawned.append(_name)
                return fn(*a, **k)
            return recorded
        setattr(_os, _name, _wrap(getattr(_os, _name)))
"""

NEW_PROCESS = SPAWN_COUNTER + textwrap.dedent("""
    import json, sys, time
    import torch
    from ppy_magic import backend
    from ppy_magic import pipeline

    source = open(sys.argv[1]).read()
    ns = {"__name__": "__bench__"}
    t0 = time.perf_counter()
    binder = pipeline.compile_source(source, ns, "<new-kernel-cell>", cache=backend.shared_cache())
    pipeline.run(compile(source, "<new-kernel-cell>", "exec"), ns, binder)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "source": binder.report.build_source, "spawned": spawned,
                      "region": bool(getattr(ns["layer"], "__ppy_region__", False))}))
""")


def compile_cell(source: str, filename: str, cache) -> tuple[float, object]:
    from ppy_magic import pipeline

    ns = {"__name__": "__bench__"}
    t0 = time.perf_counter()
    binder = pipeline.compile_source(source, ns, filename, cache=cache)
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    seconds = time.perf_counter() - t0
    if not getattr(ns["layer"], "__ppy_region__", False):
        sys.exit(f"the cell did not compile:\n{binder.report.summary()}")
    return seconds, binder.report


def children_cpu() -> float:
    """CPU seconds of finished child processes and their descendants (ninja, the compiler)."""
    t = os.times()
    return t.children_user + t.children_system


def ninja_seconds(build_dir: str) -> float:
    """Compile + link time of a module, from its ninja log."""
    try:
        with open(os.path.join(build_dir, ".ninja_log"), encoding="utf-8") as fh:
            rows = [ln.split("\t") for ln in fh.read().splitlines() if ln and not ln.startswith("#")]
        return max(int(r[1]) for r in rows) / 1000
    except (OSError, ValueError, IndexError):
        return float("nan")


def new_process(source_path: str, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", NEW_PROCESS, source_path],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def strace_execs(source_path: str, env: dict[str, str], tmp: str) -> int | None:
    """Programs executed by a whole new process (its tree), minus the Python interpreter itself."""
    strace = shutil.which("strace")
    if not strace:
        return None
    log = os.path.join(tmp, "strace.log")
    subprocess.run(
        [strace, "-f", "-qq", "-e", "trace=execve", "-o", log, sys.executable, "-c", NEW_PROCESS, source_path],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    with open(log, encoding="utf-8") as fh:
        calls = [ln for ln in fh if "execve(" in ln and "ENOENT" not in ln]
    return len(calls) - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="keep the cache directory afterwards")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="ppy-build-latency-")
    cache_dir = os.path.join(tmp, "cache")
    os.environ["PPY_CACHE_DIR"] = cache_dir
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    counter: dict = {}
    exec(SPAWN_COUNTER, counter)  # counts from now on, in `spawned`
    spawned = counter["spawned"]
    import torch

    from ppy_magic import backend

    torch.set_num_threads(1)
    cache = backend.shared_cache(cache_dir)
    load = os.getloadavg()[0]
    print(
        f"ppy build latency: torch {torch.__version__}, {os.cpu_count()} CPUs, load average {load:.1f} "
        f"(other work on these cores slows every build), cache {cache_dir}"
    )

    # 1. The first cell on an empty cache directory.
    first_source = CELL.format(c=0.5)
    mark, cpu0 = len(spawned), children_cpu()
    first, report = compile_cell(first_source, "<cell-1>", cache)
    first_spawned, first_cpu = len(spawned) - mark, children_cpu() - cpu0
    pre = cache.prelude().status()
    runtime_s = ninja_seconds(cache.build_dir(backend.module_keys.runtime_name()))
    cell_s = ninja_seconds(cache.build_dir(report.module_name))
    print(
        f"\n1. first cell, empty cache:        {first:7.2f} s  ({report.build_source}; {first_spawned} processes "
        f"started by Python, compilers under ninja not counted; {first_cpu:.1f} s of compiler CPU)"
    )
    print(
        f"   runtime {runtime_s:.1f} s  in parallel with  prelude {pre.seconds:.1f} s ({pre.size / 1e6:.0f} MB) "
        f"+ cell {cell_s:.1f} s;  first cell / (runtime + prelude + cell) = "
        f"{first / (runtime_s + pre.seconds + cell_s):.2f}"
    )

    # 2. New cells, prelude warm; then one with the PCH hidden, for the ratio.
    warm = []
    for i in range(3):
        mark, cpu0 = len(spawned), children_cpu()
        seconds, rep = compile_cell(CELL.format(c=1.5 + i), f"<cell-new-{i}>", cache)
        assert rep.build_source == "build", rep.build_source
        warm.append((seconds, len(spawned) - mark, children_cpu() - cpu0))
    warm_median = statistics.median(w[0] for w in warm)
    # A cache whose prelude is marked unusable builds its cells with the prelude read as plain text.
    plain_cache = backend.Cache(os.path.join(tmp, "plain-cache"))
    plain_cache.ensure_dirs()
    plain_cache.prelude().mark_unusable("failed", "the benchmark compares plain includes", permanent=True)
    mark, cpu0 = len(spawned), children_cpu()
    plain, rep = compile_cell(CELL.format(c=9.5), "<cell-plain>", plain_cache)
    plain_cpu = children_cpu() - cpu0
    assert rep.build_source == "build" and not os.path.exists(plain_cache.prelude().pch)
    print(
        f"\n2. new cell, prelude warm:         {warm_median:7.2f} s  median of "
        f"{', '.join(f'{w[0]:.2f}' for w in warm)}; {warm[0][1]} processes started by Python each; "
        f"{statistics.median(w[2] for w in warm):.1f} s of compiler CPU"
    )
    print(
        f"   same with plain includes:       {plain:7.2f} s  ({plain_cpu:.1f} s of compiler CPU) -> "
        f"precompiled / plain = {warm_median / plain:.2f}"
    )

    # 3. The same cell in a new process: a disk hit.
    source_path = os.path.join(tmp, "cell.py")
    with open(source_path, "w", encoding="utf-8") as fh:
        fh.write(first_source)
    runs = [new_process(source_path, env) for _ in range(3)]
    assert all(r["source"] == "disk" and r["region"] for r in runs), runs
    disk_median = statistics.median(r["seconds"] for r in runs)
    python_spawned = max(len(r["spawned"]) for r in runs)
    execs = strace_execs(source_path, env, tmp)
    traced = "strace not available" if execs is None else f"{execs} programs executed by its whole tree (strace)"
    each = ", ".join(f"{r['seconds']:.3f}" for r in runs)
    print(
        f"\n3. same cell, new process (disk):  {disk_median:7.3f} s  median of {each}; "
        f"{python_spawned} processes started by Python; {traced}"
    )

    # 4. An unchanged rerun in the same process: a memory hit.
    mark = len(spawned)
    reruns = []
    for _ in range(5):
        seconds, rep = compile_cell(first_source, "<cell-1>", cache)
        assert rep.build_source == "memory", rep.build_source
        reruns.append(seconds)
    rerun = statistics.median(reruns)
    rerun_spawned = len(spawned) - mark
    print(f"\n4. unchanged rerun (memory):       {rerun * 1e3:7.2f} ms median of 5; {rerun_spawned} processes started")

    print("\nissue #4 targets:")
    checks = [
        ("first cell <= 25 s", first <= 25),
        ("new cell with warm prelude <= 2.5 s (median of 3)", warm_median <= 2.5),
        (
            "same cell in a new process <= 0.3 s, no process started",
            disk_median <= 0.3 and python_spawned == 0 and not execs,
        ),
        ("unchanged rerun <= 20 ms, no process started", rerun <= 0.02 and rerun_spawned == 0),
    ]
    for text, ok in checks:
        print(f"  [{'met' if ok else 'MISSED'}] {text}")
    if args.keep:
        print(f"\nkept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
