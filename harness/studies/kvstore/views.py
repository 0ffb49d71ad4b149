"""Tables and sentences of the KV-store study (seeds 003/004) for its notebook: methods of
the study returning HTML or Markdown, or a part's not-run note."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.data.numbers import summarise_with_ci
from harness.analysis.data.summary_ci import ci_strings
from harness.analysis.sections import prose
from harness.analysis.sections.answers import Answer, from_claim
from harness.analysis.sections.display import markdown as _md
from harness.analysis.stats import comparisons as stats
from harness.analysis.stats import multiplicity
from harness.studies.kvstore.analysis import (
    Entry,
    Numbers,
    around_events,
    harmonic_rates,
)
from harness.workloads.kvstore import OPS


def _html(df: pd.DataFrame, **kwargs: Any) -> Any:
    from harness.analysis.sections.tables import show

    return show(df, **kwargs)


def has_failures(frame: pd.DataFrame) -> bool:
    """Whether any run of a per-run table had an error or timeout op."""
    return bool(len(frame)) and bool((frame["errors"].fillna(0) > 0).any())


class Views(Numbers):
    """The study's tables and sentences, as methods of the study."""

    def describe(self) -> Any:
        """Which of the three experiments have results, and how much: ops without the
        redirected attempts, which are counted beside them (the overview's measured ops
        are both)."""
        rows = []
        for part, name in self.parts.items():
            data = getattr(self, part)
            every = data[data["op"] == "all"] if len(data) else data
            runs = data["run_id"].nunique() if len(data) else 0
            ops = int(every["ops"].sum()) if len(data) else 0
            redirects = int(np.rint(every["redirect_rate"] * every["ops"]).sum()) \
                if len(data) else 0
            rows.append({"study": part, "experiment": name, "runs": runs, "ops": ops,
                         "redirects": redirects})
        return _html(pd.DataFrame(rows), caption=f"Raw results read from {self.raw_dir}. "
                     "Ops: the measured ops; redirects: the attempts a server turned away "
                     "inside them (MOVED/ASK), kept as records but not ops; together they "
                     "are the overview's measured ops." + self.left_out_note())

    def scaling_table_html(self) -> Any:
        if not self.part_ran("scaling"):
            return self.part_not_run("scaling")
        from harness.analysis.sections.tables import ci_column

        agg = self.scaling_table()
        per = self.scaling_table("per_client_ops_s")
        keys = ["op", self.servers, self.clients]
        lat = summarise_with_ci(self.scaling_loaded, keys)
        lat = lat.assign(op=lat["op"].astype(str), p50_ms=ci_strings(lat, "latency_p50_ms"),
                         p99_ms=ci_strings(lat, "latency_p99_ms"))[[*keys, "p50_ms", "p99_ms"]]
        shown = agg[[*keys, "n"]].assign(aggregate=ci_column(agg), per_client=ci_column(per))
        failed = has_failures(self.scaling)
        if failed:  # goodput beside throughput, by the same rule, wherever ops failed
            shown["goodput"] = ci_column(self.scaling_table("goodput_ops_s"))
        shown = shown.merge(lat, on=keys, how="left").fillna({"p50_ms": "–", "p99_ms": "–"})
        if failed:
            errors = self.scaling.groupby(keys, observed=True)["errors"].sum()
            shown = shown.merge(errors.reset_index(), on=keys, how="left")
        mean = "harmonic" if harmonic_rates(self.scaling) else "arithmetic (fixed-duration runs)"
        caption = (f"Throughput [ops/s]: {mean} mean over runs (95% CI); latency: "
                   "percentiles of all ops pooled [ms], with a 95% CI over runs "
                   "where every run has 10 ops beyond the percentile")
        caption += ("; goodput counts only ops answered (ok or miss) over the same time; the "
                    "percentiles include the failed ops (errors and timeouts: a wait the client "
                    "had), counted beside them" if failed else
                    "; no op failed (no error or timeout), so goodput equals throughput")
        return _html(shown.rename(columns={self.servers: "servers", self.clients: "clients"}),
                     caption=caption,
                     headers={"aggregate": "aggregate (sum over clients)",
                              "per_client": "per client", "goodput": "goodput (aggregate)",
                              "p50_ms": "p50 [ms]", "p99_ms": "p99 [ms]",
                              "errors": "failed ops"})

    def _claims(self, part: str) -> list[tuple[Entry, multiplicity.Claim]]:
        fam = self.family()
        return [(e, c) for e, c in zip(fam.entries, fam.judged.claims, strict=True)
                if e.key[0] == part]

    def answer_list(self) -> list[Answer]:
        """Scaling (servers, then clients), then the cache's strategies and sizes: the
        section's family in its own order."""
        fam = self.family()
        heads = {"scaling": "Throughput by servers and clients",
                 "cache": "Cache size and displacement strategy"}
        return [from_claim(f"{e.label_a} against {e.label_b}: throughput, {e.head}", claim,
                           experiment=self.parts.get(e.key[0], ""), heading=heads[e.key[0]])
                for e, claim in zip(fam.entries, fam.judged.claims, strict=True)]

    def family_note(self) -> str:
        judged = self.family().judged
        return (f"The section's {len(judged)} comparisons (servers and clients, cache "
                f"strategies and sizes) are one family: {judged.sentence('comparisons')}.")

    def scaling_findings(self) -> Any:
        """Per op: more servers at each client count; more clients at the most servers."""
        if not self.part_ran("scaling"):
            return self.part_not_run("scaling")
        out = prose.claims_text(
            [(e.head, e.label_a, e.label_b, c, (e.comparison.n_a, e.comparison.n_b))
             for e, c in self._claims("scaling")],
            lower_is_better=False, better="faster (aggregate throughput)")
        return _md("\n\n".join([*out, self.family_note()]))

    def cache_findings(self, op: str = "get") -> Any:
        """Does the strategy matter, per cache size? Does the cache size matter? Every
        pair, each with its ratio and adjusted interval."""
        if not self.part_ran("cache"):
            return self.part_not_run("cache")
        claims = self._claims("cache")
        level = multiplicity.fmt_level(self.family().judged.family.level)
        out = []
        for head in dict.fromkeys(e.head for e, _ in claims):
            mine = [(e, c) for e, c in claims if e.head == head]
            parts = "; ".join(
                f"{e.label_a}/{e.label_b} {prose.fmt_ratio(c.ratio)} "
                f"[{prose._range(c.low, c.high).rstrip('×')}]: "
                + (f"{e.label_a} {'faster' if c.ratio > 1 else 'slower'}" if c.significant
                   else prose.outcome_text(c))
                + f" ({prose.p_pair(c)})"
                for e, c in mine)
            sig = sum(c.significant for _, c in mine)
            what = ("the strategies" if mine[0][0].key[1] == "strategy"
                    else "the cache sizes")
            out.append(f"{head}: {what} differ significantly in {sig} of {len(mine)} pairs "
                       f"(throughput ratios with {level} CIs: {parts}).")
        return _md("\n\n".join([*out, self.family_note()]))

    def events_table_html(self, window_s: float = 5.0) -> Any:
        if self.events.empty:
            return self.part_not_run("elastic")
        around = around_events(self.series, self.events, window_s)
        wide = around.pivot_table(index=["run_id", "step"], columns="when",
                                  values=["ops_s", "good_s", "redirects_s", "p99_ms"])
        wide.columns = [f"{v}_{w}" for v, w in wide.columns]
        ev = self.events.merge(wide.reset_index(), on=["run_id", "step"])
        failed = has_failures(self.elastic)
        cols = ["repetition", "action", "start_s", "duration_s", "size_after", "moved",
                "ops_s_before", "ops_s_during", "ops_s_after",
                *(["good_s_during"] if failed else []), "redirects_s_during",
                "p99_ms_before", "p99_ms_during"]
        note = ("; goodput: ops answered (ok or miss) per second during the step; p99 includes "
                "the failed ops (errors and timeouts)" if failed else
                "; no op failed (no error or timeout): goodput equals throughput")
        return _html(ev[[c for c in cols if c in ev.columns]],
                     caption=f"Each scaling step; throughput (all ops) and redirects per second "
                             f"averaged over the {window_s:g} s before, the step itself, and the "
                             f"{window_s:g} s after; p99: median of the per-second p99s{note}",
                     headers={"start_s": "start [s]", "duration_s": "duration [s]",
                              "size_after": "servers after", "moved": "slots moved",
                              "ops_s_before": "ops/s before", "ops_s_during": "ops/s during",
                              "ops_s_after": "ops/s after", "good_s_during": "goodput/s during",
                              "redirects_s_during": "redirects/s during",
                              "p99_ms_before": "p99 before [ms]",
                              "p99_ms_during": "p99 during [ms]"})

    def reading(self) -> Any:
        """What the numbers above are: estimates with intervals where a part repeated its
        runs, a description of one run where it did not (kv_elastic at demo scale)."""
        repeated, single = [], []
        factors = {"scaling": [self.servers, self.clients],
                   "cache": [self.cache_size, self.strategy], "elastic": []}
        for part, name in self.parts.items():
            data = getattr(self, part)
            if not len(data):
                continue
            every = data[data["op"] == "all"]
            keys = [c for c in factors[part] if c in every.columns]
            runs = every.groupby(keys)["run_id"].nunique().min() if keys else len(every)
            (repeated if runs >= 2 else single).append(f"`{name}`")
        text = "The seeds measured the same questions with a stopwatch per client. "
        if repeated:
            text += (f"Here the numbers of {', '.join(repeated)} are estimates with their "
                     "intervals over repeated runs, and each claim a test at α from the "
                     "parameters cell. ")
        if single:
            text += (f"{', '.join(single)} ran once per configuration: its numbers describe "
                     "that run, with no interval (one run has no run-to-run spread to "
                     "estimate one from) and no test; repeat it (`repetitions`) to have "
                     "them.")
        return _md(text.strip())

    def steps_summary(self) -> Any:
        if self.events.empty:
            return self.part_not_run("elastic")
        out = []
        for row in self.step_table().itertuples():
            est = stats.Estimate(row.mean, row.ci_low, row.ci_high, row.n, row.method)
            seed = f"; seed 004 took {row.seed_s:g} s" if row.seed_s == row.seed_s else ""
            steps = f"{row.n} step{'s' if row.n != 1 else ''}"
            out.append(f"{row.action}: {prose.fmt_estimate(est, 's')} per step ({steps}{seed}).")
        errors = self.events["error"].dropna()
        if len(errors):
            out.append(f"{len(errors)} step(s) failed: {errors.iloc[0]}")
        return _md("\n\n".join(out))

    def redirect_table_html(self) -> Any:
        """Redirect records per op, per experiment and op; for the elastic runs also within
        the scaling steps and outside them."""
        rows = []
        for part in ("scaling", "cache", "elastic"):
            data = getattr(self, part)
            for op, grp in data[data["op"].isin(OPS)].groupby("op") if len(data) else []:
                rows.append({"experiment": self.parts[part], "op": op, "when": "whole run",
                             "ops": int(grp["ops"].sum()),
                             "redirect_rate": (grp["redirect_rate"] * grp["ops"]).sum()
                             / grp["ops"].sum()})
        if not self.events.empty and len(self.steps_split):
            # From the records: during + outside is every op of the elastic runs.
            t = self.steps_split.sum(numeric_only=True)
            for when in ("during", "outside"):
                ops = int(t[f"ops_{when}"])
                rows.append({"experiment": self.parts["elastic"], "op": "all",
                             "when": f"{when} steps", "ops": ops,
                             "redirect_rate": t[f"redirects_{when}"] / max(ops, 1)})
        from harness.analysis.sections.tables import pct

        return _html(pd.DataFrame(rows), caption="Redirected attempts per op (MOVED/ASK, "
                     "server_not_responsible, write locks); ops by when they started: during "
                     "a scaling step or outside, which add up to the whole runs",
                     formats={"redirect_rate": pct(2)},
                     headers={"redirect_rate": "redirects per op"})
