"""Figures of what was judged: a comparison's ratios with their intervals (`forest`) and
an offered-load sweep's latency against throughput, with its SLO and the capacity found
(`latency_throughput`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from harness.analysis.figures.style import (
    HEIGHT,
    WIDTH,
    legend_outside,
    log_ms_axis,
    new_figure,
    style,
)


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
    with style():
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
        log_ms_axis(ax.yaxis)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        ax.set_xlabel("achieved throughput [ops/s] (mean over runs)")
        ax.set_ylabel("latency [ms] (from intended start)")
        legend_outside(ax)
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
    with style():
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
        legend_outside(fig)
    return fig
