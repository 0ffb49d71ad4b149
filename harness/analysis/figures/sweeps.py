"""Offered-load sweeps: the latency-throughput curve of an experiment whose grid varies
`run.rate_ops_s`, and the capacity search's result (`search.json`) beside its runs.

Every number is `harness summary`'s (`harness.analysis.data.numbers`): per configuration the
pooled throughput (the achieved rate) and p50, p99, p99.9 with their 95% intervals over
runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.data import numbers
from harness.analysis.data.load import Loaded

RATE_KEY = "run.rate_ops_s"
_METRICS = {"throughput_ops_s": None, "latency_p50_ms": 0.5, "latency_p99_ms": 0.99,
            "latency_p999_ms": 0.999}


def is_sweep(loaded: Loaded) -> bool:
    """Whether the experiment's grid varies the offered rate (two rates at least)."""
    return RATE_KEY in loaded.grid_keys and loaded.runs[RATE_KEY].nunique() >= 2


def curve(loaded: Loaded, series: Sequence[str] = ()) -> pd.DataFrame:
    """One row per offered rate (and values of `series`): offered_ops_s,
    achieved_ops_s, runs, and p50_ms, p99_ms, p999_ms with ``_ci_low``/``_ci_high``
    (NaN where the runs have too few ops for the percentile's interval)."""
    by = [*series, RATE_KEY]
    loaded = loaded.runs_where(loaded.runs[RATE_KEY].notna())  # closed-loop runs: no rate
    groups = numbers.group_intervals(loaded, by, _METRICS)
    runs = loaded.runs.groupby(by, dropna=False).size()
    rows: list[dict[str, Any]] = []
    for key, cell in groups.items():
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row["offered_ops_s"] = row.pop(RATE_KEY)
        row["achieved_ops_s"] = cell["throughput_ops_s"].value
        row["runs"] = int(runs.get(key, 0)) if len(by) > 1 else int(runs.get(key[0], 0))
        for field, short in (("latency_p50_ms", "p50"), ("latency_p99_ms", "p99"),
                             ("latency_p999_ms", "p999")):
            iv = cell.get(field)
            row[f"{short}_ms"] = iv.value if iv is not None else float("nan")
            row[f"{short}_ms_ci_low"] = iv.low if iv is not None else float("nan")
            row[f"{short}_ms_ci_high"] = iv.high if iv is not None else float("nan")
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.sort_values([*series, "offered_ops_s"]).reset_index(drop=True) if len(
        out) else out


def read_search(exp_dir: Path) -> dict[str, Any] | None:
    """The capacity search's `search.json` in `exp_dir`, or None."""
    path = Path(exp_dir) / "search.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def slo_limits(search: dict[str, Any] | None) -> list[tuple[str, float]]:
    """(metric, limit ms) of a search's SLO, for the figure's lines."""
    if not search:
        return []
    from harness.spec.slo import parse_slo

    return [(c.metric, c.limit_ms) for c in parse_slo(search["slo"]).conditions]


def figure(loaded: Loaded, name: str, search: dict[str, Any] | None = None,
           series: Sequence[str] = ()) -> Any:
    """The latency-throughput figure of `loaded`'s sweep, with the search's SLO and
    capacity when there is one."""
    from harness.analysis.figures import plots

    found = search or {}
    return plots.latency_throughput(
        curve(loaded, series), title=f"{name}: latency against achieved throughput",
        slo=slo_limits(search), capacity_ops_s=found.get("capacity_ops_s"),
        capacity_ci=(found.get("ci_low"), found.get("ci_high")),
        series=series[0] if series else None)


def compare_figure(base: Path, cand: Path) -> Any | None:
    """Both trees' latency-throughput curves in one figure (`harness compare`'s section),
    for the experiment they both swept (by name); None when they share no sweep."""
    from harness.analysis.data.load import experiment_dirs, load
    from harness.analysis.figures import plots

    shared = sorted(set(experiment_dirs(Path(base))) & set(experiment_dirs(Path(cand))))
    for name in shared:
        sides = {"base": load(Path(base), experiments=[name]),
                 "cand": load(Path(cand), experiments=[name])}
        if not all(len(x.runs) and is_sweep(x) for x in sides.values()):
            continue
        rows = [curve(x).assign(tree=f"{side} ({tree})") for (side, x), tree in
                zip(sides.items(), (Path(base).name, Path(cand).name), strict=True)]
        return plots.latency_throughput(
            pd.concat(rows, ignore_index=True), series="tree",
            title=f"{name}: latency against achieved throughput, base and candidate")
    return None
