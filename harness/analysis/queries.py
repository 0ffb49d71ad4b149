"""Summaries computed by DuckDB over the ops.parquet files, out of core.

Why DuckDB: it reads the Parquet files in place, streams them through grouped
aggregates and computes exact percentiles with spilling, so summarising 100 M ops needs a
few GB instead of every op in pandas; `quantile_cont` interpolates linearly, as numpy's
default does, so the figures are those of `summary.summarise` on the same runs.

`summarise_sql(loaded, by)` returns the table `summary.summarise(loaded, by)` returns,
given only the runs (``loaded.ops`` is not used). `units_sql` gives the per (group, run)
counts, wall times and latency sums that the run-as-unit intervals need, and
`group_runs` each run's latencies, sorted, per group, for the percentiles and their
intervals (`loo.RunSorted`: 8 bytes per op, nothing pooled is sorted).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

if TYPE_CHECKING:
    from harness.analysis.loo import RunSorted

from harness.analysis.load import Loaded
from harness.results import ERROR_STATUSES, OPS_FILE

#: Columns of ops.parquet that may group ops inside a run (as in `summary.OPS_LEVEL`).
OPS_LEVEL: tuple[str, ...] = ("op", "client")
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999)
_NS_PER_MS = 1e6


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection set up for large scans (no ordering to keep)."""
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    return con


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Plan:
    """How the ops of `loaded.runs` are grouped: run-level codes and ops-level columns."""

    by: list[str]
    ops_keys: list[str]
    run_keys: list[str]
    run_codes: np.ndarray  # group code of each run (row of loaded.runs)
    run_key_rows: pd.DataFrame  # the run-level key values of each code


def plan(loaded: Loaded, by: Sequence[str] | None) -> Plan:
    """Grouping as `summary.summarise` forms it (a named op/client is ops-level)."""
    from harness.analysis.summary import _check_by, _factorize_rows, default_by

    if by is None:
        by_l, ops_keys = default_by(loaded), []
    else:
        by_l = list(by)
        ops_keys = [c for c in by_l if c in OPS_LEVEL]
    _check_by(by_l, loaded.runs)
    run_keys = [c for c in by_l if c not in ops_keys]
    codes, rows = _factorize_rows(loaded.runs[run_keys].reset_index(drop=True))
    return Plan(by_l, ops_keys, run_keys, codes, rows)


def _ops_view(con: duckdb.DuckDBPyConnection, loaded: Loaded, p: Plan) -> None:
    """View ``o``: every measured op (no warm-up, no redirect) with its run and group."""
    files = pd.DataFrame({
        "filename": [str(Path(d) / OPS_FILE) for d in loaded.runs["run_dir"]],
        "run_pos": np.arange(len(loaded.runs), dtype=np.int64),
        "rgroup": p.run_codes.astype(np.int64),
    })
    con.register("files", files)
    paths = "[" + ", ".join(_quote(f) for f in files["filename"]) + "]"
    keys = "".join(f", p.{k}" if k == "client" else f", p.{k}::VARCHAR AS {k}"
                   for k in p.ops_keys)
    con.execute(f"""
        CREATE OR REPLACE TEMP VIEW o AS
        SELECT f.rgroup, f.run_pos{keys}, p.latency_ns AS lat,
               coalesce(p.intended_ns, p.start_ns) AS b, p.status::VARCHAR AS status
        FROM read_parquet({paths}, filename = true) p JOIN files f USING (filename)
        WHERE NOT p.warmup AND p.status::VARCHAR <> 'redirect'
    """)


def units_sql(con: duckdb.DuckDBPyConnection, p: Plan) -> pd.DataFrame:
    """Per (group, run): ops, wall time (ns), latency sum (ns), errors and misses."""
    keys = "".join(f", {k}" for k in p.ops_keys)
    errors = ", ".join(_quote(s) for s in ERROR_STATUSES)
    return con.execute(f"""
        SELECT rgroup{keys}, run_pos, count(*) AS n,
               (max(b + lat) - min(b))::DOUBLE AS wall_ns, sum(lat)::DOUBLE AS lat_sum_ns,
               count(*) FILTER (WHERE status IN ({errors})) AS n_err,
               count(*) FILTER (WHERE status = 'miss') AS n_miss
        FROM o GROUP BY ALL ORDER BY ALL
    """).df()  # ordered: the interval sums then add up the same way every time


def _quantiles_sql(con: duckdb.DuckDBPyConnection, p: Plan) -> pd.DataFrame:
    keys = "".join(f", {k}" for k in p.ops_keys)
    qs = ", ".join(repr(q) for q in QUANTILES)
    return con.execute(f"""
        SELECT rgroup{keys}, quantile_cont(lat, [{qs}]) AS q, max(lat)::DOUBLE AS mx
        FROM o GROUP BY ALL
    """).df()


