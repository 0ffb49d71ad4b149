"""stated.overlay: rows of one aggregated imported run show its tool's percentiles; rows
mixing it with others show NaN; rows without aggregated runs are left as computed."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.summary_table import summary_table
from harness.importers import ImportOptions, import_file, write_import

DATA = Path(__file__).resolve().parents[2] / "data" / "importers"
CSV = DATA / "redis-benchmark-7.0-n20000-c10-d100.csv"


def test_overlay_per_row(tmp_path: Path) -> None:
    write_import(import_file("ycsb-raw", DATA / "ycsb" / "ycsb-raw.txt"), tmp_path, "mix")
    write_import(import_file("redis-benchmark-csv", CSV, ImportOptions(requests=20000)),
                 tmp_path, "mix")
    by_op = summary_table(tmp_path, ["op"]).set_index("op")
    stated = {r["test"].lower(): r for r in csv.DictReader(CSV.open())}
    assert by_op.loc["set", "latency_p99_ms"] == float(stated["set"]["p99_latency_ms"])
    # Exact per-op records (YCSB raw): the percentile of the records, untouched.
    (run,) = import_file("ycsb-raw", DATA / "ycsb" / "ycsb-raw.txt").runs
    read = next(r for r in run.records if r.op == "read").latencies_ns / 1e6
    assert by_op.loc["read", "latency_p99_ms"] == pytest.approx(np.quantile(read, 0.99))
    # One row pooling the aggregated runs with exact ones: no percentile is derivable.
    (pooled,) = summary_table(tmp_path, ["experiment"]).to_dict("records")
    assert np.isnan(pooled["latency_p50_ms"]) and np.isnan(pooled["latency_p99_ms"])
    assert pooled["runs"] == 5 and not np.isnan(pooled["latency_mean_ms"])
