"""Tables and sentences of the file-store study (seed 000) for its notebook: methods of
the study returning HTML or Markdown to display, or None when not run.
Sentences come from the tests in `harness.analysis.stats` via `prose`, never by eye.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis import prose, stats, tables, verdict
from harness.analysis.display import html as _html
from harness.analysis.display import markdown as _markdown
from harness.studies.filestore.analysis import OP_PLURAL, Numbers, mc_label


def _p(p: float) -> str:
    """A p-value without its `p = ` (table cells)."""
    return prose.fmt_p(p).removeprefix("p = ")


def _threads(n: int) -> str:
    return f"{n} thread" if n == 1 else f"{n} threads"


def _row_verdict(row) -> str:
    """memcache on vs off for one row of `memcache_effect` (Holm-adjusted p; lower
    latency is better)."""
    return row.comparison.verdict(higher_is_better=False)


class Views(Numbers):
    """The study's tables and sentences, as methods of the study."""

    def describe(self):
        runs = self.loaded.runs
        n_cfg = self.per_run.groupby(["op", "threads", "memcache"]).ngroups
        reps = self.per_run.groupby(["op", "threads", "memcache"]).size()
        each = (f"{int(reps.min())}" if reps.min() == reps.max()
                else f"{int(reps.min())}–{int(reps.max())}")
        text = (f"Data: experiment `{self.experiment}`, {len(runs)} runs of {n_cfg} "
                f"configurations ({each} runs each), "
                f"{int(self.per_run['ops'].sum()):,} measured ops (warm-up ops excluded). "
                f"Files smaller than {self.threshold_bytes:,} bytes go to memcache too.")
        if self.loaded.sampled:
            text += (f" The per-op figures draw one op in {self.loaded.sample_every:,} of "
                     "each run; every number is computed from all of them.")
        return _markdown(text + self.left_out_note())

    def memcache_findings(self):
        """Sentences on memcache per op; the seed's claim about inserts first."""
        if not self.ran:
            return None
        eff = self.memcache_effect()
        if eff.empty:
            return _markdown("Too few runs per configuration to test the memcache effect.")
        lines = []
        for op in self.ops_present:
            for row in eff[eff["op"] == op].itertuples():
                noun = OP_PLURAL[op]
                s = prose.compare_sentence(row.comparison, f"{noun} (memcache on)",
                                           f"{noun} (memcache off)", unit="pairs of runs")
                g = f"{row.effect_name} = {row.effect:.2f}"
                lines.append(f"- {_threads(row.threads)}: {s[:-1]}; {g}.")
            if op == "insert":
                lines.insert(0, "**The seed's claim that memcache slows inserts down** "
                                "(runs' median latency, memcache on vs off, paired by repetition):")
                lines.append("\n**Finds and removes:**")
        return _markdown("\n".join(lines))

    def thread_findings(self):
        """The seed's claims about 4 vs 1 threads: throughput up, latency down."""
        if not self.ran or len(self.threads) < 2:
            return None
        lo, hi = self.threads[0], self.threads[-1]
        tput, lat = [], []
        for op in self.ops_present:
            for mc in (True, False):
                a, b = self.select(op, hi, mc), self.select(op, lo, mc)
                if len(a) < 2 or len(b) < 2:
                    continue
                # Fixed-count runs: throughput is averaged harmonically, as in the tables.
                tput.append(stats.compare_two(a["throughput_ops_s"], b["throughput_ops_s"],
                                              alpha=self.alpha, rate=True))
                lat.append(stats.compare_two(a["latency_ms"], b["latency_ms"],
                                             alpha=self.alpha))
        if not tput:
            return None
        # Throughput and latency claims are one family: Holm over all of them.
        p_holm = stats.holm([c.p_value for c in tput + lat])
        n = len(tput)

        def tally(cs: list[stats.Comparison], ps: np.ndarray, higher: bool) -> str:
            verdicts = [c.verdict(higher_is_better=higher, p=float(q))
                        for c, q in zip(cs, ps, strict=True)]
            ratios = ", ".join(
                f"{prose.fmt_ratio(c.ratio.value)} [{c.ratio.low:.2f}–{c.ratio.high:.2f}]"
                for c in cs)
            counts = ", ".join(f"{v} in {verdicts.count(v)}" for v in verdict.VERDICTS
                               if verdicts.count(v))
            return f"{counts} of {n} op × memcache configurations (ratios {hi}/{lo} with " \
                   f"95% CIs: {ratios})"

        lat_up = sum(1 for c, q in zip(lat, p_holm[n:], strict=True)
                     if q < self.alpha and c.mean_a > c.mean_b)
        lines = [
            f"- Throughput, {hi} vs {lo} threads: {tally(tput, p_holm[:n], True)}.",
            f"- Latency, {hi} vs {lo} threads: {tally(lat, p_holm[n:], False)}.",
        ]
        if lat_up:
            lines.append(
                f"- Where latency is significantly higher with {hi} threads ({lat_up} of {n}), "
                "a closed-loop client with more connections queues at the server: there the "
                "seed's reading that more threads lower the latency is not what a per-op "
                "timing shows.")
        lines.append(f"- These {2 * n} tests are one family: p-values Holm-adjusted together; "
                     "better/worse per the kit's verdict (higher throughput, lower latency).")
        return _markdown("\n".join(lines))

    def op_findings(self):
        """Insert slowest, find ≈ remove (the seed): one test over the ops per setting."""
        if not self.ran or len(self.ops_present) < 2:
            return None
        lines = []
        for t in self.threads:
            for mc in (False, True):
                groups = {op: self.select(op, t, mc)["latency_ms"]
                          for op in self.ops_present}
                if min(len(g) for g in groups.values()) < 2:
                    continue
                m = stats.compare_many(groups, alpha=self.alpha)
                lines.append(f"- {_threads(t)}, {mc_label(mc)}: " + prose.multi_sentence(
                    m, "latencies (run medians) of " + ", ".join(groups), unit="runs"))
        return _markdown("\n".join(lines)) if lines else None

    def config_table_html(self):
        if not self.ran:
            return None
        t = self.config_table()
        failed = bool((t["errors"] > 0).any())
        shown = pd.DataFrame({
            "op": t["op"], "threads": t["threads"], "memcache": t["memcache"].map(mc_label),
            "runs": t["n_tput"],
            "tput": tables.ci_column(t, "mean_tput", "ci_low_tput", "ci_high_tput"),
            "lat": tables.ci_column(t, "mean_lat", "ci_low_lat", "ci_high_lat"),
            "p50": t["latency_p50_ms"], "p99": t["latency_p99_ms"],
            "errors": t["error_rate"], "failed": t["errors"], "misses": t["miss_rate"],
        })
        if failed:  # goodput beside throughput, by the same rule, wherever ops failed
            shown.insert(5, "goodput", tables.ci_column(t, "goodput", "goodput_low",
                                                        "goodput_high"))
        else:
            shown = shown.drop(columns="failed")
        failures = ("Goodput counts only the ops answered (ok or miss) over the same time. "
                    "p50/p99 include the failed ops (errors and timeouts: a wait the client "
                    "had); their share and count are beside them." if failed else
                    "No op failed (no error or timeout): goodput equals throughput.")
        return _html(tables.to_html(
            shown, numeric=[c for c in ("runs", "tput", "goodput", "lat", "p50", "p99",
                                        "errors", "failed", "misses") if c in shown],
            caption="Per configuration: throughput (total ops / total time over runs: the "
                    "harmonic mean for these fixed-count runs) and the runs' median latency "
                    "(mean over runs), each with its 95% CI; p50/p99 of all ops pooled, with a "
                    "95% CI over runs where every run has 10 ops beyond the percentile (a p99 "
                    f"of 100 ops per run has none: too few ops). {failures}",
            headers={"tput": "ops/s (95% CI)", "goodput": "goodput ops/s (95% CI)",
                     "lat": "median latency [ms] (95% CI)", "p50": "p50 [ms]", "p99": "p99 [ms]",
                     "failed": "failed ops"},
            formats={"errors": tables.pct(), "misses": tables.pct()}))

    def memcache_effect_html(self):
        if not self.ran:
            return None
        e = self.memcache_effect()
        if e.empty:
            return None
        shown = e.assign(ratio=tables.ci_column(e, "ratio", "ratio_low", "ratio_high", suffix="×"),
                         effect=[f"{v:.2f}" for v in e["effect"]], p=e["p"].map(_p),
                         p_holm=e["p_holm"].map(_p), p_unpaired_holm=e["p_unpaired_holm"].map(_p))
        cols = ["op", "threads", "pairs", "mean_on_ms", "mean_off_ms", "ratio", "test", "p",
                "p_holm", "effect", "p_unpaired_holm"]
        return _html(tables.to_html(
            shown[cols], numeric=["threads", "pairs", "mean_on_ms", "mean_off_ms", "ratio",
                                  "effect"],
            caption="Memcache on vs off per op, runs paired by repetition: geometric means of "
                    "the runs' median latency, ratio on/off with 95% CI (above 1: memcache "
                    "slower; the CIs are not adjusted for the six comparisons), the paired "
                    "test, p raw and Holm-adjusted over the table, effect size Cohen's d_z of "
                    "the log ratios (positive: memcache slower), and for reference the "
                    "Holm-adjusted p of the unpaired test over the same runs.",
            headers={"pairs": "pairs (n)", "mean_on_ms": "on [ms]", "mean_off_ms": "off [ms]",
                     "ratio": "on/off (95% CI)", "p_holm": "p (Holm)", "effect": "d_z",
                     "p_unpaired_holm": "unpaired p (Holm)"}))

    def baseline_html(self):
        if not self.ran or self.per_run["noop_ms"].isna().all():
            return None
        t = self.baseline_table()
        shown = t.assign(mean=tables.ci_column(t))[["probe", "runs", "min", "mean", "avg",
                                                    "max", "sd"]]
        return _html(tables.to_html(
            shown, numeric=["runs", "min", "mean", "avg", "max", "sd"],
            caption="Round trip to the app, probed before every run from the harness machine "
                    "(ms): min and max over all probes, the per-run median and average "
                    "(means over runs; the median with its 95% CI), and the mean within-run "
                    "standard deviation.",
            headers={"mean": "median (95% CI)", "avg": "avg", "sd": "stddev"}))

    def service_time_html(self):
        st = self.service_time()
        if st.empty or st["noop_ms"].isna().all():
            return None
        shown = st.assign(service=tables.ci_column(st, "service_ms", "service_low",
                                                   "service_high"))
        cols = ["op", "memcache", "runs", "latency_ms", "connect_ms", "noop_ms", "service",
                "rtt_share"]
        return _html(tables.to_html(
            shown[cols], numeric=["runs", "latency_ms", "connect_ms", "noop_ms", "service",
                                  "rtt_share"],
            caption=f"{st['threads'].iloc[0]} thread: the runs' median op latency beside "
                    "the round trip (medians of the run's probes), and the estimated service "
                    "time = median latency − the run's median no-op round trip (mean over "
                    "runs, 95% CI); last column: the no-op round trip's share of the latency.",
            headers={"latency_ms": "latency [ms]", "connect_ms": "TCP connect [ms]",
                     "noop_ms": "no-op RTT [ms]", "service": "service time [ms] (95% CI)",
                     "rtt_share": "RTT share"},
            formats={"rtt_share": tables.pct()}))

    def size_table_html(self, bins: tuple[int, ...] = (0, 4096, 16384, 65536)):
        """Median latency per file-size bin (lowest thread count), op × memcache."""
        if not self.ran:
            return None
        edges = [*bins, self.threshold_bytes, math.inf]
        names = [f"< {e // 1024} KiB" if e else "" for e in edges[1:-1]] + [
            f"≥ {self.threshold_bytes // 1024} KiB"]
        t = self.size_medians(edges)
        t = t[(t["bin"] >= 1) & (t["bin"] < len(edges))]  # outside the edges: no bin
        t = t.assign(size_bin=pd.Categorical([names[int(b) - 1] for b in t["bin"]],
                                             categories=names),
                     memcache=t["memcache"].map(mc_label))
        t["cell"] = [f"{m:.3g} (n={n})" for m, n in zip(t["median_ms"], t["count"],
                                                        strict=True)]
        wide = t.pivot(index=["op", "memcache"], columns="size_bin", values="cell")
        wide = wide.reindex(index=[(o, mc_label(m)) for o in self.ops_present
                                   for m in (True, False)]).reset_index()
        wide.columns = [str(c) for c in wide.columns]
        return _html(tables.to_html(
            wide.fillna("–"),
            caption=f"Median latency [ms] by file size, {self.threads[0]} thread, successful "
                    "ops (n = ops in the bin); the last bin is not cached."))

    def _verdict(self, op: str, eff: pd.DataFrame) -> str:
        rows = eff[eff["op"] == op]
        if rows.empty:
            return f"{OP_PLURAL[op].capitalize()}: not enough runs to test."
        words = {verdict.BETTER: "**faster**", verdict.WORSE: "**slower**",
                 verdict.NO_DIFFERENCE: "no significant difference (CI within ±5%)",
                 verdict.INCONCLUSIVE: "inconclusive (too few runs to tell)"}
        parts = [f"{_threads(r.threads)}: {words[_row_verdict(r)]}, ratio on/off "
                 f"{prose.fmt_ratio(r.ratio)} (95% CI {r.ratio_low:.2f}–{r.ratio_high:.2f})"
                 for r in rows.itertuples()]
        return (f"{OP_PLURAL[op].capitalize()} with memcache on (Holm-adjusted, "
                f"α = {self.alpha:g}): " + "; ".join(parts) + ".")

    def summary(self):
        """What the data support, in a few sentences decided by the tests above."""
        if not self.ran:
            return None
        eff = self.memcache_effect()
        lines = [f"- {self._verdict(op, eff)}" for op in self.ops_present if not eff.empty]
        if "insert" in self.ops_present and not eff.empty:
            ins = eff[eff["op"] == "insert"]
            verdicts = [_row_verdict(r) for r in ins.itertuples()]
            worse = [_threads(r.threads) for r, v in zip(ins.itertuples(), verdicts, strict=True)
                     if v == verdict.WORSE]
            if worse:
                claim = (f"**supported** at {', '.join(worse)}: with memcache on, a small file "
                         "goes to memcached as well as to storage, and that extra set is what "
                         "it costs")
            elif verdict.BETTER in verdicts:
                claim = "**contradicted**: with memcache on, inserts are significantly faster"
            elif all(v == verdict.NO_DIFFERENCE for v in verdicts):
                claim = ("**not borne out**: the CIs rule out a change of more than 5% either "
                         "way with memcache on")
            else:
                claim = ("**neither supported nor refuted**: too few runs to tell (the CIs of "
                         "the ratio still allow a change of more than 5%; see the ratios below)")
            lines.insert(0, f"- The seed's claim that memcache slows inserts down is {claim}.")
        st = self.service_time()
        if not st.empty and not st["noop_ms"].isna().all():
            share = st.set_index(["op", "memcache"])["rtt_share"]
            lines.append(
                f"- At {_threads(int(st['threads'].iloc[0]))}, the no-op HTTP round trip is "
                f"{share.min():.0%}–{share.max():.0%} of an op's median latency: where it is "
                "most of it, the app's own work (storage, memcached) is a small part of what a "
                "client waits for; over a real network (the seed's ping: 23–61 ms) that part "
                "would be smaller still, and whatever memcache saves or costs harder to see from "
                "the client.")
        cv = self.per_run.groupby(["op", "threads", "memcache"])["latency_ms"].agg(stats.cv)
        lines.append(
            f"- Run-to-run spread: the coefficient of variation of the runs' median latency is "
            f"{cv.min():.0%}–{cv.max():.0%} across configurations, with "
            f"{int(self.per_run.groupby(['op', 'threads', 'memcache']).size().min())} runs each: "
            "pairing runs by repetition removes the drift between repetitions, but what is "
            "left still hides smaller differences (more `repetitions`, or a quieter machine, "
            "narrow the intervals).")
        return _markdown("\n".join(lines))
