"""Study of seeds 003/004: a sharded KV store. Scaling (servers x clients), cache (size
x strategy) and elasticity (servers added and removed under load).

Throughput is counted per client and summed over clients (aggregate); a client's
throughput of one operation is its ops of that kind over the time it spent on them
(the sum of their latencies over its requests in flight: exactly the seeds' "count /
total time" with one request in flight). Latency comes from each op's own time, never
from 1/throughput. Redirect records (an attempt turned away, see the kvstore workload)
are not ops: they are counted per op as the redirect rate. Runs are the samples: each
configuration's means and CIs are over its runs (harmonic means for rates).
`kvstore_plots` draws, from the same `KVStudy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import prose, stats
from harness.analysis.display import markdown as _md
from harness.analysis.load import Loaded, available_experiments, load, read_manifests
from harness.analysis.summary import ERROR_STATUSES
from harness.analysis.summary_ci import ci_strings, summarise_with_ci

EXPERIMENTS = {"scaling": "kv_scaling", "cache": "kv_cache", "elastic": "kv_elastic"}
OPS_COLUMNS = ("client", "op", "start_ns", "latency_ns", "status")
OPS = ("put", "get")
#: Seed 004's time per scaling step with 10,000 pairs on 5 servers.
SEED_STEP_S = {"add_node": 17.78, "remove_node": 15.56}
STRATEGIES = ("FIFO", "LRU", "LFU")
#: Ops that got an answer: what goodput counts (a miss is an answer, not a failure).
GOOD_STATUSES = ("ok", "miss")


def grid_column(runs: pd.DataFrame, suffixes: tuple[str, ...]) -> str | None:
    """The runs column of a grid key such as ``services.kv.masters`` (any service name)."""
    for col in runs.columns:
        if col.startswith("services.") and col.rsplit(".", 1)[-1] in suffixes:
            return str(col)
    return None


def per_client(loaded: Loaded) -> pd.DataFrame:
    """One row per run, client and op: ops, busy seconds, throughput, redirects."""
    ops, runs = loaded.ops, loaded.runs
    if ops.empty:
        return pd.DataFrame(columns=["run_id", "client", "op", "n", "good", "failed",
                                     "busy_s", "ops_s", "good_ops_s", "redirects", "span_s",
                                     "n_all", "good_all"])
    conc = (runs["loadgen_connections"] * runs["loadgen_inflight"]).set_axis(runs["run_id"])
    is_redirect = (ops["status"] == "redirect").to_numpy()
    frame = pd.DataFrame({
        "run_id": ops["run_id"].astype(str), "client": ops["client"],
        "op": ops["op"].astype(str), "latency_s": ops["latency_ns"] / 1e9,
        "start_s": ops["start_ns"] / 1e9, "end_s": (ops["start_ns"] + ops["latency_ns"]) / 1e9,
        "is_op": ~is_redirect, "redirect": is_redirect,
        # Goodput counts the ops that got an answer (ok or miss), as the summary does.
        "good": ops["status"].isin(GOOD_STATUSES).to_numpy(),
        "failed": ops["status"].isin(ERROR_STATUSES).to_numpy()})
    keys = ["run_id", "client", "op"]
    real = frame[frame["is_op"]]
    out = real.groupby(keys, observed=True).agg(n=("latency_s", "size"),
                                                good=("good", "sum"), failed=("failed", "sum"),
                                                lat_s=("latency_s", "sum"))
    out["redirects"] = frame[frame["redirect"]].groupby(keys, observed=True).size()
    out = out.fillna({"redirects": 0}).reset_index()
    out["busy_s"] = out["lat_s"] / out["run_id"].map(conc).astype(float)
    out["ops_s"] = out["n"] / out["busy_s"]
    out["good_ops_s"] = out["good"] / out["busy_s"]  # the same time rule as ops_s
    span = real.groupby(["run_id", "client"], observed=True).agg(
        first=("start_s", "min"), last=("end_s", "max"), n_all=("latency_s", "size"),
        good_all=("good", "sum"))
    span["span_s"] = span["last"] - span["first"]
    out = out.merge(span[["span_s", "n_all", "good_all"]].reset_index(),
                    on=["run_id", "client"])
    return out.drop(columns=["lat_s"])


def per_run(loaded: Loaded, factors: list[str]) -> pd.DataFrame:
    """One row per run and op (put, get, all): aggregate and per-client throughput,
    latency percentiles, redirect, miss and error rates, with the run's `factors`."""
    clients = per_client(loaded)
    ops = loaded.ops[loaded.ops["status"] != "redirect"]
    rows: list[dict[str, Any]] = []
    runs = loaded.runs.set_index("run_id")
    lat = ops.groupby(["run_id", "op"], observed=True)["latency_ns"]
    q = lat.quantile([0.5, 0.99]).unstack() / 1e6
    st = ops.groupby(["run_id", "op"], observed=True)["status"].value_counts(normalize=True)
    for (run_id, op), grp in clients.groupby(["run_id", "op"]):
        base = {f: runs.at[run_id, f] for f in factors}
        rows.append({"run_id": run_id, "op": op, **base, "clients": len(grp),
                     "throughput_ops_s": grp["ops_s"].sum(),
                     "goodput_ops_s": grp["good_ops_s"].sum(),
                     "per_client_ops_s": grp["ops_s"].mean(), "ops": int(grp["n"].sum()),
                     "errors": int(grp["failed"].sum()),
                     "redirect_rate": grp["redirects"].sum() / grp["n"].sum(),
                     "p50_ms": q.at[(run_id, op), 0.5], "p99_ms": q.at[(run_id, op), 0.99],
                     "miss_rate": st.get((run_id, op, "miss"), 0.0),
                     "error_rate": st.get((run_id, op, "error"), 0.0)
                     + st.get((run_id, op, "timeout"), 0.0)})
    for run_id, grp in clients.groupby("run_id"):
        first = grp.drop_duplicates("client")
        base = {f: runs.at[run_id, f] for f in factors}
        rows.append({"run_id": run_id, "op": "all", **base, "clients": len(first),
                     "throughput_ops_s": (first["n_all"] / first["span_s"]).sum(),
                     "goodput_ops_s": (first["good_all"] / first["span_s"]).sum(),
                     "per_client_ops_s": (first["n_all"] / first["span_s"]).mean(),
                     "ops": int(grp["n"].sum()), "errors": int(grp["failed"].sum()),
                     "redirect_rate": grp["redirects"].sum() / grp["n"].sum()})
    return pd.DataFrame(rows)


