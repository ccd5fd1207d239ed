"""The tutorial notebooks and their Binder configuration.

Each notebook runs top to bottom in a fresh kernel, headless, as CI and a reader on Binder run it,
with PPY_NOTEBOOK_FAST=1 (shorter timing loops and sweeps; what each cell shows stays the same).
The copies stored in the repository must be executed ones, with their outputs: %ppy_bench tables
as HTML and charts as PNG, which show in any viewer. binder/ is checked statically, and with
`jupyter-repo2docker --no-build` where that is installed.

To refresh the stored outputs (full settings; a few minutes):

    python tests/test_notebooks.py [NAME.ipynb ...]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time

import nbformat
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK_DIR = os.path.join(ROOT, "notebooks")
BINDER = os.path.join(ROOT, "binder")
NOTEBOOKS = (
    "01_torch_region.ipynb",
    "02_benchmarking.ipynb",
    "03_guards_and_fallbacks.ipynb",
    "04_real_model.ipynb",
    "05_artifacts_and_torchrun.ipynb",
    "06_compile_a_library_model.ipynb",
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LABELS = ("PPy ATen region", "PyTorch eager", "torch.compile")

# What each notebook must show, whatever the timings: the claims its prose makes.
MUST_SHOW = {
    "01_torch_region.ipynb": [
        "region active: False",
        "ppy: 2 regions (layer, residual)",
        "region active: True",
        "bitwise equal to eager: True",
        "autograd survives the region: True",
        "gradient equal to eager's: True",
        "layer: ATen region",
    ],
    "02_benchmarking.ipynb": [
        *LABELS,
        "yes, bitwise",
        "yes, assert_close",
        "ppy: 2 regions (layer, gelu_tanh)",
        "the region saves",
    ],
    "03_guards_and_fallbacks.ipynb": [
        "ppy: 1 region (layer)",
        "'noisy_layer' stays Python",
        "gradient reached the parameters",
        "2 calls as region, 0 fallbacks",
        "the override saw: ['matmul', 'add', 'relu']",
        "result type: Logged | equal to eager: True",
        "a tensor argument is a subclass of torch.Tensor",
        "the mode saw: ['matmul', 'add', 'relu']",
        "a TorchFunctionMode is active",
        "a tensor is on a device type the region was not built for",
        "PpyFallbackWarning",
        "CompileError",
        "'to_numpy' cannot be compiled",
        "layer is still a region: True",
        "nothing in the strict cell ran: True",
        "note: ppy region 'layer'",
    ],
    "04_real_model.ipynb": [
        "ppy: 5 regions (LayerNorm.forward, CausalSelfAttention.forward, MLP.forward, Block.forward, GPT.forward)",
        "fallbacks: 0",
        "every loss equal: True",
        "every weight equal: True",
        "every buffer equal: True",
        "has a forward hook",
        "same logits: True",
        *LABELS,
        "yes, bitwise",
    ],
    "05_artifacts_and_torchrun.ipynb": [
        "rank 0 of 1: regions False",
        "ppy: wrote",
        "rank 0 of 1: regions True",
        "rank 0 of 2: regions True",
        "rank 1 of 2: regions True",
        "C++ compiler on PATH: none",
        "the python on that PATH is this kernel's interpreter: True",
        "PpyArtifactWarning",
        "built for torch 2.12.0+cpu",
        "region: True | equal to eager: True",
    ],
    "06_compile_a_library_model.ipynb": [
        "compile returns the same object: True",
        "equal to eager's at every call: True",
        "GPT2LMHeadModel: compiled with ppy_magic.compile",
        "(GPT2Block): forward: region",
        "(GPT2MLP): forward: region",
        "type(model) is GPT2LMHeadModel: True",
        "GPT2LMHeadModel.forward is the original function: True",
        "this model has its own forward: True | another instance: False",
        "Python: not compiled (ppy_magic.compile was not called on a module holding it)",
        "state_dict keys unchanged: True",
        "state_dict values equal: True",
        "compiled / eager, best run:",
    ],
}
# "stays Python" is expected only where a notebook shows it on purpose.
MAY_STAY_PYTHON = {"03_guards_and_fallbacks.ipynb"}
# Charts (matplotlib, PNG) each notebook draws.
CHARTS = {"02_benchmarking.ipynb": 2}


# -- running a notebook ----------------------------------------------------------------------------


def execute(path: str, *, fast: bool, timeout: int = 900) -> nbformat.NotebookNode:
    """Run the notebook at `path` in a fresh kernel (cwd: notebooks/); return it with its outputs.

    Raises nbclient's CellExecutionError on an error in a cell not tagged `raises-exception`.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)  # widget state from an older run: no output refers to it now
    env_before = os.environ.get("PPY_NOTEBOOK_FAST")
    os.environ["PPY_NOTEBOOK_FAST"] = "1" if fast else "0"  # the kernel inherits this process's environment
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            store_widget_state=False,  # nothing the notebooks show needs it
            resources={"metadata": {"path": NOTEBOOK_DIR}},
        ).execute()
    finally:
        if env_before is None:
            os.environ.pop("PPY_NOTEBOOK_FAST", None)
        else:
            os.environ["PPY_NOTEBOOK_FAST"] = env_before
    return nb


