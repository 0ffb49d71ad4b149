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
import sys
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
from harness.inventory import host_info, kit_info
from harness.livestatus import LiveStatus
from harness.loadgen.native import engine_of_workers
from harness.preflight import kit_problems, loopback_problems, python_problems
from harness.recollect import collect_pending
from harness.results import MANIFEST, Loadgen, OpsArrays, new_manifest, write_run
from harness.runstatus import quick_stats, run_status, target_met
from harness.services import SERVICES
from harness.services.access import access_for
from harness.services.base import Endpoint, RunningService
from harness.spec import RunPlan, Spec, expand
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


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def completed_runs(exp_dir: Path) -> set[tuple[str, int]]:
    """(config_id, repetition) of the complete runs already in `exp_dir`."""
    done: set[tuple[str, int]] = set()
    if not exp_dir.is_dir():
        return done
    for man in exp_dir.glob(f"*/{MANIFEST}"):
        try:
            data = json.loads(man.read_text())
        except (OSError, ValueError):
            continue
        if data.get("status") == "complete":
            done.add((data.get("config_id"), data.get("repetition")))
    return done


def _write_failure(exp_dir: Path, plan: RunPlan, run_id: str, records: int,
                   exc: OSError) -> ResultsError:
    """The one-line error that stops the grid when a run cannot be written (the run's
    temporary directory is gone already: `write_run` removes it)."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc) or (
        "[errno 28]" in str(exc).lower())
    what = ("no space left on the device" if full else
            f"cannot write there ({exc.strerror or exc})")
    return ResultsError(
        f"{exp_dir}: {what} while writing run {run_id} ({plan.label()}): its {records:,} "
        "records are lost; the runs written before it are intact. "
        + ("Free some space there" if full else "Fix that")
        + " and continue with `harness run SPEC --resume`.")


def completed_throughputs(exp_dir: Path) -> dict[str, dict[int, tuple[float, float]]]:
    """config_id -> {repetition: (measured ops, achieved throughput)} of the complete
    runs in `exp_dir`."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    if not exp_dir.is_dir():
        return out
    for man in exp_dir.glob(f"*/{MANIFEST}"):
        try:
            data = json.loads(man.read_text())
        except (OSError, ValueError):
            continue
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


