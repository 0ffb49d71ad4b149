"""A minimal asyncio RESP2 client with pipelining, and a Redis Cluster client on top.

`RespConnection`: requests on one connection may be in flight together and are matched
to Redis's in-order replies by `PipelinedProtocol`'s FIFO (which also coalesces the
writes of a pipeline). Error replies are returned as `RespError` values, not raised, so
the cluster layer can read MOVED/ASK cheaply.

`ClusterClient`: keeps the slot map (CLUSTER SLOTS), sends each command to the master of
its key's slot, and follows redirections: MOVED updates the map and retries at the new
owner, ASK retries once at the importing node behind ASKING, TRYAGAIN / CLUSTERDOWN wait
a little and retry, a connection failure refreshes the map from another node. Each
attempt that was not served is reported to `on_attempt(start_ns, end_ns, status)` (clock:
time.perf_counter_ns), so a workload can record it: `redirect` for a redirection,
`error` for a failed connection.

`parse_info` reads the text of an INFO reply (the launchers' probes and counters,
`harness.services.redis`), within the bounds of `harness.drivers.replies`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from harness.drivers.pipelined import PipelinedProtocol
from harness.drivers.replies import (
    MAX_ENTRIES,
    Reading,
    bounded_text,
    stat_value,
)
from harness.drivers.tls import tls_kwargs
from harness.errors import HarnessError
from harness.hosts.endpoint import Credentials, TLSConfig
from harness.results import ERROR, REDIRECT

SLOTS = 16384
MAX_ATTEMPTS = 16
#: Called for each attempt that did not serve the op: (start_ns, end_ns, status code).
OnAttempt = Callable[[int, int, int], None]


class RespError(HarnessError):
    """An error reply (`-ERR ...`, `-MOVED ...`); returned as a value, raised by callers."""


class Incomplete(Exception):
    """The buffer ends inside a reply: read more."""


def _crc16_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC = _crc16_table()


def key_slot(key: bytes) -> int:
    """The cluster slot of `key`: CRC16 (XMODEM) mod 16384, of its {hash tag} if any."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    crc = 0
    for b in key:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC[((crc >> 8) ^ b) & 0xFF]
    return crc % SLOTS


