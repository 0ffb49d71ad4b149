"""redis_mix: its precomputed choices, the driver's pipelining, and runs against a real
redis-server (requests in flight per connection = the load generator's `inflight`)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from harness.drivers import redis as resp
from harness.errors import WorkloadError
from harness.loadgen import ClientConfig, ClientRun, Recorder
from harness.results import ERROR, MISS, OK, OpsArrays
from harness.services.base import Endpoint, RunningService
from harness.services.redis import redis_command
from harness.settings import check_settings
from harness.workloads import WORKLOADS
from harness.workloads.kv_mix import GET, SET
from harness.workloads.redis_mix import RedisMixClient, key_of

WL = WORKLOADS.get("redis_mix")
PARAMS = {"get_ratio": 0.9, "key_space": 500, "key_size_bytes": 16, "value_size_bytes": 100}
NOWHERE = Endpoint("redis", "127.0.0.1", 1)


def _client(client_id: int = 0, **params: Any) -> RedisMixClient:
    client = WL.client({"redis": NOWHERE}, {**PARAMS, **params}, client_id)
    assert isinstance(client, RedisMixClient)
    return client


# -- unit: choices made in the constructor -------------------------------------------

@pytest.mark.parametrize("ratio", [0.0, 0.5, 0.9, 1.0])
def test_op_pattern_honours_get_ratio(ratio: float) -> None:
    client = _client(get_ratio=ratio)
    ops = [client.next_op(seq) for seq in range(200_000)]
    assert set(ops) <= {GET, SET}
    assert ops.count(GET) / len(ops) == pytest.approx(ratio, abs=0.002)


def test_keys_are_redis_benchmarks_and_cover_the_key_space() -> None:
    # redis-benchmark -r N reads and writes key:<12 digits>: the same 16-byte keys.
    assert key_of(1234, 16) == b"key:000000001234"
    client = _client(key_space=500, key_size_bytes=20)
    gets = Counter(client.get_seq)
    assert set(gets) == {resp.encode((b"GET", key_of(i, 20))) for i in range(500)}
    # Uniform: each of 500 keys expects ~262 draws; none far off.
    assert max(gets.values()) < 2 * min(gets.values())
    # get_seq[j] and set_seq[j] name the same key; a SET carries the whole value.
    j = 7
    key = client.get_seq[j].split(b"\r\n")[-2]
    assert client.set_seq[j] + client.value_tail == resp.encode((b"SET", key, b"x" * 100))


def test_choices_are_seeded_per_client() -> None:
    a, a2, b = _client(0), _client(0), _client(1)
    assert a.get_seq == a2.get_seq and a.op_pattern == a2.op_pattern
    assert a.get_seq != b.get_seq


def test_validate_rejects_what_the_key_format_or_redis_cannot_take() -> None:
    assert WL.validate(PARAMS, {}) == []
    # Each value's own range is its Setting's (checked by the spec, and by `check`).
    assert check_settings("params", {"get_ratio": 1.5, "key_space": 0,
                                     "value_size_bytes": 0}, WL.params) == [
        "params.get_ratio: must be at most 1", "params.key_space: must be at least 1",
        "params.value_size_bytes: must be at least 1"]
    # 10**6 keys need the 4-byte prefix and 6 digits; a grid value counts as well.
    assert WL.validate({**PARAMS, "key_space": 10**6, "key_size_bytes": 9}, {})
    assert WL.validate(PARAMS, {"key_space": [10, 10**20]})
    with pytest.raises(WorkloadError, match="get_ratio"):
        _client(get_ratio=-0.1)


# -- unit: the driver's hot path -------------------------------------------------------

class _Transport:
    """Keeps what is written, one item per write call."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False


def test_driver_parses_replies_split_anywhere() -> None:
    """Bulk strings of changing sizes (the cached header must not match a longer size),
    nil, +OK, an error and an integer, cut into 3-byte pieces."""

    async def go() -> list[object]:
        conn = resp.RespConnection()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        futs = [conn.call(b"cmd") for _ in range(8)]
        stream = (b"$5\r\nhello\r\n" b"$5\r\nwor\r\n\r\n" b"$-1\r\n" b"$50\r\n" + b"y" * 50
                  + b"\r\n" b"+OK\r\n" b"-ERR no\r\n" b":42\r\n" b"$5\r\nagain\r\n")
        for i in range(0, len(stream), 3):
            conn.data_received(stream[i:i + 3])
        assert not conn._buf
        return [f.result() for f in futs]

    values = asyncio.run(go())
    assert values[:4] == [b"hello", b"wor\r\n", None, b"y" * 50]
    assert values[4] == b"OK" and isinstance(values[5], resp.RespError)
    assert values[6:] == [42, b"again"]


