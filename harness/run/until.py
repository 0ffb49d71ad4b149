"""What an experiment's directory already holds (runs complete per configuration and
repetition, their throughputs), and whether `until` (a confidence interval tight enough)
is met."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.results import (
    iter_run_dirs,
)
from harness.results.labels import labels_key


def _manifests(exp_dir: Path) -> Iterator[dict[str, Any]]:
    """The manifests of the run directories in `exp_dir` (never a hidden temp directory:
    a run is a directory in place, `iter_run_dirs`), as plain JSON; unreadable ones are
    skipped (`harness verify` names them)."""
    if not exp_dir.is_dir():
        return
    for run_dir in iter_run_dirs(exp_dir):
        try:
            data = json.loads((run_dir / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            yield data


def _labelled(data: dict[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a manifest carries exactly `labels` (a run of another commit or version is
    not one of this run's repetitions; a run older than labels has none)."""
    return labels_key(data.get("labels") if isinstance(data.get("labels"), dict)
                      else {}) == labels_key(labels)


def completed_runs(exp_dir: Path, labels: Mapping[str, str] | None = None
                   ) -> set[tuple[str, int]]:
    """(config_id, repetition) of the complete runs already in `exp_dir` with `labels`."""
    return {(d.get("config_id"), d.get("repetition")) for d in _manifests(exp_dir)
            if d.get("status") == "complete" and _labelled(d, labels or {})}


def completed_throughputs(exp_dir: Path, labels: Mapping[str, str] | None = None
                          ) -> dict[str, dict[int, tuple[float, float]]]:
    """config_id -> {repetition: (measured ops, achieved throughput)} of the complete
    runs in `exp_dir` with `labels`."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for data in _manifests(exp_dir):
        if not _labelled(data, labels or {}):
            continue
        rate = (data.get("loadgen") or {}).get("achieved_rate_ops_s")
        ops = (data.get("counts") or {}).get("measured") or 1  # unknown: equal weights
        if data.get("status") == "complete" and rate:
            out.setdefault(data["config_id"], {})[int(data["repetition"])] = (
                float(ops), float(rate))
    return out


#: `until` judges the interval with a pessimistic spread: the upper 95% confidence
#: bound of the run-to-run SD, and the target must be met with and without the latest
#: run. Stopping as soon as the interval looks narrow stops when the spread happens to
#: look small, and the reported interval then covered 0.90-0.93 (from 3 runs, ±5%); with
#: both guards 0.933-0.947. The rest of the loss is the same selection: the runs that met
#: the target are the ones whose spread looked small, and the report's interval is built
#: from them. So once the target is met, `UNTIL_CONFIRM_RUNS` more repetitions run
#: without another look; the report's interval then rests mostly on runs that played no
#: part in the decision, and covers 0.945-0.949 at a run-to-run spread of 2-20% (40 000
#: simulated experiments each; benchmarks/stats_coverage.py, tests/run/test_until.py); the
#: same interval at a fixed 13 runs covers 0.948: the interval's own coverage.
UNTIL_SPREAD_BOUND = 0.95


UNTIL_CONFIRM_RUNS = 5


def until_met(reps: dict[int, tuple[float, float]], pct: float) -> bool:
    """Whether `until` can stop: the target was met (`until_first_met`) and
    `UNTIL_CONFIRM_RUNS` more complete runs have been made since."""
    runs = [reps[r] for r in sorted(reps)]
    first = until_first_met(runs, pct)
    return first is not None and len(runs) >= first + UNTIL_CONFIRM_RUNS


def until_first_met(runs: list[tuple[float, float]], pct: float) -> int | None:
    """The fewest of `runs` (in repetition order, at least 3) whose pessimistic half-width
    (`ci_halfwidth_pct`) is within `pct` with and without the last of them; None if none.
    Prefixes only, so every later round finds the same point."""
    for n in range(3, len(runs) + 1):
        widths = (ci_halfwidth_pct(runs[:n]), ci_halfwidth_pct(runs[: n - 1]))
        if all(w is not None and w <= pct for w in widths):
            return n
    return None


def ci_halfwidth_pct(runs: list[tuple[float, float]], confidence: float = 0.95) -> float | None:
    """Half-width, in % of the estimate, of the interval the report prints for these runs'
    throughput (total ops / total time, jackknife over runs, t on log), with the run-to-run
    spread at its upper `UNTIL_SPREAD_BOUND` confidence bound. None below 2 runs."""
    if len(runs) < 2:
        return None
    from scipy import stats  # only specs with `until` need it

    from harness.analysis.stats.intervals import ratio_interval

    ops = np.array([o for o, _ in runs])
    rates = np.array([r for _, r in runs])
    est = ratio_interval(ops, ops / rates, confidence=confidence)
    n = len(runs)
    inflate = np.sqrt((n - 1) / stats.chi2.ppf(1 - UNTIL_SPREAD_BOUND, n - 1))
    half = stats.t.ppf((1 + confidence) / 2, n - 1) * est.se_log * inflate
    return float(100 * np.expm1(half))
