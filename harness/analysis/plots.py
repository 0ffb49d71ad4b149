"""Seaborn figures for notebooks and the report, saved as PNG and SVG.

Figures are built on `matplotlib.figure.Figure` directly, never through pyplot, so no
backend is chosen or switched (nothing happens at import, and saving works headless).
Every figure has a title, axis labels with units, and its sample counts; bars carry
their confidence intervals.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

#: Default figure size in inches; the report shows figures at the text width.
WIDTH, HEIGHT = 7.5, 4.0
PNG_DPI = 150


@contextlib.contextmanager
def _style() -> Iterator[None]:
    # Themes are applied per figure in a context, so importing this module sets nothing.
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.95):
        yield


def new_figure(width: float = WIDTH, height: float = HEIGHT) -> Figure:
    with _style():
        fig = Figure(figsize=(width, height), layout="constrained")
        fig.add_subplot()
    return fig


def _log_ms_axis(axis) -> None:
    """Label 1-2-5 steps on a log axis: bare decades leave a 0.1-2 ms range unreadable."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


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
    with _style():
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
        _log_ms_axis(ax.yaxis)
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
    with _style():
        sns.ecdfplot(data=data, x="latency_ms", hue=hue, hue_order=hue_order, ax=ax,
                     log_scale=True, palette="colorblind", linewidth=1.6)
    _log_ms_axis(ax.xaxis)
    ax.set_xlabel("latency per op [ms] (log scale)")
    ax.set_ylabel("share of ops ≤ latency")
    title += _sample_note(sample_every)
    for q in (0.5, 0.99):
        ax.axhline(q, color="0.5", linestyle=":", linewidth=0.8)
        ax.annotate(f"p{q * 100:g}", (1.0, q), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color="0.4")
    ax.set_title(title, fontsize=11)
    legend = ax.get_legend()
    if legend is not None:
        legend.set_title(None)
        sns.move_legend(ax, "lower right", fontsize=8, title=None)
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
    with _style():
        sns.lineplot(data=data, x=x, y=value, hue=hue, hue_order=hue_order, marker="o",
                     ax=ax, palette="colorblind", errorbar=None)
    if log:
        ax.set_yscale("log")
        _log_ms_axis(ax.yaxis)
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
    with _style():
        palette = dict(zip(keys, sns.color_palette("colorblind", len(keys)), strict=True))
        for key in keys:
            sub = data[data[hue] == key].sort_values("t_ms", kind="stable")
            ax.scatter(sub["t_ms"], sub["latency_ms"], s=4, alpha=0.25, color=palette[key],
                       linewidths=0)
            med = sub["latency_ms"].rolling(window, center=True, min_periods=1).median()
            ax.plot(sub["t_ms"], med, color=palette[key], linewidth=1.6, label=labels[key])
    ax.set_yscale("log")
    _log_ms_axis(ax.yaxis)
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
    with _style():
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
    _log_ms_axis(ax.yaxis)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency [ms] (log scale)")
    ax.set_title(title, fontsize=11)
    ax.legend(loc="upper left", fontsize=8)
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
    with _style():
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
    ax.legend(fontsize=8)
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
    with _style():
        sns.heatmap(grid, annot=True, fmt=fmt, cmap=cmap, ax=ax, cbar_kws={"label": label},
                    linewidths=0.5)
    ax.set_title(title, fontsize=11)
    return fig


def per_second(series: pd.DataFrame, *, title: str) -> Figure:
    """Two panels sharing the time axis: throughput (ops/s) and p99 (ms, log) per second
    since the runs' start, one line per configuration (`series`: config, second,
    throughput_ops_s, p99_ms, as `generic.analysis.per_second` gives them)."""
    fig = Figure(figsize=(WIDTH, HEIGHT * 1.4), layout="constrained")
    with _style():
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
        _log_ms_axis(bottom.yaxis)
        bottom.set_ylabel("p99 latency [ms]\n(ops of all runs)")
        bottom.set_xlabel("second since the runs' start (measured ops)")
        fig.suptitle(title, fontsize=11)
        top.legend(fontsize=8, loc="best")
    return fig


