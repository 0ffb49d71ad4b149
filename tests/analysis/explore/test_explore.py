"""The explorer without a browser: its numbers are harness summary's, its figures carry
them (interactive spec and PNG), and its widgets redraw on a change. The browser test
is tests/test_explore_lab.py."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from harness.analysis.explore import widgets as explore
from harness.analysis.explore.data import CDF_QS, VIEWS, Experiment
from harness.analysis.figures.charts import VEGALITE_MIME
from harness.analysis.summary_table import summary_table
from harness.errors import ResultsError
from tests.fixtures.rawdata import GRID_EXPERIMENT

BY = ["value_size", "appendonly"]


@pytest.fixture(scope="module")
def exp(grid_raw: Path) -> Experiment:
    return Experiment(grid_raw, GRID_EXPERIMENT)


def _data(spec: dict) -> list[dict]:
    (rows,) = spec["datasets"].values()
    return rows


def test_importing_loads_no_widgets_nor_plotting_library() -> None:
    code = ("import sys, harness.analysis.explore.widgets; print(sorted(m for m in ('altair', "
            "'vl_convert', 'ipywidgets', 'IPython', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_the_numbers_are_harness_summarys(grid_raw: Path, exp: Experiment) -> None:
    assert exp.keys == ["appendonly", "value_size", "op"]
    assert exp.default_by == ["appendonly", "value_size"]
    ours = exp.numbers(BY)
    theirs = summary_table(grid_raw, BY, experiments=[GRID_EXPERIMENT], intervals=True)
    shared = [c for c in theirs.columns if c in ours.columns]
    assert len(shared) == len(theirs.columns)  # every column of the summary, and more
    assert ours[shared].equals(theirs[shared])
    for extra in ("goodput_ops_s_ci_low", "latency_p999_ms", "latency_p999_ms_ci_low"):
        assert extra in ours
    # appendonly on: some sets timed out, so goodput is below throughput, as its interval
    aof = ours[ours["appendonly"]]
    assert (aof["goodput_ops_s"] < aof["throughput_ops_s"]).all()
    assert (aof["goodput_ops_s_ci_high"] < aof["throughput_ops_s_ci_high"]).all()


def test_a_metric_figure_holds_each_configuration_with_its_interval(exp: Experiment) -> None:
    fig = exp.figure("p99", BY)
    rows = _data(fig.spec)
    table = exp.numbers(BY)
    assert len(rows) == len(table) == 4
    assert sorted(r["value"] for r in rows) == sorted(table["latency_p99_ms"])
    assert sorted(r["low"] for r in rows) == sorted(table["latency_p99_ms_ci_low"])
    assert fig.spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v5")
    # Zoom and pan: a selection bound to the scales.
    assert any(p.get("bind") == "scales" for p in fig.spec["params"])


def test_the_cdf_passes_through_each_configurations_median(exp: Experiment) -> None:
    fig = exp.figure("cdf", BY)
    rows = _data(fig.spec)
    table = exp.numbers(BY)
    for config in table.itertuples():
        label = f"value_size={config.value_size} · appendonly={config.appendonly}"
        at_half = [r["latency_ms"] for r in rows
                   if r["configuration"] == label and r["share"] == 0.5]
        assert at_half == pytest.approx([config.latency_p50_ms])
    assert len(rows) == 4 * len(CDF_QS)


def test_every_view_draws_and_renders_without_a_browser(exp: Experiment,
                                                        tmp_path: Path) -> None:
    titles = set()
    for name in VIEWS:
        fig = exp.figure(name, ["op"])
        data, meta = fig._repr_mimebundle_()
        assert set(data) == {VEGALITE_MIME, "image/png", "text/plain"}
        assert meta[VEGALITE_MIME]["embed_options"]["renderer"] == "svg"
        assert fig.png.startswith(b"\x89PNG")
        titles.add(fig.spec["title"]["text"])
    assert len(titles) == len(VIEWS)
    saved = exp.figure("throughput_over_time", BY).save("over time", tmp_path)
    assert saved["svg"].read_text().startswith("<svg")
    assert saved["png"].name == "over-time.png"


def test_mistakes_are_one_line_naming_what_there_is(grid_raw: Path, exp: Experiment) -> None:
    with pytest.raises(ResultsError, match=r"no grouping key 'value_sise' \(did you mean "
                                           r"'value_size'\?\); keys: appendonly"):
        exp.figure("throughput", ["value_sise"])
    with pytest.raises(ResultsError, match=r"no view 'p95'; views: throughput"):
        exp.figure("p95", BY)
    with pytest.raises(ResultsError, match=r"no experiment 'redis_appendonli' \(did you "
                                           r"mean 'redis_appendonly'\?\)"):
        explore.figure(grid_raw, "redis_appendonli")


def test_the_widgets_redraw_on_a_change(grid_raw: Path) -> None:
    """The explorer's own logic without a front end: menus in, figure and table out."""
    box = explore.explorer(grid_raw)
    (menus, keys_row, status, chart, table, log) = box.children
    experiment, shown = menus.children
    boxes = {b.description: b for b in keys_row.children[1].children}
    assert experiment.value == GRID_EXPERIMENT and shown.value == "throughput"
    assert [k for k, b in boxes.items() if b.value] == ["appendonly", "value_size"]
    assert "12 runs" in status.value and "closed loop" in status.value

    def spec() -> dict:
        (out,) = chart.outputs
        return out["data"][VEGALITE_MIME]

    assert spec()["title"]["text"] == f"{GRID_EXPERIMENT}: throughput"
    shown.value = "p99"
    assert spec()["title"]["text"] == f"{GRID_EXPERIMENT}: p99 latency"
    boxes["op"].value = True
    assert len(_data(spec())) == 8 and ">op<" in table.value
    boxes["appendonly"].value = boxes["value_size"].value = boxes["op"].value = False
    assert [r["configuration"] for r in _data(spec())] == ["all runs"]
    assert log.outputs == ()


