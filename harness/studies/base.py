"""What every study's analysis shares: whether it ran, the "not run" note, saving figures.

A study's notebook calls ``study = <module>.analyse(raw_dir, ...)`` and then only the
study's methods; each returns something a cell displays, or the not-run note. The report
ends a study's section at that note (`harness.analysis.sections.display.NOT_RUN_MARKER`).

A study reads its experiments with `StudyBase.load`, which pools runs as `harness
summary` does (`harness.analysis.data.pooling`; the notebooks' parameter ``include`` adds
partial runs) and keeps what it left out in `StudyBase.left_out`, for `left_out_note`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from harness.analysis.checks import tails
from harness.analysis.data import pooling
from harness.analysis.data.load import Loaded, available_experiments, load
from harness.analysis.figures import plots
from harness.analysis.sections import prose
from harness.analysis.sections.answers import Answer, publish
from harness.analysis.sections.display import markdown as _markdown

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
    #: Run statuses pooled besides complete: () or ("partial",) (`harness.analysis.data.pooling`).
    include: tuple[str, ...] = field(default=(), kw_only=True)
    #: The runs of the study's experiments read and not pooled (`pooling.LEFT_OUT`: why).
    left_out: pd.DataFrame = field(default_factory=pd.DataFrame, kw_only=True)
    #: experiment, run_id and status of the runs pooled (read by `load`).
    pooled: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["experiment", "run_id", "status"]),
        kw_only=True)

    #: The study's name in `harness.studies.STUDIES`.
    name: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self.include = pooling.check_include(self.include)  # a notebook's list, checked

    def load(self, experiment: str, *, max_ops: int | None = None, **kw: Any
             ) -> Loaded | None:
        """`experiment`'s runs, pooled with `include`, at most `max_ops` (`FIGURE_OPS`) ops
        held (`kw`: more of `load`'s options); None when it has no run to pool. What was
        left out is added to `left_out`."""
        if experiment not in available_experiments(self.raw_dir):
            return None
        loaded = load(self.raw_dir, experiments=[experiment], include=self.include,
                      max_ops=FIGURE_OPS if max_ops is None else max_ops, **kw)
        if len(loaded.left_out):
            self.left_out = pd.concat([self.left_out, loaded.left_out], ignore_index=True) \
                if len(self.left_out) else loaded.left_out
        if len(loaded.runs):
            runs = loaded.runs[list(self.pooled.columns)]
            self.pooled = pd.concat([self.pooled, runs], ignore_index=True) \
                if len(self.pooled) else runs
        return loaded if len(loaded.runs) else None

    def left_out_note(self, *experiments: str) -> str:
        """`pooling.study_note` of `experiments` (default: all of the study's): partial
        runs pooled and runs left out, with a leading space; or empty."""
        names = list(experiments or self.experiments)

        def mine(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[frame["experiment"].isin(names)] if len(frame) else frame

        note = pooling.study_note(mine(self.left_out), mine(self.pooled), self.include)
        return f" {note[0].upper()}{note[1:]}" if note else ""

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

    def answers(self) -> Any:
        """The section's verdicts for the report's summary of findings (`answer_list`),
        headline claims first; nothing when the study did not run."""
        found = self.answer_list() if self.ran else []
        return publish(found) if found else None

    def answer_list(self) -> list[Answer]:
        """Every claim of the section's family as an `Answer`; a study overrides it."""
        return []

    def not_run(self, *experiments: str, end_section: bool = True) -> Any:
        """The note for absent results. `end_section` marks it so the report ends the
        study's section there; a study with several experiments shows one part's note
        without it, and the other parts still show."""
        names = experiments or self.experiments
        left = self.left_out_note(*names)
        if left:  # runs there are, none to pool: "not run" would send them to run again
            return _markdown(f"**No run to pool** in {', '.join(f'`{e}`' for e in names)}."
                             f"{left}", not_run=end_section)
        lines = " ".join(prose.not_run_sentence(e, str(self.raw_dir)) for e in names)
        specs = ", ".join(f"`harness run {spec}`" for spec in _spec_paths(self.name, names))
        return _markdown(f"**Not run.** {lines} Run {specs} first.", not_run=end_section)

    def status(self) -> Any:
        """What data the section is about, or the not-run note."""
        return self.describe() if self.ran else self.not_run()

    def describe(self) -> Any:
        """The data this section is about (only called when the study ran)."""
        raise NotImplementedError

    def tail_checks(self) -> list[tuple[tails.GroupChecks, tails.Label]]:
        """The study's groups for the heavy-tail check: a list of (`tails.group_checks`
        result, how to word a group's key); none by default. A study names the groups its
        tables show, so the note's percentiles are the ones beside them."""
        return []

    def heavy_tails(self) -> Any:
        """Where `tails.heavy_tail` fires for a group, the note that opens the section:
        the group's percentiles first, and that its mean's interval is unreliable. None
        (nothing shown) where it fires for none."""
        if not self.ran:
            return None
        notes = [n for checks, label in self.tail_checks()
                 if (n := tails.section_note(checks, label)) is not None]
        return _markdown("\n\n".join(notes)) if notes else None

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
