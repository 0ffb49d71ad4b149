"""Was each measurement sound? The checks of every group's runs, before any number of
theirs is believed.

A check is a function of one group's runs (`runfacts.RunData`: the manifest, with its
telemetry, and the group's ops in the run) that returns a `Finding` (the runs that fail
it and a sentence that says by how much and what to do) or None. `CHECKS` registers
each with its description and threshold; `group_checks` runs them all on every group
of `harness summary`'s grouping. A run without what a check needs (no telemetry: an
older schema or an import; too few ops; no start time; ops in the order they ran,
which an import need not have) is skipped by that check, never failed by it.

Each threshold's false-alarm rate on steady runs, at most 5% per group, and each
check's power on the patterns of issue 25 are measured by simulation in
`benchmarks/checks_calibration.py` (figures in benchmarks/README.md); ``heavy_tail``'s,
the check of `harness.analysis.checks.tails`, in `benchmarks/stats_coverage.py --only heavy`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as st

from harness.analysis.checks import failed_ops, replicas, tails
from harness.analysis.checks.runfacts import GroupKey, RunData, group_runs
from harness.analysis.data.load import Loaded
from harness.analysis.stats import stationarity

#: A client process at this share of one CPU or more was saturated.
CLIENT_CPU = 0.9
#: An open-loop run whose sends were this punctual (p99, ms), nothing left unsent, kept
#: its schedule: a busy client there is the engines' polling before each intended start
#: (they poll the last 0.2-1.5 ms), not saturation.
KEPT_SCHEDULE_LAG_MS = 1.0
#: An open-loop run achieving less than this share of its target did not meet it (the
#: runner's `target_met` rule).
TARGET_SHARE = 0.95
#: With Poisson arrivals, a shortfall this likely by chance alone is not counted.
POISSON_CHANCE = 1e-3
#: Processes that are neither the kit's nor the servers' using this many CPUs, or a
#: hypervisor stealing this share of a machine, made it busy.
OTHER_CPU = 0.25
STEAL_SHARE = 0.05
#: Telemetry over a shorter window is not judged: /proc counts CPU time in 10 ms ticks.
MIN_WINDOW_S = 0.5
#: not_steady: MSER-5's prefix at least this many standard deviations of same-length
#: blocks away from the rest, and its geometric-mean latency this far off (10%).
STEADY_Z = 5.0
STEADY_RATIO = 1.1
#: ... and the start itself off: the prefix's first half carrying at least half of its
#: departure (a load burst later in the prefix after a normal start is no warm-up: real
#: memcached runs on a shared machine showed such bursts at 0.13-0.23).
STEADY_FRONT = 0.5
#: ... which a steady run fails with at most this probability (by simulation over
#: lognormal, autocorrelated, spiky and queueing latencies, 500 to 100,000 ops); a group
#: fails when more of its runs do than this rate makes likely at 5% (1 of up to 5 runs,
#: 2 of 6 to 35).
STEADY_RUN_RATE = 0.01
#: trend and cold_first_run: two-sided level, and the runs they need.
ALPHA = 0.05
MIN_TREND_RUNS = 5
MIN_COLD_RUNS = 3
#: cold_first_run: the first run at least this far from the others (5%).
COLD_RATIO = 1.05


@dataclass(frozen=True)
class Finding:
    """A check that failed in a group: which of its runs, and a sentence saying so."""

    check: str
    runs: tuple[str, ...]
    #: The group's runs the check could judge (the others lacked what it needs).
    judged: int
    detail: str
    #: The check's own figures for the entry (heavy_tail: tail_index, k, ops).
    figures: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The ``checks`` entry of `harness summary --format json`: ``check``,
        ``status`` (``warn``: a finding is a warning), ``runs`` (how many it fails in,
        or rests on for a check of the whole group), ``detail``, then its figures."""
        return {"check": self.check, "status": "warn", "runs": len(self.runs),
                "detail": self.detail, **self.figures}


CheckFunc = Callable[[Sequence[RunData]], Finding | None]


