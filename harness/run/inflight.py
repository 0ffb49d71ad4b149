"""What a running `harness run` has started, on disk, so that nothing outlives a kill.

Each experiment directory gets a hidden ``.harness/`` with two files:

- ``lock``: held (flock) by the one `harness run` writing into the experiment; a second
  one is refused with the holder's pid, machine and start time. The kernel releases it
  when the holder dies, however it dies.
- ``state.json``: the servers it started (host, pid, process start time, work
  directory), the client machines' work directories, the local scratch directory, and
  the run in flight: its manifest so far and every client process's record files. It is
  rewritten (atomically) whenever that changes and removed when `harness run` ends
  cleanly. A state file found by the next `harness run`, `--resume` or `harness
  cleanup` was left by a run that did not end cleanly: `harness.run.recovery` stops what it
  lists and writes the records it names as runs.

Readers of raw results never see it: runs are the directories holding a manifest.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import paths
from harness.errors import HarnessError, ResultsError
from harness.hosts import Host
from harness.hosts.owned import boot_id, new_token

STATE_DIR = ".harness"
STATE_FILE = "state.json"
LOCK_FILE = "lock"
#: 2: the owner token and the machines' boot ids (a state without them proves nothing).
STATE_VERSION = 2


@dataclass
class ServerEntry:
    """One server process started on `host` (a spec host name)."""

    service: str
    kind: str
    host: str
    pid: int
    #: /proc/<pid>/stat's start time (clock ticks after boot): a pid reused by another
    #: process since is never signalled.
    started_ticks: int | None = None
    workdir: str | None = None


@dataclass
class WorkerEntry:
    """One client process of the run in flight and where its records go."""

    host: str
    client: int
    pid: int
    files: dict[str, str]
    started_ticks: int | None = None


@dataclass
class InFlight:
    """A run whose records exist (or will) on client machines but not yet as a run
    directory. `manifest` is what the runner knows of it so far (the final one once a
    write failed); `reason` says why it was left (for the recovery's line)."""

    run_id: str
    label: str
    manifest: dict[str, Any]
    workers: list[WorkerEntry] = field(default_factory=list)
    reason: str = ""
    #: `manifest` is final (status decided, only the write failed): written as it is.
    final: bool = False


@dataclass
class State:
    version: int = STATE_VERSION
    pid: int = 0
    machine: str = ""
    started_utc: str = ""
    spec: str = ""
    #: The run's owner token (`harness.hosts.owned`): in the environment of every process
    #: it started and in a mark file in every work directory it made. Recovery acts only
    #: on what carries it.
    owner: str = ""
    #: host name -> that machine's boot id when the run began: a pid and its start time
    #: name a process only within one boot of one machine.
    boots: dict[str, str] = field(default_factory=dict)
    servers: list[ServerEntry] = field(default_factory=list)
    #: client host name -> its work directory (records of runs in flight are in it).
    workdirs: dict[str, str] = field(default_factory=dict)
    #: Local directories of this process (copies being collected): removed on recovery.
    scratch: list[str] = field(default_factory=list)
    runs: list[InFlight] = field(default_factory=list)
    #: What the recovery of earlier runs could not clear yet (an unreachable machine),
    #: each with its own owner token: listed for the next attempt, proven then.
    earlier: list[State] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any], nested: bool = False) -> State:
        """The state as written by `ExperimentLock.save`; ValueError naming the first
        field that is not of its type (the file was not written by this kit)."""
        def entries(value: Any, where: str, kind: type, shape: dict[str, tuple[type, ...]],
                    nested: Any = None) -> list[Any]:
            out = []
            for i, item in enumerate(_typed(value, list, where)):
                item = _typed(item, dict, f"{where}[{i}]")
                unknown = set(item) - set(shape)
                if unknown:
                    raise ValueError(f"{where}[{i}]: unknown field {sorted(unknown)[0]!r}")
                for key, types in shape.items():
                    if key in item:
                        _typed(item[key], types, f"{where}[{i}].{key}")
                out.append(kind(**(nested(item, f"{where}[{i}]") if nested else item)))
            return out

        def run(item: dict[str, Any], where: str) -> dict[str, Any]:
            return {**item, "workers": entries(item.get("workers", []), f"{where}.workers",
                                               WorkerEntry, _WORKER)}

        for key in ("pid", "version"):
            _typed(data.get(key, 0), int, key)
        strings = {k: _typed(data.get(k, ""), str, k)
                   for k in ("machine", "started_utc", "spec", "owner")}
        return cls(version=data.get("version", 0), pid=data.get("pid", 0), **strings,
                   boots=_str_map(data.get("boots", {}), "boots"),
                   servers=entries(data.get("servers", []), "servers", ServerEntry, _SERVER),
                   workdirs=_str_map(data.get("workdirs", {}), "workdirs"),
                   scratch=[_typed(p, str, "scratch[]") for p in
                            _typed(data.get("scratch", []), list, "scratch")],
                   runs=entries(data.get("runs", []), "runs", InFlight, _RUN, run),
                   earlier=[] if nested else [
                       cls.from_dict(_typed(e, dict, "earlier[]"), nested=True)
                       for e in _typed(data.get("earlier", []), list, "earlier")])

    def empty(self) -> bool:
        return not (self.servers or self.workdirs or self.scratch or self.runs
                    or any(not e.empty() for e in self.earlier))