def per_second(loaded: Loaded, bin_s: float = 1.0) -> pd.DataFrame:
    """Per run, op and time bin (by op start): completed ops per second, redirects per
    second, median and p99 latency of the ops that started in the bin."""
    ops = loaded.ops
    if ops.empty:
        return pd.DataFrame(columns=["run_id", "t_s", "op", "ops_s", "good_s", "redirects_s",
                                     "p50_ms", "p99_ms"])
    frame = pd.DataFrame({"run_id": ops["run_id"].astype(str), "op": ops["op"].astype(str),
                          "t_s": np.floor(ops["start_ns"] / 1e9 / bin_s) * bin_s,
                          "latency_ms": ops["latency_ns"] / 1e6,
                          "good": ops["status"].isin(GOOD_STATUSES).to_numpy(),
                          "redirect": (ops["status"] == "redirect").to_numpy()})
    keys = ["run_id", "t_s", "op"]
    real = frame[~frame["redirect"]].groupby(keys, observed=True)
    lat = real["latency_ms"]
    out = pd.DataFrame({"ops_s": lat.size() / bin_s, "good_s": real["good"].sum() / bin_s,
                        "p50_ms": lat.median(), "p99_ms": lat.quantile(0.99)})
    out["redirects_s"] = frame[frame["redirect"]].groupby(keys, observed=True).size() / bin_s
    out = out.fillna({"redirects_s": 0.0}).reset_index()
    last = out.groupby("run_id")["t_s"].transform("max")
    # The first and last bins are cut short by the start (ops a few ms early, by the
    # clients' start lag) and the end of the run.
    return out[(out["t_s"] >= 0) & (out["t_s"] < last)]


