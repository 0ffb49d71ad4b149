"""Raw-results format: Parquet round trip, atomic run directories, versions, checksums."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ResultsError, SchemaVersionError
from harness.results import (
    ERROR,
    MISS,
    OK,
    TMP_PREFIX,
    Manifest,
    OpsArrays,
    OpsParts,
    iter_run_dirs,
    new_manifest,
    read_manifest,
    read_ops,
    verify_run,
    write_run,
)

OPS = ("get", "set")


def arrays(n: int = 6, client: int = 0) -> OpsArrays:
    rng = np.random.default_rng(client)
    return OpsArrays(
        op_names=OPS,
        client=np.full(n, client, np.int32),
        op=np.arange(n, dtype=np.int8) % 2,
        start_ns=np.arange(n, dtype=np.int64) * 1000 + client,
        latency_ns=rng.integers(10_000, 90_000, n).astype(np.int64),
        intended_ns=np.where(np.arange(n) % 3 == 0, -1, 500).astype(np.int64),
        status=np.array([OK, MISS, ERROR, OK, OK, OK][:n], np.int8),
        nbytes=np.full(n, 100, np.int64),
        warmup=np.arange(n) < 2,
    )


def manifest(run_id: str = "r1", **kw: object) -> Manifest:
    base = dict(run_id=run_id, experiment="exp", workload="w", config_id="c", repetition=1,
                params={"op": "get"}, grid_point={"op": "get"}, status="complete",
                started_utc="2026-01-01T00:00:00Z", ended_utc="2026-01-01T00:00:01Z")
    base.update(kw)
    return new_manifest(**base)  # type: ignore[arg-type]


def test_parquet_round_trip_keeps_every_field(tmp_path: Path) -> None:
    ops = arrays()
    run_dir = write_run(tmp_path, manifest(), ops)
    table = read_ops(run_dir)
    assert table.num_rows == 6
    df = table.to_pandas()
    assert list(df.columns) == ["client", "op", "start_ns", "latency_ns", "intended_ns",
                                "status", "bytes", "warmup"]
    assert list(df["op"].astype(str)) == ["get", "set", "get", "set", "get", "set"]
    assert list(df["status"].astype(str)) == ["ok", "miss", "error", "ok", "ok", "ok"]
    assert df["latency_ns"].tolist() == ops.latency_ns.tolist()
    assert df["intended_ns"].isna().tolist() == [True, False, False, True, False, False]
    assert df["warmup"].tolist() == [True, True, False, False, False, False]
    man = read_manifest(run_dir)
    assert man.counts["measured"] == 4 and man.counts["warmup"] == 2
    assert man.counts["error"] == 1 and man.counts["ok"] == 3
    assert man.ops_file["rows"] == 6


def _heavy_tailed(n: int, client: int, t0: int) -> OpsArrays:
    """Ops as a loaded server gives them: rising starts, lognormal latencies with
    spikes to seconds, open-loop intents, a null intent now and then."""
    rng = np.random.default_rng(client)
    lat = rng.lognormal(np.log(80_000), 0.6, n).astype(np.int64)
    lat[rng.random(n) < 0.001] = 3_000_000_000
    start = t0 + np.cumsum(rng.integers(0, 20_000, n))
    intended = np.where(rng.random(n) < 0.01, -1, start - rng.integers(0, 5_000, n))
    return OpsArrays(OPS, np.full(n, client, np.int32), rng.integers(0, 2, n).astype(np.int8),
                     start, lat, intended, np.full(n, OK, np.int8), np.full(n, 100, np.int64),
                     np.arange(n) < 100)


@pytest.mark.parametrize("in_parts", [False, True])
def test_time_columns_are_delta_packed_and_read_back_by_duckdb(
        tmp_path: Path, in_parts: bool) -> None:
    """start_ns, latency_ns and intended_ns are written DELTA_BINARY_PACKED, uncompressed,
    whole or in parts; DuckDB's reader (not pyarrow's) gives back every value and null,
    and the packed starts take less room than zstd's pages of the same values."""
    import duckdb
    import pyarrow.parquet as pq

    parts = [_heavy_tailed(40_000, c, 0) for c in range(2)]
    joined = OpsArrays.concat(parts, OPS)
    if in_parts:
        paths = []
        for k, part in enumerate(parts):
            paths.append(tmp_path / f"p{k}.npz")
            part.save_npz(paths[-1])
        ops: OpsArrays | OpsParts = OpsParts(OPS, paths)
    else:
        ops = joined
    run_dir = write_run(tmp_path / "raw", manifest(), ops)
    path = run_dir / "ops.parquet"
    meta = pq.ParquetFile(path).metadata
    for g in range(meta.num_row_groups):
        chunks = {meta.row_group(g).column(i).path_in_schema: meta.row_group(g).column(i)
                  for i in range(meta.num_columns)}
        for name in ("start_ns", "latency_ns", "intended_ns"):
            assert "DELTA_BINARY_PACKED" in chunks[name].encodings, name
            assert chunks[name].compression == "UNCOMPRESSED", name
        assert chunks["client"].compression == "ZSTD"
    got = duckdb.sql(f"SELECT start_ns, latency_ns, intended_ns FROM '{path}'"
                     " ORDER BY start_ns, latency_ns").fetchnumpy()
    order = np.lexsort((joined.latency_ns, joined.start_ns))
    assert np.array_equal(got["start_ns"], joined.start_ns[order])
    assert np.array_equal(got["latency_ns"], joined.latency_ns[order])
    intended = joined.intended_ns[order]
    assert np.array_equal(np.ma.getmaskarray(got["intended_ns"]), intended < 0)
    assert np.array_equal(got["intended_ns"].compressed(), intended[intended >= 0])
    zstd = tmp_path / "zstd.parquet"
    pq.write_table(pq.read_table(path, columns=["start_ns"]), zstd, compression="zstd")
    packed = sum(meta.row_group(g).column(2).total_compressed_size
                 for g in range(meta.num_row_groups))
    assert packed < pq.ParquetFile(zstd).metadata.row_group(0).column(0).total_compressed_size


