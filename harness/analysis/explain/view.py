"""`harness explain` as a notebook shows it: the terms in words and the forest plot
(the report's "what drives the tail", and the explore notebook's cell of the same)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.analysis.explain.analysis import explain
from harness.analysis.explain.plots import forest
from harness.analysis.explain.text import head, sentence, shown
from harness.analysis.figures.style import publish
from harness.analysis.sections.display import markdown
from harness.errors import HarnessError


def parts(raw: str | Path, experiment: str, *, alpha: float = 0.05,
          include: Sequence[str] = (), figures_dir: str | Path | None = None,
          heading: str = "### What drives the tail") -> list[Any]:
    """The words (a sentence per significant term, the aliases) and the figure."""
    e = explain(Path(raw), experiment, q=alpha, include=include)
    found = [t for t in e.terms if t.significant]
    lines = [heading, "", head(e), ""]
    if found:
        lines += [f"- {sentence(t)}" for t in found]
    else:
        lines.append("No term is significant: at this many runs no factor's effect on p50 "
                     "or p99 can be told from the run-to-run variation.")
    for alias, with_ in e.aliases:
        lines.append(f"\n`{shown(alias)}` is not estimated on its own: " + (
            f"the runs cannot tell it from `{shown(with_[0])}` (aliased)." if with_ else
            "it is a combination of the terms estimated (configurations are missing)."))
    lines += [f"\nNote: {n}" for n in e.notes]
    fig = forest(e.terms, title=f"{experiment}: what each factor does to p50 and p99")
    return [markdown("\n".join(lines)),
            publish(fig, f"{experiment}-tail-drivers",
                    Path(figures_dir) if figures_dir else None)]


def show(raw: str | Path, experiment: str | None = None, *, alpha: float = 0.05,
         include: Sequence[str] = ()) -> Any:
    """For the explore notebook: display the words, return the figure (`experiment`
    None: the first under `raw`)."""
    from IPython.display import display

    from harness.analysis.explore.widgets import experiments

    name = experiment or experiments(raw)[0]
    try:
        words, figure = parts(raw, name, alpha=alpha, include=include,
                              heading=f"### What drives the tail of `{name}`")
    except HarnessError as exc:  # e.g. a grid that varies one key, or none: said
        return markdown(f"Nothing to explain for `{name}`: {exc}")
    display(words)
    return figure