def timeline_events(raw_dir: Path, experiment: str) -> pd.DataFrame:
    """The manifests' `extra.timeline`: one row per executed step, phases as columns."""
    rows = []
    for _, man in read_manifests(raw_dir, experiments=[experiment]):
        for i, ev in enumerate(man.extra.get("timeline", [])):
            if "start_ns" not in ev:
                continue  # skipped: the clients had finished
            result = ev.get("result") or {}
            rows.append({"run_id": man.run_id, "repetition": man.repetition, "step": i,
                         "action": ev["action"], "start_s": ev["start_ns"] / 1e9,
                         "end_s": ev["end_ns"] / 1e9, "duration_s": ev["duration_s"],
                         "error": ev.get("error"), "size_after": result.get(
                             "masters", result.get("servers")),
                         "moved": result.get("slots_moved"),
                         **{f"phase_{k[:-2]}": v for k, v in result.items()
                            if k.endswith("_s") and isinstance(v, int | float)}})
    return pd.DataFrame(rows)


def around_events(series: pd.DataFrame, events: pd.DataFrame,
                  window_s: float = 5.0) -> pd.DataFrame:
    """Per step: all-op throughput, p99 and redirects per second in the `window_s`
    before it, during it, and in the `window_s` after it."""
    rows = []
    total = series.groupby(["run_id", "t_s"]).agg(
        ops_s=("ops_s", "sum"), good_s=("good_s", "sum"), redirects_s=("redirects_s", "sum"),
        p99_ms=("p99_ms", "max")).reset_index()
    for ev in events.itertuples():
        run = total[total["run_id"] == ev.run_id]
        spans = {"before": (ev.start_s - window_s, ev.start_s),
                 "during": (ev.start_s, ev.end_s), "after": (ev.end_s, ev.end_s + window_s)}
        for when, (a, b) in spans.items():
            sel = run[(run["t_s"] >= np.floor(a)) & (run["t_s"] + 1 <= np.ceil(b))]
            rows.append({"run_id": ev.run_id, "step": ev.step, "action": ev.action,
                         "when": when, "seconds": len(sel),
                         "ops_s": sel["ops_s"].mean(), "good_s": sel["good_s"].mean(),
                         "redirects_s": sel["redirects_s"].mean(),
                         "p99_ms": sel["p99_ms"].median()})
    return pd.DataFrame(rows)


@dataclass
class KVStudy:
    raw_dir: Path
    alpha: float
    figures_dir: Path | None
    experiments: dict[str, str]
    scaling: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: The scaling runs and ops, for pooled percentiles with intervals over runs.
    scaling_loaded: Loaded | None = None
    cache: pd.DataFrame = field(default_factory=pd.DataFrame)
    elastic: pd.DataFrame = field(default_factory=pd.DataFrame)
    series: pd.DataFrame = field(default_factory=pd.DataFrame)
    events: pd.DataFrame = field(default_factory=pd.DataFrame)
    servers: str = "servers"
    clients: str = "clients.processes"
    cache_size: str = "cache_size"
    strategy: str = "strategy"

    def ran(self, part: str) -> bool:
        return not getattr(self, part).empty

    def not_run(self, part: str) -> Any:
        """A note (without the report's not-run marker: the other parts still show)."""
        return _md(prose.not_run_sentence(self.experiments[part], str(self.raw_dir))
                   + f" Run `harness run experiments/{self.experiments[part]}.yaml` first.")


def _load(raw_dir: Path, experiment: str) -> Loaded | None:
    if experiment not in available_experiments(raw_dir):
        return None
    loaded = load(raw_dir, experiments=[experiment], columns=OPS_COLUMNS)
    return loaded if len(loaded.runs) else None


def analyse(raw_dir: Path | str, *, alpha: float = 0.05, figures_dir: Path | str | None = None,
            experiments: dict[str, str] | None = None) -> KVStudy:
    """Load the three experiments (any may be missing) and compute their tables."""
    raw_dir = Path(raw_dir)
    study = KVStudy(raw_dir, alpha, Path(figures_dir) if figures_dir else None,
                    {**EXPERIMENTS, **(experiments or {})})
    if (lo := _load(raw_dir, study.experiments["scaling"])) is not None:
        study.servers = grid_column(lo.runs, ("masters", "servers")) or "servers"
        factors = [c for c in (study.servers, study.clients) if c in lo.runs.columns]
        study.scaling = per_run(lo, factors)
        study.scaling_loaded = lo
    if (lo := _load(raw_dir, study.experiments["cache"])) is not None:
        study.cache_size = grid_column(lo.runs, ("cache_size", "maxmemory")) or "cache_size"
        study.strategy = grid_column(lo.runs, ("strategy", "policy")) or "strategy"
        factors = [c for c in (study.cache_size, study.strategy) if c in lo.runs.columns]
        study.cache = per_run(lo, factors)
    if (lo := _load(raw_dir, study.experiments["elastic"])) is not None:
        study.elastic = per_run(lo, ["repetition"])
        study.series = per_second(lo)
        study.events = timeline_events(raw_dir, study.experiments["elastic"])
    return study


