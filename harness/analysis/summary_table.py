"""`harness summary`'s table: DuckDB over the Parquet files for the figures
(`harness.analysis.queries`), the tools' stated percentiles for aggregated imports
(`harness.analysis.stated`), and the intervals (`harness.analysis.summary_ci`).

It sits above `summary` (the in-memory computation the others build on), so that no
module of the summary imports one that imports it back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis import queries, stated
from harness.analysis.load import Loaded, load_ops, load_runs_only
from harness.analysis.summary import OPS_LEVEL, SUMMARY_COLUMNS, default_by
from harness.analysis.summary_ci import with_ci_columns
from harness.errors import ResultsError


def check_left(loaded: Loaded, raw_dir: Path) -> None:
    """Raise when every run was skipped: an empty table would look like "no runs yet"."""
    if loaded.runs.empty and loaded.skipped:
        raise ResultsError(
            f"{raw_dir}: nothing left to summarise: all {len(loaded.skipped)} run(s) were "
            "skipped (each named above with why); `harness verify` checks them one by one"
        )


def summary_table(
    raw_dir: Path,
    by: list[str] | None = None,
    *,
    experiments: list[str] | None = None,
    intervals: bool = False,
    progress: bool = False,
) -> pd.DataFrame:
    """One row per configuration: grouping columns, then `SUMMARY_COLUMNS` (see module doc).

    `intervals`: also ``<field>_ci_low`` / ``<field>_ci_high`` after throughput, mean, p50
    and p99: 95% CIs with the run as the unit (`harness.analysis.summary_ci`).

    Computed by DuckDB over the Parquet files (`harness.analysis.queries`): only the
    manifests and, for intervals, one group's latencies at a time are held in memory.
    `progress`: runs read / total on stderr while the manifests are read and verified,
    then groups done / total.
    """
    loaded = load_runs_only(Path(raw_dir), experiments=experiments, progress=progress)
    check_left(loaded, raw_dir)
    if intervals:
        table, cis = queries.summarise_with_intervals(loaded, by, progress=progress)
    else:
        table, cis = queries.summarise_sql(loaded, by), {}
    # Imported runs with aggregated records (every op at the mean) show the tool's
    # stated percentiles, or NaN when pooled: never the mean under a percentile's name.
    # Only those runs' ops are loaded for it (they are small: one record per op kind).
    pooled = table[["latency_p50_ms", "latency_p99_ms"]].to_numpy()
    aggregated = list(stated._aggregated_runs(loaded.runs))
    if aggregated:
        sub = loaded.runs[loaded.runs["run_id"].astype(str).isin(aggregated)]
        columns = ["start_ns", "latency_ns", "intended_ns", "status",
                   *(c for c in OPS_LEVEL if by and c in by)]
        table = stated.overlay(table, Loaded(loaded.runs, load_ops(sub, columns),
                                             loaded.grid_keys), by)
    # Rows the overlay touched hold stated figures (or NaN): an interval computed from
    # their records (every op at the mean) would describe nothing the tool measured.
    restated = (table[["latency_p50_ms", "latency_p99_ms"]].to_numpy() != pooled).any(axis=1)
    group_by = list(by) if by is not None else default_by(loaded)
    table = table[[*group_by, *SUMMARY_COLUMNS]]
    if intervals:
        table = with_ci_columns(table, cis, group_by)
        for field in ("latency_p50_ms", "latency_p99_ms"):
            table.loc[restated, [f"{field}_ci_low", f"{field}_ci_high"]] = np.nan
    return table
