"""The explore notebook in a real JupyterLab and a real browser: Debian's Chromium,
headless, driven by Playwright (from PyPI; never a browser it downloads).

JupyterLab is started as `make lab` starts it (on loopback, a token, --allow-root as
root) on a temp copy of notebooks/explore.ipynb whose parameters point at a small
raw-results tree; the test runs all cells, checks that no cell and no widget shows an
error, that the menus and the figure rendered, changes the metric and the grouping and
checks that the figure followed, and zooms the figure with the mouse wheel. Screenshots
go to the test's temp directory and are copied to /tmp/explore-shots/ for a reviewer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
import pytest

from harness import paths
from harness.hosts.local import free_port
from tests.fixtures.rawdata import GRID_EXPERIMENT, write_grid, write_tiny

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SHOTS = Path("/tmp/explore-shots")
TOKEN = "kvbench-explore-test"
EXPLORER = ".kv-explorer"
#: The explorer's figure: the Vega-Lite output inside its Output widget.
CHART = f"{EXPLORER} .jp-RenderedVegaLite svg.marks"


def _lab_root(tmp_path: Path) -> Path:
    """A lab directory holding the notebook, its parameters set to a fixture tree (as
    papermill injects them), and a settings directory that asks the network for nothing."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    raw = write_tiny(write_grid(tmp_path / "raw"))
    root = tmp_path / "lab"
    root.mkdir()
    nb = load_notebook_node(str(paths.notebooks_dir() / "explore.ipynb"))
    nb = parameterize_notebook(nb, {"raw_results": str(raw), "experiment": GRID_EXPERIMENT})
    nbformat.write(nb, root / "explore.ipynb")
    # No news and no update check: a fresh JupyterLab asks (a toast over the page).
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    return root


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    """JupyterLab on the lab directory; yields its base URL."""
    root, port = _lab_root(tmp_path), free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_DATA_DIR": str(tmp_path / "data"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    argv = [sys.executable, "-m", "jupyterlab", str(root), "--no-browser", "--ip=127.0.0.1",
            f"--port={port}", f"--ServerApp.token={TOKEN}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
            f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
            # The test drives the page through the app's own commands (as JupyterLab's
            # Galata does): "run all cells" is a command, not a mouse path through menus.
            "--LabApp.expose_app_in_browser=True"]
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(argv, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()
            assert time.monotonic() < deadline, "JupyterLab did not answer in 60 s"
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


# JavaScript run in the page, through the app JupyterLab exposes.
_NOTEBOOK = "window.jupyterapp.shell.currentWidget"
_KERNEL_IDLE = (f"(() => {{ const w = window.jupyterapp && {_NOTEBOOK}; "
                "const k = w && w.sessionContext && "
                "w.sessionContext.session && w.sessionContext.session.kernel; "
                "return !!k && k.status === 'idle'; })()")
_ALL_RAN = (f"(() => {{ const cells = {_NOTEBOOK}.content.widgets.filter("
            "c => c.model.type === 'code'); return cells.length > 0 && cells.every("
            "c => c.model.executionCount !== null && c.promptNode.textContent.trim() "
            "!== '[*]:'); })()")
_CELL_OUTPUTS = (f"{_NOTEBOOK}.content.widgets.filter(c => c.model.type === 'code')"
                 ".map(c => c.model.outputs.toJSON())")


def _texts(page: Page, selector: str) -> list[str]:
    """The text of each match (textContent: SVG text has no innerText)."""
    return page.locator(selector).all_text_contents()


def _axis_titles(page: Page) -> list[str]:
    return _texts(page, f"{CHART} .role-axis-title text")


def _legend_labels(page: Page) -> list[str]:
    return _texts(page, f"{CHART} .role-legend-label text")


POINTS = f"{CHART} .mark-symbol.role-mark path"  # one per configuration (not the legend's)


def _wait_for(page: Page, check: Callable[[], bool], what: str,
              timeout_s: float = 20) -> None:
    """Poll `check()` (Python, reading the page) until true."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        page.wait_for_timeout(200)


def _shot(page: Page, tmp_path: Path, name: str) -> Path:
    """The explorer as the user sees it (scrolled into view in the lab's window)."""
    path = tmp_path / "shots" / f"{name}.png"
    path.parent.mkdir(exist_ok=True)
    page.locator(EXPLORER).scroll_into_view_if_needed()
    page.screenshot(path=str(path))
    SHOTS.mkdir(exist_ok=True)
    shutil.copy(path, SHOTS / path.name)
    return path


def _errors(page: Page) -> list[str]:
    """Every error a user would see: an error or stderr output of a cell (the saved
    model), and in the page (widget outputs too), or the explorer's error line."""
    found = []
    for i, outputs in enumerate(page.evaluate(_CELL_OUTPUTS)):
        for out in outputs:
            if out["output_type"] == "error" or out.get("name") == "stderr":
                found.append(f"cell {i}: {json.dumps(out)[:500]}")
    for selector in ('[data-mime-type="application/vnd.jupyter.stderr"]',
                     '[data-mime-type="application/vnd.jupyter.error"]',
                     ".kv-explore-error"):
        found += [f"{selector}: {t[:500]}" for t in _texts(page, selector)]
    return found


def test_explore_notebook_runs_and_its_widgets_redraw_the_figure(
        browser: Browser, lab: str, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{lab}/lab/tree/explore.ipynb?token={TOKEN}")
    page.wait_for_function(_KERNEL_IDLE, timeout=60_000)
    # The file browser closed: the notebook gets the window's width, as a user would.
    page.evaluate("window.jupyterapp.commands.execute('application:toggle-left-area')")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(_ALL_RAN, timeout=60_000)
    page.wait_for_function(_KERNEL_IDLE, timeout=60_000)

    # The menus: experiment and show, a checkbox per grid key and the op.
    page.wait_for_selector(CHART, timeout=30_000)
    assert page.locator(f"{EXPLORER} select").count() == 2
    boxes = _texts(page, f"{EXPLORER} .widget-checkbox")
    # (ipywidgets puts a zero-width space before a label)
    assert sorted(b.strip("\u200b ") for b in boxes) == ["appendonly", "op", "value_size"]
    # The figure: throughput per configuration, a point and an interval each.
    _wait_for(page, lambda: "throughput [ops/s]" in _axis_titles(page), "the first figure")
    assert page.locator(POINTS).count() == 4  # 2 x 2 configurations
    assert page.locator(f"{CHART} .mark-rule.role-mark line").count() == 4  # and their intervals
    # The numbers behind it, with intervals.
    table = page.locator(f"{EXPLORER} table.kv-table").inner_text()
    assert "throughput ops/s" in table and "[" in table
    # The figure below the explorer (explore.figure) and the history explorer's series
    # (no labels here: the runs in time order), drawn by JupyterLab too.
    assert page.locator(".jp-RenderedVegaLite svg.marks").count() == 3
    assert "run (position in order of first run)" in _texts(
        page, ".jp-RenderedVegaLite svg.marks .role-axis-title text")
    assert _errors(page) == []
    _shot(page, tmp_path, "1-throughput")

    # Another metric: the value axis and the points follow.
    before = page.locator(POINTS).first.get_attribute("transform")
    page.locator(f"{EXPLORER} select").nth(1).select_option(label="p99 latency")
    _wait_for(page, lambda: "p99 latency [ms]" in _axis_titles(page), "the p99 figure")
    after = page.locator(POINTS).first.get_attribute("transform")
    assert after != before

    # Another grouping: the op as well, so 8 configurations and op in the legend.
    page.locator(f"{EXPLORER} .widget-checkbox", has_text="op").locator("input").check()
    _wait_for(page, lambda: page.locator(POINTS).count() == 8,
              "8 configurations")
    assert any("op=set" in label for label in _legend_labels(page))
    assert "op" in _texts(page, f"{EXPLORER} table.kv-table th")
    _shot(page, tmp_path, "2-p99-by-op")

    # Zoom: the wheel over the plot changes the value axis' range.
    page.locator(f"{EXPLORER} select").nth(1).select_option(label="latency CDF per configuration")
    _wait_for(page, lambda: len(_legend_labels(page)) == 8, "the CDF's 8 lines")
    ticks = _texts(page, f"{CHART} .role-axis-label text")
    plot = page.locator(CHART).bounding_box()
    page.mouse.move(plot["x"] + plot["width"] * 0.45, plot["y"] + plot["height"] * 0.4)
    page.mouse.wheel(0, -400)
    _wait_for(page, lambda: _texts(page, f"{CHART} .role-axis-label text") != ticks,
              "the axes to zoom")
    _shot(page, tmp_path, "3-cdf-zoomed")

    # Over time, and nothing went wrong anywhere on the way.
    page.locator(f"{EXPLORER} select").nth(1).select_option(label="throughput over time")
    _wait_for(page, lambda: "time since run start [s]" in _axis_titles(page),
              "the series over time")
    _shot(page, tmp_path, "4-throughput-over-time")

    # Another experiment: its own grouping keys, its own figure.
    page.locator(f"{EXPLORER} select").first.select_option(label="tiny")
    _wait_for(page, lambda: "tiny: throughput over time" in _texts(
        page, f"{CHART} .role-title-text text"), "the other experiment's figure")
    boxes = _texts(page, f"{EXPLORER} .widget-checkbox")
    assert sorted(b.strip("\u200b ") for b in boxes) == ["op", "size"]
    assert _errors(page) == []
    # The page drew every figure and widget: no rendering error in its console either.
    assert [e for e in console_errors
            if any(w in e.lower() for w in ("vega", "widget", "render"))] == []
