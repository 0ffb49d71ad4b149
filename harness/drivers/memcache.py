"""A minimal asyncio memcached text-protocol client with pipelining.

Requests on one connection may be in flight together; memcached answers in order, so
the FIFO of `PipelinedProtocol` matches replies to requests without ids. A reply's kind
follows from its first bytes: `VALUE ...` is a hit (its value is the reply), a line
`END` a miss (None), any other line (STORED, DELETED, a version) is the reply itself;
ERROR / CLIENT_ERROR / SERVER_ERROR lines become `MemcacheError` values.

`parse_stats` reads the replies of `stats` and `stats <group>` (the launcher's
description of a server and its counters, `harness.services.memcached`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from harness.drivers.pipelined import PipelinedProtocol
from harness.drivers.replies import MAX_ENTRIES, Reading, bounded_text, stat_value
from harness.drivers.tls import tls_kwargs
from harness.errors import HarnessError
from harness.hosts.endpoint import TLSConfig


class MemcacheError(HarnessError):
    """The server answered ERROR / CLIENT_ERROR / SERVER_ERROR."""


def stats_request(group: str = "") -> bytes:
    return f"stats {group}".strip().encode() + b"\r\n"


def stats_done(reply: bytes) -> bool:
    """Whether `reply` holds a whole answer to `stats_request`."""
    return reply.endswith((b"END\r\n", b"ERROR\r\n"))


def parse_stats(reply: bytes, max_entries: int = MAX_ENTRIES) -> Reading:
    """A `stats` reply ("STAT <name> <value>" lines, then END) as a mapping: integers and
    finite decimals (rusage_user "0.123456") converted, anything else kept as text. At
    most `max_entries` entries, each name and value of at most `MAX_VALUE_CHARS`
    (`harness.drivers.replies`); what is left out is said in the reading's `cut`."""
    out = Reading()
    for line in reply.decode(errors="replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            if len(out) >= max_entries:
                out.cut.append(f"stats holds more than {max_entries:,} entries: the first "
                               f"{len(out):,} kept")
                break
            name = bounded_text(parts[1], "a stats name", out.cut)
            out[name] = stat_value(bounded_text(parts[2], f"stats {name}", out.cut))
    return out


def get_request(key: bytes) -> bytes:
    return b"get " + key + b"\r\n"


def set_head(key: bytes, size: int, exptime: int = 0, flags: int = 0) -> bytes:
    """A set request up to its data block; the request is head + value + b"\\r\\n"."""
    return b"set %s %d %d %d\r\n" % (key, flags, exptime, size)


class MemcacheProtocol(PipelinedProtocol):
    server = "memcached"

    def _parse(self, data: bytes, emit: Callable[[Any], None], limit: int) -> int:
        # Parsed in place by offset: usually `data` holds exactly the replies awaited.
        pos, n, count = 0, len(data), 0
        result: object
        while count < limit:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                break
            if data.startswith(b"VALUE ", pos):
                # "VALUE <key> <flags> <bytes>": without cas, the size is the last field.
                start = eol + 2
                end = start + int(data[data.rfind(b" ", pos, eol) + 1 : eol])
                if n < end + 7:  # data, "\r\n", "END\r\n"
                    break
                result = data[start:end]
                pos = end + 7
            else:
                line = data[pos:eol]
                pos = eol + 2
                if line == b"END":
                    result = None
                elif line.startswith((b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")):
                    result = MemcacheError(line.decode(errors="replace"))
                else:
                    result = line
            count += 1
            emit(result)
        return pos

    def get(self, key: bytes) -> asyncio.Future:
        """Future of the value (bytes) or None on a miss."""
        return self.call(get_request(key))

    def set(self, key: bytes, value: bytes, exptime: int = 0, flags: int = 0) -> asyncio.Future:
        """Future of the reply line (b"STORED" on success)."""
        return self.call(set_head(key, len(value), exptime, flags) + value + b"\r\n")

    def delete(self, key: bytes) -> asyncio.Future:
        """Future of b"DELETED" or b"NOT_FOUND"."""
        return self.call(b"delete " + key + b"\r\n")

    def version(self) -> asyncio.Future:
        return self.call(b"version\r\n")


async def connect(host: str, port: int, timeout_s: float = 10.0,
                  tls: TLSConfig | None = None) -> MemcacheProtocol:
    """A connection (over TLS with `tls`, as memcached -Z speaks it)."""
    loop = asyncio.get_running_loop()
    _, proto = await asyncio.wait_for(
        loop.create_connection(MemcacheProtocol, host, port, **tls_kwargs(tls, host)),
        timeout_s)
    return proto

