"""Clear away what a `harness run` that did not end cleanly left, keeping every record.

Called with the experiment's lock held (`harness.run.inflight`) by `harness run` (always,
before its first run), `harness collect` and `harness cleanup`. In this order:

1. Hidden temp directories in the experiment: a run directory written whole but not yet
   renamed (killed between its last fsync and the rename) is verified and moved into
   place; the old copy of a run `harness collect` was replacing is put back if the new
   one is not in place; anything else half-written is removed. Each with a line.
2. The state file of the run that ended uncleanly: its client processes are stopped
   (they save what they measured), the records of every run it had not written are
   fetched and checked as a normal run's are, and written as that run (complete when
   every client finished, else partial, with `extra.recovered` saying how); its servers
   are stopped; the work directories are removed. A process is signalled only if its
   start time is the one recorded (a pid the kernel gave to another process since is
   left alone). What cannot be reached now stays listed for the next attempt.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, HostError, ResultsError
from harness.hosts import Host, LocalHost, Process, connect_host
from harness.results import (
    MANIFEST,
    TMP_PREFIX,
    Manifest,
    OpsParts,
    verify_run,
    write_run,
)
from harness.run.inflight import ExperimentLock, InFlight, ServerEntry, WorkerEntry, read_state
from harness.run.runstatus import finish_manifest
from harness.run.transfer import fetch_records, remove_files
from harness.spec import Spec, expand
from harness.workloads import WORKLOADS

#: How long stopped client processes get to save their records before they are killed.
WORKER_GRACE_S = 15.0
SERVER_GRACE_S = 10.0


@dataclass
class Recovered:
    """What `recover` did, for its caller's summary and for tests."""

    runs_written: list[str] = field(default_factory=list)
    runs_left: list[str] = field(default_factory=list)
    processes_stopped: list[str] = field(default_factory=list)
    temp_dirs: list[str] = field(default_factory=list)


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def recover_temp_dirs(exp_dir: Path, say: Callable[[str], None],
                      found: Recovered | None = None) -> Recovered:
    """Step 1 of the module docstring: the hidden temp directories of `exp_dir`."""
    found = found or Recovered()
    if not exp_dir.is_dir():
        return found
    temps = sorted(p for p in exp_dir.iterdir() if p.name.startswith(TMP_PREFIX))
    # The old copies of replaced runs first: whether a staging copy matters depends on them.
    temps.sort(key=lambda p: not p.name.startswith(f"{TMP_PREFIX}old-"))
    for d in temps:
        name = d.name[len(TMP_PREFIX):]
        if name.startswith("old-"):
            target = exp_dir / name[len("old-"):]
            if (target / MANIFEST).exists():
                shutil.rmtree(d)
                say(f"{d}: removed (the old copy of run {target.name}, replaced already)")
            else:
                os.rename(d, target)
                _fsync_dir(exp_dir)
                say(f"{target}: put back (a `harness collect` was replacing it when it "
                    "stopped; the records it was fetching are still on their machine)")
        elif name.startswith("collect-"):
            shutil.rmtree(d)
            say(f"{d}: removed (a replacement `harness collect` had not put in place; the "
                "run it was replacing is intact)")
        elif (d / MANIFEST).exists() and not (exp_dir / name).exists() and _whole(d):
            os.rename(d, exp_dir / name)
            _fsync_dir(exp_dir)
            say(f"{exp_dir / name}: found whole in its temp directory (the harness stopped "
                "between writing and renaming it); verified and moved into place")
            found.runs_written.append(name)
        else:
            shutil.rmtree(d)
            say(f"{d}: removed (a run directory left half-written; its records are written "
                "again from the client machines where they still are)")
        found.temp_dirs.append(d.name)
    return found


def _whole(run_dir: Path) -> bool:
    try:
        verify_run(run_dir)
    except HarnessError:
        return False
    return True


