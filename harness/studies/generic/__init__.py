"""The generic study: every experiment that no built-in study owns, analysed like them.

`analyse(raw_dir)` finds the experiments of the user's own (run by the kit, not imported,
not written by a registered study's spec) and makes one section each
(`views.ExperimentSection`); `notebooks/70-experiments.ipynb` shows them, and the report
names each experiment in its contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.data import pooling
from harness.analysis.data.load import experiment_dirs, load
from harness.results import MANIFEST
from harness.studies.base import FIGURE_OPS
from harness.studies.generic import looks
from harness.studies.generic.views import ExperimentSection

__all__ = ["ExperimentSection", "GenericStudy", "analyse", "own_experiments"]


def owned_experiments() -> set[str]:
    """Experiments a registered study reads: its specs' names and its legacy import."""
    from harness.studies import STUDIES

    owned = set()
    for name in STUDIES:
        info = STUDIES.get(name)
        owned |= set(info.notebook_parameters().values())
        owned |= {s.experiment() for s in info.specs if s.path().is_file()}
        if info.legacy is not None:
            owned.add(info.legacy.experiment)
    return owned


def own_experiments(raw_dir: Path) -> list[str]:
    """Experiments under `raw_dir` run by the kit that no registered study owns."""
    owned = owned_experiments()
    out = []
    for name, dirs in sorted(experiment_dirs(Path(raw_dir)).items()):
        if name in owned:
            continue
        first = next((d / MANIFEST for base in dirs for d in sorted(base.iterdir())
                      if (d / MANIFEST).is_file()), None)
        if first is not None and '"source": "imported"' in first.read_text():
            continue  # an import: the imported-results section shows it
        out.append(name)
    return out


@dataclass
class GenericStudy:
    raw_dir: Path
    sections: list[ExperimentSection] = field(default_factory=list)
    #: Experiments asked for that have no run to pool, with why.
    empty: dict[str, str] = field(default_factory=dict)
    #: Experiments whose runs could not be read into a section, with the error.
    broken: dict[str, BaseException] = field(default_factory=dict)

    def report(self) -> Any:
        """Display every experiment's section; the report leaves this part out when
        there is none."""
        from IPython.display import display

        from harness.analysis.sections.display import failed_part, markdown

        if not self.sections and not self.empty and not self.broken:
            return markdown(f"No experiment of your own under `{self.raw_dir}`: every one "
                            "there belongs to a built-in study or was imported.", omit=True)
        for name, why in self.empty.items():
            display(markdown(f"## Experiment `{name}`\n\nNo run to pool: {why}."))
        for name, exc in self.broken.items():
            display(markdown(f"## Experiment `{name}`"))
            display(failed_part(f"experiment `{name}`", exc))
        for s in self.sections:
            def looks_taken(s: ExperimentSection = s) -> Any:  # until: decided's looks
                return looks.parts(self.raw_dir, s.name, s.figures_dir)

            # One experiment whose runs break a view costs its own part, not the others'.
            for view in (s.header, s.heavy_tails, s.configuration_table, s.replication_table,
                         s.checks_table,
                         s.effect_findings, s.effect_figure, looks_taken, s.answers,
                         s.tail_drivers, s.capacity, s.ecdf, s.over_time, s.provenance):
                try:
                    part = view()
                except Exception as exc:  # noqa: BLE001 - any failure, named in the report
                    display(failed_part(f"experiment `{s.name}`, {view.__name__}", exc))
                    continue
                for one in part if isinstance(part, list) else [part]:
                    if one is not None:
                        display(one)
        return None


def analyse(raw_dir: str | Path, experiments: Sequence[str] | None = None, *,
            alpha: float = 0.05, threshold: float = 0.05,
            figures_dir: str | Path | None = None, include: Sequence[str] = ()
            ) -> GenericStudy:
    """The sections of `experiments` (default: every experiment of the user's)."""
    raw_dir = Path(raw_dir)
    include = pooling.check_include(include)
    names = list(experiments) if experiments else own_experiments(raw_dir)
    study = GenericStudy(raw_dir)
    for name in names:
        try:
            loaded = load(raw_dir, experiments=[name], include=include, max_ops=FIGURE_OPS)
        except Exception as exc:  # noqa: BLE001 - the others still get their sections
            study.broken[name] = exc
            continue
        if not len(loaded.runs):
            study.empty[name] = (pooling.line(loaded.left_out, include)
                                 if len(loaded.left_out) else "no runs found")
            continue
        study.sections.append(ExperimentSection(
            name, loaded, loaded.left_out if len(loaded.left_out) else pd.DataFrame(),
            tuple(include), alpha, threshold,
            Path(figures_dir) if figures_dir else None))
    return study
