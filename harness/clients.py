"""Start a run's client processes on their hosts, start them together, collect records.

Each process is ``python -m harness.worker CONFIG`` started through the Host interface,
so local and SSH clients are handled the same way. Processes connect, create a `ready`
file, and begin at the common start time the runner writes into their `go` files.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import HarnessError, HostError
from harness.hosts import CommandResult, Host, LocalHost, Process
from harness.loadgen import ClientConfig
from harness.results import OpsArrays
from harness.services.base import Endpoint
from harness.spec import RunPlan

T = TypeVar("T")

READY_TIMEOUT_S = 120.0
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

    ops: OpsArrays
    workers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False


def _once_more(host: Host, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, tried a second time on a host that reconnects a dropped link (for
    steps that only read, so a repeat is harmless)."""
    try:
        return fn(*args)
    except HostError:
        if not hasattr(host, "reconnect"):
            raise
        return fn(*args)


def split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class ClientGroup:
    """The client processes of one run."""

    def __init__(self, plan: RunPlan, hosts: Sequence[Host], workdirs: Mapping[str, str],
                 endpoints: Mapping[str, Endpoint], op_names: tuple[str, ...]) -> None:
        self.plan = plan
        self.hosts = list(hosts)
        self.workdirs = workdirs
        self.endpoints = endpoints
        self.op_names = op_names
        self.workers: list[Worker] = []
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
        for i in range(n):
            host = self.hosts[i % len(self.hosts)]
            base = f"{self.workdirs[host.name]}/run{plan.index:05d}-c{i:03d}"
            files = {k: f"{base}.{k}" for k in ("ready", "go", "status", "log")}
            files["out"] = f"{base}.npz"
            cfg = ClientConfig(
                workload=plan.workload, params=dict(plan.params),
                endpoints={k: e.to_dict() for k, e in self.endpoints.items()}, client_id=i,
                connections=plan.clients.connections, inflight=plan.clients.inflight,
                ops=ops[i], duration_s=size.duration_s, warmup_ops=warm[i],
                warmup_s=size.warmup_s, timeout_s=size.timeout_s,
                max_consecutive_errors=size.max_consecutive_errors, files=files,
                rate_ops_s=size.rate_ops_s / n if size.rate_ops_s else None,
                arrival=size.arrival, phase=i / n, seed=size.seed * 1000 + i,
            )
            host.write_text(f"{base}.json", json.dumps(asdict(cfg)))
            proc = host.start([host.python, "-m", "harness.worker", f"{base}.json"],
                              log_path=files["log"])
            self.workers.append(Worker(host, proc, files, i))

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

    def _ctl(self, host: Host, *args: str, check: bool = True) -> CommandResult:
        return host.run([host.python, "-m", "harness.workerctl", *args], check=check)

    def wait_ready(self) -> None:
        for workers in self._by_host().values():
            host = workers[0].host
            res = self._ctl(host, "ready", str(READY_TIMEOUT_S),
                            *(f"{w.process.pid}:{w.files['ready']}" for w in workers),
                            check=False)
            if res.returncode == 3:
                dead = json.loads(res.stdout)["dead"]
                w = next(w for w in workers if w.process.pid == dead)
                raise HarnessError(
                    f"client {w.client_id} on {host.name} exited before it was ready:\n"
                    f"{self._log_tail(w)}")
            if res.returncode != 0:
                raise HarnessError(f"client processes on {host.name} not ready after "
                                   f"{READY_TIMEOUT_S:.0f} s: {res.stdout}{res.stderr}")

    def go(self) -> int:
        """Release all processes at one start time; returns it (Unix ns, this machine).

        Each host's go file holds the start in that host's own clock (start + its
        estimated offset), so processes on different machines start together and their
        records share one time origin; offsets go into the manifest.
        """
        groups = self._by_host()
        for name, workers in groups.items():
            offset, uncertainty = workers[0].host.clock_offset_ns()
            self.clock_offsets[name] = {"offset_ns": offset, "uncertainty_ns": uncertainty}
        # Over SSH each command is a round trip; leave time for every host's go files.
        remote = sum(not isinstance(ws[0].host, LocalHost) for ws in groups.values())
        start_at = time.time_ns() + 30_000_000 + 400_000_000 * remote
        for name, workers in groups.items():
            local_start = start_at + self.clock_offsets[name]["offset_ns"]
            self._ctl(workers[0].host, "go", str(local_start),
                      *(w.files["go"] for w in workers))
        return start_at

    def wait(self) -> bool:
        """Wait for every process to exit. Returns True if interrupted (Ctrl-C).

        Survives a dropped SSH connection: the processes run in sessions of their own and
        go on without it, so the host reconnects (with backoff) and the wait starts over,
        for up to `RECONNECT_DEADLINE_S`; a note says so in the manifest.
        """
        try:
            for workers in self._by_host().values():
                self._wait_host(workers[0].host, [str(w.process.pid) for w in workers])
        except KeyboardInterrupt:
            self.stop()
            return True
        return False

    def _wait_host(self, host: Host, pids: list[str]) -> None:
        lost_at: float | None = None
        before = getattr(host, "reconnects", 0)
        while True:
            try:
                self._ctl(host, "wait", *pids)
                break
            except HostError as exc:
                # Only a lost link (or a wait killed with it) is worth waiting out.
                exit_code = getattr(getattr(exc, "result", None), "returncode", -1)
                if not hasattr(host, "reconnect") or exit_code != -1:
                    raise
                now = time.monotonic()
                lost_at = lost_at if lost_at is not None else now
                if now - lost_at > RECONNECT_DEADLINE_S:
                    raise HostError(
                        f"{host.name}: SSH connection lost during the run and not back "
                        f"within {RECONNECT_DEADLINE_S:.0f} s ({exc}); the client "
                        f"processes may still be running there") from exc
                time.sleep(0.2)  # the next command reconnects, with its own backoff
        if lost_at is not None:
            log = getattr(host, "reconnect_log", [])[before:]
            self.notes.append(
                f"client host {host.name}: the SSH connection dropped during the run and "
                f"was re-established ({'; '.join(log) or 'reconnected'}); the client "
                "processes ran on, and their records were collected")

    def stop(self, grace_s: float = 15.0) -> None:
        """Ask processes to stop (they save what they measured), then make sure. A host
        that cannot be reached is noted (its processes may still run there)."""
        unreachable: dict[str, str] = {}
        for w in self.workers:
            try:
                w.host.signal(w.process, "TERM", group=False)
            except HostError as exc:
                unreachable.setdefault(w.host.name, str(exc).splitlines()[0])
        deadline = time.monotonic() + grace_s
        for w in self.workers:
            if w.host.name in unreachable:
                continue
            try:
                while w.host.is_alive(w.process) and time.monotonic() < deadline:
                    time.sleep(0.05)
                w.host.stop(w.process, timeout_s=1.0)
            except HostError as exc:
                unreachable.setdefault(w.host.name, str(exc).splitlines()[0])
        for name, why in unreachable.items():
            self.notes.append(f"could not stop the client processes on {name}: {why}")

    def collect(self) -> Collected:
        parts: list[OpsArrays] = []
        statuses: list[dict[str, Any]] = []
        errors: list[str] = []
        with tempfile.TemporaryDirectory(prefix="harness-collect-") as tmp:
            for workers in self._by_host().values():
                host = workers[0].host
                found = json.loads(_once_more(host, self._ctl, host, "status",
                                              *(w.files["status"] for w in workers)).stdout)
                for w in workers:
                    status: dict[str, Any] = {"client": w.client_id, "host": host.name}
                    status.update(found.get(w.files["status"]) or {
                        "state": "failed", "error": "no status file (the process died)"})
                    local = Path(tmp) / f"c{w.client_id}.npz"
                    try:
                        _once_more(host, host.get, w.files["out"], local)
                        parts.append(OpsArrays.load_npz(local))
                    except HostError:
                        pass  # no records file: the status says why
                    if status.get("state") in ("failed", "aborted"):
                        tail = self._log_tail(w) if status["state"] == "failed" else ""
                        errors.append(f"client {w.client_id} on {host.name}: "
                                      f"{status.get('error')}" + (f"\n{tail}" if tail else ""))
                    statuses.append(status)
                host.run(["rm", "-f", *(w.files[k] for w in workers
                                         for k in ("ready", "go", "status", "out"))],
                         check=False)
        return Collected(OpsArrays.concat(parts, self.op_names), statuses, errors)
