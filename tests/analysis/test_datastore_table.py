"""The datastore study's latency table: p99.9 gets the run-level interval where every
set holds the ops for one (10 000), and says why not where a set holds fewer."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.data.load import load
from harness.analysis.data.numbers import summarise_with_ci
from harness.analysis.data.summary_ci import TABLE_METRICS, no_ci_reasons
from harness.analysis.stats import intervals
from harness.studies import datastore_memcache
from tests.fixtures.rawdata import write_datastore_memcache


def _cells(html: str, label: str) -> list[str]:
    row = re.search(rf"<tr><td[^>]*>{re.escape(label)}</td>(.*?)</tr>", html, re.S)
    assert row, label
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_p999_interval_where_every_set_has_10000_ops(tmp_path: Path) -> None:
    raw = write_datastore_memcache(tmp_path, sets=4, ops_per_set=10_000, warmup_ops=0,
                                   errors=False)
    study = datastore_memcache.analyse(raw)
    table = summarise_with_ci(study.loaded, ["op"], TABLE_METRICS).set_index("op")
    ops = load(raw).ops
    get = ops[ops["op"] == "store_read"]
    lat_ms = get["latency_ns"].to_numpy() / 1e6
    runs = pd.factorize(get["run_id"].astype(str))[0]
    want = intervals.quantile_interval(lat_ms, runs, 0.999)
    row = table.loc["store_read"]
    assert row["latency_p999_ms"] == pytest.approx(np.quantile(lat_ms, 0.999))
    assert (row["latency_p999_ms_ci_low"], row["latency_p999_ms_ci_high"]) == \
        pytest.approx((want.low, want.high))
    assert row["latency_p999_ms_ci_low"] < row["latency_p999_ms"] < \
        row["latency_p999_ms_ci_high"]
    assert no_ci_reasons(table.reset_index(), TABLE_METRICS) == []
    html = study.latency_table_html().data
    p999 = _cells(html, "Store/R")[8]  # sets, ops, ops/s, goodput, mean, p50, p90, p99, p99.9
    assert re.fullmatch(r"[\d.]+ \([\d.]+–[\d.]+\)", p999), p999
    assert "has no interval" not in html


def test_p999_of_too_few_ops_says_why(tmp_path: Path) -> None:
    study = datastore_memcache.analyse(write_datastore_memcache(tmp_path))  # 10 sets of 50
    html = study.latency_table_html().data
    assert "P99.9 has no interval where a set holds fewer than 10,000 ops" in html
    assert "P99 has no interval where a set holds fewer than 1,000 ops" in html
    assert "~50 per set" in html
    p999 = _cells(html, "Store/R")[8]
    assert "(" not in p999 and not math.isnan(float(p999))
