"""`harness summary`'s table: DuckDB over the Parquet files for the figures
(`harness.analysis.data.queries`), the tools' stated percentiles for aggregated imports
(`harness.analysis.data.stated`), the intervals (`harness.analysis.data.summary_ci`), per row
the runs left out of it (`harness.analysis.data.pooling`), so none is dropped unsaid, and,
when asked, the measurement checks that warn about its runs (`harness.analysis.checks.registry`).

It sits above `summary` (the in-memory computation the others build on), so that no
module of the summary imports one that imports it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.checks import runfacts
from harness.analysis.checks.registry import Finding, group_checks
from harness.analysis.data import pooling, queries, stated
from harness.analysis.data.load import Loaded, load_ops, load_runs_only
from harness.analysis.data.probe import with_probe_columns
from harness.analysis.data.summary import OPS_LEVEL, SUMMARY_COLUMNS, _sorted, default_by
from harness.analysis.data.summary_ci import METRICS, _key, with_ci_columns
from harness.analysis.data.tree import trees
from harness.errors import ResultsError

#: Per row, the runs of its group that were read and not pooled, by reason (the last
#: columns of `summary_table`; see `with_left_out`).
LEFT_OUT_COLUMNS: tuple[str, ...] = tuple(f"left_out_{r}" for r in pooling.REASONS)
#: With ``checks=True``, the last column: per row a list of the checks that warn about
#: its measurement (`harness.analysis.checks.registry.CHECKS`, in that order), each a dict
#: ``{"check": NAME, "status": "warn", "runs": K, "detail": "...", ...}`` (K: the
#: group's runs it fails in, or, for a check of the whole group such as ``trend`` or
#: ``heavy_tail``, the runs it rests on), with a check's own figures beside them
#: (``heavy_tail``: ``tail_index``, ``k``, ``ops``). Empty: nothing to say.
CHECKS_COLUMN = "checks"


@dataclass(frozen=True)
class Summary:
    """`summary_table`'s table, and the runs it left out (`pooling.LEFT_OUT`: why)."""

    table: pd.DataFrame
    left_out: pd.DataFrame


def check_left(loaded: Loaded, raw_dir: Path | Sequence[Path]) -> None:
    """Raise when every run was skipped: an empty table would look like "no runs yet"."""
    if loaded.runs.empty and loaded.left_out.empty and loaded.skipped:
        where = ", ".join(str(t) for t in trees(raw_dir))
        raise ResultsError(
            f"{where}: nothing left to summarise: all {len(loaded.skipped)} run(s) were "
            "skipped (each named above with why); `harness verify` checks them one by one"
        )


def summary_table(
    raw_dir: Path | Sequence[Path],
    by: list[str] | None = None,
    *,
    experiments: list[str] | None = None,
    intervals: bool = False,
    progress: bool = False,
    include: Sequence[str] = (),
    checks: bool = False,
) -> pd.DataFrame:
    """One row per configuration: grouping columns, then `SUMMARY_COLUMNS` (see module doc),
    then, when any run has a latency probe (`clients.probe`), `probe.PROBE_COLUMNS` (the
    load's figures never include the probe's ops), then `LEFT_OUT_COLUMNS`, then with
    `checks` the `CHECKS_COLUMN`.

    `intervals`: also ``<field>_ci_low`` / ``<field>_ci_high`` after throughput, mean, p50
    and p99: 95% CIs with the run as the unit (`harness.analysis.data.summary_ci`). `include`:
    run statuses pooled besides complete (``("partial",)``; `harness.analysis.data.pooling`).

    Computed by DuckDB over the Parquet files (`harness.analysis.data.queries`): only the
    manifests and, for intervals, one group's latencies at a time are held in memory.
    `progress`: runs read / total on stderr while the manifests are read and verified,
    then groups done / total.
    """
    return summarise_tree(raw_dir, by, experiments=experiments, intervals=intervals,
                          progress=progress, include=include, checks=checks).table


