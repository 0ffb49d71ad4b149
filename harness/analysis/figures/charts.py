"""Interactive figures that are also static images: Vega-Lite specs built with Altair.

Why Vega-Lite (through Altair): JupyterLab renders it itself, with the Vega renderer it
ships (no extension to install, nothing fetched from the network), and `.interactive()`
makes the axes zoom (wheel) and pan (drag) in the browser with no round trip to the
kernel; and `vl-convert` renders the very same spec to PNG or SVG in-process, with no
browser, so the report, the PDF and any static viewer show the figure the user explored.
(Matplotlib's interactive backends need a widget round trip per zoom; Plotly's and
Bokeh's static export drive a browser.) Altair stays below 6: Altair 6 writes Vega-Lite 6,
which JupyterLab 4's renderer (Vega-Lite 5) does not draw.

Each function takes a frame of numbers already computed (`harness.analysis.explore.widgets`) and
returns a `Figure`, which a notebook displays as the interactive chart with a PNG beside
it in the same output (what nbconvert, the report and GitHub show). Importing this module
does nothing; Altair and vl-convert load on the first call.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from harness import paths

VEGALITE_MIME = "application/vnd.vegalite.v5+json"
#: Width and height of the plotting area in px: the notebook's and the report's column.
WIDTH, HEIGHT = 560, 300
PNG_SCALE = 2
#: How the charts are drawn in JupyterLab: SVG (crisp when zoomed, text a test can read);
#: vega-embed's menu offers PNG/SVG export.
EMBED_OPTIONS = {"renderer": "svg", "actions": {"export": True, "source": True,
                                                 "compiled": False, "editor": False}}
HINT = "wheel: zoom · drag: pan · double-click: reset · click a legend entry: highlight it"


@dataclass(frozen=True)
class Figure:
    """A Vega-Lite spec, shown interactive where the front end draws Vega-Lite and as a
    PNG elsewhere."""

    spec: dict[str, Any]
    title: str

    @cached_property
    def png(self) -> bytes:
        """The figure as PNG, rendered once, without a browser."""
        import vl_convert as vlc

        # No base URL allowed: the data are inline, and rendering never fetches.
        return vlc.vegalite_to_png(self.spec, scale=PNG_SCALE, allowed_base_urls=[])

    def svg(self) -> str:
        import vl_convert as vlc

        return vlc.vegalite_to_svg(self.spec, allowed_base_urls=[])

    def save(self, name: str, figures_dir: Path) -> dict[str, Path]:
        """Write ``<figures_dir>/<name>.png`` and ``.svg``, as `plots.save` does."""
        from harness.analysis.figures.plots import slug  # seaborn and matplotlib: only here

        figures_dir = Path(figures_dir)
        figures_dir.mkdir(parents=True, exist_ok=True)
        return {"png": paths.write_new(figures_dir / f"{slug(name)}.png", self.png),
                "svg": paths.write_new(figures_dir / f"{slug(name)}.svg", self.svg())}

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None
                          ) -> tuple[dict[str, Any], dict[str, Any]]:
        data = {VEGALITE_MIME: self.spec,
                "image/png": base64.b64encode(self.png).decode("ascii"),
                "text/plain": f"<Figure: {self.title}>"}
        return data, {VEGALITE_MIME: {"embed_options": EMBED_OPTIONS}}


def label(values: Sequence[object], by: Sequence[str]) -> str:
    """A configuration's name: ``value_size=100 · appendonly=False`` (``all runs`` for
    no grouping)."""
    return " · ".join(f"{k}={v}" for k, v in zip(by, values, strict=True)) or "all runs"


def _with_labels(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    out = frame.copy()
    out["configuration"] = [label(r, by) for r in frame[list(by)].itertuples(index=False)] \
        if by else "all runs"
    for k in by:
        out[k] = out[k].astype(str)  # a grid value is a category here, never a quantity
    return out


def _finish(chart: Any, title: str, subtitle: str) -> Figure:
    spec = chart.properties(
        width=WIDTH, height=HEIGHT,
        title={"text": title, "subtitle": [subtitle, HINT], "anchor": "start"},
    ).configure_axis(labelFontSize=11, titleFontSize=12).to_dict()
    return Figure(spec, title)


def metric(table: pd.DataFrame, field_name: str, by: Sequence[str], *, title: str,
           axis: str, subtitle: str) -> Figure:
    """Per configuration, the pooled value of `field_name` (a point) and its 95% interval
    (a bar) from `table` (``<field>_ci_low``/``_high`` columns); x is the first grouping
    key, colour the others. Zoom and pan on the value axis."""
    import altair as alt

    data = _with_labels(table, by)
    data = data.rename(columns={field_name: "value", f"{field_name}_ci_low": "low",
                                f"{field_name}_ci_high": "high"})
    data = data[["configuration", *by, "value", "low", "high", "runs", "ops"]]
    x_key = by[0] if by else "configuration"
    rest = list(by[1:])
    if rest:
        data["series"] = [label(r, rest) for r in data[rest].itertuples(index=False)]
    order = list(dict.fromkeys(data[x_key]))
    base = alt.Chart(data).encode(
        x=alt.X(f"{x_key}:N", sort=order, title=x_key, axis=alt.Axis(labelAngle=0)),
        tooltip=[alt.Tooltip("configuration:N"), alt.Tooltip("value:Q", format=",.4~g"),
                 alt.Tooltip("low:Q", format=",.4~g", title="95% CI low"),
                 alt.Tooltip("high:Q", format=",.4~g", title="95% CI high"),
                 alt.Tooltip("runs:Q"), alt.Tooltip("ops:Q", format=",")])
    if rest:
        pick = alt.selection_point(fields=["series"], bind="legend")
        base = base.encode(
            xOffset=alt.XOffset("series:N"),
            color=alt.Color("series:N", title=" · ".join(rest)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
        ).add_params(pick)
    zoom = alt.selection_interval(bind="scales", encodings=["y"])
    y = alt.Y("value:Q", title=axis, scale=alt.Scale(zero=False))
    bars = base.mark_rule(strokeWidth=2).encode(y=alt.Y("low:Q", title=axis), y2="high:Q")
    points = base.mark_point(filled=True, size=70).encode(y=y).add_params(zoom)
    return _finish(alt.layer(bars, points), title, subtitle)


def lines(frame: pd.DataFrame, by: Sequence[str], x: str, y: str, *, title: str,
          xtitle: str, ytitle: str, subtitle: str, logx: bool = False,
          tooltip: Sequence[str] = ()) -> Figure:
    """One line per configuration of `y` against `x` (a latency CDF, a series over
    time); both axes zoom and pan."""
    import altair as alt

    data = _with_labels(frame, by)[["configuration", x, y, *tooltip]]
    pick = alt.selection_point(fields=["configuration"], bind="legend")
    # nice=False: a log axis rounded out to whole decades leaves most of the plot empty.
    xscale = alt.Scale(type="log", nice=False) if logx else alt.Scale(zero=False)
    chart = alt.Chart(data).mark_line(strokeWidth=1.8, point=False).encode(
        x=alt.X(f"{x}:Q", title=xtitle, scale=xscale),
        y=alt.Y(f"{y}:Q", title=ytitle, scale=alt.Scale(zero=False)),
        color=alt.Color("configuration:N", title=" · ".join(by) or None,
                        legend=alt.Legend(orient="bottom", columns=2, labelLimit=400)),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
        tooltip=[alt.Tooltip("configuration:N"),
                 alt.Tooltip(f"{x}:Q", format=",.4~g", title=xtitle),
                 alt.Tooltip(f"{y}:Q", format=",.4~g", title=ytitle),
                 *(alt.Tooltip(f"{t}:Q", format=",") for t in tooltip)],
    ).add_params(pick).interactive()
    return _finish(chart, title, subtitle)


def history(points: pd.DataFrame, levels: pd.DataFrame, changes: pd.DataFrame, *,
            title: str, xtitle: str, ytitle: str, subtitle: str, logy: bool) -> Figure:
    """A series over its points: each point's value (a dot) and 95% interval (a bar), the
    level of each stretch between changes (a line) and each change (a dashed rule, red
    worse, green better, its ratio in the tooltip). `points`: ``i, name, value, low,
    high, runs``; `levels`: ``start, end, level`` (positions); `changes`: ``at, label,
    direction``. Both axes zoom and pan."""
    import altair as alt

    x = alt.X("i:Q", title=xtitle, axis=alt.Axis(tickMinStep=1, format="d"))
    yscale = alt.Scale(type="log") if logy else alt.Scale(zero=False)
    base = alt.Chart(points).encode(
        x=x, tooltip=[alt.Tooltip("name:N", title=xtitle),
                      alt.Tooltip("value:Q", format=",.4~g"),
                      alt.Tooltip("low:Q", format=",.4~g", title="95% CI low"),
                      alt.Tooltip("high:Q", format=",.4~g", title="95% CI high"),
                      alt.Tooltip("runs:Q")])
    bars = base.mark_rule(color="#7f8c8d").encode(y=alt.Y("low:Q", title=ytitle,
                                                         scale=yscale), y2="high:Q")
    dots = base.mark_point(filled=True, size=40, color="#34495e").encode(
        y=alt.Y("value:Q", title=ytitle, scale=yscale)).interactive()
    lv = alt.Chart(levels).mark_rule(strokeWidth=2, color="#2c3e50", opacity=0.6).encode(
        x="start:Q", x2="end:Q", y="level:Q")
    layers = [bars, dots, lv]
    if len(changes):
        layers.append(alt.Chart(changes).mark_rule(strokeDash=[5, 3]).encode(
            x="at:Q", tooltip=[alt.Tooltip("label:N", title="change")],
            color=alt.Color("direction:N", scale=alt.Scale(
                domain=["worse", "better"], range=["#c0392b", "#1e8449"]),
                title="change")))
    return _finish(alt.layer(*layers), title, subtitle)
