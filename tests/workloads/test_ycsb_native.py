"""The `ycsb` workload on the native core: which runs go there, and that both engines
send a real server the same ops (Redis's MONITOR stream) and record the same outcomes."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest

from harness.loadgen import ClientConfig, ClientRun
from harness.loadgen import native as native_engine
from harness.results import MISS, OK, OpsArrays
from harness.services.base import Endpoint, RunningService
from harness.workloads import WORKLOADS
from harness.workloads.ycsb import CHUNK, NATIVE_CHUNKS, YcsbClient
from harness.workloads.ycsb_gen import key_name
from harness.workloads.ycsb_props import OPS
from harness.workloads.ycsb_stores import MemcachedStore
from tests.fixtures.client_runs import run_client
from tests.fixtures.redis_monitor import RedisMonitor

WL = WORKLOADS.get("ycsb")
NOWHERE = {kind: Endpoint(kind, "127.0.0.1", 1) for kind in ("redis", "memcached", "postgres")}


def _client(kind: str, client_id: int = 0, **params: Any) -> YcsbClient:
    client = WL.client({kind: NOWHERE[kind]}, {"record_count": 1000, **params}, client_id)
    assert isinstance(client, YcsbClient)
    return client


@pytest.mark.parametrize(("kind", "params", "protocol"), [
    ("redis", {"workload": "a"}, "resp_hash"),
    ("redis", {"workload": "b", "read_all_fields": False}, "resp"),
    ("redis", {"workload": "c", "request_distribution": "uniform"}, "resp_hash"),
    ("memcached", {"workload": "a"}, "memcache"),
    ("memcached", {"workload": "c", "request_distribution": "hotspot"}, "memcache"),
    ("redis", {"workload": "d"}, None),  # inserts, latest keys
    ("redis", {"workload": "e"}, None),  # scans
    ("redis", {"workload": "f"}, None),  # read-modify-writes
    ("redis", {"workload": "a", "request_distribution": "latest"}, None),
    ("postgres", {"workload": "a"}, None),
])
def test_reads_and_updates_with_fixed_keys_go_to_the_native_core(
        kind: str, params: dict[str, Any], protocol: str | None) -> None:
    client = _client(kind, **params)
    ops = client.native_ops()
    assert (ops.protocol if ops else None) == protocol
    assert client.periodic == (protocol is not None)
    if ops is not None:
        period = CHUNK * NATIVE_CHUNKS
        assert len(ops.pattern) == period == len(np.frombuffer(ops.get_offsets, np.uint32)) - 1
        # The sequence repeats after the period on the Python path too.
        assert [client.next_op(s) for s in range(0, 3 * period, 997)] == \
            [client.next_op(s % period) for s in range(0, 3 * period, 997)]
        keys = client.keynums(np.arange(2 * period))
        assert np.array_equal(keys[:period], keys[period:])
        assert keys.min() >= 0 and keys.max() < 1000


def _run(kind: str, ep: Endpoint, params: dict[str, Any], **kw: Any) -> tuple[ClientRun,
                                                                               OpsArrays]:
    cfg = ClientConfig(workload="ycsb", params=params, endpoints={kind: ep.to_dict()},
                       client_id=1, record_keys=True, **kw)
    run = run_client(WL, cfg)
    return run, run.arrays(WL.ops)


def _outcomes(ops: OpsArrays) -> Counter[tuple[str, int, int, int]]:
    """(op, status, bytes, key) of every record; a read's bytes are left out (-1): they
    depend on which updates the server ran before it, an order the engines share not."""
    names = [OPS[o] for o in ops.op.tolist()]
    return Counter(zip(names, ops.status.tolist(),
                       [-1 if n == "read" else b for n, b in zip(names, ops.nbytes.tolist(),
                                                                  strict=True)],
                       ops.key.tolist(), strict=True))


@pytest.mark.integration
@pytest.mark.parametrize("params", [
    {"workload": "a"},                                   # HGETALL / HMSET of one field
    {"workload": "b", "read_all_fields": False},         # HMGET of one field
    {"workload": "a", "write_all_fields": True, "field_length_distribution": "uniform"},
], ids=["a", "b-one-field", "a-all-fields"])
def test_both_engines_send_redis_the_same_ops_and_record_the_same(
        redis_server: RunningService, monkeypatch: pytest.MonkeyPatch,
        params: dict[str, Any]) -> None:
    if not native_engine.built():
        pytest.skip("the native core is not built (no C compiler at install)")
    ep = redis_server.endpoint
    params = {**params, "record_count": 300, "field_count": 4, "field_length": 50}
    seen: dict[str, Counter[tuple[bytes, bytes]]] = {}
    recorded: dict[str, Counter[tuple[str, int, int, int]]] = {}
    for engine in ("python", "native"):
        monkeypatch.setenv(native_engine.ENV, engine)
        asyncio.run(WL.prepare({"redis": ep}, params))  # the same records for both
        monitor = RedisMonitor(ep)
        run, ops = _run("redis", ep, params, ops=5000, connections=2, inflight=4)
        assert run.engine == engine
        commands = monitor.commands(5000)
        seen[engine] = Counter((cmd, key) for cmd, key, _ in commands)
        recorded[engine] = _outcomes(ops)
        assert {s for _, s, _, _ in recorded[engine]} == {OK}
        if "field_length_distribution" not in params:  # every field 50 bytes, always
            read = ops.op == OPS.index("read")
            want = 50 if params.get("read_all_fields") is False else 4 * 50  # HGETALL: values
            assert set(ops.nbytes[read].tolist()) == {want}
        # Each record's key is the key of a command Redis ran.
        assert Counter(key_name(k, False).encode() for k in ops.key.tolist()) == \
            Counter(key for _, key, _ in commands)
    assert seen["python"] == seen["native"]
    assert recorded["python"] == recorded["native"]


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_memcached_reads_and_replaces_on_either_engine(
        memcached_server: RunningService) -> None:
    """Workload A against memcached: reads hit the loaded JSON documents (their bytes
    the document's), updates replace them with one field; a record not loaded is a miss
    on both engines (NOT_STORED, END)."""
    ep = memcached_server.endpoint
    params = {"workload": "a", "record_count": 300, "field_count": 3, "field_length": 20}
    asyncio.run(WL.prepare({"memcached": ep}, params))
    _, ops = _run("memcached", ep, params, ops=3000, connections=2, inflight=2)
    reads, updates = ops.op == OPS.index("read"), ops.op == OPS.index("update")
    assert set(ops.status.tolist()) == {OK}
    assert abs(reads.mean() - 0.5) < 0.05
    store = MemcachedStore(3)
    one, whole = len(store.document({1: "v" * 20})), len(store.document(["v" * 20] * 3))
    assert (one, whole) == (33, 97)  # {"field1":"<20>"}; three such fields
    assert set(ops.nbytes[updates].tolist()) == {one}  # an update writes one field
    # A read gets a whole loaded document or one a replace left.
    assert set(ops.nbytes[reads].tolist()) <= {whole, one}
    asyncio.run(WL.prepare({"memcached": ep}, {**params, "record_count": 10}))
    _, missing = _run("memcached", ep, params, ops=400, connections=1)
    far = missing.key >= 10  # loaded no more: both reads and replaces miss
    assert set(missing.status[far].tolist()) == {MISS}
    assert set(missing.status[~far].tolist()) == {OK}
