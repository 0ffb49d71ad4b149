"""Run an experiment: every planned run, servers started and stopped around them.

Servers are started once per distinct service configuration and shared by the runs that
use it. Each run ends in a whole run directory (complete, partial or failed); Ctrl-C
keeps the current run as `partial` and stops every server and client process.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
from tqdm import tqdm

from harness.agentctl import AgentPool
from harness.clients import ClientGroup, Collected
from harness.errors import HarnessError, HostError, ResultsError, ServiceError, SpecError
from harness.hosts import Host, connect_host
from harness.inflight import ExperimentLock, InFlight, ServerEntry, WorkerEntry
from harness.interrupts import Interrupts, StopNow
from harness.inventory import host_info, kit_info
from harness.livestatus import LiveStatus
from harness.loadgen.native import engine_of_workers
from harness.preflight import kit_problems, loopback_problems, python_problems
from harness.recollect import collect_pending
from harness.recovery import recover
from harness.results import (
    Loadgen,
    Manifest,
    OpsArrays,
    OpsParts,
    iter_run_dirs,
    new_manifest,
    tally,
    write_run,
)
from harness.results.outdir import check_out_dir
from harness.runstatus import finish_manifest, quick_stats, target_met
from harness.serverpool import ServerPool, capacity_for, count_starts
from harness.services import SERVICES
from harness.services.access import access_for
from harness.services.base import Endpoint, RunningService
from harness.spec import RunPlan, Spec, expand, ordered, recorded_spec, records_per_run
from harness.telemetry import RunTelemetry
from harness.timeline import Timeline
from harness.workloads import WORKLOADS


@dataclass(frozen=True)
class RunOutcome:
    plan: RunPlan
    run_dir: Path
    status: str
    measured_ops: int
    throughput_ops_s: float
    latency_p50_ms: float
    latency_p99_ms: float
    error_rate: float
    error: str | None
    #: Open loop: measured ops intended and never sent, and the p99 of the send lag.
    unsent: int = 0
    send_lag_p99_ms: float | None = None


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _manifests(exp_dir: Path) -> Iterator[dict[str, Any]]:
    """The manifests of the run directories in `exp_dir` (never a hidden temp directory:
    a run is a directory in place, `iter_run_dirs`), as plain JSON; unreadable ones are
    skipped (`harness verify` names them)."""
    if not exp_dir.is_dir():
        return
    for run_dir in iter_run_dirs(exp_dir):
        try:
            data = json.loads((run_dir / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            yield data


def completed_runs(exp_dir: Path) -> set[tuple[str, int]]:
    """(config_id, repetition) of the complete runs already in `exp_dir`."""
    return {(d.get("config_id"), d.get("repetition")) for d in _manifests(exp_dir)
            if d.get("status") == "complete"}


def completed_throughputs(exp_dir: Path) -> dict[str, dict[int, tuple[float, float]]]:
    """config_id -> {repetition: (measured ops, achieved throughput)} of the complete
    runs in `exp_dir`."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for data in _manifests(exp_dir):
        rate = (data.get("loadgen") or {}).get("achieved_rate_ops_s")
        ops = (data.get("counts") or {}).get("measured") or 1  # unknown: equal weights
        if data.get("status") == "complete" and rate:
            out.setdefault(data["config_id"], {})[int(data["repetition"])] = (
                float(ops), float(rate))
    return out


#: `until` judges the interval with a pessimistic spread: the upper 95% confidence
#: bound of the run-to-run SD, and the target must be met with and without the latest
#: run. Stopping as soon as the interval looks narrow stops when the spread happens to
#: look small, and the reported interval then covered 0.90-0.93 (from 3 runs, ±5%); with
#: both guards 0.933-0.947. The rest of the loss is the same selection: the runs that met
#: the target are the ones whose spread looked small, and the report's interval is built
#: from them. So once the target is met, `UNTIL_CONFIRM_RUNS` more repetitions run
#: without another look; the report's interval then rests mostly on runs that played no
#: part in the decision, and covers 0.945-0.949 at a run-to-run spread of 2-20% (40 000
#: simulated experiments each; benchmarks/stats_coverage.py, tests/test_until.py); the
#: same interval at a fixed 13 runs covers 0.948: the interval's own coverage.
UNTIL_SPREAD_BOUND = 0.95
UNTIL_CONFIRM_RUNS = 5


