"""export csv: per-run tables equal `harness summary`'s figures; per-op tables equal the
ops as stored (read back with the csv module, not with the code that wrote them)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from harness.analysis.summary_table import summary_table
from harness.cli import main
from harness.errors import ExportError
from harness.exporters import export_csv
from harness.importers import ImportOptions, import_file, write_import

DATA = Path(__file__).resolve().parents[1] / "data" / "importers"


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    out = tmp_path / "raw"
    write_import(import_file("ycsb-raw", DATA / "ycsb" / "ycsb-raw.txt"), out, "ycsb")
    write_import(import_file("redis-benchmark-csv", DATA /
                             "redis-benchmark-7.0-n20000-c10-d100.csv",
                             ImportOptions(requests=20000)), out, "rb")
    return out


def test_per_run_matches_summary(raw: Path, tmp_path: Path) -> None:
    (out,) = export_csv(raw, tmp_path / "runs.csv")
    rows = list(csv.DictReader(out.open()))
    summary = summary_table(raw, ["run_id", "op"]).set_index(["run_id", "op"])
    assert len(rows) == len(summary)
    for row in rows:
        want = summary.loc[(row["run_id"], row["op"])]
        assert int(row["ops"]) == want["ops"]
        for col in ("throughput_ops_s", "latency_mean_ms", "latency_p50_ms",
                    "latency_p99_ms"):
            got = float(row[col]) if row[col] else np.nan
            assert got == pytest.approx(want[col], nan_ok=True), col
        assert row["experiment"] in ("ycsb", "rb") and row["config_id"]
    # redis-benchmark's stated p99 (not the mean) for the SET run.
    (set_row,) = [r for r in rows if r["experiment"] == "rb" and r["op"] == "set"]
    stated = next(csv.DictReader((DATA / "redis-benchmark-7.0-n20000-c10-d100.csv").open()))
    assert float(set_row["latency_p99_ms"]) == float(stated["p99_latency_ms"])


def test_per_op_rows_are_the_stored_ops(raw: Path, tmp_path: Path, capsys) -> None:
    assert main(["export", "csv", str(raw), "-o", str(tmp_path / "x"), "--per", "op",
                 "--experiment", "ycsb"]) == 0
    rows = list(csv.DictReader((tmp_path / "x").open()))
    (run_dir,) = [p for p in (raw / "ycsb").iterdir() if p.is_dir()]
    stored = pq.read_table(run_dir / "ops.parquet").to_pydict()
    assert len(rows) == len(stored["latency_ns"]) == 1500
    assert [int(r["latency_ns"]) for r in rows] == stored["latency_ns"]
    assert [int(r["start_ns"]) for r in rows] == stored["start_ns"]
    assert {r["op"] for r in rows} == {"read", "update"} and rows[0]["experiment"] == "ycsb"


def test_bad_requests(raw: Path, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="--by groups the per-run table"):
        export_csv(raw, tmp_path / "o.csv", per="op", by=["op"])
    with pytest.raises(ExportError, match="unknown grouping column 'zz'"):
        export_csv(raw, tmp_path / "o.csv", by=["zz"])
    assert main(["export", "csv", str(raw), "-o", str(raw / "t.csv")]) == 2


@pytest.mark.parametrize("per", ["run", "op"])
def test_a_link_at_the_output_is_refused_by_name(raw: Path, tmp_path: Path, capsys,
                                                  per: str) -> None:
    """`-o` naming a symbolic link (planted, or left by another tool): the export says so
    and the file it points at stays as it was."""
    victim = tmp_path / "victim"
    victim.write_text("the user's")
    (tmp_path / "out.csv").symlink_to(victim)
    assert main(["export", "csv", str(raw), "-o", str(tmp_path / "out.csv"),
                 "--per", per]) != 0
    assert "out.csv is a symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "the user's"