@dataclass
class _Context:
    """What every run of one `harness run` shares: hosts, their facts, client dirs."""

    hosts: dict[str, Host]
    infos: dict[str, Any]
    client_hosts: list[Host]
    workdirs: dict[str, str]
    kit: dict[str, Any]
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
                 | None = None) -> None:
        """`on_run_start` is called as each run's clients are released: fault-injection
        tests use it to kill or pause servers mid-run."""
        self.on_run_start = on_run_start
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.resume = resume
        self.progress = progress
        #: A status line each second of a run (`harness.livestatus`); `harness run --quiet`.
        self.live = live
        self.stream = stream or sys.stderr
        self.workload = WORKLOADS.get(spec.workload)
        self._gave_up: set[str] = set()

    def plans(self) -> list[RunPlan]:
        plans = expand(self.spec)
        if self.resume:
            done = completed_runs(self.out_dir / self.spec.name)
            plans = [p for p in plans if (p.config_id, p.repetition) not in done]
        return plans

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
                    missing = SERVICES.get(svc.kind).missing_binaries(hosts[svc.host])
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

    def run(self) -> list[RunOutcome]:
        if self.resume:  # records a transfer left on client machines first
            collect_pending(self.spec, self.out_dir, self.say)
        plans = self.plans()
        outcomes: list[RunOutcome] = []
        if not plans and self.spec.until is None:
            self.say(f"{self.spec.name}: every run is complete already; nothing to do")
            return outcomes
        with self._hosts() as hosts, contextlib.ExitStack() as stack:
            ctx = _Context(hosts, {name: host_info(h) for name, h in hosts.items()},
                           [hosts[n] for n in self.spec.clients.hosts], {}, kit_info())
            stack.callback(ctx.agents.close)  # after the work directories are removed
            self._start_agents(ctx)
            for h in ctx.client_hosts:
                if h.name not in ctx.workdirs:
                    ctx.workdirs[h.name] = h.mkdtemp(prefix="harness-clients-")
                    stack.callback(self._remove_workdir, ctx, h)
            bar = stack.enter_context(tqdm(total=len(plans), unit="run", file=self.stream,
                                           disable=not self.progress, dynamic_ncols=True,
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
        it (`harness collect` fetches them from there)."""
        if host.name in ctx.keep_workdirs:
            return
        with contextlib.suppress(HostError):  # unreachable now: nothing to remove it with
            host.remove_tree(ctx.workdirs[host.name])

    def _execute(self, plans: list[RunPlan], ctx: _Context, bar: tqdm,
                 outcomes: list[RunOutcome]) -> bool:
        """Run `plans`, servers shared per service configuration; True if the grid
        stopped early (on_failure: stop)."""
        groups: dict[str, list[RunPlan]] = {}
        for p in plans:
            # A timeline changes the servers: every run gets its own, fresh ones.
            key = p.services_key() + (f"#{p.index}" if self.spec.timeline else "")
            groups.setdefault(key, []).append(p)
        for group in groups.values():
            with self._services(group[0], ctx.hosts) as running:
                endpoints = {s.endpoint.kind: s.endpoint for s in running.values()}
                sinfo = {n: s.info() for n, s in running.items()}
                for plan in group:
                    bar.set_postfix_str(plan.label())
                    outcome = self._run_one(plan, ctx.client_hosts, ctx.workdirs, endpoints,
                                            ctx.infos, sinfo, ctx.kit, running,
                                            keep_workdirs=ctx.keep_workdirs,
                                            agents=ctx.agents)
                    outcomes.append(outcome)
                    bar.update(1)
                    self.say(self._line(outcome, len(outcomes), int(bar.total)))
                    if outcome.status == "failed" and self.spec.on_failure == "stop":
                        left = int(bar.total) - len(outcomes)
                        self.say(f"on_failure: stop -- run {len(outcomes)} "
                                 f"({plan.label()}) failed; the remaining {left} run(s) "
                                 "are skipped (`harness run --resume` continues them)")
                        return True
        return False

    def _more_repetitions(self, next_index: int) -> list[RunPlan]:
        """One more repetition of every configuration whose 95% CI of throughput (over
        its complete runs in the output directory) is wider than `until.ci_within_pct`
        of its mean, or met it fewer than `UNTIL_CONFIRM_RUNS` runs ago, up to
        `until.max_repetitions`. Says which converged and which not."""
        until = self.spec.until
        assert until is not None
        by_config = completed_throughputs(self.out_dir / self.spec.name)
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

    @contextlib.contextmanager
    def _services(
        self, plan: RunPlan, hosts: dict[str, Host]
    ) -> Iterator[dict[str, RunningService]]:
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
            yield running
        finally:
            for svc in reversed(list(running.values())):
                svc.stop()

    def _run_one(self, plan: RunPlan, client_hosts: list[Host], workdirs: dict[str, str],
                 endpoints: dict[str, Endpoint], infos: dict[str, Any],
                 sinfo: dict[str, Any], kit: dict[str, Any],
                 running: dict[str, RunningService],
                 keep_workdirs: set[str] | None = None,
                 agents: AgentPool | None = None) -> RunOutcome:
        started = utcnow()
        ops = OpsArrays.empty(self.workload.ops)
        errors: list[str] = []
        workers: list[dict[str, Any]] = []
        interrupted = False
        group = ClientGroup(plan, client_hosts, workdirs, endpoints, self.workload.ops,
                            spec_path=str(self.spec.path), agents=agents, live=self.live)
        live: LiveStatus | None = None
        baseline: Any = None
        timeline: Timeline | None = None
        gone: list[str] = []
        try:
            # A server that died in an earlier run of this group stays dead: fail fast.
            gone = [n for n, s in running.items() if not s.alive()]
            if gone:
                raise ServiceError(f"server(s) not running before the run: {', '.join(gone)} "
                                   "(stopped during an earlier run); no clients started")
            asyncio.run(self.workload.prepare(endpoints, plan.params))
            baseline = asyncio.run(self.workload.baseline(endpoints, plan.params))
            group.start()
            group.wait_ready()
            start_ns = group.go()
            live = LiveStatus(group, self.say).start() if self.live else None
            if self.spec.timeline:
                timeline = Timeline(self.spec.timeline, running, start_ns).start()
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
        if live is not None:
            live.stop()
        if timeline is not None:
            timeline.finish()
            errors += timeline.errors
        pending: list[dict[str, Any]] = []
        got: Collected | None = None
        try:
            got = group.collect()
            ops, workers = got.ops, got.workers
            errors += got.errors
            pending = [asdict(p) for p in got.pending]
            if keep_workdirs is not None:
                keep_workdirs.update(p.host for p in got.pending)
        except (HarnessError, OSError) as exc:
            errors.append(f"collecting records: {exc}")
        dead = [n for n, s in running.items() if n not in gone and not s.alive()]
        if dead:
            errors.append(f"server(s) not running at the end of the run: {', '.join(dead)}")
        n, rate, p50, p99, err = quick_stats(ops)
        status = run_status(plan, n, err, errors, workers, interrupted)
        if interrupted:
            errors.insert(0, "interrupted (Ctrl-C / SIGTERM)")
        manifest = new_manifest(
            run_id=run_id_for(plan), experiment=plan.experiment, workload=plan.workload,
            config_id=plan.config_id, repetition=plan.repetition, params=dict(plan.params),
            grid_point=dict(plan.grid_point), status=status, started_utc=started,
            # Notes (a reconnected SSH link) say what happened without making it partial.
            ended_utc=utcnow(), error="\n".join(errors + group.notes) or None, hosts=infos,
            services=sinfo,
            loadgen=Loadgen(
                processes=plan.clients.processes, connections=plan.clients.connections,
                inflight=plan.clients.inflight,
                mode="open" if plan.size.open_loop else "closed",
                target_rate_ops_s=plan.size.rate_ops_s, ops=plan.size.ops,
                duration_s=plan.size.duration_s, warmup_ops=plan.size.warmup_ops,
                warmup_s=plan.size.warmup_s, timeout_s=plan.size.timeout_s,
                engine=engine_of_workers(workers),
                more={"arrival": plan.size.arrival if plan.size.open_loop else None,
                      "achieved_rate_ops_s": rate if n else None,
                      "target_met": target_met(plan, rate) if plan.size.open_loop else None,
                      "client_hosts": list(plan.clients.hosts), "workers": workers,
                      "clock_offsets": group.clock_offsets}),
            kit=kit, spec_file=str(self.spec.path),
            extra={**({"baseline": baseline} if baseline else {}),
                   # Records still on client machines (`harness collect` fetches them).
                   **({"pending_records": pending} if pending else {}),
                   **({"timeline": timeline.records} if timeline is not None else {})},
        )
        try:
            run_dir = write_run(self.out_dir, manifest, ops)
        except OSError as exc:
            raise _write_failure(self.out_dir / plan.experiment, plan, manifest.run_id,
                                 len(ops), exc) from None
        if got is not None:  # written and fsynced: the copies on the clients can go
            group.discard(got)
        if interrupted:
            raise KeyboardInterrupt
        return RunOutcome(plan, run_dir, status, n, rate, p50, p99, err,
                          manifest.error)

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
        if o.status != "complete" and o.error:
            line += f" -- {o.error.splitlines()[0]}"
        return line

