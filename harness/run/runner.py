"""Run an experiment: every planned run, servers started and stopped around them.

Servers are started once per distinct service configuration and shared by the runs that
use it. Each run ends in a whole run directory (complete, partial or failed); Ctrl-C
keeps the current run as `partial` and stops every server and client process."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from harness.errors import HarnessError, ServiceError
from harness.hosts.inventory import host_info, kit_info
from harness.hosts.owned import mark_local
from harness.results import (
    OpsArrays,
    OpsParts,
)
from harness.results.outdir import check_out_dir
from harness.run.clients import ClientGroup, client_host_names
from harness.run.context import (
    RunContext,
    RunOutcome,
    left_over,
    run_id_for,
    utcnow,
)
from harness.run.decide import Decider
from harness.run.inflight import ExperimentLock
from harness.run.interrupts import Interrupts, StopNow
from harness.run.livestatus import LiveStatus
from harness.run.machines import Prepared, RunMachines
from harness.run.metrics import LINGER_S, LiveMetrics, MetricsEndpoint
from harness.run.recollect import collect_pending
from harness.run.recovery import recover
from harness.run.runwrite import RunWriting
from harness.run.serverpool import ServerPool, ServerSet, capacity_for, count_starts
from harness.run.telemetry import RunTelemetry
from harness.run.timeline import Timeline
from harness.run.until import (
    UNTIL_CONFIRM_RUNS,
    ci_halfwidth_pct,
    completed_runs,
    completed_throughputs,
    until_first_met,
    until_met,
)
from harness.services.base import Endpoint, RunningService
from harness.spec import DecideRule, RunPlan, Spec, expand, ordered, records_per_run
from harness.spec.access import backends
from harness.text import printable, raw_stream
from harness.workloads import WORKLOADS


class Runner(RunMachines, RunWriting):
    def __init__(self, spec: Spec, out_dir: Path, *, resume: bool = False,
                 progress: bool = True, stream: IO[str] | None = None, live: bool = False,
                 on_run_start: Callable[[RunPlan, dict[str, RunningService]], None]
                 | None = None, interrupts: Interrupts | None = None,
                 metrics: tuple[str, int] | None = None,
                 metrics_linger_s: float = LINGER_S) -> None:
        """`on_run_start` is called as each run's clients are released: fault-injection
        tests use it to kill or pause servers mid-run. `interrupts`: the signal state of
        `harness run` (the CLI installs its handlers); without one, Ctrl-C is a plain
        KeyboardInterrupt. `metrics`: (address, port) of a live /metrics endpoint
        (`harness.run.metrics`), kept up at the end until it was scraped or for
        `metrics_linger_s`."""
        self.on_run_start = on_run_start
        self.metrics_at = metrics
        self.metrics_linger_s = metrics_linger_s
        self.metrics: LiveMetrics | None = None
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.resume = resume
        self.progress = progress
        #: A status line each second of a run (`harness.run.livestatus`); `harness run --quiet`.
        self.live = live
        self.stream = stream or sys.stderr
        self.workload = WORKLOADS.get(spec.workload)
        self.interrupts = interrupts or Interrupts()
        self._gave_up: set[str] = set()
        #: `until: decided`: its clock (the budget) starts with the Runner.
        self._decider = Decider(spec.until, spec.repetitions, self.say) \
            if isinstance(spec.until, DecideRule) else None

    @property
    def exp_dir(self) -> Path:
        return self.out_dir / self.spec.name

    def plans(self) -> list[RunPlan]:
        """The runs still to make, in the spec's order (`spec.ordered`)."""
        plans = expand(self.spec)
        if self.resume:
            done = completed_runs(self.exp_dir, self.spec.labels)
            plans = [p for p in plans if (p.config_id, p.repetition) not in done]
        return ordered(self.spec, plans)

    def server_starts(self, plans: list[RunPlan]) -> int:
        """How many times servers start for `plans` (`--dry-run` says it)."""
        keys = self._set_keys(plans)
        return count_starts(keys, capacity_for(keys), self.spec.servers == "fresh")

    def say(self, msg: str) -> None:
        tqdm.write(printable(msg, keep="\n\t"), file=raw_stream(self.stream))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[ExperimentLock]:
        """The experiment's lock, after what a killed run left is cleared away
        (`harness.run.recovery`); the state file is removed at the end when everything it
        lists is gone, else kept with a line saying what is left and how to clear it."""
        lock = ExperimentLock(self.exp_dir, spec=str(self.spec.path))
        lock.acquire()
        try:
            recover(self.spec, self.out_dir, self.say, lock)
            lock.save()
            yield lock
        finally:
            if lock.state.empty():
                lock.release()
            else:
                lock.save()
                lock.keep()
                self.say(f"{self.spec.name}: {left_over(lock)} left, listed in "
                         f"{lock.dir}; the next `harness run {self.spec.path}` (or "
                         f"`harness cleanup {self.spec.path}`) deals with them")
                if lock.unsaved:
                    self.say(f"{self.spec.name}: warning: {lock.unsaved}; it lists what "
                             "was running when it was last written")

    def run(self) -> list[RunOutcome]:
        # Before anything is started or measured: a bad --out would cost a run's records.
        check_out_dir(self.out_dir, self.spec.name, records_per_run(self.spec))
        outcomes: list[RunOutcome] = []
        # Hosts first: a spec error leaves no trace; then the lock, and what a killed run
        # left is cleared before the plans are made (it may write runs).
        with self._hosts() as hosts, self._locked() as lock, contextlib.ExitStack() as stack:
            # Everything started or made from here on carries the run's owner token, so
            # that a clean-up after a kill can prove it the kit's (`harness.hosts.owned`).
            lock.own(hosts)
            if self.resume:  # records a transfer left on client machines first
                collect_pending(self.spec, self.out_dir, self.say)
            plans = self.plans()
            if not plans and self.spec.until is None:
                self.say(f"{self.spec.name}: every run is complete already; nothing to do")
                return outcomes
            if self.metrics_at is not None:  # closed last: after the servers stopped
                stack.enter_context(self._serve_metrics(plans))
            scratch = mark_local(tempfile.mkdtemp(prefix="harness-collect-"),
                                 lock.state.owner)
            lock.add_scratch(scratch)
            stack.callback(self._remove_scratch, lock, scratch)
            pool = ServerPool(lambda running: self._stop_services(running, ctx),
                              capacity_for(self._set_keys(plans)),
                              fresh=self.spec.servers == "fresh")
            ctx = RunContext(hosts, {name: host_info(h) for name, h in hosts.items()},
                           [hosts[n] for n in client_host_names(self.spec.clients)], {},
                           kit_info(),
                           lock, scratch, pool)
            stack.callback(ctx.agents.close)  # after the work directories are removed
            stack.callback(lambda: [link.close() for link in ctx.snapshot_links.values()])
            self._start_agents(ctx)
            for h in ctx.client_hosts:
                if h.name not in ctx.workdirs:
                    ctx.workdirs[h.name] = h.mkdtemp(prefix="harness-clients-")
                    lock.add_workdir(h.name, ctx.workdirs[h.name])
                    stack.callback(self._remove_workdir, ctx, h)
            stack.callback(pool.close)  # first of all: servers stop before the rest
            # On a terminal only: into a pipe or a log the per-run lines say it all.
            on_tty = getattr(self.stream, "isatty", lambda: False)()
            bar = stack.enter_context(tqdm(total=len(plans), unit="run",
                                           file=raw_stream(self.stream),
                                           disable=not (self.progress and on_tty),
                                           dynamic_ncols=True,
                                           desc=printable(self.spec.name)))
            stopped = self._execute(plans, ctx, bar, outcomes)
            # `until`: more repetitions, one round at a time, for configurations whose
            # throughput CI is not yet tight enough.
            while not stopped and self.spec.until is not None:
                more = self._more_repetitions(len(outcomes))
                if not more:
                    break
                bar.total += len(more)
                bar.refresh()
                stopped = self._execute(more, ctx, bar, outcomes)
            if self._decider is not None and not stopped:
                written = self._decider.write(self.exp_dir)
                if written is not None:
                    self.say(f"until decided: the looks are in {written}")
        return outcomes

    @contextlib.contextmanager
    def _serve_metrics(self, plans: list[RunPlan]) -> Iterator[MetricsEndpoint]:
        assert self.metrics_at is not None
        self.metrics = LiveMetrics(self.spec.name, self.workload.ops)
        self.metrics.plan_grid(plans, self.spec.clients.hosts)
        endpoint = MetricsEndpoint(self.metrics, *self.metrics_at,
                                   linger_s=self.metrics_linger_s)
        try:
            endpoint.start()
        except OSError as exc:
            raise HarnessError(f"--metrics {self.metrics_at[0]}:{self.metrics_at[1]}: cannot "
                               f"listen there: {exc.strerror or exc}") from None
        self.say(f"{self.spec.name}: metrics (Prometheus) at {endpoint.url}")
        self.metrics_url = endpoint.url
        try:
            yield endpoint
        except BaseException:
            endpoint.linger_s = 0.0  # a stopped grid (Ctrl-C, an error) waits for no scrape
            raise
        finally:
            scraped = endpoint.close()
            self.say(f"{self.spec.name}: metrics at {endpoint.url} " + (
                "served their final values to a scrape" if scraped else
                "stopped; no scrape of the final values" if endpoint.scrapes else
                "stopped; nothing scraped them"))

    def _execute(self, plans: list[RunPlan], ctx: RunContext, bar: tqdm,
                 outcomes: list[RunOutcome]) -> bool:
        """Run `plans` in their order, each on the server set its configuration needs
        (`harness.run.serverpool`); True if the grid stopped early (on_failure: stop)."""
        for plan in plans:
            sset = ctx.pool.acquire(self._services_key(plan),
                                    lambda plan=plan: self._start_services(plan, ctx))
            running = sset.running
            behind = backends(self.spec.services)  # a proxy's: it serves them to the workload
            endpoints = {s.endpoint.kind: s.endpoint for n, s in running.items()
                         if n not in behind}
            sset.runs += 1
            sinfo = {n: {**s.info(), "instance": {
                "number": sset.instance, "started_utc": sset.started_utc,
                "run_on_instance": sset.runs}} for n, s in running.items()}
            bar.set_postfix_str(plan.label())
            outcome = self._run_one(plan, ctx, endpoints, sinfo, running, sset)
            outcomes.append(outcome)
            bar.update(1)
            self.say(self._line(outcome, len(outcomes), int(bar.total)))
            if self.interrupts.pending:  # a signal while the run was written
                raise KeyboardInterrupt
            if outcome.status == "failed" and self.spec.on_failure == "stop":
                left = int(bar.total) - len(outcomes)
                self.say(f"on_failure: stop -- run {len(outcomes)} "
                         f"({plan.label()}) failed; the remaining {left} run(s) "
                         "are skipped (`harness run --resume` continues them)")
                return True
            self._track_servers(ctx, running)  # a timeline may have added some
        return False

    def _live_status(self, plan: RunPlan, run_id: str, group: ClientGroup
                     ) -> LiveStatus | None:
        """The status line (unless --quiet), feeding the /metrics figures if served."""
        metrics = self.metrics
        if metrics is None:
            return LiveStatus(group, self.say).start() if self.live else None
        metrics.run_started(plan, run_id)
        return LiveStatus(group, self.say, lines=self.live,
                          sink=lambda path, host, iv: metrics.take(plan, path, host, iv),
                          note=f"  (metrics: {self.metrics_url})").start()

    def _more_repetitions(self, next_index: int) -> list[RunPlan]:
        """One more repetition of every configuration whose 95% CI of throughput (over
        its complete runs in the output directory) is wider than `until.ci_within_pct`
        of its mean, or met it fewer than `UNTIL_CONFIRM_RUNS` runs ago, up to
        `until.max_repetitions`. Says which converged and which not."""
        until = self.spec.until
        assert until is not None
        if isinstance(until, DecideRule):
            return self._more_decided(next_index)
        by_config = completed_throughputs(self.exp_dir, self.spec.labels)
        more: list[RunPlan] = []
        for plan in expand(self.spec):
            if plan.repetition != 1:
                continue  # one template plan per configuration
            reps = by_config.get(plan.config_id, {})
            width = ci_halfwidth_pct([reps[r] for r in sorted(reps)])
            label = " ".join(f"{k}={v}" for k, v in plan.grid_point.items()) or "default"
            if until_met(reps, until.ci_within_pct):
                continue
            last = max(reps, default=0)
            if last >= until.max_repetitions:
                if last == until.max_repetitions and plan.config_id not in self._gave_up:
                    self._gave_up.add(plan.config_id)
                    met = until_first_met([reps[r] for r in sorted(reps)],
                                          until.ci_within_pct)
                    why = (f"target met at {met} runs, {last - met} of "
                           f"{UNTIL_CONFIRM_RUNS} confirming runs made" if met is not None
                           else f"95% CI still ±{width or float('nan'):.1f}%")
                    self.say(f"until: {label}: {why} after {last} repetitions "
                             "(max_repetitions); stopping there")
                continue
            more.append(replace(plan, repetition=last + 1, index=next_index + len(more)))
        return more

    def _more_decided(self, next_index: int) -> list[RunPlan]:
        """`until: decided`: one more repetition of each configuration whose comparison
        with the first is still open, and of the first while any is (`harness.run.decide`)."""
        assert self._decider is not None
        templates = [p for p in expand(self.spec) if p.repetition == 1]
        by_config = completed_throughputs(self.exp_dir, self.spec.labels)
        want = self._decider.more(templates, by_config)
        chosen = [p for p in templates if p.config_id in want]
        return [replace(p, repetition=max(by_config.get(p.config_id, {}), default=0) + 1,
                        index=next_index + i) for i, p in enumerate(chosen)]

    def _run_one(self, plan: RunPlan, ctx: RunContext, endpoints: dict[str, Endpoint],
                 sinfo: dict[str, Any], running: dict[str, RunningService],
                 sset: ServerSet | None = None) -> RunOutcome:
        started = utcnow()
        run_id = run_id_for(plan)
        draft = self._draft(plan, run_id, started, ctx, sinfo)
        ops: OpsArrays | OpsParts = OpsArrays.empty(self.workload.ops)
        errors: list[str] = []
        workers: list[dict[str, Any]] = []
        interrupted = False
        group = ClientGroup(plan, ctx.client_hosts, ctx.workdirs, endpoints,
                            self.workload.ops, spec_path=str(self.spec.path),
                            agents=ctx.agents, live=self.live or self.metrics is not None,
                            scratch=ctx.scratch)
        telemetry = RunTelemetry(ctx.hosts, running, group, ctx.agents, ctx.snapshot_links)
        live: LiveStatus | None = None
        baseline: Prepared | None = None
        timeline: Timeline | None = None
        gone: list[str] = []
        try:
            try:
                # A server that died in an earlier run of this group stays dead: fail fast.
                gone = [n for n, s in running.items() if not s.alive()]
                if gone:
                    raise ServiceError(f"server(s) not running before the run: "
                                       f"{', '.join(gone)} (stopped during an earlier run); "
                                       "no clients started")
                baseline = self._prepare(plan, endpoints, sset, run_id)
                telemetry.before_clients()  # the servers' counters: prepare's excluded
                if self.metrics is not None:
                    self.metrics.server_counters(plan, telemetry.counters_start)
                try:
                    group.start()
                finally:  # every process that started is listed, with its record files
                    self._track_run(ctx, run_id, plan, draft, group)
                group.wait_ready()
                telemetry.start()  # every machine's /proc, as close to the start as can be
                start_ns = group.go()
                live = self._live_status(plan, run_id, group)
                if self.spec.timeline:
                    timeline = Timeline(self.spec.timeline, running, start_ns,
                                        say=self.say if self.live else None).start()
                if self.on_run_start is not None:
                    self.on_run_start(plan, running)
                interrupted = group.wait()
            except KeyboardInterrupt:
                interrupted = True
                group.stop()
            except (HarnessError, OSError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                group.stop()
            except Exception as exc:  # noqa: BLE001 - a driver error in prepare; keep going
                errors.append(f"prepare: {type(exc).__name__}: {exc}")
                group.stop()
            # From here to the run directory in place a first signal waits (`protect`).
            with self.interrupts.protect(f"writing run {run_id} ({plan.label()})"):
                return self._finish(plan, ctx, group, draft, running, gone, errors,
                                    interrupted, live, timeline, baseline, ops, workers,
                                    telemetry)
        except StopNow:  # a second signal: what is not written stays on the clients
            self.say(self._left_line(ctx, run_id, plan))
            raise
