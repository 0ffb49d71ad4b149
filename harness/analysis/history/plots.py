"""The history figure: per configuration and op (rows) and metric (columns), each point's
pooled value with its 95% interval over its runs, the level of each stretch between
changes, and every change marked with its ratio and interval."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from harness.analysis.figures.style import WIDTH, log_ms_axis, style
from harness.analysis.history.changes import Series
from harness.analysis.history.text import UNITS
from harness.text import printable

#: Rows drawn per figure (configurations x ops); the rest are said under it.
MAX_ROWS = 6
_TITLES = {"throughput_ops_s": "throughput", "latency_mean_ms": "mean latency",
           "latency_p50_ms": "p50 latency", "latency_p99_ms": "p99 latency"}
_WORSE, _BETTER = "#c0392b", "#1e8449"
#: Tick labels shown along x at most (every k-th point beyond).
_MAX_TICKS = 12


def _short(text: str, n: int = 28) -> str:
    text = printable(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def figure(series: Sequence[Series], *, by: str | None, title: str) -> Figure:
    """One experiment's history (its series, at most `MAX_ROWS` configuration x op rows)."""
    rows = list(dict.fromkeys((s.config_id, s.op) for s in series))[:MAX_ROWS]
    metrics = list(dict.fromkeys(s.metric for s in series))
    cell = {(s.config_id, s.op, s.metric): s for s in series}
    with style():
        fig = Figure(figsize=(WIDTH, 1.0 + 2.1 * len(rows)), layout="constrained")
        axes = fig.subplots(len(rows), len(metrics), squeeze=False, sharex=True)
        for r, (config, op) in enumerate(rows):
            for c, metric in enumerate(metrics):
                ax = axes[r][c]
                s = cell.get((config, op, metric))
                if s is None:
                    ax.set_visible(False)
                    continue
                _panel(ax, s)
                ax.set_title(f"{_short(config, 22)} {_short(op, 10)}: {_TITLES[metric]}",
                             fontsize=8)
                ax.set_ylabel(UNITS[metric], fontsize=8)
                if r == len(rows) - 1:
                    ax.set_xlabel(f"{by} (in order of first run)" if by else
                                  "run (in order of start)", fontsize=8)
        fig.suptitle(title, fontsize=10)
    return fig


def _panel(ax, s: Series) -> None:
    x = np.arange(len(s.points))
    v = np.array([p.value for p in s.points], float)
    lo = np.array([p.low for p in s.points], float)
    hi = np.array([p.high for p in s.points], float)
    has = np.isfinite(lo) & np.isfinite(hi)
    ax.plot(x, v, "o", ms=3, color="#34495e", zorder=3)
    if has.any():
        ax.errorbar(x[has], v[has], yerr=[v[has] - lo[has], hi[has] - v[has]], fmt="none",
                    ecolor="#7f8c8d", elinewidth=0.8, capsize=1.5, zorder=2)
    for a, b, level in s.levels:
        ax.hlines(level, a - 0.4, b - 0.6, colors="#2c3e50", linewidth=1.2, alpha=0.6)
    at = {p.name: i for i, p in enumerate(s.points)}
    for ch in s.changes:
        i = at[ch.point]
        color = _WORSE if ch.direction == "worse" else _BETTER
        ax.axvline(i - 0.5, color=color, linestyle="--", linewidth=1)
        ax.annotate(f"{ch.ratio:.2f}x\n[{ch.ci_low:.2f}, {ch.ci_high:.2f}]",
                    (i - 0.5, 1.0), xycoords=("data", "axes fraction"), fontsize=6.5,
                    color=color, ha="left", va="top", xytext=(2, -2),
                    textcoords="offset points")
    step = max(1, int(np.ceil(len(x) / _MAX_TICKS)))
    ax.set_xticks(x[::step])
    ax.set_xticklabels([_short(p.name, 10) for p in s.points][::step], rotation=60,
                       fontsize=6.5, ha="right")
    ax.tick_params(axis="y", labelsize=7)
    if s.metric != "throughput_ops_s":
        # Latencies on a log axis: one point's wide p99 interval (a few runs decide a
        # tail) would otherwise flatten every other point against the floor.
        ax.set_yscale("log")
        log_ms_axis(ax.yaxis)
    ax.margins(x=0.03, y=0.15)
