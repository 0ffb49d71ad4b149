"""The reference KV server (examples/kvserver): caches, ring, store, protocol, hand-over.

Servers run in the test's event loop on 127.0.0.1; the ECS hand-over runs against real
server processes in tests/services/test_command.py and tests/studies/kvstore/test_elastic.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from examples.kvserver.cache import FIFOCache, LFUCache, LRUCache, make_cache
from examples.kvserver.ring import SIZE, Ring, in_range, position
from examples.kvserver.server import KVServer
from examples.kvserver.store import Store
from harness.drivers.kvtext import KVTextClient, parse_ranges
from harness.hosts import free_port
from harness.results import REDIRECT


def test_fifo_evicts_the_oldest_insertion_even_when_it_is_read() -> None:
    c = FIFOCache(2)
    c.put(b"a", b"1")
    c.put(b"b", b"2")
    assert c.get(b"a") == b"1"
    c.put(b"c", b"3")
    assert c.get(b"a") is None and c.get(b"b") == b"2" and len(c) == 2


def test_lru_evicts_the_least_recently_used() -> None:
    c = LRUCache(2)
    c.put(b"a", b"1")
    c.put(b"b", b"2")
    assert c.get(b"a") == b"1"
    c.put(b"c", b"3")
    assert c.get(b"b") is None and c.get(b"a") == b"1"


def test_lfu_evicts_the_least_frequently_used_oldest_first_on_ties() -> None:
    c = LFUCache(2)
    c.put(b"a", b"1")
    c.put(b"b", b"2")
    c.get(b"a")
    c.put(b"c", b"3")  # b used once, a twice
    assert c.get(b"b") is None and c.get(b"a") == b"1" and c.get(b"c") == b"3"
    c.delete(b"c")
    c.put(b"d", b"4")
    c.put(b"e", b"5")  # d (1 use) goes before a (3 uses)
    assert c.get(b"d") is None and c.get(b"a") == b"1" and len(c) == 2


def test_cache_size_zero_caches_nothing_and_unknown_strategy_is_refused() -> None:
    c = make_cache("lru", 0)
    c.put(b"a", b"1")
    assert c.get(b"a") is None
    with pytest.raises(ValueError, match="FIFO, LRU, LFU"):
        make_cache("ARC", 10)


def test_ring_ranges_cover_every_position_once() -> None:
    ring = Ring(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
    ranges = parse_ranges(ring.metadata())
    for key in (b"a", b"b", b"<1.2@example.com>", b"zzz"):
        pos = position(key)
        owners = [n for a, b, n in ranges if in_range(pos, a, b)]
        assert owners == [("127.0.0.1", int(ring.owner(key).rsplit(":")[1]))]
    alone = Ring(["h:1"])
    first, last = alone.range_of("h:1")
    assert (last + 1) % SIZE == first and in_range(0, first, last)
    assert Ring.from_metadata(ring.metadata()).members == ring.members


def test_store_finds_a_range_from_file_names(tmp_path: Path) -> None:
    store = Store(str(tmp_path), 1, "FIFO")
    keys = [b"k%d" % i for i in range(50)]
    for k in keys:
        assert store.put(k, b"v" + k) is False
    assert store.put(b"k0", b"new") is True
    assert store.get(b"k0") == b"new" and store.get(b"k1") == b"vk1"  # second from disk
    lo, hi = sorted(position(k) for k in keys)[10], sorted(position(k) for k in keys)[30]
    got = dict(store.items_in(lo, hi))
    assert set(got) == {k for k in keys if lo <= position(k) <= hi}
    assert len(dict(store.items_in(hi, lo))) == 50 - len(got) + 2  # wraps; ends shared


async def _serve(tmp: Path, cache: int = 10) -> tuple[KVServer, asyncio.AbstractServer]:
    port = free_port()
    server = KVServer("127.0.0.1", port, Store(str(tmp / str(port)), cache, "LRU"))
    tcp = await asyncio.start_server(server.serve_client, "127.0.0.1", port, limit=1 << 24)
    return server, tcp


async def _lines(port: int, *lines: bytes) -> list[bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(line + b"\r\n" for line in lines))  # pipelined
    out = [(await reader.readline()).rstrip(b"\r\n") for _ in lines]
    writer.close()
    return out


def test_protocol_answers(tmp_path: Path) -> None:
    async def main() -> None:
        server, tcp = await _serve(tmp_path)
        async with tcp:
            p = server.port
            assert await _lines(p, b"put k hello world", b"put k again", b"get k",
                                b"get nope", b"delete k", b"delete k", b"put k null",
                                b"bogus", b"keyrange") == [
                b"put_success k", b"put_update k", b"get_success k again", b"get_error nope",
                b"delete_success k", b"delete_error k", b"delete_error k",
                b"error unknown command",
                b"keyrange_success " + server.ring.metadata().encode()]
    asyncio.run(main())


def test_not_responsible_and_write_lock_are_followed_and_reported(tmp_path: Path) -> None:
    async def main() -> None:
        a, tcp_a = await _serve(tmp_path)
        b, tcp_b = await _serve(tmp_path)
        async with tcp_a, tcp_b:
            ring = Ring([a.me, b.me])
            for s in (a, b):
                s.ring = ring
            key = next(b"k%d" % i for i in range(100) if ring.owner(b"k%d" % i) == b.me)
            client = KVTextClient([("127.0.0.1", a.port)])  # knows only a at first
            seen: list[int] = []
            assert await client.put(key, b"v1", lambda t0, t1, s: seen.append(s)) == \
                b"put_success " + key
            assert seen == [REDIRECT]  # a said not responsible; the retry went to b
            assert await client.get(key) == b"v1" and seen == [REDIRECT]
            first, last = ring.range_of(b.me)
            b.locked.append((first, last))
            asyncio.get_running_loop().call_later(0.05, b.locked.clear)
            assert (await client.put(key, b"v2", lambda t0, t1, s: seen.append(s))
                    ).startswith(b"put_update")
            assert len(seen) > 2 and set(seen) == {REDIRECT}
            client.close()
    asyncio.run(main())


def test_transfer_hands_a_range_over(tmp_path: Path) -> None:
    async def main() -> None:
        a, tcp_a = await _serve(tmp_path)
        b, tcp_b = await _serve(tmp_path)
        async with tcp_a, tcp_b:
            first, last = Ring([a.me, b.me]).range_of(b.me)
            # The ring's positions depend on the servers' random ports: pick keys so that
            # both sides of the split hold some (a fixed list can miss b's range entirely).
            inside = (b"key%d" % i for i in range(10**6) if in_range(position(b"key%d" % i),
                                                                  first, last))
            outside = (b"key%d" % i for i in range(10**6) if not in_range(
                position(b"key%d" % i), first, last))
            keys = [next(inside) for _ in range(20)] + [next(outside) for _ in range(20)]
            for k in keys:
                a.store.put(k, b"value of " + k)
            reply = await _lines(a.port, b"ecs_transfer %032x %032x %s" % (
                first, last, b.me.encode()))
            moved = [k for k in keys if in_range(position(k), first, last)]
            assert reply == [b"ecs_ok %d" % len(moved)] and moved
            assert all(b.store.get(k) == b"value of " + k for k in moved)
            assert await _lines(a.port, b"ecs_drop %032x %032x" % (first, last)) == \
                [b"ecs_ok %d" % len(moved)]
            assert all(a.store.get(k) is None for k in moved)
    asyncio.run(main())
