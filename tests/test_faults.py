"""Faults the build cache survives, injected for real: full disks, file-size limits, read-only and unwritable
caches, hostile parent directories, planted libraries, a build killed mid-way, four processes building one cell.

Each fault ends in a working cell (a region, or the function kept Python) and one line that names the cause in
plain words and what to do. Full disks and read-only caches are set up in a child process's own mount namespace
(`unshare -m`: a small tmpfs, a read-only bind mount), an unwritable cache by dropping root's capabilities
(`setpriv`); where this machine cannot, the test skips and says which command failed. CI runs as root, where all
of them run.

Cost: every cell is one small region built in the session's cache (its runtime and prelude are built once); the
children reuse them, so no test here builds a prelude. About a dozen cell builds in all.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
import torch

from ppy_magic import backend, cli
from ppy_magic.backend import disk, eviction, safety
from tests.support.cells import compile_cell

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RUN = f"{os.getpid() % 10_000}"  # keeps cells of this run apart from those of a kept cache
SUFFIX = backend.EXT_SUFFIX


def cell(tag: int) -> str:
    """A one-region cell; `tag` makes it a module of its own (`-`: never one of test_build's cells)."""
    return textwrap.dedent(f"""
        import torch
        import ppy

        @ppy.opt(3)
        def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            z = x * y - {tag}.{_RUN}
            return torch.tanh(torch.relu(z))
    """)


def expected(tag: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tanh(torch.relu(x * y - float(f"{tag}.{_RUN}")))


# A child: compiles and runs one cell in the cache of PPY_CACHE_DIR, prints what the user saw as JSON.
CHILD = textwrap.dedent("""
    import glob, json, linecache, os, resource, sys, time
    import torch
    from ppy_magic import backend, pipeline

    source = open(sys.argv[1]).read()
    if len(sys.argv) > 2:  # wait for the go-ahead, to start at the same time as siblings
        print("ready", flush=True)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.005)
    if os.environ.get("PPY_TEST_FSIZE"):  # a file-size limit for this process and the compilers it starts
        n = int(os.environ["PPY_TEST_FSIZE"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    filename = "<fault-cell>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": "__fault__"}
    cache = backend.shared_cache()
    binder = pipeline.compile_source(source, ns, filename, cache=cache)
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    f = ns["f"]
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    name = backend.module_name("ppy_cell", binder.report.cpp)
    print(json.dumps({
        "region": bool(getattr(f, "__ppy_region__", False)),
        "x": x.tolist(), "y": y.tolist(), "out": f(x, y).tolist(),
        "summary": binder.report.summary(), "python": binder.report.python, "notes": binder.report.notes,
        "source": binder.report.build_source, "base": cache.base,
        "partial": sorted(glob.glob(os.path.join(cache.root, "lib", "*.tmp*"))),
        "module": name,
        "build": sorted(os.listdir(os.path.join(cache.root, "build", name)))
                 if os.path.isdir(os.path.join(cache.root, "build", name)) else None,
    }), flush=True)
""")


def child_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=ROOT, **extra)  # tests.support and ppy_magic, from the root


def start_child(tmp_path, source: str, *args: str, wrap: list[str] = (), env=None, **kw) -> subprocess.Popen:
    path = tmp_path / f"cell{time.monotonic_ns()}.py"
    path.write_text(source)
    return subprocess.Popen(
        [*wrap, sys.executable, "-c", CHILD, str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env or child_env(),
        **kw,
    )


def child_result(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out + err
    return json.loads(out.strip().splitlines()[-1])


def compile_with(cache: backend.Cache, source: str, filename: str):
    """Compile and run `source` like a %%ppy cell in `cache`; return (namespace, report)."""
    import linecache

    from ppy_magic import pipeline

    ns = {"__name__": "__ppy_test__"}
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    binder = pipeline.compile_source(source, ns, filename, cache=cache)
    pipeline.run(compile(source, filename, "exec"), ns, binder)
    return ns, binder.report


def run_cell(tmp_path, tag: int, *, wrap: list[str] = (), env=None) -> dict:
    """Run `cell(tag)` in a child; check that f gives eager's result whether or not it became a region."""
    got = child_result(start_child(tmp_path, cell(tag), wrap=wrap, env=env))
    x, y = torch.tensor(got["x"]), torch.tensor(got["y"])
    assert torch.equal(torch.tensor(got["out"]), expected(tag, x, y)), got["summary"]
    return got


# ---- what this machine lets a test set up ------------------------------------------------------------


@functools.cache
def mount_namespace() -> tuple[list[str], str | None]:
    """(the command prefix that gives a child its own mount namespace, or [], and why not)."""
    if shutil.which("unshare") is None:
        return [], "`unshare` (util-linux) is not installed"
    probe = 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d" && rmdir "$d"'
    tried = []
    for prefix in (["unshare", "-m", "--propagation", "private"], ["unshare", "-Urm", "--propagation", "private"]):
        done = subprocess.run([*prefix, "sh", "-c", probe], capture_output=True, text=True, timeout=30)
        if done.returncode == 0:
            return prefix, None
        tried.append(f"`{' '.join(prefix)}`: {done.stderr.strip() or done.returncode}")
    return [], "cannot mount a tmpfs in a private mount namespace (" + "; ".join(tried) + ")"


def in_namespace(setup: str) -> list[str]:
    """A prefix that runs the child in its own mount namespace after the shell `setup` (skips if impossible)."""
    prefix, why = mount_namespace()
    if not prefix:
        pytest.skip(why)
    return [*prefix, "sh", "-ec", setup + '\nexec "$@"', "fault-setup"]


@functools.cache
def unwritable_wrapper() -> tuple[list[str], str | None]:
    """A prefix under which permission bits apply to this user (root bypasses them unless its capabilities go)."""
    if os.geteuid() != 0:
        return [], None
    if shutil.which("setpriv") is None:
        return [], "running as root, and `setpriv` (util-linux) is not installed to drop CAP_DAC_OVERRIDE"
    prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o555)
        done = subprocess.run([*prefix, "touch", os.path.join(d, "x")], capture_output=True, text=True)
        os.chmod(d, 0o700)
    if done.returncode == 0:
        return [], "`setpriv` could not take CAP_DAC_OVERRIDE away: root still writes to a mode-555 directory"
    return prefix, None


@pytest.fixture(scope="module")
def warm(cache_dir) -> str:
    """The session's cache with the runtime and the prelude built (by a first cell)."""
    ns, _ = compile_cell(cell(0), filename="<faults-0>")
    assert getattr(ns["f"], "__ppy_region__", False)
    return cache_dir


def _mirror(cache_dir: str, target: str) -> str:
    """A cache at `target` holding the session's runtime and current prelude, as hard links (no copy)."""
    current = backend.cache.prelude_identity()
    for sub in ("lib", "build", "locks", "prelude", "live"):
        os.makedirs(os.path.join(target, sub), mode=0o700, exist_ok=True)
    for f in glob.glob(os.path.join(cache_dir, "lib", "ppy_runtime_*")):
        os.link(f, os.path.join(target, "lib", os.path.basename(f)))
    src = os.path.join(cache_dir, "prelude", current)
    dst = os.path.join(target, "prelude", current)
    os.makedirs(dst, mode=0o700)
    for f in os.listdir(src):
        os.link(os.path.join(src, f), os.path.join(dst, f))
    return target


# ---- full disks and limits ---------------------------------------------------------------------------


def test_a_full_disk_while_publishing_keeps_the_region_and_leaves_no_partial_file(warm, tmp_path):
    lib = os.path.join(warm, "lib")
    runtime = os.path.join(lib, backend.module_keys.runtime_name() + SUFFIX)
    # lib/ becomes a 2 MB tmpfs holding the runtime and a filler that leaves 8 KB: the cell compiles
    # (build/ is untouched) but its .so cannot be copied into place.
    setup = f"""
        stage=$(mktemp -d)
        mount -t tmpfs -o size=2m,mode=0700 tmpfs "$stage"
        cp -p {runtime} {runtime}.json "$stage"/
        avail=$(df -B1 --output=avail "$stage" | tail -1)
        head -c $((avail - 8192)) /dev/zero > "$stage/filler" || true
        mount --bind "$stage" {lib}
    """
    got = run_cell(tmp_path, 1, wrap=in_namespace(setup))
    assert got["region"] and got["source"] == "build", got["summary"]
    (note,) = [n for n in got["notes"] if "could not save it in the cache" in n]
    assert "no space left on device" in note and "ppy cache prune" in note and "PPY_CACHE_DIR" in note
    assert got["partial"] == []  # no lib/<name>.so.tmp<pid> left behind


def test_a_compiler_out_of_space_says_so_in_the_headline(warm, tmp_path):
    # build/ becomes a 40 KB tmpfs: the sources fit, the object file does not.
    setup = f"mount -t tmpfs -o size=40k,mode=0700 tmpfs {os.path.join(warm, 'build')}"
    got = run_cell(tmp_path, 2, wrap=in_namespace(setup))
    assert not got["region"]
    ((name, reason),) = got["python"]
    assert name == "f" and reason.startswith("the C++ build failed: no space left on device in "), reason
    assert "free space there, or set PPY_CACHE_DIR" in reason
    assert got["build"] is None, got["build"]  # the half-built objects were removed
    assert got["partial"] == []


def test_a_file_size_limit_says_so_in_the_headline(warm, tmp_path):
    # RLIMIT_FSIZE: the compiler is killed by SIGXFSZ writing its object file. Needs no privilege.
    got = run_cell(tmp_path, 3, env=child_env(PPY_TEST_FSIZE=str(12_000)))
    assert not got["region"]
    ((_, reason),) = got["python"]
    assert "a file-size limit (ulimit -f) was exceeded" in reason and "ulimit -f unlimited" in reason, reason
    assert got["build"] is None and got["partial"] == []


def test_starved_builds_are_read_from_the_log():
    assert safety.starved_build("ld: final link failed: No space left on device", "/c/build").startswith(
        "no space left on device in /c/build"
    )
    assert "file-size limit" in safety.starved_build(
        "c++: internal compiler error: File size limit exceeded signal terminated program cc1plus", "/c"
    )
    assert "out of memory" in safety.starved_build("c++: fatal error: Killed signal terminated program cc1plus", "/c")
    assert safety.starved_build("main.cpp:3:1: error: expected ';'", "/c") is None


# ---- caches that cannot be written -------------------------------------------------------------------


def test_a_read_only_cache_builds_privately_and_reuses_what_it_holds(warm, tmp_path):
    setup = f"mount --bind {warm} {warm}\nmount -o remount,bind,ro {warm}"
    got = run_cell(tmp_path, 4, wrap=in_namespace(setup))
    assert got["region"] and got["source"] == "build", got["summary"]
    (note,) = [n for n in got["notes"] if "cannot write to the cache directory" in n]
    assert "read-only file system" in note and "PPY_CACHE_DIR" in note
    assert "it reuses what the cache directory already holds" in note
    assert not any("built the precompiled prelude" in n for n in got["notes"])  # the read-only one was used
    assert got["base"].startswith(os.path.join(tempfile.gettempdir(), "ppy-private-cache-"))
    assert not os.path.exists(got["base"])  # removed when the session ended


def test_a_cache_this_user_cannot_write_builds_privately(warm, tmp_path):
    prefix, why = unwritable_wrapper()
    if why:
        pytest.skip(why)
    mine = _mirror(warm, str(tmp_path / "theirs"))
    for dirpath, dirs, _ in os.walk(mine):
        for d in dirs:
            os.chmod(os.path.join(dirpath, d), 0o555)
    os.chmod(mine, 0o555)
    try:
        got = run_cell(tmp_path, 5, wrap=prefix, env=child_env(PPY_CACHE_DIR=mine))
    finally:
        for dirpath, dirs, _ in os.walk(mine):
            os.chmod(dirpath, 0o700)
            for d in dirs:
                os.chmod(os.path.join(dirpath, d), 0o700)
    assert got["region"], got["summary"]
    (note,) = [n for n in got["notes"] if "cannot write to the cache directory" in n]
    assert "permission denied" in note and "a directory you can write" in note
    assert not os.path.exists(got["base"])


def test_when_no_directory_can_be_written_the_function_stays_python(tmp_path, monkeypatch):
    """The cache and the temporary directory both unwritable: one line, and the function runs as Python."""
    prefix, why = unwritable_wrapper()
    if why:
        pytest.skip(why)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    source = tmp_path / "cell.py"
    source.write_text(cell(6))
    script = textwrap.dedent(f"""
        import json, os, tempfile, torch
        tempfile.tempdir = {str(locked)!r}
        from tests.support.cells import compile_cell
        ns, report = compile_cell(open({str(source)!r}).read())
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        print(json.dumps({{"python": report.python, "region": getattr(ns["f"], "__ppy_region__", False),
                          "equal": torch.equal(ns["f"](x, y), torch.tanh(torch.relu(x * y - {6}.{_RUN})))}}))
    """)
    env = child_env(PPY_CACHE_DIR=str(locked / "cache"), PPY_TEST_KEEP_CACHE="1")
    done = subprocess.run(
        [*prefix, sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert not got["region"] and got["equal"]
    ((_, reason),) = got["python"]
    assert "permission denied" in reason and "a private cache directory cannot be made either" in reason, reason


# ---- hostile directories -------------------------------------------------------------------------------


def test_a_world_writable_parent_without_the_sticky_bit_is_refused(tmp_path):
    hostile = tmp_path / "shared"
    hostile.mkdir()
    os.chmod(hostile, 0o777)
    (hostile / "cache").mkdir(mode=0o700)
    got = safety.unsafe_directory(str(hostile / "cache"))
    assert got is not None and got.directory == str(hostile)
    assert "which others can write (mode 777, no sticky bit)" in got.reason
    assert f"chmod go-w {hostile}" in got.advice and f"outside {hostile}" in got.advice  # it is ours to fix
    os.chmod(hostile, 0o1777)  # sticky, like /tmp: others cannot replace what is ours
    assert safety.unsafe_directory(str(hostile / "cache")) is None


def test_a_symlink_into_a_hostile_directory_is_resolved_and_refused(tmp_path):
    hostile = tmp_path / "shared"
    hostile.mkdir()
    os.chmod(hostile, 0o777)
    (hostile / "cache").mkdir(mode=0o700)
    safe = tmp_path / "mine"
    safe.mkdir(mode=0o700)
    (safe / "link").symlink_to(hostile / "cache")
    got = safety.unsafe_directory(str(safe / "link"))
    assert got is not None and got.directory == str(hostile)
    assert f"reached through a symlink: {safe / 'link'} -> {hostile / 'cache'}" in got.reason
    # The other way round: a link placed in the hostile directory, to a safe one, is judged by its target.
    (safe / "cache").mkdir(mode=0o700)
    (hostile / "to-mine").symlink_to(safe / "cache")
    assert safety.unsafe_directory(str(hostile / "to-mine")) is None


def test_a_directory_of_another_user_gets_advice_that_can_work(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root (chown)")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 12345, 12345)
    got = safety.unsafe_directory(str(theirs))
    assert "belongs to another" in got.reason and "uid 12345" in got.reason
    assert "chmod" not in got.advice and "PPY_CACHE_DIR" in got.advice
    (theirs / "cache").mkdir(mode=0o700)  # ours, but inside theirs: they can rename it
    got = safety.unsafe_directory(str(theirs / "cache"))
    assert got.directory == str(theirs) and "chmod" not in got.advice and f"outside {theirs}" in got.advice
    group = tmp_path / "group"
    group.mkdir(mode=0o770)
    os.chmod(group, 0o770)
    os.chown(group, os.geteuid(), 12345)  # writable by a group that is not ours alone
    got = safety.unsafe_directory(str(group))
    assert "writable by group or others (mode 770)" in got.reason and f"chmod go-w {group}" in got.advice


def test_a_hostile_cache_is_not_loaded_from_and_the_note_says_why(warm, tmp_path):
    hostile = tmp_path / "shared"
    hostile.mkdir()
    os.chmod(hostile, 0o777)
    cache_root = hostile / "cache"
    (cache_root / "lib").mkdir(parents=True)
    os.chmod(cache_root, 0o700)
    runtime = backend.module_keys.runtime_name()
    for f in (runtime + SUFFIX, runtime + SUFFIX + ".json"):  # a valid module with a valid manifest
        shutil.copy(os.path.join(warm, "lib", f), cache_root / "lib")
    cache = backend.Cache(str(cache_root))
    base = cache.ensure_dirs()
    try:
        assert base != str(cache_root) and cache._read_through is None
        (note,) = cache.notes
        assert "not loading compiled code from the cache directory" in note and f"inside {hostile}" in note
        assert cache._load_from_disk(runtime, remove_bad=True) is None  # nothing is read from there
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- a planted library ------------------------------------------------------------------------------------


def write_json(path: str, data) -> None:
    with open(path, "w") as fh:
        json.dump(data, fh)


def _planted_library(tmp_path, marker) -> str:
    """A valid shared library whose static initialiser writes `marker`: proof of being loaded."""
    src = tmp_path / "planted.cpp"
    src.write_text(
        "#include <cstdio>\n"
        "struct Planted { Planted() { if (FILE* f = std::fopen(" + json.dumps(str(marker)) + ', "w")) '
        "std::fclose(f); } };\nstatic Planted planted;\n"
    )
    out = tmp_path / "planted.so"
    subprocess.run(["c++", "-shared", "-fPIC", str(src), "-o", str(out)], check=True, timeout=120)
    return str(out)


def test_a_planted_library_is_refused_before_it_is_loaded(warm, tmp_path):
    marker = tmp_path / "initialisers-ran"
    planted = _planted_library(tmp_path, marker)
    source = cell(7)
    _, first = compile_cell(source, filename="<faults-7>")
    name = first.module_name
    path = backend.shared_cache().so_path(name)
    with open(planted, "rb") as fh:
        data = fh.read()
    own_manifest = {  # the planted library's own, valid manifest: another module's
        "name": "ppy_cell_0123456789abcdef01234567",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    with open(path + ".json") as fh:
        kept = json.load(fh)
    cases = {
        "its manifest names another module ('ppy_cell_0123456789abcdef01234567')": own_manifest,
        "its size": kept,  # the library replaced, its manifest left as it was
        "it has no manifest": None,
    }
    for why, manifest in cases.items():
        shutil.copy(planted, path)
        if manifest is None:
            os.remove(path + ".json")
        else:
            write_json(path + ".json", manifest)
        assert disk.verify_manifest(name, path).startswith(why)
        assert not marker.exists()
    # A new kernel (empty memory) meets the planted library: refused, rebuilt, and never run.
    shutil.copy(planted, path)
    write_json(path + ".json", own_manifest)
    ns, again = compile_with(backend.Cache(warm), source, "<faults-7>")
    assert again.build_source == "build" and getattr(ns["f"], "__ppy_region__", False)
    assert any("was not loaded (its manifest names another module" in n for n in again.notes), again.notes
    assert not marker.exists(), "the planted library's static initialisers ran"
    assert disk.verify_manifest(name, path) is None  # the rebuilt one is in place


# ---- killed builds and concurrent ones -------------------------------------------------------------------


@pytest.mark.slow
def test_a_build_killed_mid_way_leaves_nothing_behind(warm, tmp_path):
    mine = _mirror(warm, str(tmp_path / "cache"))
    env = child_env(PPY_CACHE_DIR=mine)
    source = cell(8)
    victim = start_child(tmp_path, source, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not glob.glob(os.path.join(mine, "build", "ppy_cell_*", "main.cpp")):
            assert victim.poll() is None, "the build finished before it could be killed"
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.01)
        os.killpg(victim.pid, signal.SIGKILL)  # the kernel and its compilers die at once
        victim.wait()
    finally:
        with contextlib.suppress(OSError):
            os.killpg(victim.pid, signal.SIGKILL)
    stale = os.listdir(os.path.join(mine, "live"))
    assert stale  # the killed process's record, nobody holding it
    got = run_cell(tmp_path, 8, env=env)
    assert got["region"] and got["source"] == "build", got["summary"]
    assert got["partial"] == []
    pruned = subprocess.run(
        [sys.executable, "-m", "ppy_magic.cli", "cache", "prune", "--cache-dir", mine],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert pruned.returncode == 0 and pruned.stdout.startswith(f"ppy cache: pruned {mine}"), pruned.stdout
    assert not set(stale) & set(os.listdir(os.path.join(mine, "live")))  # the stale record is gone
    assert not glob.glob(os.path.join(mine, "build", ".old-*"))


@pytest.mark.slow
def test_four_processes_building_one_cell_build_it_once_and_all_load_it(warm, tmp_path):
    source = cell(9)
    go = tmp_path / "go"
    procs = [start_child(tmp_path, source, str(go)) for _ in range(4)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    go.write_text("")
    results = [child_result(p) for p in procs]
    assert sorted(r["source"] for r in results) == ["build", "disk", "disk", "disk"], results
    assert all(r["region"] for r in results)
    assert len({r["module"] for r in results}) == 1


# ---- a bounded cache ---------------------------------------------------------------------------------


def _fake_cache(root, modules: dict[str, tuple[int, float]], preludes: dict[str, tuple[int, float]]):
    """Entries of the given sizes (bytes) and last-use times, with valid-looking manifests; no compiler."""
    for sub in ("lib", "build", "locks", "prelude", "live"):
        os.makedirs(os.path.join(root, sub), mode=0o700, exist_ok=True)
    for name, (size, used) in modules.items():
        so = os.path.join(root, "lib", name + SUFFIX)
        with open(so, "wb") as fh:
            fh.write(b"\0" * size)
        with open(so + ".json", "w") as fh:
            json.dump({"name": name, "size": size, "sha256": "0"}, fh)
        for p in (so, so + ".json"):
            os.utime(p, (used, used))
    for ident, (size, used) in preludes.items():
        d = os.path.join(root, "prelude", ident)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "ppy_prelude.h.gch"), "wb") as fh:
            fh.write(b"\0" * size)
        os.utime(os.path.join(d, "ppy_prelude.h.gch"), (used, used))
        os.utime(d, (used, used))
    return backend.Cache(str(root))


def test_sizes_are_read_as_people_write_them(monkeypatch):
    assert eviction.parse_size("5G") == 5 * 10**9 and eviction.parse_size("500M") == 500 * 10**6
    assert eviction.parse_size("1.5GB") == 1_500_000_000 and eviction.parse_size("2GiB") == 2 * 2**30
    assert eviction.parse_size("123") == 123 and eviction.parse_size("unlimited") is None
    with pytest.raises(ValueError, match="5G, 500M"):
        eviction.parse_size("lots")
    monkeypatch.setenv("PPY_CACHE_MAX_SIZE", "300M")
    assert backend.Cache("/nonexistent").max_size == 300 * 10**6
    monkeypatch.delenv("PPY_CACHE_MAX_SIZE")
    assert backend.Cache("/nonexistent").max_size == eviction.DEFAULT_MAX_SIZE


def test_eviction_takes_other_preludes_first_then_the_least_recently_used(tmp_path, monkeypatch):
    now = time.time()
    current = backend.cache.prelude_identity()
    cache = _fake_cache(
        tmp_path / "c",
        {"ppy_cell_old": (300_000, now - 300), "ppy_cell_mid": (300_000, now - 200), "ppy_cell_new": (300_000, now)},
        {current: (1_000_000, now - 1000), "other-torch": (1_000_000, now - 10)},
    )
    (tmp_path / "c" / "lib" / f"ppy_cell_x{SUFFIX}.tmp4242").write_bytes(b"\0" * 1000)  # a killed publish
    cache.max_size = 2_000_000  # holds 2.9 MB: the leftover, the other prelude, then ppy_cell_old must go
    plan = [e.name for e in cache.eviction_plan()]
    assert plan[:2] == [f"lib/ppy_cell_x{SUFFIX}.tmp4242", "other-torch"]
    info = cache.info()
    assert "size limit: 2.0 MB" in info and "prune would remove 2 entries" in info
    assert "other-torch (prelude of another toolchain" in info
    assert "next to go when over the limit: ppy_cell_old (module" in info
    cache.max_size = 1_500_000
    message = cache.prune()
    assert "removed 4 entries" in message, message
    left = sorted(os.listdir(tmp_path / "c" / "lib"))
    assert left == [f"ppy_cell_new{SUFFIX}", f"ppy_cell_new{SUFFIX}.json"]
    assert os.listdir(tmp_path / "c" / "prelude") == [current]  # this toolchain's prelude goes last


def test_eviction_never_removes_what_a_live_process_loaded_or_is_building(tmp_path):
    now = time.time()
    cache = _fake_cache(
        tmp_path / "c",
        {"ppy_cell_loaded": (100_000, now - 300), "ppy_cell_building": (100_000, now - 200)},
        {},
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom ppy_magic.backend import eviction\n"
            "r = eviction.LiveRecord(sys.argv[1]); r.add('module', 'ppy_cell_loaded')\n"
            "print('ready', flush=True); time.sleep(600)",
            str(tmp_path / "c"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        cache.max_size = 1000
        with disk.flock(cache.lock_path("ppy_cell_building")):  # a build in progress
            message = cache.prune()
        assert "removed 0 entries" in message and "1 in use by a live process or a build, kept" in message
        assert sorted(os.listdir(tmp_path / "c" / "lib")) == sorted(
            f"{n}{SUFFIX}{j}" for n in ("ppy_cell_loaded", "ppy_cell_building") for j in ("", ".json")
        )
        assert "held by live processes (never evicted): 1" in cache.info()
    finally:
        holder.kill()
        holder.wait()
    message = cache.prune()  # the holder is gone, the build finished: both may go now
    assert "removed 2 entries" in message, message
    assert os.listdir(tmp_path / "c" / "lib") == [] and os.listdir(tmp_path / "c" / "live") == []


def test_a_build_over_the_limit_evicts_the_least_recently_used(warm, tmp_path):
    mine = _mirror(warm, str(tmp_path / "cache"))
    cache = backend.Cache(mine)
    stale = os.path.join(mine, "lib", "ppy_cell_stale" + SUFFIX)
    with open(stale, "wb") as fh:
        fh.write(b"\0" * 100_000)
    os.utime(stale, (1, 1))
    on_disk = sum(e.size for e in cache.scan())
    cache.max_size = on_disk + 50_000  # the new module tips it over
    ns, report = compile_with(cache, cell(10), "<faults-10>")
    assert getattr(ns["f"], "__ppy_region__", False) and report.build_source == "build"
    (note,) = [n for n in report.notes if "over its size limit" in n]
    assert note.startswith("the cache was over its size limit") and "removed" in note, note
    assert not os.path.exists(stale)  # the least recently used went first
    assert cache.has(report.module_name) and cache.prelude().status().usable  # what this process uses stayed


def test_ppy_cache_prune_and_info_from_the_command_line(tmp_path, capsys):
    now = time.time()
    _fake_cache(tmp_path / "c", {"ppy_cell_a": (2_000_000, now - 100), "ppy_cell_b": (2_000_000, now)}, {})
    assert cli.main(["cache", "info", "--cache-dir", str(tmp_path / "c"), "--max-size", "3M"]) == 0
    out = capsys.readouterr().out
    assert "size limit: 3.0 MB" in out and "prune would remove 1 entry" in out and "ppy_cell_a (module" in out
    assert cli.main(["cache", "prune", "--cache-dir", str(tmp_path / "c"), "--max-size", "3M"]) == 0
    assert "removed 1 entry (2.0 MB)" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path / "c" / "lib"))[0] == f"ppy_cell_b{SUFFIX}"
    assert cli.main(["cache", "prune", "--cache-dir", str(tmp_path / "c"), "--max-size", "lots"]) == 2


# ---- the private fallback cache ---------------------------------------------------------------------------


def test_the_private_cache_is_removed_at_exit_and_after_a_kill(tmp_path):
    hostile = tmp_path / "shared"
    hostile.mkdir()
    os.chmod(hostile, 0o777)
    script = (
        "import sys, time\nfrom ppy_magic import backend\n"
        "c = backend.Cache(sys.argv[1]); print(c.ensure_dirs(), flush=True)\n"
        "if sys.argv[2] == 'wait': time.sleep(600)\n"
    )
    command = [sys.executable, "-c", script, str(hostile / "cache")]
    done = subprocess.run([*command, "exit"], capture_output=True, text=True, env=child_env(), timeout=120)
    private = done.stdout.strip()
    assert done.returncode == 0 and "ppy-private-cache-" in private, done.stderr
    assert not os.path.exists(private)  # atexit
    killed = subprocess.Popen([*command, "wait"], stdout=subprocess.PIPE, text=True, env=child_env())
    private = killed.stdout.readline().strip()
    killed.kill()
    killed.wait()
    assert os.path.isdir(private)  # no atexit after SIGKILL ...
    os.utime(private, (time.time() - 120, time.time() - 120))
    fresh = disk.make_private_dir()  # ... the next one made removes it
    shutil.rmtree(fresh)
    assert not os.path.exists(private)


def test_the_magics_show_the_limit_and_prune_by_hand(ip, tmp_path):
    from IPython.utils.capture import capture_output
    from traitlets import TraitError

    now = time.time()
    _fake_cache(tmp_path / "c", {"ppy_cell_a": (2_000_000, now - 100), "ppy_cell_b": (2_000_000, now)}, {})
    options = ip.magics_manager.registry["PpyMagics"]
    before = (options.cache_dir, options.cache_max_size)
    try:
        ip.run_line_magic("config", f"PpyMagics.cache_dir = {str(tmp_path / 'c')!r}")
        ip.run_line_magic("config", "PpyMagics.cache_max_size = '3M'")
        with capture_output() as info:
            ip.run_line_magic("ppy_cache", "info")
        assert "size limit: 3.0 MB" in info.stdout and "prune would remove 1 entry" in info.stdout
        with capture_output() as pruned:
            ip.run_line_magic("ppy_cache", "prune")
        assert "removed 1 entry (2.0 MB)" in pruned.stdout and "limit 3.0 MB" in pruned.stdout
        assert not os.path.exists(tmp_path / "c" / "lib" / f"ppy_cell_a{SUFFIX}")
        with pytest.raises(TraitError, match="cannot read 'lots' as a size"):
            options.cache_max_size = "lots"
    finally:
        options.cache_dir, options.cache_max_size = before