def encode(args: Sequence[bytes | str | int]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        data = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def parse_reply(data: bytes, pos: int = 0) -> tuple[Any, int]:
    """One reply from data[pos:]: (value, next position); Incomplete if cut short.

    The one RESP parser: the driver's connections and the Redis launchers' probes
    (`harness.services.redis`) both read replies with it."""
    eol = data.find(b"\r\n", pos)
    if eol < 0:
        raise Incomplete
    tag = data[pos]
    if tag == 36:  # $ bulk string
        n = int(data[pos + 1:eol])
        if n < 0:
            return None, eol + 2
        end = eol + 2 + n
        if len(data) < end + 2:
            raise Incomplete
        return data[eol + 2:end], end + 2
    if tag == 43:  # + simple string
        return data[pos + 1:eol], eol + 2
    if tag == 45:  # - error
        return RespError(data[pos + 1:eol].decode(errors="replace")), eol + 2
    if tag == 58:  # : integer
        return int(data[pos + 1:eol]), eol + 2
    if tag == 42:  # * array
        n = int(data[pos + 1:eol])
        pos = eol + 2
        if n < 0:
            return None, pos
        items = []
        for _ in range(n):
            item, pos = parse_reply(data, pos)
            items.append(item)
        return items, pos
    raise RespError(f"not a RESP reply: {data[pos:pos + 40]!r}")


def parse_info(text: str, max_entries: int = MAX_ENTRIES) -> Reading:
    """An INFO reply's `name:value` lines as a mapping, numbers converted; a commandstats
    line `cmdstat_get:calls=3,usec=10,...` becomes `cmdstat_get_calls: 3`,
    `cmdstat_get_usec: 10`, ... (section headers and blank lines are skipped). At most
    `max_entries` entries, each name and value of at most `MAX_VALUE_CHARS`; what is
    left out is said in the reading's `cut`."""
    out = Reading()
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if not sep or name.startswith("#"):
            continue
        name = bounded_text(name, "an INFO name", out.cut)
        value = bounded_text(value, f"INFO {name}", out.cut)
        fields = ([(f"{name}_{key}", number) for key, _, number in
                   (item.partition("=") for item in value.split(","))]
                  if name.startswith("cmdstat_") else [(name, value)])
        if len(out) + len(fields) > max_entries:
            out.cut.append(f"INFO holds more than {max_entries:,} entries: the first "
                           f"{len(out):,} kept")
            break
        out.update((k, stat_value(v)) for k, v in fields)
    return out


#: Masters a slot map may name: Redis Cluster is meant for up to 1000 nodes.
MAX_MASTERS = 1000
#: A slot map's bounds as the kit asks for it: a range per slot at most, each of a few
#: items (a master and its replicas, each with an id and, from Redis 7, their names).
MAX_SLOT_MAP_ITEMS, MAX_SLOT_MAP_BYTES = SLOTS * 32, 8 << 20


def slot_ranges(reply: Any) -> list[tuple[int, int, tuple[str, int]]]:
    """CLUSTER SLOTS as (first slot, last slot, (master host, port)); the host is ''
    where the node leaves it to the asker. RespError if the reply is not a slot map: not
    a list of [first, last, [host, port, ...], ...] with slots in range, or more than
    `MAX_MASTERS` masters."""
    if not isinstance(reply, list):
        raise RespError(f"CLUSTER SLOTS answered {type(reply).__name__}, not a slot map")
    out = []
    for i, r in enumerate(reply):
        ok = (isinstance(r, list) and len(r) >= 3 and isinstance(r[0], int)
              and isinstance(r[1], int) and 0 <= r[0] <= r[1] < SLOTS
              and isinstance(r[2], list) and len(r[2]) >= 2
              and isinstance(r[2][0], bytes | str) and isinstance(r[2][1], int)
              and 0 < r[2][1] < 65536 and len(r[2][0]) <= 255)
        if not ok:
            raise RespError(f"CLUSTER SLOTS entry {i} is not [first slot, last slot, "
                            f"[host, port, ...]]: {str(r)[:80]}")
        host = r[2][0].decode(errors="replace") if isinstance(r[2][0], bytes) else r[2][0]
        out.append((r[0], r[1], (host, r[2][1])))
    if len({m for _, _, m in out}) > MAX_MASTERS:
        raise RespError(f"CLUSTER SLOTS names more than {MAX_MASTERS} masters")
    return out


class RespConnection(PipelinedProtocol):
    """One connection. `request(*args)` returns a future of the decoded reply; `send` and
    `call` take a command already encoded with `encode` (see `PipelinedProtocol`)."""

    server = "redis"
    reply_errors = (RespError,)

    def __init__(self) -> None:
        super().__init__()
        #: The last bulk reply's header ("$<size>\r\n") and size: replies of one workload
        #: mostly have the same size, so the next header is compared, not parsed.
        self._bulk_head, self._bulk_size = b"$\r\n", 0

    def _parse(self, data: bytes, emit: Callable[[Any], None], limit: int) -> int:
        pos, n, count = 0, len(data), 0
        head, size = self._bulk_head, self._bulk_size
        skip, step = len(head), len(head) + size + 2  # a cached-size reply: its value, whole
        value: Any
        while pos < n and count < limit:
            # The replies of GET and SET inline; other types through _parse.
            if data.startswith(head, pos):  # a bulk string of the last one's size
                end = pos + step
                if end > n:
                    break
                value = data[pos + skip:end - 2]
                pos = end
            elif data[pos] == 36:  # $ bulk string
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    break
                length = int(data[pos + 1:eol])
                if length < 0:
                    value, pos = None, eol + 2
                else:
                    end = eol + 2 + length
                    if n < end + 2:
                        break
                    head, size = data[pos:eol + 2], length
                    skip, step = len(head), len(head) + size + 2
                    value, pos = data[eol + 2:end], end + 2
            elif data.startswith(b"+OK\r\n", pos):
                value, pos = b"OK", pos + 5
            else:
                try:
                    value, pos = parse_reply(data, pos)
                except Incomplete:
                    break
            count += 1
            emit(value)
        self._bulk_head, self._bulk_size = head, size
        return pos

    def request(self, *args: bytes | str | int) -> asyncio.Future:
        return self.call(encode(args))

    def pipeline(self, commands: Iterable[Sequence[bytes | str | int]]) -> list[asyncio.Future]:
        """Send several commands in one write; one future per reply."""
        if not self._open:
            raise ConnectionResetError("redis connection is closed")
        encoded = [encode(cmd) for cmd in commands]
        futs = [self._loop.create_future() for _ in encoded]  # type: ignore[union-attr]
        for payload, fut in zip(encoded, futs, strict=True):
            # Written as one: held behind the first (see PipelinedProtocol), or all at once.
            self._hold = True
            self.send(payload, self._settler(fut))
        return futs


async def connect(host: str, port: int, timeout_s: float = 10.0,
                  auth: Credentials | None = None, tls: TLSConfig | None = None
                  ) -> RespConnection:
    """A connection (over TLS with `tls`), authenticated with `auth` (AUTH [user]
    password) before it is handed out."""
    loop = asyncio.get_running_loop()
    _, proto = await asyncio.wait_for(loop.create_connection(
        RespConnection, host, port, **tls_kwargs(tls, host)), timeout_s)
    if auth is not None:
        reply = await asyncio.wait_for(proto.request(
            "AUTH", *([auth.user] if auth.user else []), auth.password), timeout_s)
        if isinstance(reply, RespError):  # the server's words never hold the password
            proto.close()
            raise AuthError(f"{host}:{port} refused the credentials"
                            f"{f' of user {auth.user!r}' if auth.user else ''}: {reply}")
    return proto


async def replicas_acknowledged(conn: RespConnection, replicas: int, timeout_ms: int) -> Any:
    """How many of `replicas` acknowledged everything `conn`'s server holds, waiting at
    most `timeout_ms`, and then closes `conn`: a PUBLISH on the kit's channel (propagated
    to the replicas, and it changes no key), then WAIT on the same connection. The reply
    as the server gave it (an int, or an error reply)."""
    try:
        await conn.request("PUBLISH", "kvbench:preload", "done")
        return await conn.request("WAIT", replicas, timeout_ms)
    finally:
        conn.close()


class AuthError(ConnectionError):
    """The server refused AUTH: a wrong password or user (a ConnectionError, so a run
    counts it as a failed connection)."""


async def command(host: str, port: int, *args: bytes | str | int) -> Any:
    """One command on a fresh connection; raises RespError on an error reply."""
    conn = await connect(host, port)
    try:
        reply = await conn.request(*args)
    finally:
        conn.close()
    if isinstance(reply, RespError):
        raise reply
    return reply


Node = tuple[str, int]


def _node(addr: str) -> Node:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port.split("@")[0])