def latency_throughput(curve: pd.DataFrame, *, title: str,
                       slo: Sequence[tuple[str, float]] = (),
                       capacity_ops_s: float | None = None,
                       capacity_ci: tuple[float | None, float | None] | None = None,
                       series: str | None = None) -> Figure:
    """The latency-throughput curve of an offered-load sweep: p50, p99 and p99.9 (ms,
    log) against the achieved throughput, each point with its 95% interval over runs
    (`curve`: achieved_ops_s and <p>_ms, <p>_ms_ci_low/high for p in p50, p99, p999;
    missing columns are skipped; `series` names a column whose values get their own
    lines, e.g. two trees), the SLO's limits as horizontal lines and the capacity found
    as a vertical line with its interval shaded."""
    fig = new_figure(WIDTH, HEIGHT * 1.15)
    with _style():
        ax = fig.axes[0]
        names = {"p50": "p50", "p99": "p99", "p999": "p99.9"}
        groups = [(None, curve)] if series is None else list(curve.groupby(series, sort=False))
        palette = sns.color_palette("colorblind", 3 * max(len(groups), 1))
        styles = {"p50": ":", "p99": "-", "p999": "--"}
        i = 0
        for key, part in groups:
            part = part.sort_values("achieved_ops_s")
            x = part["achieved_ops_s"].to_numpy(float)
            for p, name in names.items():
                col = f"{p}_ms"
                if col not in part or part[col].isna().all():
                    continue
                y = part[col].to_numpy(float)
                lo = part.get(f"{col}_ci_low", pd.Series(np.nan, index=part.index)).to_numpy(
                    float)
                hi = part.get(f"{col}_ci_high", pd.Series(np.nan, index=part.index)).to_numpy(
                    float)
                err = np.vstack([np.where(np.isnan(lo), 0, y - lo),
                                 np.where(np.isnan(hi), 0, hi - y)])
                label = name if key is None else f"{key}: {name}"
                ax.errorbar(x, y, yerr=err, marker="o", markersize=3.5, capsize=2.5,
                            linestyle=styles[p], color=palette[i % len(palette)],
                            label=label)
                i += 1
        for metric, limit_ms in slo:
            ax.axhline(limit_ms, color="#d95f02", linewidth=1, linestyle="-.")
            ax.annotate(f"SLO {metric} < {limit_ms:g} ms", (0.01, limit_ms),
                        xycoords=("axes fraction", "data"), textcoords="offset points",
                        xytext=(0, 3), fontsize=8, color="#d95f02")
        if capacity_ops_s is not None:
            ax.axvline(capacity_ops_s, color="#333333", linewidth=1)
            if capacity_ci and capacity_ci[0] is not None and capacity_ci[1] is not None:
                ax.axvspan(capacity_ci[0], capacity_ci[1], color="#999999", alpha=0.2,
                           linewidth=0)
            ax.annotate(f"capacity {capacity_ops_s:,.0f} ops/s", (capacity_ops_s, 0.98),
                        xycoords=("data", "axes fraction"), rotation=90, va="top",
                        ha="right", fontsize=8)
        ax.set_yscale("log")
        _log_ms_axis(ax.yaxis)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        ax.set_xlabel("achieved throughput [ops/s] (mean over runs)")
        ax.set_ylabel("latency [ms] (from intended start)")
        ax.legend(fontsize=8, loc="upper left", ncols=2 if i > 3 else 1)
        ax.set_title(title + "\nbars: 95% interval over runs (none where a run has too few "
                     "ops beyond the percentile)", fontsize=10)
    return fig


#: Colours of `forest`'s verdicts (colour-blind safe: blue, orange, grey, light grey).
VERDICT_COLOURS = {"better": "#1f77b4", "worse": "#d95f02",
                   "no significant difference": "#555555", "inconclusive": "#aaaaaa"}


