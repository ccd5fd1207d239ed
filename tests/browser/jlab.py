"""Driving JupyterLab 4 in Chromium for the browser tests: a server, a browser, and a notebook page.

``LabServer`` starts ``python -m jupyterlab`` on 127.0.0.1 with a token, a
temporary root directory and its own config, settings and workspace
directories, so a test can change settings (the theme) without touching the
user's. ``NotebookPage`` wraps a Playwright page open on one notebook: it acts
as a user does (menus, keyboard, clicks) and reads back what the user sees
(the DOM, computed styles), using the application object JupyterLab exposes
with ``--LabApp.expose_app_in_browser`` only to wait for the kernel.

Playwright drives Debian's ``chromium`` through ``executable_path``:
Playwright's own browser download is not available on CI machines.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Headless, and quiet on the network: without the last four flags Chromium keeps trying to reach
# Google's servers, which on a machine with no way out floods the logs and slows the page.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# Settings every test starts from (JUPYTERLAB_SETTINGS_DIR is a fresh directory).
BASE_SETTINGS = {
    # No "would you like news?" toast over the notebook, and no fetches to the internet.
    "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
    # Every cell in the DOM, so a test can read a whole notebook without scrolling it into view.
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Light"},
}


def chromium_path() -> str | None:
    """Debian's chromium (``PPY_CHROMIUM`` names another)."""
    given = os.environ.get("PPY_CHROMIUM")
    if given:
        return given if os.access(given, os.X_OK) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """A JupyterLab server of its own: ``start()``, ``url(path)``, ``api(...)``, ``stop()``."""

    workdir: str  # holds root/ (the notebooks) and the config, settings, workspace and runtime dirs
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the server and its kernels
    port: int = 0
    token: str = ""
    proc: subprocess.Popen | None = None

    @property
    def root(self) -> str:
        return os.path.join(self.workdir, "root")

    @property
    def log_path(self) -> str:
        return os.path.join(self.workdir, "server.log")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        dirs = {name: os.path.join(self.workdir, name) for name in ("root", "config", "settings", "workspaces", "rt")}
        for d in dirs.values():
            os.makedirs(d, exist_ok=True)
        for plugin, values in BASE_SETTINGS.items():
            self._write_settings(dirs["settings"], plugin, values)
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        env = dict(os.environ)
        # The kernel is `python -m ipykernel_launcher`, found on PATH: the interpreter running the tests
        # first (a virtualenv's bin/), with this checkout importable as `ppy_magic`.
        path = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable), env.get("PATH", "")]
        env["PATH"] = os.pathsep.join(path)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
        env.update(
            JUPYTER_CONFIG_DIR=dirs["config"],
            JUPYTERLAB_SETTINGS_DIR=dirs["settings"],
            JUPYTERLAB_WORKSPACES_DIR=dirs["workspaces"],
            JUPYTER_RUNTIME_DIR=dirs["rt"],
        )
        env.update(self.env)
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",  # CI runs as root
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={dirs['root']}",
            "--LabApp.expose_app_in_browser=True",
        ]
        log = open(self.log_path, "w")  # noqa: SIM115 (closed with the server)
        self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("GET", "api/status")
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer on port {self.port} in {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # the server shuts its kernels down
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the server and its kernels
            self.proc.wait(10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return "".join(fh.readlines()[-lines:])
        except OSError:
            return ""

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path}{sep}token={self.token}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base}/{path}", data=data, method=method)
        request.add_header("Authorization", f"token {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
        return json.loads(text) if text else None

    def set_setting(self, plugin: str, values: dict[str, Any]) -> None:
        """Change a JupyterLab setting the way the settings editor does (read on the next page load)."""
        self.api("PUT", f"lab/api/settings/{plugin}", {"raw": json.dumps(values)})

    def shutdown_kernels(self) -> None:
        for session in self.api("GET", "api/sessions"):
            self.api("DELETE", f"api/sessions/{session['id']}")
        for kernel in self.api("GET", "api/kernels"):
            self.api("DELETE", f"api/kernels/{kernel['id']}")

    @staticmethod
    def _write_settings(settings_dir: str, plugin: str, values: dict[str, Any]) -> None:
        package, name = plugin.split(":")
        folder = os.path.join(settings_dir, *package.split("/"))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{name}.jupyterlab-settings"), "w", encoding="utf-8") as fh:
            json.dump(values, fh)


# -- a notebook in the browser ------------------------------------------------------------------------

_KERNEL_STATUS = """() => {
    const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    return w && w.sessionContext ? w.sessionContext.kernelDisplayStatus : null;
}"""

_CELLS = """() => {
    const w = window.jupyterapp.shell.currentWidget;
    return w.content.widgets.map(c => ({
        type: c.model.type,
        count: c.model.type === 'code' ? c.model.executionCount : null,
        state: c.model.type === 'code' ? (c.model.executionState || null) : null,
        prompt: c.node.querySelector('.jp-InputPrompt') ? c.node.querySelector('.jp-InputPrompt').innerText : '',
    }));
}"""


class NotebookPage:
    """A Playwright page with one notebook open; ``cell(i)`` and ``outputs(i)`` are locators."""

    def __init__(self, page: Any, server: LabServer, shots: str):
        self.page = page
        self.server = server
        self.shots = shots
        self.console_errors: list[str] = []

    # -- opening ------------------------------------------------------------------------------
    def open(self, name: str, timeout: float = 120.0) -> None:
        """Open ``name`` (a path under the server's root) in a fresh workspace and wait for an idle kernel."""
        self.page.goto(self.server.url(f"lab/tree/{name}") + "&reset")
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=timeout * 1000)
        self._focus()
        self.wait_idle(timeout)

    def _focus(self) -> None:
        # The notebook alone, as wide as the window: closes the file browser (View > Show Left Sidebar).
        self.page.evaluate("() => window.jupyterapp.shell.collapseLeft()")

    def new_notebook(self, timeout: float = 120.0) -> None:
        """A new notebook from the Launcher's "Notebook" card for the Python kernel, as a user starts one."""
        self.page.goto(self.server.url("lab") + "&reset")
        section = self.page.locator(".jp-Launcher-section").filter(has_text="Notebook").first
        section.locator(".jp-LauncherCard", has_text="Python 3").first.click()
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=timeout * 1000)
        self._focus()
        self.wait_idle(timeout)

    def menu(self, *path: str) -> None:
        """Click through the main menu: ``menu("Run", "Run All Cells")``."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(path[0])}$")).click()
        for label in path[1:]:
            item = self.page.locator(".lm-Menu:visible .lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}"))
            item.first.click()

    # -- the kernel ---------------------------------------------------------------------------
    def kernel_status(self) -> str | None:
        return self.page.evaluate(_KERNEL_STATUS)

    def wait_idle(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.kernel_status() == "idle":
                return
            time.sleep(0.25)
        raise TimeoutError(f"the kernel is {self.kernel_status()!r} after {timeout:.0f} s")

    def cells(self) -> list[dict[str, Any]]:
        return self.page.evaluate(_CELLS)

    def wait_cells_done(self, timeout: float = 600.0) -> list[dict[str, Any]]:
        """Wait until no cell shows ``[*]`` (running or queued) and the kernel is idle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cells = self.cells()
            busy = [c for c in cells if "*" in c["prompt"]]
            if not busy and self.kernel_status() == "idle":
                time.sleep(0.3)  # outputs that arrived with the last idle message are drawn
                return self.cells()
            time.sleep(0.5)
        raise TimeoutError(f"cells still running after {timeout:.0f} s: {self.cells()}")

    # -- running ------------------------------------------------------------------------------
    def type_cell(self, index: int, text: str) -> None:
        """Click into cell ``index``'s editor and type ``text`` into it (as a paste: no auto-indent)."""
        editor = self.cell(index).locator(".jp-InputArea-editor .cm-content")
        editor.click()
        self.page.keyboard.press("Control+a")
        self.page.keyboard.insert_text(text)

    def run_cell(self, index: int, timeout: float = 600.0) -> None:
        """Select cell ``index`` and press Shift+Enter; wait until it has run."""
        self.cell(index).locator(".jp-InputArea-editor .cm-content").click()
        self.page.keyboard.press("Shift+Enter")
        time.sleep(0.3)
        self.wait_cells_done(timeout)

    def run_all(self, timeout: float = 900.0) -> list[dict[str, Any]]:
        self.menu("Run", "Run All Cells")
        time.sleep(0.5)
        return self.wait_cells_done(timeout)

    def save(self) -> None:
        """Ctrl+S, and wait until the tab no longer shows unsaved changes."""
        self.page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
        self.page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            dirty = self.page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
            if not dirty:
                return
            time.sleep(0.2)
        raise TimeoutError("the notebook was not saved")

    # -- reading ------------------------------------------------------------------------------
    def path(self, name: str) -> str:
        """Where notebook ``name`` lives on disk."""
        return os.path.join(self.server.root, name)

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)

    def outputs(self, index: int) -> Any:
        return self.cell(index).locator(".jp-OutputArea-child")

    def output_texts(self, index: int) -> list[str]:
        return [o.inner_text() for o in self.outputs(index).all()]

    def screenshot(self, name: str, locator: Any = None) -> str:
        path = os.path.join(self.shots, f"{name}.png")
        (locator or self.page).screenshot(path=path)
        return path

    def screenshot_notebook(self, name: str, limit: int = 12) -> list[str]:
        """The whole notebook as a few window-sized screenshots, scrolling the notebook panel."""
        scroller = ".jp-NotebookPanel .jp-WindowedPanel-outer"
        paths = []
        self.page.evaluate(f"() => document.querySelector('{scroller}').scrollTo(0, 0)")
        for i in range(limit):
            time.sleep(0.2)
            paths.append(self.screenshot(f"{name}-{i + 1:02d}"))
            moved = self.page.evaluate(
                f"""() => {{ const s = document.querySelector('{scroller}'); const before = s.scrollTop;
                    s.scrollBy(0, s.clientHeight - 40); return s.scrollTop !== before; }}"""
            )
            if not moved:
                break
        return paths

    def model_outputs(self) -> list[list[dict[str, Any]]]:
        """Each cell's outputs as the notebook model holds them (what a save writes), with the cell's tags."""
        return self.page.evaluate(_OUTPUTS)

    def contrast(self, locator: Any) -> float:
        """WCAG contrast ratio of the element's text against what is behind it (computed styles)."""
        return locator.evaluate(_CONTRAST)

    def empty_outputs(self) -> list[int]:
        """Cells with an output that draws nothing (no text, image or table): a placeholder left behind."""
        return self.page.evaluate(
            """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).flatMap((cell, i) =>
                Array.from(cell.querySelectorAll('.jp-OutputArea-output'))
                    .filter(o => !o.innerText.trim() && !o.querySelector('img, svg, canvas, table'))
                    .map(() => i))"""
        )

    def assert_no_console_errors(self) -> None:
        assert not self.console_errors, "the page logged errors:\n" + "\n".join(self.console_errors)


