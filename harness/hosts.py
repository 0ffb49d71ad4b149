"""One Host interface for running things locally or on a target machine over SSH.

`LocalHost` and `SSHHost` (in `harness.ssh`) behave the same: commands are argv lists
(never shell strings), background processes are started in their own session so the
whole process group can be stopped, and every host is a context manager.
"""

from __future__ import annotations

import abc
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import CommandError, HostError

LOCAL_NAMES = frozenset({"localhost", "local"})


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


@dataclass(frozen=True)
class HostSpec:
    """How to reach a host. `target` is `localhost` or an SSH target/alias."""

    name: str
    target: str = "localhost"
    python: str | None = None
    address: str | None = None
    known_hosts: str | None = None
    identity_file: str | None = None
    ssh_config: str | None = None
    accept_new_host_key: bool = False
    connect_timeout_s: float = 10.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.target in LOCAL_NAMES


class Host(abc.ABC):
    """Run commands and processes, move files. Subclasses implement the primitives."""

    name: str
    #: Address at which servers started on this host are reachable by clients.
    address: str
    #: Python interpreter on this host that can `import harness`.
    python: str

    # -- primitives ---------------------------------------------------------------
    @abc.abstractmethod
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

    @abc.abstractmethod
    def start(
        self,
        argv: Sequence[str],
        *,
        log_path: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Process:
        """Start argv in the background in a new session, output to `log_path`."""

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

    def clock_offset_ns(self, samples: int = 8) -> tuple[int, int]:
        """(offset, uncertainty) of this host's wall clock against this machine's, in ns:
        remote time = local time + offset, give or take the uncertainty (half the round
        trip of the best exchange). Hosts on this machine share its clock: (0, 0)."""
        return 0, 0

    def mkdtemp(self, prefix: str = "harness-") -> str:
        return self.run(["mktemp", "-d", "-t", f"{prefix}XXXXXX"]).stdout.strip()

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


class LocalHost(Host):
    """This machine."""

    def __init__(self, name: str = "localhost", *, python: str | None = None) -> None:
        self.name = name
        self.address = "127.0.0.1"
        self.python = python or sys.executable
        self._children: dict[int, subprocess.Popen[bytes]] = {}

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
        argv = tuple(str(a) for a in argv)
        t0 = time.monotonic()
        try:
            # Bytes, decoded leniently: text=True would translate \r\n and raise on
            # output that is not valid in the locale's encoding.
            proc = subprocess.run(
                argv,
                capture_output=True,
                timeout=timeout,
                env={**os.environ, **env} if env else None,
                cwd=cwd,
                input=None if input is None else input.encode(),
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            result = CommandResult(argv, code, "", _exec_failure(argv, cwd, exc), 0.0)
        except subprocess.TimeoutExpired as exc:
            raise HostError(f"{self.name}: command timed out after {timeout}s: "
                            f"{shlex.join(argv)}") from exc
        else:
            result = CommandResult(
                argv,
                proc.returncode,
                proc.stdout.decode("utf-8", "replace"),
                proc.stderr.decode("utf-8", "replace"),
                time.monotonic() - t0,
            )
        return check_result(result, self.name) if check else result

    def start(
        self,
        argv: Sequence[str],
        *,
        log_path: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Process:
        argv = tuple(str(a) for a in argv)
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            try:
                child = subprocess.Popen(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **env} if env else None,
                    cwd=cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                raise HostError(f"{self.name}: {_exec_failure(argv, cwd, exc)}") from None
        self._children[child.pid] = child
        return Process(self.name, child.pid, argv, log_path)

    def is_alive(self, proc: Process) -> bool:
        child = self._children.get(proc.pid)
        if child is not None:
            # poll() reaps our own children so that a dead one is not a zombie "alive".
            return child.poll() is None
        return super().is_alive(proc)  # os.kill(pid, 0) would call a zombie alive

    def signal(self, proc: Process, sig: str = "TERM", *, group: bool = True) -> bool:
        signum = getattr(signal, f"SIG{sig}")
        try:
            if group:
                os.killpg(proc.pid, signum)
            else:
                os.kill(proc.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def stop(self, proc: Process, *, timeout_s: float = 10.0) -> None:
        super().stop(proc, timeout_s=timeout_s)
        child = self._children.pop(proc.pid, None)
        if child is not None:
            try:
                child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                child.kill()

    def free_port(self) -> int:
        return free_port(self.address)

    def put(self, local: Path | str, remote: str) -> None:
        try:
            shutil.copyfile(local, remote)
        except OSError as exc:  # HostError, as from SSHHost, so callers catch one type
            raise HostError(f"{self.name}: cannot copy {local} to {remote}: {exc}") from exc

    def get(self, remote: str, local: Path | str) -> None:
        try:
            shutil.copyfile(remote, local)
        except OSError as exc:
            raise HostError(f"{self.name}: cannot copy {remote} to {local}: {exc}") from exc

    def close(self) -> None:
        pass


def _exec_failure(argv: Sequence[str], cwd: str | None, exc: OSError) -> str:
    """What a shell would say when argv cannot be executed (a missing cwd is not a
    missing command)."""
    if cwd is not None and not os.path.isdir(cwd):
        return f"cd: {cwd}: No such file or directory"
    if isinstance(exc, FileNotFoundError):
        return f"{argv[0]}: command not found"
    return f"{argv[0]}: {exc.strerror}"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on `host` (this machine only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def connect_host(spec: HostSpec) -> Host:
    """Open the host a spec describes: LocalHost for `localhost`, else SSHHost."""
    if spec.is_local:
        return LocalHost(spec.name, python=spec.python)
    from harness.ssh import SSHHost  # paramiko is only imported when SSH is used

    return SSHHost.connect(spec)
