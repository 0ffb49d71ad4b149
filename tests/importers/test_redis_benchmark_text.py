"""redis-benchmark: captured and live default (text) and -q output."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.errors import ImportFormatError
from harness.importers import ImportOptions, import_file
from tests.importers.conftest import DATA, import_and_summarise, write_variant

TEXT = DATA / "redis-benchmark-7.0-n2000-c10-d100.txt"
QUIET = DATA / "redis-benchmark-7.0-n2000-c20-P8-q.txt"
_SUMMARY = re.compile(r"====== (.+?) ======.*?throughput summary: ([\d.]+) requests per "
                      r"second.*?avg\s+min\s+p50\s+p95\s+p99\s+max\s*\n\s*([\d.\s]+?)\n", re.S)


def _stated(text: str) -> dict[str, dict[str, float]]:
    """The tool's own summary per test, read with a regex independent of the importer."""
    out = {}
    for name, rps, values in _SUMMARY.findall(text):
        avg, _min, p50, _p95, p99, hi = (float(v) for v in values.split())
        out[name] = {"rps": float(rps), "avg": avg, "p50": p50, "p99": p99, "max": hi}
    return out


def _check(table, stated: dict[str, dict[str, float]], requests: int) -> None:
    assert len(table) == len(stated)
    for name, fig in stated.items():
        got = table.loc[re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")]
        assert got["ops"] == requests
        assert got["throughput_ops_s"] == pytest.approx(fig["rps"], rel=1e-6)
        assert got["latency_mean_ms"] == pytest.approx(fig["avg"])
        # Stated percentiles, shown as such: not the mean.
        assert (got["latency_p50_ms"], got["latency_p99_ms"]) == (fig["p50"], fig["p99"])


def test_text_output_keeps_stated_figures(tmp_path: Path) -> None:
    table = import_and_summarise("redis-benchmark", TEXT, tmp_path, ["op"]).set_index("op")
    _check(table, _stated(TEXT.read_text()), 2000)
    result = import_file("redis-benchmark", TEXT)
    mset = result.runs[-1]
    assert mset.grid_point == {"op": "mset_10_keys"}
    assert mset.params == {"requests": 2000, "clients": 10, "value_size_bytes": 100,
                           "keep_alive": 1}
    assert mset.extra["stated_latency_ms"]["mset_10_keys"]["p95"] == 0.295
    dist = mset.extra["stated"]["distribution"]
    assert dist[-1][0] == 100.0 and dist[-1][2] == 2000  # cumulative count of all
    assert result.skipped == []  # progress lines are the tool's, not noise


def test_quiet_output_needs_requests(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"P8-q\.txt: .*give --requests N"):
        import_file("redis-benchmark", QUIET)
    table = import_and_summarise("redis-benchmark", QUIET, tmp_path, ["op"],
                                 ImportOptions(requests=2000)).set_index("op")
    assert list(table.index) == ["incr", "ping_inline", "ping_mbulk"]
    assert table.loc["incr", "throughput_ops_s"] == pytest.approx(166666.67, rel=1e-6)
    assert table.loc["incr", "latency_p50_ms"] == 0.383
    assert table.loc["incr", "latency_p99_ms"] != table.loc["incr", "latency_p99_ms"]  # NaN
    run = import_file("redis-benchmark", QUIET, ImportOptions(requests=2000)).runs[0]
    assert run.extra["latency_stated"] is False


def test_cut_off_test_and_noise(tmp_path: Path) -> None:
    text = TEXT.read_text()
    cut = text[: text.index("====== MSET") + 60]
    path = write_variant(tmp_path, "cut.txt", "$ redis-benchmark -n 2000\n" + cut)
    result = import_file("redis-benchmark", path)
    assert [r.grid_point["op"] for r in result.runs] == ["set", "get"]
    assert any("MSET (10 keys): no requests per second" in n for n in result.notes)
    assert result.skipped[0] == (1, "$ redis-benchmark -n 2000")
    with pytest.raises(ImportFormatError, match=r"e\.txt: no redis-benchmark records"):
        import_file("redis-benchmark", write_variant(tmp_path, "e.txt", "hello\n"))


def test_older_layout(tmp_path: Path) -> None:
    """redis before 6.2: whole-millisecond cumulative lines, then the rps line."""
    old = ("====== SET ======\n  1000 requests completed in 0.02 seconds\n"
           "  50 parallel clients\n  3 bytes payload\n  keep alive: 1\n\n"
           "99.80% <= 1 milliseconds\n100.00% <= 1 milliseconds\n"
           "50000.00 requests per second\n\n")
    (run,) = import_file("redis-benchmark", write_variant(tmp_path, "o.txt", old)).runs
    assert run.params == {"requests": 1000, "clients": 50, "value_size_bytes": 3,
                          "keep_alive": 1}
    assert run.extra["latency_stated"] is False
    assert run.extra["stated"]["distribution"][0] == (99.8, 1.0, None)


@pytest.mark.integration
@pytest.mark.parametrize("quiet", [False, True], ids=["text", "quiet"])
def test_live_redis_benchmark_text(redis_server, tmp_path: Path, quiet: bool) -> None:
    """Real `redis-benchmark` output (redis-tools, a CI dependency) against a real
    redis-server: what it prints is what the summary shows."""
    exe = shutil.which("redis-benchmark")
    assert exe, "redis-benchmark not installed: apt-get install redis-tools"
    ep = redis_server.endpoint
    cmd = [exe, "-h", ep.host, "-p", str(ep.port), "-a", ep.auth.password, "-n", "1500",
           "-c", "4", "-t", "set,get,lpush", *(["-q"] if quiet else [])]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    path = write_variant(tmp_path, "live.txt", out)
    table = import_and_summarise("redis-benchmark", path, tmp_path / "raw", ["op"],
                                 ImportOptions(requests=1500)).set_index("op")
    assert set(table.index) == {"set", "get", "lpush"}
    if quiet:
        for name, rps, p50 in re.findall(r"(\w+): ([\d.]+) requests per second, p50=([\d.]+)",
                                         out):
            assert table.loc[name.lower(), "throughput_ops_s"] == pytest.approx(float(rps))
            assert table.loc[name.lower(), "latency_p50_ms"] == float(p50)
    else:
        _check(table, _stated(out), 1500)


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    # "0 requests" fell back to --requests without a word.
    ("  2000 requests completed in 0.05 seconds", "  0 requests completed in 0.05 seconds",
     5, r"SET requests 0 is below 1"),
    ("  2000 requests completed", "  " + "9" * 4301 + " requests completed", 5,
     r"SET requests 999999999999\.\.\. \(4301 characters\) has more digits"),
    ("  10 parallel clients", "  " + "9" * 4301 + " parallel clients", 6,
     r"SET clients 999999999999\.\.\. \(4301 characters\) has more digits"),
    ("(cumulative count 1042)", "(cumulative count " + "9" * 4301 + ")", 15,
     r"SET cumulative count 999999999999\.\.\. \(4301 characters\) has more digits"),
    ("50.000% <= 0.151 milliseconds", "50.000% <= 0.011 milliseconds", 15,
     r"SET: 50\.000% <= 0\.011 ms is below 0\.000% <= 0\.047 ms"),
    ("  throughput summary: 40816.33 requests", "  throughput summary: 0.00 requests", 39,
     r"SET requests per second 0\.00 is zero"),
    ("  throughput summary: 40816.33 requests", "  throughput summary: " + "9" * 400 +
     ".0 requests", 39, r"SET requests per second 999999999999\.\.\. \(402 characters\) "
     "is not a finite number"),
    ("0.155     0.040     0.151     0.239", "0.155     0.040     0.951     0.239", 42,
     r"SET latencies \(ms\): p50 0\.951 is above p95 0\.239"),
    ("0.155     0.040     0.151     0.239", "nan     0.040     0.151     0.239", 42,
     r"SET latencies \(ms\) avg nan is not a finite number"),
])
def test_impossible_numbers_name_the_line(old: str, new: str, line: int, message: str,
                                          tmp_path: Path) -> None:
    text = TEXT.read_text()
    assert old in text
    p = write_variant(tmp_path, "t.txt", text.replace(old, new, 1))
    with pytest.raises(ImportFormatError, match=rf"t\.txt:{line}: {message}"):
        import_file("redis-benchmark", p)


def test_quiet_impossible_rate_names_the_line(tmp_path: Path) -> None:
    text = QUIET.read_text().replace("INCR: 166666.67", "INCR: " + "9" * 400 + ".67")
    with pytest.raises(ImportFormatError, match=r"q\.txt:8: INCR requests per second "
                                                r"999999999999\.\.\. \(403 characters\)"):
        import_file("redis-benchmark", write_variant(tmp_path, "q.txt", text),
                    ImportOptions(requests=2000))