_OUTPUTS = """() => {
    const w = window.jupyterapp.shell.currentWidget;
    return w.content.widgets.map(c => {
        if (c.model.type !== 'code') return [];
        const tags = c.model.getMetadata('tags') || [];
        return c.model.outputs.toJSON().map(o => Object.assign({tags: tags}, o));
    });
}"""

# Text colour and the background it is drawn on: the first ancestor with a background, alpha composited
# down to the page; then the WCAG 2 ratio of relative luminances.
_CONTRAST = """(el) => {
    function parse(c) {
        let m = c.match(/^rgba?\\(([^)]+)\\)$/);
        if (m) {
            const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
            return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
        }
        m = c.match(/^color\\(srgb ([^)]+)\\)$/);
        if (m) {
            const p = m[1].split(/[ \\/]+/).filter(Boolean).map(Number);
            return [p[0] * 255, p[1] * 255, p[2] * 255, p.length > 3 ? p[3] : 1];
        }
        throw new Error('unparsed colour ' + c);
    }
    function over(top, below) {
        const a = top[3];
        return [0, 1, 2].map(i => top[i] * a + below[i] * (1 - a)).concat([1]);
    }
    function background(node) {
        const layers = [];
        for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
            const c = parse(getComputedStyle(n).backgroundColor);
            if (c[3] > 0) layers.push(c);
            if (c[3] >= 1) break;
        }
        let colour = [255, 255, 255, 1];
        for (let i = layers.length - 1; i >= 0; i--) colour = over(layers[i], colour);
        return colour;
    }
    function luminance(c) {
        const [r, g, b] = c.slice(0, 3).map(v => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    }
    const bg = background(el);
    const fg = over(parse(getComputedStyle(el).color), bg);
    const [l1, l2] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    return (l1 + 0.05) / (l2 + 0.05);
}"""


