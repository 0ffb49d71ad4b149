"""export hdr: interval logs that HdrHistogram's own readers (Python and Java) read back.

The data: YCSB's raw output of a simulated run whose every op is known
(tests/data/importers/ycsb/known.csv), imported as exact per-op records.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.errors import ExportError
from harness.exporters import export_hdr
from harness.exporters.hdr_log import bucket_floor
from harness.importers import import_file, write_import

YCSB = Path(__file__).resolve().parents[1] / "data" / "importers" / "ycsb"
JAR = Path("/usr/share/java/hdrhistogram.jar")  # Debian: libhdrhistogram-java


def _known_ns() -> dict[str, np.ndarray]:
    rows = list(csv.DictReader((YCSB / "known.csv").open()))
    return {op.lower(): np.array([int(r["latency_us"]) * 1000 for r in rows if r["op"] == op])
            for op in ("READ", "UPDATE")}


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    out = tmp_path / "raw"
    write_import(import_file("ycsb-raw", YCSB / "ycsb-raw.txt"), out, "ycsb")
    return out


def _read_back(path: Path) -> list:
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    reader = HistogramLogReader(str(path), HdrHistogram(1, 10**12, 3))
    out = []
    while (h := reader.get_next_interval_histogram()) is not None:
        out.append(h)
    return out


def _hdr_rank(values: np.ndarray, pct: float) -> float:
    v = np.sort(values)
    return float(v[max(int(pct / 100 * len(v) + 0.5), 1) - 1])


def test_bucket_floor_is_hdrhistograms_lowest_equivalent_value() -> None:
    from hdrh.histogram import HdrHistogram

    hist = HdrHistogram(1, 10**13, 3)
    rng = np.random.default_rng(3)
    values = np.concatenate([np.arange(0, 5000), rng.integers(1, 10**13, 20000),
                             2 ** np.arange(1, 43), 2 ** np.arange(1, 43) - 1])
    got = bucket_floor(values)
    assert all(int(g) == hist.get_lowest_equivalent_value(int(v))
               for g, v in zip(got, values, strict=True))


def test_logs_read_back_with_hdrhistogram(raw: Path, tmp_path: Path) -> None:
    written = export_hdr(raw, tmp_path / "hdr", by=["op"])
    assert sorted(p.name for p in written) == ["index.csv", "op=read.hlog", "op=update.hlog"]
    index = list(csv.DictReader((tmp_path / "hdr" / "index.csv").open()))
    known = _known_ns()
    for row in index:
        intervals = _read_back(tmp_path / "hdr" / row["file"])
        exact = known[row["op"]]
        assert sum(h.get_total_count() for h in intervals) == len(exact) == int(row["ops"])
        pooled = intervals[0]
        for h in intervals[1:]:
            pooled.add(h)
        for pct in (50, 90, 99, 99.9, 100):
            assert pooled.get_value_at_percentile(pct) == pytest.approx(
                _hdr_rank(exact, pct), rel=1e-3), pct
        # One interval per second of the run, each with the ops that ended in it.
        assert len(intervals) == 3  # the run lasted 2.2 s


def test_runs_follow_each_other_and_ops_level_groups(raw: Path, tmp_path: Path) -> None:
    write_import(import_file("ycsb-raw", YCSB / "ycsb-raw.txt"), raw, "again")
    export_hdr(raw, tmp_path / "hdr", by=["op", "client"])
    rows = list(csv.DictReader((tmp_path / "hdr" / "index.csv").open()))
    assert {(r["op"], r["client"], r["runs"]) for r in rows} == {("read", "0", "2"),
                                                                  ("update", "0", "2")}
    read = tmp_path / "hdr" / "op=read_client=0.hlog"
    intervals = _read_back(read)
    assert sum(h.get_total_count() for h in intervals) == 2 * len(_known_ns()["read"])
    starts = [float(line.split(",")[0]) for line in read.read_text().splitlines()
              if re.match(r"^\d", line)]
    # Imported runs state no start time: the second follows the first (2.2 s each).
    assert starts == sorted(starts) and starts[-1] >= 4.0
    (default,) = [p for p in export_hdr(raw, tmp_path / "d", experiments=["ycsb"])
                  if p.suffix == ".hlog"]
    assert default.name == "experiment=ycsb_op=read+update.hlog"


def test_bad_requests(raw: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(ExportError, match="unknown grouping column 'nope'"):
        export_hdr(raw, tmp_path / "x", by=["nope"])
    assert main(["export", "hdr", str(raw), "-o", str(raw / "exports")]) == 2
    assert "never edited" in capsys.readouterr().err
    assert not (raw / "exports").exists()


def test_java_histogram_log_processor_reads_the_logs(raw: Path, tmp_path: Path) -> None:
    """HdrHistogram's own Java HistogramLogProcessor: same count, max and percentiles."""
    java = shutil.which("java")
    if java is None or not JAR.is_file():
        msg = "java or HdrHistogram's jar missing: apt-get install default-jre-headless " \
              "libhdrhistogram-java"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    assert main(["export", "hdr", str(raw), "-o", str(tmp_path / "hdr"), "--by", "op"]) == 0
    known = _known_ns()
    for op, exact in known.items():
        out = tmp_path / f"java-{op}"
        subprocess.run([java, "-cp", str(JAR), "org.HdrHistogram.HistogramLogProcessor",
                        "-i", str(tmp_path / "hdr" / f"op={op}.hlog"), "-o", str(out)],
                       check=True, capture_output=True, timeout=120)
        hgrm = Path(f"{out}.hgrm").read_text()
        total = re.search(r"Total count\s*=\s*(\d+)", hgrm)
        assert total and int(total.group(1)) == len(exact)
        peak = re.search(r"#\[Max\s*=\s*([\d.]+)", hgrm)
        assert float(peak.group(1)) == pytest.approx(exact.max() / 1e6, rel=1e-3)
        mean = re.search(r"#\[Mean\s*=\s*([\d.]+)", hgrm)
        assert float(mean.group(1)) == pytest.approx(exact.mean() / 1e6, rel=2e-3)
        # Percentile lines: value (ms), percentile, count, ... Java steps to the first
        # value whose cumulative count reaches the level: an op at rank about p * n.
        ordered = np.sort(exact) / 1e6
        table = [tuple(map(float, line.split()[:3])) for line in hgrm.splitlines()
                 if re.match(r"^\s+[\d.]+\s+[\d.]+\s+\d+", line)]
        assert len(table) > 20
        for value_ms, pct, _count in table:
            rank = pct * len(exact)
            near = ordered[max(int(np.floor(rank)) - 1, 0):int(np.ceil(rank)) + 1]
            assert np.isclose(near, value_ms, rtol=1e-3, atol=1e-3).any(), (value_ms, pct)


def test_native_runs_placed_at_their_start_times(dsmc_raw: Path, tmp_path: Path) -> None:
    """Kit runs (warm-up, misses, UTC start times): every measured op once, at its time."""
    from harness.analysis.data.load import load

    loaded = load(dsmc_raw, columns=["op", "latency_ns", "status"])
    export_hdr(dsmc_raw, tmp_path / "hdr", by=["op"])
    for op, ops in loaded.ops.groupby("op", observed=True):
        path = tmp_path / "hdr" / f"op={op}.hlog"
        text = path.read_text()
        assert "#[StartTime: " in text and "#[BaseTime: " in text
        intervals = _read_back(path)
        assert sum(h.get_total_count() for h in intervals) == len(ops)  # warm-up excluded
        pooled = intervals[0]
        for h in intervals[1:]:
            pooled.add(h)
        exact = ops["latency_ns"].to_numpy()
        assert pooled.get_value_at_percentile(99) == pytest.approx(_hdr_rank(exact, 99),
                                                                   rel=1e-3)
