"""SSHHost: the Host interface on a target machine over SSH (paramiko); how the client
is opened is in `sshconnect`.

Command strings are built with `shlex`, so every argv element reaches the program
literally; that assumes a POSIX login shell on the target, which is what OpenSSH runs
the command string with."""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import paramiko

from harness.errors import HostError, HostKeyError
from harness.hosts.base import CommandResult, Host, Process
from harness.hosts.hostspec import HostSpec
from harness.hosts.sshconnect import Endpoint, open_client, resolve
from harness.hosts.sshcopy import NoSFTPError, get_by_exec, put_by_exec
from harness.hosts.sshwatch import LinkWatch

_CHUNK = 1 << 16


#: Pauses before each attempt to replace a dead connection: bounded, growing backoff.
RECONNECT_DELAYS_S = (0.0, 0.5, 1.0, 2.0, 4.0)


#: How long opening a channel may take on a connection that looks alive.
OPEN_CHANNEL_TIMEOUT_S = 30.0


#: After a link went silent: how long a connection attempt may take, and how long
#: commands then fail at once before the next attempt.
SILENT_CONNECT_TIMEOUT_S = 5.0


SILENT_RETRY_S = 30.0


#: After a channel ended without an exit status, how long to wait for the transport to
#: notice a dead link (paramiko closes the channels before it marks itself inactive).
DEATH_GRACE_S = 2.0


