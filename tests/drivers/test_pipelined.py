"""The shared request/reply connection: reply callbacks in order, futures, write
coalescing, and what a lost connection does to requests in flight. Exercised through
the memcached and Redis protocols on an in-memory transport (the drivers run against
real servers in tests/workloads and tests/services)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.drivers.memcache import MemcacheError, MemcacheProtocol
from harness.drivers.redis import RespConnection, RespError


class _Transport:
    """Keeps what is written, one item per write call."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True


def test_memcache_replies_reach_their_callbacks_in_order_when_split_anywhere() -> None:
    async def go() -> list[Any]:
        conn = MemcacheProtocol()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        got: list[Any] = []
        for req in (b"get a\r\n", b"get b\r\n", b"set c 0 0 1\r\nx\r\n", b"get d\r\n",
                    b"bogus\r\n"):
            conn.send(req, got.append)
        stream = (b"VALUE a 0 5\r\nEND\r\n\r\nEND\r\n" b"END\r\n" b"STORED\r\n"
                  b"VALUE d 7 3\r\nxyz\r\nEND\r\n" b"ERROR\r\n")
        for i in range(0, len(stream), 3):
            conn.data_received(stream[i:i + 3])
        assert not conn._buf and not conn._waiters
        return got

    got = asyncio.run(go())
    # A value may contain "END\r\n": its size, not its content, ends it.
    assert got[:4] == [b"END\r\n", None, b"STORED", b"xyz"]
    assert isinstance(got[4], MemcacheError) and "ERROR" in str(got[4])


def test_futures_raise_errors_except_reply_values() -> None:
    async def go() -> tuple[asyncio.Future, asyncio.Future]:
        mc, rd = MemcacheProtocol(), RespConnection()
        mc.connection_made(_Transport())  # type: ignore[arg-type]
        rd.connection_made(_Transport())  # type: ignore[arg-type]
        f_mc, f_rd = mc.call(b"bogus\r\n"), rd.request("BOGUS")
        mc.data_received(b"ERROR\r\n")
        rd.data_received(b"-ERR unknown command\r\n")
        return f_mc, f_rd

    f_mc, f_rd = asyncio.run(go())
    with pytest.raises(MemcacheError):
        f_mc.result()
    # A Redis error reply is a value (the cluster client reads MOVED/ASK from it).
    assert isinstance(f_rd.result(), RespError)


def test_a_callback_sending_again_joins_one_write_per_iteration() -> None:
    """Three requests in flight; each reply's callback sends the next request from inside
    data_received: the three go out in one write at the end of the iteration."""

    async def go() -> tuple[list[bytes], list[Any]]:
        conn = RespConnection()
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        got: list[Any] = []

        def again(reply: Any) -> None:
            got.append(reply)
            if len(got) <= 3:
                conn.send(b"N%d\r\n" % len(got), got.append)

        conn.send(b"A\r\n", again)  # nothing in flight: written at once
        conn.send(b"B\r\n", again)
        conn.send(b"C\r\n", again)
        await asyncio.sleep(0)
        conn.data_received(b":1\r\n:2\r\n:3\r\n")
        await asyncio.sleep(0)
        conn.data_received(b":4\r\n:5\r\n:6\r\n")
        return transport.writes, got

    writes, got = asyncio.run(go())
    assert writes == [b"A\r\n", b"B\r\nC\r\n", b"N1\r\nN2\r\nN3\r\n"]
    assert got == [1, 2, 3, 4, 5, 6]


def test_a_lost_connection_fails_every_request_in_flight_and_refuses_new_ones() -> None:
    async def go() -> tuple[list[Any], asyncio.Future, MemcacheProtocol]:
        conn = MemcacheProtocol()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        got: list[Any] = []
        conn.send(b"get a\r\n", got.append)
        fut = conn.get(b"b")
        conn.send(b"get c\r\n", got.append)
        conn.connection_lost(None)
        return got, fut, conn

    got, fut, conn = asyncio.run(go())
    assert len(got) == 2 and all(isinstance(g, ConnectionResetError) for g in got)
    assert "memcached closed the connection" in str(got[0])
    with pytest.raises(ConnectionResetError):
        fut.result()
    assert conn.closed
    with pytest.raises(ConnectionResetError, match="closed"):
        conn.send(b"get d\r\n", got.append)


def test_a_cancelled_futures_reply_is_dropped_in_order() -> None:
    async def go() -> list[Any]:
        conn = RespConnection()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        first, second = conn.request("GET", "a"), conn.request("GET", "b")
        first.cancel()  # e.g. timed out
        conn.data_received(b"$1\r\na\r\n$1\r\nb\r\n")
        return [first.cancelled(), second.result()]

    assert asyncio.run(go()) == [True, b"b"]
