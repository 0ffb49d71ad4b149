"""The imported-results notebook: per imported file, the table its report printed, redone.

Imported runs (``source: imported``, written by `harness import`) are grouped by the file
they came from. For each file, the method for its format returns HTML: the original
table recomputed from the raw records, with confidence intervals and tests where the
source has repeated measurements (gae-bench's sets) and a plain statement where it does
not (one report per configuration). Every method returns None when no file of its
format was imported, so the notebook runs on any raw-results directory.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded, grid_keys, load_ops, read_manifests, runs_frame
from harness.analysis.data.summary import run_summary
from harness.analysis.sections import prose, tables
from harness.analysis.sections.display import html as _html
from harness.analysis.sections.display import markdown as _markdown
from harness.analysis.stats import comparisons as stats
from harness.workloads.datastore_memcache import LABELS, OPS, SEED_MS

#: Seed 001's stated factors: (slow, fast, labels, "about k× faster").
SEED_FACTORS = (
    ("store_read", "mem_read_hit", "datastore reads", "memcache reads (hits)", 3),
    ("store_write", "mem_write", "datastore writes", "memcache writes", 8),
)


def _p(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


@dataclass
class Imported:
    raw_dir: Path
    alpha: float
    loaded: Loaded | None = None
    #: One row per (run, op): run columns, `run_summary` statistics, source columns.
    per_run: pd.DataFrame = field(default_factory=pd.DataFrame)
    stated: dict[str, dict] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        return self.loaded is not None and not self.per_run.empty

    def sources(self, fmt: str | None = None) -> list[tuple[tuple[str, str], pd.DataFrame]]:
        """((experiment, file), its per-run rows) for each imported file, of `fmt` if given."""
        if not self.ran:
            return []
        rows = self.per_run if fmt is None else self.per_run[self.per_run["format"] == fmt]
        return [(k, g) for k, g in rows.groupby(["experiment", "file"], sort=True)]

    def _heading(self, key: tuple[str, str], fmt: str, what: str) -> str:
        exp, file = key
        return (f"<h2>{html.escape(what)}: <code>{html.escape(file)}</code></h2>"
                f"<p>Format <code>{fmt}</code>, imported as experiment "
                f"<code>{html.escape(exp)}</code>.</p>")

    # --- overview ---------------------------------------------------------------------
    def status(self):
        if not self.ran:
            return _markdown(
                f"**No imported results** under `{self.raw_dir}`: nothing to show here. "
                "Bring old results in with `harness import FORMAT FILE... -o RAW_DIR`.",
                not_run=True, omit=True)
        n_files = len(self.sources())
        return _markdown(
            f"{self.per_run['run_id'].nunique()} imported runs from {n_files} file"
            f"{'s' if n_files != 1 else ''}. Nothing here was measured by this kit: hosts, "
            "servers and times are what the sources state, usually nothing.")

    def sources_table(self):
        if not self.ran:
            return None
        rows = []
        for (exp, file), g in self.sources():
            rows.append({"file": file, "format": g["format"].iloc[0], "experiment": exp,
                         "runs": g["run_id"].nunique(), "ops": int(g["ops"].sum()),
                         "records": "aggregated" if g["aggregated"].any() else "per op",
                         "noise lines skipped": int(g["skipped_lines"].max())})
        return _html(tables.to_html(
            pd.DataFrame(rows), caption="Imported files. Aggregated: the source gave only a "
            "total time for N ops, so each op carries total/N (means and throughput are "
            "exact; percentiles of such runs are not measurements)."))

    # --- gae-bench (seed 001) ---------------------------------------------------------
    def gae_bench(self):
        parts = []
        for key, g in self.sources("gae-bench"):
            per = g.assign(op=g["op"].astype(str))
            order = [o for o in OPS if o in set(per["op"])] + sorted(set(per["op"]) - set(OPS))
            family = self._family(per, order)
            table = stats.ratio_table(per, "op", "latency_mean_ms", order=order,
                                      family=family[1] if family else None)
            table = table.assign(seed_ms=[SEED_MS.get(str(o)) for o in table["op"]])
            parts.append(self._heading(key, "gae-bench", "Datastore vs memcache sets"))
            parts.append(tables.ratio_table_html(
                table, "op", labels=LABELS,
                caption="Mean time per op over sets (each set's total / its op count), "
                        "95% CI over sets, ratio to the fastest with its interval at the "
                        "adjusted level of the file's family of claims (below); beside it "
                        "the table seed 001 printed."))
            parts.append(self._seed_claims(per, family))
        return _html("\n".join(parts)) if parts else None

    def _family(self, per: pd.DataFrame, order: list[str]):
        """Every pair of operations and the seed's "k× faster" claims as exact
        hypotheses (mean(slow) = k · mean(fast)), one family (`stats.pairwise_family`)."""
        groups = {o: per.loc[per["op"] == o, "latency_mean_ms"].to_numpy(float)
                  for o in order}
        groups = {o: v for o, v in groups.items() if v.size >= 2}
        if len(groups) < 2:
            return None
        extra = []
        for slow, fast, *_, claimed in SEED_FACTORS:
            if slow in groups and fast in groups:
                # "k× faster" as a hypothesis: the log-ratio test of slow vs k·fast, the
                # same statistic as the ratio's interval, shifted by log k.
                k = stats.compare_two(groups[slow], claimed * groups[fast], alpha=self.alpha)
                extra.append((("exactly", slow, fast), k.log_ratio, False))
        return stats.pairwise_family(groups, alpha=self.alpha, extra=extra)

    def _seed_claims(self, per: pd.DataFrame, family) -> str:
        if family is None:
            return _p("Fewer than two sets per operation: no interval or test possible.")
        pairs, judged = family
        items = []
        for slow, fast, label_s, label_f, claimed in SEED_FACTORS:
            claim, exact = judged.get((slow, fast)), judged.get(("exactly", slow, fast))
            if claim is None or exact is None:
                continue
            c = pairs[(slow, fast)]
            items.append(prose.claim_sentence(claim, label_s, label_f, n=(c.n_a, c.n_b),
                                              unit="sets"))
            inside = "excludes" if exact.significant else "contains"
            verdict = (f"the data reject exactly {claimed}×" if exact.significant
                       else f"the data do not reject {claimed}× (which is not evidence "
                            f"for it: see the interval)")
            items.append(
                f"The seed's \"about {claimed}× faster\" for {label_f}: the ratio's "
                f"{prose.ci_text(claim.level, claim.low, claim.high)} {inside} {claimed}; "
                f"{exact.test.test} of mean({slow}) = {claimed} × mean({fast}) gives "
                f"{prose.fmt_p(exact.p)}, BH-adjusted {prose.fmt_p(exact.p_adjusted)}, so "
                f"{verdict}.")
        items.append(f"These {len(judged)} claims (every pair of operations and the seed's "
                     f"{sum(1 for k in judged.keys if k[0] == 'exactly')} stated factors) "
                     f"are one family: {judged.sentence('claims')}.")
        return "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"

    # --- perfctest (seed 000) ---------------------------------------------------------
    def perfctest(self):
        parts = []
        for key, g in self.sources("perfctest"):
            rows = []
            for _, r in g.iterrows():
                # One run per experiment: its ops are not independent samples (the run is
                # the unit), so there is no interval to give; the mean alone.
                lat = self._latencies_ms(r["run_id"])
                rows.append({"threads": r.get("threads"), "op": r["op"], "ops": int(r["ops"]),
                             "mean": float(lat.mean()) if lat.size else float("nan"),
                             "ci_low": float("nan"), "ci_high": float("nan"),
                             "p50": r["latency_p50_ms"], "max": r["latency_max_ms"],
                             "ops/s": r["throughput_ops_s"],
                             "stated total [s]": self.stated[r["run_id"]].get("stated_total_s")})
            t = pd.DataFrame(rows)
            t.insert(3, "mean latency [ms]", [f"{v:.3g}" for v in t["mean"]])
            parts.append(self._heading(key, "perfctest", "Per-operation log"))
            parts.append(tables.to_html(
                t.drop(columns=["mean", "ci_low", "ci_high"]),
                caption="Per experiment (threads × operation): the listed operations' "
                        "latencies. One run each, so no interval: ops inside one run are "
                        "not independent samples, and an interval over them would claim "
                        "far more certainty than one run gives. ops/s assumes no think time "
                        "between requests (not logged), so it is an upper bound."))
            parts.append(_p("The log shows only the first operations of each experiment: "
                            "compare the listed ops' sum with the stated total. Memcache "
                            "on/off is not in the log, so runs cannot be split by it."))
        return _html("\n".join(parts)) if parts else None

    def _latencies_ms(self, run_id: str) -> np.ndarray:
        ops = self.loaded.ops
        return ops.loc[ops["run_id"] == run_id, "latency_ns"].to_numpy(float) / 1e6

    # --- cluster-perf (seed 002) ------------------------------------------------------
    def cluster_perf(self):
        parts = []
        for key, g in self.sources("cluster-perf"):
            t = pd.DataFrame({
                "mode": g.get("mode"), "nodes": g.get("nodes"), "op": g["op"].astype(str),
                "objects": g["ops"], "total [ms]": g["latency_mean_ms"] * g["ops"],
                "µs/op": g["latency_mean_ms"] * 1000,
                "printed µs/op": [self._printed_us(r) for r in g["run_id"]],
                "ops/s": g["throughput_ops_s"],
            })
            parts.append(self._heading(key, "cluster-perf", "Cluster performance"))
            parts.append(tables.to_html(
                t, caption="Per operation and cluster: µs per object from the unrounded "
                           "total (the tool printed it rounded down)."))
            wide = t.pivot_table(index="op", columns="mode", values="µs/op", aggfunc="mean")
            if {"local-cluster", "network-cluster"} <= set(wide.columns):
                ratio = (wide["network-cluster"] / wide["local-cluster"]).rename("network/local")
                parts.append(tables.to_html(
                    ratio.reset_index(), caption="Cost of the network cluster per operation "
                    "(time per op, network / local)."))
            parts.append(_p("One timing per operation and cluster: no confidence interval or "
                            "test is possible; differences below the run-to-run spread "
                            "(unknown here) may be noise."))
        return _html("\n".join(parts)) if parts else None

    def _printed_us(self, run_id: str) -> str | None:
        stated = self.stated[run_id].get("stated", {})
        return next((v for k, v in stated.items() if k.startswith("microsecs_per_")), None)

    # --- kv-report (seed 003) ---------------------------------------------------------
    def kv_report(self):
        parts = []
        for key, g in self.sources("kv-report"):
            cols = [c for c in ("servers", "clients", "cache_strategy", "cache_size",
                                "annotation") if c in g.columns]
            g = g.assign(block=[self.stated[r].get("line") for r in g["run_id"]])
            wide = g.pivot_table(index=["block", *cols], columns="op",
                                 values="latency_mean_ms", aggfunc="first", dropna=False)
            wide = wide.dropna(how="all").reset_index()
            wide = wide[[*(c for c in wide.columns if c not in ("put", "get")),
                         *(c for c in ("put", "get") if c in wide.columns)]].rename(
                columns={"put": "put [ms/request]", "get": "get [ms/request]"})
            wide["throughput (stated)"] = [self._stated_throughput(g, b) for b in wide["block"]]
            parts.append(self._heading(key, "kv-report", "KV store reports"))
            parts.append(tables.to_html(
                wide.drop(columns=["block"]),
                caption="Each report block: total time / count per request, put and get."))
            parts.append(_p("Each configuration was reported once: with one measurement "
                            "there is no spread, so no confidence interval and no test can "
                            "say whether, e.g., LRU beats FIFO or 10 servers are slower than "
                            "5. Repeat the runs (harness run) to answer such questions."))
        return _html("\n".join(parts)) if parts else None

    def _stated_throughput(self, g: pd.DataFrame, block: int) -> str | None:
        for run_id in g.loc[g["block"] == block, "run_id"]:
            value = self.stated[run_id].get("stated", {}).get("throughput")
            if value:
                return value
        return None

    # --- memtier-json, redis-benchmark-csv -------------------------------------------
    def tool_outputs(self):
        parts = []
        for fmt in ("memtier-json", "redis-benchmark-csv", "redis-benchmark", "ycsb",
                    "ycsb-raw", "ycsb-hdr"):
            for key, g in self.sources(fmt):
                t = g[["op", "ops", "throughput_ops_s", "latency_mean_ms"]].copy()
                t["op"] = t["op"].astype(str)
                for pct in ("p50", "p99"):
                    t[f"{pct} (stated)"] = [self._stated_pct(r, o, pct)
                                            for r, o in zip(g["run_id"], t["op"], strict=True)]
                parts.append(self._heading(key, fmt, "Load generator output"))
                parts.append(tables.to_html(
                    t, caption="Per op: count, ops/s and mean latency [ms] as the tool "
                               "reported them; percentiles [ms] are the tool's own.",
                    headers={"throughput_ops_s": "ops/s", "latency_mean_ms": "mean [ms]"}))
        return _html("\n".join(parts)) if parts else None

    def _stated_pct(self, run_id: str, op: str, pct: str) -> object:
        # Importers that know the tool's percentiles put them here, under p50/p99 keys.
        figures = self.stated[run_id].get("stated_latency_ms", {}).get(op, {})
        if pct in figures:
            return figures[pct]
        stated = self.stated[run_id].get("stated", {})
        if f"{pct}_latency_ms" in stated:  # redis-benchmark
            return stated[f"{pct}_latency_ms"]
        block = stated.get({"set": "Sets", "get": "Gets"}.get(op, op), {})
        return block.get("percentiles_ms", {}).get(f"{pct}.00")


def analyse(raw_dir: Path | str, *, alpha: float = 0.05) -> Imported:
    """Every imported run under `raw_dir` (none: an Imported that says "not run")."""
    raw_dir = Path(raw_dir)
    out = Imported(raw_dir, alpha)
    if not raw_dir.exists():
        return out
    pairs = read_manifests(raw_dir, where={"source": "imported"})
    if not pairs:
        return out
    runs = runs_frame(pairs)
    ops = load_ops(runs, ["op", "start_ns", "latency_ns", "status"])
    out.loaded = Loaded(runs, ops, grid_keys(m for _, m in pairs))
    per = run_summary(out.loaded, by_op=True)
    for _, m in pairs:
        src = m.typed_extra.imported_from
        out.stated[m.run_id] = {**m.extra, "line": src.get("line")}
    extra = pd.DataFrame([
        {"run_id": m.run_id, **{k: x.imported_from.get(k) for k in ("format", "file", "sha256")},
         "aggregated": bool(x.aggregated), "skipped_lines": x.skipped_lines}
        for x, m in ((m.typed_extra, m) for _, m in pairs)])
    out.per_run = per[per["ops"] > 0].merge(extra, on="run_id", how="left")
    return out
