"""Seaborn figures for notebooks and the report, saved as PNG and SVG.

Each is a `matplotlib.figure.Figure` in the style of `figstyle`, which also saves
them. Every figure has a title, axis labels with units, and its sample counts; bars carry
their confidence intervals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from harness.analysis.figures.style import (
    HEIGHT,
    PNG_DPI,
    WIDTH,
    legend_outside,
    log_ms_axis,
    new_figure,
    png_bytes,
    publish,
    save,
    slug,
    style,
)
from harness.analysis.figures.verdicts import VERDICT_COLOURS, forest, latency_throughput

#: The figure functions, and what they always offered from `figstyle` and `verdictplots`.
__all__ = ["HEIGHT", "PERCENTILE_QS", "PNG_DPI", "VERDICT_COLOURS", "WIDTH", "bars_with_ci",
           "forest", "heatmap", "latency_ecdf", "latency_over_time", "latency_throughput",
           "legend_outside", "log_ms_axis", "new_figure", "per_second", "per_set",
           "percentiles", "png_bytes", "publish", "save", "scaling_lines", "slug", "style"]

def _labels_with_n(counts: pd.Series, unit: str) -> dict[str, str]:
    return {str(k): f"{k} (n = {int(v):,} {unit})" for k, v in counts.items()}


#: The percentiles `percentiles` draws.
PERCENTILE_QS = (0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999)


def _counts(data: pd.DataFrame, hue: str, ops_total: Mapping[str, int] | None) -> pd.Series:
    """Ops per `hue` value for the legend: the drawn ops', or every op's when the drawn
    ones are a sample (`ops_total`)."""
    drawn = data[hue].value_counts()
    if ops_total is None:
        return drawn
    return pd.Series({k: int(ops_total.get(str(k), v)) for k, v in drawn.items()})


def _count_label(v: float, _pos: object = None) -> str:
    """Tick label of an op count: 0, 500, 250k, 1.5M (long integers overlap)."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:g}{unit}"
    return f"{v:g}"


def _sample_note(sample_every: int) -> str:
    """A title's last line saying the ops drawn are a sample ("" when they are all)."""
    return "" if sample_every <= 1 else f"\n(one op in {sample_every:,} of each run drawn)"


def bars_with_ci(
    table: pd.DataFrame,
    x: str,
    *,
    title: str,
    ylabel: str,
    order: Sequence[str] | None = None,
    unit: str = "runs",
    log: bool = False,
    xlabel: str | None = None,
) -> Figure:
    """Bars of ``mean`` per `x` with ``ci_low``/``ci_high`` error bars and n under each bar.

    `table` is a `stats.config_table` or `stats.ratio_table`.
    """
    data = table.copy()
    data[x] = data[x].astype(str)
    if order is not None:
        data = data.set_index(x).loc[[o for o in order if o in set(data[x])]].reset_index()
    fig = new_figure()
    ax = fig.axes[0]
    with style():
        palette = sns.color_palette("colorblind", len(data))
        pos = np.arange(len(data))
        ax.bar(pos, data["mean"], color=palette, edgecolor="0.2", linewidth=0.6)
        # A CI that could not be bounded gets no whisker (an infinite one would wreck
        # the axis); the table beside the figure says why.
        low = data["ci_low"].where(np.isfinite(data["ci_low"]), data["mean"])
        high = data["ci_high"].where(np.isfinite(data["ci_high"]), data["mean"])
        err = np.vstack([data["mean"] - low, high - data["mean"]]).astype(float)
        ax.errorbar(pos, data["mean"], yerr=np.nan_to_num(err, nan=0.0), fmt="none",
                    ecolor="0.1", capsize=4, linewidth=1.2)
        ax.set_xticks(pos, [f"{v}\nn = {n}" for v, n in zip(data[x], data["n"], strict=True)])
    if log:
        ax.set_yscale("log")
        log_ms_axis(ax.yaxis)
    ax.set_ylabel(ylabel)
    ax.set_xlabel(xlabel if xlabel is not None else x)
    ax.set_title(f"{title}\n(bars: mean over {unit}; whiskers: 95% CI)", fontsize=11)
    return fig


