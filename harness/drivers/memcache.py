"""A minimal asyncio memcached text-protocol client with pipelining.

Requests on one connection may be in flight together; memcached answers in order, so a
FIFO of futures matches responses to requests without ids.
"""

from __future__ import annotations

import asyncio
from collections import deque

from harness.errors import HarnessError

_GET, _LINE = 0, 1


class MemcacheError(HarnessError):
    """The server answered ERROR / CLIENT_ERROR / SERVER_ERROR."""


class MemcacheProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self._buf = bytearray()
        self._waiters: deque[tuple[int, asyncio.Future]] = deque()
        self.transport: asyncio.Transport | None = None
        self._lost: Exception | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # Kept: on Python 3.11 every get_running_loop() is a getpid() system call.
        self._loop = asyncio.get_running_loop()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionResetError("memcached closed the connection")
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(ConnectionResetError(str(self._lost)))

    def data_received(self, data: bytes) -> None:
        # Parsed in place by offset: usually `data` holds exactly the replies awaited, and
        # only an incomplete tail is copied into `_buf` for the next call.
        buf = self._buf
        if buf:
            buf += data
            data = bytes(buf)
            buf.clear()
        waiters = self._waiters
        pos, n = 0, len(data)
        while waiters:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                break
            kind, fut = waiters[0]
            result: object
            if kind == _GET and data.startswith(b"VALUE ", pos):
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
                if kind == _GET and line == b"END":
                    result = None
                elif line.startswith((b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")):
                    result = MemcacheError(line.decode(errors="replace"))
                else:
                    result = line
            waiters.popleft()
            if fut.done():  # cancelled by a timeout; its answer is discarded in order
                continue
            if isinstance(result, Exception):
                fut.set_exception(result)
            else:
                fut.set_result(result)
        if pos < n:
            buf += data[pos:] if pos else data

    def _request(self, payload: bytes, kind: int) -> asyncio.Future:
        if self._lost is not None or self.transport is None or self._loop is None:
            raise ConnectionResetError("memcached connection is closed")
        fut = self._loop.create_future()
        self._waiters.append((kind, fut))
        self.transport.write(payload)
        return fut

    def get(self, key: bytes) -> asyncio.Future:
        """Future of the value (bytes) or None on a miss."""
        return self._request(b"get " + key + b"\r\n", _GET)

    def set(self, key: bytes, value: bytes, exptime: int = 0, flags: int = 0) -> asyncio.Future:
        """Future of the reply line (b"STORED" on success)."""
        head = b"set %s %d %d %d\r\n" % (key, flags, exptime, len(value))
        return self._request(head + value + b"\r\n", _LINE)

    def delete(self, key: bytes) -> asyncio.Future:
        """Future of b"DELETED" or b"NOT_FOUND"."""
        return self._request(b"delete " + key + b"\r\n", _LINE)

    def version(self) -> asyncio.Future:
        return self._request(b"version\r\n", _LINE)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(host: str, port: int, timeout_s: float = 10.0) -> MemcacheProtocol:
    loop = asyncio.get_running_loop()
    _, proto = await asyncio.wait_for(
        loop.create_connection(MemcacheProtocol, host, port), timeout_s
    )
    return proto
