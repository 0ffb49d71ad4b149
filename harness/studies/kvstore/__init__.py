"""The KV-store study (seeds 003/004): scaling (servers × clients), cache (size ×
strategy) and elasticity (servers added and removed under load).

`analysis` loads and computes, `views` words it, `plots` draws it; `Study` is all three,
what notebook 40-kvstore calls (``analyse(raw_dir)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.studies.base import as_path
from harness.studies.kvstore.analysis import EXPERIMENTS, load_into
from harness.studies.kvstore.plots import Plots
from harness.studies.kvstore.views import Views


class Study(Views, Plots):
    """The KV-store study: its numbers, tables, sentences and figures."""


def analyse(raw_dir: Path | str, *, alpha: float = 0.05, figures_dir: Path | str | None = None,
            experiments: dict[str, str] | None = None, include: Sequence[str] = ()) -> Study:
    """Load the three experiments (`experiments`: part -> experiment name, overriding
    kv_scaling, kv_cache, kv_elastic; runs pooled, `include` adding partial ones); any
    may be missing."""
    return load_into(Study(Path(raw_dir), alpha, as_path(figures_dir),
                           {**EXPERIMENTS, **(experiments or {})}, include=tuple(include)))


__all__ = ["Study", "analyse"]