def latency_ecdf(
    ops: pd.DataFrame,
    hue: str = "op",
    *,
    title: str,
    order: Sequence[str] | None = None,
    ops_total: Mapping[str, int] | None = None,
    sample_every: int = 1,
) -> Figure:
    """Empirical CDF of per-op latency (ms, log axis), one line per `hue` value. `ops`
    may be every k-th op of each run (`sample_every`; the legend's n are `ops_total`)."""
    data = pd.DataFrame({"latency_ms": ops["latency_ns"].to_numpy() / 1e6,
                         hue: ops[hue].astype(str).to_numpy()})
    counts = _counts(data, hue, ops_total)
    labels = _labels_with_n(counts, "ops")
    data[hue] = data[hue].map(labels)
    hue_order = [labels[o] for o in (order or sorted(counts.index)) if o in labels]
    fig = new_figure()
    ax = fig.axes[0]
    with style():
        sns.ecdfplot(data=data, x="latency_ms", hue=hue, hue_order=hue_order, ax=ax,
                     log_scale=True, palette="colorblind", linewidth=1.6)
    log_ms_axis(ax.xaxis)
    ax.set_xlabel("latency per op [ms] (log scale)")
    ax.set_ylabel("share of ops ≤ latency")
    title += _sample_note(sample_every)
    for q in (0.5, 0.99):
        ax.axhline(q, color="0.5", linestyle=":", linewidth=0.8)
        ax.annotate(f"p{q * 100:g}", (1.0, q), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color="0.4")
    ax.set_title(title, fontsize=11)
    legend = ax.get_legend()
    if legend is not None:  # beside the axes: the curves fill it corner to corner
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0,
                        fontsize=8, title=None)
    return fig


