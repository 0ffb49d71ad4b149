"""Every schema version this kit knows reads in the current one; newer ones are refused.

tests/data/results/v<N>/ holds run directories written by the kit of version N (see its
README); they are read here exactly as they are on disk.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.analysis.data.load import load
from harness.analysis.summary_table import summary_table
from harness.errors import ResultsError, SchemaVersionError
from harness.results import (
    KEY_FIELD,
    KNOWN_SCHEMA_VERSIONS,
    MANIFEST,
    OPS_SCHEMA,
    SCHEMA_VERSION,
    iter_run_dirs,
    read_manifest,
    read_ops,
    upgrade,
    verify_run,
)
from harness.results.migrations import known_versions

DATA = Path(__file__).resolve().parent.parent / "data" / "results"


def _version_dirs() -> dict[int, Path]:
    return {int(m.group(1)): p for p in DATA.iterdir()
            if p.is_dir() and (m := re.fullmatch(r"v(\d+)", p.name))}


def test_every_known_version_has_test_data() -> None:
    assert set(_version_dirs()) == set(KNOWN_SCHEMA_VERSIONS)
    assert SCHEMA_VERSION in KNOWN_SCHEMA_VERSIONS


@pytest.mark.parametrize("version", sorted(_version_dirs()))
def test_old_run_directories_read_in_the_current_version(version: int) -> None:
    root = _version_dirs()[version]
    runs = list(iter_run_dirs(root))
    assert runs, f"{root}: no run directories"
    for run_dir in runs:
        on_disk = json.loads((run_dir / MANIFEST).read_text())
        assert on_disk["schema_version"] == version  # the data really is of that version
        man = verify_run(run_dir)
        assert man.schema_version == SCHEMA_VERSION
        table = read_ops(run_dir)
        assert table.schema.names == man.ops_file["columns"], run_dir
        expected = OPS_SCHEMA.append(KEY_FIELD) if "key" in table.schema.names else OPS_SCHEMA
        assert table.schema.equals(expected), run_dir
        assert table.num_rows == man.ops_file["rows"] == man.counts["total"]
        measured = pq.read_table(run_dir / "ops.parquet", filters=[("warmup", "=", False)])
        assert man.counts["measured"] == measured.num_rows
    loaded = load(root)
    assert not loaded.skipped and len(loaded.runs) == len(runs)
    table = summary_table(root, ["experiment", "op"])
    assert table["ops"].sum() == sum(read_manifest(d).counts["measured"] for d in runs) \
        - int((loaded.ops["status"] == "redirect").sum())


def test_v1_runs_read_with_an_empty_telemetry_and_v2_runs_with_theirs() -> None:
    """v1 -> v2 adds `telemetry` (a v1 run measured none); a v2 run keeps what it
    measured, in the shape `harness.run.telemetry` writes."""
    v1 = [read_manifest(d) for d in iter_run_dirs(_version_dirs()[1])]
    assert v1 and all(m.telemetry == {} for m in v1)
    v2 = {read_manifest(d).experiment: read_manifest(d)
          for d in iter_run_dirs(_version_dirs()[2])}
    assert v2["redis-benchmark-csv-redis-benchmark-7.0-n10000-c50-P4"].telemetry == {}
    tele = v2["datastore_vs_memcache"].telemetry
    assert tele["window_s"] > 0
    assert {p["role"] for p in tele["processes"]} == {"client", "server"}
    assert {h["host"] for h in tele["hosts"]} == {"client", "server"}
    hits = tele["counters"]["cache"]["delta"]["get_hits"]
    assert hits == v2["datastore_vs_memcache"].counts["total"]  # warm-up included


def test_v3_names_the_ops_columns_and_keeps_keys_where_recorded() -> None:
    """v2 -> v3 names the ops file's columns (a v2 file had OPS_SCHEMA's, no keys); a v3
    run with `run.record_keys` holds a key per op, and analysis reads a null key for the
    runs without."""
    for version in (1, 2):
        for d in iter_run_dirs(_version_dirs()[version]):
            assert read_manifest(d).ops_file["columns"] == list(OPS_SCHEMA.names)
    root = _version_dirs()[3]
    keyed = next(d for d in iter_run_dirs(root) if read_manifest(d).experiment == "mix_keys")
    keys = read_ops(keyed, ["key"]).column("key").to_numpy()
    assert keys.min() >= 0 and keys.max() < 50  # key_space 50
    ops = load(root, columns=["op", "key"]).ops
    assert ops["key"].notna().sum() == read_manifest(keyed).counts["measured"]
    assert ops["key"].isna().sum() == sum(read_manifest(d).counts["measured"]
                                          for d in iter_run_dirs(root) if d != keyed)


def test_v4_labels_read_as_columns_and_older_runs_have_none() -> None:
    """v3 -> v4 adds `labels` (none for an older run); a v4 run's labels become the runs
    table's ``label_<key>`` columns and its pooling key."""
    for version in (1, 2, 3):
        for d in iter_run_dirs(_version_dirs()[version]):
            assert read_manifest(d).labels == {}
    runs = load(_version_dirs()[4], columns=["op"]).runs
    assert runs["label_commit"].tolist() == ["22d7e7c"]
    assert runs["label_version"].tolist() == ["0.4.0"]
    assert runs["labels"].tolist() == ['{"commit": "22d7e7c", "version": "0.4.0"}']
    old = load(_version_dirs()[3], columns=["op"]).runs
    assert set(old["labels"]) == {"{}"} and "label_commit" not in old


# The upgrade machinery, on a chain of toy steps (the kit's own is v1 -> v2).
def _v1_to_v2(d: dict) -> dict:
    d["loadgen"] = {**d.get("loadgen", {}), "engine": d["loadgen"].get("engine", "python")}
    d["schema_version"] = 2
    return d


def _v2_to_v3(d: dict) -> dict:
    d["extra"] = {**d.get("extra", {}), "migrated": True}
    d["schema_version"] = 3
    return d


STEPS = {1: _v1_to_v2, 2: _v2_to_v3}


def test_upgrade_applies_each_step_in_order_and_leaves_the_input_alone() -> None:
    run_dir = next(iter_run_dirs(_version_dirs()[1]))
    data = json.loads((run_dir / MANIFEST).read_text())
    before = copy.deepcopy(data)
    out = upgrade(data, steps=STEPS, current=3)
    assert data == before
    assert out["schema_version"] == 3 and out["extra"]["migrated"] is True
    assert out["loadgen"]["engine"] == data["loadgen"].get("engine", "python")
    assert known_versions(STEPS, 3) == {1, 2, 3}
    assert known_versions({2: _v2_to_v3}, 3) == {2, 3}  # no step from 1: v1 unreadable


def test_newer_and_garbage_versions_are_refused_with_what_to_do() -> None:
    with pytest.raises(SchemaVersionError, match=r"schema_version 4 .*newer kit: upgrade"):
        upgrade({"schema_version": 4}, steps=STEPS, current=3)
    with pytest.raises(SchemaVersionError, match="damaged or not one of ours"):
        upgrade({"schema_version": "1"}, steps=STEPS, current=3)
    with pytest.raises(SchemaVersionError, match="damaged or not one of ours"):
        upgrade({}, steps=STEPS, current=3)


def test_a_step_that_forgets_the_version_is_caught() -> None:
    with pytest.raises(ResultsError, match="did not set 2"):
        upgrade({"schema_version": 1}, steps={1: lambda d: d}, current=2)
