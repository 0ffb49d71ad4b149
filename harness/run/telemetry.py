"""A run's telemetry: who was the bottleneck, the server, the load generator or another
process? Read at the run's edges on every machine, never per op.

`RunTelemetry` is driven by the runner at four points: `before_clients` (after prepare
and baseline: the servers' own counters, `Service.counters`), `start` (every client
ready, just before the common start: /proc of every machine, `harness.hosts.procstat`, and a
once-a-second busy share on the client machines from their agents), `end` (every client
process has exited: /proc again, then the counters), and `result`, the manifest's
``telemetry``. A machine without clients is read by `procstat.serve`, started over SSH
before the clients so its interpreter's start-up falls outside the window:

- ``window_s``: the common start to the end of the last client's loop (warm-up
  included, as are the counters: they cover every record of the run);
- ``processes``: each client process (its own getrusage over exactly that window, from
  its status: `harness.run.worker`) and each server process (the difference of /proc's CPU
  ticks between the snapshots, summed over its session so PostgreSQL's backends, also
  those that came and went, count with their postmaster); ``cpu_util`` = CPU seconds /
  ``window_s`` (1.0 = one whole CPU);
- ``hosts``: each machine's busy and steal share of all its CPUs between the snapshots
  (/proc/stat), its 1-minute load at the end, and ``other_cpu``: CPUs used (1.0 = one
  whole CPU, over the snapshots' interval) by processes that are neither the kit's (the
  harness, agents, workers, the snapshot itself, the sshd serving them) nor the servers';
  kernel threads count in no process figure (their time shows in ``cpu_util``);
- ``counters``: each server's counters as differences over the run (levels such as open
  connections at the end), by service name (a Redis's replicas' as `replica<i>.<name>`);
- ``replication``: where each replicated server's replicas stood against it at the
  run's two edges (`Service.replication`: offsets, links, lag), by service name, read
  right after the counters at the start and right before them at the end.

What could not be read is left out and said in ``notes``; telemetry never costs a run.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from harness.drivers.replies import cut_note
from harness.errors import HarnessError
from harness.hosts import Host, LocalHost, procstat
from harness.results.stream import Ops, tally
from harness.run.agentctl import AgentLink, AgentPool
from harness.run.clients import ClientGroup
from harness.services import SERVICES
from harness.services.attached import AttachedService
from harness.services.base import RunningService

#: Row fields of `procstat.snapshot`'s processes.
PID, PPID, SID, UTIME, STIME, CUTIME, CSTIME, START, KERNEL, COMM = range(10)


@dataclass
class _Machine:
    """What one spec host's snapshots say, and whose processes are whose there."""

    host: Host
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    series: list[float] | None = None


@dataclass
class _Roles:
    """Pids on one machine (a kernel and pid namespace, shared by every spec host on
    it): sessions that are the kit's, pids that are the kit's alone (the harness: its
    session may hold a user's other jobs), servers by pid."""

    kit_sessions_of: set[int] = field(default_factory=set)
    kit_pids: set[int] = field(default_factory=set)
    servers: dict[int, tuple[str, str]] = field(default_factory=dict)  # pid -> (svc, host)


