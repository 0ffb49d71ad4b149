"""Study of seed 000: the file store. insert / find / remove × 1 and 4 client threads
(connections) × memcache on and off, with the round trip to the app measured before
every run (`extra.baseline` in the manifests).

The unit of replication is the run: each configuration's means, CIs and tests are over
per-run values: throughput, the run's median latency, and that median minus the run's
median no-op round trip. Medians per run, because on a shared machine a few ops stalled
by other processes (10-20 ms, against sub-millisecond ops) swing a run's mean latency far
more than anything the app does; the pooled p99 keeps the tail in view.
This module loads and computes; `views` words it (tables, sentences) and `plots` draws
it, both as methods of `harness.studies.filestore.Study`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from harness.analysis.checks import tails
from harness.analysis.data import queries
from harness.analysis.data.load import Loaded, read_manifests
from harness.analysis.data.numbers import run_summary, summarise_with_ci
from harness.analysis.data.summary_ci import ci_strings
from harness.analysis.stats import comparisons as stats
from harness.analysis.stats import intervals, multiplicity, verdict
from harness.studies.base import FIGURE_OPS, StudyBase
from harness.workloads.filestore import OPS

EXPERIMENT = "filestore_memcache"
N = TypeVar("N", bound="Numbers")
OP_PLURAL = {"insert": "inserts", "find": "finds", "remove": "removes"}
DEFAULT_THRESHOLD_BYTES = 102400
OPS_COLUMNS = ("op", "start_ns", "latency_ns", "status", "warmup", "bytes")
PROBES = {"connect": "tcp_connect_ms", "noop": "http_noop_ms"}
#: Per probe: `_ms` the run's median, then the recorded avg, min, max and stddev.
BASELINE_COLUMNS = tuple(f"{k}{s}" for k in PROBES
                         for s in ("_ms", "_avg_ms", "_min_ms", "_max_ms", "_sd_ms"))


def mc_label(on: object) -> str:
    return "memcache on" if bool(on) else "memcache off"


def _baselines(raw_dir: Path, experiment: str) -> tuple[pd.DataFrame, int]:
    """Per run: the round-trip baseline (ms); and the app's memcache threshold."""
    rows: list[dict[str, Any]] = []
    threshold = DEFAULT_THRESHOLD_BYTES
    for _, man in read_manifests(raw_dir, experiments=[experiment]):
        base = man.typed_extra.baseline or {}
        row: dict[str, Any] = {"run_id": man.run_id}
        for key, name in PROBES.items():
            b = base.get(name, {})
            row[f"{key}_ms"] = b.get("median", b.get("avg", np.nan))
            for stat, field_ in (("avg", "avg"), ("min", "min"), ("max", "max"),
                                 ("sd", "stddev")):
                row[f"{key}_{stat}_ms"] = b.get(field_, np.nan)
        rows.append(row)
        for svc in man.services.values():
            if svc.get("kind") == "filestore":
                threshold = svc.get("config", {}).get("threshold_bytes", threshold)
    return pd.DataFrame(rows, columns=["run_id", *BASELINE_COLUMNS]), int(threshold)


@dataclass(frozen=True)
class Family:
    """The section's claims judged together, and the comparison behind each, both by
    key: ("memcache", op, threads), ("threads", "throughput" | "latency", op, memcache),
    ("ops", threads, memcache, op a, op b)."""

    judged: multiplicity.Judged
    comparisons: dict[tuple, stats.Comparison]