@dataclass(frozen=True)
class Check:
    """A registered check: its function, what it asks, and where its bar is."""

    name: str
    func: CheckFunc
    description: str
    threshold: str
    #: How a verdict resting on it is qualified ("worse, but ..."): {k} failing of {n}
    #: {side} runs.
    caveat: str
    #: The metrics (`compare.METRICS` names) whose verdicts it qualifies; None: all.
    metrics: frozenset[str] | None = None


def _of(k: int, judged: int, total: int) -> str:
    """``3 of 5 runs``; ``3 of 4 runs judged (of 6)`` when some lacked what the check
    needs; ``the run`` for a group of one."""
    if judged == total:
        return "the run" if total == 1 else f"{k} of {total} runs"
    return f"{k} of {judged} runs judged (of {total})"


def _window_ok(run: RunData) -> bool:
    window = run.telemetry.get("window_s")
    return isinstance(window, int | float) and window >= MIN_WINDOW_S


def _kept_schedule(run: RunData) -> bool:
    lg, counts = run.manifest.loadgen, run.manifest.typed_counts
    lag = lg.get("send_lag_p99_ms")
    return (lg.get("mode") == "open" and counts.unsent == 0 and lag is not None
            and lag <= KEPT_SCHEDULE_LAG_MS)


def client_saturated(runs: Sequence[RunData]) -> Finding | None:
    failing, judged, peak = [], 0, 0.0
    for r in runs:
        utils = [p["cpu_util"] for p in r.telemetry.get("processes", ())
                 if p.get("role") == "client" and isinstance(p.get("cpu_util"), int | float)]
        if not utils or not _window_ok(r):
            continue
        judged += 1
        if max(utils) >= CLIENT_CPU and not _kept_schedule(r):
            failing.append(r.run_id)
            peak = max(peak, max(utils))
    if not failing:
        return None
    return Finding("client_saturated", tuple(failing), judged,
                   f"a client process used up to {peak:.0%} of a CPU in "
                   f"{_of(len(failing), judged, len(runs))} (bar: {CLIENT_CPU:.0%}): the "
                   "load generator, not the server, may have set these numbers; add client "
                   "processes or machines")


def errors(runs: Sequence[RunData]) -> Finding | None:
    """`failed_ops.failing` of the group's runs, as a finding."""
    got = failed_ops.failing([(r.run_id, r.manifest) for r in runs])
    if got is None:
        return None
    failing, judged, worst, said = got
    return Finding("errors", tuple(failing), judged, failed_ops.detail(
        worst, _of(len(failing), judged, len(runs)), said), {"error_share": worst})


def _short_by_chance(run: RunData, achieved: float, target: float) -> bool:
    """With Poisson arrivals the ops intended in a window vary; a shortfall that
    variation explains (p >= `POISSON_CHANCE`) is not the clients'."""
    lg, counts = run.manifest.loadgen, run.manifest.typed_counts
    if lg.get("arrival") != "poisson" or achieved <= 0 or counts.measured <= 0:
        return False
    wall_s = counts.measured / achieved
    return bool(st.poisson.cdf(counts.measured + counts.unsent, target * wall_s)
                >= POISSON_CHANCE)


def target_not_met(runs: Sequence[RunData]) -> Finding | None:
    failing, judged = [], 0
    worst, unsent, lags = math.inf, 0, []
    target_seen = 0.0
    for r in runs:
        lg, counts = r.manifest.loadgen, r.manifest.typed_counts
        target = lg.get("target_rate_ops_s")
        if lg.get("mode") != "open" or not target:
            continue
        judged += 1
        achieved = lg.get("achieved_rate_ops_s")
        short = (isinstance(achieved, int | float) and achieved < TARGET_SHARE * target
                 and not _short_by_chance(r, achieved, target))
        if short or counts.unsent > 0:
            failing.append(r.run_id)
            target_seen = float(target)
            if isinstance(achieved, int | float):
                worst = min(worst, achieved / target)
            unsent += counts.unsent
            if lg.get("send_lag_p99_ms") is not None:
                lags.append(float(lg["send_lag_p99_ms"]))
    if not failing:
        return None
    parts = []
    if math.isfinite(worst):
        parts.append(f"achieved {worst:.0%} of the {target_seen:,.0f} ops/s target at worst"
                     f" (bar: {TARGET_SHARE:.0%})")
    if unsent:
        parts.append(f"{unsent:,} ops intended in the measured window were never sent")
    if lags:
        parts.append(f"send lag p99 up to {max(lags):,.3g} ms")
    return Finding("target_not_met", tuple(failing), judged,
                   f"open loop in {_of(len(failing), judged, len(runs))}: "
                   + ", ".join(parts) + ": the clients could not keep the schedule, so the "
                   "latencies include their lag; lower rate_ops_s or add client processes")