def summarise_tree(
    raw_dir: Path | Sequence[Path],
    by: list[str] | None = None,
    *,
    experiments: list[str] | None = None,
    intervals: bool = False,
    progress: bool = False,
    include: Sequence[str] = (),
    fields: Sequence[str] = SUMMARY_COLUMNS,
    metrics: Mapping[str, float | None] = METRICS,
    checks: bool = False,
) -> Summary:
    """`summary_table`'s table with the runs it left out, for `harness summary`'s line.

    `fields` (of `summary.FULL_COLUMNS`) and `metrics` (the intervals, as in
    `queries.summarise_with_intervals`) default to `harness summary`'s; the explorer asks
    for p99.9 and goodput's interval as well, computed the same way in the same read.
    Several trees in `raw_dir` are pooled as one (`load_runs_only`)."""
    loaded = load_runs_only(raw_dir, experiments=experiments, progress=progress,
                            include=include)
    check_left(loaded, raw_dir)
    facts = None
    if intervals:
        # The checks' per-run facts from the same read of the ops (one pass, not two).
        table, cis, read = queries.one_pass(loaded, by, progress=progress,
                                            metrics=dict(metrics), warmups=checks)
        if checks and read is not None:
            facts = runfacts.from_read(loaded, read)
    else:
        table, cis = queries.summarise_sql(loaded, by), {}
    # Imported runs with aggregated records (every op at the mean) show the tool's
    # stated percentiles, or NaN when pooled: never the mean under a percentile's name.
    # Only those runs' ops are loaded for it (they are small: one record per op kind).
    stated_cols = [c for c in stated.PERCENTILE_COLUMNS if c in metrics or c in fields]
    pooled = table[stated_cols].to_numpy()
    aggregated = list(stated._aggregated_runs(loaded.runs))
    if aggregated:
        sub = loaded.runs[loaded.runs["run_id"].astype(str).isin(aggregated)]
        columns = ["start_ns", "latency_ns", "intended_ns", "status",
                   *(c for c in OPS_LEVEL if by and c in by)]
        table = stated.overlay(table, Loaded(loaded.runs, load_ops(sub, columns),
                                             loaded.grid_keys), by)
    # Rows the overlay touched hold stated figures (or NaN): an interval computed from
    # their records (every op at the mean) would describe nothing the tool measured.
    restated = (table[stated_cols].to_numpy() != pooled).any(axis=1)
    group_by = list(by) if by is not None else default_by(loaded)
    table = table[[*group_by, *fields]]
    if intervals:
        table = with_ci_columns(table, cis, group_by, tuple(metrics))
        for field in stated_cols:
            if field in metrics:
                table.loc[restated, [f"{field}_ci_low", f"{field}_ci_high"]] = np.nan
    if len(loaded.runs):  # a probe's latency beside the load's (`clients.probe`)
        table = with_probe_columns(table, loaded, queries.plan(loaded, by), queries.connect())
    table = with_left_out(table, loaded, by)
    if checks:
        table = with_checks(table, group_checks(loaded, by, facts=facts), group_by)
    return Summary(table, loaded.left_out)


def _keys(table: pd.DataFrame, by: Sequence[str]) -> list[tuple[object, ...]]:
    return [_key(r) for r in table[list(by)].itertuples(index=False, name=None)] \
        if by else [()] * len(table)


def with_checks(table: pd.DataFrame, found: Mapping[tuple[object, ...], Sequence[Finding]],
                by: Sequence[str]) -> pd.DataFrame:
    """`table` with `CHECKS_COLUMN`: per row (by key, not position: `with_left_out` may
    add rows and sort them) the `Finding.as_dict` entries of its group's failed checks
    (`checks.group_checks`); rows of left-out runs only have none."""
    return table.assign(**{CHECKS_COLUMN: [[f.as_dict() for f in found.get(k, ())]
                                           for k in _keys(table, by)]})


def with_left_out(table: pd.DataFrame, loaded: Loaded, by: Sequence[str] | None
                  ) -> pd.DataFrame:
    """`table` (rows keyed by `by`, as `summary_table` groups) with `LEFT_OUT_COLUMNS`:
    per row, the runs of `loaded.left_out` that would be in it, by reason.

    A group of left-out runs only is a row of its own (0 runs, 0 ops, no figures). With
    op or client in `by`, a left-out run counts on each row whose ops it holds (read from
    its ops file: the keys only), and a run with no measured op on a row with those keys
    empty: every run left out is on some row."""
    group_by = list(by) if by is not None else default_by(loaded)
    ops_keys = [c for c in group_by if c in OPS_LEVEL] if by is not None else []
    run_keys = [c for c in group_by if c not in ops_keys]
    lo = loaded.left_out.reset_index(drop=True)
    rows = lo[[*run_keys, pooling.LEFT_OUT]]
    if ops_keys:
        held = queries.ops_key_values(lo, ops_keys)
        bare = np.setdiff1d(np.arange(len(lo)), held["run_pos"].to_numpy(np.int64))
        held = pd.concat([held, pd.DataFrame({"run_pos": bare, **dict.fromkeys(ops_keys)})],
                         ignore_index=True) if len(bare) else held
        pos = held["run_pos"].to_numpy(np.int64)
        rows = rows.iloc[pos].reset_index(drop=True).assign(
            **{k: held[k].to_numpy(dtype=object) for k in ops_keys})
    counts: dict[tuple[object, ...], dict[str, int]] = {}
    values: dict[tuple[object, ...], list[object]] = {}
    for *vals, reason in rows[[*group_by, pooling.LEFT_OUT]].itertuples(index=False,
                                                                        name=None):
        key = _key(vals)
        values.setdefault(key, vals)
        per = counts.setdefault(key, {})
        per[reason] = per.get(reason, 0) + 1
    keys = [_key(r) for r in table[group_by].itertuples(index=False, name=None)] \
        if group_by else [()] * len(table)
    missing = [k for k in counts if k not in set(keys)]
    if missing:  # groups whose every run was left out: said, with no figures
        extra = pd.DataFrame([values[k] for k in missing], columns=group_by)
        extra = extra.reindex(columns=table.columns).assign(runs=0, ops=0)
        table = pd.concat([table, extra], ignore_index=True) if len(table) else extra
        table[["runs", "ops"]] = table[["runs", "ops"]].astype(np.int64)
        keys += missing
    table = table.assign(**{col: [counts.get(k, {}).get(r, 0) for k in keys]
                            for col, r in zip(LEFT_OUT_COLUMNS, pooling.REASONS,
                                              strict=True)})
    return _sorted(table, group_by) if missing else table
