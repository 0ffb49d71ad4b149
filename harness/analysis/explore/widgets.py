"""Explore a raw-results tree in JupyterLab: pick the experiment, what to show and the
grouping with widgets, and get a zoomable figure and the numbers behind it.

``explorer(raw_dir)`` returns the widgets (notebooks/explore.ipynb shows them);
``figure(raw_dir, experiment, view, by)`` and ``numbers(...)`` give one figure or table
without widgets (they render without a browser too: `harness.analysis.figures.charts`). What is
drawn and counted is `harness.analysis.explore.data`'s: `harness summary`'s numbers.

Importing this module does nothing: ipywidgets and IPython load on call.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.analysis.data.load import available_experiments, check_experiments
from harness.analysis.explore.data import VIEWS, Experiment, view
from harness.analysis.figures import charts
from harness.errors import HarnessError

#: CSS classes the page can be searched by (and a browser test does).
ERROR_CLASS = "kv-explore-error"
#: The numbers table in the widget: the report's stylesheet is not loaded in JupyterLab.
TABLE_STYLE = """<style>
.kv-explorer table.kv-table {border-collapse: collapse; font-size: 12px; margin-top: 6px}
.kv-explorer table.kv-table caption {text-align: left; font-weight: bold; padding: 4px 0}
.kv-explorer table.kv-table th, .kv-explorer table.kv-table td {
  padding: 2px 8px; border-bottom: 1px solid var(--jp-border-color2, #ddd)}
.kv-explorer table.kv-table .num {text-align: right; font-variant-numeric: tabular-nums}
</style>"""


class Explorer:
    """`box` is what the notebook displays; changing any menu redraws the figure and the
    table in place."""

    def __init__(self, raw_dir: Path, names: Sequence[str], first: Experiment, shown: str,
                 by: Sequence[str] | None) -> None:
        import ipywidgets as widgets

        self.raw_dir, self.include = raw_dir, first.include
        self._loaded: dict[str, Experiment] = {first.name: first}
        self.experiment = widgets.Dropdown(options=list(names), value=first.name,
                                           description="experiment")
        self.view = widgets.Dropdown(options=[(v.label, k) for k, v in VIEWS.items()],
                                     value=shown, description="show")
        self.keys = widgets.HBox([])
        self.status = widgets.HTML()
        self.chart = widgets.Output()
        self.table = widgets.HTML()
        self.log = widgets.Output()  # an unexpected error's traceback lands here, visibly
        self.box = widgets.VBox([
            widgets.HBox([self.experiment, self.view]),
            widgets.HBox([widgets.Label("group by:"), self.keys]),
            self.status, self.chart, self.table, self.log])
        self.box.add_class("kv-explorer")
        self._set_keys(by)
        self.experiment.observe(self._on_experiment, "value")
        self.view.observe(self._redraw, "value")
        self._redraw()

    def _experiment(self) -> Experiment:
        name = self.experiment.value
        if name not in self._loaded:
            self._loaded[name] = Experiment(self.raw_dir, name, self.include)
        return self._loaded[name]

    def _set_keys(self, by: Sequence[str] | None) -> None:
        """One checkbox per grouping key of the experiment, ticked for `by`."""
        import ipywidgets as widgets

        with self.log:
            try:
                exp = self._experiment()
            except HarnessError as exc:
                self._fail(exc)
                self.keys.children = ()
                return
            wanted = exp.default_by if by is None else list(by)
            boxes = [widgets.Checkbox(value=k in wanted, description=k, indent=False,
                                      layout=widgets.Layout(width="auto"))
                     for k in exp.keys]
            for box in boxes:
                box.observe(self._redraw, "value")
            self.keys.children = tuple(boxes)

    @property
    def by(self) -> list[str]:
        return [box.description for box in self.keys.children if box.value]

    def _on_experiment(self, _change: Any = None) -> None:
        self._set_keys(None)
        self._redraw()

    def _redraw(self, _change: Any = None) -> None:
        with self.log:
            self.status.value = "<i>computing…</i>"
            try:
                exp = self._experiment()
                fig = exp.figure(self.view.value, self.by)
                table = exp.numbers_html(self.by)
            except HarnessError as exc:  # a tree or experiment that says what is wrong
                self._fail(exc)
                return
            data, meta = fig._repr_mimebundle_()
            # One state change replaces the figure: no flicker, no message routing.
            self.chart.outputs = ({"output_type": "display_data", "data": data,
                                   "metadata": meta},)
            self.table.value = TABLE_STYLE + table
            self.status.value = exp.describe()

    def _fail(self, exc: HarnessError) -> None:
        self.chart.outputs = ()
        self.table.value = ""
        self.status.value = f'<span class="{ERROR_CLASS}">{html.escape(str(exc))}</span>'


def experiments(raw_dir: Path | str) -> list[str]:
    """The experiments under `raw_dir` (imported ones included)."""
    return available_experiments(Path(raw_dir))


def _experiment(raw_dir: Path | str, experiment: str | None,
                include: Sequence[str]) -> Experiment:
    check_experiments(Path(raw_dir), [experiment] if experiment else None)
    return Experiment(raw_dir, experiment or experiments(raw_dir)[0], include)


def figure(raw_dir: Path | str, experiment: str | None = None, shown: str = "throughput",
           by: Sequence[str] | None = None, include: Sequence[str] = ()) -> charts.Figure:
    """One figure without widgets (`shown`: a key of `VIEWS`; `experiment` None: the
    first; `by` None: the grid keys). `.save(name, figures_dir)` writes PNG and SVG."""
    exp = _experiment(raw_dir, experiment, include)
    return exp.figure(shown, exp.default_by if by is None else by)


def numbers(raw_dir: Path | str, experiment: str | None = None,
            by: Sequence[str] | None = None, include: Sequence[str] = ()) -> Any:
    """The numbers table without widgets, for a notebook cell."""
    from IPython.display import HTML

    exp = _experiment(raw_dir, experiment, include)
    return HTML(exp.numbers_html(exp.default_by if by is None else by))


def explorer(raw_dir: Path | str, experiment: str | None = None, shown: str = "throughput",
             by: Sequence[str] | None = None, include: Sequence[str] = ()) -> Any:
    """The widgets: experiment, what to show and the grouping; the figure and its numbers
    below. `experiment` None: the first; `by` None: the experiment's grid keys."""
    # A typo in the notebook's parameters is one line here, not a broken widget.
    first = _experiment(raw_dir, experiment, include)
    view(shown)
    if by is not None:
        first.check_by(by)
    return Explorer(Path(raw_dir), experiments(raw_dir), first, shown, by).box
