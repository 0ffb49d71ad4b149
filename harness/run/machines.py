"""What a run needs around it: the spec's machines connected (and let go), one agent per
client machine, work directories, the server sets started, tracked and stopped, and the
workload's data prepared; `Runner` (`harness.run.runner`) takes these methods from
`RunMachines`."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness.errors import HostError, ServiceError, SpecError
from harness.hosts import Host, LocalHost, connect_host
from harness.hosts.owned import prune_owned_dir
from harness.run.clients import slow_starts
from harness.run.context import (
    PREPARE_NOTE_S,
    PREPARE_TIMEOUT_S,
    RunContext,
)
from harness.run.inflight import ExperimentLock, ServerEntry
from harness.run.preflight import kit_problems, loopback_problems, python_problems
from harness.run.serverpool import ServerSet, capacity_for
from harness.services import SERVICES
from harness.services.access import access_for
from harness.services.attached import AttachedService, credentials
from harness.services.base import Endpoint, RunningService
from harness.spec import RunPlan


@dataclass(frozen=True)
class Prepared:
    """What a run's preparation gave: the workload's baseline, and whether its prepare
    ran or an earlier run's data was kept (the manifest's ``extra.prepare``)."""

    baseline: Any
    info: dict[str, Any]


class RunMachines:
    """The `Runner`'s methods for machines and servers (a mixin: they use its `spec`,
    `say`, ...)."""

    @contextlib.contextmanager
    def _hosts(self) -> Iterator[dict[str, Host]]:
        used = {s.host for s in self.spec.services.values() if s.observed or s.address is None}
        used |= set(self.spec.clients.hosts)
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
                if svc.address is not None:
                    continue  # nothing of it is started: it is asked below
                if svc.host in hosts:
                    missing = SERVICES.get(svc.kind).missing_binaries(hosts[svc.host],
                                                                      svc.settings)
                    if missing:
                        problems.append(
                            f"{self.spec.path}:services.{sname}: {', '.join(missing)} not "
                            f"found on host {svc.host!r}; install it there (Debian: see "
                            "docs/servers.md) or use environment.yml")
            # The kit on every client machine, a Python on the others (free ports, probes),
            # no server on a loopback address that clients elsewhere would miss: clear
            # before any server starts.
            for name in hosts:
                found = (kit_problems(hosts[name]) if name in self.spec.clients.hosts
                         else python_problems(hosts[name]))
                problems += [f"{self.spec.path}:hosts.{name}: {p}" for p in found]
            problems += [f"{self.spec.path}:{p}" for p in loopback_problems(self.spec)]
            problems += self._attach_problems(hosts)
            if problems:
                raise SpecError(problems)
            yield hosts
        finally:
            for h in hosts.values():
                h.close()

    def _attach_problems(self, hosts: dict[str, Host]) -> list[str]:
        """Every server at an address, asked before the grid (its password read, its
        protocol spoken, who it is): one line each for those that do not answer."""
        self._credentials: dict[str, Any] = {}
        out = []
        for sname, svc in self.spec.services.items():
            if svc.address is None:
                continue
            try:
                self._credentials[sname] = credentials(sname, svc.auth)
                SERVICES.get(svc.kind).attach(hosts.get(svc.host) or LocalHost(), svc,
                                              self._credentials[sname])
            except ServiceError as exc:
                out.append(f"{self.spec.path}:{exc}")
        return out

    @staticmethod
    def _start_agents(ctx: RunContext) -> None:
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
    def _remove_workdir(ctx: RunContext, host: Host) -> None:
        """Remove a client machine's work directory unless records not yet copied are in
        it (`harness collect` fetches them from there) or records of a run not written
        (the next `harness run` or `harness cleanup` writes them)."""
        if host.name in ctx.lock.run_hosts():
            return
        ctx.lock.remove_workdir(host.name)
        with contextlib.suppress(HostError):  # unreachable now: nothing to remove it with
            if host.name in ctx.keep_workdirs:
                # Only what `harness collect` needs stays: the other runs' files go,
                # their configurations (which name the servers' passwords) among them.
                prune_owned_dir(host, ctx.lock.state.owner, ctx.workdirs[host.name],
                                sorted(ctx.keep_workdirs[host.name]))
                return
            host.remove_tree(ctx.workdirs[host.name])

    @staticmethod
    def _remove_scratch(lock: ExperimentLock, scratch: str) -> None:
        shutil.rmtree(scratch, ignore_errors=True)
        lock.remove_scratch(scratch)

    #: Whether server sets are split by kept data too (`_set_keys` decides per grid).
    _split_data: bool = True

    def _services_key(self, plan: RunPlan, split_data: bool | None = None) -> str:
        # A timeline changes the servers: every run gets its own, fresh ones. Runs that
        # keep different data (`Workload.kept_data`: a grid over value sizes) get a set
        # each where the pool can keep them all (`_set_keys`), so neither reloads the
        # other's before every run.
        split = self._split_data if split_data is None else split_data
        data = (self.workload.kept_data(plan.params)
                if split and not self.spec.timeline else None)
        return (plan.services_key() + (f"#{plan.index}" if self.spec.timeline else "")
                + (f"#data={data}" if data is not None else ""))

    def _set_keys(self, plans: list[RunPlan]) -> list[str]:
        """Each plan's server-set key: a set per kept data too where the pool keeps every
        set side by side, else only per server configuration (more sets than the pool
        keeps would restart servers before every run, dearer than a preload)."""
        split = [self._services_key(p, split_data=True) for p in plans]
        self._split_data = capacity_for(split) > 1 or len(set(split)) <= 1
        return split if self._split_data else [self._services_key(p) for p in plans]

    def _start_services(self, plan: RunPlan, ctx: RunContext) -> dict[str, RunningService]:
        """Start `plan`'s servers in spec order; if one fails, those started are stopped."""
        hosts = ctx.hosts
        running: dict[str, RunningService] = {}
        try:
            for name, svc in plan.services.items():
                launcher = SERVICES.get(svc.kind)
                if svc.address is not None:  # not the kit's: asked, never started
                    running[name] = launcher.attach(hosts.get(svc.host) or LocalHost(), svc,
                                                    self._credentials.get(name))
                    continue
                kwargs: dict[str, Any] = {}
                if launcher.needs_peers:  # in spec order: the services started so far
                    kwargs["peers"] = {r.endpoint.kind: r.endpoint for r in running.values()}
                if svc.after:  # a proxy: the services it is in front of, started before it
                    kwargs["behind"] = {n: running[n] for n in svc.after}
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
    def _stop_services(running: dict[str, RunningService], ctx: RunContext) -> None:
        for svc in reversed(list(running.values())):
            svc.stop()
            for p in svc.processes:
                ctx.lock.remove_server(p.host, p.pid)

    @staticmethod
    def _track_servers(ctx: RunContext, running: dict[str, RunningService]) -> None:
        """List the server processes in the state file (with their start times, so a
        later clean-up never signals a reused pid); only those not listed yet."""
        known = {(s.host, s.pid) for s in ctx.lock.state.servers}
        new: list[ServerEntry] = []
        for name, svc in running.items():
            if isinstance(svc, AttachedService):
                continue  # its process is not the kit's: never stopped, never listed
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

    def _keeps_data(self, plan: RunPlan, sset: ServerSet | None) -> str | None:
        """What the workload's prepare leaves that this run would find on `sset` as an
        earlier run left it (`Workload.kept_data`), or None where it must prepare: a
        fresh or timeline server set, a server at an address (anyone may change it)."""
        if (sset is None or self.spec.servers == "fresh" or self.spec.timeline
                or slow_starts()):
            return None
        if any(svc.address is not None for svc in plan.services.values()):
            return None
        return self.workload.kept_data(plan.params)

    def _prepare(self, plan: RunPlan, endpoints: dict[str, Endpoint],
                 sset: ServerSet | None = None, run_id: str = "") -> Prepared:
        """The workload's `prepare` and `baseline`, each bounded by `PREPARE_TIMEOUT_S`,
        with a line every `PREPARE_NOTE_S` naming the servers it waits on. The prepare
        is skipped where the server set holds what an earlier run's prepare left
        (`_keeps_data`) and the workload finds it intact (`Workload.data_intact`)."""
        data = self._keeps_data(plan, sset)
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

        async def both() -> Prepared:
            kept = (data is not None and sset is not None and sset.data == data
                    and await bounded("check of the data", self.workload.data_intact(
                        endpoints, plan.params)))
            if kept:
                assert sset is not None
                info = {"ran": False, "kept_from_run": sset.data_run, "data": data}
            else:
                if sset is not None:  # whatever it held is gone or changing now
                    sset.data, sset.data_run = None, ""
                began = time.monotonic()
                await bounded("prepare", self.workload.prepare(endpoints, plan.params))
                info = {"ran": True, "s": round(time.monotonic() - began, 3)}
                if sset is not None and data is not None:
                    sset.data, sset.data_run = data, run_id
            return Prepared(await bounded("baseline", self.workload.baseline(
                endpoints, plan.params)), info)

        return asyncio.run(both())
