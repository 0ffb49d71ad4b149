"""DuckDB summaries equal the pandas path on the same trees, and a plain DuckDB query."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from harness.analysis.data.load import load, load_runs_only
from harness.analysis.data.queries import summarise_sql
from harness.analysis.data.summary import summarise
from harness.analysis.data.summary_ci import group_intervals, with_ci_columns
from harness.analysis.summary_table import LEFT_OUT_COLUMNS, summary_table
from harness.results import verified
from tests.fixtures.frames import assert_same_table
from tests.fixtures.rawdata import write_datastore_memcache, write_tiny

COLUMNS = ["op", "client", "start_ns", "latency_ns", "intended_ns", "status", "warmup"]
BYS = [None, ["op"], ["experiment", "op"], ["run_id"], ["run_id", "op"], ["client"],
       ["size"], ["status"], [], ["workload", "client", "op"]]
KV_DATA = Path(__file__).resolve().parents[2] / "data" / "results" / "v1"


@pytest.fixture(scope="module")
def mixed_raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two studies in one tree, plus the v1 test data (an open-loop-free KV run and
    imported aggregated runs)."""
    raw = tmp_path_factory.mktemp("mixed")
    write_datastore_memcache(raw)
    write_tiny(raw)
    for exp in KV_DATA.iterdir():
        shutil.copytree(exp, raw / exp.name)
    return raw


@pytest.mark.parametrize("by", BYS, ids=str)
def test_sql_summary_equals_the_pandas_path(mixed_raw: Path, by: list[str] | None) -> None:
    loaded = load(mixed_raw, columns=COLUMNS)
    runs_only = load_runs_only(mixed_raw)
    assert runs_only.ops.empty  # the SQL path reads the files itself
    assert_same_table(summarise(loaded, by), summarise_sql(runs_only, by))


@pytest.mark.parametrize("by", [None, ["op"], ["experiment", "op"], ["client"]], ids=str)
def test_summary_table_equals_the_pandas_path_with_intervals(mixed_raw: Path, by) -> None:
    """summary_table (DuckDB) against what it computed before: pandas summarise + stated
    overlay + summary_ci intervals, all over every op loaded into memory."""
    from harness.analysis.data import stated
    from harness.analysis.data.summary import SUMMARY_COLUMNS, default_by

    loaded = load(mixed_raw, columns=COLUMNS)
    ref = stated.overlay(summarise(loaded, by), loaded, by)
    group_by = list(by) if by is not None else default_by(loaded)
    ref = with_ci_columns(ref[[*group_by, *SUMMARY_COLUMNS]], group_intervals(loaded, by),
                          group_by)
    got = summary_table(mixed_raw, by, intervals=True)
    assert (got[list(LEFT_OUT_COLUMNS)] == 0).all().all()  # every run complete, once
    got = got.drop(columns=list(LEFT_OUT_COLUMNS))
    # The overlay's rows (aggregated imported runs) have no percentile interval.
    restated = got["latency_p50_ms"].to_numpy() != summarise(loaded, by)[
        "latency_p50_ms"].to_numpy()
    for field in ("latency_p50_ms", "latency_p99_ms"):
        ref.loc[restated, [f"{field}_ci_low", f"{field}_ci_high"]] = np.nan
    assert_same_table(ref, got)


def test_summary_by_op_equals_a_plain_duckdb_query(dsmc_raw: Path) -> None:
    """Against SQL written from the documented format only (README), not our code."""
    plain = duckdb.sql(f"""
        SELECT regexp_extract(filename, '([^/]+)/[^/]+/ops.parquet$', 1) AS experiment,
               op::VARCHAR AS op, count(*) AS ops,
               quantile_cont(latency_ns, 0.5) / 1e6 AS p50_ms,
               quantile_cont(latency_ns, 0.99) / 1e6 AS p99_ms,
               avg(latency_ns) / 1e6 AS mean_ms,
               avg(CASE WHEN status::VARCHAR IN ('error', 'timeout') THEN 1 ELSE 0 END)
                   AS error_rate
        FROM read_parquet('{dsmc_raw}/*/*/ops.parquet', filename = true)
        WHERE NOT warmup AND status::VARCHAR <> 'redirect'
        GROUP BY ALL ORDER BY op
    """).df()
    ours = summary_table(dsmc_raw, ["experiment", "op"])
    assert list(ours["op"]) == list(plain["op"])
    assert list(ours["ops"]) == list(plain["ops"])
    assert list(ours["experiment"]) == list(plain["experiment"])
    for mine, theirs in [("latency_p50_ms", "p50_ms"), ("latency_p99_ms", "p99_ms"),
                         ("latency_mean_ms", "mean_ms"), ("error_rate", "error_rate")]:
        np.testing.assert_allclose(ours[mine], plain[theirs], rtol=1e-12, err_msg=mine)