def summarise_sql(loaded: Loaded, by: Sequence[str] | None = None,
                  con: duckdb.DuckDBPyConnection | None = None) -> pd.DataFrame:
    """`summary.summarise(loaded, by)`, computed over the runs' Parquet files (percentiles
    by DuckDB's `quantile_cont`: equal to numpy's to the last bit or so)."""
    from harness.analysis.summary import summarise

    if not len(loaded.runs):
        return summarise(loaded, by)  # nothing to read: the empty table of the pandas path
    p = plan(loaded, by)
    con = con or connect()
    _ops_view(con, loaded, p)
    return _assemble(p, units_sql(con, p), _quantiles_sql(con, p))


def summarise_with_intervals(
    loaded: Loaded, by: Sequence[str] | None = None,
    con: duckdb.DuckDBPyConnection | None = None, *, progress: bool = False,
) -> tuple[pd.DataFrame, dict[tuple[object, ...], dict[str, object]]]:
    """`summarise_sql` and `summary_ci.group_intervals` together: the sums per (group,
    run) by DuckDB, the percentiles (numpy's, to the last bit) and their run-as-unit
    intervals from each run's sorted latencies (`group_runs`, `loo.RunSorted`).
    `progress`: runs read / total on stderr."""
    from harness.analysis import intervals
    from harness.analysis.summary import summarise
    from harness.analysis.summary_ci import METRICS, _key

    cis: dict[tuple[object, ...], dict[str, object]] = {}
    if not len(loaded.runs):
        return summarise(loaded, by), cis
    p = plan(loaded, by)
    con = con or connect()
    _ops_view(con, loaded, p)
    units = units_sql(con, p)
    gkeys = ["rgroup", *p.ops_keys]
    by_group = {tuple(k if isinstance(k, tuple) else (k,)): g
                for k, g in units.groupby(gkeys, sort=False, dropna=False)}
    runs = group_runs(loaded, p, progress=progress)
    quant_rows = []
    for g, u in by_group.items():
        ops = runs.get(g)
        if ops is None or ops.n == 0:
            continue
        quant_rows.append((*g, [ops.quantile(q) for q in QUANTILES], ops.max()))
        n = u["n"].to_numpy(np.float64)
        cell: dict[str, object] = {
            "throughput_ops_s": intervals.ratio_interval(n, u["wall_ns"].to_numpy() / 1e9),
            "latency_mean_ms": intervals.ratio_interval(
                u["lat_sum_ns"].to_numpy() / _NS_PER_MS, n),
        }
        in_ms = ops.with_scale(_NS_PER_MS)
        for field, q in METRICS.items():
            if q is not None:
                cell[field] = in_ms.interval(q)
        values = {c: p.run_key_rows[c].iloc[int(g[0])] for c in p.run_keys}
        values.update(dict(zip(p.ops_keys, g[1:], strict=True)))
        cis[_key([values[c] for c in p.by])] = cell
    quant = pd.DataFrame(quant_rows, columns=[*gkeys, "q", "mx"])
    return _assemble(p, units, quant), cis


def _assemble(p: Plan, units: pd.DataFrame, quant: pd.DataFrame) -> pd.DataFrame:
    """The `summarise` table from per-(group, run) sums and per-group percentiles."""
    from harness.analysis.summary import FULL_COLUMNS, _sorted

    gkeys = ["rgroup", *p.ops_keys]
    agg = units.groupby(gkeys, sort=False, dropna=False).agg(
        runs=("run_pos", "size"), ops=("n", "sum"), wall_ns=("wall_ns", "sum"),
        lat_sum=("lat_sum_ns", "sum"), n_err=("n_err", "sum"), n_miss=("n_miss", "sum"),
    ).reset_index()
    table = agg.merge(quant, on=gkeys, how="left")
    if not p.ops_keys:
        # Every run-level group, also those whose runs have no measured ops.
        full = pd.DataFrame({"rgroup": np.arange(len(p.run_key_rows), dtype=np.int64)})
        table = full.merge(table.astype({"rgroup": np.int64}), on="rgroup", how="left")
        table["runs"] = np.bincount(p.run_codes, minlength=len(full)).astype(np.int64)
        table["ops"] = table["ops"].fillna(0).astype(np.int64)
    n = table["ops"].to_numpy(np.float64)
    wall_s = table["wall_ns"].to_numpy(np.float64) / 1e9
    q = np.array([list(v) if isinstance(v, list | np.ndarray) else [np.nan] * len(QUANTILES)
                  for v in table["q"]], dtype=np.float64).reshape(len(table), len(QUANTILES))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = pd.DataFrame({
            "runs": table["runs"].to_numpy(np.int64),
            "ops": table["ops"].to_numpy(np.int64),
            "wall_s": wall_s,
            "throughput_ops_s": np.where(wall_s > 0, n / wall_s, np.nan),
            "goodput_ops_s": np.where(wall_s > 0, (n - table["n_err"].to_numpy(np.float64))
                                      / wall_s, np.nan),
            "latency_mean_ms": table["lat_sum"].to_numpy(np.float64) / n / _NS_PER_MS,
            "latency_p50_ms": q[:, 0] / _NS_PER_MS,
            "latency_p90_ms": q[:, 1] / _NS_PER_MS,
            "latency_p99_ms": q[:, 2] / _NS_PER_MS,
            "latency_p999_ms": q[:, 3] / _NS_PER_MS,
            "latency_max_ms": table["mx"].to_numpy(np.float64) / _NS_PER_MS,
            "error_rate": table["n_err"].to_numpy(np.float64) / n,
            "miss_rate": table["n_miss"].to_numpy(np.float64) / n,
        })
    rgroup = table["rgroup"].to_numpy(np.int64)
    keys = pd.DataFrame({c: p.run_key_rows[c].to_numpy()[rgroup] for c in p.run_keys})
    for c in p.ops_keys:
        keys[c] = table[c].to_numpy(dtype=object)
    result = pd.concat([keys.reset_index(drop=True), out], axis=1)
    return _sorted(result[[*p.by, *FULL_COLUMNS]], p.by)