def until_met(reps: dict[int, tuple[float, float]], pct: float) -> bool:
    """Whether `until` can stop: the target was met (`until_first_met`) and
    `UNTIL_CONFIRM_RUNS` more complete runs have been made since."""
    runs = [reps[r] for r in sorted(reps)]
    first = until_first_met(runs, pct)
    return first is not None and len(runs) >= first + UNTIL_CONFIRM_RUNS


def until_first_met(runs: list[tuple[float, float]], pct: float) -> int | None:
    """The fewest of `runs` (in repetition order, at least 3) whose pessimistic half-width
    (`ci_halfwidth_pct`) is within `pct` with and without the last of them; None if none.
    Prefixes only, so every later round finds the same point."""
    for n in range(3, len(runs) + 1):
        widths = (ci_halfwidth_pct(runs[:n]), ci_halfwidth_pct(runs[: n - 1]))
        if all(w is not None and w <= pct for w in widths):
            return n
    return None


def ci_halfwidth_pct(runs: list[tuple[float, float]], confidence: float = 0.95) -> float | None:
    """Half-width, in % of the estimate, of the interval the report prints for these runs'
    throughput (total ops / total time, jackknife over runs, t on log), with the run-to-run
    spread at its upper `UNTIL_SPREAD_BOUND` confidence bound. None below 2 runs."""
    if len(runs) < 2:
        return None
    from scipy import stats  # only specs with `until` need it

    from harness.analysis.intervals import ratio_interval

    ops = np.array([o for o, _ in runs])
    rates = np.array([r for _, r in runs])
    est = ratio_interval(ops, ops / rates, confidence=confidence)
    n = len(runs)
    inflate = np.sqrt((n - 1) / stats.chi2.ppf(1 - UNTIL_SPREAD_BOUND, n - 1))
    half = stats.t.ppf((1 + confidence) / 2, n - 1) * est.se_log * inflate
    return float(100 * np.expm1(half))


#: How long a workload's `prepare` (and `baseline`) may wait on the servers before the
#: run fails; a line names the servers every `PREPARE_NOTE_S` meanwhile.
PREPARE_TIMEOUT_S = 300.0
PREPARE_NOTE_S = 10.0


@dataclass
class _Context:
    """What every run of one `harness run` shares: hosts, their facts, client dirs."""

    hosts: dict[str, Host]
    infos: dict[str, Any]
    client_hosts: list[Host]
    workdirs: dict[str, str]
    kit: dict[str, Any]
    #: The experiment's lock and state file: what this process started, for a kill.
    lock: ExperimentLock
    #: Local directory for copies being collected (listed in the state file).
    scratch: str
    #: The running server sets, by configuration (`harness.serverpool`).
    pool: ServerPool
    #: Client machines holding records not yet copied: their work directories stay.
    keep_workdirs: set[str] = field(default_factory=set)
    #: One agent per client machine, for every run (`harness.agentctl`).
    agents: AgentPool = field(default_factory=AgentPool)


def run_id_for(plan: RunPlan) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{plan.config_id[:60]}-r{plan.repetition:03d}-{secrets.token_hex(3)}"


