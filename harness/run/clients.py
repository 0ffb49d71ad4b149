"""Start a run's client processes on their hosts, start them together, collect records.

Each process is ``python -m harness.worker CONFIG`` started through the Host interface,
so local and SSH clients are handled the same way. Processes connect, create a `ready`
file, and begin at the common start time the runner writes into their `go` files.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import HarnessError, HostError
from harness.hosts import Host, LocalHost, Process
from harness.loadgen import ClientConfig
from harness.results import OpsParts
from harness.run.agentctl import REQUEST_TIMEOUT_S, AgentPool, Pending
from harness.run.transfer import PendingRecords, fetch_records
from harness.services.base import Endpoint
from harness.spec import ClientSpec, RunPlan

T = TypeVar("T")

READY_TIMEOUT_S = 120.0
#: Time from `go` to the common start, for every machine to write its go files: this
#: floor, or `GO_MARGIN_RTTS` of the slowest link's round trip if that is longer (a
#: fixed 0.1 s was a quarter of a short run's cost on one machine), plus a little per
#: machine for the requests sent one after another.
GO_MARGIN_S = 0.01
GO_MARGIN_RTTS = 5
GO_MARGIN_PER_HOST_S = 0.002
#: Set (to 1) to start runs as the kit did before issue 41: a fresh interpreter per local
#: worker, no client built ahead, a prepare before every run, 0.1 s to the common start;
#: for side-by-side comparisons (benchmarks/turnaround.py, tests), never needed otherwise.
SLOW_STARTS_ENV = "KVBENCH_SLOW_STARTS"


def slow_starts() -> bool:
    return os.environ.get(SLOW_STARTS_ENV, "") not in ("", "0")
#: How long `wait` keeps trying to get a dropped SSH connection back (the client
#: processes run on without it) before it gives the run up.
RECONNECT_DEADLINE_S = 120.0


@dataclass
class Worker:
    host: Host
    process: Process
    files: dict[str, str]
    client_id: int


@dataclass
class Collected:
    """What came back from a run's client processes."""

    #: The records' verified local copies (`close` removes them once written).
    ops: OpsParts
    workers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False
    #: Records that could not be copied: still on their machines.
    pending: list[PendingRecords] = field(default_factory=list)
    #: host name -> files on it whose contents are copied and verified (or were never
    #: written): removed by `ClientGroup.discard` once the run is written.
    discardable: dict[str, list[str]] = field(default_factory=dict)


#: Records per chunk the workers spill (`loadgen.spill`); tests set it small to spill
#: runs of a few thousand ops through every path a long run takes.
CHUNK_ENV = "KVBENCH_CHUNK_RECORDS"


def _chunk_records() -> int | None:
    value = os.environ.get(CHUNK_ENV)
    if not value:
        return None
    try:
        n = int(value)
    except ValueError:
        raise HarnessError(f"{CHUNK_ENV}={value!r}: not a whole number of records") from None
    if n < 64:
        raise HarnessError(f"{CHUNK_ENV}={n}: at least 64 records per chunk")
    return n


def client_host_names(clients: ClientSpec) -> list[str]:
    """The client hosts of a run: `clients.hosts`, then the probe's if another."""
    probe = clients.probe.host if clients.probe is not None else None
    return [*clients.hosts, *([probe] if probe and probe not in clients.hosts else [])]


