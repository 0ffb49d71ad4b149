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
        [exe, "-h", ep.host, "-p", str(ep.port), "-a", ep.auth.password, "-n", "2000", "-c",
         "4", "-t", "set,get", "--csv"], capture_output=True, text=True, timeout=120,
        check=True,
    ).stdout
    path = write_variant(tmp_path, "live.csv", out)
    table = import_and_summarise("redis-benchmark-csv", path, tmp_path / "raw", ["op"],
                                 ImportOptions(requests=2000)).set_index("op")
    rows = _rows(path)
    assert set(table.index) == {"set", "get"}
    for op in ("set", "get"):
        assert table.loc[op, "throughput_ops_s"] == pytest.approx(
            float(rows[op.upper()]["rps"]), rel=1e-6)


SET_ROW = '"SET","39761.43","0.166","0.032","0.135","0.295","0.855","3.903"'


@pytest.mark.parametrize(("row", "message"), [
    # Accepted before: p50 5.0 above p99 0.001.
    ('"SET","39761.43","0.166","0.032","5.0","0.295","0.001","3.903"',
     r"SET latencies \(ms\): p50 5 is above p95 0\.295"),
    ('"SET","39761.43","0.166","0.032","5.0","5.5","6.0","3.903"',
     r"SET latencies \(ms\): p99 6 is above max 3\.903"),
    ('"SET","39761.43","0.166","-0.032","0.135","0.295","0.855","3.903"',
     r"SET latencies \(ms\) min -0\.032 is negative"),
    ('"SET","39761.43","9.0","0.032","0.135","0.295","0.855","3.903"',
     r"SET latencies \(ms\): avg 9 is outside min 0\.032 \.\. max 3\.903"),
    # An avg of nan was taken for the old layout: records of 1/rps, no latency.
    ('"SET","39761.43","nan","0.032","0.135","0.295","0.855","3.903"',
     r"SET latencies \(ms\) avg nan is not a finite number"),
    ('"SET","-39761.43","0.166","0.032","0.135","0.295","0.855","3.903"',
     r"SET rps -39761\.43 is negative"),
    ('"SET","0","0.166","0.032","0.135","0.295","0.855","3.903"', r"SET rps 0 is zero"),
    ('"SET","inf","0.166","0.032","0.135","0.295","0.855","3.903"',
     r"SET rps inf is not a finite number"),
])
def test_impossible_numbers_name_the_line(row: str, message: str, tmp_path: Path) -> None:
    text = NEW.read_text().replace(SET_ROW, row)
    with pytest.raises(ImportFormatError, match=r"s\.csv:2: " + message):
        import_file("redis-benchmark-csv", write_variant(tmp_path, "s.csv", text),
                    ImportOptions(requests=20000))


def test_old_layout_impossible_rate_names_the_line(tmp_path: Path) -> None:
    text = OLD.read_text().replace('"SET","86206.90"', '"SET","-86206.90"')
    with pytest.raises(ImportFormatError, match=r"o\.csv:3: SET rps -86206\.90 is negative"):
        import_file("redis-benchmark-csv", write_variant(tmp_path, "o.csv", text),
                    ImportOptions(requests=1000))
    text = OLD.read_text().replace('"SET","86206.90"', '"SET","nan"')
    with pytest.raises(ImportFormatError, match=r"o\.csv:3: SET rps nan is not a finite"):
        import_file("redis-benchmark-csv", write_variant(tmp_path, "o.csv", text),
                    ImportOptions(requests=1000))
