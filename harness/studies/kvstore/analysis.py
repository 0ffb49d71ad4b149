"""Study of seeds 003/004: a sharded KV store. Scaling (servers x clients), cache (size
x strategy) and elasticity (servers added and removed under load).

Throughput is counted per client and summed over clients (aggregate); a client's
throughput of one operation is its ops of that kind over the time it spent on them
(the sum of their latencies over its requests in flight: exactly the seeds' "count /
total time" with one request in flight). Latency comes from each op's own time, never
from 1/throughput. Redirect records (an attempt turned away, see the kvstore workload)
are not ops: they are counted per op as the redirect rate. Runs are the samples: each
configuration's means and CIs are over its runs (harmonic means for rates).
`views` words it and `plots` draws it, as methods of `harness.studies.kvstore.Study`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from harness.analysis.checks import tails
from harness.analysis.data.load import Loaded, load_ops, read_manifests
from harness.analysis.data.summary import ERROR_STATUSES
from harness.analysis.sections.prose import plural
from harness.analysis.stats import comparisons as stats
from harness.analysis.stats import multiplicity
from harness.studies.base import FIGURE_OPS, StudyBase
from harness.workloads.kvstore import OPS

EXPERIMENTS = {"scaling": "kv_scaling", "cache": "kv_cache", "elastic": "kv_elastic"}
OPS_COLUMNS = ("client", "op", "start_ns", "latency_ns", "status")
N = TypeVar("N", bound="Numbers")
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
    latency percentiles, redirect, miss and error rates, with the run's `factors` and its
    ``loadgen_duration_s`` (NaN for a fixed-count run), which `harmonic_rates` reads."""
    clients = per_client(loaded)
    if "loadgen_duration_s" in loaded.runs.columns and "loadgen_duration_s" not in factors:
        factors = [*factors, "loadgen_duration_s"]
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


def step_split(loaded: Loaded, events: pd.DataFrame) -> pd.DataFrame:
    """Per run: its ops and redirect records that started during one of its scaling
    steps (`events`), and outside them. From the records themselves, not the per-second
    series (which drops the cut-short first and last seconds), so that during + outside
    is every op of the run, as in the other rows of the redirect table."""
    cols = ["run_id", "ops_during", "redirects_during", "ops_outside", "redirects_outside"]
    ops = loaded.ops
    rows = []
    for run_id, g in ops.groupby("run_id", observed=True):
        t = g["start_ns"].to_numpy(np.float64) / 1e9
        inside = np.zeros(len(g), bool)
        for ev in events[events["run_id"] == str(run_id)].itertuples() if len(events) else []:
            inside |= (t >= ev.start_s) & (t < ev.end_s)
        red = (g["status"] == "redirect").to_numpy()
        rows.append({"run_id": str(run_id), "ops_during": int((~red & inside).sum()),
                     "redirects_during": int((red & inside).sum()),
                     "ops_outside": int((~red & ~inside).sum()),
                     "redirects_outside": int((red & ~inside).sum())})
    return pd.DataFrame(rows, columns=cols)


def timeline_events(raw_dir: Path, experiment: str) -> pd.DataFrame:
    """The manifests' `extra.timeline`: one row per executed step, phases as columns."""
    rows = []
    for _, man in read_manifests(raw_dir, experiments=[experiment]):
        for i, ev in enumerate(man.typed_extra.timeline):
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


@dataclass(frozen=True)
class Entry:
    """One claim of the section: `comparison` of a (`label_a`) against b, under `head`."""

    key: tuple
    comparison: stats.Comparison
    label_a: str
    label_b: str
    head: str


@dataclass(frozen=True)
class Family:
    """The section's claims, judged together, and what each compares (same order)."""

    judged: multiplicity.Judged
    entries: list[Entry]


def _compare(data: pd.DataFrame, col: str, a: Any, b: Any, alpha: float,
             value: str = "throughput_ops_s") -> stats.Comparison | None:
    """`value` of the runs with `col` == a against those with b (rates averaged by
    `harmonic_rates`'s rule); None with fewer than 2 runs on a side."""
    x = data.loc[data[col] == a, value].to_numpy(float)
    y = data.loc[data[col] == b, value].to_numpy(float)
    if len(x) < 2 or len(y) < 2:
        return None
    return stats.compare_two(x, y, names=(str(a), str(b)), alpha=alpha,
                             rate=harmonic_rates(data))


