"""The course-protocol client: ranges, routing, and the variants course servers have
(a greeting line; ranges on the `server_not_responsible` line; a server gone)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from harness.drivers.kvtext import RING, KVTextClient, KVTextError, key_position, parse_ranges
from harness.hosts import free_port
from harness.results import ERROR, REDIRECT


def test_parse_ranges_and_wrapping_owner() -> None:
    half = RING // 2
    text = f"{half:032x},{0:032x},10.0.0.1:5000;{1:032x},{half - 1:032x},[::1]:5001;"
    ranges = parse_ranges(text)
    assert ranges == [(half, 0, ("10.0.0.1", 5000)), (1, half - 1, ("::1", 5001))]
    client = KVTextClient([("127.0.0.1", 1)])
    client.ranges = ranges
    for key in (b"a", b"b", b"c", b"d"):
        expect = ("::1", 5001) if 1 <= key_position(key) < half else ("10.0.0.1", 5000)
        assert client.owner(key) == expect
    with pytest.raises(KVTextError):
        parse_ranges(" ")


async def _scripted(answer: Callable[[bytes], bytes], greeting: bytes | None = None
                    ) -> tuple[asyncio.AbstractServer, int]:
    """A line server answering with `answer(line)`: just enough to script a protocol."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if greeting:
            writer.write(greeting + b"\r\n")
        while line := await reader.readline():
            writer.write(answer(line.rstrip(b"\r\n")) + b"\r\n")
        writer.close()

    port = free_port()
    return await asyncio.start_server(serve, "127.0.0.1", port), port


def test_greeting_is_skipped_and_inline_ranges_are_used() -> None:
    async def main() -> None:
        store: dict[bytes, bytes] = {}

        def owner(line: bytes) -> bytes:
            cmd, _, rest = line.partition(b" ")
            key, _, value = rest.partition(b" ")
            if cmd == b"put":
                store[key] = value
                return b"put_success " + key
            return b"get_success " + key + b" " + store[key] if key in store else \
                b"get_error " + key

        srv_b, port_b = await _scripted(owner, greeting=b"hello from b")
        everything_at_b = f"{0:032x},{RING - 1:032x},127.0.0.1:{port_b};".encode()
        srv_a, port_a = await _scripted(
            lambda line: b"server_not_responsible " + everything_at_b, greeting=b"hi")
        async with srv_a, srv_b:
            client = KVTextClient([("127.0.0.1", port_a)], greeting=True)
            seen: list[int] = []
            assert await client.put(b"k", b"v w", lambda *a: seen.append(a[2])) == \
                b"put_success k"
            assert seen == [REDIRECT] and await client.get(b"k") == b"v w"
            assert await client.get(b"other") is None
            client.close()
    asyncio.run(main())


def test_a_server_that_is_gone_costs_an_error_attempt_then_the_ring_is_asked() -> None:
    async def main() -> None:
        srv, port = await _scripted(lambda line: b"put_success k" if line.startswith(b"put")
                                    else f"keyrange_success {0:032x},{RING - 1:032x},"
                                         f"127.0.0.1:{port};".encode())
        dead = free_port()  # nothing listens there
        async with srv:
            client = KVTextClient([("127.0.0.1", dead), ("127.0.0.1", port)])
            seen: list[int] = []
            assert await client.put(b"k", b"v", lambda *a: seen.append(a[2])) == \
                b"put_success k"
            assert seen == [ERROR] and client.owner(b"k") == ("127.0.0.1", port)
            client.close()
    asyncio.run(main())
