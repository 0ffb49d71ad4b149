"""The Host interface: what every machine offers, local or over SSH.

`LocalHost` (`harness.hosts.local`) and `SSHHost` (`harness.hosts.ssh`) behave the same:
commands are argv lists (never shell strings), background processes are started in
their own session so the whole process group can be stopped, and every host is a
context manager. This module never imports SSH: paramiko loads only when SSH is used.
"""

from __future__ import annotations

import abc
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CommandError

#: `harness.hosts.owned` names them too; here so that the interface imports nothing.
OWNER_ENV = "KVBENCH_OWNER"
OWNER_MARK = ".kvbench-owner"


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass(frozen=True)
class Process:
    """A background process on a host; `pid` is also its process-group id."""

    host: str
    pid: int
    argv: tuple[str, ...]
    log_path: str


class Host(abc.ABC):
    """Run commands and processes, move files. Subclasses implement the primitives."""

    name: str
    #: Address at which servers started on this host are reachable by clients.
    address: str
    #: Python interpreter on this host that can `import harness`.
    python: str
    #: The owner token of the `harness run` using this host (`harness.hosts.owned`): set,
    #: every process started here carries it in its environment and every work directory
    #: made here holds it in a mark file, so that a later clean-up can prove them its own.
    owner: str | None = None

    # -- commands: the shared part here, each host kind's own in `_run` / `_start` -----
    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        input: str | None = None,
    ) -> CommandResult:
        """Run argv to completion; raise CommandError on non-zero exit when `check`."""
        result = self._run(tuple(str(a) for a in argv), timeout=timeout, env=env, cwd=cwd,
                           input=input)
        return check_result(result, self.name) if check else result

    def start(
        self,
        argv: Sequence[str],
        *,
        log_path: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Process:
        """Start argv in the background in a new session, output to `log_path`; with the
        host's owner token in its environment."""
        if self.owner:
            env = {**(env or {}), OWNER_ENV: self.owner}
        return self._start(tuple(str(a) for a in argv), log_path=log_path, env=env, cwd=cwd)

    # -- primitives ---------------------------------------------------------------
    @abc.abstractmethod
    def _run(self, argv: tuple[str, ...], *, timeout: float | None,
             env: Mapping[str, str] | None, cwd: str | None,
             input: str | None) -> CommandResult:
        """Run argv (already strings) to completion and report it; never checks."""

    @abc.abstractmethod
    def _start(self, argv: tuple[str, ...], *, log_path: str,
               env: Mapping[str, str] | None, cwd: str | None) -> Process:
        """Start argv (already strings) in the background; see `start`."""

    @abc.abstractmethod
    def put(self, local: Path | str, remote: str) -> None:
        """Copy a local file to this host."""

    @abc.abstractmethod
    def get(self, remote: str, local: Path | str) -> None:
        """Copy a file from this host to the local machine."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections. Does not stop processes started with `start`."""

    # -- built on the primitives, identical for every host ---------------------------
    def is_alive(self, proc: Process) -> bool:
        # `kill -0` also succeeds on a zombie, and an orphan whose init reaps late (or
        # never, in containers) stays one after it died; so read the state where /proc
        # exists (for any user's process), and a zombie counts as gone.
        script = (
            'if [ -r "/proc/$1/stat" ]; then read -r s < "/proc/$1/stat" || exit 1; '
            's=${s##*") "}; [ "${s%% *}" != Z ]; else kill -0 "$1" 2>/dev/null; fi'
        )
        return self.run(["sh", "-c", script, "sh", str(proc.pid)], check=False).ok

    def signal(self, proc: Process, sig: str = "TERM", *, group: bool = True) -> bool:
        """Send SIG (e.g. TERM, KILL, STOP, CONT) to the process (group); False if gone."""
        target = f"-{proc.pid}" if group else str(proc.pid)
        return self.run(["kill", f"-{sig}", "--", target], check=False).ok

    def stop(self, proc: Process, *, timeout_s: float = 10.0) -> None:
        """TERM the process group, wait up to `timeout_s`, then KILL it."""
        if not self.signal(proc, "TERM"):
            return
        # A stopped (SIGSTOP) process cannot act on TERM until it is continued.
        self.signal(proc, "CONT")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.is_alive(proc):
                return
            time.sleep(0.05)
        self.signal(proc, "KILL")

    def start_ticks(self, pids: Sequence[int]) -> dict[int, int]:
        """Start time (clock ticks after boot, /proc/<pid>/stat field 22) of each of `pids`
        that runs now: with the pid, it names one process, so a pid the kernel handed to
        another process since is told apart. One command for all pids."""
        if not pids:
            return {}
        script = ('for p; do if [ -r "/proc/$p/stat" ]; then read -r s < "/proc/$p/stat" '
                  '&& echo "$p ${s##*) }"; fi; done')
        res = self.run(["sh", "-c", script, "sh", *map(str, pids)], check=False)
        out: dict[int, int] = {}
        for line in res.stdout.splitlines():
            pid, _, rest = line.partition(" ")
            fields = rest.split()  # from field 3 (state) on: the start time is field 22
            if len(fields) > 19 and fields[0] != "Z":
                out[int(pid)] = int(fields[19])
        return out

    def clock_offset_ns(self, samples: int = 8) -> tuple[int, int]:
        """(offset, uncertainty) of this host's wall clock against this machine's, in ns:
        remote time = local time + offset, give or take the uncertainty (half the round
        trip of the best exchange). Hosts on this machine share its clock: (0, 0)."""
        return 0, 0

    def mkdtemp(self, prefix: str = "harness-") -> str:
        """A new private directory in the host's temp directory, as a canonical path,
        holding the owner mark when the host has an owner (`harness.hosts.owned`)."""
        script = ('d=$(mktemp -d -t "${1}XXXXXX") || exit 1; '
                  'r=$(realpath -e -- "$d" 2>/dev/null) || r=$d; '
                  'if [ -n "$2" ]; then (umask 077; printf %s "$2" > "$r/$3") || exit 1; fi; '
                  'echo "$r"')
        return self.run(["sh", "-c", script, "sh", prefix, self.owner or "",
                         OWNER_MARK]).stdout.strip()

    def which(self, name: str) -> str | None:
        res = self.run(["sh", "-c", 'command -v "$1"', "sh", name], check=False)
        return res.stdout.strip() or None if res.ok else None

    def read_text(self, path: str) -> str:
        return self.run(["cat", "--", path]).stdout

    def write_text(self, path: str, text: str) -> None:
        self.run(["sh", "-c", 'cat > "$1"', "sh", path], input=text)

    def remove_tree(self, path: str) -> None:
        self.run(["rm", "-rf", "--", path], check=False)

    def exists(self, path: str) -> bool:
        return self.run(["test", "-e", path], check=False).ok

    def free_port(self) -> int:
        """A TCP port that was free a moment ago on this host's `address`."""
        code = (
            "import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0)); "
            "print(s.getsockname()[1])"
        )
        return int(self.run([self.python, "-c", code, self.address]).stdout.strip())

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def check_result(result: CommandResult, host: str) -> CommandResult:
    if not result.ok:
        cmd = shlex.join(result.argv)
        detail = (result.stderr or result.stdout).strip()[-2000:]
        raise CommandError(
            f"{host}: command failed with exit {result.returncode}: {cmd}\n{detail}", result
        )
    return result
