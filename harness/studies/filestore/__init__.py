"""The file-store study (seed 000): insert / find / remove × threads × memcache on/off.

`analysis` loads and computes, `views` words it, `plots` draws it; `Study` is all three,
what notebook 20-filestore calls (``analyse(raw_dir)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.studies.base import as_path
from harness.studies.filestore.analysis import EXPERIMENT, load_into
from harness.studies.filestore.plots import Plots
from harness.studies.filestore.views import Views


class Study(Views, Plots):
    """The file-store study: its numbers, tables, sentences and figures."""


def analyse(raw_dir: Path | str, experiment: str = EXPERIMENT, *, alpha: float = 0.05,
            figures_dir: Path | str | None = None, include: Sequence[str] = ()) -> Study:
    """Load the study (runs pooled: `include` adds partial ones); an absent experiment
    gives a Study that reports "not run"."""
    return load_into(Study(Path(raw_dir), alpha, as_path(figures_dir), experiment,
                           include=tuple(include)))


__all__ = ["Study", "analyse"]