@dataclass
class Numbers(StudyBase):
    """The study's data and numbers; `harness.studies.filestore.Study` adds its tables,
    sentences (`views`) and figures (`plots`)."""

    experiment: str = EXPERIMENT
    loaded: Loaded | None = None
    #: One row per run: op, memcache, threads, repetition, per-run statistics, baseline;
    #: `latency_ms` is the run's median latency, `service_ms` that minus `noop_ms`.
    per_run: pd.DataFrame = field(default_factory=pd.DataFrame)
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    _family: Family | None = field(default=None, repr=False)

    name = "filestore"

    @property
    def experiments(self) -> tuple[str, ...]:
        return (self.experiment,)

    @property
    def ran(self) -> bool:
        return self.loaded is not None and not self.per_run.empty

    @property
    def threads(self) -> list[int]:
        return sorted(int(t) for t in self.per_run["threads"].unique()) if self.ran else []

    @property
    def ops_present(self) -> list[str]:
        present = set(self.per_run["op"]) if self.ran else set()
        return [o for o in OPS if o in present]

    def ops_frame(self) -> pd.DataFrame:
        """Measured ops with their run's op, memcache and threads (for figures)."""
        assert self.loaded is not None
        keys = self.per_run[["run_id", "memcache", "threads"]]
        ops = self.loaded.ops.merge(keys, on="run_id", how="inner")
        return ops.assign(latency_ms=ops["latency_ns"] / 1e6, op=ops["op"].astype(str))

    def _pooled(self) -> Loaded:
        """The runs with their thread count, and their ops: every op, pooled per
        configuration in `config_table`; a sample (`Loaded.sampled`) is read from the
        files instead, which needs the run directories."""
        assert self.loaded is not None
        if not self.loaded.sampled:
            return Loaded(self.per_run, self.ops_frame())
        runs = self.loaded.runs.drop(columns=["memcache", "threads"], errors="ignore").merge(
            self.per_run[["run_id", "threads", "memcache"]], on="run_id", how="inner")
        return Loaded(runs, self.loaded.ops.iloc[:0], sample_every=self.loaded.sample_every)

    def size_medians(self, edges: Sequence[float], *, positive: bool = False) -> pd.DataFrame:
        """At the lowest thread count, per op, memcache and file-size bin
        (``np.digitize(bytes, edges)``), over successful ops (of more than 0 bytes if
        `positive`): the median latency (ms) and the ops. From the ops in memory, or
        from every op in the files when those are a sample (`Loaded.sampled`)."""
        assert self.loaded is not None
        keys = self.per_run.loc[self.per_run["threads"] == self.threads[0],
                                ["run_id", "memcache"]]
        if self.loaded.sampled:
            return queries.binned_medians(self.loaded, keys, "bytes", edges,
                                          above=0 if positive else None)
        ops = self.loaded.ops.merge(keys, on="run_id", how="inner")
        keep = (ops["status"] == "ok") & ((ops["bytes"] > 0) if positive else True)
        ops = ops[keep]
        return (ops.assign(op=ops["op"].astype(str), bin=np.digitize(ops["bytes"], edges),
                           median_ms=ops["latency_ns"] / 1e6)
                .groupby(["op", "memcache", "bin"])["median_ms"]
                .agg(median_ms="median", count="size").reset_index())

    def size_range(self) -> tuple[float, float]:
        """Least and greatest size of the successful ops of more than 0 bytes at the
        lowest thread count (the ops `size_medians(positive=True)` reads)."""
        assert self.loaded is not None
        keys = self.per_run.loc[self.per_run["threads"] == self.threads[0], ["run_id"]]
        if self.loaded.sampled:
            return queries.value_range(self.loaded, keys, "bytes", above=0)
        ops = self.loaded.ops.merge(keys, on="run_id", how="inner")
        sizes = ops.loc[(ops["status"] == "ok") & (ops["bytes"] > 0), "bytes"]
        return (float(sizes.min()), float(sizes.max())) if len(sizes) else (np.nan, np.nan)

    def select(self, op: str, threads: int, memcache: bool) -> pd.DataFrame:
        p = self.per_run
        return p[(p["op"] == op) & (p["threads"] == threads) & (p["memcache"] == memcache)]

    def family(self) -> Family:
        """The section's claims, one family (`multiplicity`): memcache on vs off per op
        and thread count (paired), the highest vs the lowest thread count per op and
        memcache (throughput and latency), and every pair of ops per thread count and
        memcache (latency). Tables and sentences all print these claims' adjusted
        intervals."""
        if self._family is not None:
            return self._family
        entries: list[tuple[tuple, stats.Comparison, bool]] = []
        for op in self.ops_present:
            for t in self.threads:
                on = self.select(op, t, True).set_index("repetition")["latency_ms"]
                off = self.select(op, t, False).set_index("repetition")["latency_ms"]
                c = paired_comparison(on, off, alpha=self.alpha)
                if c is not None:
                    entries.append((("memcache", op, t), c, False))
        if len(self.threads) >= 2:
            lo, hi = self.threads[0], self.threads[-1]
            for op in self.ops_present:
                for mc in (True, False):
                    a, b = self.select(op, hi, mc), self.select(op, lo, mc)
                    if len(a) < 2 or len(b) < 2:
                        continue
                    # Fixed-count runs: throughput is averaged harmonically, as in the
                    # tables.
                    entries.append((("threads", "throughput", op, mc), stats.compare_two(
                        a["throughput_ops_s"], b["throughput_ops_s"], alpha=self.alpha,
                        rate=True), True))
                    entries.append((("threads", "latency", op, mc), stats.compare_two(
                        a["latency_ms"], b["latency_ms"], alpha=self.alpha), False))
        for t in self.threads:
            for mc in (False, True):
                for i, a in enumerate(self.ops_present):
                    for b in self.ops_present[i + 1:]:
                        x, y = self.select(a, t, mc), self.select(b, t, mc)
                        if len(x) >= 2 and len(y) >= 2:
                            entries.append((("ops", t, mc, a, b), stats.compare_two(
                                x["latency_ms"], y["latency_ms"], names=(a, b),
                                alpha=self.alpha), False))
        judged = multiplicity.judge([c.log_ratio for _, c, _ in entries],
                                    [h for _, _, h in entries], q=self.alpha,
                                    keys=[k for k, _, _ in entries])
        self._family = Family(judged, {k: c for k, c, _ in entries})
        return self._family

    def tail_checks(self) -> list[tuple[tails.GroupChecks, tails.Label]]:
        runs = self.per_run[["run_id", "threads", "memcache"]]
        checks = tails.group_checks(Loaded(runs, self.loaded.ops), ["op", "threads",
                                                                     "memcache"])
        return [(checks, lambda k: f"{k[0]}, {k[1]} thread{'s' if k[1] != 1 else ''}, "
                                   f"{mc_label(k[2])}")]

    def memcache_effect(self) -> pd.DataFrame:
        """Per op and thread count: memcache on vs off, paired by repetition (see
        `paired_comparison`): effect size, the ratio with its interval at the section
        family's level (``ratio_level``), raw and adjusted p and the verdict; and, for
        reference only (no claim is made on it), the raw p of the unpaired test."""
        fam = self.family()
        rows: list[dict[str, Any]] = []
        for (kind, *key), c in fam.comparisons.items():
            if kind != "memcache":
                continue
            op, t = key
            claim = fam.judged.get((kind, op, t))
            u = stats.compare_two(self.select(op, t, True)["latency_ms"],
                                  self.select(op, t, False)["latency_ms"], alpha=self.alpha)
            rows.append({"op": op, "threads": t, "pairs": c.n_a, "mean_on_ms": c.mean_a,
                         "mean_off_ms": c.mean_b, "ratio": claim.ratio,
                         "ratio_low": claim.low, "ratio_high": claim.high,
                         "ratio_level": claim.level, "test": c.test, "p": claim.p,
                         "p_adjusted": claim.p_adjusted, "verdict": claim.verdict,
                         "significant": claim.significant, "effect": c.effect_size,
                         "effect_name": c.effect_size_name, "p_unpaired": u.p_value,
                         "test_unpaired": u.test, "claim": claim})
        return pd.DataFrame(rows)

    def config_table(self) -> pd.DataFrame:
        """The 12 configurations: runs, throughput (harmonic mean, CI), latency (CI)."""
        keys = ["op", "threads", "memcache"]
        tput = stats.config_table(self.per_run, keys, "throughput_ops_s", rate=True)
        lat = stats.config_table(self.per_run, keys, "latency_ms")
        good = goodput_table(self.per_run, keys)
        pooled = summarise_with_ci(self._pooled(), keys)
        for col in ("latency_p50_ms", "latency_p99_ms"):
            pooled[col] = ci_strings(pooled, col)  # CI over runs where the ops allow one
        pooled["errors"] = np.rint(pooled["error_rate"] * pooled["ops"]).astype(int)
        pooled = pooled[[*keys, "latency_p50_ms", "latency_p99_ms", "errors", "error_rate",
                         "miss_rate"]]
        out = (tput.merge(lat, on=keys, suffixes=("_tput", "_lat")).merge(good, on=keys)
               .merge(pooled, on=keys))
        rank = {o: i for i, o in enumerate(OPS)}
        return out.sort_values(keys, key=lambda s: s.map(rank) if s.name == "op" else s,
                               ascending=[True, True, False]).reset_index(drop=True)

    def baseline_table(self) -> pd.DataFrame:
        """The round trip over all runs, like ping's summary: min and max over all probes,
        the mean of per-run medians (95% CI) and of per-run averages, mean stddev."""
        rows = []
        for key, what in (("connect", "TCP connect"), ("noop", "HTTP no-op (GET /health)")):
            p = self.per_run
            vals = p[f"{key}_ms"].dropna()
            est = stats.mean_ci(vals, positive=True) if len(vals) > 1 else None
            rows.append({"probe": what, "runs": len(vals), "min": p[f"{key}_min_ms"].min(),
                         "mean": est.value if est else vals.mean(),
                         "ci_low": est.low if est else np.nan,
                         "ci_high": est.high if est else np.nan,
                         "avg": p[f"{key}_avg_ms"].mean(), "max": p[f"{key}_max_ms"].max(),
                         "sd": p[f"{key}_sd_ms"].mean()})
        return pd.DataFrame(rows)

    def service_time(self) -> pd.DataFrame:
        """At the lowest thread count: latency, RTT and latency − no-op RTT per config."""
        if not self.ran:
            return pd.DataFrame()
        t = self.threads[0]
        rows = []
        for op in self.ops_present:
            for mc in (True, False):
                sel = self.select(op, t, mc)
                if sel.empty:
                    continue
                lat = stats.mean_ci(sel["latency_ms"], positive=True)
                svc = stats.mean_ci(sel["service_ms"].dropna(), positive=True)
                rows.append({"op": op, "memcache": mc_label(mc), "threads": t,
                             "runs": lat.n, "latency_ms": lat.value,
                             "noop_ms": sel["noop_ms"].mean(),
                             "connect_ms": sel["connect_ms"].mean(),
                             "service_ms": svc.value, "service_low": svc.low,
                             "service_high": svc.high,
                             "rtt_share": sel["noop_ms"].mean() / lat.value})
        return pd.DataFrame(rows)




