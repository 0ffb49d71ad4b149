"""Stated percentiles for runs whose records carry no latency distribution.

An imported run with aggregated records (the source gave only a count and a mean, e.g.
redis-benchmark's CSV or memtier without its histogram) has every op at the mean, so
percentiles of its records would be the mean under a percentile's name. Such runs keep
the tool's own figures in their manifest, ``extra.stated_latency_ms``::

    {"get": {"p50": 0.175, "p99": 3.36, "p99.9": 10.8, "max": 16.2}, "_all": {...}}

(per op, ``_all`` for the run as a whole). `overlay` puts them into a summary table
where a row is exactly one such run (and one op of it, when grouped by op); where a row
pools such a run with others, no percentile is derivable and it shows NaN.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded
from harness.analysis.data.summary import default_by, summarise

#: summary column -> key in ``stated_latency_ms``.
PERCENTILE_COLUMNS: dict[str, str] = {
    "latency_p50_ms": "p50",
    "latency_p90_ms": "p90",
    "latency_p99_ms": "p99",
    "latency_p999_ms": "p99.9",
    "latency_max_ms": "max",
}


def _aggregated_runs(runs: pd.DataFrame) -> dict[str, dict]:
    """run_id -> stated_latency_ms of every imported run whose records are aggregated."""
    out: dict[str, dict] = {}
    if "source" not in runs.columns or "run_dir" not in runs.columns:
        return out
    for run_id, run_dir in runs.loc[runs["source"] == "imported", ["run_id", "run_dir"]].to_numpy():
        try:
            extra = json.loads((Path(run_dir) / "manifest.json").read_text()).get("extra", {})
        except (OSError, ValueError, TypeError):
            continue
        if extra.get("aggregated"):
            out[str(run_id)] = extra.get("stated_latency_ms") or {}
    return out


def overlay(table: pd.DataFrame, loaded: Loaded, by: Sequence[str] | None) -> pd.DataFrame:
    """`table` (from `summarise(loaded, by)`) with percentile columns of rows made of
    aggregated runs replaced by the stated figures, or NaN where none apply."""
    stated = _aggregated_runs(loaded.runs)
    if not stated:
        return table
    keys = list(by) if by is not None else default_by(loaded)
    runs = loaded.runs[loaded.runs["run_id"].astype(str).isin(stated)]
    ops = loaded.ops[loaded.ops["run_id"].astype(str).isin(stated)]
    # The same grouping plus run_id: which aggregated runs (and how many ops) each row has.
    sub = Loaded(runs, ops, (*loaded.grid_keys, "run_id"))
    with_run = [*keys, *([] if "run_id" in keys else ["run_id"])]
    per = summarise(sub, None if by is None else with_run)
    per = per[per["ops"] > 0]
    if per.empty:
        return table
    by_op = by is not None and "op" in keys
    agg = per.groupby(keys, dropna=False, sort=False).agg(
        _agg_runs=("run_id", "nunique"), _agg_ops=("ops", "sum"),
        _run=("run_id", "first")).reset_index()
    if by_op:
        agg["_op"] = agg["op"].astype(str)
    # A key column can be text in the whole table and all-NaN (float) among the
    # imported runs alone (a file-store run's `memcache` beside imports without it):
    # merge on one type, or pandas refuses.
    for k in keys:
        if table[k].dtype != agg[k].dtype:
            table, agg = table.astype({k: object}), agg.astype({k: object})
    out = table.merge(agg, on=keys, how="left")
    hit = out["_agg_ops"].fillna(0).to_numpy() > 0
    alone = hit & (out["_agg_runs"].to_numpy() == 1) & (
        out["_agg_ops"].fillna(0).to_numpy() == out["ops"].to_numpy())
    for col, key in PERCENTILE_COLUMNS.items():
        if col not in out.columns:
            continue
        values = out[col].to_numpy(dtype=np.float64, copy=True)
        values[hit] = np.nan  # percentiles of records that all sit at their mean
        for i in np.flatnonzero(alone):
            figures = stated[str(out["_run"].iat[i])]
            block = figures.get(str(out["_op"].iat[i])) if by_op else figures.get("_all")
            value = (block or {}).get(key)
            values[i] = float(value) if isinstance(value, int | float) else np.nan
        out[col] = values
    return out[table.columns]
