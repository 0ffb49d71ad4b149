"""The report's history section (notebooks/65-history.ipynb): per experiment whose runs
carry a label with enough values (``--label commit=...``), its change points as a table
and a figure; left out of the report where no experiment has such a history."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.analysis.history import changes as history_mod
from harness.analysis.history.runs import points_label, read
from harness.analysis.history.text import md_cell, report_text
from harness.analysis.sections.display import failed_part, markdown

AUTO = "auto"


def section(raw: str | Path, *, by: str | None = AUTO,
            metrics: Sequence[str] = history_mod.DEFAULT_METRICS, alpha: float = 0.05,
            min_effect: float = 0.0, include: Sequence[str] = (),
            figures_dir: str | Path | None = None) -> Any:
    """Display `section_parts`, all but the last, and return the last for the cell."""
    from IPython.display import display

    parts = section_parts(raw, by=by, metrics=metrics, alpha=alpha, min_effect=min_effect,
                          include=include, figures_dir=figures_dir)
    for part in parts[:-1]:
        display(part)
    return parts[-1]


def _histories(raw: Path, by: str | None) -> list[tuple[str, str]]:
    """(experiment, label) of each experiment with a history of `MIN_POINTS_SHOWN`
    points or more (`by` auto: the label `points_label` picks)."""
    runs = read(raw, None, False).runs
    out = []
    for exp in sorted(runs["experiment"].astype(str).unique()) if len(runs) else []:
        mine = runs[runs["experiment"] == exp]
        if by == AUTO:
            label = points_label(mine, history_mod.MIN_POINTS_SHOWN)
        else:
            col = f"label_{by}"
            label = by if by and col in mine and mine[col].nunique() >= \
                history_mod.MIN_POINTS_SHOWN else None
        if label:
            out.append((exp, label))
    return out


def section_parts(raw: str | Path, *, by: str | None = AUTO,
                  metrics: Sequence[str] = history_mod.DEFAULT_METRICS, alpha: float = 0.05,
                  min_effect: float = 0.0, include: Sequence[str] = (),
                  figures_dir: str | Path | None = None) -> list[Any]:
    from harness.analysis.figures.style import publish
    from harness.analysis.history import plots as historyplots

    raw = Path(raw)
    found = _histories(raw, by) if raw.is_dir() else []
    if not found:
        return [markdown(
            f"No history: no experiment's runs carry a label with "
            f"{history_mod.MIN_POINTS_SHOWN} or more values. Label each run with what it "
            "measured (`harness run SPEC --label commit=$(git rev-parse --short HEAD)`) "
            "into one kept tree, and this section shows each configuration over them.",
            omit=True)]
    parts: list[Any] = []
    for exp, label in found:
        try:
            h = history_mod.history(raw, experiments=[exp], by=label, metrics=metrics,
                                    q=alpha, min_effect=min_effect, include=include)
            parts.append(markdown(
                f"### {md_cell(exp)}: {h.points} points by label `{label}`\n\n"
                + report_text(h)))
            if h.series:
                fig = historyplots.figure(h.series, by=label, title=f"{exp} by {label}")
                parts.append(publish(fig, f"history-{exp}",
                                     Path(figures_dir) if figures_dir else None))
        except Exception as exc:  # noqa: BLE001 (one experiment's failure is named, the rest stand)
            parts.append(failed_part(f"the history of experiment `{md_cell(exp)}`", exc))
    return parts
