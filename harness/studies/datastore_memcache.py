"""Study 1 (seed 001): datastore (PostgreSQL) vs memcache (memcached), five operations.

One run is one "set" of the seed: 50 measured ops of one operation. The unit of
replication is the set, so means, CIs and tests are over per-set mean times per op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis import intervals, plots, prose, queries, stats, tables
from harness.analysis.display import html as _html
from harness.analysis.display import markdown as _markdown
from harness.analysis.load import Loaded
from harness.analysis.numbers import run_summary, summarise_with_ci
from harness.analysis.summary_ci import TABLE_METRICS, ci_strings, no_ci_reasons
from harness.studies.base import FIGURE_OPS, StudyBase, as_path
from harness.workloads.datastore_memcache import LABELS, OPS, SEED_MS

EXPERIMENT = "datastore_vs_memcache"
#: The seed's names for the operations.
__all__ = ["LABELS", "OPS", "SEED_MS", "Study", "analyse"]


@dataclass
class Study(StudyBase):
    experiment: str = EXPERIMENT
    loaded: Loaded | None = None
    per_set: pd.DataFrame = field(default_factory=pd.DataFrame)

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

    def findings(self):
        """Significance sentences for the seed's claims, written from the tests."""
        if not self.ran:
            return None
        lines = []
        claims = []
        for a, b, la, lb in (
            ("store_read", "mem_read_hit", "datastore reads", "memcache reads (hits)"),
            ("store_write", "mem_write", "datastore writes", "memcache writes"),
            ("mem_read_hit", "mem_read_miss", "memcache hits", "memcache misses"),
        ):
            c = self.comparison(a, b)
            if c is not None:
                claims.append((c, la, lb))
        # The pairwise claims are one family: Holm-adjusted together, and said so.
        p_holm = stats.holm([c.p_value for c, _, _ in claims]) if claims else []
        for (c, la, lb), p in zip(claims, p_holm, strict=True):
            lines.append("- " + prose.compare_sentence(c, la, lb, unit="sets",
                                                       p_adjusted=float(p)))
        if len(claims) > 1:
            lines.append(f"- The {len(claims)} comparisons above are one family: their "
                         "p-values are Holm-adjusted together.")
        if len(self.order) > 2:
            groups = {LABELS.get(o, o): self._values(o) for o in self.order}
            m = stats.compare_many(groups, alpha=self.alpha)
            lines.append("- " + prose.multi_sentence(m, f"{len(groups)} operations",
                                                     unit="sets"))
        be = self.break_even_hit_rate()
        if be is not None:
            lines.append(
                "- With these means, caching datastore reads in memcache pays off once more "
                f"than {be:.0%} of reads hit (a miss costs a memcache miss, a datastore read "
                "and a memcache write; point estimate)."
            )
        return _markdown("\n".join(lines))

    def break_even_hit_rate(self) -> float | None:
        """Hit rate h where h·hit + (1−h)·(miss + store read + mem write) = store read."""
        need = ("store_read", "mem_read_hit", "mem_read_miss", "mem_write")
        if not self.ran or not all(o in self.order for o in need):
            return None
        m = {o: float(self._values(o).mean()) for o in need}
        miss_path = m["mem_read_miss"] + m["store_read"] + m["mem_write"]
        h = (miss_path - m["store_read"]) / (miss_path - m["mem_read_hit"])
        return min(max(h, 0.0), 1.0)

    # --- tables ---------------------------------------------------------------------
    def ratio_table(self) -> pd.DataFrame:
        return stats.ratio_table(self.per_set, "op", "latency_mean_ms", order=self.order)

    def ratio_table_html(self):
        if not self.ran:
            return None
        table = self.ratio_table()
        table = table.assign(seed_ms=[SEED_MS.get(str(o)) for o in table["op"]])
        html = tables.ratio_table_html(
            table, "op", labels=LABELS,
            caption="Mean time per op over sets (the unit of replication), with the ratio "
                    "to the fastest operation; cf. seed 001's table.",
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