def test_verification_is_remembered_until_a_file_changes(tiny_raw: Path, tmp_path: Path,
                                                         monkeypatch) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(tiny_raw, raw)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    hashed: list[str] = []
    real = verified.verify_run
    monkeypatch.setattr(verified, "verify_run",
                        lambda d, m=None: (hashed.append(Path(d).name), real(d, m))[1])
    load_runs_only(raw)
    assert len(hashed) == 4
    assert json.loads(verified.cache_path().read_text())["version"] == verified.CACHE_VERSION
    hashed.clear()
    load_runs_only(raw)
    assert hashed == []  # the second read does not hash again
    ops = raw / "tiny" / "tiny-2-1" / "ops.parquet"
    data = ops.read_bytes()
    ops.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, new mtime
    os.utime(ops, ns=(ops.stat().st_atime_ns, ops.stat().st_mtime_ns + 10**9))
    with pytest.warns(UserWarning, match="tiny-2-1.*checksum mismatch"):
        loaded = load_runs_only(raw)
    assert hashed == ["tiny-2-1"] and len(loaded.runs) == 3


@pytest.mark.parametrize("by", BYS, ids=str)
def test_sorted_pass_is_the_pandas_path_to_the_last_bit(mixed_raw: Path, by) -> None:
    """The pass that also gives the intervals takes its percentiles from the sorted ops
    with numpy's interpolation: equal to the pandas path bit for bit, intervals too."""
    from harness.analysis.data.queries import summarise_with_intervals

    loaded = load(mixed_raw, columns=COLUMNS)
    table, cis = summarise_with_intervals(load_runs_only(mixed_raw), by)
    ref = summarise(loaded, by)
    lat_cols = [c for c in ref.columns if c.startswith("latency_p") or c == "latency_max_ms"]
    pd.testing.assert_frame_equal(ref[lat_cols], table[lat_cols], check_exact=True)
    assert_same_table(ref, table)
    assert cis.keys() == group_intervals(loaded, by).keys()
    for key, cell in group_intervals(loaded, by).items():
        for field in ("latency_p50_ms", "latency_p99_ms"):
            assert repr(cell[field]) == repr(cis[key][field]), (key, field)


@pytest.mark.parametrize("split", ["C", "numpy"])
@pytest.mark.parametrize("by", BYS, ids=str)
def test_one_read_gives_the_sums_of_the_duckdb_scan(mixed_raw: Path, by, split: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The intervals' pass computes the per (group, run) sums itself, in the same read as
    the latencies, by the C split or numpy's: equal to `units_sql`'s, value for value."""
    from harness.analysis.data import opsread, queries
    from tests.analysis.data.test_opsread import _split_built

    if split == "C":
        _split_built()
    else:
        monkeypatch.setattr(opsread, "_opsplit", None)

    loaded = load_runs_only(mixed_raw)
    p = queries.plan(loaded, by)
    con = queries.connect()
    queries._ops_view(con, loaded, p)
    sql = queries.units_sql(con, p)
    keys = ["rgroup", *p.ops_keys, "run_pos"]
    sql = sql.sort_values(keys, ignore_index=True)
    mine, runs = queries.group_runs(loaded, p, threads=2)
    assert len(mine) == len(sql) > 0
    assert sql["n_err"].sum() > 0 and sql["n_miss"].sum() > 0  # the data have both
    for col in sql.columns:
        assert mine[col].tolist() == sql[col].tolist(), col
    assert sum(r.n for r in runs.values()) == int(sql["n"].sum())