def test_concat_orders_by_start_and_checks_op_names() -> None:
    merged = OpsArrays.concat([arrays(4, client=1), arrays(4, client=0)], OPS)
    assert len(merged) == 8
    assert np.all(np.diff(merged.start_ns) >= 0)
    with pytest.raises(ResultsError):
        OpsArrays.concat([arrays()], ("x",))
    assert len(OpsArrays.empty(OPS)) == 0


def test_npz_hand_over_round_trip(tmp_path: Path) -> None:
    ops = arrays()
    ops.save_npz(tmp_path / "c.npz")
    back = OpsArrays.load_npz(tmp_path / "c.npz")
    assert back.op_names == OPS
    for f in ("client", "op", "start_ns", "latency_ns", "intended_ns", "status", "nbytes",
              "warmup"):
        assert np.array_equal(getattr(back, f), getattr(ops, f)), f


def test_run_directory_appears_whole_and_is_never_overwritten(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, manifest(), arrays())
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json", "ops.parquet"]
    assert not list((tmp_path / "exp").glob(f"{TMP_PREFIX}*"))
    with pytest.raises(ResultsError, match="never overwritten"):
        write_run(tmp_path, manifest(), arrays())


def test_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    with pytest.raises(AttributeError):
        write_run(tmp_path, manifest("r2"), "not a table")  # type: ignore[arg-type]
    assert list((tmp_path / "exp").iterdir()) == []


def test_unknown_schema_version_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, manifest(), arrays())
    data = json.loads((run_dir / "manifest.json").read_text())
    data["schema_version"] = 99
    (run_dir / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(SchemaVersionError, match=r"schema_version 99 is not one this kit reads"):
        read_manifest(run_dir)


def test_corrupt_manifest_names_the_file(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, manifest(), arrays())
    (run_dir / "manifest.json").write_text("{ not json")
    with pytest.raises(ResultsError, match=r"manifest.json: not valid JSON \(line 1"):
        read_manifest(run_dir)


def test_checksum_catches_a_truncated_ops_file(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, manifest(), arrays())
    verify_run(run_dir)
    data = (run_dir / "ops.parquet").read_bytes()
    (run_dir / "ops.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(ResultsError, match="checksum mismatch"):
        verify_run(run_dir)
    with pytest.raises(ResultsError, match="cannot read ops"):
        read_ops(run_dir)


def test_iter_run_dirs_skips_unfinished_temp_directories(tmp_path: Path) -> None:
    write_run(tmp_path, manifest("a"), arrays())
    write_run(tmp_path, manifest("b", experiment="exp2"), arrays())
    stale = tmp_path / "exp" / f"{TMP_PREFIX}c"
    stale.mkdir()
    (stale / "manifest.json").write_text("{}")
    assert [p.name for p in iter_run_dirs(tmp_path)] == ["a", "b"]
    assert [p.name for p in iter_run_dirs(tmp_path / "exp2")] == ["b"]
    with pytest.raises(ResultsError, match="no such raw-results directory"):
        list(iter_run_dirs(tmp_path / "missing"))


def test_manifest_rejects_bad_status() -> None:
    with pytest.raises(ResultsError, match="run status"):
        manifest(status="done")