def harmonic_rates(frame: pd.DataFrame) -> bool:
    """The kit's averaging rule for rates: total ops / total time. Runs of a fixed op
    count: that is the harmonic mean of the run rates; runs of a fixed duration
    (``run.duration_s``, e.g. kv_scaling, kv_elastic): the arithmetic mean."""
    col = frame.get("loadgen_duration_s")
    return col is None or bool(pd.to_numeric(col, errors="coerce").isna().all())


def scaling_table(study: KVStudy, value: str = "throughput_ops_s") -> pd.DataFrame:
    """Per op, servers and clients: the mean over runs of `value` with its CI
    (arithmetic for fixed-duration runs, harmonic for fixed-count: `harmonic_rates`)."""
    return stats.config_table(study.scaling, ["op", study.servers, study.clients], value,
                              rate=harmonic_rates(study.scaling))


def cache_table(study: KVStudy, value: str = "throughput_ops_s", op: str = "get",
                rate: bool | None = None) -> pd.DataFrame:
    data = study.cache[study.cache["op"] == op]
    rate = harmonic_rates(study.cache) if rate is None else rate
    return stats.config_table(data, [study.cache_size, study.strategy], value, rate=rate)


def strategy_verdicts(study: KVStudy, op: str = "get",
                      value: str = "throughput_ops_s") -> list[tuple[Any, stats.MultiComparison]]:
    """Per cache size: does the strategy matter? (Welch's ANOVA on log values over runs)"""
    data = study.cache[study.cache["op"] == op]
    out = []
    for size, grp in data.groupby(study.cache_size, sort=True):
        groups = {str(k): g[value].to_numpy(float) for k, g in grp.groupby(study.strategy)}
        if len(groups) >= 2 and all(len(v) >= 2 for v in groups.values()):
            out.append((size, stats.compare_many(groups, alpha=study.alpha,
                                                 rate=harmonic_rates(study.cache))))
    return out


def step_table(study: KVStudy) -> pd.DataFrame:
    """Time per scaling step: mean over steps of each action, with CI and the seed's."""
    if study.events.empty:
        return pd.DataFrame(columns=["action", "n", "mean", "ci_low", "ci_high", "seed_s"])
    table = stats.config_table(study.events, ["action"], "duration_s")
    table["seed_s"] = table["action"].map(SEED_STEP_S)
    return table


# -- words: tables and sentences for the notebook --------------------------------------

def _html(df: pd.DataFrame, **kwargs: Any) -> Any:
    from harness.analysis.tables import show

    return show(df, **kwargs)


def status(study: KVStudy) -> Any:
    """Which of the three experiments have results, and how much; when none has, the
    report's not-run note (which ends the section)."""
    if not any(study.ran(p) for p in study.experiments):
        names = ", ".join(f"`{n}`" for n in study.experiments.values())
        return _md(f"**No KV-store runs** under `{study.raw_dir}` ({names}): nothing to "
                   "show yet. Run `harness run experiments/kv_scaling.yaml` (and "
                   "`kv_cache.yaml`, `kv_elastic.yaml`) first.", not_run=True)
    rows = []
    for part, name in study.experiments.items():
        data = getattr(study, part)
        runs = data["run_id"].nunique() if len(data) else 0
        ops = int(data.loc[data["op"] == "all", "ops"].sum()) if len(data) else 0
        rows.append({"study": part, "experiment": name, "runs": runs, "ops": ops})
    return _html(pd.DataFrame(rows), caption=f"Raw results read from {study.raw_dir}")


