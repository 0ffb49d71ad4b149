"""How a run ends up on disk: its manifest drafted before it runs, then its records
and manifest written (complete, partial or failed), and the line the console prints;
`Runner` (`harness.run.runner`) takes these methods from `RunWriting`."""

from __future__ import annotations

import contextlib
import errno
from dataclasses import asdict
from typing import Any

from harness.errors import HarnessError, HostError, ResultsError
from harness.loadgen.native import engine_of_workers
from harness.results import (
    Loadgen,
    Manifest,
    OpsArrays,
    OpsParts,
    new_manifest,
    tally,
    write_run,
)
from harness.run.clients import ClientGroup, Collected
from harness.run.context import RunContext, RunOutcome, utcnow
from harness.run.inflight import InFlight, WorkerEntry
from harness.run.livestatus import LiveStatus
from harness.run.metrics import LiveMetrics
from harness.run.runstatus import finish_manifest, load_and_probe, quick_stats, target_met
from harness.run.telemetry import RunTelemetry
from harness.run.timeline import Timeline
from harness.run.transfer import client_prefix
from harness.services.base import RunningService
from harness.spec import RunPlan, recorded_spec


class RunWriting:
    """The `Runner`'s methods that write a run (a mixin: they use its `spec`, `say`, ...)."""

    #: The live /metrics figures (`harness run --metrics`), if served.
    metrics: LiveMetrics | None = None
    metrics_url: str | None = None

    def _draft(self, plan: RunPlan, run_id: str, started: str, ctx: RunContext,
               sinfo: dict[str, Any]) -> Manifest:
        """The run's manifest as known before it runs; `finish_manifest` completes it."""
        return new_manifest(
            run_id=run_id, experiment=plan.experiment, workload=plan.workload,
            config_id=plan.config_id, repetition=plan.repetition, params=dict(plan.params),
            grid_point=dict(plan.grid_point), status="partial", started_utc=started,
            ended_utc="", hosts=ctx.infos, services=sinfo,
            loadgen=Loadgen(
                processes=plan.clients.processes, connections=plan.clients.connections,
                inflight=plan.clients.inflight,
                mode="open" if plan.size.open_loop else "closed",
                target_rate_ops_s=plan.size.rate_ops_s, ops=plan.size.ops,
                duration_s=plan.size.duration_s, warmup_ops=plan.size.warmup_ops,
                warmup_s=plan.size.warmup_s, timeout_s=plan.size.timeout_s,
                more={"arrival": plan.size.arrival if plan.size.open_loop else None,
                      "client_hosts": list(plan.clients.hosts),
                      "pause_us": plan.clients.pause_us,
                      # The probe's process is the one after the load's (`clients.probe`).
                      **({"probe": plan.clients.probe.to_dict(),
                          "probe_clients": [plan.clients.processes]}
                         if plan.clients.probe is not None else {})}),
            # The spec itself (overrides applied) travels with every run: the file may be
            # edited or gone when the report is made.
            kit=ctx.kit, spec_file=str(self.spec.path.resolve()),
            labels=dict(self.spec.labels),
            extra={"spec": recorded_spec(self.spec.raw),
                   "order": {"mode": self.spec.order, "servers": self.spec.servers,
                             **({"seed": self.spec.order_seed}
                                if self.spec.order == "random" else {})},
                   # Where the run was watched live (`harness run --metrics`).
                   **({"live_metrics": self.metrics_url} if self.metrics_url else {})})

    def _finish(self, plan: RunPlan, ctx: RunContext, group: ClientGroup, draft: Manifest,
                running: dict[str, RunningService], gone: list[str], errors: list[str],
                interrupted: bool, live: LiveStatus | None, timeline: Timeline | None,
                baseline: Any, ops: OpsArrays | OpsParts, workers: list[dict[str, Any]],
                telemetry: RunTelemetry) -> RunOutcome:
        """Collect the records, write the run, then remove the clients' copies."""
        telemetry.end()  # first: the clients have exited, nothing else has run since
        if live is not None:
            live.stop()
        if self.metrics is not None:
            self.metrics.server_counters(plan, telemetry.counters_end)
            self.metrics.run_ended(plan)
        if timeline is not None:
            timeline.finish()
            errors += timeline.errors
        got: Collected | None = None
        try:
            got = group.collect()
            ops, workers = got.ops, got.workers
        except (HarnessError, OSError) as exc:
            errors.append(f"collecting records: {exc}")
        try:
            return self._write(plan, ctx, group, draft, running, gone, errors, interrupted,
                               timeline, baseline, ops, workers, telemetry, got)
        finally:
            if got is not None:  # written, or kept on the clients: the copies here go
                got.ops.close()

    def _write(self, plan: RunPlan, ctx: RunContext, group: ClientGroup, draft: Manifest,
               running: dict[str, RunningService], gone: list[str], errors: list[str],
               interrupted: bool, timeline: Timeline | None, baseline: Any,
               ops: OpsArrays | OpsParts, workers: list[dict[str, Any]],
               telemetry: RunTelemetry, got: Collected | None) -> RunOutcome:
        """Write the run from what was collected (`got`), then remove the clients'
        copies."""
        pending: list[dict[str, Any]] = []
        if got is not None:
            errors += got.errors
            pending = [asdict(p) for p in got.pending]
            for p in got.pending:
                ctx.keep_workdirs.setdefault(p.host, set()).add(client_prefix(p.files))
        # Counted, timed and its percentiles taken once, in passes over the parts.
        summed = tally(ops)
        # The load's figures without the probe's ops (`clients.probe`), and the probe's.
        load, probe = load_and_probe(plan, ops, summed)
        dead = [n for n, s in running.items() if n not in gone and not s.alive()]
        if dead:
            errors.append(f"server(s) not running at the end of the run: {', '.join(dead)}")
        manifest = finish_manifest(
            draft, plan, summed, workers=workers, errors=errors, notes=group.notes,
            interrupted=interrupted, ended_utc=utcnow(),
            engine=engine_of_workers(workers), clock_offsets=group.clock_offsets,
            extra={**({"baseline": baseline.baseline}
                      if baseline is not None and baseline.baseline else {}),
                   **({"prepare": baseline.info} if baseline is not None else {}),
                   # Records still on client machines (`harness collect` fetches them).
                   **({"pending_records": pending} if pending else {}),
                   **({"timeline": timeline.records} if timeline is not None else {})},
            telemetry=telemetry.result(workers, summed), load=load, probe=probe)
        try:
            run_dir = write_run(self.out_dir, manifest, ops)
        except OSError as exc:
            ctx.lock.update_run(manifest.run_id, manifest=manifest.to_dict(), final=True,
                                reason=f"could not be written ({exc.strerror or exc})")
            raise self._write_failure(ctx, plan, manifest, summed.records, exc) from None
        if got is not None:  # written and fsynced: the copies on the clients can go
            group.discard(got)
        ctx.lock.end_run(manifest.run_id)
        if interrupted:
            raise KeyboardInterrupt
        n, rate, p50, p99, err = quick_stats(load)
        return RunOutcome(plan, run_dir, manifest.status, n, rate, p50, p99, err,
                          manifest.error, unsent=manifest.typed_counts.unsent,
                          send_lag_p99_ms=manifest.loadgen.get("send_lag_p99_ms"))

    @staticmethod
    def _track_run(ctx: RunContext, run_id: str, plan: RunPlan, draft: Manifest,
                   group: ClientGroup) -> None:
        ticks: dict[str, dict[int, int]] = {}
        for w in group.workers:
            if w.host.name not in ticks:
                with contextlib.suppress(HostError):
                    ticks[w.host.name] = w.host.start_ticks(
                        [x.process.pid for x in group.workers if x.host is w.host])
        ctx.lock.begin_run(InFlight(
            run_id, plan.label(), draft.to_dict(),
            [WorkerEntry(w.host.name, w.client_id, w.process.pid, dict(w.files),
                         ticks.get(w.host.name, {}).get(w.process.pid))
             for w in group.workers],
            reason="the harness stopped before writing it"))

    def _left_line(self, ctx: RunContext, run_id: str, plan: RunPlan) -> str:
        where = "; ".join(f"{h} ({ctx.workdirs.get(h, '?')})"
                          for h in sorted(ctx.lock.run_hosts()))
        return (f"stopped at once: run {run_id} ({plan.label()}) was not written; its "
                f"records stay on {where or 'no machine (none were made)'}, and the next "
                f"`harness run {self.spec.path} --resume` (or `harness cleanup "
                f"{self.spec.path}`) writes them")

    def _write_failure(self, ctx: RunContext, plan: RunPlan, manifest: Manifest, records: int,
                       exc: OSError) -> ResultsError:
        """The one-line error that stops the grid when a run cannot be written; its
        records stay on the client machines, listed in the state file."""
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc) or (
            "[errno 28]" in str(exc).lower())
        what = ("no space left on the device" if full else
                f"cannot write there ({exc.strerror or exc})")
        where = "; ".join(f"{h} at {ctx.workdirs.get(h, '?')}"
                          for h in sorted(ctx.lock.run_hosts()))
        return ResultsError(
            f"{self.exp_dir}: {what} while writing run {manifest.run_id} ({plan.label()}): "
            f"its {records:,} records are kept on {where or 'the client machines'}; the "
            "runs written before it are intact. "
            + ("Free some space there" if full else "Fix that")
            + f" and continue with `harness run {self.spec.path} --resume`, which writes "
            "them first.")

    @staticmethod
    def _line(o: RunOutcome, i: int, total: int) -> str:
        head = f"[{i}/{total}] {o.plan.label()}: {o.status}"
        if o.measured_ops == 0:
            return f"{head} ({(o.error or '').splitlines()[0] if o.error else 'no ops'})"
        line = (f"{head}, {o.measured_ops} ops, {o.throughput_ops_s:,.0f} ops/s, "
                f"p50 {o.latency_p50_ms:.3f} ms, p99 {o.latency_p99_ms:.3f} ms")
        if o.error_rate:
            line += f", errors {o.error_rate:.1%}"
        target = o.plan.size.rate_ops_s
        if target:
            met = target_met(o.plan, o.throughput_ops_s)
            line += f", target {target:,.0f} ops/s" + ("" if met else " NOT MET")
            if not met or o.unsent:  # how far behind the clients were, and how late
                line += f", {o.unsent:,} intended ops not sent"
            if not met and o.send_lag_p99_ms is not None:
                line += f", send lag p99 {o.send_lag_p99_ms:,.1f} ms"
        if o.status != "complete" and o.error:
            line += f" -- {o.error.splitlines()[0]}"
        return line