def split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class ClientGroup:
    """The client processes of one run, driven through one agent per client machine
    (`harness.run.agentctl`): each step goes to every machine at once over the open links."""

    def __init__(self, plan: RunPlan, hosts: Sequence[Host], workdirs: Mapping[str, str],
                 endpoints: Mapping[str, Endpoint], op_names: tuple[str, ...],
                 spec_path: str = "SPEC", agents: AgentPool | None = None,
                 live: bool = False, scratch: str | None = None) -> None:
        """`scratch`: a local directory for the copies being collected (the runner's,
        listed in its state file so a kill leaves no stray copies); else a temp one."""
        self.plan = plan
        self.scratch = scratch
        #: Processes write live intervals (`harness.loadgen.live`) for `harness.run.livestatus`.
        self.live = live
        #: Named in errors that tell how to fetch records left on a machine.
        self.spec_path = spec_path
        #: The load's hosts (`clients.hosts`); the probe's may be another of `hosts`.
        self.hosts = [h for h in hosts if h.name in plan.clients.hosts] or list(hosts)
        self.probe_hosts = list(hosts)
        self.workdirs = workdirs
        self.endpoints = endpoints
        self.op_names = op_names
        self.workers: list[Worker] = []
        #: The runner shares one pool across runs; without one, the group has its own.
        self.agents = agents or AgentPool()
        self._own_agents = agents is None
        #: host name -> {"offset_ns", "uncertainty_ns"}, estimated in `go`.
        self.clock_offsets: dict[str, dict[str, int]] = {}
        #: What happened without costing records (a reconnected SSH link), for the
        #: manifest's `error`; it does not make a run partial.
        self.notes: list[str] = []

    def start(self) -> None:
        plan, size = self.plan, self.plan.size
        n = plan.clients.processes
        ops = split(size.ops, n) if size.ops is not None else [None] * n
        warm = split(size.warmup_ops, n)
        ops, warm = [*ops, None], [*warm, 0]  # the probe's (set again below)
        started: list[tuple[Host, Pending, Pending, dict[str, str], int]] = []
        probe = plan.clients.probe
        for i in range(n + (probe is not None)):
            is_probe = i == n
            host = (self._probe_host() if is_probe else self.hosts[i % len(self.hosts)])
            base = f"{self.workdirs[host.name]}/run{plan.index:05d}-c{i:03d}"
            # `alive`: touched by the machine's agent while it is there; a worker whose
            # agent is gone for long stops by itself (`harness.run.worker`).
            # `parts`: the chunks written so far, for a process that dies (`loadgen.spill`).
            files = {k: f"{base}.{k}" for k in ("ready", "go", "status", "log", "alive",
                                                 "parts")}
            files["out"] = f"{base}.npz"
            # Its configuration names the servers (and any password): listed like every
            # other file, so that what removes a client's files removes it too.
            files["config"] = f"{base}.json"
            if self.live:
                files["live"] = f"{base}.live"
            cfg = ClientConfig(
                workload=plan.workload, params=dict(plan.params),
                endpoints={k: e.to_dict() for k, e in self.endpoints.items()}, client_id=i,
                connections=plan.clients.connections, inflight=plan.clients.inflight,
                pause_us=plan.clients.pause_us, ops=ops[i], duration_s=size.duration_s,
                warmup_ops=warm[i],
                warmup_s=size.warmup_s, timeout_s=size.timeout_s,
                max_consecutive_errors=size.max_consecutive_errors, files=files,
                rate_ops_s=size.rate_ops_s / n if size.rate_ops_s else None,
                arrival=size.arrival, phase=i / n, seed=size.seed * 1000 + i,
                record_keys=size.record_keys, chunk_records=_chunk_records(),
            )
            if is_probe:  # open loop at its fixed rate, one op in flight per connection
                assert probe is not None
                cfg = replace(cfg, connections=probe.connections, inflight=1, pause_us=0.0,
                              ops=None, warmup_ops=0, rate_ops_s=probe.rate_ops_s,
                              arrival="fixed", phase=0.0)
            link = self.agents.get(host)
            argv = [host.python, "-m", "harness.worker", files["config"]]
            # Forked from the machine's agent, which imported the kit once for the grid:
            # a worker is ready in milliseconds, not after an interpreter's ~0.5 s of
            # imports (on this machine too: its agent is a process of its own).
            fork = not (slow_starts() and isinstance(host, LocalHost))
            started.append((host, link.send("write", path=files["config"],
                                            text=json.dumps(cfg.to_dict(),
                                                            allow_nan=False)),
                            link.send("spawn", argv=argv, log=files["log"],
                                      alive=files["alive"], fork=fork,
                                      prebuild=not slow_starts()), files, i))
        # Every process that did start is recorded (so `stop` reaches it) before the
        # first failure is raised.
        failure: HostError | None = None
        for host, wrote, spawned, files, i in started:
            try:
                wrote.result()
                pid = int(spawned.result()["pid"])
            except HostError as exc:
                failure = failure or exc
                continue
            argv = (host.python, "-m", "harness.worker", files["config"])
            self.workers.append(Worker(host, Process(host.name, pid, argv, files["log"]),
                                       files, i))
        if failure is not None:
            raise failure

    def _probe_host(self) -> Host:
        """The host `clients.probe.host` names (one of the run's hosts), else the first."""
        name = self.plan.clients.probe.host if self.plan.clients.probe else None
        return next((h for h in self.probe_hosts if h.name == name), self.hosts[0])

    def _log_tail(self, w: Worker) -> str:
        try:
            return w.host.read_text(w.files["log"]).strip()[-1500:]
        except HostError:
            return "(no log)"

    def _by_host(self) -> dict[str, list[Worker]]:
        groups: dict[str, list[Worker]] = {}
        for w in self.workers:
            groups.setdefault(w.host.name, []).append(w)
        return groups

    def wait_ready(self) -> None:
        asked = [(ws, self.agents.get(ws[0].host).send(
            "ready", timeout_s=READY_TIMEOUT_S,
            pairs=[[w.process.pid, w.files["ready"]] for w in ws]))
            for ws in self._by_host().values()]
        for workers, pending in asked:
            host = workers[0].host
            res = pending.result(READY_TIMEOUT_S + REQUEST_TIMEOUT_S)
            if "dead" in res:
                w = next(w for w in workers if w.process.pid == res["dead"])
                raise HarnessError(
                    f"client {w.client_id} on {host.name} exited before it was ready:\n"
                    f"{self._log_tail(w)}")
            if "timeout" in res:
                raise HarnessError(f"client processes on {host.name} not ready after "
                                   f"{READY_TIMEOUT_S:.0f} s: pids {res['timeout']}")

    def go(self) -> int:
        """Release all processes at one start time; returns it (Unix ns, this machine).

        Each host's go file holds the start in that host's own clock (start + its
        estimated offset), so processes on different machines start together and their
        records share one time origin; offsets go into the manifest. The offsets are
        estimated over every machine's link at once (their round trips too); the start
        leaves each machine `GO_MARGIN_S`, or five of the slowest round trips (+ a little
        per machine), to write its go files.
        """
        groups = self._by_host()
        offsets = _parallel({name: (lambda h=ws[0].host: (0, 0) if isinstance(h, LocalHost)
                                    else self.agents.get(h).clock_offset_ns())
                             for name, ws in groups.items()})
        for name, (offset, uncertainty) in offsets.items():
            self.clock_offsets[name] = {"offset_ns": offset, "uncertainty_ns": uncertainty}
        rtt_s = max((2 * u / 1e9 for _, u in offsets.values()), default=0.0)
        margin = max(GO_MARGIN_S, GO_MARGIN_RTTS * rtt_s) + GO_MARGIN_PER_HOST_S * len(groups)
        if slow_starts():
            margin = 0.1 + 0.005 * len(groups)
        start_at = time.time_ns() + int(margin * 1e9)
        sent = [self.agents.get(ws[0].host).send(
            "go", start_at_ns=start_at + self.clock_offsets[name]["offset_ns"],
            files=[w.files["go"] for w in ws]) for name, ws in groups.items()]
        for p in sent:
            p.result()
        return start_at

    def wait(self) -> bool:
        """Wait for every process to exit. Returns True if interrupted (Ctrl-C).

        Survives a dropped SSH connection: the processes run in sessions of their own and
        go on without it, so the host reconnects (with backoff), a new agent starts and
        the wait starts over, for up to `RECONNECT_DEADLINE_S`; a note says so in the
        manifest. A link gone silent (`harness.hosts.sshwatch`) ends the wait at once.
        """
        try:
            asked = {name: self.agents.get(ws[0].host).send(
                "wait", pids=[w.process.pid for w in ws], alive=self._alive(ws))
                for name, ws in self._by_host().items()}
            for name, ws in self._by_host().items():
                self._wait_host(ws[0].host, [w.process.pid for w in ws], asked[name],
                                self._alive(ws))
        except KeyboardInterrupt:
            self.stop()
            return True
        return False

    @staticmethod
    def _alive(ws: list[Worker]) -> list[list[Any]]:
        """[pid, alive file] pairs: a new agent (after a reconnect) keeps them fresh."""
        return [[w.process.pid, w.files["alive"]] for w in ws if "alive" in w.files]

    def _wait_host(self, host: Host, pids: list[int], pending: Pending,
                   alive: list[list[Any]] | None = None) -> None:
        lost_at: float | None = None
        before = getattr(host, "reconnects", 0)
        while True:
            try:
                pending.result(None)
                break
            except HostError as exc:
                if not hasattr(host, "reconnect"):
                    raise
                if getattr(host, "link_silent", None):  # gone quiet: no use waiting
                    raise HostError(
                        f"{host.name}: {host.link_silent} during the run; its client "
                        "processes may still be running there, and their records stay "
                        "there until it answers again (`harness collect`)") from exc
                now = time.monotonic()
                lost_at = lost_at if lost_at is not None else now
                if now - lost_at > RECONNECT_DEADLINE_S:
                    raise HostError(
                        f"{host.name}: SSH connection lost during the run and not back "
                        f"within {RECONNECT_DEADLINE_S:.0f} s ({exc}); the client "
                        f"processes may still be running there") from exc
                time.sleep(0.2)
                try:  # a new agent over a new connection (with its own backoff)
                    pending = self.agents.get(host).send("wait", pids=pids, alive=alive)
                except HostError:
                    continue
        if lost_at is not None:
            log = getattr(host, "reconnect_log", [])[before:]
            self.notes.append(
                f"client host {host.name}: the SSH connection dropped during the run and "
                f"was re-established ({'; '.join(log) or 'reconnected'}); the client "
                "processes ran on, and their records were collected")

    def stop(self, grace_s: float = 15.0) -> None:
        """Ask processes to stop (they save what they measured), then make sure. A host
        that cannot be reached is noted (its processes may still run there)."""
        asked = []
        for name, ws in self._by_host().items():
            try:
                asked.append((name, self.agents.get(ws[0].host).send(
                    "stop", pids=[w.process.pid for w in ws], grace_s=grace_s)))
            except HostError as exc:
                self.notes.append(f"could not stop the client processes on {name}: "
                                  f"{str(exc).splitlines()[0]}")
        for name, p in asked:
            try:
                p.result(grace_s + REQUEST_TIMEOUT_S)
            except HostError as exc:
                self.notes.append(f"could not stop the client processes on {name}: "
                                  f"{str(exc).splitlines()[0]}")

    def collect(self) -> Collected:
        """Copy every process's records here, each checked against the sha256 computed
        on its machine; a machine's files are removed only once their copies are
        verified and the run is written (`discard`). Records that could not be copied
        stay where they are, listed in `Collected.pending` (`harness collect` fetches
        them later). Machines are collected from in parallel."""
        by_id = {w.client_id: w for w in self.workers}
        prefix = "run-" if self.scratch else "harness-collect-"
        tmp = tempfile.mkdtemp(prefix=prefix, dir=self.scratch)
        # The copies stay until the run is written from them (`OpsParts.close`).
        got = Collected(OpsParts(self.op_names, cleanup=lambda: shutil.rmtree(
            tmp, ignore_errors=True)))
        try:
            fetched = _parallel({name: (lambda ws=ws: fetch_records(
                ws[0].host, [(w.client_id, w.files) for w in ws], Path(tmp),
                log_tail=lambda cid: self._log_tail(by_id[cid]), spec_path=self.spec_path,
                info=self._agent_info(ws[0].host)))
                for name, ws in self._by_host().items()})
        except BaseException:
            got.ops.close()
            raise
        for name, f in fetched.items():
            got.ops.items += f.parts
            got.workers += f.statuses
            got.errors += f.errors
            got.pending += f.pending
            got.discardable[name] = f.discardable
        got.workers.sort(key=lambda s: s["client"])
        return got

    def _agent_info(self, host: Host) -> Callable[[list[str], list[str]], tuple[dict, dict]]:
        def info(status: list[str], out: list[str]) -> tuple[dict, dict]:
            try:
                res = self.agents.get(host).call("info", status=status, out=out)
            except HostError:
                if not hasattr(host, "reconnect") or getattr(host, "link_silent", None):
                    raise
                res = self.agents.get(host).call("info", status=status, out=out)
            return res["status"], res["digest"]
        return info

    def discard(self, got: Collected) -> None:
        """Remove the client files whose records are safe here (call once the run is
        written); a machine that cannot be reached now keeps them (harmless)."""
        hosts = {w.host.name: w.host for w in self.workers}
        sent = []
        for name, files in got.discardable.items():
            if files:
                with contextlib.suppress(HostError):
                    sent.append(self.agents.get(hosts[name]).send("rm", files=files))
        for p in sent:
            with contextlib.suppress(HostError):
                p.result()
        if self._own_agents:
            self.agents.close()


def _parallel(jobs: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Run each job in a thread of its own; their results by name (the first error is
    raised once all have ended)."""
    if len(jobs) <= 1:
        return {name: job() for name, job in jobs.items()}
    with ThreadPoolExecutor(max_workers=min(32, len(jobs))) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        wait(futures.values())
        return {name: f.result() for name, f in futures.items()}