def output_text(nb: nbformat.NotebookNode) -> str:
    """Everything the notebook shows as text: streams, plain text, HTML, tracebacks."""
    parts = []
    for cell in nb.cells:
        stream = None  # the stream the cell's last output wrote to
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                # one print can arrive in pieces (the kernel flushes on a timer): shown as one text, joined so
                if out.name == stream:
                    parts[-1] += out.text
                else:
                    parts.append(out.text)
                stream = out.name
                continue
            stream = None
            if out.output_type == "error":
                parts.append(f"{out.ename}: {out.evalue}\n" + "\n".join(out.traceback))
            else:
                data = out.get("data", {})
                parts += [data.get(k, "") for k in ("text/plain", "text/html")]
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(parts))  # tracebacks carry ANSI colours


def check_outputs(name: str, nb: nbformat.NotebookNode) -> None:
    text = output_text(nb)
    missing = [s for s in MUST_SHOW[name] if s not in text]
    assert not missing, f"{name} does not show {missing}"
    if name not in MAY_STAY_PYTHON:
        assert "stays Python" not in text, f"{name}: a function stayed Python:\n{text}"
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    shown = [o.get("data", {}) for o in outputs if o.output_type in ("display_data", "execute_result")]
    # A widget view shows "model not found" once the notebook is reopened; an empty output is a leftover.
    assert not [d for d in shown if WIDGET_VIEW in d], f"{name}: a widget view was saved"
    assert all(any(v for v in d.values()) for d in shown), f"{name}: an empty output was saved"
    charts = sum("image/png" in d for d in shown)
    assert charts == CHARTS.get(name, 0), f"{name}: {charts} PNG charts"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if "raises-exception" in cell.metadata.get("tags", []):
            assert errors, f"{name}: this cell is there to show an error, and raised none:\n{cell.source}"
        else:
            assert not errors, f"{name}: {errors[0].ename}: {errors[0].evalue}\n{cell.source}"


def bench_tables(nb: nbformat.NotebookNode) -> list[str]:
    """The HTML of every %ppy_bench report the notebook shows."""
    return [
        o.data["text/html"]
        for c in nb.cells
        for o in c.get("outputs", [])
        if "class='ppy-bench'" in o.get("data", {}).get("text/html", "")
    ]


# -- the notebooks run -----------------------------------------------------------------------------


