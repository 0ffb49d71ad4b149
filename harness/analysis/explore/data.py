"""What the explorer shows (`harness.analysis.explore.widgets`: the widgets): per experiment and
grouping, the figures and the numbers behind them, each computed once.

Every number is `harness summary`'s, from the same function
(`summary_table.summarise_tree`: runs pooled as everywhere, intervals over runs), asked
for p99.9 and goodput's interval as well; the latency CDF is each configuration's
quantiles from every op (`queries.group_quantiles`), the series over time
`series.over_time`. Figures are Vega-Lite (`harness.analysis.figures.charts`: why).

Importing this module does nothing; Altair loads when a figure is drawn.
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.data import pooling, queries, series, stated, summary_ci
from harness.analysis.data.load import check_experiments, load_runs_only
from harness.analysis.figures import charts
from harness.analysis.sections import tables
from harness.analysis.summary_table import summarise_tree
from harness.errors import ResultsError


@dataclass(frozen=True)
class View:
    """One choice of the "show" menu: what is drawn, from which column, on which axis."""

    label: str
    kind: str  # "metric" (per configuration, with intervals), "cdf" or "time"
    column: str
    axis: str


VIEWS: dict[str, View] = {
    "throughput": View("throughput", "metric", "throughput_ops_s", "throughput [ops/s]"),
    "goodput": View("goodput (answered ops)", "metric", "goodput_ops_s", "goodput [ops/s]"),
    "mean": View("mean latency", "metric", "latency_mean_ms", "mean latency [ms]"),
    "p50": View("p50 latency", "metric", "latency_p50_ms", "p50 latency [ms]"),
    "p99": View("p99 latency", "metric", "latency_p99_ms", "p99 latency [ms]"),
    "p99.9": View("p99.9 latency", "metric", "latency_p999_ms", "p99.9 latency [ms]"),
    "cdf": View("latency CDF per configuration", "cdf", "latency_ms",
                "share of ops ≤ latency"),
    "throughput_over_time": View("throughput over time", "time", "throughput_ops_s",
                                 "throughput [ops/s]"),
    "p99_over_time": View("p99 latency over time", "time", "latency_p99_ms",
                          "p99 latency [ms]"),
}
#: The summary's fields the numbers table shows, and those with an interval (`harness
#: summary`'s four, plus p99.9 as the report's tables give it, plus goodput).
FIELDS: tuple[str, ...] = ("runs", "ops", "throughput_ops_s", "goodput_ops_s",
                           "latency_mean_ms", "latency_p50_ms", "latency_p99_ms",
                           "latency_p999_ms", "error_rate")
METRICS: dict[str, float | None] = {**summary_ci.TABLE_METRICS, "goodput_ops_s": None}
HEADERS = {"runs": "runs", "ops": "ops", "throughput_ops_s": "throughput ops/s",
           "goodput_ops_s": "goodput ops/s", "latency_mean_ms": "mean ms",
           "latency_p50_ms": "p50 ms", "latency_p99_ms": "p99 ms",
           "latency_p999_ms": "p99.9 ms", "error_rate": "errors"}
#: Where the CDF is drawn: every 1% of ops, and the tail finer (p99.1 ... p99.99).
CDF_QS: tuple[float, ...] = tuple(np.unique(np.round(np.concatenate(
    [np.linspace(0, 0.99, 100), np.linspace(0.991, 0.999, 9), [0.9995, 0.9999, 1.0]]), 6)))
INCLUDE_HINT = "include=[\"partial\"] adds the partial ones"
CI_NOTE = ("value [low, high]: pooled over the runs, with its 95% interval over runs "
           "(none with one run, or for a percentile with too few ops beyond it)")


class Experiment:
    """One experiment's pooled runs, and its numbers and figures per grouping (each
    computed once: the widgets ask again as the user goes back and forth)."""

    def __init__(self, raw_dir: Path | str, name: str, include: Sequence[str] = ()) -> None:
        self.raw_dir, self.name = Path(raw_dir), name
        self.include = pooling.check_include(include)
        check_experiments(self.raw_dir, [name])
        self.loaded = load_runs_only(self.raw_dir, experiments=[name], include=self.include)
        if self.loaded.runs.empty:
            left = pooling.line(self.loaded.left_out, self.include, INCLUDE_HINT)
            raise ResultsError(f"{name}: no run to pool ({left})")
        self._cache: dict[tuple[str, tuple[str, ...]], Any] = {}

    @property
    def keys(self) -> list[str]:
        """What the figures may be grouped by: the grid keys, then the op."""
        grid = [k for k in self.loaded.grid_keys if k != "experiment"]
        return [*grid, *(["op"] if "op" not in grid else [])]

    @property
    def default_by(self) -> list[str]:
        """The grid keys: one row per configuration, as `harness summary` groups."""
        return [k for k in self.keys if k != "op"] or ["op"]

    def check_by(self, by: Sequence[str]) -> list[str]:
        """`by` as a list; a key the experiment has not is one line naming those it has."""
        for key in by:
            if key not in self.keys:
                close = difflib.get_close_matches(key, self.keys, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ResultsError(f"{self.name}: no grouping key {key!r}{hint}; keys: "
                                   f"{', '.join(self.keys)}")
        return list(by)

    def _cached(self, what: str, by: Sequence[str], make: Any) -> Any:
        key = (what, tuple(by))
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def numbers(self, by: Sequence[str]) -> pd.DataFrame:
        """`harness summary`'s table (with intervals) of FIELDS for grouping `by`."""
        return self._cached("numbers", by, lambda: summarise_tree(
            self.raw_dir, list(by), experiments=[self.name], intervals=True,
            include=self.include, fields=FIELDS, metrics=METRICS).table)

    def quantiles(self, by: Sequence[str]) -> pd.DataFrame:
        """Per configuration its ops and the latency (ms) at each of `CDF_QS`."""
        return self._cached("cdf", by, lambda: queries.group_quantiles(
            self.loaded, list(by), CDF_QS))

    def over_time(self, by: Sequence[str]) -> pd.DataFrame:
        """`series.over_time` with one bin length for the whole experiment."""
        return self._cached("time", by, lambda: series.over_time(
            self.loaded, list(by), self.bin_s))

    @property
    def aggregated(self) -> bool:
        """Whether some run is an import with aggregated records (every op at its mean:
        `stated`), whose per-op latencies would draw a CDF or series of nothing."""
        return self._cached("aggregated", (), lambda: bool(
            stated._aggregated_runs(self.loaded.runs)))

    @property
    def bin_s(self) -> float:
        return self._cached("bin", (), lambda: series.nice_bin(series.run_span_s(self.loaded)))

    def describe(self) -> str:
        """What was measured and pooled, in a line: runs, load shape, runs left out."""
        runs = self.loaded.runs
        parts = [f"{len(runs)} runs of <b>{html.escape(self.name)}</b> pooled"]
        shape = load_shape(runs)
        if shape:
            parts.append(shape)
        left = pooling.line(self.loaded.left_out, self.include, INCLUDE_HINT)
        return " · ".join([*parts, *([html.escape(left)] if left else [])])

    def figure(self, name: str, by: Sequence[str]) -> charts.Figure:
        """The figure of view `name` (a key of VIEWS) grouped by `by`."""
        v = view(name)
        by = self.check_by(by)
        if v.kind != "metric" and self.aggregated:
            raise ResultsError(
                f"{self.name}: its imported runs hold a count and a mean per op, not each "
                f"op's latency, so there is no {v.label} to draw; the metrics per "
                "configuration show the tool's stated percentiles")
        if v.kind == "metric":
            return charts.metric(
                self.numbers(by), v.column, by, title=f"{self.name}: {v.label}",
                axis=v.axis, subtitle="point: pooled over runs; bar: 95% interval over runs")
        if v.kind == "cdf":
            q = self.quantiles(by)
            long = q.melt(id_vars=[*by, "ops"], value_vars=list(CDF_QS), var_name="share",
                          value_name="latency_ms")
            long["share"] = long["share"].astype(float)
            long = long[long["latency_ms"] > 0]  # a log axis has no 0
            return charts.lines(
                long, by, "latency_ms", "share", title=f"{self.name}: latency CDF",
                xtitle="latency per op [ms] (log scale)", ytitle=v.axis, logx=True,
                tooltip=["ops"], subtitle="every measured op of the pooled runs")
        frame = self.over_time(by)
        return charts.lines(
            frame, by, "t_s", v.column, title=f"{self.name}: {v.label}",
            xtitle="time since run start [s]", ytitle=v.axis, tooltip=["runs", "ops"],
            subtitle=f"bins of {self.bin_s:g} s by when each op began; the runs of a "
                     "configuration pooled per bin")

    def numbers_html(self, by: Sequence[str]) -> str:
        """The numbers behind the figures: a table, value [low, high] per metric."""
        by = self.check_by(by)
        table = self.numbers(by)
        reasons = summary_ci.no_ci_reasons(table, METRICS)
        shown = summary_ci.with_bracketed_ci(table, list(METRICS))
        shown = shown[[*by, *FIELDS]]
        shown["error_rate"] = [tables.pct()(v) for v in table["error_rate"]]
        body = tables.to_html(shown, headers=HEADERS, numeric=list(FIELDS),
                              formats={c: tables.human for c in ("runs", "ops")},
                              caption=f"{self.name}, grouped by {', '.join(by) or 'nothing'}")
        notes = "".join(f"<br>{html.escape(r)}" for r in reasons)
        return f'{body}<p class="kv-note"><small>{CI_NOTE}{notes}</small></p>'


def load_shape(runs: pd.DataFrame) -> str:
    """How the load was offered, from the manifests: ``closed loop, 1 process x 1
    connection x 1 in flight`` (a value the grid varies lists each one)."""
    def values(col: str) -> str:
        found = sorted(set(runs[col].dropna())) if col in runs else []
        return "/".join(map(str, found)) or "?"

    if "loadgen_mode" not in runs:
        return ""  # an import without a load generator's description
    return (f"{values('loadgen_mode')} loop, {values('loadgen_processes')} process(es) x "
            f"{values('loadgen_connections')} connection(s) x "
            f"{values('loadgen_inflight')} in flight")


def view(name: str) -> View:
    """The view of that name; a name that is none is one line naming those there are."""
    if name not in VIEWS:
        raise ResultsError(f"no view {name!r}; views: {', '.join(VIEWS)}")
    return VIEWS[name]