def _key_codes(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, list[object] | None]:
    """A column as integer codes and, for a dictionary column, the value of each code."""
    col = batch.column(name)
    if pa.types.is_dictionary(col.type):
        return col.indices.to_numpy(zero_copy_only=False).astype(np.int64), \
            col.dictionary.to_pylist()
    return col.to_numpy(zero_copy_only=False).astype(np.int64), None


def run_latencies(path: str, ops_keys: Sequence[str]) -> dict[tuple[object, ...], np.ndarray]:
    """One ops file's measured latencies (no warm-up, no redirect), sorted, per value of
    the ops-level keys (op as its name, as DuckDB's VARCHAR gives it; client as int)."""
    parts: dict[tuple[object, ...], list[np.ndarray]] = {}
    columns = ["latency_ns", "warmup", "status", *ops_keys]
    for batch in pq.ParquetFile(path).iter_batches(columns=columns, batch_size=1 << 20):
        lat = batch.column("latency_ns").to_numpy(zero_copy_only=False)
        keep = ~batch.column("warmup").to_numpy(zero_copy_only=False)
        status, names = _key_codes(batch, "status")
        if names is None:  # not dictionary-encoded: compare the strings
            keep &= np.asarray(batch.column("status").to_pylist(), object) != "redirect"
        elif "redirect" in names:
            keep &= status != names.index("redirect")
        if not ops_keys:
            parts.setdefault((), []).append(lat[keep])
            continue
        codes = [_key_codes(batch, k) for k in ops_keys]
        combined = np.zeros(lat.size, np.int64)
        for c, _ in codes:  # mixed radix over the keys' codes
            combined = combined * (int(c.max(initial=0)) - int(c.min(initial=0)) + 1) \
                + (c - int(c.min(initial=0)))
        for code in np.unique(combined[keep]):
            first = int(np.flatnonzero((combined == code) & keep)[0])
            key = tuple(vals[int(c[first])] if vals is not None else int(c[first])
                        for c, vals in codes)
            parts.setdefault(key, []).append(lat[keep & (combined == code)])
    return {k: np.sort(np.concatenate(v)) for k, v in parts.items()}


def group_runs(loaded: Loaded, p: Plan, *, progress: bool = False,
               threads: int | None = None) -> dict[tuple[object, ...], RunSorted]:
    """Per group (rgroup, then the ops-level values): each run's sorted latencies, from
    one read of each ops file. Files are read and sorted in threads (pyarrow and numpy
    let go of the GIL); only the sorted latencies are kept, 8 bytes per op."""
    from harness.analysis.loo import RunSorted

    paths = [str(Path(d) / OPS_FILE) for d in loaded.runs["run_dir"]]
    found: dict[tuple[object, ...], tuple[list[np.ndarray], list[int]]] = {}
    bar = tqdm(total=len(paths), unit="run", desc="latencies", file=sys.stderr,
               disable=not progress, leave=False)
    workers = threads or min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        for pos, per_key in enumerate(pool.map(lambda f: run_latencies(f, p.ops_keys), paths)):
            bar.update(1)
            for key, lat in per_key.items():
                arrays, labels = found.setdefault((int(p.run_codes[pos]), *key), ([], []))
                arrays.append(lat)
                labels.append(pos)
    bar.close()
    return {g: RunSorted(arrays, np.asarray(labels)) for g, (arrays, labels) in found.items()}