def _steady_floor(judged: int) -> int:
    """The fewest failing runs that make a group fail: 1 up to 10 runs; more where
    `STEADY_RUN_RATE` would make one likely (the group's false alarms stay at 5%)."""
    c = 1
    while c <= judged and st.binom.sf(c - 1, judged, STEADY_RUN_RATE) > ALPHA:
        c += 1
    return c


def unsteady(w: stationarity.Warmup) -> bool:
    """Whether one run's MSER-5 prefix fails not_steady's bar."""
    return (w.ops > 0 and abs(w.z) >= STEADY_Z and w.front >= STEADY_FRONT
            and abs(math.log(w.ratio)) >= math.log(STEADY_RATIO))


def not_steady(runs: Sequence[RunData]) -> Finding | None:
    failing: list[tuple[RunData, stationarity.Warmup]] = []
    judged = 0
    for r in runs:
        w = r.ops.warmup if r.ops is not None else None
        # An import's records need not be in the order they ran (a histogram's are
        # laid out by rank within each second): no order, no warm-up to find.
        if w is None or r.manifest.source == "imported":
            continue
        judged += 1
        if unsteady(w):
            failing.append((r, w))
    if not failing or len(failing) < _steady_floor(judged):
        return None
    ops = max(w.ops for _, w in failing)
    secs = max(w.seconds for _, w in failing)
    ratios = [w.ratio for _, w in failing]
    slower = sum(x > 1 for x in ratios) >= len(ratios) / 2
    far = max(ratios) if slower else min(ratios)
    by_time = any(r.manifest.loadgen.get("duration_s") for r, _ in failing)
    setting = (f"run.warmup_s by about {_round_up(secs)} s" if by_time
               else f"run.warmup_ops by about {_round_up(ops):,}")
    # A slow start is a warm-up (connections, caches, JIT) that waiting out leaves out.
    # A fast one is not: the server slowed as the run went on, and a longer warm-up only
    # hides that the state measured depends on how long the run was.
    more = (f"raise {setting} to leave them out" if slower else
            "the start was faster, so this is no warm-up to wait out: the server slowed "
            "as the run went on (a cache, table or connection pool filling, or the data "
            "growing); measure the state you mean to report: fill the server before "
            f"measuring (a load phase, or raise {setting}) and look at latency over time "
            "to see that it levels off")
    return Finding("not_steady", tuple(r.run_id for r, _ in failing), judged,
                   f"the start of {_of(len(failing), judged, len(runs))} differs from the "
                   f"rest: up to the first {ops:,} ops ({secs:.2g} s) had "
                   f"{far:.2f}x the latency of the rest (MSER-5; bar: {STEADY_Z:g} "
                   f"standard deviations and {STEADY_RATIO - 1:.0%}); {more}")


def _round_up(x: float) -> float | int:
    """Up to two significant digits: 0.43 -> 0.43, 1234 -> 1300."""
    if x <= 0:
        return 0
    scale = 10 ** (math.floor(math.log10(x)) - 1)
    up = math.ceil(x / scale) * scale
    return int(up) if up >= 10 else float(f"{up:.2g}")


def _ordered(runs: Sequence[RunData]) -> list[RunData]:
    """The runs a check of order can use: measured by the kit (an import's start time is
    the import's), with ops and a start time, in start order (`group_runs` sorts)."""
    return [r for r in runs if r.ops is not None and r.manifest.source != "imported"
            and math.isfinite(r.started_s)]