class Runner:
    def __init__(self, spec: Spec, out_dir: Path, *, resume: bool = False,
                 progress: bool = True, stream: IO[str] | None = None, live: bool = False,
                 on_run_start: Callable[[RunPlan, dict[str, RunningService]], None]
                 | None = None, interrupts: Interrupts | None = None) -> None:
        """`on_run_start` is called as each run's clients are released: fault-injection
        tests use it to kill or pause servers mid-run. `interrupts`: the signal state of
        `harness run` (the CLI installs its handlers); without one, Ctrl-C is a plain
        KeyboardInterrupt."""
        self.on_run_start = on_run_start
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.resume = resume
        self.progress = progress
        #: A status line each second of a run (`harness.livestatus`); `harness run --quiet`.
        self.live = live
        self.stream = stream or sys.stderr
        self.workload = WORKLOADS.get(spec.workload)
        self.interrupts = interrupts or Interrupts()
        self._gave_up: set[str] = set()

    @property
    def exp_dir(self) -> Path:
        return self.out_dir / self.spec.name

    def plans(self) -> list[RunPlan]:
        """The runs still to make, in the spec's order (`spec.ordered`)."""
        plans = expand(self.spec)
        if self.resume:
            done = completed_runs(self.exp_dir)
            plans = [p for p in plans if (p.config_id, p.repetition) not in done]
        return ordered(self.spec, plans)

    def server_starts(self, plans: list[RunPlan]) -> int:
        """How many times servers start for `plans` (`--dry-run` says it)."""
        keys = [self._services_key(p) for p in plans]
        return count_starts(keys, capacity_for(keys), self.spec.servers == "fresh")

    def say(self, msg: str) -> None:
        tqdm.write(msg, file=self.stream)

    @contextlib.contextmanager
    def _hosts(self) -> Iterator[dict[str, Host]]:
        used = {s.host for s in self.spec.services.values()} | set(self.spec.clients.hosts)
        used |= {h for s in self.spec.services.values()  # services spread over hosts
                 for h in SERVICES.get(s.kind).extra_hosts(s.settings)}
        hosts: dict[str, Host] = {}
        problems = []
        try:
            for name in sorted(used):
                try:
                    hosts[name] = connect_host(self.spec.hosts[name])
                except HostError as exc:
                    problems.append(f"{self.spec.path}:hosts.{name}: cannot connect: {exc}")
            for sname, svc in self.spec.services.items():
                if svc.host in hosts:
                    missing = SERVICES.get(svc.kind).missing_binaries(hosts[svc.host],
                                                                      svc.settings)
                    if missing:
                        problems.append(
                            f"{self.spec.path}:services.{sname}: {', '.join(missing)} not "
                            f"found on host {svc.host!r}; install it there (Debian: see "
                            "README 'Servers') or use environment.yml")
            # The kit on every client machine, a Python on the others (free ports, probes),
            # no server on a loopback address that clients elsewhere would miss: clear
            # before any server starts.
            for name in hosts:
                found = (kit_problems(hosts[name]) if name in self.spec.clients.hosts
                         else python_problems(hosts[name]))
                problems += [f"{self.spec.path}:hosts.{name}: {p}" for p in found]
            problems += [f"{self.spec.path}:{p}" for p in loopback_problems(self.spec)]
            if problems:
                raise SpecError(problems)
            yield hosts
        finally:
            for h in hosts.values():
                h.close()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[ExperimentLock]:
        """The experiment's lock, after what a killed run left is cleared away
        (`harness.recovery`); the state file is removed at the end when everything it
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
                self.say(f"{self.spec.name}: {_left_over(lock)} left, listed in "
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
            if self.resume:  # records a transfer left on client machines first
                collect_pending(self.spec, self.out_dir, self.say)
            plans = self.plans()
            if not plans and self.spec.until is None:
                self.say(f"{self.spec.name}: every run is complete already; nothing to do")
                return outcomes
            scratch = tempfile.mkdtemp(prefix="harness-collect-")
            lock.add_scratch(scratch)
            stack.callback(self._remove_scratch, lock, scratch)
            pool = ServerPool(lambda running: self._stop_services(running, ctx),
                              capacity_for([self._services_key(p) for p in plans]),
                              fresh=self.spec.servers == "fresh")
            ctx = _Context(hosts, {name: host_info(h) for name, h in hosts.items()},
                           [hosts[n] for n in self.spec.clients.hosts], {}, kit_info(),
                           lock, scratch, pool)
            stack.callback(ctx.agents.close)  # after the work directories are removed
            self._start_agents(ctx)
            for h in ctx.client_hosts:
                if h.name not in ctx.workdirs:
                    ctx.workdirs[h.name] = h.mkdtemp(prefix="harness-clients-")
                    lock.add_workdir(h.name, ctx.workdirs[h.name])
                    stack.callback(self._remove_workdir, ctx, h)
            stack.callback(pool.close)  # first of all: servers stop before the rest
            # On a terminal only: into a pipe or a log the per-run lines say it all.
            on_tty = getattr(self.stream, "isatty", lambda: False)()
            bar = stack.enter_context(tqdm(total=len(plans), unit="run", file=self.stream,
                                           disable=not (self.progress and on_tty),
                                           dynamic_ncols=True,
                                           desc=self.spec.name))
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
        return outcomes

    @staticmethod
    def _start_agents(ctx: _Context) -> None:
        """Start every client machine's agent at once, before the first run: each
        imports the kit once (seconds on a busy machine), and no run should pay that."""
        sent = []
        for h in ctx.client_hosts:
            with contextlib.suppress(HostError):  # the first run says what is wrong
                sent.append(ctx.agents.get(h).send("hello"))
        for p in sent:
            with contextlib.suppress(HostError):
                p.result()

    @staticmethod
    def _remove_workdir(ctx: _Context, host: Host) -> None:
        """Remove a client machine's work directory unless records not yet copied are in
        it (`harness collect` fetches them from there) or records of a run not written
        (the next `harness run` or `harness cleanup` writes them)."""
        if host.name in ctx.lock.run_hosts():
            return
        ctx.lock.remove_workdir(host.name)
        if host.name in ctx.keep_workdirs:
            return
        with contextlib.suppress(HostError):  # unreachable now: nothing to remove it with
            host.remove_tree(ctx.workdirs[host.name])

    @staticmethod
    def _remove_scratch(lock: ExperimentLock, scratch: str) -> None:
        shutil.rmtree(scratch, ignore_errors=True)
        lock.remove_scratch(scratch)

    def _execute(self, plans: list[RunPlan], ctx: _Context, bar: tqdm,
                 outcomes: list[RunOutcome]) -> bool:
        """Run `plans` in their order, each on the server set its configuration needs
        (`harness.serverpool`); True if the grid stopped early (on_failure: stop)."""
        for plan in plans:
            sset = ctx.pool.acquire(self._services_key(plan),
                                    lambda plan=plan: self._start_services(plan, ctx))
            running = sset.running
            endpoints = {s.endpoint.kind: s.endpoint for s in running.values()}
            sset.runs += 1
            sinfo = {n: {**s.info(), "instance": {
                "number": sset.instance, "started_utc": sset.started_utc,
                "run_on_instance": sset.runs}} for n, s in running.items()}
            bar.set_postfix_str(plan.label())
            outcome = self._run_one(plan, ctx, endpoints, sinfo, running)
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

    def _services_key(self, plan: RunPlan) -> str:
        # A timeline changes the servers: every run gets its own, fresh ones.
        return plan.services_key() + (f"#{plan.index}" if self.spec.timeline else "")

    def _more_repetitions(self, next_index: int) -> list[RunPlan]:
        """One more repetition of every configuration whose 95% CI of throughput (over
        its complete runs in the output directory) is wider than `until.ci_within_pct`
        of its mean, or met it fewer than `UNTIL_CONFIRM_RUNS` runs ago, up to
        `until.max_repetitions`. Says which converged and which not."""
        until = self.spec.until
        assert until is not None
        by_config = completed_throughputs(self.exp_dir)
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

    def _start_services(self, plan: RunPlan, ctx: _Context) -> dict[str, RunningService]:
        """Start `plan`'s servers in spec order; if one fails, those started are stopped."""
        hosts = ctx.hosts
        running: dict[str, RunningService] = {}
        try:
            for name, svc in plan.services.items():
                launcher = SERVICES.get(svc.kind)
                kwargs: dict[str, Any] = {}
                if launcher.needs_peers:  # in spec order: the services started so far
                    kwargs["peers"] = {r.endpoint.kind: r.endpoint for r in running.values()}
                if launcher.needs_hosts:
                    kwargs["hosts"] = hosts
                if launcher.needs_access:  # admitted by exact address: us and the clients
                    kwargs["access"] = access_for(
                        hosts[svc.host], [hosts[h] for h in plan.clients.hosts])
                running[name] = launcher.start(hosts[svc.host], name, svc.settings, **kwargs)
                self._track_servers(ctx, {name: running[name]})
        except BaseException:
            self._stop_services(running, ctx)
            raise
        return running

    @staticmethod
    def _stop_services(running: dict[str, RunningService], ctx: _Context) -> None:
        for svc in reversed(list(running.values())):
            svc.stop()
            for p in svc.processes:
                ctx.lock.remove_server(p.host, p.pid)

    @staticmethod
    def _track_servers(ctx: _Context, running: dict[str, RunningService]) -> None:
        """List the server processes in the state file (with their start times, so a
        later clean-up never signals a reused pid); only those not listed yet."""
        known = {(s.host, s.pid) for s in ctx.lock.state.servers}
        new: list[ServerEntry] = []
        for name, svc in running.items():
            procs = [p for p in svc.processes if (p.host, p.pid) not in known]
            by_host: dict[str, list[int]] = {}
            for p in procs:
                by_host.setdefault(p.host, []).append(p.pid)
            for hname, pids in by_host.items():
                host = ctx.hosts.get(hname) or (svc.host if svc.host.name == hname else None)
                ticks: dict[int, int] = {}
                if host is not None:
                    with contextlib.suppress(HostError):
                        ticks = host.start_ticks(pids)
                new += [ServerEntry(name, svc.kind, hname, pid, ticks.get(pid),
                                    svc.workdir if hname == svc.host.name else None)
                        for pid in pids]
        if new:
            ctx.lock.add_servers(new)

    def _draft(self, plan: RunPlan, run_id: str, started: str, ctx: _Context,
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
                      "pause_us": plan.clients.pause_us}),
            # The spec itself (overrides applied) travels with every run: the file may be
            # edited or gone when the report is made.
            kit=ctx.kit, spec_file=str(self.spec.path.resolve()),
            extra={"spec": recorded_spec(self.spec.raw),
                   "order": {"mode": self.spec.order, "servers": self.spec.servers,
                             **({"seed": self.spec.order_seed}
                                if self.spec.order == "random" else {})}})

    def _prepare(self, plan: RunPlan, endpoints: dict[str, Endpoint]) -> Any:
        """The workload's `prepare` and `baseline`, each bounded by `PREPARE_TIMEOUT_S`,
        with a line every `PREPARE_NOTE_S` naming the servers it waits on."""
        servers = ", ".join(f"{k} at {e.host}:{e.port}" for k, e in endpoints.items())

        async def bounded(what: str, coro: Any) -> Any:
            task = asyncio.ensure_future(coro)
            began = time.monotonic()
            while True:
                left = PREPARE_TIMEOUT_S - (time.monotonic() - began)
                done, _ = await asyncio.wait({task}, timeout=min(PREPARE_NOTE_S, left))
                if done:
                    return task.result()
                waited = time.monotonic() - began
                if waited >= PREPARE_TIMEOUT_S:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
                    raise ServiceError(
                        f"{what} did not finish within {PREPARE_TIMEOUT_S:.0f} s waiting on "
                        f"{servers}; is a server stalled or overloaded? No clients started")
                self.say(f"  {plan.label()}: {what} still waiting on {servers} "
                         f"after {waited:.0f} s")

        async def both() -> Any:
            await bounded("prepare", self.workload.prepare(endpoints, plan.params))
            return await bounded("baseline", self.workload.baseline(endpoints, plan.params))

        return asyncio.run(both())

    def _run_one(self, plan: RunPlan, ctx: _Context, endpoints: dict[str, Endpoint],
                 sinfo: dict[str, Any], running: dict[str, RunningService]) -> RunOutcome:
        started = utcnow()
        run_id = run_id_for(plan)
        draft = self._draft(plan, run_id, started, ctx, sinfo)
        ops: OpsArrays | OpsParts = OpsArrays.empty(self.workload.ops)
        errors: list[str] = []
        workers: list[dict[str, Any]] = []
        interrupted = False
        group = ClientGroup(plan, ctx.client_hosts, ctx.workdirs, endpoints,
                            self.workload.ops, spec_path=str(self.spec.path),
                            agents=ctx.agents, live=self.live, scratch=ctx.scratch)
        telemetry = RunTelemetry(ctx.hosts, running, group, ctx.agents)
        live: LiveStatus | None = None
        baseline: Any = None
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
                baseline = self._prepare(plan, endpoints)
                telemetry.before_clients()  # the servers' counters: prepare's excluded
                try:
                    group.start()
                finally:  # every process that started is listed, with its record files
                    self._track_run(ctx, run_id, plan, draft, group)
                group.wait_ready()
                telemetry.start()  # every machine's /proc, as close to the start as can be
                start_ns = group.go()
                live = LiveStatus(group, self.say).start() if self.live else None
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

    def _finish(self, plan: RunPlan, ctx: _Context, group: ClientGroup, draft: Manifest,
                running: dict[str, RunningService], gone: list[str], errors: list[str],
                interrupted: bool, live: LiveStatus | None, timeline: Timeline | None,
                baseline: Any, ops: OpsArrays | OpsParts, workers: list[dict[str, Any]],
                telemetry: RunTelemetry) -> RunOutcome:
        """Collect the records, write the run, then remove the clients' copies."""
        telemetry.end()  # first: the clients have exited, nothing else has run since
        if live is not None:
            live.stop()
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

    def _write(self, plan: RunPlan, ctx: _Context, group: ClientGroup, draft: Manifest,
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
            ctx.keep_workdirs.update(p.host for p in got.pending)
        # Counted, timed and its percentiles taken once, in passes over the parts.
        summed = tally(ops)
        dead = [n for n, s in running.items() if n not in gone and not s.alive()]
        if dead:
            errors.append(f"server(s) not running at the end of the run: {', '.join(dead)}")
        manifest = finish_manifest(
            draft, plan, summed, workers=workers, errors=errors, notes=group.notes,
            interrupted=interrupted, ended_utc=utcnow(),
            engine=engine_of_workers(workers), clock_offsets=group.clock_offsets,
            extra={**({"baseline": baseline} if baseline else {}),
                   # Records still on client machines (`harness collect` fetches them).
                   **({"pending_records": pending} if pending else {}),
                   **({"timeline": timeline.records} if timeline is not None else {})},
            telemetry=telemetry.result(workers, summed))
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
        n, rate, p50, p99, err = quick_stats(summed)
        return RunOutcome(plan, run_dir, manifest.status, n, rate, p50, p99, err,
                          manifest.error, unsent=manifest.typed_counts.unsent,
                          send_lag_p99_ms=manifest.loadgen.get("send_lag_p99_ms"))

    @staticmethod
    def _track_run(ctx: _Context, run_id: str, plan: RunPlan, draft: Manifest,
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

    def _left_line(self, ctx: _Context, run_id: str, plan: RunPlan) -> str:
        where = "; ".join(f"{h} ({ctx.workdirs.get(h, '?')})"
                          for h in sorted(ctx.lock.run_hosts()))
        return (f"stopped at once: run {run_id} ({plan.label()}) was not written; its "
                f"records stay on {where or 'no machine (none were made)'}, and the next "
                f"`harness run {self.spec.path} --resume` (or `harness cleanup "
                f"{self.spec.path}`) writes them")

    def _write_failure(self, ctx: _Context, plan: RunPlan, manifest: Manifest, records: int,
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


def _left_over(lock: ExperimentLock) -> str:
    st = lock.state
    parts = []
    if st.runs:
        parts.append(f"{len(st.runs)} unwritten run(s)")
    if st.servers:
        parts.append(f"{len(st.servers)} server process(es)")
    if st.workdirs:
        parts.append(f"{len(st.workdirs)} client work director(ies)")
    return ", ".join(parts) or "nothing"
