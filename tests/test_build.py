"""Builds: the cache levels, the precompiled prelude, and nothing ever stuck.

Most tests build a small new cell in the session's shared cache (the runtime
and the prelude are built once for all of them). Each test's cell has its own
constant, so it is a new module even in a kept cache. The few that must start
cold (a private cache, `ppy warmup` on an empty directory) say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from ppy_magic import backend, pipeline
from ppy_magic.backend import prelude
from tests.support.cells import compile_cell, headers_gcc_reads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RUN = f"{os.getpid() % 10_000}"  # keeps cells of this run apart from those of a kept cache


def cell(tag: int, name: str = "f") -> str:
    """A one-region cell; `tag` makes it a module of its own."""
    return textwrap.dedent(f"""
        import torch
        import ppy

        @ppy.opt(3)
        def {name}(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            z = x * y + {tag}.{_RUN}
            return torch.tanh(torch.relu(z))
    """)


TANH_LINE = 8  # the line of `return torch.tanh(...)` in `cell`


def check_region(ns: dict, name: str = "f") -> None:
    fn = ns[name]
    assert getattr(fn, "__ppy_region__", False), getattr(fn, "__ppy_reason__", "not a region")
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    assert torch.equal(fn(x, y), fn.__wrapped__(x, y))


def compile_with(cache: backend.Cache, source: str, filename: str, **kw):
    import linecache

    ns = {"__name__": "__ppy_test__"}
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    binder = pipeline.compile_source(source, ns, filename, cache=cache, **kw)
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    return ns, binder.report


# A child process: compiles and runs one cell, records every process it starts, prints a JSON line.
CHILD = textwrap.dedent("""
    import json, os, subprocess, sys, time
    import torch

    spawned = []
    _popen_init = subprocess.Popen.__init__
    def _record_popen(self, args, *a, **k):
        spawned.append(str(args)[:120])
        return _popen_init(self, args, *a, **k)
    subprocess.Popen.__init__ = _record_popen
    for _name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve",
                  "execvp", "execvpe", "spawnv", "spawnve"):
        if hasattr(os, _name):
            def _wrap(fn, _name=_name):
                def recorded(*a, **k):
                    spawned.append(_name)
                    return fn(*a, **k)
                return recorded
            setattr(os, _name, _wrap(getattr(os, _name)))

    import linecache
    from ppy_magic import backend
    from ppy_magic import pipeline

    source = open(sys.argv[1]).read()
    if len(sys.argv) > 2:  # wait for the go-ahead, to start at the same time as a sibling
        print("ready", flush=True)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.005)
    filename = "<child-cell>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": "__child__"}
    t0 = time.perf_counter()
    binder = pipeline.compile_source(source, ns, filename, cache=backend.shared_cache())
    seconds = time.perf_counter() - t0
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    f = ns["f"]
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    ok = bool(getattr(f, "__ppy_region__", False)) and torch.equal(f(x, y), f.__wrapped__(x, y))
    print(json.dumps({"source": binder.report.build_source, "ok": ok, "spawned": spawned, "seconds": seconds,
                      "notes": binder.report.notes, "python": binder.report.python,
                      "ninja": backend.toolchain_ready().ninja}), flush=True)