def test_headless_execution_keeps_a_static_image(grid_raw: Path, tmp_path: Path) -> None:
    """Executed without a front end (papermill, as the report does), the figure cell
    holds the Vega-Lite spec and a PNG: what nbconvert, GitHub and the report show."""
    import nbformat

    from harness import paths
    from harness.report import execute_notebook, venv_kernel

    out = tmp_path / "explore.ipynb"
    with venv_kernel() as kernel:
        assert execute_notebook(paths.notebooks_dir() / "explore.ipynb", out,
                                {"raw_results": str(grid_raw)}, kernel) is None
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert [o for o in outputs if o.output_type == "error" or o.get("name") == "stderr"] == []
    figures = [o for o in outputs if VEGALITE_MIME in o.get("data", {})]
    assert len(figures) == 1 and "image/png" in figures[0]["data"]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for o in outputs)
    assert base64.b64decode(figures[0]["data"]["image/png"]).startswith(b"\x89PNG")


def test_an_aggregated_import_has_its_stated_percentiles_and_no_cdf() -> None:
    """redis-benchmark's CSV gives a count and a mean per op: the p99 figure shows the
    tool's stated p99 (as harness summary does), and the CDF says why there is none."""
    raw = Path(__file__).resolve().parents[2] / "data" / "results" / "v1"
    name = "redis-benchmark-csv-redis-benchmark-7.0-n10000-c50-P4"
    exp = Experiment(raw, name)
    theirs = summary_table(raw, ["op"], experiments=[name])
    rows = _data(exp.figure("p99", ["op"]).spec)
    assert sorted(r["value"] for r in rows) == sorted(theirs["latency_p99_ms"])
    assert sorted(r["value"] for r in rows) != sorted(theirs["latency_mean_ms"])
    with pytest.raises(ResultsError, match="hold a count and a mean per op"):
        exp.figure("cdf", ["op"])
