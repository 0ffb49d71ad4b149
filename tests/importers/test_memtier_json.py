"""memtier-json: memtier_benchmark's aggregates -> records that reproduce count, mean, rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ImportFormatError
from harness.importers import import_file
from tests.importers.conftest import DATA, import_and_summarise, write_variant

SAMPLE = DATA / "memtier-2.0-sample.json"
OLD = DATA / "memtier-old-no-count.json"


def test_sample_per_op_count_mean_and_rate(tmp_path: Path) -> None:
    table = import_and_summarise("memtier-json", SAMPLE, tmp_path, ["op"]).set_index("op")
    assert table.loc["set", "ops"] == 909 and table.loc["get", "ops"] == 9091
    assert table.loc["set", "latency_mean_ms"] == pytest.approx(0.421)
    assert table.loc["get", "latency_mean_ms"] == pytest.approx(0.409)
    # Ops/sec = count / duration (0.42 s), as memtier printed them.
    assert table.loc["set", "throughput_ops_s"] == pytest.approx(2164.29, abs=0.01)
    assert table.loc["get", "throughput_ops_s"] == pytest.approx(21645.24, abs=0.01)
    assert "wait" not in table.index  # Count 0: no records


def test_sample_one_run_with_stated_figures(tmp_path: Path) -> None:
    table = import_and_summarise("memtier-json", SAMPLE, tmp_path)
    (row,) = table.to_dict("records")
    assert row["op"] == "get+set"
    assert (row["threads"], row["connections"], row["value_size_bytes"]) == (2, 5, 32)
    assert row["get_ratio"] == pytest.approx(10 / 11, abs=1e-6)
    assert row["throughput_ops_s"] == pytest.approx(23809.52, abs=0.01)  # Totals Ops/sec
    (run,) = import_file("memtier-json", SAMPLE).runs
    assert run.aggregated
    assert run.extra["stated"]["Sets"]["percentiles_ms"]["p99.00"] == 1.103
    assert run.extra["target"] == {"server": "127.0.0.1", "port": 6379}
    assert any("percentiles" in n for n in run.notes)


def test_old_layout_without_count(tmp_path: Path) -> None:
    (run,) = import_file("memtier-json", OLD).runs
    (rec,) = run.records
    assert rec.op == "set" and rec.count == round(12000.5 * 1.667)
    assert any("no Count" in n for n in run.notes)
    assert run.grid_point["get_ratio"] == 0.0


def test_not_json_and_no_stats(tmp_path: Path) -> None:
    bad = write_variant(tmp_path, "bad.json", '{"ALL STATS": {"Sets": ')  # truncated
    with pytest.raises(ImportFormatError, match=r"bad\.json: not JSON .*no memtier-json"):
        import_file("memtier-json", bad)
    empty = write_variant(tmp_path, "e.json", json.dumps({"configuration": {}}))
    with pytest.raises(ImportFormatError, match=r"e\.json: no memtier-json records found"):
        import_file("memtier-json", empty)


def test_several_runs_use_the_aggregated_average(tmp_path: Path) -> None:
    data = json.loads(SAMPLE.read_text())
    data["AGGREGATED AVERAGE RESULTS"] = data.pop("ALL STATS")
    p = write_variant(tmp_path, "multi.json", json.dumps(data))
    result = import_file("memtier-json", p)
    assert any("AGGREGATED AVERAGE RESULTS" in n for n in result.notes)
    assert len(result.runs) == 1
