"""Summaries computed by DuckDB over the ops.parquet files, out of core.

Why DuckDB: it reads the Parquet files in place, streams them through grouped
aggregates and computes exact percentiles with spilling, so summarising 100 M ops needs a
few GB instead of every op in pandas; `quantile_cont` interpolates linearly, as numpy's
default does, so the figures are those of `summary.summarise` on the same runs.

`summarise_sql(loaded, by)` returns the table `summary.summarise(loaded, by)` returns,
given only the runs (``loaded.ops`` is not used). `units_sql` gives the per (group, run)
counts, wall times and latency sums that the run-as-unit intervals need, and
`opsread.group_runs` the same from one read of each file, with each run's latencies
sorted, per group, for the percentiles and their intervals (`loo.RunSorted`: 8 bytes
per op, nothing pooled is sorted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded
from harness.analysis.data.opsread import group_runs
from harness.analysis.data.probe import probes_table
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

    def key_values(self, g: tuple[object, ...]) -> list[object]:
        """The values of `by`, in order, of group `g` (run-level code, ops-level values)."""
        values = {c: self.run_key_rows[c].iloc[int(g[0])] for c in self.run_keys}
        values.update(dict(zip(self.ops_keys, g[1:], strict=True)))
        return [values[c] for c in self.by]


def plan(loaded: Loaded, by: Sequence[str] | None) -> Plan:
    """Grouping as `summary.summarise` forms it (a named op/client is ops-level)."""
    from harness.analysis.data.summary import _check_by, _factorize_rows, default_by

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
    # A probe's ops (`clients.probe`) are not the load's: its figures leave them out.
    probes = probes_table(loaded.runs)
    con.register("load_probes", probes)
    not_probe = ("" if probes.empty else " AND NOT EXISTS (SELECT 1 FROM load_probes q "
                 "WHERE q.run_pos = f.run_pos AND q.client = p.client)")
    con.execute(f"""
        CREATE OR REPLACE TEMP VIEW o AS
        SELECT f.rgroup, f.run_pos{keys}, p.latency_ns AS lat,
               coalesce(p.intended_ns, p.start_ns) AS b, p.status::VARCHAR AS status
        FROM read_parquet({paths}, filename = true) p JOIN files f USING (filename)
        WHERE NOT p.warmup AND p.status::VARCHAR <> 'redirect'{not_probe}
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
    from harness.analysis.data.summary import summarise

    if not len(loaded.runs):
        return summarise(loaded, by)  # nothing to read: the empty table of the pandas path
    p = plan(loaded, by)
    con = con or connect()
    _ops_view(con, loaded, p)
    return _assemble(p, units_sql(con, p), _quantiles_sql(con, p), loaded.runs)


def summarise_with_intervals(
    loaded: Loaded, by: Sequence[str] | None = None,
    con: duckdb.DuckDBPyConnection | None = None, *, progress: bool = False,
    metrics: dict[str, float | None] | None = None,
) -> tuple[pd.DataFrame, dict[tuple[object, ...], dict[str, object]]]:
    """`summarise_sql` and `summary_ci.group_intervals` together, from one read of each
    ops file (`opsread.group_runs`): the sums per (group, run) that `units_sql` gives
    (equal, a test holds them together), and each run's sorted latencies for the
    percentiles (numpy's, to the last bit) and their run-as-unit intervals
    (`loo.RunSorted`). One read, not a DuckDB scan for the sums and a read for the
    latencies: the scan was a third of the time. `con` is not used (kept for callers).
    `progress`: runs read / total on stderr. `metrics`: the intervals to give
    (`summary_ci.METRICS` by default; ``goodput_ops_s`` among them adds goodput's, as
    throughput's over the answered ops)."""
    table, cis, _ = one_pass(loaded, by, progress=progress, metrics=metrics)
    return table, cis