@dataclass
class Numbers(StudyBase):
    """The study's data and numbers; `harness.studies.kvstore.Study` adds its tables,
    sentences (`views`) and figures (`plots`)."""

    #: Part (scaling, cache, elastic) -> its experiment's name; any part may be absent.
    parts: dict[str, str] = field(default_factory=lambda: dict(EXPERIMENTS))
    scaling: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: The scaling runs and ops, for pooled percentiles with intervals over runs.
    scaling_loaded: Loaded | None = None
    #: The cache runs and ops (for the heavy-tail check).
    cache_loaded: Loaded | None = None
    cache: pd.DataFrame = field(default_factory=pd.DataFrame)
    elastic: pd.DataFrame = field(default_factory=pd.DataFrame)
    series: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per elastic run: ops and redirects during its scaling steps and outside them.
    steps_split: pd.DataFrame = field(default_factory=pd.DataFrame)
    events: pd.DataFrame = field(default_factory=pd.DataFrame)
    servers: str = "servers"
    clients: str = "clients.processes"
    cache_size: str = "cache_size"
    strategy: str = "strategy"
    _family: Family | None = field(default=None, repr=False)

    name = "kvstore"

    @property
    def experiments(self) -> tuple[str, ...]:
        return tuple(self.parts.values())

    @property
    def figure_prefix(self) -> str:
        return "kvstore"

    @property
    def ran(self) -> bool:
        return any(self.part_ran(p) for p in self.parts)

    def part_ran(self, part: str) -> bool:
        return not getattr(self, part).empty

    def part_not_run(self, part: str) -> Any:
        """A part's note, without the report's not-run marker: the other parts still show."""
        return self.not_run(self.parts[part], end_section=False)

    def scaling_table(self, value: str = "throughput_ops_s") -> pd.DataFrame:
        """Per op, servers and clients: the mean over runs of `value` with its CI
        (arithmetic for fixed-duration runs, harmonic for fixed-count: `harmonic_rates`)."""
        return stats.config_table(self.scaling, ["op", self.servers, self.clients], value,
                                  rate=harmonic_rates(self.scaling))

    def cache_table(self, value: str = "throughput_ops_s", op: str = "get",
                    rate: bool | None = None) -> pd.DataFrame:
        data = self.cache[self.cache["op"] == op]
        rate = harmonic_rates(self.cache) if rate is None else rate
        return stats.config_table(data, [self.cache_size, self.strategy], value, rate=rate)

    def family(self) -> Family:
        """The section's claims, one family (`multiplicity`), all on aggregate throughput:
        per op, the most against the fewest servers at each client count and the most
        against the fewest clients at the most servers (kv_scaling); per cache size every
        pair of strategies, and every pair of cache sizes with the strategies pooled
        (kv_cache, GETs)."""
        if self._family is not None:
            return self._family
        entries: list[Entry] = []
        if self.part_ran("scaling"):
            data = self.scaling
            servers = sorted(data[self.servers].unique())
            clients = sorted(data[self.clients].unique())
            for op in OPS:
                d = data[data["op"] == op]
                for c in clients:
                    cmp = _compare(d[d[self.clients] == c], self.servers, servers[-1],
                                   servers[0], self.alpha)
                    if cmp is not None:
                        entries.append(Entry(
                            ("scaling", op, "servers", c), cmp,
                            plural(servers[-1], "server"), plural(servers[0], "server"),
                            f"{op.upper()}, {plural(c, 'client')}"))
                top = d[d[self.servers] == servers[-1]]
                cmp = _compare(top, self.clients, clients[-1], clients[0], self.alpha)
                if cmp is not None:
                    entries.append(Entry(
                        ("scaling", op, "clients", servers[-1]), cmp,
                        plural(clients[-1], "client"), plural(clients[0], "client"),
                        f"{op.upper()}, {plural(servers[-1], 'server')}"))
        if self.part_ran("cache"):
            data = self.cache[self.cache["op"] == "get"]
            for size, grp in data.groupby(self.cache_size, sort=True):
                names = [x for x in STRATEGIES if x in set(grp[self.strategy])] + sorted(
                    set(grp[self.strategy]) - set(STRATEGIES))
                for i, a in enumerate(names):
                    for b in names[i + 1:]:
                        cmp = _compare(grp, self.strategy, a, b, self.alpha)
                        if cmp is not None:
                            entries.append(Entry(("cache", "strategy", size, a, b), cmp, a,
                                                 b, f"GET, cache size {size}"))
            sizes = sorted(data[self.cache_size].unique())
            for i, a in enumerate(sizes):
                for b in sizes[i + 1:]:
                    cmp = _compare(data, self.cache_size, b, a, self.alpha)
                    if cmp is not None:
                        entries.append(Entry(("cache", "size", b, a), cmp,
                                             f"cache size {b}", f"cache size {a}",
                                             "GET, strategies pooled"))
        judged = multiplicity.judge([e.comparison.log_ratio for e in entries], True,
                                    q=self.alpha, keys=[e.key for e in entries])
        self._family = Family(judged, entries)
        return self._family

    def tail_checks(self) -> list[tuple[tails.GroupChecks, tails.Label]]:
        out = []
        for lo, keys, name in ((self.scaling_loaded, [self.servers, self.clients],
                                ("servers", "clients")),
                               (self.cache_loaded, [self.cache_size, self.strategy],
                                ("cache size", "strategy"))):
            if lo is not None and all(k in lo.runs.columns for k in keys):
                out.append((tails.group_checks(lo, ["op", *keys]),
                            lambda k, n=name: f"{str(k[0]).upper()}, {n[0]} {k[1]}, "
                                              f"{n[1]} {k[2]}"))
        return out

    def step_table(self) -> pd.DataFrame:
        """Time per scaling step: mean over steps of each action, with CI and the seed's."""
        if self.events.empty:
            return pd.DataFrame(columns=["action", "n", "mean", "ci_low", "ci_high", "seed_s"])
        table = stats.config_table(self.events, ["action"], "duration_s")
        table["seed_s"] = table["action"].map(SEED_STEP_S)
        return table


