"""Figures of the KV study (seeds 003/004), as methods of the study.

Each method returns what `plots.publish` returns (an image for the notebook; the PNG
and SVG are saved under the study's figures_dir), or a sentence when the experiment has
not been run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from harness.analysis.figures import plots
from harness.analysis.sections.prose import plural
from harness.studies.kvstore.analysis import SEED_STEP_S, STRATEGIES, Numbers, harmonic_rates

OP_LABEL = {"put": "PUT", "get": "GET", "all": "all ops"}


def _band(ax: Any, table: pd.DataFrame, x: str, hue: str, noun: str) -> None:
    palette = sns.color_palette("colorblind", table[hue].nunique())
    for color, (key, grp) in zip(palette, table.groupby(hue, sort=True), strict=True):
        grp = grp.sort_values(x)
        ax.plot(grp[x], grp["mean"], marker="o", color=color,
                label=f"{plural(key, noun)} (n ≥ {int(grp['n'].min())} runs)")
        low = grp["ci_low"].where(np.isfinite(grp["ci_low"]), grp["mean"])
        high = grp["ci_high"].where(np.isfinite(grp["ci_high"]), grp["mean"])
        ax.fill_between(grp[x], low, high, color=color, alpha=0.2, linewidth=0)


def _shade_events(ax: Any, events: pd.DataFrame, label: bool) -> None:
    colors = {"add_node": "tab:green", "remove_node": "tab:red"}
    for ev in events.itertuples():
        ax.axvspan(ev.start_s, ev.end_s, color=colors.get(ev.action, "0.6"), alpha=0.15,
                   linewidth=0)
        if label:
            ax.annotate(f"{ev.action}\n{ev.duration_s:.1f} s", (ev.start_s, 1.0),
                        xycoords=("data", "axes fraction"), xytext=(3, -3),
                        textcoords="offset points", va="top", fontsize=7)


HEATMAPS = {  # value -> (what, colour bar label, a rate?, cell format, colours)
    "throughput_ops_s": ("throughput", "ops/s", True, ",.0f", "viridis"),
    "p50_ms": ("median latency", "p50 [ms], mean", False, ".3f", "viridis_r"),
}


def rate_mean(frame: pd.DataFrame) -> str:
    """Which mean of the run rates a figure of `frame`'s runs shows, in words: the
    sections' rule (`harmonic_rates`), so a caption never names another mean than the
    text beside it (the kv_scaling figure said harmonic over fixed-duration runs)."""
    return "harmonic" if harmonic_rates(frame) else "arithmetic"


class Plots(Numbers):
    """The study's figures, as methods of the study."""

    def scaling_figure(self) -> Any:
        """Aggregate and per-client throughput (rows) of PUT and GET (columns) by servers,
        one line per number of clients."""
        if not self.part_ran("scaling"):
            return self.part_not_run("scaling")
        tables = {v: self.scaling_table(v) for v in ("throughput_ops_s",
                                                              "per_client_ops_s")}
        with plots.style():
            fig = Figure(figsize=(plots.WIDTH, 6.0), layout="constrained")
            axes = fig.subplots(2, 2, sharex=True)
            for row, (value, name) in enumerate((("throughput_ops_s", "aggregate"),
                                                 ("per_client_ops_s", "per client"))):
                for col, op in enumerate(("put", "get")):
                    ax = axes[row][col]
                    _band(ax, tables[value][tables[value]["op"] == op], self.servers,
                          self.clients, "client")
                    ax.set_title(f"{OP_LABEL[op]}, {name}", fontsize=10)
                    ax.set_ylim(bottom=0)
                    ax.set_ylabel(f"{name} [ops/s]" if col == 0 else "")
                    ax.set_xlabel("servers (Redis masters)" if row == 1 else "")
                    ax.set_xticks(sorted(tables[value][self.servers].unique()))
            plots.legend_outside(fig, fontsize=7)
        fig.suptitle(f"Throughput by servers and clients\n(lines: {rate_mean(self.scaling)} "
                     "mean over runs; bands: 95% CI; aggregate = sum over clients)",
                     fontsize=11)
        return self.publish(fig, "scaling-throughput")


    def cache_heatmap(self, value: str = "throughput_ops_s", op: str = "get") -> Any:
        """Cache size x strategy: `value` (throughput or p50_ms) of `op`, mean over runs."""
        if not self.part_ran("cache"):
            return self.part_not_run("cache")
        what, label, rate, fmt, cmap = HEATMAPS[value]
        if rate:  # the sections' mean of rates, and the label naming it
            label = f"{label}, {rate_mean(self.cache)} mean"
        table = self.cache_table(value, op=op, rate=None if rate else False)
        n = int(table["n"].min()) if len(table) else 0
        # The seeds' order of strategies, not the alphabet's.
        names = [s for s in STRATEGIES if s in set(table[self.strategy])]
        order = names + sorted(set(table[self.strategy]) - set(names))
        table[self.strategy] = pd.Categorical(table[self.strategy], order, ordered=True)
        fig = plots.heatmap(table.rename(columns={self.cache_size: "cache size [entries]",
                                                  self.strategy: "strategy"}),
                            "cache size [entries]", "strategy",
                            title=f"{OP_LABEL[op]} {what} by cache size and strategy\n"
                                  f"(mean over runs, n = {n} runs per cell)",
                            label=label, fmt=fmt, cmap=cmap)
        return self.publish(fig, f"cache-{op}-{value}")

    def elastic_timeline(self, run: int = 0) -> Any:
        """One run of the elastic self: throughput, redirects and p99 latency per second,
        with each scaling step shaded from its start to its end."""
        if not self.part_ran("elastic"):
            return self.part_not_run("elastic")
        run_id = sorted(self.series["run_id"].unique())[run]
        series = self.series[self.series["run_id"] == run_id]
        events = self.events[self.events["run_id"] == run_id] if len(self.events) else \
            self.events
        with plots.style():
            fig = Figure(figsize=(plots.WIDTH, 6.5), layout="constrained")
            axes = fig.subplots(3, 1, sharex=True)
            palette = dict(zip(("put", "get"), sns.color_palette("colorblind", 2), strict=True))
            for op, grp in series.groupby("op"):
                color = palette.get(op, "0.3")
                axes[0].plot(grp["t_s"], grp["ops_s"], color=color, label=OP_LABEL.get(op, op))
                axes[1].plot(grp["t_s"], grp["redirects_s"], color=color)
                axes[2].plot(grp["t_s"], grp["p99_ms"], color=color)
            total = series.groupby("t_s")["ops_s"].sum()
            axes[0].plot(total.index, total.to_numpy(), color="0.2", linestyle="--",
                         label="all ops")
            for i, ax in enumerate(axes):
                _shade_events(ax, events, label=i == 0)
            axes[0].set_ylabel("ops/s")
            axes[0].set_ylim(bottom=0)
            plots.legend_outside(fig, fontsize=7)
            axes[1].set_ylabel("redirects/s")
            axes[2].set_ylabel("p99 latency [ms]")
            axes[2].set_yscale("log")
            plots.log_ms_axis(axes[2].yaxis)
            axes[2].set_xlabel("time since the clients started [s] (1-s bins by op start)")
        fig.suptitle("Throughput, redirects and tail latency while servers are added and "
                     "removed\n(shaded: each scaling step, from its start to its end)",
                     fontsize=11)
        return self.publish(fig, f"elastic-timeline-{run + 1}")

    def step_times(self) -> Any:
        """Each scaling step's duration split into its phases, beside the seed's times."""
        if self.events.empty:
            return self.part_not_run("elastic")
        ev = self.events.sort_values(["run_id", "start_s"]).reset_index(drop=True)
        phases = [c for c in ev.columns if c.startswith("phase_")]
        labels = [f"{a}\n(run {r}, step {s + 1})" for a, r, s in
                  zip(ev["action"], ev["repetition"], ev["step"], strict=True)]
        with plots.style():
            fig = plots.new_figure()
            ax = fig.axes[0]
            bottom = np.zeros(len(ev))
            palette = sns.color_palette("colorblind", len(phases) + 1)
            for color, col in zip(palette, phases, strict=False):
                vals = ev[col].fillna(0.0).to_numpy(float)
                ax.bar(labels, vals, bottom=bottom, color=color, label=col[len("phase_"):],
                       edgecolor="0.2", linewidth=0.5)
                bottom += vals
            rest = ev["duration_s"].to_numpy(float) - bottom
            ax.bar(labels, np.clip(rest, 0, None), bottom=bottom, color="0.85", label="other",
                   edgecolor="0.2", linewidth=0.5)
            for i, action in enumerate(ev["action"]):
                seed = SEED_STEP_S.get(action)
                if seed:
                    ax.hlines(seed, i - 0.4, i + 0.4, colors="k", linestyles="--", linewidth=1)
            ax.set_ylabel("duration of the step [s]")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.set_title("Time per scaling step, by phase\n(dashed: seed 004's mean time per "
                     "step, 10,000 pairs on 5 servers)", fontsize=11)
        return self.publish(fig, "elastic-step-times")
