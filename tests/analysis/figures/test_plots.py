"""Figures: built without pyplot, titled and labelled, saved as PNG and SVG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness.analysis.data.load import load
from harness.analysis.data.summary import run_summary
from harness.analysis.figures import plots
from harness.analysis.stats import comparisons as stats
from tests.fixtures.figures import legends_over_axes


def _check(fig, tmp_path: Path, name: str) -> None:
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert legends_over_axes(fig) == []  # issue 51: legends covered the curves
    out = plots.save(fig, name, tmp_path)
    assert out["png"].read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in out["svg"].read_bytes()[:500]


def test_figures_from_study_data(dsmc_raw: Path, tmp_path: Path):
    loaded = load(dsmc_raw)
    per_run = run_summary(loaded)
    table = stats.config_table(per_run, ["op"], "throughput_ops_s", rate=True)
    fig = plots.bars_with_ci(table, "op", title="Throughput", ylabel="throughput [ops/s]")
    assert "n = 10" in fig.axes[0].get_xticklabels()[0].get_text()
    _check(fig, tmp_path, "bars")
    fig = plots.latency_ecdf(loaded.ops, title="ECDF")
    assert fig.axes[0].get_xscale() == "log"
    assert any("n = 500 ops" in t.get_text() for t in fig.axes[0].get_legend().get_texts())
    _check(fig, tmp_path, "ecdf")
    _check(plots.per_set(per_run, title="Per set"), tmp_path, "per-set")
    _check(plots.latency_over_time(loaded.ops, title="Over time"), tmp_path, "time")
    _check(plots.latency_over_time(loaded.ops, title="Over time", x="start"), tmp_path, "t2")
    _check(plots.percentiles(loaded.ops, title="Percentiles"), tmp_path, "pct")
    assert (tmp_path / "bars.svg").exists() and (tmp_path / "bars.png").exists()


def test_scaling_and_heatmap(tmp_path: Path):
    t = pd.DataFrame({"clients": [1, 2, 4] * 2, "strategy": ["LRU"] * 3 + ["FIFO"] * 3,
                      "mean": [1.0, 2, 3, 1, 1.5, 2], "ci_low": [0.9, 1.8, 2.7, 0.9, 1.4, 1.8],
                      "ci_high": [1.1, 2.2, 3.3, 1.1, 1.6, 2.2], "n": [5] * 6})
    _check(plots.scaling_lines(t, "clients", hue="strategy", title="Scaling",
                               xlabel="clients"), tmp_path, "scale")
    fig = plots.heatmap(t, "clients", "strategy", title="Hit rate", label="ops/s")
    assert fig.axes[0].get_title() == "Hit rate"
    plots.save(fig, "Cache size × strategy", tmp_path)
    assert (tmp_path / "cache-size-strategy.png").exists()


def test_every_legend_is_outside_the_plot_areas() -> None:
    """Issue 51: legends inside the axes covered curves and bars (the percentiles, the
    cluster's bars). The figures of several panels and the comparison's figures too."""
    series = pd.DataFrame({"config": ["a"] * 4 + ["b"] * 4, "second": [0, 1, 2, 3] * 2,
                           "throughput_ops_s": [100.0, 110, 105, 108, 90, 95, 93, 97],
                           "p99_ms": [1.0, 1.2, 1.1, 1.3, 2.0, 2.1, 1.9, 2.2]})
    compare = pd.DataFrame({"op": ["get", "set", "get"], "metric": ["throughput"] * 3,
                            "ratio": [1.2, 0.9, 1.01], "ratio_ci_low": [1.1, 0.8, 0.95],
                            "ratio_ci_high": [1.3, 0.97, 1.07],
                            "verdict": ["better", "worse", "no significant difference"]})
    curve = pd.DataFrame({"achieved_ops_s": [1000.0, 2000, 3000], "p50_ms": [0.1, 0.2, 0.5],
                          "p99_ms": [1.0, 2.0, 9.0], "p999_ms": [2.0, 4.0, 20.0]})
    for fig in (plots.per_second(series, title="per second"),
                plots.forest(compare, ["op"], threshold=0.05),
                plots.latency_throughput(curve, title="sweep", slo=[("p99", 5.0)])):
        assert legends_over_axes(fig) == []
        assert fig.legends or any(ax.get_legend() for ax in fig.axes)  # one was drawn


def test_importing_the_package_loads_nothing_heavy():
    code = ("import sys, harness.analysis, harness.analysis.data.summary; "
            "print('seaborn' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "False"]