def scaling_table_html(study: KVStudy) -> Any:
    if not study.ran("scaling"):
        return study.not_run("scaling")
    from harness.analysis.tables import ci_column

    agg = scaling_table(study)
    per = scaling_table(study, "per_client_ops_s")
    keys = ["op", study.servers, study.clients]
    lat = summarise_with_ci(study.scaling_loaded, keys)
    lat = lat.assign(op=lat["op"].astype(str), p50_ms=ci_strings(lat, "latency_p50_ms"),
                     p99_ms=ci_strings(lat, "latency_p99_ms"))[[*keys, "p50_ms", "p99_ms"]]
    shown = agg[[*keys, "n"]].assign(aggregate=ci_column(agg), per_client=ci_column(per))
    failed = has_failures(study.scaling)
    if failed:  # goodput beside throughput, by the same rule, wherever ops failed
        shown["goodput"] = ci_column(scaling_table(study, "goodput_ops_s"))
    shown = shown.merge(lat, on=keys, how="left").fillna({"p50_ms": "–", "p99_ms": "–"})
    if failed:
        errors = study.scaling.groupby(keys, observed=True)["errors"].sum()
        shown = shown.merge(errors.reset_index(), on=keys, how="left")
    mean = "harmonic" if harmonic_rates(study.scaling) else "arithmetic (fixed-duration runs)"
    caption = (f"Throughput [ops/s]: {mean} mean over runs (95% CI); latency: "
               "percentiles of all ops pooled [ms], with a 95% CI over runs "
               "where every run has 10 ops beyond the percentile")
    caption += ("; goodput counts only ops answered (ok or miss) over the same time; the "
                "percentiles include the failed ops (errors and timeouts: a wait the client "
                "had), counted beside them" if failed else
                "; no op failed (no error or timeout), so goodput equals throughput")
    return _html(shown.rename(columns={study.servers: "servers", study.clients: "clients"}),
                 caption=caption,
                 headers={"aggregate": "aggregate (sum over clients)",
                          "per_client": "per client", "goodput": "goodput (aggregate)",
                          "p50_ms": "p50 [ms]", "p99_ms": "p99 [ms]",
                          "errors": "failed ops"})


def has_failures(frame: pd.DataFrame) -> bool:
    """Whether any run of a per-run table had an error or timeout op."""
    return bool(len(frame)) and bool((frame["errors"].fillna(0) > 0).any())


def _plural(n: Any, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _compare(data: pd.DataFrame, col: str, a: Any, b: Any, alpha: float) -> Any:
    x = data.loc[data[col] == a, "throughput_ops_s"].to_numpy(float)
    y = data.loc[data[col] == b, "throughput_ops_s"].to_numpy(float)
    if len(x) < 2 or len(y) < 2:
        return None
    return stats.compare_two(x, y, names=(str(a), str(b)), alpha=alpha,
                             rate=harmonic_rates(data))


def scaling_findings(study: KVStudy) -> Any:
    """Per op: more servers at each client count; more clients at the most servers."""
    if not study.ran("scaling"):
        return study.not_run("scaling")
    claims: list[tuple[str, stats.Comparison, str, str]] = []
    data = study.scaling
    servers = sorted(data[study.servers].unique())
    clients = sorted(data[study.clients].unique())
    for op in OPS:
        d = data[data["op"] == op]
        for c in clients:
            cmp = _compare(d[d[study.clients] == c], study.servers, servers[-1], servers[0],
                           study.alpha)
            if cmp is not None:
                claims.append((f"{op.upper()}, {_plural(c, 'client')}: ", cmp,
                               _plural(servers[-1], "server"), _plural(servers[0], "server")))
        top = d[d[study.servers] == servers[-1]]
        cmp = _compare(top, study.clients, clients[-1], clients[0], study.alpha)
        if cmp is not None:
            claims.append((f"{op.upper()}, {_plural(servers[-1], 'server')}: ", cmp,
                           _plural(clients[-1], "client"), _plural(clients[0], "client")))
    # The section's claims are one family: Holm-adjusted together, and said so.
    p_holm = stats.holm([c.p_value for _, c, _, _ in claims]) if claims else []
    out = [head + prose.compare_sentence(c, a, b, lower_is_better=False,
                                         better="faster (aggregate throughput)",
                                         p_adjusted=float(p))
           for (head, c, a, b), p in zip(claims, p_holm, strict=True)]
    if len(claims) > 1:
        out.append(f"These {len(claims)} comparisons are one family: p-values Holm-adjusted "
                   "together.")
    return _md("\n\n".join(out))


def cache_findings(study: KVStudy, op: str = "get") -> Any:
    """Does the strategy matter, per cache size? Does the cache size matter?"""
    if not study.ran("cache"):
        return study.not_run("cache")
    tests = [(m, f"{op.upper()} throughputs of the strategies at cache size {size}")
             for size, m in strategy_verdicts(study, op)]
    data = study.cache[study.cache["op"] == op]
    groups = {str(k): g["throughput_ops_s"].to_numpy(float)
              for k, g in data.groupby(study.cache_size, sort=True)}
    if len(groups) >= 2:
        tests.append((stats.compare_many(groups, alpha=study.alpha,
                                         rate=harmonic_rates(study.cache)),
                      f"{op.upper()} throughputs of the cache sizes (strategies pooled)"))
    # One family: the omnibus p-values Holm-adjusted together.
    p_holm = stats.holm([m.p_value for m, _ in tests]) if tests else []
    out = [prose.multi_sentence(replace(m, p_value=float(p), test=f"{m.test}, Holm-adjusted"),
                                what)
           for (m, what), p in zip(tests, p_holm, strict=True)]
    if len(tests) > 1:
        out.append(f"These {len(tests)} tests are one family: p-values Holm-adjusted "
                   "together.")
    return _md("\n\n".join(out))


def events_table_html(study: KVStudy, window_s: float = 5.0) -> Any:
    if study.events.empty:
        return study.not_run("elastic")
    around = around_events(study.series, study.events, window_s)
    wide = around.pivot_table(index=["run_id", "step"], columns="when",
                              values=["ops_s", "good_s", "redirects_s", "p99_ms"])
    wide.columns = [f"{v}_{w}" for v, w in wide.columns]
    ev = study.events.merge(wide.reset_index(), on=["run_id", "step"])
    failed = has_failures(study.elastic)
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
                          "p99_ms_before": "p99 before [ms]", "p99_ms_during": "p99 during [ms]"})


