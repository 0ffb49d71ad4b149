"""redis-benchmark-csv: captured and live `redis-benchmark --csv` output."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.errors import ImportFormatError
from harness.importers import ImportOptions, import_file
from tests.importers.conftest import DATA, import_and_summarise, write_variant

NEW = DATA / "redis-benchmark-7.0-n20000-c10-d100.csv"
PIPELINED = DATA / "redis-benchmark-7.0-n10000-c50-P4.csv"
OLD = DATA / "redis-benchmark-old-format.csv"


def _rows(path: Path) -> dict[str, dict[str, str]]:
    return {r["test"]: r for r in csv.DictReader(path.open())}


def test_new_layout_reproduces_rps_and_mean(tmp_path: Path) -> None:
    table = import_and_summarise("redis-benchmark-csv", NEW, tmp_path, ["op"],
                                 ImportOptions(requests=20000)).set_index("op")
    for test, row in _rows(NEW).items():
        got = table.loc[test.lower()]
        assert got["ops"] == 20000
        assert got["throughput_ops_s"] == pytest.approx(float(row["rps"]), rel=1e-6)
        assert got["latency_mean_ms"] == pytest.approx(float(row["avg_latency_ms"]))


def test_stated_percentiles_and_test_names(tmp_path: Path) -> None:
    result = import_file("redis-benchmark-csv", PIPELINED, ImportOptions(requests=10000))
    ops = [r.grid_point["op"] for r in result.runs]
    assert ops == ["ping_inline", "ping_mbulk", "set", "get", "mset_10_keys"]
    mset = result.runs[-1]
    assert mset.extra["stated"]["p99_latency_ms"] == "4.207"
    assert mset.extra["latency_stated"] is True
    assert mset.params == {"requests": 10000}


def test_requests_are_not_guessed(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"n20000-c10-d100\.csv: .*give --requests N"):
        import_file("redis-benchmark-csv", NEW)
    result = import_file("redis-benchmark-csv", NEW, ImportOptions(requests=20000))
    assert result.runs[0].records[0].count == 20000
    assert any("20000 requests per test (--requests)" in n for n in result.notes)


def test_summary_shows_stated_percentiles_not_the_mean(tmp_path: Path) -> None:
    table = import_and_summarise("redis-benchmark-csv", NEW, tmp_path, ["op"],
                                 ImportOptions(requests=20000)).set_index("op")
    for test, row in _rows(NEW).items():
        got = table.loc[test.lower()]
        assert got["latency_p50_ms"] == float(row["p50_latency_ms"])
        assert got["latency_p99_ms"] == float(row["p99_latency_ms"])
        assert got["latency_mean_ms"] == pytest.approx(float(row["avg_latency_ms"]))
    # The case: SET's p99 is what the tool said (0.767 there), not the mean.
    assert table.loc["set", "latency_p99_ms"] != pytest.approx(table.loc["set",
                                                                         "latency_mean_ms"])


def test_old_layout_throughput_only(tmp_path: Path) -> None:
    table = import_and_summarise("redis-benchmark-csv", OLD, tmp_path, ["op"],
                                 ImportOptions(requests=1000)).set_index("op")
    assert table.loc["set", "throughput_ops_s"] == pytest.approx(86206.90, rel=1e-6)
    (run,) = [r for r in import_file("redis-benchmark-csv", OLD,
                                     ImportOptions(requests=1000)).runs
              if r.grid_point["op"] == "set"]
    assert run.extra["latency_stated"] is False
    assert any("not a request latency" in n for n in run.notes)


def test_noise_and_truncation(tmp_path: Path) -> None:
    text = NEW.read_text().splitlines()
    body = "\n".join(["$ redis-benchmark --csv", *text[:3], '"INCR","46403.71","0.1', '"LP'])
    result = import_file("redis-benchmark-csv", write_variant(tmp_path, "cut.csv", body),
                         ImportOptions(requests=10))
    assert [r.grid_point["op"] for r in result.runs] == ["set", "get"]
    assert [no for no, _ in result.skipped] == [1, 5, 6]
    assert any("line 5: incomplete row" in n for n in result.notes)
    with pytest.raises(ImportFormatError, match=r"x\.csv: no redis-benchmark-csv records"):
        import_file("redis-benchmark-csv", write_variant(tmp_path, "x.csv", "test,rps\n"),
                    ImportOptions(requests=10))


@pytest.mark.integration
def test_live_redis_benchmark(redis_server, tmp_path: Path) -> None:
    """Capture real `redis-benchmark --csv` output against a real redis-server."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        msg = "redis-benchmark not installed: apt-get install redis-tools"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    ep = redis_server.endpoint
    out = subprocess.run(
        [exe, "-h", ep.host, "-p", str(ep.port), "-n", "2000", "-c", "4", "-t", "set,get",
         "--csv"], capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    path = write_variant(tmp_path, "live.csv", out)
    table = import_and_summarise("redis-benchmark-csv", path, tmp_path / "raw", ["op"],
                                 ImportOptions(requests=2000)).set_index("op")
    rows = _rows(path)
    assert set(table.index) == {"set", "get"}
    for op in ("set", "get"):
        assert table.loc[op, "throughput_ops_s"] == pytest.approx(
            float(rows[op.upper()]["rps"]), rel=1e-6)
