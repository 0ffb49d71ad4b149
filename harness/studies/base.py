"""What every study's analysis shares: whether it ran, the "not run" note, saving figures.

A study's notebook calls ``study = <module>.analyse(raw_dir, ...)`` and then only the
study's methods; each returns something a cell displays, or the not-run note. The report
ends a study's section at that note (`harness.analysis.display.NOT_RUN_MARKER`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from harness.analysis import plots, prose
from harness.analysis.display import markdown as _markdown

#: A study holds at most this many ops in memory for its per-op figures (ECDF, over
#: time): a larger experiment is drawn from every k-th op of each run, while its tables,
#: intervals and tests still read every op from the files (`load(max_ops=)`). 100 000
#: points is also about what a scatter in an SVG can carry.
FIGURE_OPS = 100_000


@dataclass
class StudyBase:
    raw_dir: Path
    alpha: float
    figures_dir: Path | None

    #: The study's name in `harness.studies.STUDIES`.
    name: ClassVar[str] = ""

    @property
    def experiments(self) -> tuple[str, ...]:
        """The experiments this study reads."""
        raise NotImplementedError

    @property
    def ran(self) -> bool:
        """Whether there is anything to show."""
        raise NotImplementedError

    @property
    def figure_prefix(self) -> str:
        """Figures are saved as ``<prefix>-<name>.{png,svg}``: by default the experiment's."""
        return self.experiments[0]

    def not_run(self, *experiments: str, end_section: bool = True) -> Any:
        """The note for absent results. `end_section` marks it so the report ends the
        study's section there; a study with several experiments shows one part's note
        without it, and the other parts still show."""
        names = experiments or self.experiments
        lines = " ".join(prose.not_run_sentence(e, str(self.raw_dir)) for e in names)
        specs = ", ".join(f"`harness run {spec}`" for spec in _spec_paths(self.name, names))
        return _markdown(f"**Not run.** {lines} Run {specs} first.", not_run=end_section)

    def status(self) -> Any:
        """What data the section is about, or the not-run note."""
        return self.describe() if self.ran else self.not_run()

    def describe(self) -> Any:
        """The data this section is about (only called when the study ran)."""
        raise NotImplementedError

    def design(self) -> Any:
        """What the study's specs run (configurations, repetitions, ops per run, clients),
        read from the registered specs of its experiments, for the notebook's prose."""
        from harness.studies import STUDIES
        from harness.studies.design import spec_design

        lines = []
        for spec in STUDIES.get(self.name).specs:
            if spec.path().exists() and spec.experiment() in self.experiments:
                lines.append(f"- {spec_design(spec.path()).sentence()}")
        if not lines:
            return None
        return _markdown("As the spec" + ("s say" if len(lines) > 1 else " says") + ":\n\n"
                         + "\n".join(lines))

    def publish(self, fig: Any, name: str) -> Any:
        """Save `fig` under figures_dir (if set) and return its image for the notebook."""
        return plots.publish(fig, f"{self.figure_prefix}-{name}", self.figures_dir)


def _spec_paths(study: str, experiments: tuple[str, ...]) -> list[str]:
    """experiments/<file> of the registered specs that write `experiments`."""
    from harness.studies import STUDIES

    by_name = {}
    if study in STUDIES:
        for spec in STUDIES.get(study).specs:
            try:
                by_name[spec.experiment()] = f"experiments/{spec.file}"
            except OSError:  # a copy of the kit without experiments/
                continue
    return [by_name.get(e, f"experiments/{e}.yaml") for e in experiments]


def as_path(path: Path | str | None) -> Path | None:
    return Path(path) if path else None
