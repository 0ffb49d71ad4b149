"""Study of seed 001: is memcache worth it? Datastore vs memcached, five operations.

Store/W inserts a row, Store/R reads one row by primary key, Mem/W sets a key, Mem/R-hit
gets a key that exists, Mem/R-miss gets one that does not. The seed timed sets of 50 ops
of 100-byte values ten times; here one run is one set (`run.ops`), `repetitions` the sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.drivers import memcache
from harness.drivers import postgres as pg
from harness.errors import WorkloadError
from harness.results import MISS, OK
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads.base import Workload, WorkloadClient

OPS = ("store_write", "store_read", "mem_write", "mem_read_hit", "mem_read_miss")
#: Short labels of the ops, as seed 001 named them in its tables.
LABELS: dict[str, str] = {
    "store_write": "Store/W",
    "store_read": "Store/R",
    "mem_write": "Mem/W",
    "mem_read_hit": "Mem/R-hit",
    "mem_read_miss": "Mem/R-miss",
}
#: Seed 001's table (App Engine, 2011): mean ms per op, for the record beside ours.
SEED_MS: dict[str, float] = {"store_write": 17.94, "store_read": 7.1, "mem_write": 2.29,
                             "mem_read_hit": 2.12, "mem_read_miss": 2.07}
TABLE = "bench_data"
#: Store/R reads one row of its own table, so that Store/W's inserts (ids from a
#: sequence) never collide with the row the reads expect.
READ_TABLE = "bench_read"
HIT_KEY = b"bench:hit"
MISS_KEY = b"bench:miss"


class DatastoreMemcache(Workload):
    name = "datastore_memcache"
    description = "PostgreSQL (datastore) vs memcached: write, read, read-hit, read-miss"
    ops = OPS
    requires = ("postgres", "memcached")
    params: Mapping[str, Setting] = {
        "op": Setting((str,), "store_write", "the operation every op of the run performs",
                      choices=OPS),
        "value_size_bytes": Setting((int,), 100, "size of each stored value", low=1,
                                    high=1_000_000, why="memcached's item limit"),
    }

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:
        value = b"x" * params["value_size_bytes"]
        conn = await pg.connect(endpoints["postgres"])
        try:
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} "
                "(id bigserial PRIMARY KEY, text_data text NOT NULL)"
            )
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {READ_TABLE} "
                "(id integer PRIMARY KEY, text_data text NOT NULL)"
            )
            await conn.execute(
                f"INSERT INTO {READ_TABLE} (id, text_data) VALUES (1, $1) "
                "ON CONFLICT (id) DO UPDATE SET text_data = EXCLUDED.text_data",
                value.decode(),
            )
        finally:
            await conn.close()
        cache = endpoints["memcached"]
        mc = await memcache.connect(cache.host, cache.port, tls=cache.tls)
        try:
            if await mc.set(HIT_KEY, value) != b"STORED":
                raise WorkloadError("memcached did not store the read-hit key")
            await mc.delete(MISS_KEY)
        finally:
            mc.close()

    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> WorkloadClient:
        return _Client(endpoints, params, client_id)


class _Client(WorkloadClient):
    def __init__(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any],
                 client_id: int) -> None:
        self.op = OPS.index(params["op"])
        self.uses_pg = params["op"].startswith("store_")
        self.endpoint = endpoints["postgres" if self.uses_pg else "memcached"]
        self.value = b"x" * params["value_size_bytes"]
        self.text = self.value.decode()
        self.write_key = b"bench:w:%d" % client_id

    async def connect(self) -> Any:
        if self.uses_pg:
            return await pg.connect(self.endpoint)
        return await memcache.connect(self.endpoint.host, self.endpoint.port,
                                      tls=self.endpoint.tls)

    async def close(self, conn: Any) -> None:
        if self.uses_pg:
            await conn.close(timeout=2)
        else:
            conn.close()

    def next_op(self, seq: int) -> int:
        return self.op

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        if op == 0:
            await conn.execute(f"INSERT INTO {TABLE} (text_data) VALUES ($1)", self.text)
            return OK, len(self.value)
        if op == 1:
            row = await conn.fetchval(f"SELECT text_data FROM {READ_TABLE} WHERE id = 1")
            return (OK, len(row)) if row is not None else (MISS, 0)
        if op == 2:
            reply = await conn.set(self.write_key, self.value)
            if reply != b"STORED":
                raise WorkloadError(f"memcached set answered {reply!r}")
            return OK, len(self.value)
        value = await conn.get(HIT_KEY if op == 3 else MISS_KEY)
        return (OK, len(value)) if value is not None else (MISS, 0)
