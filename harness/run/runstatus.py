"""A finished run's status and its console summary: shared by the runner and by
`harness collect`, which finishes runs whose records came late (`harness.run.recollect`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from harness.results import Manifest
from harness.results.stream import OmitClients, Ops, RunTally, tally
from harness.spec import RunPlan


def quick_stats(ops: Ops) -> tuple[int, float, float, float, float]:
    """Measured ops, ops/s, p50 ms, p99 ms, error rate: the console's one-line summary.
    Redirected attempts are not ops (the op's own record spans its retries); in open
    loop an op begins at its intended start, from which its latency counts."""
    return tally(ops).quick()


def unsent_of(workers: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """Open loop: (measured, warm-up) ops intended and never sent, summed over the
    workers' statuses (`ClientRun.unsent_counts`; 0 where a worker did not say)."""
    return (sum(int(w.get("unsent") or 0) for w in workers),
            sum(int(w.get("unsent_warmup") or 0) for w in workers))


def send_lag_p99_ms(ops: Ops) -> float | None:
    """Open loop: the p99 of how late the measured ops were sent (start - intended), in
    ms: the clients' backlog, apart from the server's time. None without such ops."""
    return tally(ops).send_lag_p99_ms


def run_counts(plan: RunPlan, ops: Ops,
               workers: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The manifest's counts (`Counts`): the records', and in open loop the ops never
    sent (counted, 0 included, so a reader can tell "none" from "not counted")."""
    counts = dict(tally(ops).counts)
    if plan.size.open_loop:
        counts["unsent"], counts["unsent_warmup"] = unsent_of(workers)
    return counts


def no_measured_ops(ops: Ops, workers: Sequence[Mapping[str, Any]]) -> str:
    """The error line of a run without a measured op: why, as far as the records and
    the workers' counts tell."""
    t = tally(ops)
    unsent, unsent_warmup = unsent_of(workers)
    if unsent:
        return (f"no measured ops: none of the {unsent:,} ops intended in the measured "
                "window was sent by its end: the clients were still busy with earlier ops "
                "(a server far slower than rate_ops_s, or stalled)")
    if not t.records:
        return "no measured ops: no client process recorded an op"
    warm = t.warm
    if warm == t.records:
        return (f"no measured ops: all {warm:,} records are warm-up"
                + (f" ({unsent_warmup:,} more warm-up ops were never sent)"
                   if unsent_warmup else "")
                + "; the run ended before its measured part")
    return (f"no measured ops: the {t.records - warm:,} records after the warm-up are all "
            "redirected attempts, none an op")


def run_status(plan: RunPlan, measured: int, error_rate: float, errors: list[str],
               workers: list[dict[str, Any]], interrupted: bool = False,
               ops: Ops | None = None) -> str:
    """complete, partial or failed; a policy failure puts its reason first in `errors`,
    and so does a run without a measured op and no error saying why (given its `ops`)."""
    limit = plan.size.fail_if_error_rate_above
    if measured == 0:
        if ops is not None and not errors:
            errors.insert(0, no_measured_ops(ops, workers))
        return "failed"
    if limit is not None and error_rate > limit:
        # By the spec's policy; the records are kept all the same.
        errors.insert(0, f"error rate {error_rate:.2%} is above "
                         f"run.fail_if_error_rate_above ({limit:.2%})")
        return "failed"
    if interrupted or errors or any(w.get("state") != "complete" for w in workers):
        return "partial"
    return "complete"


def target_met(plan: RunPlan, achieved_ops_s: float) -> bool:
    """An open-loop run met its target when it achieved at least 95% of the rate; below
    that the clients could not keep the schedule and the latencies include their lag."""
    size = plan.size
    return target_held(float(size.rate_ops_s or 0), achieved_ops_s, size.arrival,
                       size.duration_s, size.ops)


def target_held(rate_ops_s: float, achieved_ops_s: float, arrival: str = "fixed",
                duration_s: float | None = None, ops: int | None = None) -> bool:
    """At least 95% of the target rate achieved. Poisson arrivals at a rate R over T
    seconds make a count of mean RT and spread sqrt(RT): a short run may fall below 95%
    of R by chance alone, so it is allowed 3 standard deviations below R as well
    (clients that cannot keep up fall further, and leave ops unsent besides)."""
    if not rate_ops_s > 0:
        return True
    floor = 0.95 * rate_ops_s
    seconds = duration_s if duration_s else (ops / rate_ops_s if ops else None)
    if arrival == "poisson" and seconds:
        floor = min(floor, rate_ops_s - 3 * math.sqrt(rate_ops_s / seconds))
    return bool(achieved_ops_s >= floor)


def load_and_probe(plan: RunPlan, ops: Ops, summed: RunTally
                   ) -> tuple[RunTally, RunTally | None]:
    """A run's tallies of the load's ops alone and of the probe's (`clients.probe`: the
    client after the load's), or (`summed`, None) without a probe."""
    if plan.clients.probe is None or isinstance(ops, RunTally):
        return summed, None
    n = plan.clients.processes
    return (tally(OmitClients.of_run(ops, [n])),
            tally(OmitClients.of_run(ops, list(range(n)))))


def finish_manifest(draft: Manifest, plan: RunPlan, ops: Ops, *,
                    workers: list[dict[str, Any]], errors: list[str], interrupted: bool,
                    ended_utc: str, notes: Sequence[str] = (), engine: str | None = None,
                    clock_offsets: Mapping[str, Any] | None = None,
                    extra: Mapping[str, Any] | None = None,
                    telemetry: Mapping[str, Any] | None = None,
                    load: Ops | None = None, probe: Ops | None = None) -> Manifest:
    """The run's manifest once its records are in: status, error, achieved rate, the
    workers' statuses, its `telemetry` (`harness.run.telemetry`; none after a kill, which
    left nobody to read the machines at the end). Used by the runner and by the recovery
    of a run a killed harness left (`harness.run.recovery`), so both decide alike."""
    errors = list(errors)
    ops = tally(ops)  # once: a long run's records are read in passes over its parts
    # The load's ops alone make its rate and status (`load`: without a probe's ops).
    n, rate, *_, err = quick_stats(load if load is not None else ops)
    probe_n, probe_rate, probe_p50, probe_p99, _ = (quick_stats(probe) if probe is not None
                                                    else (0, 0.0, None, None, 0.0))
    status = run_status(plan, n, err, errors, workers, interrupted, ops=ops)
    if interrupted:
        errors.insert(0, "interrupted (Ctrl-C / SIGTERM)")
    open_loop = plan.size.open_loop
    more = {**draft.typed_loadgen.more,
            "achieved_rate_ops_s": rate if n else None,
            "target_met": target_met(plan, rate) if open_loop else None,
            "send_lag_p99_ms": send_lag_p99_ms(ops) if open_loop else None,
            "workers": workers, "clock_offsets": dict(clock_offsets or {}),
            **({"probe_ops": probe_n, "probe_achieved_rate_ops_s": probe_rate,
                "probe_p50_ms": probe_p50, "probe_p99_ms": probe_p99}
               if probe is not None and probe_n else {})}
    loadgen = replace(draft.typed_loadgen, engine=engine, more=more).to_dict()
    # Notes (a reconnected SSH link) say what happened without making it partial.
    return replace(draft, status=status, ended_utc=ended_utc, loadgen=loadgen,
                   error="\n".join([*errors, *notes]) or None,
                   extra={**draft.extra, **(extra or {})},
                   counts=run_counts(plan, ops, workers), ops_file={},
                   telemetry=dict(telemetry or draft.telemetry))
