"""Client of the course KV protocol: one text line per request, one per reply.

    put <key> <value>  -> put_success <key> | put_update <key> | put_error ...
    get <key>          -> get_success <key> <value> | get_error ...
    delete <key>       -> delete_success <key> | delete_error ...
    keyrange           -> keyrange_success <from>,<to>,<host>:<port>;...

Keys are placed on a ring by MD5 (128 bits); `from` and `to` are 32 hex digits, both
inclusive, and a range wraps around when from > to. `KVTextClient` keeps the ring, sends
each request to the responsible server, and handles the servers' refusals:
`server_not_responsible` (the ranges may follow on the same line; otherwise it asks that
server for `keyrange`) is retried at the responsible server; `server_write_lock` and
`server_stopped` are retried after a short back-off. Each refused attempt is reported to
`on_attempt(start_ns, end_ns, REDIRECT)` (a failed connection: ERROR), so a workload can
record its cost. Requests on one connection may be pipelined; replies come in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.drivers.pipelined import PipelinedProtocol
from harness.errors import HarnessError
from harness.results import ERROR, REDIRECT

MAX_ATTEMPTS = 100
MAX_CONN_ERRORS = 4
OnAttempt = Callable[[int, int, int], None]
Node = tuple[str, int]
Ranges = list[tuple[int, int, Node]]
RING = 1 << 128


class KVTextError(HarnessError):
    """A reply the protocol does not allow here."""


def key_position(key: bytes) -> int:
    return int.from_bytes(hashlib.md5(key).digest(), "big")


def parse_ranges(text: bytes | str) -> Ranges:
    """`<from>,<to>,<host>:<port>;...` -> [(from, to, (host, port))]."""
    if isinstance(text, bytes):
        text = text.decode()
    out: Ranges = []
    for part in text.strip().split(";"):
        if not part.strip():
            continue
        first, last, addr = part.strip().split(",")
        host, _, port = addr.rpartition(":")
        out.append((int(first, 16), int(last, 16), (host.strip("[]"), int(port))))
    if not out:
        raise KVTextError(f"no key ranges in {text!r}")
    return out


class KVTextConnection(PipelinedProtocol):
    """One connection; `request(line)` returns a future of the reply line."""

    def __init__(self, greeting: bool = False) -> None:
        super().__init__()
        self._skip = 1 if greeting else 0  # course servers may greet on connect

    def _parse(self, data: bytes, emit: Callable[[Any], None], limit: int) -> int:
        pos, count = 0, 0
        while True:
            eol = data.find(b"\n", pos)
            if eol < 0:
                break
            line = data[pos:eol].rstrip(b"\r")
            pos = eol + 1
            if self._skip:
                self._skip -= 1
                continue
            if count >= limit:
                continue  # unsolicited; nothing to match it with
            count += 1
            emit(line)
        return pos

    def request(self, line: bytes) -> asyncio.Future:
        return self.call(line + b"\r\n")


class KVTextClient:
    """Requests routed by the ring, over one connection per server, opened on demand."""

    def __init__(self, seeds: Sequence[Node], *, greeting: bool = False,
                 connect_timeout_s: float = 10.0) -> None:
        if not seeds:
            raise KVTextError("no servers to connect to")
        self.seeds = list(seeds)
        self.greeting = greeting
        self.connect_timeout_s = connect_timeout_s
        # Until a server tells otherwise, the first seed is responsible for everything.
        self.ranges: Ranges = [(0, RING - 1, self.seeds[0])]
        self.conns: dict[Node, KVTextConnection] = {}

    async def conn(self, node: Node) -> KVTextConnection:
        c = self.conns.get(node)
        if c is None or c.closed:
            loop = asyncio.get_running_loop()
            _, c = await asyncio.wait_for(loop.create_connection(
                lambda: KVTextConnection(self.greeting), node[0], node[1]),
                self.connect_timeout_s)
            self.conns[node] = c
        return c

    def owner(self, key: bytes) -> Node:
        pos = key_position(key)
        for first, last, node in self.ranges:
            if (first <= pos <= last) if first <= last else (pos >= first or pos <= last):
                return node
        raise KVTextError(f"no server's range holds {key!r}: {self.ranges}")

    async def refresh(self, prefer: Node | None = None) -> None:
        """Ask `prefer`, then the other known servers, for `keyrange`."""
        known = [n for _, _, n in self.ranges] + self.seeds
        order = list(dict.fromkeys([prefer, *known] if prefer else known))
        last: Exception | None = None
        for node in order:
            try:
                reply = await (await self.conn(node)).request(b"keyrange")
            except OSError as exc:
                last = exc
                self._drop(node)
                continue
            if reply.startswith(b"keyrange_success "):
                self.ranges = parse_ranges(reply[len(b"keyrange_success "):])
                return
            last = KVTextError(f"{node}: keyrange answered {reply[:80]!r}")
        raise ConnectionError(f"no server answered keyrange: {last}")

    async def connect_all(self) -> None:
        """The ring and a connection to every server, before any timed op."""
        await self.refresh()
        for _, _, node in self.ranges:
            await self.conn(node)

    def _drop(self, node: Node) -> None:
        c = self.conns.pop(node, None)
        if c is not None:
            c.close()

    async def request(self, key: bytes, line: bytes,
                      on_attempt: OnAttempt | None = None) -> bytes:
        """Send `line` (about `key`) to the responsible server; follow refusals."""
        clock = time.perf_counter_ns
        errors = 0
        for attempt in range(MAX_ATTEMPTS):
            t0 = clock()
            node = self.owner(key)
            try:
                reply = await (await self.conn(node)).request(line)
            except OSError:
                # A server that left (or died): refresh the ring from the others.
                if on_attempt is not None:
                    on_attempt(t0, clock(), ERROR)
                self._drop(node)
                errors += 1
                if errors >= MAX_CONN_ERRORS:
                    raise
                await asyncio.sleep(0.01 * 2 ** errors)
                with contextlib.suppress(OSError, KVTextError):
                    await self.refresh()
                continue
            if reply.startswith(b"server_not_responsible"):
                ranges = reply[len(b"server_not_responsible"):].strip()
                if ranges:
                    self.ranges = parse_ranges(ranges)
                else:
                    await self.refresh(prefer=node)
            elif reply in (b"server_write_lock", b"server_stopped"):
                await asyncio.sleep(min(0.001 * 2 ** min(attempt, 10), 0.05))
            else:
                return reply
            if on_attempt is not None:
                on_attempt(t0, clock(), REDIRECT)
        raise KVTextError(f"{line[:40]!r}: still refused after {MAX_ATTEMPTS} attempts")

    async def put(self, key: bytes, value: bytes, on_attempt: OnAttempt | None = None) -> bytes:
        return await self.request(key, b"put " + key + b" " + value, on_attempt)

    async def get(self, key: bytes, on_attempt: OnAttempt | None = None) -> bytes | None:
        """The value, or None when the server answers get_error."""
        reply = await self.request(key, b"get " + key, on_attempt)
        head = b"get_success " + key + b" "
        if reply.startswith(head):
            return reply[len(head):]
        if reply.startswith(b"get_error"):
            return None
        raise KVTextError(f"get {key!r}: unexpected reply {reply[:80]!r}")

    async def delete(self, key: bytes, on_attempt: OnAttempt | None = None) -> bytes:
        return await self.request(key, b"delete " + key, on_attempt)

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()