@pytest.fixture
def kernel_env(monkeypatch):
    # The notebooks call `ppy` and `python` with `!`: the interpreter running the tests, as in an activated venv.
    monkeypatch.setenv(
        "PATH",
        os.pathsep.join([sysconfig.get_path("scripts"), os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, kernel_env, tmp_path):
    pytest.importorskip("nbclient")
    nb = execute(os.path.join(NOTEBOOK_DIR, name), fast=True)
    nbformat.write(nb, tmp_path / name)  # to look at when it fails
    check_outputs(name, nb)
    if name == "02_benchmarking.ipynb":
        tables = bench_tables(nb)
        assert tables and all(label in tables[0] for label in LABELS)
    leftovers = set(os.listdir(NOTEBOOK_DIR)) - set(NOTEBOOKS) - {".ipynb_checkpoints", "__pycache__"}
    assert not leftovers, f"{name} wrote {leftovers} next to the notebooks"


# -- the notebooks stored ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_stored_notebook_is_executed_with_its_outputs(name):
    nb = nbformat.read(os.path.join(NOTEBOOK_DIR, name), as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    counts = [c.get("execution_count") for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), f"{name} was not run top to bottom in one kernel: {counts}"
    check_outputs(name, nb)


def test_stored_benchmarking_notebook_shows_the_bench_as_html():
    nb = nbformat.read(os.path.join(NOTEBOOK_DIR, "02_benchmarking.ipynb"), as_version=4)
    tables = bench_tables(nb)
    assert len(tables) == 3, "a %ppy_bench report per %ppy_bench cell that displays one"
    for table in tables:
        assert all(label in table for label in LABELS)
        assert "ppy-bars-median" in table  # the best/median toggle, without a kernel
    assert "widgets" not in nb.metadata  # nothing that needs widget state
    # Stored with the full settings, so a reader sees the default measurement: 5 rounds of 20,000 calls.
    assert "5 rounds of 20,000 calls" in output_text(nb)


def test_notebooks_read_the_fast_switch_in_a_collapsed_setup_cell():
    for name in NOTEBOOKS:
        nb = nbformat.read(os.path.join(NOTEBOOK_DIR, name), as_version=4)
        uses = [c for c in nb.cells if "PPY_NOTEBOOK_FAST" in c.source]
        for cell in uses:
            assert "setup" in cell.metadata.get("tags", []), name
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, name
        assert len(uses) <= 1, name


# -- Binder --------------------------------------------------------------------------------------


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as fh:
        return fh.read()


def _requirements() -> list[str]:
    lines = [ln.split("#", 1)[0].strip() for ln in _read("binder", "requirements.txt").splitlines()]
    return [ln for ln in lines if ln]


def _pins() -> dict[str, str]:
    from packaging.requirements import Requirement

    pins = {}
    for line in _requirements():
        if line.startswith("-") or line == ".":
            continue
        req = Requirement(line)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        pins[req.name.lower().replace("_", "-")] = exact[0] if exact else ""  # "": listed, not pinned
    return pins


def test_binder_python_and_system_packages():
    assert _read("binder", "runtime.txt").strip() == "python-3.11"
    apt = _read("binder", "apt.txt").split()
    assert "g++" in apt and "ninja-build" in apt


def test_binder_torch_is_the_cpu_build_ci_tests():
    ci = re.search(r"torch==([0-9][0-9.]*)", _read(".ci", "run"))
    assert ci, ".ci/run no longer pins torch"
    pins = _pins()
    assert pins["torch"] == f"{ci.group(1)}+cpu", f"binder pins torch {pins['torch']}, CI tests {ci.group(1)}"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in _requirements()


def test_binder_widgets_are_pinned_together():
    from importlib import metadata

    pins = _pins()
    widgets, lab = pins.get("ipywidgets"), pins.get("jupyterlab-widgets")
    assert widgets and lab, "pin ipywidgets and jupyterlab_widgets with =="
    assert widgets.startswith("8.") and lab.startswith("3."), (widgets, lab)  # ipywidgets 8 needs the 3.x extension
    if metadata.version("ipywidgets") == widgets:  # then its own metadata says which extension it wants
        from packaging.requirements import Requirement

        wanted = [
            Requirement(r)
            for r in metadata.requires("ipywidgets") or []
            if r.lower().replace("_", "-").startswith("jupyterlab-widgets")
        ]
        assert wanted and all(lab in r.specifier for r in wanted), (lab, wanted)
    assert "pandas" in pins


def test_binder_transformers_is_the_version_the_dev_extras_pin():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    dev = tomllib.loads(_read("pyproject.toml"))["project"]["optional-dependencies"]["dev"]
    pinned = [r.split("==", 1)[1].split(";")[0].strip() for r in dev if r.startswith("transformers==")]
    assert pinned, "pyproject.toml's dev extras no longer pin transformers"
    assert _pins().get("transformers") == pinned[0], "notebook 06 on Binder: the transformers the tests compile"


def test_binder_installs_the_package_itself():
    assert "." in _requirements(), "repo2docker ignores pyproject.toml when binder/ exists: list `.`"


def test_binder_post_build_warms_the_cache_and_stops_on_error():
    path = os.path.join(BINDER, "postBuild")
    assert os.access(path, os.X_OK), "binder/postBuild must be executable"
    lines = [ln.strip() for ln in _read("binder", "postBuild").splitlines()]
    code = [ln for ln in lines if ln and not ln.startswith("#")]
    assert lines[0].startswith("#!") and code[0] == "set -e", "postBuild must start with set -e"
    assert "ppy warmup" in code
    from ppy_magic import cli

    assert "warmup" in cli.COMMANDS, "postBuild runs `ppy warmup`, which the CLI does not have"


@pytest.mark.parametrize("quota, expected", [("150000 100000", "2"), ("100000 100000", "1"), ("max 100000", None)])
def test_binder_start_caps_threads_at_the_cpu_quota(tmp_path, quota, expected):
    (tmp_path / "cpu.max").write_text(quota + "\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PPY_CGROUP_ROOT"] = str(tmp_path)
    out = subprocess.run(
        [os.path.join(BINDER, "start"), sys.executable, "-c", "import os; print(os.environ.get('OMP_NUM_THREADS'))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(expected)
    env["OMP_NUM_THREADS"] = "3"  # the user's choice wins
    out = subprocess.run(
        [os.path.join(BINDER, "start"), "sh", "-c", "echo $OMP_NUM_THREADS"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "3"


def test_repo2docker_reads_the_binder_configuration():
    r2d = shutil.which("jupyter-repo2docker")
    if r2d is None:
        pytest.skip("jupyter-repo2docker is not installed")
    proc = subprocess.run(
        [r2d, "--no-build", "--debug", "--user-id", "1000", "--user-name", "jovyan", ROOT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "python=3.11" in out
    assert "g++ ninja-build" in out
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in out
    assert "./binder/postBuild" in out and "binder/start" in out


def test_binder_badge_opens_the_first_notebook_in_jupyterlab():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    repo = tomllib.loads(_read("pyproject.toml"))["project"]["urls"]["Repository"]
    owner_repo = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)/?", repo).group(1)
    url = f"https://mybinder.org/v2/gh/{owner_repo}/HEAD?urlpath=lab/tree/notebooks/{NOTEBOOKS[0]}"
    badge = f"[![Binder](https://mybinder.org/badge_logo.svg)]({url})"
    texts = {"README.md": _read("README.md")}
    with_badge = [p for p, t in texts.items() if "mybinder.org/v2" in t]
    assert "README.md" in with_badge
    for p in with_badge:
        assert badge in texts[p], f"{p}: the Binder badge should be {badge}"
        for link in re.findall(r"https://mybinder\.org/v2/[^)\s]+", texts[p]):
            assert link == url, f"{p}: {link} is not {url}"
    for name in NOTEBOOKS:
        assert name in texts["README.md"], name


# -- refreshing the stored notebooks -----------------------------------------------------------------


def main(argv: list[str]) -> int:
    names = argv or list(NOTEBOOKS)
    for name in names:
        t0 = time.perf_counter()
        path = os.path.join(NOTEBOOK_DIR, name)
        nb = execute(path, fast=False)
        check_outputs(name, nb)
        nbformat.write(nb, path)
        print(f"{name}: executed and stored in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