class _Hosts:
    """Connections to the spec's hosts, made when first needed; None when unreachable."""

    def __init__(self, spec: Spec, say: Callable[[str], None], same_machine: bool) -> None:
        self.spec, self.say, self.same_machine = spec, say, same_machine
        self._hosts: dict[str, Host | None] = {}

    def get(self, name: str) -> Host | None:
        if name not in self._hosts:
            self._hosts[name] = self._connect(name)
        return self._hosts[name]

    def _connect(self, name: str) -> Host | None:
        hspec = self.spec.hosts.get(name)
        local = (hspec is None and name == "localhost") or (
            hspec is not None and hspec.target == "localhost")
        if local and not self.same_machine:
            self.say(f"{name}: the earlier run was on another machine; its local "
                     "processes and files are not this machine's, left alone")
            return None
        if hspec is None:
            if name == "localhost":
                return LocalHost()
            self.say(f"{name}: not a host of {self.spec.path} now; what the earlier run "
                     "left there stays")
            return None
        try:
            return connect_host(hspec)
        except HostError as exc:
            self.say(f"{name}: cannot connect ({str(exc).splitlines()[0]}); what the "
                     "earlier run left there stays listed")
            return None

    def close(self) -> None:
        for h in self._hosts.values():
            if h is not None:
                with contextlib.suppress(HostError):
                    h.close()


def _stop_processes(host: Host, procs: list[tuple[int, int | None, str]], grace_s: float,
                    say: Callable[[str], None]) -> list[str]:
    """TERM (and CONT) each (pid, recorded start ticks, description) that is still the
    process recorded, wait up to `grace_s` for all, KILL what is left. Their groups:
    servers and workers run in sessions of their own."""
    now = host.start_ticks([pid for pid, _, _ in procs])
    mine: list[tuple[int, str]] = []
    for pid, ticks, what in procs:
        if pid not in now:
            continue  # gone already
        if ticks is not None and now[pid] != ticks:
            say(f"{host.name}: pid {pid} ({what}) is another process now; left alone")
            continue
        mine.append((pid, what))
    for pid, _ in mine:
        host.signal(Process(host.name, pid, (), ""), "TERM")
        host.signal(Process(host.name, pid, (), ""), "CONT")
    deadline = time.monotonic() + grace_s
    left = [p for p, _ in mine]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = host.start_ticks(left)
        left = [p for p in left if p in alive]
    for pid in left:
        host.signal(Process(host.name, pid, (), ""), "KILL")
    stopped = [f"{what} (pid {pid} on {host.name})" for pid, what in mine]
    for line in stopped:
        say(f"stopped {line}, left running by the earlier run")
    return stopped


def _plan_of(spec: Spec, config_id: str) -> Any:
    for plan in expand(spec):
        if plan.config_id == config_id:
            return plan
    return None


def _recover_run(run: InFlight, spec: Spec, out_dir: Path, hosts: _Hosts,
                 say: Callable[[str], None], by: str) -> bool:
    """Write the records of a run the earlier harness had not written; True when nothing
    of it is left on a machine (written, written already, or never made)."""
    exp_dir = out_dir / spec.name
    by_host: dict[str, list[WorkerEntry]] = {}
    for w in run.workers:
        by_host.setdefault(w.host, []).append(w)
    if (exp_dir / run.run_id / MANIFEST).exists():
        _remove_worker_files(by_host, hosts)
        say(f"run {run.run_id} ({run.label}): written already")
        return True
    op_names = WORKLOADS.get(spec.workload).ops
    # The copies stay until the run is written from them (`OpsParts.close`).
    tmp = tempfile.mkdtemp(prefix="harness-recover-")
    ops = OpsParts(op_names, cleanup=lambda: shutil.rmtree(tmp, ignore_errors=True))
    try:
        return _recover_from(tmp, ops, run, spec, hosts, out_dir, by, say, by_host)
    finally:
        ops.close()


