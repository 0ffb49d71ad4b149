"""What `harness explain` regresses: one row per run of an experiment, with its grid
values, each quantile of its own measured ops, and its telemetry covariates; the runs
left out, each with why."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded, load_runs_only
from harness.analysis.data.opsread import run_ops
from harness.analysis.history import runs as history_runs
from harness.errors import ResultsError
from harness.results import MANIFEST, OPS_FILE, read_manifest

#: Ops beyond a tail quantile in every run for its intervals to cover as stated; below,
#: `explain` says so (simulation: 50 beyond p99 covered 0.92-0.94, 200 0.94-0.97).
TAIL_OPS_NOTE = 200


@dataclass(frozen=True)
class RunTable:
    runs: pd.DataFrame  # run_id, config_id, one column per factor
    quantiles: Mapping[float, pd.Series]  # q -> each run's quantile (ms)
    covariates: pd.DataFrame
    factors: Mapping[str, tuple[Any, ...]]  # key -> values, baseline first
    left_out: list[dict[str, str]]
    notes: list[str]


def _spec_grid(run_dir: Path) -> dict[str, list[Any]]:
    """The grid as the spec listed it (recorded in every manifest): its values' order."""
    try:
        spec = read_manifest(run_dir).typed_extra.spec or {}
    except (ResultsError, OSError, ValueError):
        return {}
    grid = spec.get("grid") if isinstance(spec, Mapping) else None
    return {str(k): list(v) for k, v in grid.items()
            if isinstance(v, list)} if isinstance(grid, Mapping) else {}


def _order(values: Sequence[Any], listed: Sequence[Any] | None) -> tuple[Any, ...]:
    """The values in the spec's order (its first is the baseline), else numeric, else
    as first met."""
    present = list(dict.fromkeys(values))
    if listed:
        first = [v for v in listed if v in present]
        return tuple(first + [v for v in present if v not in first])
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return tuple(sorted(present))
    return tuple(present)


def _quantiles(run_dir: str, qs: Sequence[float], op: str | None) -> list[float]:
    """Each quantile of the run's measured ops (ms), then how many there were."""
    parts = run_ops(str(Path(run_dir) / OPS_FILE), ["op"])
    arrays = [np.concatenate(p.lat) for k, p in parts.items() if op is None or k[0] == op]
    if not arrays:
        return [float("nan")] * len(qs) + [0.0]
    lat = np.sort(np.concatenate(arrays)) / 1e6
    return [float(np.quantile(lat, q)) for q in qs] + [float(lat.size)]


def _covariate(telemetry: Mapping[str, Any], name: str) -> float:
    if name == "cpu":
        vals = [p.get("cpu_util") for p in telemetry.get("processes", ())
                if isinstance(p, Mapping) and p.get("role") == "client"]
    else:
        key = "steal_util" if name == "steal" else "other_cpu"
        vals = [h.get(key) for h in telemetry.get("hosts", ()) if isinstance(h, Mapping)]
    nums = [float(v) for v in vals if isinstance(v, int | float) and not isinstance(v, bool)]
    return max(nums) if nums else float("nan")


def run_table(raw: Path, experiment: str, quantiles: Sequence[float], *,
              op: str | None = None, include: Sequence[str] = (),
              covariates: Sequence[str] = ()) -> RunTable:
    loaded = load_runs_only(raw, experiments=[experiment], include=include)
    left = [{"run_id": str(r.run_id), "config_id": str(r.config_id),
             "reason": str(r.left_out)} for r in loaded.left_out.itertuples()]
    runs = loaded.runs.reset_index(drop=True)
    if runs.empty:
        raise ResultsError(f"{raw}: no pooled run of experiment {experiment!r}"
                           + (f" ({len(left)} left out)" if left else ""))
    unsound = history_runs.unsound_runs(Loaded(runs, pd.DataFrame(), loaded.grid_keys))
    if unsound:
        bad = runs["run_id"].astype(str).isin(list(unsound)).to_numpy()
        left += [{"run_id": str(r.run_id), "config_id": str(r.config_id),
                  "reason": unsound[str(r.run_id)]} for r in runs[bad].itertuples()]
        runs = runs[~bad].reset_index(drop=True)
    if runs.empty:
        raise ResultsError(f"{experiment}: every run was left out ({left[0]['reason']} ...)")
    gone = sorted({r["config_id"] for r in left} - set(runs["config_id"].astype(str)))
    listed = _spec_grid(Path(runs["run_dir"].iloc[0]))
    factors = {}
    # The spec's order of its keys, as its config ids keep it (a manifest's mappings are
    # written with sorted keys); any key not found there after them.
    cid = str(runs["config_id"].iloc[0])

    def place(k: str) -> int:
        at = cid.find(f"{k}=")
        return at if at >= 0 and (at == 0 or cid[at - 1] == ",") else len(cid) + 1

    keys = sorted(loaded.grid_keys, key=place)
    notes = []
    for key in keys:
        if key not in runs or key == "op":
            continue
        col = runs[key].map(lambda v: json.dumps(v) if isinstance(v, list | dict) else v)
        if col.isna().any() and not col.isna().all():
            notes.append(f"grid key {key} is no factor: {int(col.isna().sum())} of "
                         f"{len(col)} runs have no value for it (null, or a key added "
                         "later), so its runs are pooled over it")
        if col.isna().any() or col.nunique() < 2:
            continue
        factors[key] = _order(col.tolist(), listed.get(key))
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        qs = list(pool.map(lambda d: _quantiles(d, quantiles, op), runs["run_dir"]))
    table = runs[["run_id", "config_id", "run_dir", *factors]].copy()
    per_q = {q: pd.Series([row[i] for row in qs]) for i, q in enumerate(quantiles)}
    notes += [f"configuration {c} has no run left (every one was left out): the terms "
              "that needed it are estimated from the others or not at all" for c in gone]
    fewest = int(min(row[-1] for row in qs))
    for q in quantiles:
        beyond = fewest * (1 - q)
        if q > 0.5 and beyond < TAIL_OPS_NOTE:
            notes.append(
                f"p{q * 100:g} rests on {beyond:.0f} ops beyond it in the shortest run: a "
                "quantile of that few ops is biased where a factor reshapes the tail, and "
                "its intervals covered 0.92-0.94 (not 0.95) in simulation at 50 such ops "
                f"(benchmarks/explain_coverage.py); {TAIL_OPS_NOTE:.0f} or more per run "
                f"(p{q * 100:g}: {TAIL_OPS_NOTE / (1 - q):,.0f} ops) cover as stated")
    if op is not None and all(np.isnan(v) for v in per_q[quantiles[0]]):
        raise ResultsError(f"{experiment}: no run has ops of kind {op!r}")
    cov = pd.DataFrame(index=range(len(runs)))
    if covariates:
        tele = [read_manifest(Path(d)).telemetry for d in runs["run_dir"]]
        for c in covariates:
            cov[c] = [_covariate(t, c) for t in tele]
            if cov[c].isna().any():
                missing = int(cov[c].isna().sum())
                raise ResultsError(f"--with {c}: {missing} run(s) have no telemetry for it "
                                   f"(an older schema, an import, or a window under "
                                   f"{MANIFEST}'s telemetry minimum)")
    return RunTable(table, per_q, cov, factors, left, notes)
