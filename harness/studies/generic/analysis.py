"""The numbers of the generic study: any experiment no built-in study owns.

Everything comes from the experiment's runs and spec, as `harness summary` and `harness
compare` compute it: per configuration the pooled throughput, goodput, mean and
percentiles with their intervals over runs (`harness.analysis.data.numbers`); per grid key
the effect of each of its values against the key's first value, at every combination of
the other keys, for throughput, mean and p99, tested as `compare` tests (Welch's t on the
log ratio of the run-level estimates) and judged over the experiment's rows as one
family by the kit's one rule (`multiplicity.judge`: Benjamini-Hochberg at α, each ratio's
interval printed at the FCR-adjusted level 1 - R·α/m, so a row is better or worse
exactly when that interval excludes 1), each naming the failed measurement checks of
either side (`harness.analysis.checks.registry`); per second of the runs, throughput and p99 for
the over-time figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.checks.registry import Finding
from harness.analysis.checks.words import caveat
from harness.analysis.data import numbers
from harness.analysis.data.load import Loaded
from harness.analysis.data.summary_ci import TABLE_METRICS
from harness.analysis.stats import multiplicity, verdict
from harness.analysis.stats.intervals import RunInterval

#: The metrics whose effects are tested, with their good direction.
#: Grid keys that set the offered load: across their values throughput is what the spec
#: asked for, so it is not compared (a 3x "better" at 3x the rate says nothing); whether
#: each value was met is the `target_not_met` check's.
OFFERED_KEYS = frozenset({"run.rate_ops_s"})
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
    """The effect rows of an experiment (one family) and how they were judged."""

    table: pd.DataFrame
    procedure: str
    alpha: float
    threshold: float
    #: The family's rule, size, rejections and the level its intervals are printed at.
    family: multiplicity.Family | None = None

    @property
    def level(self) -> float:
        """The confidence level of every ratio interval in `table`."""
        return self.family.level if self.family is not None else 1 - self.alpha


#: ``ratio_ci_low``/``_high`` are at the family's adjusted level (``ratio_ci_level``),
#: ``p`` is raw, ``p_adj`` Benjamini-Hochberg's.
EFFECT_COLUMNS = ("key", "value", "reference", "at", "metric", "base", "cand", "ratio",
                  "ratio_ci_low", "ratio_ci_high", "ratio_ci_level", "p", "p_adj",
                  "n_base", "n_cand", "verdict", "caveat")


def effects(loaded: Loaded, spec_grid: dict[str, list[Any]] | None = None, *,
            alpha: float = 0.05, threshold: float = verdict.DEFAULT_THRESHOLD,
            found: Mapping[tuple[object, ...], Sequence[Finding]] | None = None) -> Effects:
    """Each grid key's values against its first, at each combination of the other keys,
    for `EFFECT_METRICS`; all the rows judged together as one family (`judge`). `found`:
    the failed measurement checks per configuration (`checks.group_checks` by the grid
    keys), which each row's ``caveat`` names for either side ("the client was saturated
    in 3 of 5 appendonly=True runs")."""
    keys = list(loaded.grid_keys)
    groups = numbers.group_intervals(loaded, keys, {"throughput_ops_s": None,
                                                    "latency_mean_ms": None,
                                                    "latency_p99_ms": 0.99})
    rows: list[dict[str, Any]] = []
    tests: list[verdict.LogRatio] = []
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
                if metric == "throughput" and key in OFFERED_KEYS:
                    continue
                said = "; ".join([
                    *caveat((found or {}).get(partner, ()), f"{key}={ref}", metric),
                    *caveat((found or {}).get(group, ()), f"{key}={group[i]}", metric)])
                base, cand = groups[partner][field], groups[group][field]
                tests.append(verdict.log_ratio_test(base.log_value, base.se_log, base.df,
                                                    cand.log_value, cand.se_log, cand.df))
                rows.append({**_effect_row(key, group[i], ref, at, metric, base, cand),
                             "caveat": said})
    # One family, judged by the kit's one rule: verdicts and printed intervals agree.
    judged = multiplicity.judge(tests, [EFFECT_METRICS[r["metric"]][1] for r in rows],
                                q=alpha, threshold=threshold)
    for row, claim in zip(rows, judged.claims, strict=True):
        row.update({"ratio": claim.ratio, "ratio_ci_low": claim.low,
                    "ratio_ci_high": claim.high, "ratio_ci_level": claim.level,
                    "p": claim.p, "p_adj": claim.p_adjusted, "verdict": claim.verdict})
    table = pd.DataFrame(rows, columns=list(EFFECT_COLUMNS))
    return Effects(table, judged.family.name, alpha, threshold, judged.family)


def _effect_row(key: str, value: Any, ref: Any, at: str, metric: str, base: RunInterval,
                cand: RunInterval) -> dict[str, Any]:
    return {"key": key, "value": value, "reference": ref, "at": at, "metric": metric,
            "base": base.value, "cand": cand.value, "n_base": base.n_runs,
            "n_cand": cand.n_runs}


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
