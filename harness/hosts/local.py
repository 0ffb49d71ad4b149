"""LocalHost: the Host interface on this machine (subprocess, no shell)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.errors import HostError
from harness.hosts.base import CommandResult, Host, Process


class LocalHost(Host):
    """This machine."""

    def __init__(self, name: str = "localhost", *, python: str | None = None) -> None:
        self.name = name
        self.address = "127.0.0.1"
        self.python = python or sys.executable
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def _run(self, argv: tuple[str, ...], *, timeout: float | None,
             env: Mapping[str, str] | None, cwd: str | None,
             input: str | None) -> CommandResult:
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
            raise HostError(
                f"{self.name}: command timed out after {timeout}s: {shlex.join(argv)}"
            ) from exc
        else:
            result = CommandResult(
                argv,
                proc.returncode,
                proc.stdout.decode("utf-8", "replace"),
                proc.stderr.decode("utf-8", "replace"),
                time.monotonic() - t0,
            )
        return result

    def _start(self, argv: tuple[str, ...], *, log_path: str,
               env: Mapping[str, str] | None, cwd: str | None) -> Process:
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