_INT = (int,)
_OPT_INT = (int, type(None))
_STR = (str,)
_OPT_STR = (str, type(None))
_SERVER = {"service": _STR, "kind": _STR, "host": _STR, "pid": _INT,
           "started_ticks": _OPT_INT, "workdir": _OPT_STR}
_WORKER = {"host": _STR, "client": _INT, "pid": _INT, "files": (dict,),
           "started_ticks": _OPT_INT}
_RUN = {"run_id": _STR, "label": _STR, "manifest": (dict,), "workers": (list,),
        "reason": _STR, "final": (bool,)}


def _typed(value: Any, types: type | tuple[type, ...], where: str) -> Any:
    kinds = types if isinstance(types, tuple) else (types,)
    # bool is an int to Python, never to a state file.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ValueError(f"{where}: {type(value).__name__} where the kit writes "
                         f"{' or '.join(t.__name__ for t in kinds)}")
    return value


def _str_map(value: Any, where: str) -> dict[str, str]:
    return {_typed(k, str, where): _typed(v, str, f"{where}[{k!r}]")
            for k, v in _typed(value, dict, where).items()}


def state_dir(exp_dir: Path) -> Path:
    return Path(exp_dir) / STATE_DIR


def read_state(exp_dir: Path) -> State | None:
    """The state a previous `harness run` left in `exp_dir`, or None."""
    path = state_dir(exp_dir) / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: unreadable state of an earlier run ({exc}); look at "
                           "it, then remove it to go on") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise ResultsError(f"{path}: state of a different kit version; look at it, then "
                           "remove it to go on")
    try:
        state = State.from_dict(data)
        for w in (w for r in state.runs for w in r.workers):
            _str_map(w.files, "runs[].workers[].files")
    except (TypeError, ValueError) as exc:
        raise ResultsError(f"{path}: not a state file this kit wrote ({exc}); nothing it "
                           "lists was touched; look at it, then remove it to go on"
                           ) from None
    return state


