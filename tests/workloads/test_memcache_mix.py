"""memcache_mix: its precomputed op/key choices, and runs against a real memcached."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from typing import Any

import numpy as np
import pytest

from harness.drivers import memcache
from harness.errors import WorkloadError
from harness.loadgen import ClientConfig, ClientRun
from harness.results import MISS, OK, TIMEOUT, OpsArrays
from harness.services.base import Endpoint, RunningService
from harness.settings import check_settings
from harness.workloads import WORKLOADS
from harness.workloads.kv_mix import GET, SET
from harness.workloads.memcache_mix import MixClient, key_of
from tests.fixtures.client_runs import run_client

WL = WORKLOADS.get("memcache_mix")
PARAMS = {"get_ratio": 0.9, "key_space": 500, "key_size_bytes": 16, "value_size_bytes": 100}
NOWHERE = Endpoint("memcached", "127.0.0.1", 1)


def _client(client_id: int = 0, **params: Any) -> MixClient:
    client = WL.client({"memcached": NOWHERE}, {**PARAMS, **params}, client_id)
    assert isinstance(client, MixClient)
    return client


# -- unit: choices made in the constructor -------------------------------------------

@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_op_pattern_honours_get_ratio(ratio: float) -> None:
    client = _client(get_ratio=ratio)
    ops = [client.next_op(seq) for seq in range(200_000)]
    assert set(ops) <= {GET, SET}
    assert ops.count(GET) / len(ops) == pytest.approx(ratio, abs=0.002)


def test_keys_cover_the_key_space_uniformly_with_the_key_size() -> None:
    client = _client(key_space=500, key_size_bytes=20)
    counts = Counter(req[4:-2] for req in client.get_seq)  # b"get <key>\r\n"
    assert set(counts) == {key_of(i, 20) for i in range(500)}
    assert {len(k) for k in counts} == {20}
    # Uniform: each of 500 keys expects ~262 draws; none far off.
    assert max(counts.values()) < 2 * min(counts.values())


def test_choices_are_seeded_per_client() -> None:
    a, a2, b = _client(0), _client(0), _client(1)
    assert a.get_seq == a2.get_seq and a.op_pattern == a2.op_pattern
    assert a.get_seq != b.get_seq


def test_validate_rejects_what_memcached_or_the_key_format_cannot_take() -> None:
    ok = WL.validate(PARAMS, {})
    assert ok == []
    # Each value's own range is its Setting's (checked by the spec, and by `check`).
    assert check_settings("params", {"get_ratio": 1.5, "key_space": 0, "key_size_bytes": 251,
                                     "value_size_bytes": 1_000_001}, WL.params) == [
        "params.get_ratio: must be at most 1", "params.key_space: must be at least 1",
        "params.key_size_bytes: must be at most 250 (memcached's limit)",
        "params.value_size_bytes: must be at most 1,000,000 (memcached's limit)"]
    with pytest.raises(WorkloadError, match="key_space must be at least 1"):
        WL.check({**PARAMS, "key_space": 0})
    # 10**6 keys need 1 prefix byte + 6 digits; a grid value counts as well.
    assert WL.validate({**PARAMS, "key_space": 10**6, "key_size_bytes": 6}, {})
    assert WL.validate(PARAMS, {"key_space": [10, 10**20]})
    with pytest.raises(WorkloadError, match="get_ratio"):
        _client(get_ratio=-0.1)


@pytest.mark.parametrize("key_space", [1, 700])
def test_native_tables_hold_the_same_requests_as_the_python_paths(key_space: int) -> None:
    """The native core's ops (`native_ops`) are the Python paths' ops: the same op per
    seq and, entry by entry, the same request bytes."""
    client = _client(key_space=key_space, get_ratio=0.5)
    ops = client.native_ops()
    assert ops.protocol == "memcache" and ops.get_op == GET and ops.set_tail == b"x" * 100 + b"\r\n"
    assert list(ops.pattern) == client.op_pattern
    for table, offsets, seq in ((ops.gets, ops.get_offsets, client.get_seq),
                                (ops.sets, ops.set_offsets, client.set_seq)):
        off = np.frombuffer(offsets, np.uint32)
        assert len(off) == len(seq) + 1 and off[-1] == len(table)
        assert [table[off[k]:off[k + 1]] for k in range(len(seq))] == seq


def test_driver_parses_replies_split_anywhere() -> None:
    """The hot-path parser of the driver: replies cut into 7-byte pieces."""

    async def go() -> list[object]:
        proto = memcache.MemcacheProtocol()
        proto.connection_made(_NullTransport())  # type: ignore[arg-type]
        futs = [proto.get(b"a"), proto.get(b"b"), proto.set(b"c", b"v"), proto.get(b"d")]
        stream = (b"VALUE a 0 5\r\nhello\r\nEND\r\n" b"END\r\n" b"STORED\r\n"
                  b"VALUE d 3 11\r\nwith\r\nin it\r\nEND\r\n")
        for i in range(0, len(stream), 7):
            proto.data_received(stream[i:i + 7])
        assert not proto._buf
        return [f.result() for f in futs]

    assert asyncio.run(go()) == [b"hello", None, b"STORED", b"with\r\nin it"]


class _NullTransport:
    def write(self, data: bytes) -> None:
        pass


# -- integration: a real memcached -----------------------------------------------------

def _config(endpoint: Endpoint, **kw: Any) -> ClientConfig:
    base: dict[str, Any] = dict(workload=WL.name, params=PARAMS,
                                endpoints={"memcached": endpoint.to_dict()}, client_id=1)
    base.update(kw)
    return ClientConfig(**base)


def _run(cfg: ClientConfig, prepare: bool = True) -> tuple[ClientRun, OpsArrays]:
    run = run_client(WL, cfg, prepare=prepare)
    return run, run.arrays(WL.ops)


def _stats(endpoint: Endpoint) -> dict[str, int]:
    with socket.create_connection((endpoint.host, endpoint.port), timeout=5) as s:
        s.sendall(b"stats\r\n")
        reply = b""
        while not reply.endswith(b"END\r\n"):
            reply += s.recv(65536)
    out = {}
    for line in reply.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STAT" and parts[2].isdigit():
            out[parts[1]] = int(parts[2])
    return out


@pytest.mark.integration
def test_prepare_loads_every_key(memcached_server: RunningService) -> None:
    ep = memcached_server.endpoint
    asyncio.run(WL.prepare({"memcached": ep}, PARAMS))

    async def read_all() -> list[bytes | None]:
        mc = await memcache.connect(ep.host, ep.port)
        try:
            return list(await asyncio.gather(*(mc.get(key_of(i, 16)) for i in range(500))))
        finally:
            mc.close()

    assert set(asyncio.run(read_all())) == {b"x" * 100}
    assert _stats(ep)["curr_items"] == 500


@pytest.mark.integration
@pytest.mark.parametrize(("connections", "inflight"), [(1, 1), (4, 2)])
@pytest.mark.usefixtures("loadgen_engine")
def test_run_mixes_gets_and_sets_and_every_get_hits(
        memcached_server: RunningService, connections: int, inflight: int) -> None:
    ep = memcached_server.endpoint
    _, ops = _run(_config(ep, ops=5000, connections=connections, inflight=inflight))
    assert len(ops) == 5000
    gets = ops.op == WL.ops.index("get")
    assert gets.mean() == pytest.approx(0.9, abs=0.015)
    assert set(ops.status.tolist()) == {OK}  # no misses: every get hits
    assert set(ops.nbytes.tolist()) == {100}  # value sizes, gets and sets alike
    stats = _stats(ep)
    assert stats["get_misses"] == 0 and stats["get_hits"] == int(gets.sum())
    # Sets only ever touched keys of the key space: no item beyond the 500 loaded.
    assert stats["curr_items"] == 500


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_gets_without_prepare_are_misses(memcached_server: RunningService) -> None:
    _, ops = _run(_config(memcached_server.endpoint, ops=400,
                          params={**PARAMS, "get_ratio": 1.0}), prepare=False)
    assert set(ops.status.tolist()) == {MISS} and set(ops.nbytes.tolist()) == {0}


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_stopped_server_gives_timeouts_then_recovers(memcached_server: RunningService) -> None:
    """Timeouts in the timed loop: a frozen server makes ops time out at timeout_s; the
    loop reconnects and goes on once it answers again."""
    ep, host = memcached_server.endpoint, memcached_server.host
    proc = memcached_server.processes[0]
    cfg = _config(ep, duration_s=1.5, connections=2, timeout_s=0.2)

    async def go() -> ClientRun:
        await WL.prepare({"memcached": ep}, PARAMS)
        run = ClientRun(cfg, WL.client({"memcached": ep}, PARAMS, 1))
        await run.connect_all()
        task = asyncio.create_task(run.run())
        await asyncio.sleep(0.3)
        host.signal(proc, "STOP")
        await asyncio.sleep(0.5)
        host.signal(proc, "CONT")
        await task
        return run

    try:
        run = asyncio.run(go())
    finally:
        host.signal(proc, "CONT")
    ops = run.rec.to_arrays(WL.ops, 1, 0)
    timeouts = ops.status == TIMEOUT
    assert timeouts.any() and not run.aborted
    assert np.all(ops.latency_ns[timeouts] >= 0.2e9)
    assert np.all(ops.latency_ns[timeouts] < 0.4e9)
    last_timeout = ops.start_ns[timeouts].max()
    after = ops.status[ops.start_ns > last_timeout]
    assert after.size > 100 and set(after.tolist()) <= {OK}
    assert "TimeoutError" in (run.last_error or "")


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_cancelling_the_run_is_not_turned_into_timeouts(
        memcached_server: RunningService) -> None:
    ep = memcached_server.endpoint
    cfg = _config(ep, duration_s=30, connections=2, timeout_s=5)

    async def go() -> ClientRun:
        run = ClientRun(cfg, WL.client({"memcached": ep}, PARAMS, 1))
        await run.connect_all()
        task = asyncio.create_task(run.run())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return run

    run = asyncio.run(go())
    assert run.rec.n > 0
    assert TIMEOUT not in run.rec.to_arrays(WL.ops, 0, 0).status.tolist()


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_large_values_cross_partial_writes_and_reads(memcached_server: RunningService) -> None:
    """300 kB values, 4 in flight on each of 2 connections: a batch of sets is more than
    a socket buffer takes at once and a reply spans many reads; every op is recorded
    with its size."""
    params = {**PARAMS, "key_space": 30, "value_size_bytes": 300_000, "get_ratio": 0.5}
    _, ops = _run(_config(memcached_server.endpoint, params=params, ops=400, connections=2,
                          inflight=4))
    assert len(ops) == 400 and set(ops.status.tolist()) == {OK}
    assert set(ops.nbytes.tolist()) == {300_000}
