"""Tables and sentences of the file-store study (seed 000) for its notebook: methods of
the study returning HTML or Markdown to display, or None when not run.
Sentences come from the tests in `harness.analysis.stats.comparisons` via `prose`, never by eye.
"""

from __future__ import annotations

import math

import pandas as pd

from harness.analysis.sections import prose, tables
from harness.analysis.sections.answers import Answer, from_claim
from harness.analysis.sections.display import html as _html
from harness.analysis.sections.display import markdown as _markdown
from harness.analysis.sections.prose import plural
from harness.analysis.stats import comparisons as stats
from harness.analysis.stats import multiplicity, verdict
from harness.studies.filestore.analysis import OP_PLURAL, Numbers, mc_label


def _p(p: float) -> str:
    """A p-value without its `p = ` (table cells)."""
    return prose.fmt_p(p).removeprefix("p = ")


def _threads(n: int) -> str:
    return f"{n} thread" if n == 1 else f"{n} threads"


def _row_verdict(row) -> str:
    """memcache on vs off for one row of `memcache_effect`: its claim's verdict in the
    section's family (lower latency is better)."""
    return row.verdict


def _ratio_ci(c: multiplicity.Claim) -> str:
    """``1.23× [0.78–1.95]``: a claim's ratio with its adjusted interval."""
    return f"{prose.fmt_ratio(c.ratio)} [{prose._range(c.low, c.high).rstrip('×')}]"


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
                s = prose.claim_sentence(row.claim, f"{noun} (memcache on)",
                                         f"{noun} (memcache off)", n=(row.pairs, row.pairs),
                                         unit="pairs of runs")
                g = f"{row.effect_name} = {row.effect:.2f}"
                lines.append(f"- {_threads(row.threads)}: {s[:-1]}; {g}.")
            if op == "insert":
                lines.insert(0, "**The seed's claim that memcache slows inserts down** "
                                "(runs' median latency, memcache on vs off, paired by repetition):")
                lines.append("\n**Finds and removes:**")
        lines.append("\n" + self.family_note())
        return _markdown("\n".join(lines))

    def answer_list(self) -> list[Answer]:
        """Memcache on against off first (the study's question), then the highest thread
        count against the lowest, then the operations against each other."""
        fam = self.family()
        threads = self.threads
        heads = {"memcache": "Does memcache help, and does it slow inserts down?",
                 "threads": "Threads and operations: the seed's other claims",
                 "ops": "Threads and operations: the seed's other claims"}
        out = []
        for kind in ("memcache", "threads", "ops"):
            for key in fam.comparisons:
                if key[0] != kind or (claim := fam.judged.get(key)) is None:
                    continue
                if kind == "memcache":
                    _, op, t = key
                    text = f"memcache on against off: {op} latency, {plural(t, 'thread')}"
                elif kind == "threads":
                    _, metric, op, mc = key
                    text = (f"{plural(threads[-1], 'thread')} against {threads[0]}: {op} "
                            f"{metric}, {mc_label(mc)}")
                else:
                    _, t, mc, a, b = key
                    text = f"{a} against {b}: latency, {plural(t, 'thread')}, {mc_label(mc)}"
                out.append(from_claim(text, claim, experiment=self.experiment,
                                      heading=heads[kind]))
        return out

    def family_note(self) -> str:
        """How the section's claims were judged, said once under each group of them."""
        judged = self.family().judged
        return (f"The section's {len(judged)} comparisons (memcache on/off, threads, "
                f"operations) are one family: {judged.sentence('comparisons')}.")

    def thread_findings(self):
        """The seed's claims about 4 vs 1 threads: throughput up, latency down."""
        if not self.ran or len(self.threads) < 2:
            return None
        lo, hi = self.threads[0], self.threads[-1]
        fam = self.family()
        tput = [fam.judged.get(k) for k in fam.comparisons if k[:2] == ("threads", "throughput")]
        lat = [fam.judged.get(k) for k in fam.comparisons if k[:2] == ("threads", "latency")]
        if not tput:
            return None
        n = len(tput)

        def tally(cs: list) -> str:
            verdicts = [c.verdict for c in cs]
            counts = ", ".join(f"{v} in {verdicts.count(v)}" for v in verdict.VERDICTS
                               if verdicts.count(v))
            level = multiplicity.fmt_level(cs[0].level)
            return (f"{counts} of {n} op × memcache configurations (ratios {hi}/{lo} with "
                    f"{level} CIs, raw and adjusted p: "
                    f"{', '.join(f'{_ratio_ci(c)} ({prose.p_pair(c)})' for c in cs)})")

        lat_up = sum(1 for c in lat if c.significant and c.ratio > 1)
        lines = [
            f"- Throughput, {hi} vs {lo} threads: {tally(tput)}.",
            f"- Latency, {hi} vs {lo} threads: {tally(lat)}.",
        ]
        if lat_up:
            # What the tests show, not why: nothing here measures where the time goes.
            lines.append(
                f"- Latency is significantly higher with {hi} threads in {lat_up} of {n} "
                "configurations: there the seed's reading that more threads lower the latency "
                "is not what a per-op timing shows. Why (queueing at the app, the machine's "
                "cores, the client) these runs do not measure.")
        lines.append(f"- Better/worse per the kit's verdict (higher throughput, lower "
                     f"latency). {self.family_note()}")
        return _markdown("\n".join(lines))

    def op_findings(self):
        """Insert slowest, find ≈ remove (the seed): every pair of ops per setting, claims
        of the section's family."""
        if not self.ran or len(self.ops_present) < 2:
            return None
        fam = self.family()
        lines = []
        for t in self.threads:
            for mc in (False, True):
                keys = [k for k in fam.comparisons if k[:3] == ("ops", t, mc)]
                if not keys:
                    continue
                parts = []
                for k in keys:
                    c, (a, b) = fam.judged.get(k), k[3:]
                    word = (f"{a} {'slower' if c.ratio > 1 else 'faster'}" if c.significant
                            else prose.outcome_text(c))
                    parts.append(f"{a}/{b} {_ratio_ci(c)}: {word} ({prose.p_pair(c)})")
                level = multiplicity.fmt_level(fam.judged.family.level)
                lines.append(f"- {_threads(t)}, {mc_label(mc)}: latency ratios (run medians, "
                             f"{level} CIs): " + "; ".join(parts) + ".")
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
        judged = self.family().judged
        level = multiplicity.fmt_level(judged.family.level)
        shown = e.assign(ratio=tables.ci_column(e, "ratio", "ratio_low", "ratio_high", suffix="×"),
                         effect=[f"{v:.2f}" for v in e["effect"]], p=e["p"].map(_p),
                         p_adjusted=e["p_adjusted"].map(_p), p_unpaired=e["p_unpaired"].map(_p))
        cols = ["op", "threads", "pairs", "mean_on_ms", "mean_off_ms", "ratio", "test", "p",
                "p_adjusted", "verdict", "effect", "p_unpaired"]
        return _html(tables.to_html(
            shown[cols], numeric=["threads", "pairs", "mean_on_ms", "mean_off_ms", "ratio",
                                  "effect"],
            caption="Memcache on vs off per op, runs paired by repetition: geometric means of "
                    f"the runs' median latency, ratio on/off with its {level} CI (above 1: "
                    "memcache slower), the paired test, p raw and adjusted, the verdict, "
                    "effect size Cohen's d_z of the log ratios (positive: memcache slower), and "
                    "for reference the raw p of the unpaired test over the same runs (no claim "
                    f"rests on it). These rows are claims of the section's family: "
                    f"{judged.sentence('comparisons')}.",
            headers={"pairs": "pairs (n)", "mean_on_ms": "on [ms]", "mean_off_ms": "off [ms]",
                     "ratio": f"on/off ({level} CI)", "p_adjusted": "p (BH)",
                     "effect": "d_z", "p_unpaired": "unpaired p (raw)"}))

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
        words = {verdict.BETTER: "**faster**", verdict.WORSE: "**slower**"}
        parts = [f"{_threads(r.threads)}: "
                 f"{words.get(r.verdict) or prose.outcome_text(r.claim)}, ratio on/off "
                 f"{prose.fmt_ratio(r.ratio)} "
                 f"({prose.ci_text(r.ratio_level, r.ratio_low, r.ratio_high)})"
                 for r in rows.itertuples()]
        return (f"{OP_PLURAL[op].capitalize()} with memcache on (the section's family, "
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
                claim = ("**not borne out**: the adjusted CIs rule out a change of more than "
                         "5% either way with memcache on")
            else:
                claim = ("**neither supported nor refuted**: too few runs to tell (the adjusted "
                         "CIs of the ratio still allow a change of more than 5%; see the ratios "
                         "below)")
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