def trend(runs: Sequence[RunData]) -> Finding | None:
    ordered = _ordered(runs)
    if len(ordered) < MIN_TREND_RUNS:
        return None
    t = stationarity.trend(np.array([r.started_s for r in ordered]),
                           np.array([r.ops.mean_ms for r in ordered if r.ops]))
    if t is None or not t.p < ALPHA:
        return None
    way = "rises" if t.tau > 0 else "falls"
    return Finding("trend", tuple(r.run_id for r in ordered), len(ordered),
                   f"the runs' mean latency {way} with their start time over "
                   f"{_of(len(ordered), len(ordered), len(runs))} (Mann-Kendall tau = "
                   f"{t.tau:.2f}, p = {t.p:.2g}; {t.per_run:+.1%} per run): something "
                   "drifted while they ran; interleave configurations (order: interleaved) "
                   "and look for what changed on the machines")


def cold_first_run(runs: Sequence[RunData]) -> Finding | None:
    ordered = _ordered(runs)
    if len(ordered) < MIN_COLD_RUNS:
        return None
    o = stationarity.first_outlier(np.array([r.ops.mean_ms for r in ordered if r.ops]))
    if o is None or not o.p < ALPHA or abs(math.log(o.ratio)) < math.log(COLD_RATIO):
        return None
    return Finding("cold_first_run", (ordered[0].run_id,), len(ordered),
                   f"the first run's mean latency is {o.ratio:.2f}x that of the other "
                   f"{len(ordered) - 1} (t = {o.t:.2g}, p = {o.p:.2g}; bar: p < "
                   f"{ALPHA:g} and {COLD_RATIO - 1:.0%}): warm the servers up before the "
                   "first repetition (a longer warm-up), or leave it out")


def machine_busy(runs: Sequence[RunData]) -> Finding | None:
    failing, judged = [], 0
    worst: tuple[float, str, Any] = (0.0, "", None)
    steal = 0.0
    for r in runs:
        hosts = [h for h in r.telemetry.get("hosts", ()) if isinstance(h, Mapping)]
        if not hosts or not _window_ok(r):
            continue
        judged += 1
        busy = [h for h in hosts if float(h.get("other_cpu") or 0) >= OTHER_CPU
                or float(h.get("steal_util") or 0) >= STEAL_SHARE]
        if busy:
            failing.append(r.run_id)
            for h in busy:
                worst = max(worst, (float(h.get("other_cpu") or 0), str(h.get("host")),
                                    h.get("cpus")), key=lambda x: x[0])
                steal = max(steal, float(h.get("steal_util") or 0))
    if not failing:
        return None
    other, host, cpus = worst
    text = (f"processes other than the kit's and the servers' used up to {other:.2f} CPUs "
            f"of {host or 'a machine'}" + (f" ({cpus} CPUs)" if cpus else ""))
    if steal >= STEAL_SHARE:
        text += f", and a hypervisor stole up to {steal:.0%} of a machine"
    return Finding("machine_busy", tuple(failing), judged,
                   f"{text} in {_of(len(failing), judged, len(runs))} (bar: {OTHER_CPU:g} "
                   f"CPUs, or {STEAL_SHARE:.0%} steal): they competed with the client or "
                   "the server for the CPUs")


def replica_lag(runs: Sequence[RunData]) -> Finding | None:
    """Runs in which a replica fell behind its primary (`replicas.behind`), named."""
    judged = {r.run_id: f for r in runs if (f := replicas.behind(r.telemetry)) is not None}
    if not (failing := [k for k, f in judged.items() if f]):
        return None
    said, names = replicas.worst([b for f in judged.values() for b in f],
                                 _of(len(failing), len(judged), len(runs)))
    return Finding("replica_lag", tuple(failing), len(judged), said, {"replicas": names})


def heavy_tail(runs: Sequence[RunData]) -> Finding | None:
    """`tails.check_top` on the group's pooled latencies: the largest the estimate
    needs are among each run's kept ones (`RunOps.top_ns`). Runs whose records are an
    import's aggregates (every op at the tool's mean) have no tail to judge."""
    judged = [r for r in runs if r.ops is not None and r.ops.n
              and not r.manifest.typed_extra.aggregated]
    n = sum(r.ops.n for r in judged if r.ops)
    if n < tails.MIN_OPS:
        return None
    k = tails.tail_k(n)
    pooled = np.concatenate([r.ops.top_ns for r in judged if r.ops]).astype(np.float64)
    top = pooled if pooled.size <= k + 1 else np.partition(pooled, pooled.size - k - 1)[
        -(k + 1):]
    found = tails.check_top(top, n)
    if not found.fires:
        return None
    return Finding(tails.NAME, tuple(r.run_id for r in judged), len(judged), found.detail,
                   {"tail_index": found.alpha_hat, "k": found.k, "ops": found.n})


