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
   are stopped; the work directories are removed. What cannot be reached now stays
   listed for the next attempt (`State.earlier`, with the owner token that proves it).

The state file is read back, so it proves nothing by itself (`harness.hosts.owned`): a
process is signalled only if it runs now with the recorded start time, in the boot of
its machine the state recorded, with the state's owner token in its environment; a
directory or file is read or removed only if it is a work directory holding the token's
mark (or a file directly in one), reached by no symbolic link. Anything else it names is
said in one line and left alone.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import HostError, ResultsError
from harness.hosts import Host, LocalHost, connect_host
from harness.hosts.owned import (
    boot_id,
    is_token,
    owned_files,
    remove_owned_dirs,
    remove_owned_files,
    stop_owned,
)
from harness.results import (
    MANIFEST,
    Manifest,
    OpsParts,
    tally,
    write_run,
)
from harness.results.manifest import RUN_ID_RE
from harness.run.inflight import (
    ExperimentLock,
    InFlight,
    ServerEntry,
    State,
    WorkerEntry,
    read_state,
)
from harness.run.runstatus import finish_manifest, load_and_probe
from harness.run.tempdirs import Recovered, recover_temp_dirs
from harness.run.transfer import fetch_records
from harness.spec import Spec, expand
from harness.text import printable
from harness.workloads import WORKLOADS

#: How long stopped client processes get to save their records before they are killed.
WORKER_GRACE_S = 15.0
SERVER_GRACE_S = 10.0


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _Hosts:
    """Connections to the spec's hosts, made when first needed; None when unreachable."""

    def __init__(self, spec: Spec, say: Callable[[str], None]) -> None:
        self.spec, self.say = spec, say
        self._hosts: dict[str, Host | None] = {}

    def get(self, name: str) -> Host | None:
        if name not in self._hosts:
            self._hosts[name] = self._connect(name)
        return self._hosts[name]

    def is_local(self, name: str) -> bool:
        hspec = self.spec.hosts.get(name)
        return (hspec is None and name == "localhost") or (
            hspec is not None and hspec.target == "localhost")

    def _connect(self, name: str) -> Host | None:
        hspec = self.spec.hosts.get(name)
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


class _Machines:
    """The hosts of one earlier run's state, as far as they are the machines it used:
    none on this machine if it was written on another; no process signalled on a machine
    booted since (or another one now under the same host name)."""

    def __init__(self, hosts: _Hosts, state: State, say: Callable[[str], None]) -> None:
        self.hosts, self.state, self.say = hosts, state, say
        self.same_machine = state.machine == socket.gethostname()
        self._booted: dict[str, bool] = {}

    def get(self, name: str) -> Host | None:
        if self.hosts.is_local(name) and not self.same_machine:
            self.say(f"{name}: the earlier run was on another machine ({self.state.machine}"
                     "); its local processes and files are not this machine's, left alone")
            return None
        return self.hosts.get(name)

    def same_boot(self, name: str, host: Host) -> bool:
        if name not in self._booted:
            recorded = self.state.boots.get(name, "")
            self._booted[name] = bool(recorded) and recorded == boot_id(host)
            if not self._booted[name]:
                self.say(f"{name}: not the boot of that machine the earlier run recorded "
                         "(restarted since, or another machine); no process there is "
                         "signalled")
        return self._booted[name]


def _stop_processes(host: Host, token: str, procs: list[tuple[int, int | None, str]],
                    grace_s: float, say: Callable[[str], None]) -> list[str]:
    """Stop the groups of each (pid, recorded start ticks, description) proven the earlier
    run's (`stop_owned`: its start time and the owner token in its environment, each
    process pinned by a pidfd before it is checked and signalled): TERM and CONT, up to
    `grace_s` for all, then KILL. Any other is named in a line and left alone."""
    checked = stop_owned(host, token, [(pid, ticks) for pid, ticks, _ in procs], grace_s)
    stopped: list[str] = []
    for pid, _, what in procs:
        why = checked.get(pid, "not a process id")
        if why == "gone":
            continue
        if why is not None:
            say(f"{host.name}: pid {pid} ({what}) is not the earlier run's: {why}; left "
                "alone")
            continue
        stopped.append(f"{what} (pid {pid} on {host.name})")
    for line in stopped:
        say(f"stopped {line}, left running by the earlier run")
    return stopped


def _remove_dirs(host: Host, token: str, paths: list[str], what: str,
                 say: Callable[[str], None]) -> None:
    """Remove the directories proven the earlier run's; name the others, left alone."""
    for path, why in remove_owned_dirs(host, token, paths).items():
        if why is not None:
            say(f"{host.name}: {what} {path} is not the earlier run's: {why}; left alone")


def _plan_of(spec: Spec, config_id: str) -> Any:
    for plan in expand(spec):
        if plan.config_id == config_id:
            return plan
    return None


def _recover_run(run: InFlight, spec: Spec, out_dir: Path, hosts: _Machines,
                 say: Callable[[str], None], by: str) -> bool:
    """Write the records of a run the earlier harness had not written; True when nothing
    of it is left to deal with (written, written already, never made, or not proven the
    earlier run's and left alone)."""
    exp_dir = out_dir / spec.name
    man = run.manifest
    if (not RUN_ID_RE.match(run.run_id) or man.get("run_id") != run.run_id
            or man.get("experiment") != spec.name):
        say(f"run {printable(run.run_id)!r} of the state is not a run of {spec.name} "
            "(its id or experiment differs); left alone")
        return True
    by_host: dict[str, list[WorkerEntry]] = {}
    for w in run.workers:
        by_host.setdefault(w.host, []).append(w)
    if (exp_dir / run.run_id / MANIFEST).exists():
        _remove_worker_files(by_host, hosts, say)
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


