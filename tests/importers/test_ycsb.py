"""YCSB: text, raw and HdrHistogram outputs of one simulated run whose every op is known.

The files in tests/data/importers/ycsb were written by MakeYcsbOutputs.java (there)
through the calls YCSB's measurement classes make, with HdrHistogram's Java classes;
known.csv lists every simulated op, the answer the imports are checked against.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.data.load import load
from harness.analysis.data.summary import summarise
from harness.errors import ImportFormatError
from harness.importers import import_file, write_import
from tests.importers.conftest import DATA, import_and_summarise, write_variant

YCSB = DATA / "ycsb"
TEXT, RAW = YCSB / "ycsb-hdrhistogram-text.txt", YCSB / "ycsb-raw.txt"
RUNTIME_MS = 2241  # [OVERALL], RunTime(ms) in both outputs


def _known() -> dict[str, dict[str, np.ndarray]]:
    rows = list(csv.DictReader((YCSB / "known.csv").open()))
    out = {}
    for op in ("READ", "UPDATE"):
        mine = [r for r in rows if r["op"] == op]
        out[op.lower()] = {"end_ms": np.array([int(r["end_ms"]) for r in mine]),
                           "latency_us": np.array([int(r["latency_us"]) for r in mine]),
                           "not_found": np.array([r["status"] == "NOT_FOUND" for r in mine])}
    return out


def _stated(path: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("[") and line.count(", ") == 2:
            name, field, value = line.split(", ")
            out.setdefault(name.strip("[]"), {})[field] = float(value)
    return out


def _hdr_value_at(values_us: np.ndarray, pct: float) -> float:
    """HdrHistogram's valueAtPercentile on exact values: rank (q * n + 0.5) rounded down,
    as HdrHistogram 2.1.11 (Java, Debian) and HdrHistogram_c count it."""
    v = np.sort(values_us)
    return float(v[max(int(pct / 100 * len(v) + 0.5), 1) - 1])


def test_raw_is_exact_per_op(tmp_path: Path) -> None:
    known = _known()
    (run,) = import_file("ycsb-raw", RAW).runs
    assert run.extra["latency_source"] == "per-op" and not run.aggregated
    begin = {op: k["end_ms"] * 1_000_000 - k["latency_us"] * 1000 for op, k in known.items()}
    t0 = min(b.min() for b in begin.values())
    for rec in run.records:
        assert np.array_equal(rec.latencies_ns, known[rec.op]["latency_us"] * 1000.0)
        assert np.array_equal(rec.start_ns, begin[rec.op] - t0)
    assert min(rec.start_ns.min() for rec in run.records) == 0
    # YCSB's own summary (sorted list, index int(n*q)) from the imported records.
    stated = _stated(RAW)
    for rec in run.records:
        lat_us = np.sort(rec.latencies_ns) / 1000
        for key, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999)):
            assert lat_us[int(len(lat_us) * q)] == stated[rec.op.upper()][key]
    assert any("16 ops returned NOT_FOUND" in n for n in run.notes)
    assert import_file("ycsb-raw", RAW).skipped == []


def test_raw_summary_throughput_and_mean(tmp_path: Path) -> None:
    table = import_and_summarise("ycsb-raw", RAW, tmp_path, ["op"]).set_index("op")
    stated = _stated(RAW)
    for op in ("read", "update"):
        assert table.loc[op, "ops"] == stated[op.upper()]["Total Operations"]
        assert table.loc[op, "latency_mean_ms"] == pytest.approx(
            stated[op.upper()]["Average"] / 1000, abs=1e-6)
    total = table["ops"].sum() / (RUNTIME_MS / 1000)
    assert total == pytest.approx(stated["OVERALL"]["Throughput(ops/sec)"], rel=0.01)


@pytest.mark.parametrize("op", ["read", "update"])
def test_hdr_log_matches_known_ops(op: str, tmp_path: Path) -> None:
    known = _known()[op]
    path = YCSB / f"{op.upper()}.hdr"
    (run,) = import_file("ycsb-hdr", path).runs
    (rec,) = run.records
    assert run.grid_point == {"op": op} and run.extra["latency_source"] == "histogram"
    assert len(rec.latencies_ns) == len(known["latency_us"])
    # Per interval (1 s, from the run's start), the same op counts as the known run.
    start_s = (rec.start_ns // 1_000_000_000).astype(int)
    known_s = ((known["end_ms"] - 1_700_000_000_000) // 1000).astype(int)
    assert np.bincount(start_s).tolist() == np.bincount(known_s).tolist()
    # Percentiles: HdrHistogram's precision (3 digits) against the exact known values,
    # and equal to what YCSB's text exporter printed for the same histogram.
    got_us = np.sort(rec.latencies_ns) / 1000
    stated = _stated(TEXT)[op.upper()]
    for pct, key in ((50, "50thPercentileLatency(us)"), (95, "95thPercentileLatency(us)"),
                     (99, "99thPercentileLatency(us)"), (99.9, "99.9PercentileLatency(us)")):
        ours = _hdr_value_at(got_us, pct)
        assert ours == pytest.approx(_hdr_value_at(known["latency_us"], pct), rel=1e-3)
        assert ours == stated[key]
    assert got_us.max() == stated["MaxLatency(us)"]
    write_import(import_file("ycsb-hdr", path), tmp_path, "h")
    table = summarise(load(tmp_path, columns=["op", "start_ns", "latency_ns", "status"]),
                      ["op"])
    # The summary interpolates between the two ops around the median (HdrHistogram
    # takes the nearest rank): it lies between them.
    n = len(got_us)
    below, above = got_us[int(np.floor(0.5 * (n - 1)))], got_us[int(np.ceil(0.5 * (n - 1)))]
    assert below / 1000 <= table["latency_p50_ms"].iloc[0] <= above / 1000
    assert stated["50thPercentileLatency(us)"] in (below, above)


def test_hdr_log_read_by_hdrhistogram_itself() -> None:
    """The reference reader (hdrh's HistogramLogReader) sees the same op count."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    for op in ("read", "update"):
        reader = HistogramLogReader(str(YCSB / f"{op.upper()}.hdr"),
                                    HdrHistogram(1, 3_600_000_000, 3))
        total = 0
        while (h := reader.get_next_interval_histogram()) is not None:
            total += h.get_total_count()
        (run,) = import_file("ycsb-hdr", YCSB / f"{op.upper()}.hdr").runs
        assert total == len(run.records[0].latencies_ns) == len(_known()[op]["end_ms"])


def test_text_output_stated_figures_and_statuses(tmp_path: Path) -> None:
    table = import_and_summarise("ycsb", TEXT, tmp_path, ["op"]).set_index("op")
    stated = _stated(TEXT)
    for op in ("read", "update"):
        fig = stated[op.upper()]
        assert table.loc[op, "ops"] == fig["Operations"]
        assert table.loc[op, "latency_mean_ms"] == pytest.approx(
            fig["AverageLatency(us)"] / 1000, abs=1e-6)
        assert table.loc[op, "latency_p50_ms"] == fig["50thPercentileLatency(us)"] / 1000
        assert table.loc[op, "latency_p99_ms"] == fig["99thPercentileLatency(us)"] / 1000
        assert table.loc[op, "throughput_ops_s"] == pytest.approx(
            fig["Operations"] / (RUNTIME_MS / 1000), rel=0.01)
    (run,) = import_file("ycsb", TEXT).runs
    statuses = {(r.op, r.status): r.count for r in run.records}
    assert statuses == {("read", "ok"): 984, ("read", "miss"): 16, ("update", "ok"): 500}
    assert run.params == {"threads": 4, "workload": "workloada"}
    assert "cleanup" not in {r.op for r in run.records}
    # Pooled over both ops, stated per-op percentiles do not combine: NaN, not the mean.
    (row,) = import_and_summarise("ycsb", TEXT, tmp_path / "b").to_dict("records")
    assert row["op"] == "read+update" and np.isnan(row["latency_p99_ms"])


def test_failed_ops_and_bad_files(tmp_path: Path) -> None:
    text = TEXT.read_text() + ("[Intended-UPDATE], Operations, 500\n"
                               "[UPDATE-FAILED], Operations, 5\n"
                               "[UPDATE-FAILED], AverageLatency(us), 900.0\n"
                               "[UPDATE-FAILED], Return=ERROR, 5\n")
    (run,) = import_file("ycsb", write_variant(tmp_path, "f.txt", text)).runs
    assert {(r.op, r.status): r.count for r in run.records}[("update", "error")] == 5
    assert sum(r.count for r in run.records if r.op == "update") == 505  # not 1005
    assert any("Intended-UPDATE: the same ops" in n for n in run.notes)
    with pytest.raises(ImportFormatError, match=r"j\.txt: no ycsb records found"):
        import_file("ycsb", write_variant(tmp_path, "j.txt", "Loading workload...\n"))
    lines = (YCSB / "READ.hdr").read_text().splitlines()
    lines[5] = lines[5][:-20] + "AAAA"  # a damaged payload
    with pytest.raises(ImportFormatError, match=r"bad\.hdr:6: damaged compressed histogram"):
        import_file("ycsb-hdr", write_variant(tmp_path, "bad.hdr", "\n".join(lines)))


def _text_with(tmp_path: Path, old: str, new: str) -> Path:
    text = TEXT.read_text()
    assert old in text
    return write_variant(tmp_path, "t.txt", text.replace(old, new))


@pytest.mark.parametrize(("old", "new", "message"), [
    # A negative count silently dropped the whole op.
    ("[READ], Operations, 1000", "[READ], Operations, -1000",
     r"t\.txt:13: \[READ\] Operations -1000 is negative"),
    ("[READ], Operations, 1000", "[READ], Operations, 10.5",
     r"t\.txt:13: \[READ\] Operations 10\.5 is not a whole number"),
    ("[READ], Operations, 1000", "[READ], Operations, " + "9" * 4301,
     r"t\.txt:13: \[READ\] Operations 999999999999\.\.\. \(4301 characters\) has more digits"),
    # A zero run time laid the ops back to back: 3,143 ops/s against the stated 669.
    ("RunTime(ms), 2241", "RunTime(ms), 0", r"t\.txt:7: \[OVERALL\] RunTime\(ms\) 0 is zero"),
    ("RunTime(ms), 2241", "RunTime(ms), -2241",
     r"t\.txt:7: \[OVERALL\] RunTime\(ms\) -2241 is negative"),
    ("RunTime(ms), 2241", "RunTime(ms), NaN",
     r"t\.txt:7: \[OVERALL\] RunTime\(ms\) NaN is not a finite number"),
    ("[READ], Return=NOT_FOUND, 16", "[READ], Return=NOT_FOUND, -16",
     r"t\.txt:22: \[READ\] Return=NOT_FOUND -16 is negative"),
    ("[READ], AverageLatency(us), 293.537", "[READ], AverageLatency(us), -293.537",
     r"t\.txt:14: \[READ\] latency \(us\) mean -293\.537 is negative"),
    ("[READ], AverageLatency(us), 293.537", "[READ], AverageLatency(us), 2930.537",
     r"t\.txt:14: \[READ\] latency \(us\): mean 2930\.54 is outside min 30 \.\. max 1323"),
    ("[READ], 95thPercentileLatency(us), 682", "[READ], 95thPercentileLatency(us), 68",
     r"t\.txt:18: \[READ\] latency \(us\): p50 249 is above p95 68"),
    ("[READ], MaxLatency(us), 1323", "[READ], MaxLatency(us), inf",
     r"t\.txt:16: \[READ\] latency \(us\) max inf is not a finite number"),
])
def test_text_impossible_figures_name_the_line(old: str, new: str, message: str,
                                               tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=message):
        import_file("ycsb", _text_with(tmp_path, old, new))


def test_text_without_runtime_says_so_and_zero_ops_are_nothing(tmp_path: Path) -> None:
    # No RunTime line at all is not a damaged number: imported, and the run says why its
    # throughput is not YCSB's. An op with no operations (YCSB prints NaN figures for
    # it) is nothing measured, not an error.
    p = _text_with(tmp_path, "[OVERALL], RunTime(ms), 2241\n",
                   "[SCAN], Operations, 0\n[SCAN], AverageLatency(us), NaN\n"
                   "[SCAN], MinLatency(us), 9223372036854775807\n[SCAN], MaxLatency(us), 0\n")
    (run,) = import_file("ycsb", p).runs
    assert {r.op for r in run.records} == {"read", "update"}
    assert any("no [OVERALL] RunTime(ms)" in n for n in run.notes)


def test_text_figures_without_a_count_are_said_so(tmp_path: Path) -> None:
    (run,) = import_file("ycsb", _text_with(tmp_path, "[UPDATE], Operations, 500\n", "")).runs
    assert {r.op for r in run.records} == {"read"}
    assert any("UPDATE: no Operations line" in n for n in run.notes), run.notes


def _raw_with(tmp_path: Path, old: str, new: str) -> Path:
    text = RAW.read_text()
    assert old in text
    return write_variant(tmp_path, "r.txt", text.replace(old, new, 1))


@pytest.mark.parametrize(("old", "new", "message"), [
    ("[READ], p50, 250", "[READ], p50, 2500",
     r"r\.txt:1013: \[READ\] latency \(us\): p50 2500 is above p90 528"),
    ("[READ], Return=NOT_FOUND, 16", "[READ], Return=NOT_FOUND, -16",
     r"r\.txt:1019: \[READ\] Return=NOT_FOUND -16 is negative"),
    # Was an OverflowError (int(inf)) while counting the codes for a note.
    ("[READ], Return=NOT_FOUND, 16", "[READ], Return=NOT_FOUND, 1E400",
     r"r\.txt:1019: \[READ\] Return=NOT_FOUND 1E400 is not a whole number"),
    ("RunTime(ms), 2241", "RunTime(ms), 0", r"r\.txt:2: \[OVERALL\] RunTime\(ms\) 0 is zero"),
    # 15-digit timestamps once overflowed int64 nanoseconds silently.
    ("READ,1700000000006,602", "READ,999999999999999,602",
     r"r\.txt:5: READ timestamp 999999999999999 \(ms\) is .* from the others"),
])
def test_raw_impossible_figures_name_the_line(old: str, new: str, message: str,
                                              tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match=message):
        import_file("ycsb-raw", _raw_with(tmp_path, old, new))


@pytest.mark.parametrize(("line_no", "old", "new", "message"), [
    # An infinite start became INT64_MIN start times, silently.
    (6, "1.000,1.000,", "9" * 400 + ",1.000,",
     r"h\.hdr:6: StartTimestamp 999999999999\.\.\. \(400 characters\) is not a finite"),
    (6, "1.000,1.000,", "1.000," + "9" * 400 + ",",
     r"h\.hdr:6: Interval_Length 999999999999\.\.\. \(400 characters\) is not a finite"),
    (6, "1.000,1.000,", "9999999999.000,1.000,", r"h\.hdr:6: interval ends .* past the log's"),
    (3, "1700000000.000", "9" * 400, r"h\.hdr:3: StartTime .* is not a finite number"),
])
def test_hdr_impossible_times_name_the_line(line_no: int, old: str, new: str, message: str,
                                            tmp_path: Path) -> None:
    lines = (YCSB / "READ.hdr").read_text().splitlines(keepends=True)
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    with pytest.raises(ImportFormatError, match=message):
        import_file("ycsb-hdr", write_variant(tmp_path, "h.hdr", "".join(lines)))


@pytest.mark.parametrize(("threads", "message"), [
    ("9" * 4301, r"-threads 999999999999\.\.\. \(4301 characters\) has more digits"),
    ("0", r"-threads 0 is below 1"),
])
@pytest.mark.parametrize(("fmt", "path"), [("ycsb", TEXT), ("ycsb-raw", RAW)])
def test_command_line_numbers_are_checked(fmt: str, path: Path, threads: str, message: str,
                                          tmp_path: Path) -> None:
    text = path.read_text()
    if "Command line:" not in text:
        text = "Command line: -db site.ycsb.BasicDB -threads 4 -s -t\n" + text
    p = write_variant(tmp_path, "c.txt", text.replace("-threads 4", f"-threads {threads}"))
    with pytest.raises(ImportFormatError, match=r"c\.txt:1: " + message):
        import_file(fmt, p)