class ExperimentLock:
    """The experiment directory's lock and this process's state file in it."""

    def __init__(self, exp_dir: Path, spec: str = "") -> None:
        self.exp_dir = Path(exp_dir)
        self.dir = state_dir(self.exp_dir)
        self.state = State(pid=os.getpid(), machine=socket.gethostname(),
                           started_utc=datetime.now(UTC).isoformat(timespec="seconds"),
                           spec=spec, owner=new_token())
        self._fd: int | None = None
        #: Why the last `save` could not write the state file (None: it did).
        self.unsaved: str | None = None

    # -- the lock ---------------------------------------------------------------------
    def acquire(self) -> None:
        """Take the lock or raise ResultsError naming the process that holds it."""
        if self.dir.is_symlink():  # the lock and the state would be written elsewhere
            raise ResultsError(f"{self.dir} is a symbolic link: the kit keeps its lock and "
                               "state only in a directory of its own; remove the link")
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / LOCK_FILE
        try:
            # O_NOFOLLOW: truncating and writing a lock planted as a link would change the
            # file it points at.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ResultsError(f"{path}: cannot be opened as the experiment's lock "
                               f"({exc.strerror}); a symbolic link there is not followed: "
                               "remove it") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ResultsError(
                f"{self.exp_dir}: another `harness run` is writing this experiment "
                f"({holder}); wait for it to end or stop it, then run again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (f"pid {self.state.pid} on {self.state.machine}, started "
                       f"{self.state.started_utc}, spec {self.state.spec}\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Remove the state (everything it listed is gone) and drop the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            (self.dir / STATE_FILE).unlink()
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = None

    def keep(self) -> None:
        """Drop the lock but keep the state: something it lists is still out there (a
        run's records on a client machine, a server that could not be stopped)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- the state ----------------------------------------------------------------------
    def save(self) -> None:
        """Write the state atomically (no fsync: it guards against a killed process,
        whose writes the kernel keeps, not against a lost machine)."""
        if self._fd is None:
            return
        path = self.dir / STATE_FILE
        if self.state.empty():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        try:
            # Never through a link planted in the tree (`paths.created`).
            with paths.created(path) as f:
                f.write(json.dumps(asdict(self.state), indent=1, default=str,
                                   allow_nan=False) + "\n")
        except (OSError, HarnessError) as exc:
            # A full disk must not turn into a traceback that hides what was kept: the
            # last state written stays, and the caller names what could not be saved.
            self.unsaved = f"{path} could not be updated ({getattr(exc, 'strerror', 0) or exc})"
        else:
            self.unsaved = None

    def add_servers(self, entries: list[ServerEntry]) -> None:
        self.state.servers += entries
        self.save()

    def remove_server(self, host: str, pid: int) -> None:
        self.state.servers = [s for s in self.state.servers
                              if not (s.host == host and s.pid == pid)]
        self.save()

    def add_workdir(self, host: str, path: str) -> None:
        self.state.workdirs[host] = path
        self.save()

    def remove_workdir(self, host: str) -> None:
        self.state.workdirs.pop(host, None)
        self.save()

    def add_scratch(self, path: str) -> None:
        self.state.scratch.append(path)
        self.save()

    def remove_scratch(self, path: str) -> None:
        self.state.scratch = [p for p in self.state.scratch if p != path]
        self.save()

    def begin_run(self, run: InFlight) -> None:
        self.state.runs.append(run)
        self.save()

    def update_run(self, run_id: str, **changes: Any) -> None:
        for r in self.state.runs:
            if r.run_id == run_id:
                for k, v in changes.items():
                    setattr(r, k, v)
        self.save()

    def end_run(self, run_id: str) -> None:
        """The run is written and its client files are removed (or were never there)."""
        self.state.runs = [r for r in self.state.runs if r.run_id != run_id]
        self.save()

    def own(self, hosts: Mapping[str, Host]) -> None:
        """Give `hosts` this run's owner token (`harness.hosts.owned`) and record each
        machine's boot id, before anything is started or made on them."""
        for name, host in hosts.items():
            host.owner = self.state.owner
            self.state.boots[name] = boot_id(host)
        self.save()

    def run_hosts(self) -> set[str]:
        """Client machines that hold records of a run not yet written."""
        return {w.host for r in self.state.runs for w in r.workers}
