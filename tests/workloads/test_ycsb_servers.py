"""The `ycsb` workload against real servers: what the load writes, read back from Redis,
PostgreSQL and memcached as YCSB's bindings would have it; each op's effect on the
server; workload D with requests in flight (reads only of acknowledged inserts); and
short runs of workload A on Redis and C on memcached through the runner."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.drivers import postgres as pg
from harness.drivers import redis as resp
from harness.hosts import LocalHost
from harness.loadgen import ClientConfig, ClientRun
from harness.results import ERROR, MISS, OK, read_manifest, read_ops
from harness.run.runner import Runner
from harness.services.base import Endpoint, RunningService
from harness.spec import load_spec
from harness.workloads import WORKLOADS
from harness.workloads.ycsb import INSERT_SHARE, YcsbClient
from harness.workloads.ycsb_gen import java_string_hash, key_name
from harness.workloads.ycsb_props import INSERT, OPS
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

WL = WORKLOADS.get("ycsb")
RECORDS = 300


def _keys(n: int = RECORDS, ordered: bool = False) -> set[str]:
    return {key_name(k, ordered) for k in range(n)}


def _client(kind: str, ep: Endpoint, client_id: int = 0, **params: Any) -> YcsbClient:
    client = WL.client({kind: ep}, params, client_id)
    assert isinstance(client, YcsbClient)
    return client


async def _redis_records(ep: Endpoint) -> tuple[dict[str, dict[str, str]], list[Any]]:
    """Every hash in the database, and `_indices` with its scores."""
    conn = await resp.connect(ep.host, ep.port, auth=ep.auth)
    try:
        names = [k.decode() for k in await conn.request("KEYS", "*")]
        hashes = {}
        for name in names:
            if name != "_indices":
                flat = await conn.request("HGETALL", name)
                hashes[name] = {f.decode(): v.decode() for f, v in zip(flat[::2], flat[1::2],
                                                                         strict=True)}
        index = await conn.request("ZRANGE", "_indices", 0, -1, "WITHSCORES")
        return hashes, index
    finally:
        conn.close()


def test_redis_holds_what_ycsbs_load_writes_and_ops_act_on_it(
        redis_server: RunningService) -> None:
    ep = redis_server.endpoint
    params = {"workload": "e", "record_count": RECORDS, "field_count": 3,
              "field_length": 12}
    asyncio.run(WL.prepare({"redis": ep}, params))
    hashes, index = asyncio.run(_redis_records(ep))
    # A hash per record, YCSB's keys, fields field0..2 of 12 printable characters.
    assert set(hashes) == _keys()
    for fields in hashes.values():
        assert set(fields) == {"field0", "field1", "field2"}
        assert all(len(v) == 12 and v.isprintable() for v in fields.values())
    # The index: every key, scored by Java's String.hashCode.
    members = dict(zip([m.decode() for m in index[::2]], [float(s) for s in index[1::2]],
                       strict=True))
    assert members == {k: float(java_string_hash(k)) for k in _keys()}

    async def ops() -> None:
        client = _client("redis", ep, client_id=2, **params)
        conn = await client.connect()
        try:
            store = client.store
            key = key_name(7, False)
            assert await store.read(conn, key, None) == (OK, 36)
            assert await store.read(conn, key, 1) == (OK, 12)
            assert await store.read(conn, "user-nope", None) == (MISS, 0)
            assert await store.update(conn, key, {2: "z" * 12}) == (OK, 12)
            assert hashes[key]["field0"] == (await conn.request("HGET", key, "field0")).decode()
            assert await conn.request("HGET", key, "field2") == b"z" * 12
            # A scan: up to n keys scored from the start key's score up, a read of each.
            start = sorted(members, key=lambda k: (members[k], k))[100]
            assert await store.scan(conn, start, 5, None) == (OK, 5 * 36)
            last = sorted(members, key=lambda k: (members[k], k))[-2]
            assert await store.scan(conn, last, 5, 0) == (OK, 2 * 12)
            # An insert through the client: keynum 300 + 2 * 2^32, hashed, and indexed.
            status, nbytes = await client.execute(conn, INSERT, 0)
            assert (status, nbytes) == (OK, 36)
            new = key_name(RECORDS + 2 * INSERT_SHARE, False)
            assert await conn.request("ZSCORE", "_indices", new) == b"%d" % java_string_hash(new)
            assert client.counter.last == RECORDS
        finally:
            await client.close(conn)

    asyncio.run(ops())
    # A new load empties what the last one and its run left: exactly its records again.
    asyncio.run(WL.prepare({"redis": ep}, params))
    hashes, index = asyncio.run(_redis_records(ep))
    assert set(hashes) == _keys() and len(index) == 2 * RECORDS


def test_postgres_holds_what_ycsbs_load_writes_and_ops_act_on_it(
        postgres_server: RunningService) -> None:
    ep = postgres_server.endpoint
    params = {"workload": "e", "record_count": RECORDS, "field_count": 4,
              "field_length": 50, "field_length_distribution": "zipfian",
              "insert_order": "ordered"}

    async def check() -> None:
        await WL.prepare({"postgres": ep}, params)
        conn = await pg.connect(ep)
        try:
            columns = await conn.fetch(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'usertable' ORDER BY ordinal_position")
            assert [tuple(c) for c in columns] == [
                ("ycsb_key", "character varying"),
                *((f"field{i}", "text") for i in range(4))]
            assert await conn.fetchval(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = "
                "'usertable'::regclass AND i.indisprimary") == "ycsb_key"
            rows = await conn.fetch("SELECT * FROM usertable")
            assert {r["ycsb_key"] for r in rows} == _keys(ordered=True)
            lengths = [len(r[f"field{i}"]) for r in rows for i in range(4)]
            # Zipfian lengths over 1..50: the shortest the most common.
            assert min(lengths) == 1 and max(lengths) <= 50
            assert Counter(lengths).most_common(1)[0][0] == 1

            client = _client("postgres", ep, **params)
            c = await client.connect()

            async def size_of(where: str, *args: Any) -> int:
                found = await conn.fetch(f"SELECT * FROM usertable {where}", *args)
                return sum(len(r[f"field{i}"]) for r in found for i in range(4))

            try:
                store, key = client.store, "user7"
                # SELECT *, as the JDBC binding: a one-field read reads the row.
                whole = await size_of("WHERE ycsb_key = $1", key)
                assert await store.read(c, key, None) == await store.read(c, key, 2) == (
                    OK, whole)
                assert await store.read(c, "user-nope", 2) == (MISS, 0)
                assert await store.update(c, key, {3: "q" * 9}) == (OK, 9)
                assert await conn.fetchval(
                    "SELECT field3 FROM usertable WHERE ycsb_key = 'user7'") == "q" * 9
                assert await store.update(c, "user-nope", {0: "x"}) == (MISS, 0)
                # Keys in key order from the start key: user7, user70, user71, ...
                assert [r[0] for r in await conn.fetch(
                    "SELECT ycsb_key FROM usertable WHERE ycsb_key >= 'user7' "
                    "ORDER BY ycsb_key LIMIT 3")] == ["user7", "user70", "user71"]
                assert await store.scan(c, key, 7, None) == (OK, await size_of(
                    "WHERE ycsb_key >= $1 ORDER BY ycsb_key LIMIT 7", key))
                status, _ = await client.execute(c, INSERT, 0)
                assert status == OK
                assert await conn.fetchval(
                    "SELECT count(*) FROM usertable WHERE ycsb_key = $1",
                    f"user{RECORDS}") == 1
                # The same record again: YCSB's insert fails on the primary key.
                record = (f"user{RECORDS}", ["a", "b", "c", "d"])
                assert await store.insert(c, record) == (ERROR, 0)
            finally:
                await client.close(c)
            await WL.prepare({"postgres": ep}, params)
            assert await conn.fetchval("SELECT count(*) FROM usertable") == RECORDS
        finally:
            await conn.close()

    asyncio.run(check())


def test_memcached_holds_records_as_json_documents(memcached_server: RunningService) -> None:
    ep = memcached_server.endpoint
    params = {"workload": "a", "record_count": 200}

    async def check() -> None:
        await WL.prepare({"memcached": ep}, params)
        client = _client("memcached", ep, **params)
        conn = await client.connect()
        try:
            for k in (0, 199):
                doc = json.loads(await conn.get(f"usertable-{key_name(k, False)}".encode()))
                assert set(doc) == {f"field{i}" for i in range(10)}
                assert {len(v) for v in doc.values()} == {100}
            assert await conn.get(f"usertable-{key_name(200, False)}".encode()) is None
            store, key = client.store, key_name(5, False)
            assert await store.read(conn, key, None) == (OK, len(await conn.get(
                f"usertable-{key}".encode())))
            # YCSB's binding replaces the document with the fields written.
            doc = b'{"field4":"' + b"u" * 100 + b'"}'
            assert await store.update(conn, key, {4: "u" * 100}) == (OK, len(doc))
            assert await conn.get(f"usertable-{key}".encode()) == doc
            assert json.loads(await conn.get(f"usertable-{key}".encode())) == {
                "field4": "u" * 100}
            assert await store.update(conn, "user-nope", {4: "u"}) == (MISS, 0)
            assert await store.insert(conn, (key, ["v"] * 10)) == (ERROR, 0)  # add: exists
        finally:
            await client.close(conn)

    asyncio.run(check())


def test_workload_d_in_flight_reads_only_acknowledged_inserts(
        redis_server: RunningService) -> None:
    """Two processes' clients, 3 connections x 2 in flight each: inserts land in each
    one's share and no read misses (reads pick only inserts that completed)."""
    ep = redis_server.endpoint
    params = {"workload": "d", "record_count": 500, "field_count": 2, "field_length": 10}
    asyncio.run(WL.prepare({"redis": ep}, params))
    statuses: Counter[tuple[str, int]] = Counter()
    for client_id in (0, 1):
        cfg = ClientConfig(workload="ycsb", params=params,
                           endpoints={"redis": ep.to_dict()}, client_id=client_id,
                           ops=3000, connections=3, inflight=2)

        async def go(cfg: ClientConfig = cfg) -> ClientRun:
            run = ClientRun(cfg, WL.client(cfg.endpoint_objects(), cfg.params, cfg.client_id))
            await run.connect_all()
            await run.run()
            return run

        arrays = asyncio.run(go()).rec.to_arrays(WL.ops, client_id, 0)
        statuses.update(zip([OPS[o] for o in arrays.op.tolist()], arrays.status.tolist(),
                            strict=True))
    assert set(statuses) == {("read", OK), ("insert", OK)}, statuses
    assert statuses["insert", OK] == pytest.approx(0.05 * 6000, rel=0.2)
    hashes, _ = asyncio.run(_redis_records(ep))
    inserted = set(hashes) - _keys(500)
    assert len(inserted) == statuses["insert", OK]
    shares = {key_name(500 + i * INSERT_SHARE + k, False): i for i in (0, 1) for k in
              range(300)}
    assert {shares[k] for k in inserted} == {0, 1}