def test_requests_sent_while_others_are_in_flight_go_out_in_one_write() -> None:
    async def go() -> tuple[list[bytes], list[object]]:
        conn = resp.RespConnection()
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        first = conn.call(b"A\r\n")  # nothing in flight: written at once
        assert transport.writes == [b"A\r\n"]
        rest = [conn.call(b"%d\r\n" % i) for i in range(3)]
        assert len(transport.writes) == 1  # held until the end of this iteration
        await asyncio.sleep(0)
        conn.data_received(b":0\r\n:1\r\n:2\r\n:3\r\n")
        # Right after a batch of replies the next request is held too (the others of
        # the pipeline follow in the same iteration).
        again = [conn.call(b"B\r\n"), conn.call(b"C\r\n")]
        await asyncio.sleep(0)
        conn.data_received(b":4\r\n:5\r\n")
        return transport.writes, [f.result() for f in [first, *rest, *again]]

    writes, values = asyncio.run(go())
    assert writes == [b"A\r\n", b"0\r\n1\r\n2\r\n", b"B\r\nC\r\n"]
    assert values == [0, 1, 2, 3, 4, 5]


# -- integration: a real redis-server ----------------------------------------------------

def _config(endpoint: Endpoint, **kw: Any) -> ClientConfig:
    base: dict[str, Any] = dict(workload=WL.name, params=PARAMS,
                                endpoints={"redis": endpoint.to_dict()}, client_id=1)
    base.update(kw)
    return ClientConfig(**base)


def _run(cfg: ClientConfig, prepare: bool = True, client: Any = None,
         capacity: int | None = None) -> tuple[ClientRun, OpsArrays]:
    async def go() -> ClientRun:
        eps = cfg.endpoint_objects()
        if prepare:
            await WL.prepare(eps, cfg.params)
        run = ClientRun(cfg, client or WL.client(eps, cfg.params, cfg.client_id))
        if capacity is not None:
            run.rec = Recorder(capacity)  # before run(): the slots take its views
        await run.connect_all()
        await run.run()
        return run

    run = asyncio.run(go())
    return run, run.rec.to_arrays(WL.ops, cfg.client_id, 0)


def _info(endpoint: Endpoint, section: str) -> dict[str, str]:
    text = str(redis_command(endpoint.host, endpoint.port, "INFO", section,
                             auth=endpoint.auth))
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


@pytest.mark.integration
def test_prepare_loads_every_key(redis_server: RunningService) -> None:
    ep = redis_server.endpoint
    asyncio.run(WL.prepare({"redis": ep}, PARAMS))
    assert redis_command(ep.host, ep.port, "DBSIZE", auth=ep.auth) == 500
    for i in (0, 250, 499):
        assert redis_command(ep.host, ep.port, "GET", key_of(i, 16).decode(),
                             auth=ep.auth) == "x" * 100


@pytest.mark.integration
@pytest.mark.parametrize(("connections", "inflight"), [(1, 1), (4, 2)])
@pytest.mark.usefixtures("loadgen_engine")
def test_run_mixes_gets_and_sets_and_every_get_hits(
        redis_server: RunningService, connections: int, inflight: int) -> None:
    ep = redis_server.endpoint
    _, ops = _run(_config(ep, ops=5000, connections=connections, inflight=inflight))
    assert len(ops) == 5000
    gets = ops.op == WL.ops.index("get")
    assert gets.mean() == pytest.approx(0.9, abs=0.015)
    assert set(ops.status.tolist()) == {OK}  # no misses: every GET hits
    assert set(ops.nbytes.tolist()) == {100}  # value sizes, GETs and SETs alike
    stats = _info(ep, "stats")
    assert int(stats["keyspace_misses"]) == 0
    assert int(stats["keyspace_hits"]) == int(gets.sum())
    # SETs only ever touched keys of the key space.
    assert redis_command(ep.host, ep.port, "DBSIZE", auth=ep.auth) == 500


