"""Loading raw results into runs and ops DataFrames."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.data.load import RUN_COLUMNS, SkippedRunWarning, load, load_runs
from harness.errors import ResultsError, SchemaVersionError


def test_runs_table_flattens_manifest(dsmc_raw: Path):
    runs = load_runs(dsmc_raw)
    assert len(runs) == 50
    assert list(runs.columns[: len(RUN_COLUMNS)]) == list(RUN_COLUMNS)
    row = runs.iloc[0]
    assert row["experiment"] == "datastore_vs_memcache"
    assert row["value_size_bytes"] == 100
    assert row["loadgen_ops"] == 50 and row["loadgen_mode"] == "closed"
    assert row["count_measured"] == 50 and row["count_warmup"] == 5
    assert Path(row["run_dir"]).is_dir()
    assert set(runs["op"]) == {"store_write", "store_read", "mem_write", "mem_read_hit",
                               "mem_read_miss"}


def test_ops_are_measured_only_with_categoricals(dsmc_raw: Path):
    loaded = load(dsmc_raw)
    assert len(loaded.ops) == 50 * 50
    assert isinstance(loaded.ops["op"].dtype, pd.CategoricalDtype)
    assert isinstance(loaded.ops["status"].dtype, pd.CategoricalDtype)
    assert isinstance(loaded.ops["run_id"].dtype, pd.CategoricalDtype)
    assert not loaded.ops["warmup"].any()
    assert loaded.grid_keys == ("op",)
    everything = load(dsmc_raw, measured_only=False)
    assert len(everything.ops) == 50 * 55


def test_filters_on_any_parameter(dsmc_raw: Path):
    loaded = load(dsmc_raw, where={"op": ["mem_read_hit", "mem_read_miss"]},
                  columns=["latency_ns"])
    assert set(loaded.runs["op"]) == {"mem_read_hit", "mem_read_miss"}
    assert len(loaded.ops) == 20 * 50
    assert list(loaded.ops.columns) == ["run_id", "latency_ns"]
    assert load_runs(dsmc_raw, where={"repetition": lambda r: r <= 2}).shape[0] == 10
    assert load_runs(dsmc_raw, experiments=["nope"]).empty


def test_many_experiments(dsmc_raw: Path, tiny_raw: Path, tmp_path: Path):
    for src in (dsmc_raw, tiny_raw):
        for exp in src.iterdir():
            shutil.copytree(exp, tmp_path / exp.name)
    loaded = load(tmp_path)
    assert loaded.experiments == ["datastore_vs_memcache", "tiny"]
    assert load(tmp_path, experiments=["tiny"]).runs.shape[0] == 4


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_corrupt_run_is_skipped_with_warning(tiny_raw: Path, tmp_path: Path):
    raw = _copy(tiny_raw, tmp_path / "raw")
    victim = raw / "tiny" / "tiny-1-0" / "ops.parquet"
    victim.write_bytes(victim.read_bytes()[:-20])
    with pytest.warns(UserWarning, match="tiny-1-0"):
        loaded = load(raw)
    assert set(loaded.runs["run_id"]) == {"tiny-1-1", "tiny-2-0", "tiny-2-1"}


def test_unreadable_manifest_is_skipped_with_warning(tiny_raw: Path, tmp_path: Path):
    raw = _copy(tiny_raw, tmp_path / "raw")
    (raw / "tiny" / "tiny-2-1" / "manifest.json").write_text("{not json")
    with pytest.warns(UserWarning, match="tiny-2-1"):
        runs = load_runs(raw)
    assert len(runs) == 3


def test_unknown_schema_version_skipped_unless_strict(tiny_raw: Path, tmp_path: Path):
    raw = _copy(tiny_raw, tmp_path / "raw")
    path = raw / "tiny" / "tiny-2-1" / "manifest.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.warns(SkippedRunWarning, match="tiny-2-1.*schema_version 99"):
        loaded = load(raw)
    assert len(loaded.runs) == 3 and set(loaded.ops["run_id"]) == set(loaded.runs["run_id"])
    assert [(Path(s.run_dir).name, "schema_version 99" in s.reason)
            for s in loaded.skipped] == [("tiny-2-1", True)]
    with pytest.raises(SchemaVersionError, match="schema_version 99"):
        load_runs(raw, skip_unknown_schema=False)


def test_run_files_without_a_manifest_are_named_and_skipped(tiny_raw: Path,
                                                           tmp_path: Path):
    raw = _copy(tiny_raw, tmp_path / "raw")
    stray = raw / "tiny" / "orphan"
    stray.mkdir()
    shutil.copy(raw / "tiny" / "tiny-1-0" / "ops.parquet", stray)
    (raw / "tiny" / ".harness").mkdir()  # the runner's lock and state: not a run
    shutil.copy(raw / "tiny" / "tiny-1-0" / "ops.parquet", raw / "tiny" / ".harness")
    with pytest.warns(SkippedRunWarning, match=r"orphan: ops.parquet but no manifest.json"):
        loaded = load(raw, experiments=["tiny"])
    assert len(loaded.runs) == 4
    assert [(Path(s.run_dir), s.checked) for s in loaded.skipped] == [(stray, False)]


def test_missing_dir_and_empty_dir(tmp_path: Path, empty_raw: Path):
    with pytest.raises(ResultsError, match="no such raw-results directory"):
        load(tmp_path / "absent")
    loaded = load(empty_raw)
    assert loaded.runs.empty and loaded.ops.empty
    assert "latency_ns" in loaded.ops.columns


def test_unknown_ops_column(tiny_raw: Path):
    with pytest.raises(ResultsError, match="unknown ops columns"):
        load(tiny_raw, columns=["nope"])
