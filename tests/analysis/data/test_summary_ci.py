"""`harness summary` intervals: columns, nulls below 2 runs or too few ops, and the same
numbers as the intervals module computes from the per-run table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness import cli
from harness.analysis.data.load import load
from harness.analysis.data.summary import SUMMARY_COLUMNS, run_summary
from harness.analysis.data.summary_ci import METRICS
from harness.analysis.stats import intervals
from harness.analysis.summary_table import LEFT_OUT_COLUMNS, summary_table

CI_COLUMNS = [f"{f}_{s}" for f in METRICS for s in ("ci_low", "ci_high")]


def test_ci_columns_follow_their_fields(dsmc_raw: Path):
    table = summary_table(dsmc_raw, by=["op"], intervals=True)
    assert set(table.columns) == {"op", *SUMMARY_COLUMNS, *CI_COLUMNS, *LEFT_OUT_COLUMNS}
    cols = list(table.columns)
    for f in METRICS:
        assert cols.index(f"{f}_ci_low") == cols.index(f) + 1
    row = table.set_index("op").loc["store_write"]
    # The same interval from the per-run table (ops, wall time per run).
    per = run_summary(load(dsmc_raw), by_op=True)
    per = per[per["op"] == "store_write"]
    ref = intervals.ratio_interval(per["ops"].to_numpy(float), per["wall_s"].to_numpy(float))
    assert row["throughput_ops_s"] == pytest.approx(ref.value)
    assert (row["throughput_ops_s_ci_low"], row["throughput_ops_s_ci_high"]) == \
        pytest.approx((ref.low, ref.high))
    assert row["latency_mean_ms_ci_low"] < row["latency_mean_ms"] < \
        row["latency_mean_ms_ci_high"]
    assert row["latency_p50_ms_ci_low"] < row["latency_p50_ms"] < row["latency_p50_ms_ci_high"]
    # 50 ops per run back no interval of p99.
    assert math.isnan(row["latency_p99_ms_ci_low"])


def test_default_grouping_and_the_plain_table_are_unchanged(tiny_raw: Path):
    plain = summary_table(tiny_raw)
    with_ci = summary_table(tiny_raw, intervals=True)
    assert list(plain.columns) == ["experiment", "size", *SUMMARY_COLUMNS,
                                   *LEFT_OUT_COLUMNS]
    np.testing.assert_array_equal(plain["ops"], with_ci["ops"])


def test_json_nulls_below_two_runs_and_table_brackets(dsmc_raw: Path, capsys):
    assert cli.main([ "summary", str(dsmc_raw), "--by", "op,repetition",
                     "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(r["runs"] == 1 and r["throughput_ops_s_ci_low"] is None for r in rows)
    assert cli.main(["summary", str(dsmc_raw), "--by", "op", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(r["throughput_ops_s_ci_low"] < r["throughput_ops_s"] for r in rows)
    assert all(r["latency_p99_ms_ci_high"] is None for r in rows)
    assert cli.main(["summary", str(dsmc_raw), "--by", "op"]) == 0
    out = capsys.readouterr().out
    assert " [" in out and "_ci_low" not in out
    assert "p99 needs 1000 ops per run" in out  # 50 ops per run: no p99 interval