# -- reading a %ppy_bench report ----------------------------------------------------------------------


def bench_rows(bench) -> dict[str, list[str]]:
    """The bench table's rows as the user reads them: label -> the row's cell texts."""
    rows = {}
    for tr in bench.locator("table").first.locator("tbody tr").all():
        cells = [td.inner_text().strip() for td in tr.locator("td").all()]
        rows[cells[0]] = cells[1:]
    return rows


def visible_bars(bench) -> list[tuple[str, float, str]]:
    """(label, drawn width in px, value text) for each bar on screen: shown, and painted in a colour."""
    bars = bench.evaluate(
        """(root) => Array.from(root.querySelectorAll('.ppy-bench-bar'))
            .filter(b => b.offsetParent !== null)
            .map(b => [b.dataset.label, b.getBoundingClientRect().width, b.dataset.value,
                       getComputedStyle(b).backgroundColor])"""
    )
    unpainted = [b for b in bars if b[3] in ("transparent", "rgba(0, 0, 0, 0)")]
    assert not unpainted, f"bars with no colour: {unpainted}"
    return [tuple(b[:3]) for b in bars]


def write_notebook(path: str, cells: list[str | tuple[str, list[str]]]) -> None:
    """A notebook of code cells (``"source"`` or ``("source", ["tag", ...])``) that has never run."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    for cell in cells:
        source, tags = (cell, []) if isinstance(cell, str) else cell
        code = nbformat.v4.new_code_cell(source)
        if tags:
            code.metadata["tags"] = list(tags)
        nb.cells.append(code)
    nbformat.write(nb, path)