class _DepthClient(RedisMixClient):
    """Notes, at every send, how many of its connection's requests are in flight (one
    by one on the callback path, in batches on the pipelined one), and counts the writes
    that reach the socket."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.depths: list[int] = []
        self.writes = 0

    def native_ops(self) -> None:
        return None  # it counts the Python driver's sends: keep the Python paths

    async def connect(self) -> Any:
        conn = await super().connect()
        send, write = conn.send, conn.transport.write

        def counting_write(data: bytes) -> None:
            self.writes += 1
            write(data)

        def noting_send(payload: bytes, on_reply: Any) -> None:
            send(payload, on_reply)
            self.depths.append(len(conn._waiters))

        send_batch = conn.send_batch

        def noting_send_batch(payload: bytes, count: int) -> None:
            send_batch(payload, count)
            self.depths.append(conn._expected)

        conn.send = noting_send
        conn.send_batch = noting_send_batch
        conn.transport = _Proxy(conn.transport, counting_write)
        return conn


class _Proxy:
    def __init__(self, transport: Any, write: Any) -> None:
        self._transport, self.write = transport, write

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


@pytest.mark.integration
def test_inflight_16_on_one_connection_pipelines(redis_server: RunningService) -> None:
    """16 requests in flight on one connection: the right count and statuses, replies
    matched in order (a GET's reply is its own key's value), and really pipelined: up to
    16 requests awaiting replies at once, sent in far fewer writes than requests."""
    ep = redis_server.endpoint
    ops_n = 4000
    params = {**PARAMS, "get_ratio": 1.0}
    client = _DepthClient(ep, params, 1)
    _, ops = _run(_config(ep, params=params, ops=ops_n, connections=1, inflight=16),
                  client=client)
    assert len(ops) == ops_n
    assert set(ops.status.tolist()) == {OK} and set(ops.nbytes.tolist()) == {100}
    assert max(client.depths) == 16
    assert client.writes < ops_n / 4

    keys = [key_of(i, 16) for i in range(16)]

    async def in_order() -> list[object]:
        # Distinct values per key: a reply matched to the wrong request would show.
        conn = await resp.connect(ep.host, ep.port, auth=ep.auth)
        try:
            for k in keys:
                assert await conn.request(b"SET", k, b"v-" + k) == b"OK"
            return list(await asyncio.gather(
                *[conn.call(resp.encode((b"GET", k))) for k in keys]))
        finally:
            conn.close()

    assert asyncio.run(in_order()) == [b"v-" + k for k in keys]


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_recorder_grows_under_pipelined_slots(redis_server: RunningService) -> None:
    """From 16 records up, while 16 slots hold the recorder's views: each growth releases
    them, every slot picks up the new ones, and no record is lost or torn."""
    ep = redis_server.endpoint
    run, ops = _run(_config(ep, ops=3000, warmup_ops=100, connections=2, inflight=8),
                    capacity=16)
    assert run.rec.capacity >= 3100
    assert len(ops) == 3100 and set(ops.status.tolist()) == {OK}
    assert (ops.latency_ns > 0).all() and (ops.start_ns >= 0).all()
    assert int(ops.warmup.sum()) == 100
    assert ops.start_ns.max() < 60e9  # relative to the run's start, not raw clock readings


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_gets_without_prepare_are_misses(redis_server: RunningService) -> None:
    _, ops = _run(_config(redis_server.endpoint, ops=400,
                          params={**PARAMS, "get_ratio": 1.0}), prepare=False)
    assert set(ops.status.tolist()) == {MISS} and set(ops.nbytes.tolist()) == {0}


@pytest.mark.integration
@pytest.mark.parametrize("inflight", [1, 4])
def test_an_error_reply_fails_the_op_and_the_run_goes_on(
        redis_server: RunningService, loadgen_engine: str, inflight: int) -> None:
    """One key holds a list, so a GET of it gets -WRONGTYPE: that op is an error record
    (with the ops in flight beside it on its connection), the connection is replaced,
    and the run ends with one record per op, on both engines."""
    ep = redis_server.endpoint
    params = {**PARAMS, "key_space": 20, "get_ratio": 1.0}

    async def poison() -> None:
        await WL.prepare({"redis": ep}, params)
        conn = await resp.connect(ep.host, ep.port, auth=ep.auth)
        try:
            await conn.request(b"DEL", key_of(7, 16))
            assert await conn.request(b"LPUSH", key_of(7, 16), b"x") == 1
        finally:
            conn.close()

    asyncio.run(poison())
    run, ops = _run(_config(ep, params=params, ops=2000, connections=2, inflight=inflight,
                            max_consecutive_errors=10_000), prepare=False)
    assert run.engine == loadgen_engine
    statuses = Counter(ops.status.tolist())
    assert len(ops) == 2000 and set(statuses) == {OK, ERROR}
    # ~1 GET in 20 hits the list key; with inflight 4 its neighbours fail with it.
    assert 40 <= statuses[ERROR] <= 2000 * 4 // 10
    assert "WRONGTYPE" in (run.last_error or "") and not run.aborted