def one_pass(loaded: Loaded, by: Sequence[str] | None = None, *, progress: bool = False,
             metrics: dict[str, float | None] | None = None, warmups: bool = False
             ) -> tuple[pd.DataFrame, dict[tuple[object, ...], dict[str, object]], Any]:
    """`summarise_with_intervals`, and what its read gave (None without runs): the plan,
    the per (group, run) table and the sorted latencies per group, with each run's
    warm-up if `warmups` (the checks' facts: `runfacts.from_read`)."""
    from harness.analysis.data.summary import fixed_duration_runs, summarise
    from harness.analysis.data.summary_ci import METRICS, _key
    from harness.analysis.stats import intervals

    metrics = METRICS if metrics is None else metrics

    cis: dict[tuple[object, ...], dict[str, object]] = {}
    if not len(loaded.runs):
        return summarise(loaded, by), cis, None
    p = plan(loaded, by)
    units, runs = group_runs(loaded, p, progress=progress, warmups=warmups)
    gkeys = ["rgroup", *p.ops_keys]
    by_group = {tuple(k if isinstance(k, tuple) else (k,)): g
                for k, g in units.groupby(gkeys, sort=False, dropna=False)}
    quant_rows = []
    fixed = fixed_duration_runs(loaded.runs)
    for g, u in by_group.items():
        ops = runs.get(g)
        if ops is None or ops.n == 0:
            continue
        quant_rows.append((*g, [ops.quantile(q) for q in QUANTILES], ops.max()))
        n = u["n"].to_numpy(np.float64)
        wall_s = u["wall_ns"].to_numpy() / 1e9
        fixed_duration = bool(fixed[u["run_pos"].to_numpy()].all())
        cell: dict[str, object] = {
            "throughput_ops_s": intervals.throughput_interval(n, wall_s, fixed_duration),
            "latency_mean_ms": intervals.mean_interval(
                u["lat_sum_ns"].to_numpy() / _NS_PER_MS, n),
        }
        if "goodput_ops_s" in metrics:  # the explorer's; `harness summary` keeps its four
            # Each run counting once, as throughput (`summary.run_weighted`'s goodput).
            scale = intervals.run_scale(n, wall_s, fixed_duration)
            cell["goodput_ops_s"] = intervals.ratio_interval(
                scale * (n - u["n_err"].to_numpy(np.float64)), scale * wall_s)
        in_ms = ops.with_scale(_NS_PER_MS)
        for field, q in metrics.items():
            if q is not None:
                cell[field] = in_ms.interval(q)
        cis[_key(p.key_values(g))] = cell
    quant = pd.DataFrame(quant_rows, columns=[*gkeys, "q", "mx"])
    return _assemble(p, units, quant, loaded.runs), cis, (p, units, runs)


def group_quantiles(loaded: Loaded, by: Sequence[str], qs: Sequence[float]) -> pd.DataFrame:
    """Per group of `by`: its ops and each quantile of `qs` of their latencies (ms, a
    column per q), from one read of each ops file; numpy's quantiles of the pooled ops to
    the last bit (`loo.RunSorted`), for figures of experiments too large to load."""
    p = plan(loaded, by)
    rows = []
    if len(loaded.runs):
        for g, ops in group_runs(loaded, p)[1].items():
            rows.append([*p.key_values(g), ops.n,
                         *(ops.quantile(q) / _NS_PER_MS for q in qs)])
    return pd.DataFrame(rows, columns=[*p.by, "ops", *qs])


def ops_key_values(runs: pd.DataFrame, ops_keys: Sequence[str]) -> pd.DataFrame:
    """Per run of `runs` (its row number, ``run_pos``), each distinct value of the
    ops-level keys over its measured ops (op as text, as `summarise_sql` groups them): the
    groups the run's ops would join. A run without measured ops has no row. For runs
    left out of a summary, which it counts where they would have gone."""
    columns = ["run_pos", *ops_keys]
    if runs.empty or not ops_keys:
        return pd.DataFrame(columns=columns)
    con = connect()
    files = pd.DataFrame({"filename": [str(Path(d) / OPS_FILE) for d in runs["run_dir"]],
                          "run_pos": np.arange(len(runs), dtype=np.int64)})
    con.register("files", files)
    paths = "[" + ", ".join(_quote(f) for f in files["filename"]) + "]"
    keys = ", ".join(f"p.{k}" if k == "client" else f"p.{k}::VARCHAR AS {k}"
                     for k in ops_keys)
    return con.execute(f"""
        SELECT DISTINCT f.run_pos, {keys}
        FROM read_parquet({paths}, filename = true) p JOIN files f USING (filename)
        WHERE NOT p.warmup AND p.status::VARCHAR <> 'redirect'
        ORDER BY ALL
    """).df()[columns]


