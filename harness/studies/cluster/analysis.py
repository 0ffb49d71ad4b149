"""Study of seed 002 (cluster_perf): single node, local cluster, network cluster.

One run is one operation over N objects, and the run is the unit of replication. Per run,
as the seed printed it: the total time (wall clock from the first op's start to the last
op's end) and µs per object = total / N. A run's setup comes from its manifest, as the
service recorded it (mode, nodes, the link's round trip, the emulation used), so a
single-node run is one node whatever the grid said.

The overhead decomposition compares means over runs, setup to setup, per operation:
single → local cluster with n nodes is the cost of replication; local cluster → network
cluster with the same n is the cost of the network. Each step is one claim: the ratio of
means with a test (Welch's t on its log, `harness.analysis.stats.comparisons`); the steps of every
operation are one family (`multiplicity`: Benjamini-Hochberg, intervals at the family's
FCR-adjusted level), and the added µs per object is that same ratio interval times the
step's starting mean, so the two never disagree (a Welch interval of the difference beside
a test on log ratios did). The insert-cost fit is ordinary least squares of µs per insert
on the configured round trip and the number of standbys over the cluster runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as st

from harness.analysis.data.load import Loaded, read_manifests
from harness.analysis.data.numbers import run_summary
from harness.analysis.stats import comparisons as stats
from harness.analysis.stats import multiplicity
from harness.studies.base import FIGURE_OPS, StudyBase
from harness.workloads.cluster import OPS

EXPERIMENT = "cluster_modes"
LABELS: dict[str, str] = {"insert": "Insert", "hash_search": "Hash search",
                          "tree_search": "Tree search", "sequential": "Sequential",
                          "search_delete": "Search/delete"}
MODES: tuple[str, ...] = ("single", "local-cluster", "network-cluster")
#: Seed 002 (eXtremeDB cluster_perf, 2 nodes, 100,000 objects): µs per object from the
#: printed totals (562 ms / 100,000 = 5.62 µs; the tool printed it rounded down).
SEED_US: dict[str, dict[str, float]] = {
    "local-cluster": {"insert": 5.62, "hash_search": 1.13, "tree_search": 2.85,
                      "sequential": 1.00, "search_delete": 7.82},
    "network-cluster": {"insert": 26.56, "hash_search": 1.41, "tree_search": 3.59,
                        "sequential": 0.94, "search_delete": 17.03},
}
RUN_COLUMNS = ("run_id", "repetition", "status", "op", "mode", "nodes", "standbys",
               "profile", "rtt_ms", "emulation", "objects", "total_ms", "us_per_object",
               "latency_mean_us", "setup")


def setup_label(mode: str, nodes: int, profile: str) -> str:
    """`single`, `local n=2`, `network n=4 wifi`."""
    if mode == "single":
        return "single"
    short = mode.split("-")[0]
    return f"{short} n={nodes}" + (f" {profile}" if mode == "network-cluster" else "")


def _service_config(manifest) -> dict:
    for svc in manifest.services.values():
        if svc.get("kind") == "pg_cluster":
            return dict(svc.get("config") or {})
    # A plain PostgreSQL service is a single node.
    return {"mode": "single", "nodes": 1, "standbys": 0, "profile": "none",
            "link": {"rtt_ms": 0.0}, "emulation": "none"}


def per_run(loaded: Loaded, raw_dir: Path, experiment: str) -> pd.DataFrame:
    """One row per run: its setup (from the manifest) and the seed's two numbers."""
    summary = run_summary(loaded, by_op=True)
    summary = summary[summary["ops"] > 0]
    setups = {}
    for _d, m in read_manifests(raw_dir, experiments=[experiment], verify=False):
        c = _service_config(m)
        setups[m.run_id] = {
            "mode": c.get("mode", "single"), "nodes": int(c.get("nodes", 1)),
            "standbys": int(c.get("standbys", 0)),
            "profile": c.get("profile", "none"),
            "rtt_ms": float((c.get("link") or {}).get("rtt_ms", 0.0)),
            "emulation": c.get("emulation", "none"),
        }
    rows = []
    for r in summary.itertuples(index=False):
        s = setups.get(r.run_id)
        if s is None:
            continue
        total_ms = float(r.wall_s) * 1e3
        rows.append({"run_id": r.run_id, "repetition": r.repetition, "status": r.status,
                     "op": str(r.op), **s, "objects": int(r.ops), "total_ms": total_ms,
                     "us_per_object": total_ms * 1e3 / int(r.ops),
                     "latency_mean_us": float(r.latency_mean_ms) * 1e3,
                     "setup": setup_label(s["mode"], s["nodes"], s["profile"])})
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def setup_order(frame: pd.DataFrame) -> list[str]:
    """Setups from cheapest to dearest: mode, then nodes, then round trip."""
    keys = (frame.assign(m=frame["mode"].map(MODES.index))
            .sort_values(["m", "nodes", "rtt_ms"])["setup"])
    return list(dict.fromkeys(keys))