def _gather(jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each job's result, or the exception it raised, run side by side."""
    def guarded(job: Callable[[], Any]) -> Any:
        try:
            return job()
        except Exception as exc:  # noqa: BLE001 - a probe's error, a reply not as read: a note
            return exc

    if len(jobs) <= 1:
        return {name: guarded(job) for name, job in jobs.items()}
    with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
        futures = {name: pool.submit(guarded, job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


class RunTelemetry:
    """The telemetry of one run (see the module)."""

    def __init__(self, hosts: Mapping[str, Host], running: Mapping[str, RunningService],
                 group: ClientGroup, agents: AgentPool,
                 snapshot_links: dict[str, AgentLink] | None = None) -> None:
        """`snapshot_links`: the grid's servers of snapshots, kept from run to run (the
        runner closes them at its end); without, this run starts and ends its own."""
        self.hosts = dict(hosts)
        self.running = dict(running)
        self.group = group
        self.agents = agents
        self.machines = {name: _Machine(h) for name, h in self.hosts.items()}
        self.counters_start: dict[str, dict[str, float]] = {}
        self.counters_end: dict[str, dict[str, float]] = {}
        self.replication: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self.started = False
        #: `procstat.serve` on each other machine, started before the clients so that
        #: the interpreter's start-up (~0.1-0.5 s) is neither in the window nor before go;
        #: once per grid where the runner keeps them (`snapshot_links`).
        self._kept = snapshot_links is not None
        self.servers_of_snapshots: dict[str, AgentLink] = (
            snapshot_links if snapshot_links is not None else {})

    # -- the edges --------------------------------------------------------------------
    def before_clients(self) -> None:
        """The servers' counters, before any client connects; the machines without an
        agent start a server of snapshots."""
        for name, m in self.machines.items():
            if not isinstance(m.host, LocalHost) and not self._is_client_host(m.host,
                                                                              planned=True):
                have = self.servers_of_snapshots.get(name)
                if have is not None and not have.dead:
                    continue  # the grid's, from an earlier run
                # A host kind without channels takes one `python -c` per edge instead.
                with contextlib.suppress(HarnessError):
                    self.servers_of_snapshots[name] = AgentLink(
                        m.host, [m.host.python, "-c", procstat.script(), "--serve"])
        self.counters_start = self._counters()
        self._replication("start")

    def start(self) -> None:
        """/proc of every machine and the client machines' series, clients all ready."""
        got = _gather({name: lambda m=m: self._snapshot(m, start=True)
                       for name, m in self.machines.items()})
        for name, res in got.items():
            if isinstance(res, Exception):
                self.notes.append(f"host {name}: /proc not read at the start: {res}")
            else:
                self.machines[name].start = res
        self.started = True

    def end(self) -> None:
        """/proc again, then the counters, every client process gone. Once only."""
        try:
            if not self.started:
                return
            self.started = False
            got = _gather({name: lambda m=m: self._snapshot(m, start=False)
                           for name, m in self.machines.items() if m.start is not None})
            for name, res in got.items():
                if isinstance(res, Exception):
                    self.notes.append(f"host {name}: /proc not read at the end: {res}")
                else:
                    self.machines[name].end = res
            self._replication("end")  # those read at the start only
            if self.counters_start:
                self.counters_end = self._counters()
        finally:
            if not self._kept:
                for link in self.servers_of_snapshots.values():
                    link.close()
                self.servers_of_snapshots = {}

    def _is_client_host(self, host: Host, planned: bool = False) -> bool:
        """Whether clients run on `host` (so its agent serves snapshots); `planned`:
        before they are started, by the run's plan."""
        if planned:
            return host.name in self.group.plan.clients.hosts
        return any(w.host is host for w in self.group.workers)

    def _snapshot(self, m: _Machine, start: bool) -> dict[str, Any]:
        """One machine's /proc: through its agent on a client machine (one line on the
        open channel; its busy series starts or stops there too), in this process on
        this machine, else from its `procstat.serve` (or a `python -c` of procstat)."""
        detail = [p.pid for svc in self.running.values() for p in svc.server_processes()
                  if self._host_of(svc, p.host) is m.host]
        if self._is_client_host(m.host):
            # Its agent is up (the clients were started through it); a machine whose
            # link is gone is not waited for: a note says so.
            link = self.agents.peek(m.host)
            if link is None:
                raise HarnessError("its agent is not answering")
            got = link.call("procsnap", detail=detail, series="start" if start else "stop")
            if not start:
                m.series = got.get("busy")
            return got["snapshot"]
        if isinstance(m.host, LocalHost):
            return procstat.snapshot(detail)
        link = self.servers_of_snapshots.get(m.host.name)
        if link is not None and not link.dead:
            return link.call("procsnap", detail=detail)["snapshot"]
        res = m.host.run([m.host.python, "-c", procstat.script(), *map(str, detail)],
                         timeout=60)
        return json.loads(res.stdout)

    def _counters(self) -> dict[str, dict[str, float]]:
        jobs = {name: lambda svc=svc: SERVICES.get(svc.kind).counters(svc)
                for name, svc in self.running.items()}
        out = {}
        for name, res in _gather(jobs).items():
            if isinstance(res, Exception):
                self.notes.append(f"service {name}: counters not read: "
                                  f"{type(res).__name__}: {res}")
            elif res is not None:
                # A reply cut at its bounds, or counters that are no numbers: said here
                # in one line (`harness.drivers.replies.Reading`), once per service.
                note = cut_note(getattr(res, "cut", ()))
                line = f"service {name}: counters: {note}"
                if note is not None and line not in self.notes:
                    self.notes.append(line)
                out[name] = dict(res)
        return out

    def _replication(self, edge: str) -> None:
        """`replication` at `edge`: at the start of every server, at the end of those
        that had replicas then."""
        jobs = {name: lambda svc=svc: SERVICES.get(svc.kind).replication(svc) for name, svc
                in self.running.items() if edge == "start" or name in self.replication}
        for name, res in _gather(jobs).items():
            if isinstance(res, Exception):
                self.notes.append(f"service {name}: replication not read at the {edge}: "
                                  f"{type(res).__name__}: {res}")
            elif res is not None:
                self.replication.setdefault(name, {})[edge] = res

    def _host_of(self, svc: RunningService, host_name: str) -> Host:
        """The spec host a server process runs on; a host the spec does not name (a
        standby in a network namespace of the service's machine) is the service's."""
        return self.hosts.get(host_name) or svc.host

    # -- the manifest's section ---------------------------------------------------------
    def result(self, workers: Sequence[Mapping[str, Any]], ops: Ops) -> dict[str, Any]:
        """The manifest's ``telemetry`` (empty if the run never reached its start)."""
        try:
            return self._result(workers, ops)
        except Exception as exc:  # noqa: BLE001 - never costs the run its records
            return {"notes": [*self.notes, f"telemetry not assembled: "
                                           f"{type(exc).__name__}: {exc}"]}

    def _result(self, workers: Sequence[Mapping[str, Any]], ops: Ops) -> dict[str, Any]:
        snapped = {n: m for n, m in self.machines.items() if m.start and m.end}
        window = window_s(workers, ops)
        if window is None and snapped:  # no client said: the snapshots' interval
            window = min(_interval_s(m) for m in snapped.values())
        if not window:
            return {"notes": self.notes} if self.notes else {}
        roles = self._roles(snapped)
        processes = [*client_entries(workers, window)]
        hosts = []
        for name, m in snapped.items():
            assert m.start is not None
            r = roles[m.start["machine"]]
            processes += self._server_entries(name, m, r, window)
            hosts.append(host_entry(name, m, r))
        out: dict[str, Any] = {
            "window_s": round(window, 6),
            "processes": processes,
            "hosts": hosts,
            "counters": {
                name: {"kind": self.running[name].kind,
                       "delta": SERVICES.get(self.running[name].kind).counter_delta(
                           self.counters_start[name], end)}
                for name, end in self.counters_end.items() if name in self.counters_start},
        }
        unobserved = [{"service": name, "address": f"{svc.endpoint.host}:{svc.endpoint.port}",
                       "why": "a server at an address on a machine the spec does not name"
                       if not getattr(svc, "observed_host", True) else
                       "its process was not visible on the host named (another user's?)"}
                      for name, svc in self.running.items()
                      if isinstance(svc, AttachedService) and not svc.observed]
        if unobserved:  # what no check can judge: the server's CPU and machine
            out["unobserved"] = unobserved
        if self.replication:
            out["replication"] = self.replication
        if self.notes:
            out["notes"] = self.notes
        return out

    def _roles(self, snapped: Mapping[str, _Machine]) -> dict[str, _Roles]:
        roles: dict[str, _Roles] = {}
        here = procstat.machine_id()
        for name, m in snapped.items():
            assert m.start is not None and m.end is not None
            r = roles.setdefault(m.start["machine"], _Roles())
            if m.start["machine"] == here:
                r.kit_pids.add(os.getpid())
            for snap in (m.start, m.end):
                if snap["self"] != os.getpid() or snap["machine"] != here:
                    r.kit_sessions_of.add(snap["self"])  # an agent, a `python -c`
            r.kit_sessions_of.update(w.process.pid for w in self.group.workers
                                     if w.host.name == name)
        for m in snapped.values():  # in every snapshot of a machine: one verdict
            assert m.start is not None and m.end is not None
            r = roles[m.start["machine"]]
            for snap in (m.start, m.end):
                r.kit_pids |= _sshd_above(snap, r.kit_sessions_of | r.kit_pids)
        for sname, svc in self.running.items():
            for p in svc.server_processes():
                h = self._host_of(svc, p.host)
                m = next((m for m in snapped.values() if m.host is h), None)
                if m is not None and m.start is not None:
                    roles[m.start["machine"]].servers[p.pid] = (sname, h.name)
        return roles

    def _server_entries(self, name: str, m: _Machine, r: _Roles, window: float
                        ) -> list[dict[str, Any]]:
        assert m.start is not None and m.end is not None
        out = []
        used = class_ticks(m.start, m.end, r)
        tck = m.end["tck"]
        rows = {row[PID]: row for row in m.end["procs"]}
        for pid, (sname, hname) in r.servers.items():
            if hname != name:
                continue
            if pid not in rows:
                self.notes.append(f"service {sname}: server process {pid} on {hname} was "
                                  "gone at the end: no CPU figure")
                continue
            user, system = used.get(f"server {pid}", (0, 0))
            out.append({
                "role": "server", "host": hname, "name": rows[pid][COMM], "service": sname,
                "pid": pid, "cpu_user_s": user / tck, "cpu_sys_s": system / tck,
                "cpu_util": round((user + system) / tck / window, 4),
                "peak_rss_bytes": _peak_rss(m, rows[pid][SID]),
            })
        return out


def window_s(workers: Sequence[Mapping[str, Any]], ops: Ops) -> float | None:
    """The common start to the end of the last client's loop, as the clients measured it;
    else the end of the last record; None if neither is known."""
    ran = [float(w["cpu"]["ran_s"]) for w in workers if isinstance(w.get("cpu"), dict)]
    if ran:
        return max(ran)
    last = tally(ops).last_end_ns
    return float(last) / 1e9 if last is not None else None


def client_entries(workers: Iterable[Mapping[str, Any]], window: float
                   ) -> Iterable[dict[str, Any]]:
    """One entry per client process that said what it used (`harness.run.worker`)."""
    for w in workers:
        cpu = w.get("cpu")
        if not isinstance(cpu, dict):
            continue
        yield {"role": "client", "host": w.get("host"), "name": f"client {w.get('client')}",
               "pid": w.get("pid"), "cpu_user_s": cpu["user_s"], "cpu_sys_s": cpu["sys_s"],
               "cpu_util": round((cpu["user_s"] + cpu["sys_s"]) / window, 4),
               "peak_rss_bytes": cpu.get("peak_rss_bytes")}


def class_ticks(start: Mapping[str, Any], end: Mapping[str, Any], roles: _Roles
                ) -> dict[str, tuple[int, int]]:
    """(user, system) clock ticks used between two snapshots by each class of process:
    "server <pid>", "kit", "kernel", "other". A process's ticks include those of its
    children that exited and were waited for (cutime, cstime), so the ticks of a process
    gone by the end reappear with whoever reaped it."""
    totals: dict[str, list[int]] = {}
    for snap, sign in ((end, 1), (start, -1)):
        for row, label in classify(snap, roles):
            t = totals.setdefault(label, [0, 0])
            t[0] += sign * (row[UTIME] + row[CUTIME])
            t[1] += sign * (row[STIME] + row[CSTIME])
    return {k: (max(0, u), max(0, s)) for k, (u, s) in totals.items()}


def classify(snap: Mapping[str, Any], roles: _Roles) -> Iterable[tuple[list[Any], str]]:
    """Each process of a snapshot with its class (see `class_ticks`). Whole sessions
    are a server's (its children with it, and the children it put in sessions of their
    own) or the kit's (agents, workers: each in a session of its own); the harness and
    the sshd processes above the kit's (they carry its commands and channels) are the
    kit's by pid alone."""
    rows = snap["procs"]
    by_pid = {row[PID]: row for row in rows}
    server_sids = {by_pid[p][SID]: f"server {p}" for p in roles.servers if p in by_pid}
    kit_sids = {by_pid[p][SID] for p in roles.kit_sessions_of if p in by_pid}

    def server_above(row: list[Any]) -> str | None:
        # A server's child in a session of its own (PostgreSQL's backends call setsid):
        # still the server's, found by its parents (a live backend of a pooler's).
        for _ in range(8):
            row = by_pid.get(row[PPID])  # type: ignore[assignment]
            if row is None or row[PID] <= 1:
                return None
            if row[PID] in roles.servers:
                return f"server {row[PID]}"
        return None

    for row in rows:
        if row[SID] in server_sids:
            yield row, server_sids[row[SID]]
        elif (label := server_above(row)) is not None:
            yield row, label
        elif row[SID] in kit_sids or row[PID] in roles.kit_pids:
            yield row, "kit"
        elif row[KERNEL]:
            yield row, "kernel"
        else:
            yield row, "other"


def _sshd_above(snap: Mapping[str, Any], pids: Iterable[int]) -> set[int]:
    """The sshd processes above `pids` in `snap` (they carry the kit's channels and
    reap its commands). Found in every snapshot and used for all: at one edge the
    command below one may have gone already, its time now in that sshd's."""
    by_pid = {row[PID]: row for row in snap["procs"]}
    found = set()
    for pid in pids:
        parent = by_pid.get(by_pid[pid][PPID]) if pid in by_pid else None
        while parent is not None and parent[PID] > 1 and parent[COMM].startswith("sshd"):
            found.add(parent[PID])
            parent = by_pid.get(parent[PPID])
    return found


def host_entry(name: str, m: _Machine, roles: _Roles) -> dict[str, Any]:
    assert m.start is not None and m.end is not None
    s, e = m.start, m.end
    total = max(1, e["total"] - s["total"])
    other_user, other_sys = class_ticks(s, e, roles).get("other", (0, 0))
    out = {
        "host": name, "cpus": e["cpus"],
        "cpu_util": round((e["busy"] - s["busy"]) / total, 4),
        "steal_util": round((e["steal"] - s["steal"]) / total, 4),
        "load_avg_1m": e["loadavg"],
        "other_cpu": round((other_user + other_sys) / e["tck"] / _interval_s(m), 4),
    }
    if m.series:
        out["cpu_series"] = m.series
    return out


def _interval_s(m: _Machine) -> float:
    """Seconds between a machine's two snapshots, by its own clock."""
    assert m.start is not None and m.end is not None
    return max(1e-3, m.end["uptime_s"] - m.start["uptime_s"])


def _peak_rss(m: _Machine, sid: int) -> int | None:
    """The largest peak RSS of a server's processes seen in either snapshot (a backend
    that came and went between them is not seen; shared memory would count once per
    process in a sum)."""
    peaks = [snap["peak_rss"].get(str(row[PID])) for snap in (m.start, m.end) if snap
             for row in snap["procs"] if row[SID] == sid]
    found = [p for p in peaks if p is not None]
    return max(found) if found else None
