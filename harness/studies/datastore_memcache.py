"""Study 1 (seed 001): datastore (PostgreSQL) vs memcache (memcached), five operations.

One run is one "set" of the seed: 50 measured ops of one operation. The unit of
replication is the set, so means, CIs and tests are over per-set mean times per op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.checks import tails
from harness.analysis.data import queries
from harness.analysis.data.load import Loaded
from harness.analysis.data.numbers import run_summary, summarise_with_ci
from harness.analysis.data.summary_ci import TABLE_METRICS, ci_strings, no_ci_reasons
from harness.analysis.figures import plots
from harness.analysis.sections import prose, tables
from harness.analysis.sections.answers import Answer, from_claim
from harness.analysis.sections.display import html as _html
from harness.analysis.sections.display import markdown as _markdown
from harness.analysis.stats import comparisons as stats
from harness.analysis.stats import intervals, multiplicity
from harness.studies.base import FIGURE_OPS, StudyBase, as_path
from harness.workloads.datastore_memcache import LABELS, OPS, SEED_MS

EXPERIMENT = "datastore_vs_memcache"
#: The seed's names for the operations.
__all__ = ["LABELS", "OPS", "SEED_MS", "Study", "analyse"]


#: The seed's claims: (a, b, label a, label b), a the slower as the seed had it.
SEED_CLAIMS = (
    ("store_read", "mem_read_hit", "datastore reads", "memcache reads (hits)"),
    ("store_write", "mem_write", "datastore writes", "memcache writes"),
    ("mem_read_hit", "mem_read_miss", "memcache hits", "memcache misses"),
)
#: Resamples of the break-even hit rate's bootstrap (seeded).
BOOTSTRAP_RESAMPLES = 2000


def break_even_hit_rate(means: dict[str, float]) -> float:
    """Hit rate h where h·hit + (1−h)·(miss + store read + mem write) = store read; not
    cut to [0, 1]: above 1 no hit rate pays off, below 0 any does."""
    miss_path = means["mem_read_miss"] + means["store_read"] + means["mem_write"]
    denom = miss_path - means["mem_read_hit"]
    return (miss_path - means["store_read"]) / denom if denom > 0 else float("inf")


@dataclass(frozen=True)
class BreakEven:
    """The break-even hit rate with its 95% bootstrap interval over sets."""

    value: float
    low: float
    high: float
    sets: int

    def sentence(self) -> str:
        def pct(x: float) -> str:
            return "never" if x > 1 else ("any" if x < 0 else f"{x:.0%}")

        how = (f"95% bootstrap interval over sets {pct(self.low)}–{pct(self.high)}, "
               f"{BOOTSTRAP_RESAMPLES} resamples of {self.sets} sets per operation")
        cost = "a miss costs a memcache miss, a datastore read and a memcache write"
        if self.value > 1:
            return (f"With these means, caching datastore reads in memcache never pays off: "
                    f"even at 100% hits it would not ({cost}; {how}).")
        if self.value < 0:
            return (f"With these means, caching datastore reads in memcache pays off at any "
                    f"hit rate ({cost}; {how}).")
        return (f"With these means, caching datastore reads in memcache pays off once more "
                f"than {self.value:.0%} of reads hit ({how}; {cost}).")


@dataclass
class Study(StudyBase):
    experiment: str = EXPERIMENT
    loaded: Loaded | None = None
    per_set: pd.DataFrame = field(default_factory=pd.DataFrame)
    _family: tuple | None = field(default=None, repr=False)

    name = "datastore_memcache"

    @property
    def experiments(self) -> tuple[str, ...]:
        return (self.experiment,)

    @property
    def ran(self) -> bool:
        return self.loaded is not None and not self.per_set.empty

    @property
    def order(self) -> list[str]:
        present = set(self.per_set["op"].astype(str)) if self.ran else set()
        extra = sorted(present - set(OPS))
        return [o for o in OPS if o in present] + extra

    def _values(self, op: str) -> Any:
        return self.per_set.loc[self.per_set["op"] == op, "latency_mean_ms"].to_numpy()

    # --- text -----------------------------------------------------------------------
    def describe(self) -> Any:
        runs = self.loaded.runs
        sets = self.per_set.groupby("op", observed=True).size()
        per = self.per_set.groupby("op", observed=True)["ops"].median()
        n_sets = (f"{int(sets.min())}" if sets.min() == sets.max()
                  else f"{int(sets.min())}–{int(sets.max())}")
        text = (
            f"Data: experiment `{self.experiment}`, {len(runs)} runs: "
            f"{n_sets} sets per operation of "
            f"{int(per.median())} measured ops each (warm-up ops excluded), "
            f"{int(self.per_set['ops'].sum()):,} measured ops in all."
        )
        if self.loaded.sampled:
            text += (f" The per-op figures draw one op in {self.loaded.sample_every:,} of "
                     "each set; every number is computed from all of them.")
        return _markdown(text + self.left_out_note())

    def comparison(self, a: str, b: str) -> stats.Comparison | None:
        if not self.ran or a not in self.order or b not in self.order:
            return None
        return stats.compare_two(self._values(a), self._values(b), names=(a, b),
                                 alpha=self.alpha)

    def family(self) -> tuple[dict[tuple[str, str], stats.Comparison],
                              multiplicity.Judged]:
        """The section's claims, one family: every pair of operations (the seed's three
        claims are three of them), judged together (`multiplicity`), so the findings and
        the ratio table print the same adjusted interval for each comparison."""
        if self._family is None:
            groups = {o: self._values(o) for o in self.order}
            self._family = stats.pairwise_family(groups, alpha=self.alpha)
        return self._family

    def findings(self):
        """Sentences for the seed's claims and the other pairs, from the one family."""
        if not self.ran:
            return None
        pairs, judged = self.family()
        lines = []
        named = set()
        for a, b, la, lb in SEED_CLAIMS:
            claim = judged.get((a, b))
            if claim is None:
                continue
            named.add((a, b))
            c = pairs[(a, b)]
            lines.append("- " + prose.claim_sentence(claim, la, lb, n=(c.n_a, c.n_b),
                                                     unit="sets"))
        rest = [(k, judged.get(k)) for k in pairs if k not in named]
        if rest:
            sig = [f"{LABELS.get(a, a)} {'slower' if c.ratio > 1 else 'faster'} than "
                   f"{LABELS.get(b, b)}" for (a, b), c in rest if c.significant]
            lines.append(f"- Of the other {len(rest)} pairs of operations, {len(sig)} differ "
                         "significantly" + (f" ({'; '.join(sig)})" if sig else "")
                         + "; the table below gives every pair with its adjusted interval.")
        if len(judged) > 1:
            lines.append(f"- These {len(judged)} comparisons (every pair of operations, the "
                         f"seed's among them) are one family: {judged.sentence('comparisons')}"
                         "; the ratio table above prints the same intervals.")
        be = self.break_even()
        if be is not None:
            lines.append("- " + be.sentence())
        return _markdown("\n".join(lines))

    def answer_list(self) -> list[Answer]:
        """The seed's three claims, then every other pair of operations."""
        pairs, judged = self.family()
        seed = [(a, b, la, lb) for a, b, la, lb in SEED_CLAIMS if (a, b) in pairs]
        rest = [(a, b, LABELS.get(a, a), LABELS.get(b, b)) for a, b in pairs
                if (a, b) not in {(x, y) for x, y, _, _ in seed}]
        return [from_claim(f"{la} against {lb}: mean time per op", judged.get((a, b)),
                           experiment=self.experiment, heading="What the data support")
                for a, b, la, lb in [*seed, *rest] if judged.get((a, b)) is not None]

    def claims_html(self):
        """The section's family, one row per pair of operations: the numbers the findings
        state, with raw and adjusted p."""
        if not self.ran or len(self.order) < 2:
            return None
        pairs, judged = self.family()
        names = [f"{LABELS.get(a, a)} / {LABELS.get(b, b)}" for a, b in pairs]
        table = prose.claims_table(judged, names, [(c.n_a, c.n_b) for c in pairs.values()],
                                   words=("faster", "slower"))
        return _html(tables.to_html(
            table, caption="Every pair of operations, one family: ratio of mean times per "
                           f"op a / b; {judged.sentence('comparisons')}. Slower/faster only "
                           "where the adjusted interval excludes 1.",
            headers={"runs": "sets"}))

    def break_even(self) -> BreakEven | None:
        """The hit rate above which caching datastore reads pays off, from the means over
        sets, with a 95% percentile bootstrap interval over sets (seeded)."""
        need = ("store_read", "mem_read_hit", "mem_read_miss", "mem_write")
        if not self.ran or not all(o in self.order for o in need):
            return None
        values = {o: self._values(o) for o in need}
        h = break_even_hit_rate({o: float(v.mean()) for o, v in values.items()})
        rng = np.random.default_rng(0)
        boot = np.array([break_even_hit_rate({o: float(rng.choice(v, v.size).mean())
                                              for o, v in values.items()})
                         for _ in range(BOOTSTRAP_RESAMPLES)])
        low, high = np.nanquantile(boot, [0.025, 0.975])
        return BreakEven(h, float(low), float(high), int(min(v.size for v in
                                                               values.values())))

    def break_even_hit_rate(self) -> float | None:
        """The break-even hit rate (unbounded: above 1, caching never pays off)."""
        be = self.break_even()
        return None if be is None else be.value

    def tail_checks(self) -> list[tuple[tails.GroupChecks, tails.Label]]:
        return [(tails.group_checks(self.loaded, ["op"]), lambda k: LABELS.get(k[0], k[0]))]

    # --- tables ---------------------------------------------------------------------
    def ratio_table(self) -> pd.DataFrame:
        return stats.ratio_table(self.per_set, "op", "latency_mean_ms", order=self.order,
                                 family=self.family()[1] if len(self.order) > 1 else None)

    def ratio_table_html(self):
        if not self.ran:
            return None
        table = self.ratio_table()
        table = table.assign(seed_ms=[SEED_MS.get(str(o)) for o in table["op"]])
        html = tables.ratio_table_html(
            table, "op", labels=LABELS,
            caption="Mean time per op over sets (the unit of replication, 95% CI), with the "
                    "ratio to the fastest operation and its interval at the adjusted level of "
                    "the section's family of comparisons (see the findings); cf. seed 001's "
                    "table.",
        )
        return _html(html)

    def latency_table_html(self):
        if not self.ran:
            return None
        t = summarise_with_ci(self.loaded, ["op"], TABLE_METRICS)
        t["op"] = t["op"].astype(str)
        t = t.set_index("op").loc[self.order].reset_index()
        t["op"] = t["op"].map(lambda o: LABELS.get(o, o))
        why = no_ci_reasons(t, TABLE_METRICS, unit="sets")
        for col in TABLE_METRICS:
            t[col] = ci_strings(t, col)
        cols = ["op", "runs", "ops", "throughput_ops_s", "goodput_ops_s", "latency_mean_ms",
                "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_p999_ms",
                "latency_max_ms", "error_rate", "miss_rate"]
        return _html(tables.to_html(
            t[cols],
            caption="Per operation, all measured ops pooled (failed ops included in the "
                    "latencies; errors beside them): throughput and goodput (total ops / "
                    "total wall time) and latency percentiles in ms, with 95% CIs over "
                    "sets where the sets allow one (p50, p99 and p99.9; a percentile needs "
                    f"{intervals.MIN_TAIL_OPS} ops beyond it in every set; p90 and max "
                    "get none)." + "".join(f" {w[0].upper()}{w[1:]}." for w in why),
            headers={"runs": "sets", "throughput_ops_s": "ops/s",
                     "goodput_ops_s": "goodput ops/s", "latency_mean_ms": "mean",
                     "latency_p50_ms": "p50", "latency_p90_ms": "p90", "latency_p99_ms": "p99",
                     "latency_p999_ms": "p99.9", "latency_max_ms": "max",
                     "error_rate": "errors", "miss_rate": "misses"},
            formats={"error_rate": tables.pct(), "miss_rate": tables.pct()},
        ))

    # --- figures --------------------------------------------------------------------
    def _ops_labelled(self) -> pd.DataFrame:
        ops = self.loaded.ops
        return ops.assign(op=ops["op"].astype(str).map(lambda o: LABELS.get(o, o)))

    def _ops_total(self) -> dict[str, int]:
        """Measured ops per operation label: the legends' n, also when only a sample of
        the ops is drawn."""
        per = self.per_set.groupby("op")["ops"].sum()
        return {LABELS.get(o, o): int(n) for o, n in per.items()}

    def _label_order(self) -> list[str]:
        return [LABELS.get(o, o) for o in self.order]

    def time_bars(self):
        if not self.ran:
            return None
        table = self.ratio_table().assign(op=lambda t: t["op"].map(lambda o: LABELS.get(o, o)))
        fig = plots.bars_with_ci(table, "op", title="Mean time per operation",
                                 ylabel="mean time per op [ms] (log scale)", log=True,
                                 order=self._label_order(), unit="sets", xlabel="operation")
        return self.publish(fig, "time-bars")

    def throughput_bars(self):
        if not self.ran:
            return None
        per = self.per_set.assign(op=self.per_set["op"].map(lambda o: LABELS.get(o, o)))
        table = stats.config_table(per, ["op"], "throughput_ops_s", rate=True)
        fig = plots.bars_with_ci(table, "op", title="Throughput per operation (one client)",
                                 ylabel="throughput [ops/s]", order=self._label_order(),
                                 unit="sets (harmonic mean)", xlabel="operation")
        return self.publish(fig, "throughput")

    def ecdf(self):
        if not self.ran:
            return None
        fig = plots.latency_ecdf(self._ops_labelled(), title="Latency distribution per op",
                                 order=self._label_order(), ops_total=self._ops_total(),
                                 sample_every=self.loaded.sample_every)
        return self.publish(fig, "ecdf")

    def per_set_figure(self):
        if not self.ran:
            return None
        per = self.per_set.assign(op=self.per_set["op"].map(lambda o: LABELS.get(o, o)))
        fig = plots.per_set(per, title="Mean time per op in each set (cf. the seed's chart)",
                            order=self._label_order())
        return self.publish(fig, "per-set")

    def over_time(self):
        if not self.ran:
            return None
        fig = plots.latency_over_time(self._ops_labelled(), title="Latency over the run",
                                      order=self._label_order(), ops_total=self._ops_total(),
                                      sample_every=self.loaded.sample_every)
        return self.publish(fig, "over-time")

    def percentile_figure(self):
        if not self.ran:
            return None
        values = None
        if self.loaded.sampled:  # from every op, not the drawn sample
            q = queries.group_quantiles(self.loaded, ["op"], plots.PERCENTILE_QS)
            values = {LABELS.get(str(r["op"]), str(r["op"])):
                      [r[x] for x in plots.PERCENTILE_QS] for _, r in q.iterrows()}
        fig = plots.percentiles(self._ops_labelled(), title="Latency percentiles per op",
                                order=self._label_order(), ops_total=self._ops_total(),
                                values=values)
        return self.publish(fig, "percentiles")


def analyse(
    raw_dir: Path | str,
    experiment: str = EXPERIMENT,
    *,
    alpha: float = 0.05,
    figures_dir: Path | str | None = None,
    include: Sequence[str] = (),
) -> Study:
    """Load the study's runs (pooled: `include` adds partial ones); an absent experiment
    gives a Study that reports "not run"."""
    study = Study(Path(raw_dir), alpha, as_path(figures_dir), experiment,
                  include=tuple(include))
    loaded = study.load(experiment, max_ops=FIGURE_OPS)
    if loaded is None:
        return study
    per = run_summary(loaded, by_op=True)
    study.loaded = loaded
    study.per_set = per[per["ops"] > 0].reset_index(drop=True)
    study.per_set["op"] = study.per_set["op"].astype(str)
    return study