def forest(table: pd.DataFrame, by: Sequence[str], *, threshold: float,
           title: str = "Candidate against base: ratio and its interval per row") -> Figure:
    """One row per group and metric of a `compare` table: the ratio cand/base (log axis)
    with its interval as printed beside it, coloured by verdict, the line of no change
    and the ±`threshold` band inside which a row can be 'no significant difference'."""
    rows = table.reset_index(drop=True)
    labels = [" · ".join([*(str(r[k]) for k in by), str(r["metric"])])
              for _, r in rows.iterrows()]
    fig = new_figure(WIDTH, max(2.2, 0.32 * len(rows) + 1.2))
    ax = fig.axes[0]
    with _style():
        ax.axvspan(1 - threshold, 1 + threshold, color="#e8e8e8", zorder=0,
                   label=f"±{threshold:.0%}: no practical difference")
        ax.axvline(1.0, color="#333333", linewidth=0.8, zorder=1)
        y = np.arange(len(rows))[::-1]
        for verdict_name, colour in VERDICT_COLOURS.items():
            sel = (rows["verdict"] == verdict_name).to_numpy()
            if not sel.any():
                continue
            est = rows.loc[sel, "ratio"].to_numpy(float)
            lo = rows.loc[sel, "ratio_ci_low"].to_numpy(float)
            hi = rows.loc[sel, "ratio_ci_high"].to_numpy(float)
            has = ~np.isnan(lo)
            ax.errorbar(est[has], y[sel][has], xerr=[est[has] - lo[has], hi[has] - est[has]],
                        fmt="o", color=colour, capsize=3, markersize=5,
                        label=f"{verdict_name} ({int(sel.sum())})", zorder=3)
            if (~has).any():  # no interval (one run, too few ops): the estimate alone
                ax.plot(est[~has], y[sel][~has], "o", mfc="none", color=colour, zorder=3)
        ax.set_xscale("log")
        # An interval from a handful of tail ops can span decades; the axis follows the
        # estimates (x50 either way) and a clipped end is drawn as an arrow.
        est = rows["ratio"].to_numpy(float)
        lo_lim = min(np.nanmin(est) / 50, 1 / (1 + 2 * threshold))
        hi_lim = max(np.nanmax(est) * 50, 1 + 2 * threshold)
        ax.set_xlim(lo_lim, hi_lim)
        for yi, (low, high) in zip(y, rows[["ratio_ci_low", "ratio_ci_high"]].to_numpy(float),
                                   strict=True):
            if low < lo_lim:
                ax.annotate("", (lo_lim, yi), (lo_lim * 1.6, yi),
                            arrowprops={"arrowstyle": "->", "color": "#777777"})
            if high > hi_lim:
                ax.annotate("", (hi_lim, yi), (hi_lim / 1.6, yi),
                            arrowprops={"arrowstyle": "->", "color": "#777777"})
        ax.set_yticks(y, labels, fontsize=8)
        ax.set_xlabel("ratio cand / base (log scale)\nthroughput: > 1 is faster; latency: "
                      "< 1 is faster")
        ax.set_title(title, fontsize=11)
        ax.legend(fontsize=8, loc="best", frameon=True)
    return fig


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def save(fig: Figure, name: str, figures_dir: Path) -> dict[str, Path]:
    """Write `fig` as ``<figures_dir>/<name>.png`` and ``.svg``; returns both paths."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for ext in ("png", "svg"):
        path = figures_dir / f"{slug(name)}.{ext}"
        fig.savefig(path, dpi=PNG_DPI if ext == "png" else None, metadata=_metadata(ext))
        out[ext] = path
    return out


def _metadata(ext: str) -> dict[str, str | None]:
    # No creation dates: regenerated figures are byte-identical when nothing changed.
    return {"Date": None} if ext == "svg" else {"Software": None}


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI)
    return buf.getvalue()


def publish(fig: Figure, name: str, figures_dir: Path | None):
    """Save `fig` (if `figures_dir`) and return an IPython Image of it for the notebook."""
    from IPython.display import Image  # only notebooks call this; keep imports light

    if figures_dir is not None:
        save(fig, name, figures_dir)
    return Image(data=png_bytes(fig), format="png", width=int(WIDTH * 96))
