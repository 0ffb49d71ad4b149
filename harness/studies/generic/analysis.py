"""The numbers of the generic study: any experiment no built-in study owns.

Everything comes from the experiment's runs and spec, as `harness summary` and `harness
compare` compute it: per configuration the pooled throughput, goodput, mean and
percentiles with their intervals over runs (`harness.analysis.numbers`); per grid key
the effect of each of its values against the key's first value, at every combination of
the other keys, for throughput, mean and p99, tested as `compare` tests (Welch's t on the
log ratio of the run-level estimates) and judged by the one verdict function over the
experiment's rows as one family (`harness.analysis.multiplicity` when present, else
Holm); per second of the runs, throughput and p99 for the over-time figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import numbers, verdict
from harness.analysis.intervals import RunInterval
from harness.analysis.load import Loaded
from harness.analysis.summary_ci import TABLE_METRICS

#: The metrics whose effects are tested, with their good direction.
EFFECT_METRICS: dict[str, tuple[str, bool]] = {
    "throughput": ("throughput_ops_s", True),
    "latency_mean": ("latency_mean_ms", False),
    "latency_p99": ("latency_p99_ms", False),
}
#: p99.9 is shown for a configuration only when each of its runs has this many measured
#: ops (10 beyond the percentile, as for every other interval the kit prints).
P999_MIN_OPS = 10_000


def config_label(point: dict[str, Any] | pd.Series, keys: Sequence[str]) -> str:
    """``k=v, k2=v2`` of a configuration (``all runs`` without a grid)."""
    return ", ".join(f"{k}={point[k]}" for k in keys) or "all runs"


def value_order(values: Sequence[Any], spec_grid: dict[str, list[Any]] | None,
                key: str) -> list[Any]:
    """A grid key's values in the spec's order (its first value is the reference);
    without the spec, sorted."""
    present = list(dict.fromkeys(v for v in values if not _missing(v)))
    if spec_grid and key in spec_grid:
        order = [v for v in spec_grid[key] if v in present]
        return order + [v for v in present if v not in order]
    try:
        return sorted(present)
    except TypeError:
        return sorted(present, key=str)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def configurations(loaded: Loaded) -> pd.DataFrame:
    """One row per configuration (the grid keys' values): runs, ops, throughput, goodput
    and each of `TABLE_METRICS` with its interval (``<field>_ci_low/high``)."""
    keys = list(loaded.grid_keys)
    table = numbers.summarise_with_ci(loaded, keys)
    intervals = numbers.group_intervals(loaded, keys, TABLE_METRICS)
    lows, highs, values = [], [], []
    for _, row in table.iterrows():
        found = intervals.get(tuple(row[k] for k in keys))
        iv = found.get("latency_p999_ms") if found else None
        # Too few ops per run for the 99.9th: left blank rather than a number without
        # the ops behind it.
        enough = row["ops"] / max(int(row["runs"]), 1) >= P999_MIN_OPS
        values.append(iv.value if iv is not None and enough else np.nan)
        lows.append(iv.low if iv is not None and enough else np.nan)
        highs.append(iv.high if iv is not None and enough else np.nan)
    table["latency_p999_ms"] = values
    table["latency_p999_ms_ci_low"] = lows
    table["latency_p999_ms_ci_high"] = highs
    return table


@dataclass(frozen=True)
class Effects:
    """The effect rows of an experiment (one family) and how they were adjusted."""

    table: pd.DataFrame
    procedure: str
    alpha: float
    threshold: float


EFFECT_COLUMNS = ("key", "value", "reference", "at", "metric", "base", "cand", "ratio",
                  "ratio_ci_low", "ratio_ci_high", "p", "p_adj", "n_base", "n_cand",
                  "verdict")


def effects(loaded: Loaded, spec_grid: dict[str, list[Any]] | None = None, *,
            alpha: float = 0.05, threshold: float = verdict.DEFAULT_THRESHOLD) -> Effects:
    """Each grid key's values against its first, at each combination of the other keys,
    for `EFFECT_METRICS`; p adjusted over all the rows together (one family)."""
    keys = list(loaded.grid_keys)
    groups = numbers.group_intervals(loaded, keys, {"throughput_ops_s": None,
                                                    "latency_mean_ms": None,
                                                    "latency_p99_ms": 0.99})
    rows: list[dict[str, Any]] = []
    for i, key in enumerate(keys):
        order = value_order([g[i] for g in groups], spec_grid, key)
        if len(order) < 2:
            continue
        ref = order[0]
        for group in sorted(groups, key=str):
            if group[i] == ref or _missing(group[i]):
                continue
            partner = (*group[:i], ref, *group[i + 1:])
            if partner not in groups:
                continue
            at = ", ".join(f"{k}={group[j]}" for j, k in enumerate(keys) if j != i)
            for metric, (field, _) in EFFECT_METRICS.items():
                rows.append(_effect_row(key, group[i], ref, at, metric,
                                        groups[partner][field], groups[group][field]))
    table = pd.DataFrame(rows, columns=list(EFFECT_COLUMNS[:-1]))
    procedure = _adjust(table, alpha)
    table["verdict"] = [
        verdict.decide(r.ratio_ci_low, r.ratio_ci_high, r.p_adj, ratio=r.ratio,
                       higher_is_better=EFFECT_METRICS[r.metric][1], alpha=alpha,
                       threshold=threshold)
        for r in table.itertuples(index=False)]
    return Effects(table, procedure, alpha, threshold)


def _effect_row(key: str, value: Any, ref: Any, at: str, metric: str, base: RunInterval,
                cand: RunInterval) -> dict[str, Any]:
    lr = verdict.log_ratio_test(base.log_value, base.se_log, base.df, cand.log_value,
                                cand.se_log, cand.df)
    return {"key": key, "value": value, "reference": ref, "at": at, "metric": metric,
            "base": base.value, "cand": cand.value, "ratio": lr.ratio,
            "ratio_ci_low": lr.low, "ratio_ci_high": lr.high, "p": lr.p, "p_adj": np.nan,
            "n_base": base.n_runs, "n_cand": cand.n_runs}


def _adjust(table: pd.DataFrame, alpha: float) -> str:
    """Adjust `table`'s p over its tested rows, in place; the procedure's name."""
    from harness.analysis.stats import holm

    tested = table["p"].notna().to_numpy()
    if tested.any():
        adjusted = np.full(len(table), np.nan)
        adjusted[tested] = holm(table.loc[tested, "p"].to_numpy(float))
        table["p_adj"] = adjusted
    return "Holm"


def per_second(loaded: Loaded, sample_every: int = 1) -> pd.DataFrame:
    """Per configuration and whole second since its runs' start: throughput (ops/s, the
    mean over its runs of each run's ops in that second) and the p99 of the ops of all
    its runs in that second. A sampled load's counts are scaled back by `sample_every`;
    each run's last, partial second is left out."""
    keys = list(loaded.grid_keys)
    ops = loaded.ops
    measured = ops[~ops["warmup"].to_numpy(bool)] if "warmup" in ops else ops
    if measured.empty:
        return pd.DataFrame(columns=["config", "second", "throughput_ops_s", "p99_ms"])
    runs = loaded.runs[["run_id", *keys]].copy()
    runs["config"] = [config_label(r, keys) for _, r in runs.iterrows()]
    frame = pd.DataFrame({"run_id": measured["run_id"].astype(str).to_numpy(),
                          "second": (measured["start_ns"].to_numpy(np.int64) // 1_000_000_000),
                          "latency_ms": measured["latency_ns"].to_numpy() / 1e6})
    frame = frame.merge(runs[["run_id", "config"]].astype({"run_id": str}), on="run_id")
    # Whole seconds only: a run's last, partial second would read as a collapse.
    last_start = measured.groupby(measured["run_id"].astype(str), observed=True)[
        "start_ns"].max()
    whole = (last_start.to_numpy(np.int64) // 1_000_000_000)
    frame = frame[frame["second"].to_numpy() < frame["run_id"].map(
        dict(zip(last_start.index, whole, strict=True))).to_numpy()]
    if frame.empty:
        return pd.DataFrame(columns=["config", "second", "throughput_ops_s", "p99_ms"])
    per_run = frame.groupby(["config", "run_id", "second"], observed=True).size()
    n_runs = runs.groupby("config").size()
    tput = (per_run.groupby(["config", "second"]).sum() * sample_every
            / n_runs.reindex(per_run.groupby(["config", "second"]).sum().index
                             .get_level_values("config")).to_numpy())
    p99 = frame.groupby(["config", "second"])["latency_ms"].quantile(0.99)
    out = pd.DataFrame({"throughput_ops_s": tput, "p99_ms": p99}).reset_index()
    return out


def spec_grid_of(spec: Mapping[str, Any] | None) -> dict[str, list[Any]] | None:
    """The grid of the spec a run recorded (`extra.spec`), in the spec's order; None
    without one (runs of an older kit)."""
    grid = spec.get("grid") if isinstance(spec, Mapping) else None
    return {str(k): list(v) for k, v in grid.items() if isinstance(v, list)} \
        if isinstance(grid, Mapping) else None
