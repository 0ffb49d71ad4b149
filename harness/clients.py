"""Start a run's client processes on their hosts, start them together, collect records.

Each process is ``python -m harness.worker CONFIG`` started through the Host interface,
so local and SSH clients are handled the same way. Processes connect, create a `ready`
file, and begin at the common start time the runner writes into their `go` files.
"""

from __future__ import annotations

import contextlib
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
from harness.results import OpsArrays, sha256_file
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
    #: Records that could not be copied: still on their machines.
    pending: list[PendingRecords] = field(default_factory=list)
    #: host name -> files on it whose contents are copied and verified (or were never
    #: written): removed by `ClientGroup.discard` once the run is written.
    discardable: dict[str, list[str]] = field(default_factory=dict)


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
                 endpoints: Mapping[str, Endpoint], op_names: tuple[str, ...],
                 spec_path: str = "SPEC") -> None:
        self.plan = plan
        #: Named in errors that tell how to fetch records left on a machine.
        self.spec_path = spec_path
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
        """Copy every process's records here, each checked against the sha256 computed
        on its machine; a machine's files are removed only once their copies are
        verified. Records that could not be copied stay where they are, listed in
        `Collected.pending` (`harness collect` fetches them later)."""
        parts: list[OpsArrays] = []
        got = Collected(OpsArrays.empty(self.op_names))
        by_id = {w.client_id: w for w in self.workers}
        with tempfile.TemporaryDirectory(prefix="harness-collect-") as tmp:
            for workers in self._by_host().values():
                fetched = fetch_records(workers[0].host,
                                        [(w.client_id, w.files) for w in workers], Path(tmp),
                                        log_tail=lambda cid: self._log_tail(by_id[cid]),
                                        spec_path=self.spec_path)
                parts += fetched.parts
                got.workers += fetched.statuses
                got.errors += fetched.errors
                got.pending += fetched.pending
                got.discardable[workers[0].host.name] = fetched.discardable
        got.ops = OpsArrays.concat(parts, self.op_names)
        return got

    def discard(self, got: Collected) -> None:
        """Remove the client files whose records are safe here (call once the run is
        written); a machine that cannot be reached now keeps them (harmless)."""
        hosts = {w.host.name: w.host for w in self.workers}
        for name, files in got.discardable.items():
            remove_files(hosts[name], files)


@dataclass(frozen=True)
class PendingRecords:
    """A client process's records left on its machine, not yet copied and verified here."""

    host: str
    client: int
    #: Where they are on that machine: the records (`out`), the status, and the rest.
    files: dict[str, str]
    #: The line in the run's error that says so (removed once they are collected).
    error: str


@dataclass
class Fetched:
    parts: list[OpsArrays] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pending: list[PendingRecords] = field(default_factory=list)
    discardable: list[str] = field(default_factory=list)


def _ctl_json(host: Host, *args: str) -> dict[str, Any]:
    res = _once_more(host, host.run, [host.python, "-m", "harness.workerctl", *args])
    return dict(json.loads(res.stdout))


def fetch_records(host: Host, clients: Sequence[tuple[int, Mapping[str, str]]], tmp: Path,
                  log_tail: Callable[[int], str] | None = None,
                  spec_path: str = "SPEC", unfinished_pending: bool = False) -> Fetched:
    """Copy the records of `clients` (client id, its files) from `host` into `tmp` and
    load them. Each copy is checked against the sha256 that `workerctl digest` computes
    on the host (and the one the worker wrote into its status, if any); only then are
    that client's files listed as `discardable` (removed once the run is written).
    Whatever cannot be copied is `pending`,
    with an error naming the machine and the path. With `unfinished_pending`, a client
    without a status file (still running: its machine could not be told to stop) is
    pending too, not taken as dead."""
    out = Fetched()
    where = f"{host.name} ({getattr(host, 'target', host.name)})"

    def pending(cid: int, files: Mapping[str, str], why: str) -> None:
        line = (f"client {cid} on {host.name}: records not copied ({why}); they are still "
                f"on {where} at {files['out']}; `harness collect {spec_path}` (or "
                f"`harness run {spec_path} --resume`) fetches them")
        out.errors.append(line)
        out.pending.append(PendingRecords(host.name, cid, dict(files), line))

    try:
        found = _ctl_json(host, "status", *(f["status"] for _, f in clients))
        digests = _ctl_json(host, "digest", *(f["out"] for _, f in clients))
    except (HostError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        for cid, files in clients:
            out.statuses.append({"client": cid, "host": host.name, "state": "uncollected"})
            pending(cid, files, why)
        return out
    done: list[str] = []
    for cid, files in clients:
        if unfinished_pending and found.get(files["status"]) is None:
            out.statuses.append({"client": cid, "host": host.name, "state": "uncollected"})
            pending(cid, files, "the client process has not finished: no status file yet")
            continue
        status: dict[str, Any] = {"client": cid, "host": host.name}
        status.update(found.get(files["status"]) or {
            "state": "failed", "error": "no status file (the process died)"})
        out.statuses.append(status)
        remote = digests.get(files["out"])
        if remote is None:  # no records file: the status says why
            done.append(cid)
        else:
            expected = {remote["sha256"], *([status["out"]["sha256"]]
                                             if isinstance(status.get("out"), dict) else [])}
            local = tmp / f"{host.name}-c{cid}.npz"
            why = _copy_verified(host, files["out"], local, expected)
            if why is not None:
                status["collected"] = False
                pending(cid, files, why)
                continue
            try:
                out.parts.append(OpsArrays.load_npz(local))
            except (OSError, ValueError, KeyError) as exc:
                # An intact copy of a bad file: keep the original for inspection.
                out.errors.append(f"client {cid} on {host.name}: records file "
                                  f"{files['out']} is unreadable ({exc}); left there")
                continue
            done.append(cid)
        if status.get("state") in ("failed", "aborted"):
            tail = log_tail(cid) if log_tail and status["state"] == "failed" else ""
            out.errors.append(f"client {cid} on {host.name}: {status.get('error')}"
                              + (f"\n{tail}" if tail else ""))
    files_of = dict(clients)
    out.discardable = [files_of[cid][k] for cid in done
                       for k in ("ready", "go", "status", "out")]
    return out


def remove_files(host: Host, files: Sequence[str]) -> None:
    if files:
        with contextlib.suppress(HostError):
            host.run(["rm", "-f", "--", *files], check=False)


def _copy_verified(host: Host, remote: str, local: Path, expected: set[str]) -> str | None:
    """Copy `remote` to `local` (a second try after a failed copy or a mismatch); None
    when the copy's sha256 is the one computed on the host, else why not."""
    why = ""
    for _ in range(2):
        try:
            _once_more(host, host.get, remote, local)
        except HostError as exc:
            why = str(exc).splitlines()[0]
            continue
        actual = sha256_file(local)
        if len(expected) == 1 and actual in expected:
            return None
        why = (f"checksum mismatch: copy {actual[:16]}..., on the machine "
               f"{' / '.join(sorted(e[:16] + '...' for e in expected))}")
    local.unlink(missing_ok=True)
    return why
