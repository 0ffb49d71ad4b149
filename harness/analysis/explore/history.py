"""The history of one experiment in JupyterLab: pick the metric and the configuration,
and a zoomable figure of it over time with its change points follows (the numbers are
`harness history`'s). `history_figure` gives the figure without widgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.figures import charts
from harness.analysis.history.changes import DEFAULT_METRICS, METRICS, History, Series, history
from harness.analysis.history.report import AUTO
from harness.analysis.history.runs import points_label, read
from harness.analysis.history.text import UNITS, head
from harness.errors import HarnessError


def load(raw_dir: Path | str, experiment: str, by: str | None = AUTO) -> History:
    """`harness history` of one experiment, all four metrics; `by` auto: the label every
    run carries with the most values (none: one point per run)."""
    if by == AUTO:
        runs = read(Path(raw_dir), [experiment], False).runs
        by = points_label(runs, 2)
    return history(raw_dir, experiments=[experiment], by=by, metrics=tuple(METRICS))


def series_figure(s: Series, by: str | None) -> charts.Figure:
    points = pd.DataFrame([{"i": i, "name": p.name, "value": p.value, "low": p.low,
                            "high": p.high, "runs": p.runs} for i, p in enumerate(s.points)])
    levels = pd.DataFrame([{"start": a - 0.4, "end": b - 0.6, "level": v}
                           for a, b, v in s.levels])
    at = {p.name: i for i, p in enumerate(s.points)}
    changes = pd.DataFrame([{"at": at[c.point] - 0.5, "direction": c.direction,
                             "label": f"{c.direction} at {c.point}: {c.ratio:.3g}x "
                                      f"[{c.ci_low:.3g}, {c.ci_high:.3g}], q = {c.q:.2g}"}
                            for c in s.changes], columns=["at", "direction", "label"])
    xtitle = by or "run"
    return charts.history(points, levels, changes,
                          title=f"{s.experiment} {s.config_id} {s.op}: {s.metric}",
                          xtitle=f"{xtitle} (position in order of first run)",
                          ytitle=f"{s.metric} ({UNITS[s.metric]})",
                          subtitle=f"{len(s.points)} points, {len(s.changes)} change(s)",
                          logy=s.metric != "throughput_ops_s")


def history_figure(raw_dir: Path | str, experiment: str,
                   metric: str = DEFAULT_METRICS[0], by: str | None = AUTO,
                   series: int = 0) -> charts.Figure:
    """One series' figure without widgets (`series`: its index among the experiment's
    configuration x op series)."""
    h = load(raw_dir, experiment, by)
    mine = [s for s in h.series if s.metric == metric]
    if not mine:
        raise HarnessError(f"{experiment}: no series of {metric} (every run left out?)")
    return series_figure(mine[series], h.by)


def explorer(raw_dir: Path | str, experiment: str | None = None, by: str | None = AUTO
             ) -> Any:
    """Widgets: metric and configuration x op; the figure and the changes below
    (`experiment` None: the first under `raw_dir`)."""
    import ipywidgets as widgets

    from harness.analysis.explore.widgets import experiments

    if experiment is None:
        found = experiments(raw_dir)
        if not found:
            raise HarnessError(f"{raw_dir}: no experiments")
        experiment = found[0]
    h = load(raw_dir, experiment, by)
    keys = list(dict.fromkeys((s.config_id, s.op) for s in h.series))
    if not keys:
        raise HarnessError(f"{experiment}: no series to show (every run left out?)")
    metric = widgets.Dropdown(options=list(METRICS), value=DEFAULT_METRICS[0],
                              description="metric")
    which = widgets.Dropdown(options=[(f"{c} {o}", i) for i, (c, o) in enumerate(keys)],
                             value=0, description="series")
    chart = widgets.Output()
    note = widgets.HTML(value=f"<p>{_escape(head(h))}</p>")

    def redraw(_change: Any = None) -> None:
        config, op = keys[which.value]
        s = next(s for s in h.series if (s.config_id, s.op, s.metric)
                 == (config, op, metric.value))
        data, meta = series_figure(s, h.by)._repr_mimebundle_()
        chart.outputs = ({"output_type": "display_data", "data": data, "metadata": meta},)

    metric.observe(redraw, "value")
    which.observe(redraw, "value")
    redraw()
    return widgets.VBox([widgets.HBox([metric, which]), chart, note])


def _escape(text: str) -> str:
    import html

    return html.escape(text)