def op_order(frame: pd.DataFrame) -> list[str]:
    present = set(frame["op"])
    return [o for o in OPS if o in present] + sorted(present - set(OPS))


def seed_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per op and setup: runs, objects, mean total ms and µs per object with 95% CIs (the
    kit's interval of a mean over runs: the jackknife of its log, `stats.run_mean_ci`;
    never a t or BCa interval picked by a normality pre-test and cut at 0)."""
    rows = []
    for (op, setup), g in frame.groupby(["op", "setup"], sort=False):
        us = stats.run_mean_ci(g["us_per_object"])
        total = stats.run_mean_ci(g["total_ms"])
        rows.append({"op": op, "setup": setup, "n": us.n,
                     "objects": int(g["objects"].median()), "total_ms": total.value,
                     "total_low": total.low, "total_high": total.high, "us": us.value,
                     "us_low": us.low, "us_high": us.high, "method": us.method})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    ops, setups = op_order(frame), setup_order(frame)
    out["_o"] = out["op"].map(ops.index)
    out["_s"] = out["setup"].map(setups.index)
    return out.sort_values(["_o", "_s"]).drop(columns=["_o", "_s"]).reset_index(drop=True)


def steps(frame: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(step, from setup, to setup): single → each local cluster (replication), each
    local cluster → each network cluster with as many nodes (network)."""
    setups = frame.drop_duplicates("setup")
    out = []
    single = setups[setups["mode"] == "single"]["setup"].tolist()
    for loc in setups[setups["mode"] == "local-cluster"].sort_values("nodes").itertuples():
        if single:
            out.append(("replication", single[0], loc.setup))
        nets = setups[(setups["mode"] == "network-cluster") & (setups["nodes"] == loc.nodes)]
        for net in nets.sort_values("rtt_ms").itertuples():
            out.append(("network", loc.setup, net.setup))
    return out