def steps_summary(study: KVStudy) -> Any:
    if study.events.empty:
        return study.not_run("elastic")
    out = []
    for row in step_table(study).itertuples():
        est = stats.Estimate(row.mean, row.ci_low, row.ci_high, row.n, row.method)
        seed = f"; seed 004 took {row.seed_s:g} s" if row.seed_s == row.seed_s else ""
        steps = f"{row.n} step{'s' if row.n != 1 else ''}"
        out.append(f"{row.action}: {prose.fmt_estimate(est, 's')} per step ({steps}{seed}).")
    errors = study.events["error"].dropna()
    if len(errors):
        out.append(f"{len(errors)} step(s) failed: {errors.iloc[0]}")
    return _md("\n\n".join(out))


def redirect_table_html(study: KVStudy) -> Any:
    """Redirect records per op, per experiment and op; for the elastic runs also within
    the scaling steps and outside them."""
    rows = []
    for part in ("scaling", "cache", "elastic"):
        data = getattr(study, part)
        for op, grp in data[data["op"].isin(OPS)].groupby("op") if len(data) else []:
            rows.append({"experiment": study.experiments[part], "op": op, "when": "whole run",
                         "ops": int(grp["ops"].sum()),
                         "redirect_rate": (grp["redirect_rate"] * grp["ops"]).sum()
                         / grp["ops"].sum()})
    if not study.events.empty:
        s = study.series.copy()
        inside = np.zeros(len(s), bool)
        for ev in study.events.itertuples():
            inside |= ((s["run_id"] == ev.run_id) & (s["t_s"] + 1 > ev.start_s)
                       & (s["t_s"] < ev.end_s)).to_numpy()
        for flag, when in ((True, "during steps"), (False, "outside steps")):
            sel = s[inside == flag]
            rows.append({"experiment": study.experiments["elastic"], "op": "all", "when": when,
                         "ops": int(sel["ops_s"].sum()),
                         "redirect_rate": sel["redirects_s"].sum() / max(sel["ops_s"].sum(), 1)})
    from harness.analysis.tables import pct

    return _html(pd.DataFrame(rows), caption="Redirected attempts per op (MOVED/ASK, "
                 "server_not_responsible, write locks)", formats={"redirect_rate": pct(2)},
                 headers={"redirect_rate": "redirects per op"})