SPEC = """\
name: ycsb_{name}
workload: ycsb
hosts: {{server: localhost, client: localhost}}
services:
  db: {{kind: {kind}, host: server}}
clients: {{hosts: [client], processes: 2, connections: 2}}
params: {{workload: {workload}, record_count: 500}}
run: {{ops: 2000, warmup_ops: 100, timeout_s: 5}}
"""


@pytest.mark.parametrize(("kind", "workload", "mix"), [
    ("redis", "a", {"read": 0.5, "update": 0.5}),
    ("memcached", "c", {"read": 1.0}),
])
def test_short_runs_through_the_runner(tmp_path: Path, kind: str, workload: str,
                                       mix: dict[str, float]) -> None:
    require_service(kind, LocalHost())
    spec = tmp_path / "ycsb.yaml"
    spec.write_text(SPEC.format(name=workload, kind=kind, workload=workload))
    [outcome] = Runner(load_spec(spec), tmp_path / "raw", progress=False).run()
    assert outcome.status == "complete", outcome.error
    ops = read_ops(outcome.run_dir).to_pandas()
    measured = ops[~ops["warmup"]]
    assert len(measured) == 2000 and set(measured["client"]) == {0, 1}
    assert set(measured["status"]) == {"ok"}  # every read finds its record
    shares = measured["op"].astype(str).value_counts(normalize=True).to_dict()
    assert set(shares) == set(mix)
    for op, share in mix.items():
        assert shares[op] == pytest.approx(share, abs=0.05)
    man = read_manifest(outcome.run_dir)
    load = man.typed_extra.baseline["load"]
    assert load["store"] == kind and load["records"] == 500 and load["seconds"] > 0