def _by_run(loaded: Loaded, *fns: Callable[[Loaded], pd.DataFrame]) -> list[pd.DataFrame]:
    """`fn(loaded)` of every op, for each of `fns`: at once when `loaded` holds them all,
    else one run's ops at a time, each file read once for all `fns` (each groups by run,
    so the rows are the same; they come in its order: by run_id, and `per_run`'s "all"
    rows after the others)."""
    if not loaded.sampled:
        return [fn(loaded) for fn in fns]
    runs = loaded.runs.assign(_rid=loaded.runs["run_id"].astype(str)).sort_values(
        "_rid", kind="stable").drop(columns="_rid")
    parts: list[list[pd.DataFrame]] = [[] for _ in fns]
    for i in range(len(runs)):
        one = runs.iloc[[i]].reset_index(drop=True)
        run = Loaded(one, load_ops(one, OPS_COLUMNS), loaded.grid_keys)
        for part, fn in zip(parts, fns, strict=True):
            part.append(fn(run))
    return [_concat_runs(part) for part in parts]


def _concat_runs(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One function's per-run frames as its frame of every run."""
    parts = [p for p in parts if len(p)] or parts[:1]
    out = pd.concat(parts, ignore_index=True)
    if "op" in out.columns and "t_s" not in out.columns:  # per_run: "all" rows last
        out = out.sort_values("op", key=lambda s: s.eq("all"), kind="stable")
    return out.reset_index(drop=True)


def load_into(study: N) -> N:
    """Load the three experiments into `study` (any may be missing) and compute their
    tables."""
    raw_dir = study.raw_dir

    def _load(experiment: str) -> Loaded | None:
        return study.load(experiment, columns=OPS_COLUMNS, max_ops=FIGURE_OPS)

    if (lo := _load(study.parts["scaling"])) is not None:
        study.servers = grid_column(lo.runs, ("masters", "servers")) or "servers"
        factors = [c for c in (study.servers, study.clients) if c in lo.runs.columns]
        (study.scaling,) = _by_run(lo, lambda x: per_run(x, factors))
        study.scaling_loaded = lo
    if (lo := _load(study.parts["cache"])) is not None:
        study.cache_size = grid_column(lo.runs, ("cache_size", "maxmemory")) or "cache_size"
        study.strategy = grid_column(lo.runs, ("strategy", "policy")) or "strategy"
        factors = [c for c in (study.cache_size, study.strategy) if c in lo.runs.columns]
        (study.cache,) = _by_run(lo, lambda x: per_run(x, factors))
        study.cache_loaded = lo
    if (lo := _load(study.parts["elastic"])) is not None:
        events = timeline_events(raw_dir, study.parts["elastic"])
        # The steps of the pooled runs only: a duplicate's would count a step twice.
        study.events = events[events["run_id"].isin(lo.runs["run_id"])] if len(events) \
            else events
        study.elastic, study.series, study.steps_split = _by_run(
            lo, lambda x: per_run(x, ["repetition"]), per_second,
            lambda x: step_split(x, study.events))
    return study


def harmonic_rates(frame: pd.DataFrame) -> bool:
    """The kit's averaging rule for rates: total ops / total time. Runs of a fixed op
    count: that is the harmonic mean of the run rates; runs of a fixed duration
    (``run.duration_s``, e.g. kv_scaling, kv_elastic): the arithmetic mean. `frame` is a
    per-run table (`per_run` carries each run's ``loadgen_duration_s``); one without the
    column is taken for fixed-count runs."""
    col = frame.get("loadgen_duration_s")
    return col is None or bool(pd.to_numeric(col, errors="coerce").isna().all())







