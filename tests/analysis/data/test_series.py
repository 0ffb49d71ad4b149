"""Throughput and p99 over time (`series.over_time`) against hand-computed bins and the
summary of the same runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.analysis.data import series
from harness.analysis.data.load import load_runs_only
from harness.analysis.summary_table import summary_table
from tests.fixtures.rawdata import GRID_EXPERIMENT


def test_bins_by_hand(tiny_raw: Path):
    """tiny, size=2: rep 0 ops of 10 and 20 ms back to back (0-10, 10-30 ms), rep 1 one
    op of 30 ms. 10 ms bins: [0, 10) holds rep 0's first op and rep 1's, both runs
    measuring all of it; [10, 20) rep 0's second op, rep 0 measuring all of it and rep
    1 too (its op runs to 30 ms); [20, 30) has no op beginning in it."""
    loaded = load_runs_only(tiny_raw, experiments=["tiny"])
    two = series.over_time(loaded, ["size"], 0.010).query("size == 2")
    assert list(two["t_s"]) == pytest.approx([0.0, 0.010])
    assert list(two["ops"]) == [2, 1] and list(two["runs"]) == [2, 1]
    # 2 ops over 2 x 10 ms measured; 1 op over 2 x 10 ms (both runs still measuring)
    assert list(two["throughput_ops_s"]) == pytest.approx([100.0, 50.0])
    assert list(two["latency_p99_ms"]) == pytest.approx([np.quantile([10, 30], 0.99), 20])
    # 25 ms bins: size=1's runs measure 10 ms (100-110) and 6 ms (0-6), under half a bin
    # each, so no bin is shown; size=2's runs measure all of [0, 25).
    wide = series.over_time(loaded, ["size"], 0.025)
    assert list(wide["size"]) == [2] and list(wide["ops"]) == [3]
    assert list(wide["throughput_ops_s"]) == pytest.approx([3 / 0.050])


def test_partial_bins_are_left_out_and_the_rest_match_the_summary(grid_raw: Path):
    loaded = load_runs_only(grid_raw, experiments=[GRID_EXPERIMENT])
    span = series.run_span_s(loaded)
    assert 0.5 < span < 5
    bin_s = series.nice_bin(span)
    assert bin_s in (0.02, 0.05, 0.1)
    by = ["value_size", "appendonly"]
    frame = series.over_time(loaded, by, bin_s)
    summary = summary_table(grid_raw, by, experiments=[GRID_EXPERIMENT]).set_index(by)
    for key, rows in frame.groupby(by):
        row = summary.loc[key]
        # Only slivers at the runs' ends are left out.
        assert 0.9 * row["ops"] < rows["ops"].sum() <= row["ops"]
        # Every bin's rate is the configuration's rate, within the noise of a bin.
        assert rows["throughput_ops_s"].median() == pytest.approx(
            row["throughput_ops_s"], rel=0.1)
        assert rows["latency_p99_ms"].median() == pytest.approx(row["latency_p99_ms"],
                                                                rel=0.3)
    by_op = series.over_time(loaded, ["op"], bin_s)
    assert set(by_op["op"]) == {"get", "set"}


def test_nice_bin():
    assert series.nice_bin(40) == 1.0 and series.nice_bin(1.0) == 0.05
    assert series.nice_bin(0) == 1.0 and series.nice_bin(1e6) == 60.0