def decomposition(frame: pd.DataFrame, alpha: float = 0.05,
                  ops: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per op and step: the ratio to/from of the mean µs per object with its
    test, the steps of every op one family (`multiplicity.judge`): the ratio's interval at
    the family's level (``level``), raw and adjusted p, the verdict; and the added µs per
    object, from/to's difference, with that same interval times the from-mean."""
    rows, tests = [], []
    for op in ops or op_order(frame):
        f = frame[frame["op"] == op]
        for step, a, b in steps(f):
            x = f.loc[f["setup"] == b, "us_per_object"].to_numpy(float)
            y = f.loc[f["setup"] == a, "us_per_object"].to_numpy(float)
            if x.size < 2 or y.size < 2:
                continue
            c = stats.compare_two(x, y, names=(b, a), alpha=alpha)
            rows.append({"op": op, "step": step, "src": a, "dst": b, "n_from": y.size,
                         "n_to": x.size, "from_us": float(y.mean()), "to_us": float(x.mean()),
                         "test": c.test})
            tests.append(c.log_ratio)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    # More time per object is worse; "no significant difference" needs the adjusted CI
    # within ±5%.
    judged = multiplicity.judge(tests, False, q=alpha)
    out["ratio"] = [c.ratio for c in judged.claims]
    out["ratio_low"] = [c.low for c in judged.claims]
    out["ratio_high"] = [c.high for c in judged.claims]
    out["level"] = judged.family.level
    out["p"] = [c.p for c in judged.claims]
    out["p_adjusted"] = [c.p_adjusted for c in judged.claims]
    out["significant"] = [c.significant for c in judged.claims]
    out["verdict"] = [c.verdict for c in judged.claims]
    # One interval per effect: the added µs are the ratio's interval in µs at the from-
    # setup's mean (to − from = from · (ratio − 1)).
    out["added_us"] = out["to_us"] - out["from_us"]
    out["added_low"] = out["from_us"] * (out["ratio_low"] - 1)
    out["added_high"] = out["from_us"] * (out["ratio_high"] - 1)
    out.attrs["judged"] = judged
    return out


def rtt_fit(frame: pd.DataFrame, op: str = "insert", confidence: float = 0.95
            ) -> pd.DataFrame:
    """OLS of µs per object on the configured round trip (µs) and the standbys, over the
    cluster runs of `op`: intercept, µs per µs of RTT (1 = one round trip per object),
    µs per extra standby; each with its t interval. Empty if the data cannot fit it."""
    f = frame[(frame["op"] == op) & (frame["mode"] != "single")]
    cols = ["term", "estimate", "low", "high", "n", "r2"]
    if len(f) < 4 or f["rtt_ms"].nunique() < 2:
        return pd.DataFrame(columns=cols)
    terms = ["intercept [µs]", "per µs of RTT", "per extra standby [µs]"]
    x = np.column_stack([np.ones(len(f)), f["rtt_ms"].to_numpy(float) * 1e3,
                         f["standbys"].to_numpy(float) - 1])
    if f["standbys"].nunique() < 2:
        x, terms = x[:, :2], terms[:2]
    y = f["us_per_object"].to_numpy(float)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    dof = len(y) - x.shape[1]
    sigma2 = float(resid @ resid) / dof
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(x.T @ x)))
    half = st.t.ppf(0.5 + confidence / 2, dof) * se
    r2 = 1 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum())
    return pd.DataFrame({"term": terms, "estimate": beta, "low": beta - half,
                         "high": beta + half, "n": len(y), "r2": r2}, columns=cols)


def point_table(frame: pd.DataFrame, op: str = "insert") -> pd.DataFrame:
    """Mean µs per object of `op` with CI per (nodes, rtt_ms): the fit's points."""
    rows = []
    for (nodes, rtt, mode), g in frame[frame["op"] == op].groupby(
            ["nodes", "rtt_ms", "mode"], sort=True):
        est = stats.run_mean_ci(g["us_per_object"])
        rows.append({"nodes": nodes, "rtt_ms": rtt, "mode": mode, "n": est.n,
                     "mean": est.value, "ci_low": est.low, "ci_high": est.high})
    return pd.DataFrame(rows, columns=["nodes", "rtt_ms", "mode", "n", "mean", "ci_low",
                                       "ci_high"])


def load_study(study: StudyBase) -> tuple[Loaded | None, pd.DataFrame]:
    """The loaded runs of `study`'s experiment and its per-run frame; (None, empty) when
    it has no run to pool."""
    experiment = study.experiments[0]
    # Its tables are per run, from every op in the files: the ops kept are a sample.
    loaded = study.load(experiment, max_ops=FIGURE_OPS)
    if loaded is None:
        return None, pd.DataFrame(columns=list(RUN_COLUMNS))
    return loaded, per_run(loaded, study.raw_dir, experiment)