def per_set(
    per_run: pd.DataFrame,
    hue: str = "op",
    value: str = "latency_mean_ms",
    *,
    title: str,
    ylabel: str = "mean time per op [ms] (log scale)",
    order: Sequence[str] | None = None,
    x: str = "repetition",
    log: bool = True,
) -> Figure:
    """The seed's per-set chart: one point per set (run) and configuration, joined by lines."""
    data = per_run[[x, hue, value]].copy()
    data[hue] = data[hue].astype(str)
    counts = data[hue].value_counts()
    labels = _labels_with_n(counts, "sets")
    data[hue] = data[hue].map(labels)
    data[x] = data[x].astype(int)
    hue_order = [labels[o] for o in (order or sorted(counts.index)) if o in labels]
    fig = new_figure()
    ax = fig.axes[0]
    with style():
        sns.lineplot(data=data, x=x, y=value, hue=hue, hue_order=hue_order, marker="o",
                     ax=ax, palette="colorblind", errorbar=None)
    if log:
        ax.set_yscale("log")
        log_ms_axis(ax.yaxis)
    ax.set_xticks(sorted(data[x].unique()))
    ax.set_xlabel("set (repetition)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title=None)
    return fig


def latency_over_time(
    ops: pd.DataFrame,
    hue: str = "op",
    *,
    title: str,
    order: Sequence[str] | None = None,
    window: int = 25,
    x: str = "index",
    ops_total: Mapping[str, int] | None = None,
    sample_every: int = 1,
) -> Figure:
    """Latency of each op against its position in its run (ms, log y), with a rolling
    median per `hue` to show drift or warm-up effects the mean would hide.

    `x` is ``index`` (the op's number within its run, comparable across configurations
    whose runs last very different times) or ``start`` (ms since run start). `ops` may
    be every k-th op of each run (`sample_every`): an op's number is then its rank in
    the sample times k, and the legend's n are `ops_total`.
    """
    if x == "index":
        # Rank of each op's start within its run: vectorised, no per-run Python loop.
        t = (ops.groupby("run_id", observed=True)["start_ns"].rank(method="first") - 1) \
            * sample_every
        xlabel = "op number within run (measured ops)"
    elif x == "start":
        t = ops["start_ns"] / 1e6
        xlabel = "time since run start [ms]"
    else:
        raise ValueError(f"x must be index or start, not {x!r}")
    data = pd.DataFrame({
        "t_ms": t.to_numpy(float),
        "latency_ms": ops["latency_ns"].to_numpy() / 1e6,
        hue: ops[hue].astype(str).to_numpy(),
    })
    counts = _counts(data, hue, ops_total)
    labels = _labels_with_n(counts, "ops")
    keys = [o for o in (order or sorted(counts.index)) if o in labels]
    fig = new_figure()
    ax = fig.axes[0]
    with style():
        palette = dict(zip(keys, sns.color_palette("colorblind", len(keys)), strict=True))
        for key in keys:
            sub = data[data[hue] == key].sort_values("t_ms", kind="stable")
            ax.scatter(sub["t_ms"], sub["latency_ms"], s=4, alpha=0.25, color=palette[key],
                       linewidths=0)
            med = sub["latency_ms"].rolling(window, center=True, min_periods=1).median()
            ax.plot(sub["t_ms"], med, color=palette[key], linewidth=1.6, label=labels[key])
    ax.set_yscale("log")
    log_ms_axis(ax.yaxis)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency per op [ms] (log scale)")
    if x == "index" and len(data) and data["t_ms"].max() >= 10_000:
        ax.xaxis.set_major_formatter(FuncFormatter(_count_label))  # 100k, not 100000
    ax.set_title(f"{title}\n(points: ops of all runs; lines: rolling median of {window})"
                 f"{_sample_note(sample_every)}", fontsize=11)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return fig


def percentiles(
    ops: pd.DataFrame,
    hue: str = "op",
    *,
    title: str,
    order: Sequence[str] | None = None,
    ops_total: Mapping[str, int] | None = None,
    values: Mapping[str, Sequence[float]] | None = None,
) -> Figure:
    """Latency at each percentile up to p99.9, on a log-odds-like tail axis (HdrHistogram
    style): the tail is where configurations differ, so it gets the room. `values`: the
    latencies (ms) at `PERCENTILE_QS` per `hue` value, computed from every op where
    `ops` is only a sample (`queries.group_quantiles`)."""
    qs = np.array(PERCENTILE_QS)
    data = pd.DataFrame({"latency_ms": ops["latency_ns"].to_numpy() / 1e6,
                         hue: ops[hue].astype(str).to_numpy()})
    counts = _counts(data, hue, ops_total)
    labels = _labels_with_n(counts, "ops")
    fig = new_figure()
    ax = fig.axes[0]
    xs = 1 / (1 - qs)
    with style():
        palette = sns.color_palette("colorblind", len(counts))
        keys = [o for o in (order or sorted(counts.index)) if o in labels]
        for color, key in zip(palette, keys, strict=False):
            vals = (np.asarray(values[key], float) if values is not None
                    else np.quantile(data.loc[data[hue] == key, "latency_ms"], qs))
            ax.plot(xs, vals, marker="o", color=color, label=labels[key], linewidth=1.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [f"p{q * 100:g}" for q in qs])
    ax.minorticks_off()
    log_ms_axis(ax.yaxis)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency [ms] (log scale)")
    ax.set_title(title, fontsize=11)
    legend_outside(ax)
    return fig


def scaling_lines(
    table: pd.DataFrame,
    x: str,
    *,
    hue: str | None = None,
    title: str,
    xlabel: str,
    ylabel: str = "throughput [ops/s]",
) -> Figure:
    """``mean`` against `x` (clients, servers, ...) with CI bands, one line per `hue`."""
    fig = new_figure()
    ax = fig.axes[0]
    groups = [(None, table)] if hue is None else list(table.groupby(hue, sort=True))
    with style():
        palette = sns.color_palette("colorblind", len(groups))
        for color, (key, grp) in zip(palette, groups, strict=True):
            grp = grp.sort_values(x)
            n = int(grp["n"].min()) if len(grp) else 0
            label = f"{key} (n ≥ {n} runs)" if key is not None else f"n ≥ {n} runs per point"
            ax.plot(grp[x], grp["mean"], marker="o", color=color, label=label)
            ax.fill_between(grp[x], grp["ci_low"], grp["ci_high"], color=color, alpha=0.2,
                            linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}\n(lines: mean; bands: 95% CI)", fontsize=11)
    legend_outside(ax)
    return fig


def heatmap(
    table: pd.DataFrame,
    index: str,
    columns: str,
    values: str = "mean",
    *,
    title: str,
    label: str,
    fmt: str = ".3g",
    cmap: str = "viridis",
) -> Figure:
    """A grid of `values` (e.g. cache size × strategy), each cell annotated."""
    grid = table.pivot_table(index=index, columns=columns, values=values, aggfunc="mean")
    fig = new_figure(WIDTH, max(2.5, 0.5 * len(grid) + 1.5))
    ax = fig.axes[0]
    with style():
        sns.heatmap(grid, annot=True, fmt=fmt, cmap=cmap, ax=ax, cbar_kws={"label": label},
                    linewidths=0.5)
    ax.set_title(title, fontsize=11)
    return fig


def per_second(series: pd.DataFrame, *, title: str) -> Figure:
    """Two panels sharing the time axis: throughput (ops/s) and p99 (ms, log) per second
    since the runs' start, one line per configuration (`series`: config, second,
    throughput_ops_s, p99_ms, as `generic.analysis.per_second` gives them)."""
    fig = Figure(figsize=(WIDTH, HEIGHT * 1.4), layout="constrained")
    with style():
        top, bottom = fig.subplots(2, 1, sharex=True)
        configs = list(dict.fromkeys(series["config"]))
        palette = dict(zip(configs, sns.color_palette("colorblind", len(configs)),
                           strict=True))
        for config in configs:
            sub = series[series["config"] == config].sort_values("second")
            x = sub["second"].to_numpy(float) + 0.5  # the middle of its second
            top.plot(x, sub["throughput_ops_s"], marker="o", markersize=3,
                     color=palette[config], label=config)
            bottom.plot(x, sub["p99_ms"], marker="o", markersize=3, color=palette[config])
        top.set_ylabel("throughput [ops/s]\n(mean over runs)")
        top.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        bottom.set_yscale("log")
        log_ms_axis(bottom.yaxis)
        bottom.set_ylabel("p99 latency [ms]\n(ops of all runs)")
        bottom.set_xlabel("second since the runs' start (measured ops)")
        fig.suptitle(title, fontsize=11)
        legend_outside(fig)
    return fig
