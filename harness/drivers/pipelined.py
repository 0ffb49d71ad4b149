"""What the request/reply drivers share: one connection, replies in request order.

memcached, Redis and the course KV servers answer a connection's requests in order, so
a FIFO of reply handlers matches replies to requests without ids, and any number of
requests may be in flight. A subclass parses its protocol in `data_received` and hands
each decoded reply to `self._waiters.popleft()`.

Two ways to send:

- `send(payload, on_reply)`: the load generator's hot path. `on_reply` is called from
  `data_received` with the decoded reply (or, if the connection is lost first, with a
  `ConnectionResetError` instance): no future, no task switch per request.
- `call(payload)`: a future of the reply, for everything else. Exceptions are raised
  through it, except the types in `reply_errors`, which are ordinary reply values (a
  Redis error reply, which the cluster client reads for MOVED/ASK).
- `consume(on_replies, on_lost)` + `send_batch(payload, count)`: the pipelined load
  generator's way. Every reply goes, a list per `data_received`, to one consumer
  that keeps its own order of requests: no call per reply at all.

A request sent while earlier ones are in flight is held until the end of the event
loop's iteration and written together with the others sent meanwhile: one system call
for a pipeline of requests instead of one each (neither asyncio nor uvloop coalesces
small writes). A lone request is written at once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

#: Called with one decoded reply, or with the exception that ended the connection.
OnReply = Callable[[Any], None]


class PipelinedProtocol(asyncio.Protocol):
    #: The server's name in error messages.
    server: ClassVar[str] = "server"
    #: Exception types that are reply values, returned (not raised) by `call`'s future.
    reply_errors: ClassVar[tuple[type[BaseException], ...]] = ()

    def __init__(self) -> None:
        self._buf = b""
        self._waiters: deque[OnReply] = deque()
        #: Requests held for one write at the end of this loop iteration, in order.
        self._pending: list[bytes] = []
        #: Several replies just arrived: their senders will send again in this iteration.
        self._hold = False
        self.transport: asyncio.Transport | None = None
        self._lost: Exception | None = None
        # Kept: on Python 3.11 every get_running_loop() is a getpid() system call.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open = False  # connected and not lost: the one check per request
        #: Batch mode (`consume`): where replies go, and how many are still awaited.
        self._consumer: Callable[[list[Any]], None] | None = None
        self._on_lost: Callable[[Exception], None] | None = None
        self._expected = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._loop = asyncio.get_running_loop()
        self._open = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._open = False
        self._lost = exc or ConnectionResetError(f"{self.server} closed the connection")
        waiters = self._waiters
        while waiters:
            waiters.popleft()(ConnectionResetError(str(self._lost)))
        if self._on_lost is not None:
            self._on_lost(ConnectionResetError(str(self._lost)))

    @property
    def closed(self) -> bool:
        return self._lost is not None

    def send(self, payload: bytes, on_reply: OnReply) -> None:
        """Send one encoded request; `on_reply` gets its reply (see the module doc)."""
        if not self._open:
            raise ConnectionResetError(f"{self.server} connection is closed")
        pending, waiters = self._pending, self._waiters
        if pending:
            pending.append(payload)
        elif waiters or self._hold:
            pending.append(payload)
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]
        else:
            self.transport.write(payload)  # type: ignore[union-attr]
        waiters.append(on_reply)

    def call(self, payload: bytes) -> asyncio.Future:
        """Send one encoded request; a future of its reply."""
        if not self._open:
            raise ConnectionResetError(f"{self.server} connection is closed")
        fut = self._loop.create_future()  # type: ignore[union-attr]
        self.send(payload, self._settler(fut))
        return fut

    def _settler(self, fut: asyncio.Future) -> OnReply:
        values = self.reply_errors

        def settle(reply: Any) -> None:
            if fut.done():
                return  # cancelled (timed out): its reply is dropped, in order
            if isinstance(reply, BaseException) and not isinstance(reply, values):
                fut.set_exception(reply)
            else:
                fut.set_result(reply)
        return settle

    def consume(self, on_replies: Callable[[list[Any]], None] | None,
                on_lost: Callable[[Exception], None] | None = None) -> None:
        """Batch mode: the replies to `send_batch` requests go to `on_replies`, a list
        per `data_received`, in request order; `on_lost` hears of a lost connection.
        None leaves batch mode (replies still awaited are then kept unread)."""
        self._consumer, self._on_lost = on_replies, on_lost
        if on_replies is None:
            self._expected = 0

    def send_batch(self, payload: bytes, count: int) -> None:
        """Batch mode: `count` encoded requests in one write."""
        if not self._open:
            raise ConnectionResetError(f"{self.server} connection is closed")
        self._expected += count
        self.transport.write(payload)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        if self._buf:
            data = self._buf + data
        consumer = self._consumer
        replies: list[Any] = []
        pos = self._parse(data, replies.append,
                          self._expected if consumer is not None else len(self._waiters))
        self._buf = data[pos:] if pos < len(data) else b""
        if not replies:
            return
        if consumer is not None:
            self._expected -= len(replies)
            consumer(replies)
            return
        waiters = self._waiters
        for reply in replies:
            waiters.popleft()(reply)
        if len(replies) > 1:
            # Hold the first of the next requests too: their senders follow in this
            # iteration, and the pipeline goes out in one write.
            self._hold = True

    def _parse(self, data: bytes, emit: Callable[[Any], None], limit: int) -> int:
        """Decode up to `limit` complete replies from `data`, `emit` each; return the
        position after the last one (the rest is kept for the next call)."""
        raise NotImplementedError

    def _flush(self) -> None:
        pending = self._pending
        self._hold = False
        transport = self.transport
        # Closed meanwhile: connection_lost fails the requests' handlers.
        if pending and self._lost is None and transport is not None \
                and not transport.is_closing():
            transport.write(pending[0] if len(pending) == 1 else b"".join(pending))
        pending.clear()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