class ClusterClient:
    """Commands routed by key slot over one connection per master, opened on demand."""

    def __init__(self, seeds: Sequence[Node], *, connect_timeout_s: float = 10.0,
                 auth: Credentials | None = None, tls: TLSConfig | None = None) -> None:
        self.seeds = list(seeds)
        self.auth = auth
        self.tls = tls
        self.connect_timeout_s = connect_timeout_s
        self.slots: list[Node | None] = [None] * SLOTS
        self.conns: dict[Node, RespConnection] = {}

    async def refresh(self, avoid: Node | None = None) -> None:
        """Read the slot map from the first node (known masters, then seeds) whose map
        covers every slot; a node just removed from the cluster knows no slots."""
        known = list(dict.fromkeys([*self.conns, *(n for n in self.slots if n), *self.seeds]))
        known.sort(key=lambda n: n == avoid)
        last: Exception | None = None
        for node in known:
            try:
                reply = await (await self.conn(node)).request("CLUSTER", "SLOTS")
            except OSError as exc:
                last = exc
                continue
            if isinstance(reply, RespError):
                last = reply
                continue
            try:
                ranges = slot_ranges(reply)
            except RespError as exc:
                last = exc
                continue
            slots: list[Node | None] = [None] * SLOTS
            for first, last_slot, (host, port) in ranges:
                owner = (host or node[0], port)
                slots[first:last_slot + 1] = [owner] * (last_slot - first + 1)
            if None in slots:
                last = RespError(f"{node[0]}:{node[1]} does not know every slot's owner")
                continue
            self.slots = slots
            for gone in set(self.conns) - set(slots):
                self.conns.pop(gone).close()
            return
        raise ConnectionError(f"no cluster node answered CLUSTER SLOTS: {last}")

    async def conn(self, node: Node) -> RespConnection:
        c = self.conns.get(node)
        if c is None or c.closed:
            c = await connect(node[0], node[1], self.connect_timeout_s, self.auth, self.tls)
            self.conns[node] = c
        return c

    async def connect_all(self) -> None:
        """Slot map and a connection to every master, before any timed op."""
        await self.refresh()
        for node in set(self.slots):
            if node is not None:
                await self.conn(node)

    async def execute(self, key: bytes, *args: bytes | str | int,
                      on_attempt: OnAttempt | None = None) -> Any:
        """Run a one-key command at the key's master, following redirections."""
        slot = key_slot(key)
        clock = time.perf_counter_ns
        ask: Node | None = None
        for attempt in range(MAX_ATTEMPTS):
            t0 = clock()
            node = ask or self.slots[slot]
            try:
                if node is None:
                    await self.refresh()
                    node = self.slots[slot]
                    if node is None:
                        raise ConnectionError(f"slot {slot} has no master (cluster down?)")
                c = await self.conn(node)
                if ask is not None:
                    reply = await c.pipeline([("ASKING",), args])[1]
                else:
                    reply = await c.request(*args)
            except OSError:
                # A removed or dead node: the attempt failed; ask the others who owns it.
                if on_attempt is not None:
                    on_attempt(t0, clock(), ERROR)
                if node is not None and node in self.conns:
                    self.conns.pop(node).close()
                if attempt >= 3:
                    raise
                await asyncio.sleep(0.01 * 2 ** attempt)
                ask = None
                with contextlib.suppress(OSError):
                    await self.refresh(avoid=node)
                continue
            if type(reply) is not RespError:
                return reply
            msg = str(reply)
            ask = None
            if msg.startswith(("MOVED ", "ASK ")):
                kind, _, addr = msg.split(" ", 2)
                target = _node(addr)
                if kind == "MOVED":
                    self.slots[slot] = target
                else:
                    ask = target
            elif msg.startswith(("TRYAGAIN", "CLUSTERDOWN")):
                # CLUSTERDOWN also comes from a node that has just left the cluster.
                await asyncio.sleep(0.005 * 2 ** min(attempt, 6))
                if msg.startswith("CLUSTERDOWN"):
                    with contextlib.suppress(OSError, RespError):
                        await self.refresh(avoid=node)
            else:
                return reply  # an ordinary error reply: the caller decides
            if on_attempt is not None:
                on_attempt(t0, clock(), REDIRECT)
        raise RespError(f"{args[0]!r} {key!r}: still redirected after {MAX_ATTEMPTS} attempts")

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()
