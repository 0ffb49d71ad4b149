"""An own experiment's "what drives the tail" (`harness explain` in the report): with two
or more grid keys varied, which of them move p50 and p99, by how much, and which
interactions matter, as a forest plot and one sentence per significant term."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.analysis.explain import view as explain_view


def varied(runs: Any, keys: list[str]) -> list[str]:
    return [k for k in keys if k in runs and runs[k].astype(str).nunique() > 1]


def tail_drivers(name: str, runs: Any, keys: list[str], *, alpha: float,
                 include: tuple[str, ...], figures_dir: Path | None) -> list[Any] | None:
    """The section's parts, or None where fewer than two grid keys vary (or the grid
    varies the op, whose latencies are not one distribution to regress)."""
    factors = varied(runs, keys)
    if len(factors) < 2 or "op" in factors:
        return None
    raw = Path(runs["run_dir"].iloc[0]).parents[1]
    return explain_view.parts(raw, name, alpha=alpha, include=include,
                              figures_dir=figures_dir)
