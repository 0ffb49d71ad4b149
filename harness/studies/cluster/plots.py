"""Figures of the cluster study (seed 002), built like `harness.analysis.figures.plots`: a
Figure without pyplot, titles, units, sample counts and 95% CIs on every bar and point."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from harness.analysis.figures import plots


def _yerr(mean: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    low = np.where(np.isnan(low), mean, low)
    high = np.where(np.isnan(high), mean, high)
    return np.vstack([mean - low, high - mean]).clip(min=0)


def us_bars(table: pd.DataFrame, ops: Sequence[str], setups: Sequence[str],
            labels: dict[str, str]) -> Figure:
    """µs per object per operation (groups) and setup (bars), log scale, with CIs."""
    fig = plots.new_figure(plots.WIDTH, 4.6)
    ax = fig.axes[0]
    width = 0.8 / max(len(setups), 1)
    with plots.style():
        palette = sns.color_palette("colorblind", len(setups))
    for i, (setup, color) in enumerate(zip(setups, palette, strict=True)):
        t = table[table["setup"] == setup].set_index("op").reindex(ops)
        xs = np.arange(len(ops)) + (i - (len(setups) - 1) / 2) * width
        mean = t["us"].to_numpy(float)
        n = int(t["n"].min()) if t["n"].notna().any() else 0
        ax.bar(xs, mean, width, color=color, label=f"{setup} (n = {n} runs)",
               yerr=_yerr(mean, t["us_low"].to_numpy(float), t["us_high"].to_numpy(float)),
               error_kw={"elinewidth": 0.8, "capsize": 1.5})
    # Two-word names on two lines: beside the legend the groups are too narrow for one
    # ("Search/delete" ran into "Sequential" beside it).
    ax.set_xticks(np.arange(len(ops)), [labels.get(o, o).replace(" ", "\n")
                                        .replace("/", "/\n") for o in ops])
    ax.set_yscale("log")
    plots.log_ms_axis(ax.yaxis)
    ax.set_ylabel("time per object [µs] (log scale)")
    ax.set_xlabel("operation")
    ax.set_title("Time per object, per operation and setup\n(bars: mean over runs; "
                 "whiskers: 95% CI)", fontsize=11)
    plots.legend_outside(ax, fontsize=7)
    return fig


def decomposition_bars(table: pd.DataFrame, decomp: pd.DataFrame, ops: Sequence[str],
                       labels: dict[str, str], order: Sequence[str]) -> Figure:
    """Per cluster setup (in `order`), µs per object split into the single node's cost,
    what replication adds and what the network adds (stacked means), total with its CI."""
    fig = Figure(figsize=(plots.WIDTH, 3.8 * len(ops)), layout="constrained")
    with plots.style():
        axes = [fig.add_subplot(len(ops), 1, i + 1) for i in range(len(ops))]
        colors = sns.color_palette("colorblind", 3)
    for ax, op in zip(axes, ops, strict=True):
        d = decomp[decomp["op"] == op]
        t = table[table["op"] == op].set_index("setup")
        single = d[d["step"] == "replication"]["from_us"]
        base = float(single.iloc[0]) if len(single) else np.nan
        names, parts = [], []
        for setup in order:
            rep = d[(d["step"] == "replication") & (d["dst"] == setup)]
            net = d[(d["step"] == "network") & (d["dst"] == setup)]
            if len(net):
                loc = d[(d["step"] == "replication") & (d["dst"] == net["src"].iloc[0])]
                parts.append((base, float(loc["added_us"].iloc[0]) if len(loc) else 0.0,
                              float(net["added_us"].iloc[0])))
            else:
                parts.append((base, float(rep["added_us"].iloc[0]) if len(rep) else 0.0, 0.0))
            names.append(setup)
        xs = np.arange(len(names))
        arr = np.array(parts) if parts else np.zeros((0, 3))
        bottom = np.zeros(len(names))
        for k, label in enumerate(("single node", "+ replication", "+ network")):
            ax.bar(xs, arr[:, k], 0.6, bottom=bottom, color=colors[k], label=label)
            bottom = bottom + arr[:, k]
        tot = t.reindex(names)
        ax.errorbar(xs, tot["us"], yerr=_yerr(tot["us"].to_numpy(float),
                                               tot["us_low"].to_numpy(float),
                                               tot["us_high"].to_numpy(float)),
                    fmt="none", ecolor="black", elinewidth=0.8, capsize=3)
        n = int(t["n"].min()) if len(t) else 0
        ax.set_xticks(xs, [n.replace(" n=", "\nn=") for n in names], fontsize=9)
        ax.set_ylabel("time per object [µs]")
        ax.set_title(f"{labels.get(op, op)}: where the time goes (n ≥ {n} runs per setup; "
                     "whiskers: 95% CI of the total)", fontsize=10)
    plots.legend_outside(fig)  # the same three parts in every panel
    return fig


def growth(points: pd.DataFrame, fit: pd.DataFrame, op_label: str) -> Figure:
    """Left: time per object against the configured round trip, a line per node count,
    with the fitted model. Right: against the node count, a line per round trip."""
    fig = Figure(figsize=(plots.WIDTH, 4.3), layout="constrained")
    with plots.style():
        # A subfigure per panel, each with its own legend under it (the two differ).
        halves = fig.subfigures(1, 2)
        left, right = halves[0].add_subplot(), halves[1].add_subplot()
        node_counts = sorted(points["nodes"].unique())
        palette = dict(zip(node_counts, sns.color_palette("colorblind", len(node_counts)),
                           strict=True))
    coef = dict(zip(fit["term"], fit["estimate"], strict=True)) if len(fit) else {}
    clusters = points[points["mode"] != "single"]
    for nodes, g in clusters.groupby("nodes"):
        g = g.sort_values("rtt_ms")
        mean = g["mean"].to_numpy(float)
        left.errorbar(g["rtt_ms"], mean, yerr=_yerr(mean, g["ci_low"].to_numpy(float),
                                                     g["ci_high"].to_numpy(float)),
                      fmt="o", color=palette[nodes], capsize=3,
                      label=f"{nodes} nodes (n ≥ {int(g['n'].min())} runs)")
        local = g[g["rtt_ms"] == 0]["mean"]
        if len(local):  # what one round trip per insert on top of the local cluster gives
            xs = np.array([0.0, g["rtt_ms"].max()])
            left.plot(xs, float(local.iloc[0]) + xs * 1e3, ":", color="grey", linewidth=1,
                      label="local cluster + 1 RTT per insert"
                      if nodes == clusters["nodes"].min() else None)
        if coef:
            xs = np.linspace(0, g["rtt_ms"].max(), 20)
            ys = (coef["intercept [µs]"] + coef["per µs of RTT"] * xs * 1e3
                  + coef.get("per extra standby [µs]", 0.0) * (nodes - 2))
            left.plot(xs, ys, "--", color=palette[nodes], linewidth=1)
    left.set_xlabel("configured round trip to each standby [ms]")
    left.set_ylabel(f"{op_label}: time per object [µs]")
    left.set_title("against the round trip\n(dashed: least-squares fit)", fontsize=10)
    plots.legend_outside(halves[0], fontsize=7, ncols=1)
    for rtt, g in points.groupby("rtt_ms"):
        if rtt == 0:  # loopback: the single node starts the line at one node
            g = g.sort_values("nodes")
        label = "loopback" if rtt == 0 else f"RTT {rtt:g} ms"
        mean = g["mean"].to_numpy(float)
        right.errorbar(g["nodes"], mean, yerr=_yerr(mean, g["ci_low"].to_numpy(float),
                                                     g["ci_high"].to_numpy(float)),
                       fmt="o-", capsize=3, label=label)
    right.set_xticks(sorted(points["nodes"].unique()))
    right.set_xlabel("nodes (primary + standbys)")
    right.set_ylabel(f"{op_label}: time per object [µs]")
    right.set_title("against the number of nodes\n(points: mean; whiskers: 95% CI)",
                    fontsize=10)
    plots.legend_outside(halves[1], fontsize=7, ncols=2)
    return fig