""")


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.path.join(ROOT, "tests"), **extra)
    return env


def start_child(tmp_path, source: str, *args: str, **popen_kw) -> subprocess.Popen:
    path = tmp_path / f"cell{time.monotonic_ns()}.py"
    path.write_text(source)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        **popen_kw,
    )


def child_result(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out + err
    return json.loads(out.strip().splitlines()[-1])


# ---- the prelude ----------------------------------------------------------------------


def test_the_prelude_holds_what_cells_include_and_the_op_headers_of_the_table():
    text = prelude.header_text()
    assert text.index("<Python.h>") < text.index('"ppy_region.h"')  # Python.h first, as Python asks
    for header in (
        "ATen/core/Tensor.h",
        "ATen/ScalarOps.h",
        "ppy_abi.h",
        "ATen/ops/matmul_ops.h",
        "ATen/ops/add_ops.h",
        "ATen/ops/linalg_vector_norm_ops.h",
        "ATen/ops/softmax_ops.h",
    ):
        assert header in text
    from ppy_magic.backend import cpp
    from ppy_magic.torchlib import ops

    table = {cpp.op_header(ov) for spec in ops.all_specs() for ov in spec.candidates()}
    assert len(table) > 500 and table <= set(prelude.op_headers())  # every op of the table is precompiled


def test_a_cell_starts_with_the_prelude_and_its_identity_is_in_the_key(monkeypatch):
    _, report = compile_cell(cell(1), filename="<build-test-1>")
    includes = [ln for ln in report.cpp.splitlines() if ln.startswith("#include")]
    assert includes[0] == prelude.INCLUDE_LINE
    assert all(ln in prelude.header_text().splitlines() for ln in includes[1:])  # all precompiled
    assert report.module_name == backend.module_name("ppy_cell", report.cpp)
    # Comments do not change the binary, so not the key (a new kernel names the cell's file differently).
    renamed = report.cpp.replace("one cell.", "one cell (/tmp/ipykernel_4242/1234.py).", 1)
    assert renamed != report.cpp and backend.module_name("ppy_cell", renamed) == report.module_name
    runtime = backend.module_keys.runtime_name()
    monkeypatch.setattr(backend.module_keys, "prelude_identity", lambda: "another prelude")
    assert backend.module_name("ppy_cell", report.cpp) != report.module_name
    assert backend.module_keys.runtime_name() == runtime  # the runtime does not include the prelude


def test_the_cell_build_really_uses_the_precompiled_prelude(cache_dir):
    """Ask gcc, with the exact flags ninja used for a real cell, which file it read for the prelude."""
    ns, report = compile_cell(cell(2), filename="<build-test-2>")
    check_region(ns)
    assert report.build_source == "build"
    assert not any("rejected" in n for n in report.notes), report.notes
    cache = backend.shared_cache()
    status = cache.prelude().status()
    assert status.state == "ready", status
    assert f"! {cache.prelude().pch}" in headers_gcc_reads(report.module_name)  # "!": gcc used this PCH


def test_rejection_reads_gcc_messages():
    flags = (
        "main.cpp:1:25: error: /c/prelude/ppy_prelude.h.gch: not used because `__OPTIMIZE__' not "
        "defined [-Werror=invalid-pch]"
    )
    settings = (
        "main.cpp:1:25: error: /c/p/ppy_prelude.h.gch: created and used with different settings of "
        "%<-fpie%> [-Werror=invalid-pch]"
    )
    truncated = "main.cpp:1:25: error: while reading precompiled header: No such file or directory"
    assert prelude.rejection("c++ -Winvalid-pch -Werror=invalid-pch -c main.cpp\n" + settings)[1] is True
    assert prelude.rejection(flags) == (
        "/c/prelude/ppy_prelude.h.gch: not used because `__OPTIMIZE__' not defined [-Werror=invalid-pch]",
        True,
    )
    assert prelude.rejection(truncated) == ("while reading precompiled header: No such file or directory", False)
    assert prelude.rejection("main.cpp:30:5: error: 'foo' was not declared in this scope") is None


def test_a_pch_is_renamed_into_place_and_a_killed_build_leaves_nothing_gcc_would_read(tmp_path, monkeypatch):
    pre = prelude.Prelude(str(tmp_path / "prelude"))
    pre.write_header()
    leftover = tmp_path / "prelude" / (prelude.PCH + ".tmp99999")  # a PCH build killed mid-way
    leftover.write_text("half a PCH")
    assert pre.status().state == "not built"
    # A stand-in compiler that writes its output (the last argument) and fails only when asked to.
    fake = [
        "sh",
        "-c",
        'for last; do :; done; [ -n "$PPY_FAIL" ] && { echo "error: no" >&2; exit 1; }; echo pch > "$last"',
        "fake-c++",
    ]
    pre.build(fake, ["-O2"])
    assert not leftover.exists() and Path(pre.pch).read_text() == "pch\n"
    assert pre.status().state == "ready"
    broken = prelude.Prelude(str(tmp_path / "broken"))
    monkeypatch.setenv("PPY_FAIL", "1")
    with pytest.raises(prelude.PreludeError, match="error: no"):
        broken.build(fake, ["-O2"])
    assert broken.status().state == "failed" and not os.path.exists(broken.pch)


def test_comments_are_left_out_of_the_key_but_strings_are_not():
    code = 'int a = 1; // a comment\nconst char* s = "not // a comment"; /* block */ char c = \'"\';\n'
    assert (
        backend.module_keys.code_without_comments(code)
        == 'int a = 1; \nconst char* s = "not // a comment";   char c = \'"\';\n'
    )


# ---- cache levels and user controls --------------------------------------------------------


def test_memory_then_disk_then_force(cache_dir):
    source = cell(3)
    ns, first = compile_cell(source, filename="<build-test-3>")
    check_region(ns)
    ns, again = compile_cell(source, filename="<build-test-3>")
    assert (first.build_source, again.build_source) == ("build", "memory")
    check_region(ns)
    fresh = backend.Cache(cache_dir)  # a new kernel's memory is empty
    ns, disk = compile_with(fresh, source, "<build-test-3>")
    assert disk.build_source == "disk"
    check_region(ns)
    ns, forced = compile_cell(source, filename="<build-test-3>", force=True)
    assert forced.build_source == "build"
    check_region(ns)


def test_a_disk_hit_in_a_new_process_starts_no_process(tmp_path):
    source = cell(4)
    compile_cell(source, filename="<build-test-4>")
    got = child_result(start_child(tmp_path, source, env=child_env()))
    assert got["source"] == "disk" and got["ok"], got
    assert got["spawned"] == [], got["spawned"]


def test_cache_info_and_clear(tmp_path):
    source = cell(5)
    _, report = compile_cell(source, filename="<build-test-5>")
    other = tmp_path / "cache"
    other.mkdir(mode=0o700)
    (other / "lib").mkdir(mode=0o700)
    shared = backend.shared_cache()
    built = shared.so_path(report.module_name)
    for path in (built, built + ".json"):  # the module and its checksum, as another kernel left them
        shutil.copy(path, other / "lib")
    cache = backend.Cache(str(other))
    ns, got = compile_with(cache, source, "<build-test-5>")
    assert got.build_source == "disk"
    info = cache.info()
    assert f"cache directory: {other}" in info
    assert "entries: 1 module(s)" in info and report.module_name in info and "KB" in info
    assert "prelude: not built yet" in info
    assert "prelude: ready" in shared.info()
    assert "removed 1 built module(s)" in cache.clear()
    check_region(ns)  # a region bound before the clear keeps working
    assert cache.entries() == [] and "entries: 0 module(s)" in cache.info()


def test_toolchain_ready_names_what_is_there():
    status = backend.toolchain_ready()
    assert status and str(status).startswith("toolchain ready")


# ---- never stuck --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_build_killed_mid_way_leaves_nothing_that_blocks_the_next(tmp_path, cache_dir):
    source = cell(6)
    before = set(glob.glob(os.path.join(cache_dir, "build", "*", "lock")))
    victim = start_child(tmp_path, source, env=child_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not set(glob.glob(os.path.join(cache_dir, "build", "*", "lock"))) - before:
            assert victim.poll() is None, "the build finished before it could be killed"
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.01)
        os.kill(victim.pid, signal.SIGKILL)  # the kernel dies; its compiler keeps running, orphaned
        victim.wait()
        t0 = time.monotonic()
        got = child_result(start_child(tmp_path, source, env=child_env()), timeout=240)
        assert got["source"] == "build" and got["ok"], got
        assert any("stale build lock" in n for n in got["notes"]), got["notes"]
        assert time.monotonic() - t0 < 240
    finally:
        with_suppressed(os.killpg, victim.pid, signal.SIGKILL)  # the orphaned compiler, if still running


def with_suppressed(fn, *args) -> None:
    with contextlib.suppress(OSError):
        fn(*args)


@pytest.mark.slow
def test_two_processes_building_one_cell_build_it_once_and_both_load_it(tmp_path):
    source = cell(7)
    go = tmp_path / "go"
    procs = [start_child(tmp_path, source, str(go), env=child_env()) for _ in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    go.write_text("")
    results = [child_result(p) for p in procs]
    assert sorted(r["source"] for r in results) == ["build", "disk"], results
    assert all(r["ok"] for r in results)


def test_a_corrupt_cached_module_is_detected_and_rebuilt(cache_dir):
    source = cell(8)
    _, report = compile_cell(source, filename="<build-test-8>")
    path = backend.shared_cache().so_path(report.module_name)
    with open(path, "r+b") as fh:  # same size, one byte flipped in the middle
        fh.seek(os.path.getsize(path) // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    ns, again = compile_with(backend.Cache(cache_dir), source, "<build-test-8>")
    assert again.build_source == "build"
    assert any("was not loaded" in n and "checksum" in n for n in again.notes), again.notes
    check_region(ns)
    ns, third = compile_with(backend.Cache(cache_dir), source, "<build-test-8>")
    assert third.build_source == "disk"


def test_a_failed_build_can_be_retried_in_the_same_process(tmp_path, monkeypatch):
    real = shutil.which("ninja")
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "ninja").write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && exec {real} "$@"\necho "ninja: simulated failure" >&2\nexit 1\n'
    )
    (fake / "ninja").chmod(0o755)
    source = cell(9)
    with monkeypatch.context() as m:
        m.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
        ns, failed = compile_cell(source, filename="<build-test-9>")
    assert failed.compiled == [] and "C++ build" in failed.python[0][1]
    assert not getattr(ns["f"], "__ppy_region__", False)
    ns, retried = compile_cell(source, filename="<build-test-9>")
    assert retried.build_source == "build"
    check_region(ns)


def test_without_a_compiler_the_cell_runs_as_python_and_says_why(tmp_path, monkeypatch, cache_dir):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("ninja"), bin_dir / "ninja")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CXX", raising=False)
    status = backend.toolchain_ready()
    assert not status and "C++ compiler" in str(status)
    ns, report = compile_with(backend.Cache(cache_dir), cell(10), "<build-test-10>")
    assert report.compiled == []
    ((name, reason),) = report.python
    assert name == "f" and "C++ compiler" in reason and "install g++" in reason
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    assert torch.equal(ns["f"](x, y), torch.tanh(torch.relu(x * y + float(f"10.{_RUN}"))))


def test_the_pip_ninja_is_found_when_ninja_is_not_on_path(tmp_path):
    ninja = pytest.importorskip("ninja")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("c++", "as", "ld"):  # the compiler and what it runs; no ninja
        os.symlink(shutil.which(tool), bin_dir / tool)
    assert shutil.which("ninja", path=str(bin_dir)) is None
    got = child_result(start_child(tmp_path, cell(11), env=child_env(PATH=str(bin_dir))))
    assert got["ninja"] == os.path.join(ninja.BIN_DIR, "ninja")
    assert got["source"] == "build" and got["ok"], got


def test_compiler_errors_name_the_python_line_and_the_function_stays_python(monkeypatch):
    real = backend.generate

    def broken(functions):
        code = real(functions)
        return dataclasses.replace(code, text=code.text.replace("at::_ops::tanh::call", "at::_ops::ppy_no_such::call"))

    monkeypatch.setattr(backend, "generate", broken)
    ns, report = compile_cell(cell(12), filename="<build-test-12>")
    assert report.compiled == [] and report.python and report.python[0][0] == "f"
    assert not getattr(ns["f"], "__ppy_region__", False)
    located = [n for n in report.notes if n.startswith(f"line {TANH_LINE} (in 'f'): C++ error:")]
    assert located and "ppy_no_such" in located[0], report.notes


def test_located_errors_maps_cpp_lines_to_python_lines():
    log = (
        "FAILED: main.o\n"
        "/c/build/x/main.cpp: In function 'void ppy_region_0_f(const ppy::Arg*, ppy::Out*)':\n"
        "/c/build/x/main.cpp:33:20: error: 'nope' is not a member of 'at::_ops'\n"
        "/c/build/x/main.cpp:45:3: error: expected ';' before '}' token\n"
        "/c/build/x/main.cpp:4:10: fatal error: ATen/ops/nope_ops.h: No such file or directory\n"
    )
    got = backend.located_errors(log, {30: ("f", 8), 40: ("g", 12)})
    assert got == [
        "line 8 (in 'f'): C++ error: 'nope' is not a member of 'at::_ops'",
        "line 12 (in 'g'): C++ error: expected ';' before '}' token",
        "line 4 of the generated C++: C++ fatal error: ATen/ops/nope_ops.h: No such file or directory",
    ]


# ---- a cache directory others can write: build privately; a PCH gcc rejects ----------------------


@pytest.fixture(scope="module")
def unsafe_cache(tmp_path_factory):
    shared = tmp_path_factory.mktemp("shared-cache")
    os.chmod(shared, 0o777)
    cache = backend.Cache(str(shared))
    yield cache
    if cache.base != cache.root:
        shutil.rmtree(cache.base, ignore_errors=True)


@pytest.mark.slow
def test_a_world_writable_cache_dir_is_not_used_and_the_cell_still_works(unsafe_cache):
    ns, report = compile_with(unsafe_cache, cell(13), "<build-test-13>")
    check_region(ns)
    note = next(n for n in report.notes if "not loading compiled code" in n)
    assert "writable by group or others" in note and "PPY_CACHE_DIR" in note and unsafe_cache.base in note
    assert unsafe_cache.base != unsafe_cache.root
    assert os.stat(unsafe_cache.base).st_mode & 0o777 == 0o700
    assert not glob.glob(os.path.join(unsafe_cache.root, "lib", "*" + backend.EXT_SUFFIX))
    assert "this session builds in" in unsafe_cache.info()


@pytest.mark.slow
def test_a_pch_the_compiler_rejects_falls_back_to_plain_includes(unsafe_cache, tmp_path):
    compile_with(unsafe_cache, cell(14), "<build-test-14>")  # the private cache has its prelude now
    pre = unsafe_cache.prelude()
    assert pre.status().state == "ready"
    # A valid PCH, but for other flags (-O0): gcc would skip it silently without -Werror=invalid-pch.
    other = tmp_path / "ppy_prelude.h"
    other.write_text("#include <limits>\n")
    subprocess.run(["c++", "-std=c++20", "-O0", "-x", "c++-header", str(other), "-o", pre.pch], check=True)
    meta = json.loads(Path(pre.pch + ".json").read_text())
    meta["size"] = os.path.getsize(pre.pch)
    with open(pre.pch + ".json", "w") as fh:
        json.dump(meta, fh)
    assert pre.status().state == "ready"
    ns, report = compile_with(unsafe_cache, cell(15), "<build-test-15>")
    check_region(ns)
    assert any("rejected the precompiled prelude" in n and "invalid-pch" in n for n in report.notes), report.notes
    status = pre.status()
    assert status.state == "rejected" and "invalid-pch" in status.detail
    assert "rejected" in unsafe_cache.info()
    ns, report = compile_with(unsafe_cache, cell(16), "<build-test-16>")  # no new PCH, no new rejection
    check_region(ns)
    assert pre.status().state == "rejected" and not any("prelude" in n for n in report.notes)


# ---- ppy warmup, and the notebook ------------------------------------------------------------


@pytest.mark.slow
def test_ppy_warmup_builds_the_runtime_and_the_prelude_ahead_of_time(tmp_path):
    target = tmp_path / "warm"
    command = [sys.executable, "-m", "ppy_magic.cli", "warmup", "--cache-dir", str(target)]
    first = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "ppy warmup: runtime: built" in first.stdout and "ppy warmup: prelude: ready" in first.stdout
    second = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=600)
    assert "runtime: already built (on disk)" in second.stdout and "prelude: ready" in second.stdout
    assert glob.glob(str(target / "prelude" / "*" / prelude.PCH))


def test_the_magic_shows_a_live_status_then_memory_disk_or_build(ip):
    from IPython.utils.capture import capture_output

    source = cell(17, name="g")
    outputs = []
    for line in ("", "", "-f"):
        with capture_output(display=True) as cap:
            ip.run_cell_magic("ppy", line, source)
        texts = [o.data.get("text/plain", "") for o in cap.outputs]
        outputs.append((texts, cap.stdout))
    (built, _), (rerun, rerun_out), (forced, _) = outputs
    assert built[0] == "ppy: building 1 region ..." and " built in " in built[-1], built
    assert rerun == [] and "already built in this session" in rerun_out
    assert forced[0] == "ppy: building 1 region ..." and " built in " in forced[-1], forced
    assert getattr(ip.user_ns["g"], "__ppy_region__", False)
    with capture_output() as cap:
        ip.run_line_magic("ppy_cache", "info")
    assert "cache directory:" in cap.stdout and "prelude: ready" in cap.stdout


def test_builds_run_one_at_a_time_where_memory_is_short(monkeypatch):
    monkeypatch.delenv("PPY_BUILD_JOBS", raising=False)
    monkeypatch.setattr(backend.toolchain, "memory_available", lambda: 1536 * 2**20)  # a Binder session
    assert backend.build_jobs() == 1
    monkeypatch.setattr(backend.toolchain, "memory_available", lambda: 16 * 2**30)
    assert backend.build_jobs() == 2
    monkeypatch.setattr(backend.toolchain, "memory_available", lambda: None)
    assert backend.build_jobs() == 2
    monkeypatch.setenv("PPY_BUILD_JOBS", "1")
    assert backend.build_jobs() == 1
    assert backend.toolchain.memory_available() is None or backend.toolchain.memory_available() > 0