def _recover_from(tmp: str, ops: OpsParts, run: InFlight, spec: Spec, hosts: _Machines,
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
        checked = owned_files(host, hosts.state.owner,
                              [f for w in workers for f in w.files.values()])
        refused = {f: why for f, why in checked.items() if why not in (None, "gone")}
        if refused:
            path, why = next(iter(refused.items()))
            say(f"run {run.run_id} ({run.label}): its records on {name} are not proven the "
                f"earlier run's ({path}: {why}); nothing of it is read or removed")
            return True
        if all(why == "gone" for why in checked.values()):
            say(f"run {run.run_id} ({run.label}): its work directory on {name} is gone, "
                "and the records with it")
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
        _remove_worker_files(by_host, hosts, say)
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
        load, probe = load_and_probe(plan, ops, tally(ops))  # a probe's ops apart
        manifest = finish_manifest(manifest, plan, ops, workers=statuses, errors=errors,
                                   interrupted=False, ended_utc=recovered["utc"],
                                   extra={"recovered": recovered}, load=load, probe=probe)
    write_run(out_dir, manifest, ops)
    _remove_worker_files(by_host, hosts, say)
    say(f"run {run.run_id} ({run.label}): {len(ops):,} records recovered and written as "
        f"{manifest.status} ({run.reason})")
    return True


def _remove_worker_files(by_host: dict[str, list[WorkerEntry]], hosts: _Machines,
                         say: Callable[[str], None]) -> None:
    for name, workers in by_host.items():
        host = hosts.get(name)
        if host is None:
            continue
        files = [f for w in workers for f in w.files.values()]
        for path, why in remove_owned_files(host, hosts.state.owner, files).items():
            if why not in (None, "gone"):
                say(f"{name}: {path} is not the earlier run's: {why}; left alone")


def recover(spec: Spec, out_dir: Path, say: Callable[[str], None] = print,
            lock: ExperimentLock | None = None, by: str = "harness run") -> Recovered:
    """Clear what earlier `harness run`s of `spec` into `out_dir` left (module
    docstring). With `lock` (held by the caller), what could not be cleared now is carried
    into its state (with the owner token that proves it), so it stays listed."""
    out_dir = Path(out_dir)
    exp_dir = out_dir / spec.name
    found = recover_temp_dirs(exp_dir, say)
    state = read_state(exp_dir)
    if state is None or state.empty():
        return found
    hosts = _Hosts(spec, say)
    left: list[State] = []
    try:
        for earlier in (state, *state.earlier):
            if not earlier.empty():
                rest = _recover_state(earlier, spec, out_dir, hosts, say, by, found)
                if not rest.empty():
                    left.append(rest)
    finally:
        hosts.close()
    if lock is not None:
        lock.state.earlier = left
        lock.save()
    return found


def _recover_state(state: State, spec: Spec, out_dir: Path, all_hosts: _Hosts,
                   say: Callable[[str], None], by: str, found: Recovered) -> State:
    """Clear what one earlier run's `state` lists; return what is left to clear later."""
    say(f"{spec.name}: the `harness run` of {state.started_utc} (pid {state.pid} on "
        f"{state.machine}) did not end cleanly; clearing what it left")
    left = State(pid=state.pid, machine=state.machine, started_utc=state.started_utc,
                 spec=state.spec, owner=state.owner, boots=dict(state.boots))
    if not is_token(state.owner):
        say(f"{spec.name}: that state holds no owner token of the kit, so nothing it lists "
            "can be proven the earlier run's; all of it is left alone")
        return left
    hosts = _Machines(all_hosts, state, say)
    # Clients first: stopped, they save what they measured; then it is fetched.
    by_host: dict[str, list[tuple[int, int | None, str]]] = {}
    for run in state.runs:
        for w in run.workers:
            by_host.setdefault(w.host, []).append(
                (w.pid, w.started_ticks, f"client {w.client} of run {run.run_id}"))
    for name, procs in by_host.items():
        host = hosts.get(name)
        if host is not None and hosts.same_boot(name, host):
            found.processes_stopped += _stop_processes(host, state.owner, procs,
                                                       WORKER_GRACE_S, say)
    for run in state.runs:
        if _recover_run(run, spec, out_dir, hosts, say, by):
            found.runs_written.append(run.run_id)
        else:
            left.runs.append(run)
            found.runs_left.append(run.run_id)
    servers: dict[str, list[ServerEntry]] = {}
    for s in state.servers:
        servers.setdefault(s.host, []).append(s)
    for name, entries in servers.items():
        host = hosts.get(name)
        if host is None:
            left.servers += entries
            continue
        if hosts.same_boot(name, host):
            found.processes_stopped += _stop_processes(
                host, state.owner, [(s.pid, s.started_ticks, f"{s.kind} server "
                                     f"{s.service!r}") for s in entries],
                SERVER_GRACE_S, say)
        _remove_dirs(host, state.owner, sorted({s.workdir for s in entries if s.workdir}),
                     "server work directory", say)
    kept_hosts = {w.host for r in left.runs for w in r.workers}
    for name, path in state.workdirs.items():
        host = hosts.get(name) if name not in kept_hosts else None
        if host is None:
            left.workdirs[name] = path
        else:
            _remove_dirs(host, state.owner, [path], "client work directory", say)
    if state.scratch and hosts.same_machine:
        _remove_dirs(LocalHost(), state.owner, state.scratch, "scratch directory", say)
    return left
