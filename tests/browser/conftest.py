"""Fixtures for the browser tests: one JupyterLab server and one Chromium for the session, a page per test.

The browser tests run when asked for: ``python -m pytest tests/browser``, or
``PPY_BROWSER_TESTS=1`` with any other selection (``.ci/run`` sets
``PPY_BROWSER_TESTS=require``, which turns a missing Chromium, Playwright or
JupyterLab into a failure instead of a skip). Screenshots go to
``$PPY_BROWSER_SHOTS`` or a fresh temporary directory, named at the end of
the run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile

import pytest

from .jlab import CHROMIUM_ARGS, LabServer, NotebookPage, chromium_path

HERE = os.path.dirname(os.path.abspath(__file__))
_SHOTS: dict[str, str] = {}


def _asked_for(config: pytest.Config) -> bool:
    if os.environ.get("PPY_BROWSER_TESTS", "") not in ("", "0"):
        return True
    return any(os.path.abspath(str(arg).split("::")[0]).startswith(HERE) for arg in config.args)


def _missing() -> list[str]:
    missing = [name for name in ("playwright", "jupyterlab") if importlib.util.find_spec(name) is None]
    if chromium_path() is None:
        missing.append("chromium (apt-get install chromium)")
    return missing


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if str(item.path).startswith(HERE + os.sep)]
    if not mine:
        return
    for item in mine:
        item.add_marker(pytest.mark.browser)
    if not _asked_for(config):
        skip = pytest.mark.skip(reason="browser test: run `python -m pytest tests/browser` or set PPY_BROWSER_TESTS=1")
    elif _missing():
        why = f"browser tests need {', '.join(_missing())}"
        if os.environ.get("PPY_BROWSER_TESTS") == "require":
            raise pytest.UsageError(why)
        skip = pytest.mark.skip(reason=why)
    else:
        return
    for item in mine:
        item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if "dir" in _SHOTS:
        terminalreporter.write_line(f"browser tests: screenshots in {_SHOTS['dir']}")


@pytest.fixture(scope="session")
def shots() -> str:
    path = os.environ.get("PPY_BROWSER_SHOTS") or tempfile.mkdtemp(prefix="ppy-browser-shots-")
    os.makedirs(path, exist_ok=True)
    _SHOTS["dir"] = path
    print(f"\nbrowser tests: screenshots in {path}")
    return path


@pytest.fixture(scope="session")
def lab(tmp_path_factory) -> LabServer:
    # PPY_CACHE_DIR (the suite's build cache, tests/conftest.py) reaches the kernels through the environment.
    server = LabServer(str(tmp_path_factory.mktemp("jupyterlab")), env={"PPY_NOTEBOOK_FAST": "1"})
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def notebook(request, lab, chromium, shots) -> NotebookPage:
    """A fresh browser context on the server; ``.console_errors`` collects the page's errors."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    nb = NotebookPage(page, lab, shots)
    page.on("console", lambda m: nb.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: nb.console_errors.append(f"uncaught: {e}"))
    yield nb
    if request.node.stash.get(_FAILED, False):
        with contextlib.suppress(Exception):  # the page may be gone; the failure itself is what matters
            nb.screenshot(f"FAILED-{request.node.name}")
    context.close()
    lab.shutdown_kernels()
