"""A finished run's status and its console summary: shared by the runner and by
`harness collect`, which finishes runs whose records came late (`harness.recollect`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from harness.results import ERROR, REDIRECT, TIMEOUT, Manifest, OpsArrays
from harness.spec import RunPlan


def quick_stats(ops: OpsArrays) -> tuple[int, float, float, float, float]:
    """Measured ops, ops/s, p50 ms, p99 ms, error rate: the console's one-line summary."""
    # Redirected attempts are not ops: the op's own record spans its retries.
    m = ~ops.warmup & (ops.status != REDIRECT)
    n = int(m.sum())
    if n == 0:
        return 0, 0.0, float("nan"), float("nan"), float("nan")
    # Open loop: latency counts from the intended start, so the op begins there.
    begin = np.where(ops.intended_ns >= 0, ops.intended_ns, ops.start_ns)
    start, lat = begin[m], ops.latency_ns[m]
    wall_ns = int((start + lat).max() - start.min())
    p50, p99 = np.percentile(lat, [50, 99]) / 1e6
    err = float(np.isin(ops.status[m], (ERROR, TIMEOUT)).mean())
    return n, n / (wall_ns / 1e9) if wall_ns > 0 else float("nan"), float(p50), float(p99), err


def run_status(plan: RunPlan, measured: int, error_rate: float, errors: list[str],
               workers: list[dict[str, Any]], interrupted: bool = False) -> str:
    """complete, partial or failed; a policy failure puts its reason first in `errors`."""
    limit = plan.size.fail_if_error_rate_above
    if measured == 0:
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
    return bool(achieved_ops_s >= 0.95 * float(plan.size.rate_ops_s or 0))


def finish_manifest(draft: Manifest, plan: RunPlan, ops: OpsArrays, *,
                    workers: list[dict[str, Any]], errors: list[str], interrupted: bool,
                    ended_utc: str, notes: Sequence[str] = (), engine: str | None = None,
                    clock_offsets: Mapping[str, Any] | None = None,
                    extra: Mapping[str, Any] | None = None,
                    telemetry: Mapping[str, Any] | None = None) -> Manifest:
    """The run's manifest once its records are in: status, error, achieved rate, the
    workers' statuses, its `telemetry` (`harness.telemetry`; none after a kill, which
    left nobody to read the machines at the end). Used by the runner and by the recovery
    of a run a killed harness left (`harness.recovery`), so both decide alike."""
    errors = list(errors)
    n, rate, *_, err = quick_stats(ops)
    status = run_status(plan, n, err, errors, workers, interrupted)
    if interrupted:
        errors.insert(0, "interrupted (Ctrl-C / SIGTERM)")
    more = {**draft.typed_loadgen.more,
            "achieved_rate_ops_s": rate if n else None,
            "target_met": target_met(plan, rate) if plan.size.open_loop else None,
            "workers": workers, "clock_offsets": dict(clock_offsets or {})}
    loadgen = replace(draft.typed_loadgen, engine=engine, more=more).to_dict()
    # Notes (a reconnected SSH link) say what happened without making it partial.
    return replace(draft, status=status, ended_utc=ended_utc, loadgen=loadgen,
                   error="\n".join([*errors, *notes]) or None,
                   extra={**draft.extra, **(extra or {})}, counts={}, ops_file={},
                   telemetry=dict(telemetry or draft.telemetry))