def _recover_from(tmp: str, ops: OpsParts, run: InFlight, spec: Spec, hosts: _Hosts,
                  out_dir: Path, by: str, say: Callable[[str], None],
                  by_host: dict[str, list[WorkerEntry]]) -> bool:
    """`_recover_run` once the records' copies have a place (`tmp`) and a holder (`ops`)."""
    statuses: list[dict[str, Any]] = []
    errors: list[str] = []
    unreachable: list[str] = []
    for name, workers in sorted(by_host.items()):
        host = hosts.get(name)
        if host is None:
            unreachable.append(name)
            continue
        got = fetch_records(host, [(w.client, w.files) for w in workers], Path(tmp),
                            spec_path=str(spec.path), unfinished_pending=True)
        if got.pending:
            unreachable.append(f"{name} ({got.pending[0].error.split('(')[-1]}")
            continue
        ops.items += got.parts
        statuses += got.statuses
        errors += got.errors
    if unreachable:
        say(f"run {run.run_id} ({run.label}): records on {', '.join(unreachable)} "
            "could not be fetched now; they stay there, listed for the next attempt")
        return False
    if not len(ops):
        _remove_worker_files(by_host, hosts)
        say(f"run {run.run_id} ({run.label}): no records were made; nothing to write "
            "(`--resume` runs it again)")
        return True
    recovered = {"utc": utcnow(), "by": by, "reason": run.reason}
    manifest = Manifest.from_dict(run.manifest, where=f"state of run {run.run_id}")
    if run.final:
        manifest = Manifest.from_dict({**manifest.to_dict(),
                                       "extra": {**manifest.extra, "recovered": recovered}})
    else:
        plan = _plan_of(spec, manifest.config_id)
        if plan is None:
            raise ResultsError(f"run {run.run_id}: configuration {manifest.config_id} is "
                               f"not in {spec.path} any more; recover with the spec it ran")
        statuses.sort(key=lambda s: s.get("client", 0))
        if any(s.get("state") != "complete" for s in statuses):
            errors.insert(0, f"the harness stopped during this run ({run.reason}); its "
                             "client processes were stopped and what they measured was "
                             f"recovered by {by}")
        manifest = finish_manifest(manifest, plan, ops, workers=statuses, errors=errors,
                                   interrupted=False, ended_utc=recovered["utc"],
                                   extra={"recovered": recovered})
    write_run(out_dir, manifest, ops)
    _remove_worker_files(by_host, hosts)
    say(f"run {run.run_id} ({run.label}): {len(ops):,} records recovered and written as "
        f"{manifest.status} ({run.reason})")
    return True


def _remove_worker_files(by_host: dict[str, list[WorkerEntry]], hosts: _Hosts) -> None:
    for name, workers in by_host.items():
        host = hosts.get(name)
        if host is not None:
            remove_files(host, [f for w in workers for f in w.files.values()])


def recover(spec: Spec, out_dir: Path, say: Callable[[str], None] = print,
            lock: ExperimentLock | None = None, by: str = "harness run") -> Recovered:
    """Clear what an earlier `harness run` of `spec` into `out_dir` left (module
    docstring). With `lock` (held by the caller), what could not be cleared now is carried
    into its state, so it stays listed."""
    out_dir = Path(out_dir)
    exp_dir = out_dir / spec.name
    found = recover_temp_dirs(exp_dir, say)
    state = read_state(exp_dir)
    if state is None or state.empty():
        return found
    say(f"{spec.name}: the `harness run` of {state.started_utc} (pid {state.pid} on "
        f"{state.machine}) did not end cleanly; clearing what it left")
    hosts = _Hosts(spec, say, same_machine=state.machine == socket.gethostname())
    left_runs: list[InFlight] = []
    left_servers: list[ServerEntry] = []
    try:
        # Clients first: stopped, they save what they measured; then it is fetched.
        by_host: dict[str, list[tuple[int, int | None, str]]] = {}
        for run in state.runs:
            for w in run.workers:
                by_host.setdefault(w.host, []).append(
                    (w.pid, w.started_ticks, f"client {w.client} of run {run.run_id}"))
        for name, procs in by_host.items():
            host = hosts.get(name)
            if host is not None:
                found.processes_stopped += _stop_processes(host, procs, WORKER_GRACE_S, say)
        for run in state.runs:
            if _recover_run(run, spec, out_dir, hosts, say, by):
                found.runs_written.append(run.run_id)
            else:
                left_runs.append(run)
                found.runs_left.append(run.run_id)
        servers: dict[str, list[ServerEntry]] = {}
        for s in state.servers:
            servers.setdefault(s.host, []).append(s)
        for name, entries in servers.items():
            host = hosts.get(name)
            if host is None:
                left_servers += entries
                continue
            found.processes_stopped += _stop_processes(
                host, [(s.pid, s.started_ticks, f"{s.kind} server {s.service!r}")
                       for s in entries], SERVER_GRACE_S, say)
            for d in {s.workdir for s in entries if s.workdir}:
                host.remove_tree(d)
        kept_hosts = {w.host for r in left_runs for w in r.workers}
        left_workdirs = {}
        for name, path in state.workdirs.items():
            host = hosts.get(name) if name not in kept_hosts else None
            if host is None:
                left_workdirs[name] = path
            else:
                host.remove_tree(path)
        for path in state.scratch:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        hosts.close()
    if lock is not None:
        lock.state.runs += left_runs
        lock.state.servers += left_servers
        lock.state.workdirs.update(left_workdirs)
        lock.save()
    return found
