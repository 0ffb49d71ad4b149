"""memtier-json: real memtier output (HdrHistogram -> per-op records) and older aggregates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.data.load import load
from harness.analysis.data.summary import summarise
from harness.analysis.summary_table import summary_table
from harness.errors import ImportFormatError
from harness.importers import import_file, write_import
from harness.results import read_manifest
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


# --- real memtier_benchmark output, with its HdrHistogram -------------------------------
REAL = [DATA / "memtier-redis-t2-c5-2s.json", DATA / "memtier-memcached-t1-c10-n2000.json"]
_OPS = {"Sets": "set", "Gets": "get"}


def _summarise_ops(path: Path, raw: Path) -> pd.DataFrame:
    write_import(import_file("memtier-json", path), raw, "m")
    return summarise(load(raw, experiments=["m"],
                          columns=["op", "start_ns", "latency_ns", "status"]),
                     ["op"]).set_index("op")


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_real_histogram_percentiles_match_memtier(path: Path, tmp_path: Path) -> None:
    """p50/p99/p99.9 of the rebuilt ops = memtier's own, within the histogram's
    precision (10^-digits relative) and the JSON's 3 decimals. memtier (HdrHistogram)
    takes the nearest rank; the summary interpolates linearly between the two ops around
    the rank, so in a sparse tail it lies between those two, not on memtier's."""
    stats = json.loads(path.read_text())["ALL STATS"]
    table = _summarise_ops(path, tmp_path)
    (run,) = import_file("memtier-json", path).runs
    digits = run.extra["histogram"]["significant_digits"][0]
    close = {"rel": 10.0 ** -digits, "abs": 0.0011}
    for key, op in _OPS.items():
        stated = stats[key]["Percentile Latencies"]
        lat_ms = np.sort(next(r for r in run.records if r.op == op).latencies_ns) / 1e6
        n = len(lat_ms)
        for col, pct, q in (("latency_p50_ms", "p50.00", 0.5), ("latency_p99_ms", "p99.00",
                            0.99), ("latency_p999_ms", "p99.90", 0.999)):
            nearest_rank = lat_ms[max(int(q * n + 0.5), 1) - 1]  # as HdrHistogram_c
            assert nearest_rank == pytest.approx(stated[pct], **close), (op, pct)
            below, above = lat_ms[int(np.floor(q * (n - 1)))], lat_ms[int(np.ceil(q * (n - 1)))]
            assert below <= table.loc[op, col] <= above
            if above - below <= stated[pct] * 10.0 ** -digits:  # a dense part
                assert table.loc[op, col] == pytest.approx(stated[pct], **close), (op, pct)
        assert table.loc["get", "latency_p50_ms"] == pytest.approx(
            stats["Gets"]["Percentile Latencies"]["p50.00"], **close)
        assert table.loc[op, "ops"] == stats[key]["Count"]
        assert table.loc[op, "latency_max_ms"] == pytest.approx(
            stats[key]["Max Latency"], **close)
        # The mean: each op sits at its bucket's top, so at most one bucket above.
        assert table.loc[op, "latency_mean_ms"] == pytest.approx(
            stats[key]["Average Latency"], rel=2 * 10.0 ** -digits + 0.01)
        # Throughput over the run's duration, as memtier's Ops/sec (within 2%).
        assert table.loc[op, "throughput_ops_s"] == pytest.approx(
            stats[key]["Ops/sec"], rel=0.02)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_real_histogram_run_is_marked_and_keeps_the_time_series(path: Path,
                                                                tmp_path: Path) -> None:
    (run,) = import_file("memtier-json", path).runs
    assert not run.aggregated
    assert run.extra["latency_source"] == "histogram"
    assert run.extra["histogram"]["unit"] == "us"
    stats = json.loads(path.read_text())["ALL STATS"]
    for rec in run.records:
        key = next(k for k, v in _OPS.items() if v == rec.op)
        series = stats[key]["Time-Serie"]
        seconds = (rec.start_ns // 1_000_000_000).astype(int)
        got = np.bincount(seconds, minlength=len(series))
        assert got.tolist() == [series[s]["Count"] for s in sorted(series, key=int)]
        # The slowest op lies in the second whose stated max is the run's max.
        slow_second = max(series, key=lambda s: series[s].get("Max Latency", 0))
        assert seconds[np.argmax(rec.latencies_ns)] == int(slow_second)
    write_import(import_file("memtier-json", path), tmp_path, "m")
    man = read_manifest(next((tmp_path / "m").iterdir()))
    assert man.extra["latency_source"] == "histogram" and man.extra["aggregated"] is False


def test_cli_says_the_records_are_histogram_bucketed(tmp_path: Path, capsys) -> None:
    from harness.cli import main

    assert main(["import", "memtier-json", str(REAL[0]), "-o", str(tmp_path)]) == 0
    assert "1 histogram-bucketed run(s) written to" in capsys.readouterr().out


def test_summary_of_a_file_without_histogram_shows_stated_percentiles(
        tmp_path: Path) -> None:
    by_op = import_and_summarise("memtier-json", SAMPLE, tmp_path, ["op"]).set_index("op")
    assert by_op.loc["get", "latency_p50_ms"] == 0.391  # memtier's, not the mean 0.409
    assert by_op.loc["get", "latency_p99_ms"] == 1.031
    assert by_op.loc["set", "latency_p99_ms"] == 1.103
    (row,) = summary_table(tmp_path, experiments=["imp"]).to_dict("records")
    assert (row["latency_p50_ms"], row["latency_p99_ms"]) == (0.391, 1.039)  # Totals
    # Two such runs pooled: no percentile can be derived from stated ones.
    write_import(import_file("memtier-json", write_variant(
        tmp_path, "again.json", SAMPLE.read_text() + "\n")), tmp_path, "imp")
    (pooled,) = summary_table(tmp_path, experiments=["imp"]).to_dict("records")
    assert pooled["runs"] == 2 and np.isnan(pooled["latency_p99_ms"])
    assert pooled["latency_mean_ms"] == pytest.approx(0.4101, abs=1e-4)


def test_damaged_histogram_names_file_and_op(tmp_path: Path) -> None:
    data = json.loads(REAL[0].read_text())
    data["ALL STATS"]["Gets"]["Percentile Latencies"]["Histogram log format"][
        "Compressed Histogram"] = "HISTFAAAAxyz"
    p = write_variant(tmp_path, "dmg.json", json.dumps(data))
    with pytest.raises(ImportFormatError, match=r"dmg\.json: Gets: damaged compressed"):
        import_file("memtier-json", p)


def test_time_series_that_does_not_add_up_spreads_evenly(tmp_path: Path) -> None:
    data = json.loads(REAL[1].read_text())
    data["ALL STATS"]["Sets"]["Time-Serie"]["0"]["Count"] -= 7
    p = write_variant(tmp_path, "odd.json", json.dumps(data))
    (run,) = import_file("memtier-json", p).runs
    assert any("Sets: Time-Serie counts differ" in n for n in run.notes)
    table = _summarise_ops(p, tmp_path).loc["set"]
    assert table["ops"] == 10000
    assert table["latency_p99_ms"] == pytest.approx(1.791, rel=0.01)


def test_histogram_with_absurd_counts_is_refused(tmp_path: Path) -> None:
    from hdrh.histogram import HdrHistogram

    hist = HdrHistogram(1, 10**6, 3)
    hist.record_value(100, 10**9)  # a billion ops in a 2-second run: a damaged file
    data = json.loads(REAL[0].read_text())
    data["ALL STATS"]["Sets"]["Percentile Latencies"]["Histogram log format"][
        "Compressed Histogram"] = hist.encode().decode()
    p = write_variant(tmp_path, "huge.json", json.dumps(data))
    with pytest.raises(ImportFormatError, match=r"huge\.json: Sets: histogram counts "
                                                r"1,000,000,000 ops"):
        import_file("memtier-json", p)


def _sample_with(tmp_path: Path, change, source: Path = SAMPLE) -> Path:
    data = json.loads(source.read_text())
    change(data)
    return write_variant(tmp_path, "m.json", json.dumps(data))


def _set(*keys: str, value: object):
    def change(data: dict) -> None:
        node = data
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return change


@pytest.mark.parametrize(("change", "message"), [
    # A negative Count silently dropped the whole op.
    (_set("ALL STATS", "Sets", "Count", value=-909), r"ALL STATS / Sets / Count -909 is "
     "negative"),
    (_set("ALL STATS", "Sets", "Count", value=909.5), r"Sets / Count 909\.5 is not a whole"),
    (_set("ALL STATS", "Sets", "Average Latency", value=-0.4),
     r"Sets latencies \(ms\) mean -0\.4 is negative"),
    (_set("ALL STATS", "Sets", "Average Latency", value=float("nan")),
     r"Sets latencies \(ms\) mean nan is not a finite number"),
    (_set("ALL STATS", "Gets", "Percentile Latencies", "p50.00", value=5.0),
     r"Gets latencies \(ms\): p50 5 is above p99 1\.031"),
    (_set("ALL STATS", "Totals", "Max Latency", value=0.5),
     r"Totals latencies \(ms\): p99\.9 1\.927 is above max 0\.5"),
    (_set("ALL STATS", "Sets", "Average Latency", value=9.0),
     r"Sets latencies \(ms\): mean 9 is outside min 0\.104 \.\. max 2\.431"),
    # A zero duration fell back to laying the ops back to back, with only a note.
    (_set("ALL STATS", "Runtime", "Total duration", value=0),
     r"ALL STATS / Runtime / Total duration 0 is zero"),
    (_set("configuration", "threads", value=-2), r"configuration / threads -2 is negative"),
])
def test_impossible_numbers_name_the_key(change, message: str, tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=r"m\.json: .*" + message):
        import_file("memtier-json", _sample_with(tmp_path, change))


def test_impossible_numbers_next_to_a_histogram(tmp_path: Path) -> None:
    p = _sample_with(tmp_path, _set("ALL STATS", "Sets", "Count", value=-3), REAL[0])
    with pytest.raises(ImportFormatError, match=r"Sets / Count -3 is negative"):
        import_file("memtier-json", p)
    p = _sample_with(tmp_path, _set("ALL STATS", "Sets", "Time-Serie", "0", "Count",
                                    value=-5), REAL[0])
    with pytest.raises(ImportFormatError, match=r"Sets / Time-Serie / 0 / Count -5 is "
                                                "negative"):
        import_file("memtier-json", p)


def test_old_layout_negative_rate_is_an_error(tmp_path: Path) -> None:
    p = _sample_with(tmp_path, _set("ALL STATS", "Sets", "Ops/sec", value=-12000.5), OLD)
    with pytest.raises(ImportFormatError, match=r"Sets / Ops/sec -12000\.5 is negative"):
        import_file("memtier-json", p)


def test_a_4301_digit_integer_names_its_line(tmp_path: Path) -> None:
    # json.loads raised Python's own int-conversion ValueError.
    text = SAMPLE.read_text().replace('"Count": 909,', '"Count": ' + "9" * 4301 + ",")
    lines = text.splitlines()
    line = next(i for i, t in enumerate(lines, 1) if "9" * 4301 in t)
    with pytest.raises(ImportFormatError, match=rf"m\.json:{line}: a number of 4301 digits"):
        import_file("memtier-json", write_variant(tmp_path, "m.json", text))


def test_stated_figures_of_an_op_that_never_ran_are_not_kept(tmp_path: Path) -> None:
    # Real memtier prints p50 0.007 above Max 0.0 for Waits, which had no ops.
    (run,) = import_file("memtier-json", REAL[0]).runs
    assert "wait" not in run.extra["stated_latency_ms"]
    assert run.extra["stated"]["Waits"]["Count"] == 0  # still kept verbatim


def test_a_ratio_too_long_is_an_error(tmp_path: Path) -> None:
    # Was int()'s ValueError (4301 digits) while reading the set:get ratio.
    p = _sample_with(tmp_path, _set("configuration", "ratio", value="1:" + "9" * 4301))
    with pytest.raises(ImportFormatError, match=r"m\.json: configuration / ratio gets "
                                                r"999999999999\.\.\. \(4301 characters\)"):
        import_file("memtier-json", p)