#: Every check, in the order outputs list them.
CHECKS: dict[str, Check] = {c.name: c for c in (
    Check("client_saturated", client_saturated,
          "a client process used nearly a whole CPU in the measured window",
          f"telemetry.processes: a client's cpu_util >= {CLIENT_CPU:g} (open loop: unless "
          f"every op was sent within {KEPT_SCHEDULE_LAG_MS:g} ms p99)",
          "the client was saturated in {k} of {n} {side} runs"),
    Check("errors", errors, *failed_ops.WORDS),
    Check("target_not_met", target_not_met,
          "open loop achieved less than its target, or ops intended were never sent",
          f"achieved < {TARGET_SHARE:.0%} of target_rate_ops_s (Poisson arrivals: beyond "
          f"chance, p < {POISSON_CHANCE:g}), or counts.unsent > 0",
          "the target rate was not met in {k} of {n} {side} runs"),
    Check("not_steady", not_steady,
          "the start of a run differs from the rest: a warm-up not over (slower), or "
          "a server slowing as it fills (faster)",
          f"MSER-5 prefix >= {STEADY_Z:g} SDs of same-length blocks of the rest and >= "
          f"{STEADY_RATIO - 1:.0%} off in geometric-mean latency, its first half at least "
          f"{STEADY_FRONT:.0%} of that",
          "the start was not steady in {k} of {n} {side} runs"),
    Check("trend", trend,
          "the runs' results drift with their start time",
          f"Mann-Kendall on per-run mean latency against started_utc, p < {ALPHA:g} "
          f"(at least {MIN_TREND_RUNS} runs)",
          "the {side} runs drifted over time"),
    Check("cold_first_run", cold_first_run,
          "the first repetition of a configuration is an outlier against the others",
          f"t prediction interval on log mean latency, p < {ALPHA:g} and >= "
          f"{COLD_RATIO - 1:.0%} off (at least {MIN_COLD_RUNS} runs)",
          "the first {side} run was an outlier"),
    Check("machine_busy", machine_busy,
          "other processes used a noticeable share of a machine during the run",
          f"telemetry.hosts: other_cpu >= {OTHER_CPU:g} CPUs or steal_util >= "
          f"{STEAL_SHARE:g} (windows of {MIN_WINDOW_S:g} s or more)",
          "the machine was busy in {k} of {n} {side} runs"),
    Check("replica_lag", replica_lag, *replicas.WORDS),
    Check(tails.NAME, heavy_tail,
          "the latencies' tail is so heavy that a few ops decide the mean",
          f"Hill's tail index of the group's pooled latencies (top √n, {tails.MIN_OPS:,} "
          f"or more) below {tails.ALPHA_LIMIT:g} (harness.analysis.checks.tails)",
          "the {side} latencies' tail was too heavy for a mean",
          # A heavy tail unsettles the mean (and throughput, ops over the mean's time);
          # a percentile is what it leaves reliable, so its verdicts are not qualified.
          frozenset({"throughput", "latency_mean"})),
)}


def check_group(runs: Sequence[RunData]) -> list[Finding]:
    """Every registered check's finding on one group's runs, in `CHECKS` order."""
    return [f for c in CHECKS.values() if (f := c.func(runs)) is not None]


def group_checks(loaded: Loaded, by: Sequence[str] | None = None, *,
                 facts: Mapping[GroupKey, Sequence[RunData]] | None = None
                 ) -> dict[GroupKey, list[Finding]]:
    """Per group of `by` (`harness summary`'s grouping), the checks that failed; `facts`:
    the groups' runs as a read already made gave them (`runfacts.from_read`), else the
    ops files are read for them (`runfacts.group_runs`)."""
    if facts is None:
        facts = group_runs(loaded, by)
    return {key: check_group(runs) for key, runs in facts.items()}
