"""A `Loaded`'s summaries whether it holds every op or a sample of them.

A study loads at most `studies.base.FIGURE_OPS` ops for its figures (`load(max_ops=)`);
above that its `Loaded` holds every k-th op of each run (`Loaded.sampled`), and a count,
a rate or a percentile of the sample would be wrong. These functions take either: every
op in memory goes through the pandas path (`summary`, `summary_ci`), a sample sends
them to the files (`queries`, one read of each ops file). The pandas functions refuse a
sample, so nothing counts one by mistake. Same results either way (tests compare).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from harness.analysis.data import queries, summary, summary_ci
from harness.analysis.data.load import Loaded
from harness.analysis.stats.intervals import RunInterval

__all__ = ["group_intervals", "run_summary", "summarise", "summarise_with_ci"]


def summarise(loaded: Loaded, by: Sequence[str] | None = None) -> pd.DataFrame:
    """`summary.summarise` of every op."""
    if loaded.sampled:
        return queries.summarise_sql(loaded, by)
    return summary.summarise(loaded, by)


def run_summary(loaded: Loaded, *, by_op: bool = False) -> pd.DataFrame:
    """`summary.run_summary` of every op."""
    if not loaded.sampled:
        return summary.run_summary(loaded, by_op=by_op)
    by = ["run_id", "op"] if by_op else ["run_id"]
    return summary.with_run_columns(loaded, queries.summarise_sql(loaded, by), by_op=by_op)


def group_intervals(loaded: Loaded, by: Sequence[str] | None = None,
                    metrics: dict[str, float | None] = summary_ci.METRICS,
                    ) -> dict[tuple[object, ...], dict[str, RunInterval]]:
    """`summary_ci.group_intervals` of every op."""
    if not loaded.sampled:
        return summary_ci.group_intervals(loaded, by, metrics)
    return queries.summarise_with_intervals(loaded, by, metrics=metrics)[1]  # type: ignore[return-value]


def summarise_with_ci(loaded: Loaded, by: Sequence[str],
                      metrics: dict[str, float | None] = summary_ci.METRICS) -> pd.DataFrame:
    """`summary_ci.summarise_with_ci` of every op (one read of the files for a sample)."""
    if not loaded.sampled:
        return summary_ci.summarise_with_ci(loaded, by, metrics)
    table, cis = queries.summarise_with_intervals(loaded, by, metrics=metrics)
    return summary_ci.with_ci_columns(table, cis, by, tuple(metrics))  # type: ignore[arg-type]