def _selected_ops(con: duckdb.DuckDBPyConnection, loaded: Loaded, runs: pd.DataFrame,
                  column: str, statuses: Sequence[str], above: float | None) -> str:
    """The FROM and WHERE of a query over the measured ops of `runs` (run_id plus
    run-level columns, as ``f.<column>``) with one of `statuses` and `column` > `above`."""
    dirs = dict(zip(loaded.runs["run_id"].astype(str), loaded.runs["run_dir"], strict=True))
    files = runs.assign(filename=[str(Path(dirs[str(r)]) / OPS_FILE) for r in runs["run_id"]])
    con.register("files", files.drop(columns="run_id"))
    paths = "[" + ", ".join(_quote(f) for f in files["filename"]) + "]"
    cond = f" AND p.{column} > {float(above)!r}" if above is not None else ""
    wanted = ", ".join(_quote(x) for x in statuses)
    return f"""FROM read_parquet({paths}, filename = true) p JOIN files f USING (filename)
        WHERE NOT p.warmup AND p.status::VARCHAR IN ({wanted}){cond}"""


def binned_medians(loaded: Loaded, runs: pd.DataFrame, column: str,
                   edges: Sequence[float], *, statuses: Sequence[str] = ("ok",),
                   above: float | None = None) -> pd.DataFrame:
    """Per op, value of the run-level columns of `runs` (``run_id`` plus any others: the
    runs to read) and bin of the ops-level `column` (``np.digitize(value, edges)``: the
    number of edges at or below it), over the measured ops with one of `statuses` (and
    `column` > `above`, if given): the median latency in ms (DuckDB's ``quantile_cont``,
    numpy's interpolation) and the ops; columns op, <run columns>, bin, median_ms, count.
    For figures and tables of experiments too large to load (`Loaded.sampled`)."""
    keys = [c for c in runs.columns if c != "run_id"]
    out = ["op", *keys, "bin", "median_ms", "count"]
    if runs.empty:
        return pd.DataFrame(columns=out)
    con = connect()
    where = _selected_ops(con, loaded, runs, column, statuses, above)
    bins = " + ".join(f"(p.{column} >= {_double(e)})::INTEGER" for e in edges) or "0"
    cols = "".join(f", f.{k}" for k in keys)
    return con.execute(f"""
        SELECT p.op::VARCHAR AS op{cols}, {bins} AS bin,
               quantile_cont(p.latency_ns, 0.5) / 1e6 AS median_ms, count(*) AS count
        {where}
        GROUP BY ALL ORDER BY ALL
    """).df()[out]


def value_range(loaded: Loaded, runs: pd.DataFrame, column: str, *,
                statuses: Sequence[str] = ("ok",), above: float | None = None
                ) -> tuple[float, float]:
    """Least and greatest `column` over the ops `binned_medians` reads (NaN: none)."""
    if runs.empty:
        return float("nan"), float("nan")
    con = connect()
    where = _selected_ops(con, loaded, runs[["run_id"]], column, statuses, above)
    lo, hi = con.execute(f"SELECT min(p.{column}), max(p.{column}) {where}").fetchone()
    return (float("nan") if lo is None else float(lo)), (float("nan") if hi is None
                                                          else float(hi))


def _double(x: float) -> str:
    return "'inf'::DOUBLE" if x == float("inf") else f"{float(x)!r}::DOUBLE"


def _assemble(p: Plan, units: pd.DataFrame, quant: pd.DataFrame, runs: pd.DataFrame
              ) -> pd.DataFrame:
    """The `summarise` table from per-(group, run) sums and per-group percentiles; `runs`
    (the plan's, by position) says which ran for a fixed duration."""
    from harness.analysis.data.summary import (
        FULL_COLUMNS,
        _sorted,
        fixed_duration_runs,
        run_weighted,
    )

    gkeys = ["rgroup", *p.ops_keys]
    grouped = units.groupby(gkeys, sort=False, dropna=False)
    agg = grouped.agg(
        runs=("run_pos", "size"), ops=("n", "sum"), wall_ns=("wall_ns", "sum"),
        lat_sum=("lat_sum_ns", "sum"), n_err=("n_err", "sum"), n_miss=("n_miss", "sum"),
    ).reset_index()
    # Throughput, goodput and mean with each run counting once, as `summarise` has them.
    code = grouped.ngroup().to_numpy()
    tput, good, mean = run_weighted(
        code, len(agg), units["n"].to_numpy(np.float64),
        units["wall_ns"].to_numpy(np.float64) / 1e9, units["lat_sum_ns"].to_numpy(np.float64),
        units["n_err"].to_numpy(np.float64),
        fixed_duration_runs(runs)[units["run_pos"].to_numpy(np.int64)])
    agg["tput"], agg["good"], agg["mean_ns"] = tput, good, mean
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
            "throughput_ops_s": table["tput"].to_numpy(np.float64),
            "goodput_ops_s": table["good"].to_numpy(np.float64),
            "latency_mean_ms": table["mean_ns"].to_numpy(np.float64) / _NS_PER_MS,
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