def goodput_table(per_run: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per configuration: goodput (ok and miss ops) by the throughput column's rule, each
    run counting once (for these fixed-count runs the harmonic mean: total ops over total
    wall time when the runs hold equally many ops), with its 95% CI over runs:
    ``goodput``, ``goodput_low``, ``goodput_high``."""
    rows = []
    for key, grp in per_run.groupby(keys, sort=True, observed=True):
        wall = grp["wall_s"].to_numpy(float)
        good = grp["goodput_ops_s"].to_numpy(float) * wall  # answered ops per run
        # Each run counts once, as in the throughput column (`intervals.run_scale`).
        scale = intervals.run_scale(grp["ops"].to_numpy(float), wall, False)
        iv = intervals.ratio_interval(scale * good, scale * wall)
        rows.append({**dict(zip(keys, key, strict=True)), "goodput": iv.value,
                     "goodput_low": iv.low, "goodput_high": iv.high})
    return pd.DataFrame(rows, columns=[*keys, "goodput", "goodput_low", "goodput_high"])


def paired_comparison(a: pd.Series, b: pd.Series, *, alpha: float = 0.05,
                      confidence: float = 0.95) -> stats.Comparison | None:
    """a vs b paired on their index (the repetition), on log ratios; None if < 2 pairs.

    The runs of one repetition ran one after another (specs expand repetition-major, and
    memcache is the grid's last key), so a pair shares the machine's state at the time;
    pairing removes the drift between repetitions, which on a shared machine is most of
    the spread. Test: one-sample t-test of log(a/b) (`verdict.paired_log_ratio`); never
    the Wilcoxon signed-rank test, whose smallest p at 5 pairs is 0.0625 (it could not
    reject whatever the data); ratio: geometric mean of a/b with the t interval of the
    mean log ratio, the same statistic inverted; effect size: Cohen's d_z of log ratios.
    """
    pairs = pd.concat({"a": a, "b": b}, axis=1, join="inner").dropna()
    pairs = pairs[(pairs["a"] > 0) & (pairs["b"] > 0)]
    n = len(pairs)
    if n < 2:
        return None
    d = np.log(pairs["a"].to_numpy(float)) - np.log(pairs["b"].to_numpy(float))
    norm = stats.normality(d, alpha)
    res = verdict.paired_log_ratio(pairs["b"].to_numpy(float), pairs["a"].to_numpy(float),
                                   confidence=confidence)
    name = "paired t-test on log ratios"
    ratio = stats.Estimate(res.ratio, res.low, res.high, n,
                           "geometric mean, t on log ratios", confidence)
    sd = float(d.std(ddof=1))
    geo = np.exp(np.log(pairs).mean())
    return stats.Comparison(
        name_a="a", name_b="b", n_a=n, n_b=n, mean_a=float(geo["a"]), mean_b=float(geo["b"]),
        test=name, statistic=res.t, p_value=res.p, alpha=alpha,
        effect_size=float(d.mean() / sd) if sd > 0 else float("nan"),
        effect_size_name="Cohen's d_z", ratio=ratio, normality_a=norm, normality_b=norm,
        log_ratio=res)


def load_into(study: N) -> N:
    """Load `study`'s runs into it; an absent experiment leaves it "not run"."""
    raw_dir, experiment = study.raw_dir, study.experiment
    loaded = study.load(experiment, columns=OPS_COLUMNS, max_ops=FIGURE_OPS)
    if loaded is None:
        return study
    per = run_summary(loaded)
    per = per[per["ops"] > 0].copy()
    per["op"] = per["op"].astype(str)
    per["memcache"] = per["memcache"].astype(bool)
    per["threads"] = per["loadgen_connections"].astype(int) * per["loadgen_processes"].astype(
        int)
    base, study.threshold_bytes = _baselines(raw_dir, experiment)
    per = per.merge(base, on="run_id", how="left")  # NaN where a run has no baseline
    per[list(BASELINE_COLUMNS)] = per[list(BASELINE_COLUMNS)].astype(float)
    per["latency_ms"] = per["latency_p50_ms"]
    per["service_ms"] = per["latency_ms"] - per["noop_ms"]
    study.loaded, study.per_run = loaded, per.reset_index(drop=True)
    return study
