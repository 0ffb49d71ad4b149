"""Figures of the file-store study (seed 000); each method saves the
figure (PNG + SVG) when the study has a figures directory, and returns an image for the
notebook, or None when the study was not run.

Built on `matplotlib.figure.Figure` like `harness.analysis.figures.plots`, with its look.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from harness.analysis.figures import plots
from harness.analysis.stats import comparisons as stats
from harness.studies.filestore.analysis import Numbers, mc_label

MIN_BIN_OPS = 10
COLORS = {True: sns.color_palette("colorblind")[0], False: sns.color_palette("colorblind")[1]}


@contextlib.contextmanager
def _style() -> Iterator[None]:
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook", font_scale=0.95):
        yield


class Plots(Numbers):
    """The study's figures, as methods of the study."""

    def _grouped_bars(self, table: pd.DataFrame, *, title: str, ylabel: str,
                      unit: str, log: bool = False) -> Figure:
        """One panel per thread count; per op a bar for memcache on and one for off, with
        95% CI whiskers and n under each pair."""
        threads = self.threads
        with _style():
            fig = Figure(figsize=(plots.WIDTH, plots.HEIGHT), layout="constrained")
            axes = fig.subplots(1, len(threads), sharey=True, squeeze=False)[0]
            for ax, t in zip(axes, threads, strict=True):
                sub = table[table["threads"] == t]
                ops = self.ops_present
                for k, mc in enumerate((True, False)):
                    rows = sub[sub["memcache"] == mc].set_index("op").reindex(ops)
                    x = np.arange(len(ops)) + (k - 0.5) * 0.38
                    err = np.vstack([rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]])
                    ax.bar(x, rows["mean"], width=0.38, color=COLORS[mc], edgecolor="0.2",
                           linewidth=0.6, label=mc_label(mc))
                    ax.errorbar(x, rows["mean"], yerr=np.nan_to_num(err), fmt="none",
                                ecolor="0.1", capsize=3, linewidth=1.1)
                n = sub.groupby("op")["n"].min().reindex(ops)
                ax.set_xticks(np.arange(len(ops)),
                              [f"{o}\nn = {int(v) if v == v else 0}" for o, v in zip(ops, n,
                                                                                    strict=True)])
                ax.set_title(f"{t} thread{'s' if t > 1 else ''}", fontsize=10)
                if log:
                    ax.set_yscale("log")
            axes[0].set_ylabel(ylabel)
            plots.legend_outside(fig)
            fig.suptitle(f"{title}\n(bars: mean over {unit}; whiskers: 95% CI)", fontsize=11)
        return fig

    def throughput(self):
        if not self.ran:
            return None
        table = stats.config_table(self.per_run, ["op", "threads", "memcache"],
                                   "throughput_ops_s", rate=True)
        fig = self._grouped_bars(table, title="Throughput per configuration",
                                 ylabel="throughput [ops/s]", unit="runs (harmonic mean)")
        return self.publish(fig, "throughput")

    def latency(self):
        if not self.ran:
            return None
        table = stats.config_table(self.per_run, ["op", "threads", "memcache"],
                                   "latency_ms")
        fig = self._grouped_bars(table, title="Median latency per configuration",
                                 ylabel="median latency per op [ms]",
                                 unit="runs of each run's median")
        return self.publish(fig, "latency")

    def latency_by_size(self, bins: int = 12):
        """Every op's latency against its file's size (log-log), per op; lines: median per
        log-spaced size bin; dashed: the memcache threshold."""
        if not self.ran:
            return None
        ops = self.ops_frame()  # every op, or every k-th of each run: drawn as points
        ops = ops[(ops["threads"] == self.threads[0]) & (ops["status"] == "ok")
                  & (ops["bytes"] > 0)]
        lo, hi = self.size_range()  # the medians and n: every op's
        edges = np.geomspace(max(lo, 1), hi + 1, bins + 1)
        medians = self.size_medians(edges, positive=True)
        names = [o for o in self.ops_present if o in set(medians["op"])]
        with _style():
            fig = Figure(figsize=(plots.WIDTH, plots.HEIGHT + 0.4), layout="constrained")
            axes = fig.subplots(1, len(names), sharey=True, squeeze=False)[0]
            for ax, op in zip(axes, names, strict=True):
                counts: dict[bool, int] = {}
                for mc in (True, False):
                    sub = ops[(ops["op"] == op) & (ops["memcache"] == mc)]
                    ax.scatter(sub["bytes"], sub["latency_ms"], s=5, alpha=0.3, color=COLORS[mc],
                               linewidths=0)
                    agg = medians[(medians["op"] == op) & (medians["memcache"] == mc)]
                    med = agg[agg["count"] >= MIN_BIN_OPS]  # no medians of 2 ops
                    mid = np.sqrt(edges[:-1] * edges[1:])
                    ax.plot(mid[med["bin"].to_numpy(int) - 1], med["median_ms"].to_numpy(),
                            color=COLORS[mc], linewidth=1.8, marker="o", markersize=3,
                            label=mc_label(mc))
                    counts[mc] = int(agg["count"].sum())
                ax.axvline(self.threshold_bytes, color="0.3", linestyle="--", linewidth=0.9)
                ax.set_xscale("log")
                ax.set_yscale("log")
                # n per panel in its title: one legend below serves every panel.
                ax.set_title(f"{op}\n(n = {counts[True]:,} on, {counts[False]:,} off)",
                             fontsize=9)
                ax.set_xlabel("file size [bytes] (log)")
            plots.legend_outside(fig)
            plots.log_ms_axis(axes[0].yaxis)
            axes[0].set_ylabel("latency per op [ms] (log)")
            drawn = (f"\n(points: one op in {self.loaded.sample_every:,} of each run; lines "
                     "and n: every op)" if self.loaded.sampled else "")
            fig.suptitle(f"Latency by file size, {self.threads[0]} thread\n(points: ops; lines: "
                         f"median per size bin of ≥ {MIN_BIN_OPS} ops; dashed: memcache "
                         f"threshold {self.threshold_bytes:,} B){drawn}", fontsize=11)
        return self.publish(fig, "latency-by-size")

    def baseline(self):
        """Op latency split into the no-op round trip and the rest (estimated service time),
        with the TCP connect time marked: the seed's ping, set beside the ops."""
        st = self.service_time()
        if st.empty or st["noop_ms"].isna().all():
            return None
        labels = [f"{o}, {m}" for o, m in zip(st["op"], st["memcache"], strict=True)]
        y = np.arange(len(st))[::-1]
        with _style():
            fig = Figure(figsize=(plots.WIDTH, 0.45 * len(st) + 1.6), layout="constrained")
            ax = fig.add_subplot()
            ax.barh(y, st["noop_ms"], color="0.7", edgecolor="0.2", linewidth=0.6,
                    label="no-op HTTP round trip")
            ax.barh(y, st["service_ms"], left=st["noop_ms"], color=COLORS[True], edgecolor="0.2",
                    linewidth=0.6, label="latency − round trip (service time)")
            err = np.vstack([st["service_ms"] - st["service_low"],
                             st["service_high"] - st["service_ms"]])
            ax.errorbar(st["latency_ms"], y, xerr=np.nan_to_num(err), fmt="none", ecolor="0.1",
                        capsize=3, linewidth=1.0)
            ax.scatter(st["connect_ms"], y, marker="|", s=200, color="black", zorder=3,
                       label="TCP connect time")
            ax.set_yticks(y, [f"{lab}\nn = {n} runs" for lab, n in zip(labels, st["runs"],
                                                                        strict=True)])
            ax.set_xlabel("median time per op [ms] (mean over runs)")
            plots.legend_outside(fig)
            ax.set_title(f"Op latency beside the round trip to the app, "
                         f"{int(st['threads'].iloc[0])} thread\n(whiskers: 95% CI of the service "
                         "time over runs)", fontsize=11)
        return self.publish(fig, "baseline")

    def ecdf(self):
        """Latency distribution of every configuration at the lowest thread count."""
        if not self.ran:
            return None
        ops = self.ops_frame()
        ops = ops[ops["threads"] == self.threads[0]]
        ops = ops.assign(config=ops["op"] + ", " + ops["memcache"].map(mc_label))
        order = [f"{o}, {mc_label(m)}" for o in self.ops_present for m in (True, False)]
        per = self.per_run[self.per_run["threads"] == self.threads[0]]
        total = {f"{o}, {mc_label(m)}": int(n)
                 for (o, m), n in per.groupby(["op", "memcache"])["ops"].sum().items()}
        fig = plots.latency_ecdf(ops, "config", order=order,
                                 title=f"Latency distribution, {self.threads[0]} thread",
                                 ops_total=total, sample_every=self.loaded.sample_every)
        return self.publish(fig, "ecdf")
