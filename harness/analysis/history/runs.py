"""Which runs a history uses (`harness.analysis.history.changes`), and which it leaves out and why.

Left out, each with its reason: failed runs (and partial ones unless ``include``), runs
without a start time (an import cannot be placed in time), runs without the ``by``
label, and runs that failed a measurement check of their own (`RUN_CHECKS`). Duplicates
are not: in a history every run is a measurement at its time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.checks import registry as checks_mod
from harness.analysis.checks.runfacts import group_runs as run_facts
from harness.analysis.data.load import Loaded, runs_frame
from harness.analysis.data.tree import grid_keys, read_tree
from harness.results.labels import COLUMN_PREFIX

#: A series: one experiment's configuration and op (then one metric of it).
SERIES_KEYS = ["experiment", "config_id", "op"]
#: The checks a single run can fail on its own; a run failing one is left out.
#: (trend, cold_first_run and heavy_tail judge a group of runs, not a run.)
RUN_CHECKS: tuple[str, ...] = ("client_saturated", "errors", "target_not_met",
                               "not_steady", "machine_busy")

def read(raw: Path, experiments: Sequence[str] | None, progress: bool) -> Loaded:
    pairs, skipped = read_tree(Path(raw), experiments=experiments, where=None, verify=True,
                               skip_unknown_schema=True, progress=progress)
    runs = runs_frame(pairs)
    return Loaded(runs, pd.DataFrame(), grid_keys(m for _, m in pairs), tuple(skipped))


def _left(runs: pd.DataFrame, mask: np.ndarray, reason: str) -> list[dict[str, str]]:
    return [{"run_id": str(r.run_id), "experiment": str(r.experiment),
             "config_id": str(r.config_id), "reason": reason}
            for r in runs[mask].itertuples()]


def select(loaded: Loaded, by: str | None, include: Sequence[str]
            ) -> tuple[pd.DataFrame, list[dict[str, str]]]:
    """The runs a history may use, and those it may not, each with why."""
    runs = loaded.runs.reset_index(drop=True)
    left: list[dict[str, str]] = []
    status = runs["status"].astype(str)
    bad_status = ~((status == "complete") | status.isin(include))
    for s in ("failed", "partial"):
        left += _left(runs, (bad_status & (status == s)).to_numpy(), s)
    start = pd.to_datetime(runs["started_utc"], utc=True, errors="coerce", format="ISO8601")
    no_start = start.isna() & ~bad_status
    left += _left(runs, no_start.to_numpy(), "no start time (an import): not in time order")
    keep = ~bad_status & ~no_start
    if by is not None:
        col = COLUMN_PREFIX + by
        values = runs[col] if col in runs else pd.Series(np.nan, index=runs.index)
        missing = values.isna() & keep
        have = sorted(str(c)[len(COLUMN_PREFIX):] for c in runs.columns
                      if str(c).startswith(COLUMN_PREFIX))
        left += _left(runs, missing.to_numpy(),
                      f"no label {by} (labels in this tree: {', '.join(have) or 'none'})")
        keep &= ~missing
    return runs[keep.to_numpy()].assign(_start=start[keep]).reset_index(drop=True), left


def unsound_runs(loaded: Loaded) -> dict[str, str]:
    """run_id -> the first of `RUN_CHECKS` it fails on its own, with the detail (read
    as this module's attribute, so a test can switch the checks off)."""
    out: dict[str, str] = {}
    for runs in run_facts(loaded, SERIES_KEYS).values():
        for run in runs:
            if run.run_id in out:
                continue
            for name in RUN_CHECKS:
                found = checks_mod.CHECKS[name].func([run])
                if found is not None:
                    out[run.run_id] = f"{name}: {found.detail}"
                    break
    return out


def points_label(runs: pd.DataFrame, least: int) -> str | None:
    """The label whose values make a history's points where none is asked for: one that
    every run carries, with the most distinct values and at least `least` of them
    (``commit`` over ``suite``); None if no label qualifies (repetitions of one
    ``harness run`` are no history)."""
    best: tuple[int, str] | None = None
    for col in sorted(c for c in runs.columns if str(c).startswith(COLUMN_PREFIX)):
        values = runs[col]
        if values.isna().any():
            continue
        n = int(values.astype(str).nunique())
        if n >= least and (best is None or n > best[0]):
            best = (n, str(col)[len(COLUMN_PREFIX):])
    return best[1] if best else None
