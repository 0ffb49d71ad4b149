"""Helpers shared by the service launchers: undo-on-failure, readiness polling, probes.

Everything here goes through the `Host` API (or plain TCP from the harness machine), so
the launchers behave the same on a LocalHost and an SSHHost.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from harness.drivers.replies import MAX_REPLY_BYTES
from harness.drivers.tls import client_context, server_hostname
from harness.errors import HarnessError, HostError, ServiceError
from harness.hosts import Host, Process
from harness.hosts.endpoint import TLSConfig
from harness.services.base import Endpoint, RunningService, Service
from harness.settings import check_bounds

T = TypeVar("T")

DEFAULT_READY_TIMEOUT_S = 30.0


class ProbeError(HarnessError):
    """A server answered a probe, but not as expected (a launch turns it into a
    ServiceError with the server's log; a run's telemetry into a note)."""


class NotReady(ProbeError):
    """A readiness probe got through but the server is not serving yet."""


def log_tail(host: Host, path: str, lines: int = 40) -> str:
    """The last `lines` lines of a log on `host`, or a note saying why there are none."""
    try:
        text = host.read_text(path)
    except HostError as exc:
        return f"(log {path} unreadable: {exc})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else f"(log {path} is empty)"


def host_is_root(host: Host) -> bool:
    return host.run(["id", "-u"]).stdout.strip() == "0"


class Launch:
    """What one `start()` has created, so that any failure undoes all of it.

    Use as a context manager: on an exception the started processes are stopped and the
    workdir is removed before the exception propagates; host, socket and probe errors
    become ServiceError, with the log tail.
    """

    def __init__(self, host: Host, kind: str, name: str) -> None:
        self.host = host
        self.kind = kind
        self.name = name
        self.processes: list[Process] = []
        self.workdir = host.mkdtemp(prefix=f"harness-{kind}-")
        self.log_path = f"{self.workdir}/{kind}.log"

    def __enter__(self) -> Launch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            return
        # Read the log before cleanup removes it; the tail usually says what went wrong.
        error = None
        if isinstance(exc, (HostError, OSError, ProbeError)):
            error = self.fail(f"could not start: {exc}")
        self.cleanup()
        if error is not None:
            raise error from exc

    @property
    def what(self) -> str:
        return f"{self.kind} {self.name!r} on {self.host.name}"

    def cleanup(self) -> None:
        for proc in reversed(self.processes):
            # Best effort: the error that got us here is the one worth reporting.
            with contextlib.suppress(HostError):
                self.host.stop(proc)
        self.host.remove_tree(self.workdir)

    def start(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> Process:
        proc = self.host.start(argv, log_path=self.log_path, env=env, cwd=self.workdir)
        self.processes.append(proc)
        return proc

    def fail(self, message: str) -> ServiceError:
        """A ServiceError for `message` with the server log's tail appended."""
        return ServiceError(
            # The log goes with the work directory when the server is stopped: its
            # tail is here, not only its path.
            f"{self.what}: {message}\n--- last lines of its log ({self.log_path}, removed "
            "with its work directory) ---\n"
            f"{log_tail(self.host, self.log_path)}"
        )

    def wait_until_ready(
        self,
        proc: Process,
        probe: Callable[[], T],
        *,
        timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        interval_s: float = 0.05,
    ) -> T:
        """Call `probe` until it returns; fail early if `proc` exits, or at the deadline.

        `probe` signals "not yet" by raising OSError (refused, reset, timeout) or NotReady.
        """
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while True:
            if not self.host.is_alive(proc):
                raise self.fail("exited before it became ready")
            try:
                return probe()
            except (OSError, NotReady) as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise self.fail(f"not ready after {timeout_s:g} s (last probe: {last})")
            time.sleep(interval_s)

    def running(
        self, endpoint: Endpoint, version: str, config: dict[str, Any]
    ) -> RunningService:
        return RunningService(
            name=self.name,
            kind=self.kind,
            host=self.host,
            endpoint=endpoint,
            version=version,
            config=config,
            processes=list(self.processes),
            workdir=self.workdir,
        )


@dataclass(frozen=True)
class Reply:
    """What a server sent back: `data`, and `cut` when reading stopped at the byte bound
    before the reply was whole (the rest is left unread)."""

    data: bytes
    cut: bool = False


def tcp_request(
    host: str, port: int, payload: bytes, done: Callable[[bytearray], bool],
    timeout_s: float = 5.0, tls: TLSConfig | None = None,
    max_bytes: int = MAX_REPLY_BYTES,
) -> Reply:
    """Send `payload` to host:port (over TLS with `tls`) and read until `done(reply)`, or
    until `max_bytes` have come (`Reply.cut`); OSError if cut short (ssl.SSLError, one,
    if the handshake fails). `done` sees the whole reply so far after each read and must
    look only at what it has not seen (`harness.drivers.respscan.ReplyScan`, or a test
    of the reply's last bytes), so a long reply costs time in proportion to its size."""
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(socket.create_connection((host, port), timeout=timeout_s))
        if tls is not None:
            sock = stack.enter_context(client_context(tls).wrap_socket(
                sock, server_hostname=server_hostname(tls, host)))
        sock.sendall(payload)
        reply = bytearray()
        while not done(reply):
            if len(reply) >= max_bytes:
                return Reply(bytes(reply[:max_bytes]), cut=True)
            chunk = sock.recv(min(65536, max_bytes + 1 - len(reply)))
            if not chunk:
                raise ConnectionResetError(f"{host}:{port} closed the connection")
            reply += chunk
        return Reply(bytes(reply))


def resolve_checked(service: Service, settings: Mapping[str, Any]) -> dict[str, Any]:
    """`service.resolve(settings)`, rejecting unknown names, wrong types, bad choices and
    numbers out of their bounds.

    The spec validator does this before a run; `start` repeats it because it can be
    called directly (tests, notebooks), and a typo must not start a default server.
    """
    known = service.settings
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ServiceError(
            f"{service.kind}: unknown setting(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    resolved = service.resolve(settings)
    for key, value in resolved.items():
        spec = known[key]
        # bool is an int subclass; an int setting must not silently accept True.
        ok = isinstance(value, spec.types) and not (
            isinstance(value, bool) and bool not in spec.types
        )
        if not ok:
            names = " or ".join("None" if t is type(None) else t.__name__ for t in spec.types)
            raise ServiceError(f"{service.kind}: setting {key}={value!r} must be {names}")
        if spec.choices is not None and value not in spec.choices:
            raise ServiceError(
                f"{service.kind}: setting {key}={value!r} must be one of "
                f"{', '.join(map(str, spec.choices))}"
            )
        out_of_bounds = check_bounds(value, spec)
        if out_of_bounds:
            raise ServiceError(f"{service.kind}: {key} {out_of_bounds}, not {value!r}")
    return resolved
