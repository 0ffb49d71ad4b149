"""The importer contract and the writer: exact aggregates, layout, manifests, repetitions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.analysis.data.load import load
from harness.errors import ResultsError
from harness.importers import ImportResult, ParsedRun, Records, write_import
from harness.importers.writer import build_ops, default_experiment
from harness.results import read_manifest, verify_run
from tests.importers.conftest import write_variant


def test_aggregate_sums_exactly() -> None:
    lat = Records.aggregate("put", 1047, 3541e6).latencies()
    assert lat.shape == (1047,) and lat.sum() == 3_541_000_000
    assert lat.max() - lat.min() <= 1
    with pytest.raises(ValueError):
        Records.aggregate("put", 0, 1.0)


def test_layouts() -> None:
    back = build_ops([Records.measured("a", [1, 2, 3]), Records.aggregate("b", 2, 10)])
    assert back.op_names == ("a", "b")
    assert back.start_ns.tolist() == [0, 1, 3, 6, 11]  # one after another, across records
    spread = build_ops([Records.aggregate("get", 5, 5 * 100, wall_ns=1000)])
    assert spread.start_ns[0] == 0 and spread.start_ns[-1] + spread.latency_ns[-1] == 1000
    assert not spread.warmup.any() and (spread.intended_ns == -1).all()


def _result(path: Path, reps: list[int | None]) -> ImportResult:
    runs = [ParsedRun([Records.aggregate("put", 10, 1e7)], {"op": "put", "servers": 2},
                      params={"note": "x"}, repetition=r, notes=["n"]) for r in reps]
    return ImportResult("kv-report", path, runs=runs, skipped=[(1, "noise")], notes=["f"])


def test_manifest_fields_and_repetitions_continue(tmp_path: Path) -> None:
    a = write_variant(tmp_path, "a.txt", "a")
    b = write_variant(tmp_path, "b.txt", "b")
    first = write_import(_result(a, [None, None]), tmp_path / "raw", "e")
    second = write_import(_result(b, [1]), tmp_path / "raw", "e")
    mans = [read_manifest(d) for d in [*first, *second]]
    assert [m.repetition for m in mans] == [1, 2, 3]
    assert len({m.run_id for m in mans}) == 3
    m = mans[0]
    assert m.source == "imported" and m.status == "complete" and m.workload == "kv-report"
    assert m.params == {"note": "x", "op": "put", "servers": 2}
    assert m.grid_point == {"op": "put", "servers": 2}
    assert m.extra["imported_from"]["file"] == "a.txt"
    assert len(m.extra["imported_from"]["sha256"]) == 64
    assert m.extra["aggregated"] is True and m.extra["skipped_lines"] == 1
    assert m.extra["notes"] == ["f", "n"]
    assert (m.hosts, m.services, m.kit, m.started_utc) == ({}, {}, {}, "")
    verify_run(first[0])
    loaded = load(tmp_path / "raw")
    assert set(loaded.runs["config_id"]) == {m.config_id}
    assert np.isclose(loaded.ops["latency_ns"].mean(), 1e6)


def test_same_file_twice_refused(tmp_path: Path) -> None:
    a = write_variant(tmp_path, "a.txt", "a")
    write_import(_result(a, [None]), tmp_path / "raw", "e")
    with pytest.raises(ResultsError, match="already imported"):
        write_import(_result(a, [None]), tmp_path / "raw", "e")
    write_import(_result(a, [None]), tmp_path / "raw", "other")  # another experiment: fine


def test_default_experiment() -> None:
    assert default_experiment("gae-bench", Path("/x/my results (2).txt")) == (
        "gae-bench-my_results_2")
