"""Control-machine side of the agents (`harness.run.agent`): one long-lived channel per client
machine, requests sent to every machine at once and their replies gathered.

An `AgentLink` runs ``python -m harness.agent`` over one SSH exec channel (or as a
local child process) and matches replies to requests by id in a reader thread, so many
requests can be in flight on one link and the links of all machines work in parallel.
A link whose channel ends (a dropped connection, a silent link closed by
`harness.hosts.sshwatch`) fails every pending request with a HostError naming the machine;
`AgentPool.get` then starts a new agent (reconnecting first).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from harness.errors import HostError
from harness.hosts import Host, LocalHost
from harness.hosts.owned import owner_env

#: How long a plain request may take before the link is taken as stuck.
REQUEST_TIMEOUT_S = 60.0
CLOCK_SAMPLES = 8


class Pending:
    """One request in flight; `result()` waits for its reply."""

    def __init__(self, link: AgentLink, op: str) -> None:
        self.link, self.op = link, op
        self.event = threading.Event()
        self.reply: dict[str, Any] | None = None

    def result(self, timeout: float | None = REQUEST_TIMEOUT_S) -> dict[str, Any]:
        name = self.link.host.name
        if not self.event.wait(timeout):
            raise HostError(f"{name}: no reply from its agent to `{self.op}` within "
                            f"{timeout:g} s")
        if self.reply is None:
            raise HostError(f"{name}: control channel lost during `{self.op}`: "
                            f"{self.link.dead}")
        if not self.reply.get("ok"):
            raise HostError(f"{name}: `{self.op}` failed there: {self.reply.get('error')}")
        return self.reply


class AgentLink:
    """`python -m harness.agent` on `host`, over one channel; or `argv`, any program
    speaking the same line protocol (`harness.hosts.procstat.serve`)."""

    def __init__(self, host: Host, argv: list[str] | None = None) -> None:
        self.host = host
        self.dead: str | None = None
        self._lock = threading.Lock()
        self._next = 0
        self._pending: dict[int, Pending] = {}
        self._stderr: list[bytes] = []
        self._proc: subprocess.Popen[bytes] | None = None
        if argv is None:
            argv = [host.python, "-m", "harness.agent"]
            if isinstance(host, LocalHost):  # its input closes only when the harness is gone
                argv.append("--local")
        self._chan: Any = None
        if isinstance(host, LocalHost):
            # Its own session: a Ctrl-C meant for `harness` must not kill it first.
            # The run's owner token in its environment, and so in its workers'.
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True,
                                          env={**os.environ, **owner_env(host.owner)})
            assert self._proc.stdin and self._proc.stdout and self._proc.stderr
            stdin = self._proc.stdin
            self._write: Callable[[bytes], None] = lambda b: (stdin.write(b), stdin.flush())
            out: IO[bytes] = self._proc.stdout
            err: IO[bytes] = self._proc.stderr
        else:
            open_channel = getattr(host, "open_channel", None)
            if open_channel is None:
                raise HostError(f"{host.name}: {type(host).__name__} cannot run an agent")
            self._chan = open_channel(argv, env=owner_env(host.owner))
            self._write = self._chan.sendall
            out, err = self._chan.makefile("rb"), self._chan.makefile_stderr("rb")
        threading.Thread(target=self._read, args=(out,), daemon=True).start()
        threading.Thread(target=self._drain, args=(err,), daemon=True).start()

    def _read(self, out: IO[bytes]) -> None:
        try:
            for line in out:
                msg = json.loads(line)
                with self._lock:
                    p = self._pending.pop(msg.get("id"), None)
                if p is not None:
                    p.reply = msg
                    p.event.set()
        except (OSError, ValueError, EOFError) as exc:
            self.dead = f"{type(exc).__name__}: {exc}"
        time.sleep(0.05)  # let the stderr reader catch the agent's last words
        tail = b"".join(self._stderr).decode("utf-8", "replace").strip()[-1500:]
        with self._lock:
            self.dead = self.dead or ("the agent ended" + (f": {tail}" if tail else ""))
            pending, self._pending = list(self._pending.values()), {}
        for p in pending:
            p.event.set()

    def _drain(self, err: IO[bytes]) -> None:
        with contextlib.suppress(OSError, EOFError, ValueError):
            for line in err:
                self._stderr.append(line)
                del self._stderr[:-50]

    def send(self, op: str, **fields: Any) -> Pending:
        p = Pending(self, op)
        with self._lock:
            if self.dead:
                p.event.set()
                return p
            self._next += 1
            rid = self._next
            self._pending[rid] = p
        try:
            self._write(json.dumps({"id": rid, "op": op, **fields}, allow_nan=False).encode()
                        + b"\n")
        except (OSError, EOFError, ValueError) as exc:
            self.dead = self.dead or f"cannot send: {exc or type(exc).__name__}"
            with self._lock:
                self._pending.pop(rid, None)
            p.event.set()
        return p

    def call(self, op: str, timeout: float | None = REQUEST_TIMEOUT_S,
             **fields: Any) -> dict[str, Any]:
        return self.send(op, **fields).result(timeout)

    def clock_offset_ns(self, samples: int = CLOCK_SAMPLES) -> tuple[int, int]:
        """As `Host.clock_offset_ns`, over this link: (offset, uncertainty) from the
        exchange with the shortest round trip (as NTP does)."""
        best: tuple[int, int] | None = None
        for _ in range(samples):
            t0 = time.time_ns()
            remote = int(self.call("clock")["time_ns"])
            t1 = time.time_ns()
            offset, half = remote - (t0 + t1) // 2, (t1 - t0) // 2
            if best is None or half < best[1]:
                best = (offset, half)
        assert best is not None
        return best

    def close(self) -> None:
        with contextlib.suppress(Exception):  # whatever state the channel is in
            if self._chan is not None:
                self._chan.close()
            if self._proc is not None and self._proc.stdin is not None:
                self._proc.stdin.close()
                self._proc.wait(timeout=5)


class AgentPool:
    """One agent per host, started on first use and again after its link died."""

    def __init__(self) -> None:
        self._links: dict[str, AgentLink] = {}
        self._lock = threading.Lock()

    def get(self, host: Host) -> AgentLink:
        with self._lock:
            link = self._links.get(host.name)
            if link is None or link.dead or link.host is not host:
                if link is not None:
                    link.close()
                link = self._links[host.name] = AgentLink(host)
            return link

    def peek(self, host: Host) -> AgentLink | None:
        """The host's agent if one is up; never starts one (reconnecting is `get`'s, for
        the steps of a run; live numbers just skip a machine that is not answering)."""
        with self._lock:
            link = self._links.get(host.name)
        return link if link is not None and not link.dead and link.host is host else None

    def close(self) -> None:
        with self._lock:
            links, self._links = list(self._links.values()), {}
        for link in links:
            link.close()