class SSHHost(Host):
    """A machine reached over SSH; open one with `SSHHost.connect(spec)`."""

    def __init__(self, spec: HostSpec, client: paramiko.SSHClient, endpoint: Endpoint) -> None:
        self.name = spec.name
        self.address = spec.address or endpoint.host
        self.python = spec.python or "python3"
        self.target = f"{endpoint.user}@{endpoint.host}:{endpoint.port}"
        self._spec, self._endpoint = spec, endpoint
        self._client = client
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_transport: paramiko.Transport | None = None
        self._sftp_lock = threading.Lock()
        #: The server has no SFTP subsystem: files are copied with `cat` over exec.
        self._no_sftp = False
        self._conn_lock = threading.RLock()
        #: Connections opened in place of dead ones, and a line about each.
        self.reconnects = 0
        self.reconnect_log: list[str] = []
        self._closed = False
        #: Why the link was declared silent (`harness.sshwatch`), while it is down.
        self.link_silent: str | None = None
        self._next_try = 0.0
        self._watch = LinkWatch(self.name, self._current_transport, self._declare_silent)

    @classmethod
    def connect(cls, spec: HostSpec) -> SSHHost:
        ep = resolve(spec)
        return cls(spec, open_client(spec, ep), ep)

    def reconnect(self, reason: str) -> None:
        """Replace the connection with a new one (same endpoint, same host-key checks),
        trying after each pause of `RECONNECT_DELAYS_S`: HostError when every try failed,
        HostKeyError at once if the host key is now unknown or different. Processes
        started with `start` run in sessions of their own and outlive the old connection;
        a command that was running over it is not re-run."""
        with self._conn_lock:
            self._sftp = self._sftp_transport = None  # on the dead transport; reopened lazily
            with contextlib.suppress(Exception):  # whatever state the dead client is in
                self._client.close()
            last: HostError | None = None
            t0 = time.monotonic()
            for attempt, delay in enumerate(RECONNECT_DELAYS_S, 1):
                time.sleep(delay)
                try:
                    self._client = open_client(self._spec, self._endpoint)
                except HostKeyError:
                    raise
                except HostError as exc:
                    last = exc
                    continue
                self.reconnects += 1
                self.reconnect_log.append(
                    f"SSH connection to {self.target} lost ({reason}); re-established after "
                    f"{time.monotonic() - t0:.1f} s (attempt {attempt})")
                return
            raise HostError(
                f"{self.name}: SSH connection to {self.target} lost ({reason}) and not "
                f"re-established: {len(RECONNECT_DELAYS_S)} attempts over "
                f"{sum(RECONNECT_DELAYS_S):g} s failed; last: {last}")

    def _current_transport(self) -> paramiko.Transport | None:
        return None if self._closed else self._client.get_transport()

    def _declare_silent(self, transport: paramiko.Transport, reason: str) -> None:
        """Called by the link watch: closing the transport ends every command, channel
        and copy blocked on it; until the machine answers again, commands fail at once
        (one connection attempt per `SILENT_RETRY_S`)."""
        if transport is not self._client.get_transport():
            return  # replaced meanwhile
        self.link_silent = f"SSH link to {self.target} lost ({reason})"
        self._next_try = time.monotonic() + SILENT_RETRY_S
        transport.close()

    def _retry_silent(self) -> None:
        """One quick connection attempt to a machine whose link went silent (a dead
        machine must not cost the full reconnect backoff on every command)."""
        if time.monotonic() < self._next_try:
            raise HostError(f"{self.name}: {self.link_silent}; not retried for "
                            f"{self._next_try - time.monotonic():.0f} s more")
        spec = replace(self._spec, connect_timeout_s=min(self._spec.connect_timeout_s,
                                                         SILENT_CONNECT_TIMEOUT_S))
        try:
            self._client = open_client(spec, self._endpoint)
        except HostError as exc:
            self._next_try = time.monotonic() + SILENT_RETRY_S
            raise HostError(f"{self.name}: {self.link_silent}; still unreachable: "
                            f"{exc}") from exc
        self.reconnects += 1
        self.reconnect_log.append(f"{self.link_silent}; re-established")
        self.link_silent = None

    def _live_transport(self) -> paramiko.Transport:
        """The connection's transport; a dead one is replaced first (`reconnect`)."""
        with self._conn_lock:
            if self._closed:
                raise HostError(f"{self.name}: SSH connection to {self.target} was closed")
            transport = self._client.get_transport()
            if self.link_silent is not None and (transport is None or
                                                 not transport.is_active()):
                self._sftp = self._sftp_transport = None
                self._retry_silent()
                transport = self._client.get_transport()
            if transport is None or not transport.is_active():
                self.reconnect("found closed")
                transport = self._client.get_transport()
            if transport is None:
                raise HostError(f"{self.name}: SSH connection to {self.target} is closed")
            return transport

    # -- primitives ---------------------------------------------------------------
    def _run(self, argv: tuple[str, ...], *, timeout: float | None,
             env: Mapping[str, str] | None, cwd: str | None,
             input: str | None) -> CommandResult:
        command = _command(argv, env)
        if cwd is not None:
            command = f"cd -- {shlex.quote(cwd)} && {command}"
        # sshd runs the command in a session of its own, led by the shell; on timeout we
        # kill that process group, so the shell first tells us its pid on stderr.
        mark = f"harness-pid-{uuid.uuid4().hex}:"
        if timeout is not None:
            command = f"echo {mark}$$ >&2; {command}"
        t0 = time.monotonic()
        out, err, status = self._exec(command, input, timeout)
        head, found, tail = err.partition(mark)
        pid, _, tail = tail.partition("\n")
        err = head + tail if found else err
        if status is None:
            if pid.isdigit():
                self.run(["kill", "-KILL", "--", f"-{pid}"], check=False, timeout=30)
            raise HostError(f"{self.name}: command timed out after {timeout}s: {shlex.join(argv)}")
        result = CommandResult(argv, status, out, err, time.monotonic() - t0)
        return result

    def _start(self, argv: tuple[str, ...], *, log_path: str,
               env: Mapping[str, str] | None, cwd: str | None) -> Process:
        q = shlex.quote
        # The child prints its own pid after setsid() and before exec, so when this
        # returns the pid is already its group leader (no race with an early stop()).
        # fd 3 keeps a relative log_path relative to the login directory, not to cwd.
        script = [
            "set -e",
            f"mkdir -p -- {q(os.path.dirname(log_path) or '.')}",
            f"exec 3>>{q(log_path)}",
            *([f"cd -- {q(cwd)}"] if cwd is not None else []),
            f"command -v {q(argv[0])} >/dev/null || "
            f"{{ echo {q(argv[0] + ': command not found')} >&2; exit 127; }}",
            "setsid sh -c 'echo $$ >&4; exec 4>&-; exec \"$@\"' sh "
            f"{_command(argv, env)} 4>&1 >&3 2>&1 3>&- </dev/null &",
        ]
        res = self.run(["sh", "-c", "\n".join(script)], check=False, timeout=60)
        if not res.ok or not res.stdout.strip().isdigit():
            detail = (res.stderr or res.stdout).strip()
            raise HostError(f"{self.name}: cannot start {shlex.join(argv)}: {detail}")
        return Process(self.name, int(res.stdout.strip()), argv, log_path)

    def open_channel(self, argv: Sequence[str], env: Mapping[str, str] | None = None
                     ) -> paramiko.Channel:
        """A channel running argv (with `env` added to its environment) and left open,
        for a long-lived line protocol (`harness.run.agentctl`); closing it ends the
        program's input."""
        transport = self._live_transport()
        try:
            chan = transport.open_session(timeout=OPEN_CHANNEL_TIMEOUT_S)
            chan.exec_command(_command(argv, env))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise HostError(f"{self.name}: cannot start {shlex.join(argv)} on "
                            f"{self.target}: {exc}") from exc
        return chan

    def clock_offset_ns(self, samples: int = 8) -> tuple[int, int]:
        """Ping-pong with one `workerctl clock` process over one channel and keep the
        exchange with the shortest round trip (as NTP does): a one-shot remote command
        would be skewed by the ~0.1-0.2 s shell start-up on one side of the exchange."""
        chan = self._live_transport().open_session(timeout=10)
        try:
            chan.exec_command(_command([self.python, "-m", "harness.workerctl", "clock"], None))
            stream = chan.makefile("rb")
            best: tuple[int, int] | None = None
            for _ in range(samples):
                t0 = time.time_ns()
                chan.sendall(b"?\n")
                line = stream.readline()
                t1 = time.time_ns()
                if not line.strip().isdigit():
                    raise HostError(f"{self.name}: clock exchange failed: {line!r}")
                rtt = t1 - t0
                offset = int(line) - (t0 + t1) // 2
                if best is None or rtt < 2 * best[1]:
                    best = (offset, rtt // 2)
            assert best is not None
            return best
        finally:
            chan.close()

    def put(self, local: Path | str, remote: str) -> None:
        transport = self._live_transport()  # outside the SFTP lock: it may reconnect
        with self._sftp_lock:
            try:
                sftp = None if self._no_sftp else self._open_sftp(transport)
            except NoSFTPError:
                sftp = None
            try:
                if sftp is not None:
                    sftp.put(str(local), remote)
                    return
            except (OSError, EOFError, paramiko.SSHException) as exc:
                raise HostError(f"{self.name}: cannot copy {local} to {remote}: {exc}") from exc
        put_by_exec(transport, self.name, local, remote)

    def get(self, remote: str, local: Path | str) -> None:
        """Copy over SFTP, or over an exec channel (`cat`) where the server has no SFTP
        subsystem (hardened machines often have none)."""
        transport = self._live_transport()
        if self._no_sftp:
            get_by_exec(transport, self.name, remote, local)
            return
        with self._sftp_lock:
            try:
                sftp = self._open_sftp(transport)
            except NoSFTPError:
                sftp = None
            try:
                if sftp is not None:
                    # Open the remote file first so a missing one leaves no empty local file.
                    with sftp.open(remote, "rb") as src:
                        src.prefetch()
                        with open(local, "wb") as dst:
                            while chunk := src.read(_CHUNK):
                                dst.write(chunk)
                    return
            except (OSError, EOFError, paramiko.SSHException) as exc:
                raise HostError(f"{self.name}: cannot copy {remote} to {local}: {exc}") from exc
        get_by_exec(transport, self.name, remote, local)

    def close(self) -> None:
        with self._sftp_lock:
            if self._sftp is not None:
                with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                    self._sftp.close()
                self._sftp = self._sftp_transport = None
        self._watch.close()
        with self._conn_lock:
            self._closed = True
            self._client.close()

    # -- helpers ------------------------------------------------------------------
    def _open_sftp(self, transport: paramiko.Transport) -> paramiko.SFTPClient:
        """The SFTP session on `transport` (a new one after a reconnect); NoSFTPError
        if the server has no SFTP subsystem (remembered: later copies use `cat`)."""
        if self._sftp is None or self._sftp_transport is not transport:
            try:
                chan = transport.open_session(timeout=OPEN_CHANNEL_TIMEOUT_S)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise HostError(f"{self.name}: cannot open SFTP on {self.target}: {exc}") from exc
            try:
                chan.invoke_subsystem("sftp")
                sftp = paramiko.SFTPClient(chan)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                chan.close()
                if transport.is_active():  # the link is up: the server refused SFTP
                    self._no_sftp = True
                    raise NoSFTPError(f"{self.name}: no SFTP subsystem on {self.target}: "
                                      f"{exc or type(exc).__name__}") from exc
                raise HostError(f"{self.name}: cannot open SFTP on {self.target}: {exc}") from exc
            self._sftp, self._sftp_transport = sftp, transport
        return self._sftp

    def _exec(
        self, command: str, stdin: str | None, timeout: float | None
    ) -> tuple[str, str, int | None]:
        """Run `command`; (stdout, stderr, exit status), the status None on timeout.

        stdin is written and stdout/stderr read in parallel threads: a command that
        fills one stream's window while we block on another would otherwise hang.
        """
        transport = self._live_transport()
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            chan = transport.open_session(timeout=OPEN_CHANNEL_TIMEOUT_S)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if transport.is_active():  # e.g. the server refused a channel: not a dead link
                raise HostError(f"{self.name}: SSH channel to {self.target} refused: "
                                f"{exc}") from exc
            # Nothing was started over the dead link: replace it, then try once more.
            self.reconnect(f"opening a channel failed: {exc or type(exc).__name__}")
            transport = self._live_transport()
            try:
                chan = transport.open_session(timeout=OPEN_CHANNEL_TIMEOUT_S)
            except (paramiko.SSHException, OSError, EOFError) as exc2:
                raise HostError(f"{self.name}: SSH connection to {self.target} failed: "
                                f"{exc2}") from exc2
        try:
            chan.exec_command(command)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            chan.close()
            raise HostError(f"{self.name}: SSH connection to {self.target} failed as a "
                            f"command started (it may have run; not retried): {exc}") from exc

        def read(recv: Callable[[int], bytes], sink: list[bytes]) -> None:
            while chunk := recv(_CHUNK):
                sink.append(chunk)

        def write() -> None:
            try:
                if stdin:
                    chan.sendall(stdin.encode())
                chan.shutdown_write()
            except OSError:
                pass  # the command exited without reading all of its input, as locally

        threads = [
            threading.Thread(target=read, args=(chan.recv, out), daemon=True),
            threading.Thread(target=read, args=(chan.recv_stderr, err), daemon=True),
            threading.Thread(target=write, daemon=True),
        ]
        deadline = None if timeout is None else time.monotonic() + timeout
        with chan:
            for t in threads:
                t.start()
            for t in threads:
                t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if any(t.is_alive() for t in threads) or not chan.status_event.wait(left):
                status = None  # closing the channel ends the threads
            else:
                # paramiko ignores `exit-signal`: a command killed by a signal reports -1.
                status = chan.exit_status
        if status == -1 and _dies_within(transport, DEATH_GRACE_S):
            # The command's fate is unknown; it is not re-run, but the next command
            # reconnects (`_live_transport`).
            why = f" ({self.link_silent})" if self.link_silent else ""
            raise HostError(f"{self.name}: SSH connection to {self.target} was lost while a "
                            f"command ran (not re-run){why}")
        return _decode(out), _decode(err), status


def _dies_within(transport: paramiko.Transport, seconds: float) -> bool:
    """True if `transport` is or becomes inactive within `seconds`: a channel that ended
    without an exit status is either a command killed by a signal (the transport stays
    up) or a dead link (the transport goes down just after closing its channels)."""
    deadline = time.monotonic() + seconds
    while transport.is_active():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _command(argv: Sequence[str], env: Mapping[str, str] | None) -> str:
    if not argv:
        raise ValueError("argv must not be empty")
    if env and any(not k or "=" in k for k in env):
        raise ValueError(f"bad environment variable name in {sorted(env)}")
    prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    return shlex.join([*prefix, *argv])


def _decode(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", "replace")
