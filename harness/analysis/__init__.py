"""Everything a notebook needs to turn raw results into numbers, figures and sentences,
grouped by concern. Importing this package loads none of them, so the CLI's `harness
summary` does not pay for matplotlib. The path of a raw-results tree reads one way:

- `data`       the tree, the runs and ops, the one DuckDB pass, summaries
- `stats`      intervals, comparisons, verdicts, families of claims, stationarity
- `checks`     was each measurement sound (the registry, run facts, tails, words)
- `summary_table` `harness summary`'s table: the data, the statistics, the checks
- `figures`    seaborn and Altair figures, their style
- `sections`   the report's own sections (overview, methodology, imported) and what
  sections are made of (prose, tables, display, answers)
- `compare`    `harness compare` and the report's comparison section
- `history`, `explore`, `explain`: performance over time, the JupyterLab explorer, what
  drives the tail

Each study's own analysis is in `harness.studies.<name>`. The modules' old names
(`from harness.analysis import overview`, as notebooks wrote before the grouping) still
import, from `MOVED`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from types import ModuleType

#: Where each module of the flat package went (issue 42): old name -> new module.
MOVED = {
    "intervals": "stats.intervals", "loo": "stats.loo", "multiplicity": "stats.multiplicity",
    "verdict": "stats.verdict", "estimates": "stats.estimates",
    "stationarity": "stats.stationarity", "changepoints": "stats.changepoints",
    "tree": "data.tree", "pooling": "data.pooling", "load": "data.load",
    "summary": "data.summary", "queries": "data.queries", "opsread": "data.opsread",
    "series": "data.series", "stated": "data.stated", "numbers": "data.numbers",
    "summary_ci": "data.summary_ci",
    "checkwords": "checks.words", "runfacts": "checks.runfacts", "tails": "checks.tails",
    "plots": "figures.plots", "charts": "figures.charts", "figstyle": "figures.style",
    "verdictplots": "figures.verdicts", "sweeps": "figures.sweeps",
    "overview": "sections.overview", "methodology": "sections.methodology",
    "provenance": "sections.provenance", "imported": "sections.imported",
    "prose": "sections.prose", "tables": "sections.tables", "display": "sections.display",
    "answers": "sections.answers",
    "history_runs": "history.runs", "history_text": "history.text",
    "history_report": "history.report", "historyplots": "history.plots",
    "explore_data": "explore.data", "explore_history": "explore.history",
    "explain_data": "explain.data", "explain_text": "explain.text",
    "explain_view": "explain.view", "explainplots": "explain.plots",
}


def __getattr__(name: str) -> ModuleType:
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{MOVED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def forward_to(package: str, core: str) -> Callable[[str], object]:
    """A `package`'s module ``__getattr__`` that gives the names of its `core` module (the
    flat module the package grew from: `from harness.analysis import checks` then
    ``checks.CHECKS`` still works). A submodule's name is left to the import system."""

    def getattr_(name: str) -> object:
        if name.startswith("_") or importlib.util.find_spec(f"{package}.{name}") is not None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            return getattr(importlib.import_module(f"{package}.{core}"), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return getattr_
