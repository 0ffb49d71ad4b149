"""95% intervals (runs as the unit) for the summary's throughput, mean, p50 and p99.

`group_intervals(loaded, by)` returns, per group of `summary.summarise`, one
`intervals.RunInterval` per metric in `METRICS`; `with_ci_columns` adds them to a summary
table as ``<field>_ci_low`` / ``<field>_ci_high`` (NaN with fewer than 2 runs, and for a
percentile whose runs hold too few ops beyond it). `harness compare` uses the same
intervals, so a summary and a comparison of the same runs print the same numbers.
Report tables may ask for `TABLE_METRICS` (p99.9 as well), and `no_ci_reasons` words
why a percentile has no interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded
from harness.analysis.data.summary import (
    OPS_LEVEL,
    _check_by,
    _factorize_ints,
    _refuse_sample,
    default_by,
    fixed_duration_runs,
    group_codes,
    measured_ops,
    op_begin_ns,
)
from harness.analysis.stats import intervals

#: Summary field -> quantile (None: a ratio of sums).
METRICS: dict[str, float | None] = {
    "throughput_ops_s": None,
    "latency_mean_ms": None,
    "latency_p50_ms": 0.5,
    "latency_p99_ms": 0.99,
}
#: The report's tables also give p99.9 an interval where every run has the ops for one
#: (10 000 per run); `harness summary`/`compare` keep to `METRICS`, their stable interface.
TABLE_METRICS: dict[str, float | None] = {**METRICS, "latency_p999_ms": 0.999}
_NS_PER_MS = 1e6
#: Said under a table where a percentile of several runs has no interval.
NO_CI_NOTE = (f"note: a percentile shown without [low, high] has fewer than "
              f"{intervals.MIN_TAIL_OPS} ops beyond it in some run (p99 needs "
              f"{int(intervals.MIN_TAIL_OPS / 0.01)} ops per run): too few for an interval "
              "that covers")


def _key(values: Sequence[object]) -> tuple[object, ...]:
    """A hashable group key in which every NaN is the same."""
    return tuple("\0nan" if isinstance(v, float) and np.isnan(v) else v for v in values)


def group_intervals(
    loaded: Loaded, by: Sequence[str] | None = None,
    metrics: dict[str, float | None] = METRICS,
) -> dict[tuple[object, ...], dict[str, intervals.RunInterval]]:
    """{group key (values of `by`, in order): {metric: interval}} for groups with ops;
    the percentiles are those of `metrics` (throughput and mean always). A sampled
    `Loaded` is refused (`numbers.group_intervals` reads its files)."""
    _refuse_sample(loaded)
    explicit = by is not None  # as in `summarise`: only a named op/client is ops-level
    by = list(by) if by is not None else default_by(loaded)
    _check_by(by, loaded.runs)
    ops_keys = [c for c in by if c in OPS_LEVEL] if explicit else []
    run_keys = [c for c in by if c not in ops_keys]
    out: dict[tuple[object, ...], dict[str, intervals.RunInterval]] = {}
    runs, ops = loaded.runs, measured_ops(loaded.ops)
    if not len(ops):
        return out
    # Group code per op exactly as `summarise` forms it (integer codes, no strings per op).
    run_codes, run_key_rows, op_run, group, first, extra = group_codes(
        runs, ops, run_keys, ops_keys)
    lat_ns = ops["latency_ns"].to_numpy(np.int64)
    begin = op_begin_ns(ops)
    lat = lat_ns / _NS_PER_MS

    # Per (group, run): ops, wall time, latency sum, as `summarise` computes them.
    unit, unit_first = _factorize_ints(group.astype(np.int64) * len(runs) + op_run)
    wall_s = (pd.Series(begin + lat_ns).groupby(unit).max().to_numpy()
              - pd.Series(begin).groupby(unit).min().to_numpy()) / 1e9
    unit_ops = np.bincount(unit).astype(float)
    unit_lat = np.bincount(unit, weights=lat)
    unit_group = group[unit_first]
    # A group is of fixed duration if all its runs are (`summary.run_weighted`).
    unit_fixed = fixed_duration_runs(runs)[op_run[unit_first]]
    not_fixed = np.bincount(unit_group, weights=~unit_fixed, minlength=len(first))

    order = np.argsort(group, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group))])
    for g, row in enumerate(first):
        values = {c: run_key_rows[c].iloc[run_codes[op_run[row]]] for c in run_keys}
        values.update({c: uniq[codes[row]] for c, codes, uniq in extra})
        mine = unit_group == g
        idx = order[bounds[g] : bounds[g + 1]]
        cell = {
            "throughput_ops_s": intervals.throughput_interval(
                unit_ops[mine], wall_s[mine], not_fixed[g] == 0),
            "latency_mean_ms": intervals.mean_interval(unit_lat[mine], unit_ops[mine]),
        }
        for field, q in metrics.items():
            if q is not None:
                cell[field] = intervals.quantile_interval(lat[idx], op_run[idx], q)
        out[_key([values[c] for c in by])] = cell
    return out


def with_ci_columns(
    table: pd.DataFrame, cis: dict[tuple[object, ...], dict[str, intervals.RunInterval]],
    by: Sequence[str], fields: Sequence[str] = tuple(METRICS),
) -> pd.DataFrame:
    """`table` with ``<field>_ci_low`` / ``_ci_high`` after each of `fields`."""
    table = table.copy()
    keys = [_key(row) for row in table[list(by)].itertuples(index=False, name=None)] \
        if by else [()] * len(table)
    for field in fields:
        pos = table.columns.get_loc(field) + 1
        lows = [cis.get(k, {}).get(field) for k in keys]
        table.insert(pos, f"{field}_ci_low",
                     [iv.low if iv is not None else np.nan for iv in lows])
        table.insert(pos + 1, f"{field}_ci_high",
                     [iv.high if iv is not None else np.nan for iv in lows])
    return table


def _g(x: float) -> str:
    from harness.analysis.data.formats import human

    return human(x)


def with_bracketed_ci(table: pd.DataFrame, fields: Sequence[str]) -> pd.DataFrame:
    """For printing: each field as ``value [low, high]`` (just the value without a CI)."""
    table = table.copy()
    for f in fields:
        lo, hi = table.pop(f"{f}_ci_low"), table.pop(f"{f}_ci_high")
        table[f] = [_g(v) if pd.isna(a) else f"{_g(v)} [{_g(a)}, {_g(b)}]"
                    for v, a, b in zip(table[f], lo, hi, strict=True)]
    return table


def summarise_with_ci(loaded: Loaded, by: Sequence[str],
                      metrics: dict[str, float | None] = METRICS) -> pd.DataFrame:
    """`summary.summarise` with the CI columns of `with_ci_columns` (for report tables)."""
    from harness.analysis.data.summary import summarise

    return with_ci_columns(summarise(loaded, by), group_intervals(loaded, by, metrics), by,
                           tuple(metrics))


def no_ci_reasons(table: pd.DataFrame, fields: dict[str, float | None],
                  unit: str = "runs") -> list[str]:
    """Per percentile of `fields` that lacks an interval in some row of several runs
    (`ops` over `runs` each), why: the ops one needs per run and the fewest a row had."""
    out = []
    several = table["runs"] > 1
    for field, q in fields.items():
        if q is None or f"{field}_ci_low" not in table:
            continue
        missing = several & table[f"{field}_ci_low"].isna()
        if not missing.any():
            continue
        need = intervals.ops_needed(q)
        fewest = int((table.loc[missing, "ops"] / table.loc[missing, "runs"]).min())
        out.append(f"p{q * 100:g} has no interval where a {unit[:-1]} holds fewer than "
                   f"{need:,} ops ({intervals.MIN_TAIL_OPS} beyond it; here ~{fewest:,} "
                   f"per {unit[:-1]}): an interval would undercover")
    return out


def ci_strings(table: pd.DataFrame, field: str, digits: int = 3) -> list[str]:
    """``value (low–high)`` per row, or the value alone where there is no interval."""
    from harness.analysis.data.formats import num

    f = num(digits)
    return [f(v) if pd.isna(lo) else f"{f(v)} ({f(lo)}–{f(hi)})"
            for v, lo, hi in zip(table[field], table[f"{field}_ci_low"],
                                 table[f"{field}_ci_high"], strict=True)]
