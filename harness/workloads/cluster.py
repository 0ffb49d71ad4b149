"""Study of seed 002: an in-memory database's cluster_perf, on (replicated) PostgreSQL.

The seed's class `Record { uint4 key; hash<key> hkey; tree<key> tkey; }` becomes a table
`record (hkey int4, tkey int4)` holding the key twice, with a hash index on `hkey` and a
b-tree on `tkey`, so each search is served by the index the seed names (a single column
with both indexes would leave the choice to the planner). One run is one operation over
the N = `objects` keys, one op per object, like the seed's loops:

- `insert`: INSERT one row per op, autocommit: one transaction (and, on a synchronous
  cluster, one replication round trip) per object. The table starts empty.
- `hash_search`: SELECT by `hkey` (Index Scan using record_hkey, the hash index).
- `tree_search`: SELECT by `tkey` (Index Only Scan using record_tkey, the b-tree).
- `sequential`: one ordered scan over the b-tree (`ORDER BY tkey`) through a cursor that
  fetches `batch` rows per round trip; each op advances the cursor by one row, so every
  `batch`-th op carries a fetch and the others are client-side. The total over N ops is
  the scan time; µs per object is what the seed printed.
- `search_delete`: DELETE ... WHERE hkey = $1 RETURNING: find and delete each object in
  one transaction (a miss if it was not there).

Keys 0..N-1 are visited in a fixed shuffled order (`key_order: shuffled`, seeded) or in
ascending order. The rows the search ops need are loaded in `prepare`, outside the timed
path (generate_series, then the indexes, then VACUUM ANALYZE).

Sizing: `run.ops` must equal `objects` (validated before anything runs): one run times
exactly the seed's N objects. One client process with one connection and one op in
flight, as the seed's single loop; no warm-up ops (every object is timed once).

Behind a pooler (`statement_cache` 0 in the endpoint) each op's statement is unnamed and
parsed with it, and nothing is prepared ahead. Every op is one statement, so each runs
in any of pgbouncer's pooling modes but `sequential` in statement pooling, which refuses
the transaction its cursor lives in (refused in `prepare`, before any op; one statement
per batch, keyset-paginated, would run there, but it would time another scan than the
seed's cursor).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.drivers import postgres as pg
from harness.errors import WorkloadError
from harness.results import MISS, OK
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads.base import Workload, WorkloadClient

OPS = ("insert", "hash_search", "tree_search", "sequential", "search_delete")
TABLE = "record"
HASH_INDEX = "record_hkey"
TREE_INDEX = "record_tkey"
QUERIES = {
    "insert": f"INSERT INTO {TABLE} (hkey, tkey) VALUES ($1, $1)",
    "hash_search": f"SELECT hkey FROM {TABLE} WHERE hkey = $1",
    "tree_search": f"SELECT tkey FROM {TABLE} WHERE tkey = $1",
    "sequential": f"SELECT tkey FROM {TABLE} ORDER BY tkey",
    "search_delete": f"DELETE FROM {TABLE} WHERE hkey = $1 RETURNING hkey",
}
ROW_BYTES = 8  # two int4 columns


def key_order(objects: int, order: str, seed: int) -> np.ndarray:
    keys = np.arange(objects, dtype=np.int64)
    if order == "shuffled":
        np.random.default_rng(seed).shuffle(keys)
    return keys


async def create_table(conn: Any, rows: int) -> None:
    """(Re)create the table with `rows` keys 0..rows-1 and both indexes, statistics
    fresh and the visibility map set (so the b-tree scans can be index-only)."""
    await conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    await conn.execute(f"CREATE TABLE {TABLE} (hkey int4 NOT NULL, tkey int4 NOT NULL)")
    if rows:
        await conn.execute(f"INSERT INTO {TABLE} SELECT g, g FROM generate_series(0, $1) g",
                           rows - 1)
    await conn.execute(f"CREATE INDEX {HASH_INDEX} ON {TABLE} USING hash (hkey)")
    await conn.execute(f"CREATE INDEX {TREE_INDEX} ON {TABLE} USING btree (tkey)")
    await conn.execute(f"VACUUM (ANALYZE) {TABLE}")


class Cluster(Workload):
    name = "cluster"
    description = ("cluster_perf (seed 002): insert, hash search, tree search, sequential "
                   "scan, search/delete of N objects")
    ops = OPS
    requires = ("postgres",)
    clears: Mapping[str, str] = {"postgres": f"DROP TABLE IF EXISTS {TABLE} before each run"}
    params: Mapping[str, Setting] = {
        "op": Setting((str,), "insert", "the operation of the run", choices=OPS),
        "objects": Setting((int,), 100_000, "N: objects per run (= run.ops)", low=1,
                           high=2**31 - 1, why="int4 keys"),
        "key_order": Setting((str,), "shuffled", "order the keys are visited in",
                             choices=("shuffled", "ascending")),
        "seed": Setting((int,), 1, "seed of the shuffled key order"),
        "batch": Setting((int,), 1000, "rows per cursor fetch in `sequential`", low=1,
                         high=1_000_000, why="rows the client holds at once"),
    }

    def check_plan(self, plan: Any) -> list[str]:
        """Run-level rules (see the module doc): N ops of one sequential client."""
        out = []
        size, clients = plan.size, plan.clients
        if size.ops != plan.params["objects"]:
            out.append(f"run.ops ({size.ops}) must equal params objects "
                       f"({plan.params['objects']}): one run times each object once")
        if size.warmup_ops or size.duration_s is not None:
            out.append("cluster runs have no warm-up and no duration: set run.ops only")
        if (clients.processes, clients.connections, clients.inflight) != (1, 1, 1):
            out.append("cluster runs use one client process, one connection, one op in "
                       "flight (the seed's single loop)")
        return out

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]
                      ) -> None:
        if params["op"] == "sequential" and endpoints["postgres"].extra.get(
                "pooling") == "statement":
            raise WorkloadError(
                "op sequential reads through a cursor, which lives in a transaction, and "
                "the pooler between refuses transaction blocks (statement pooling): "
                "measure it directly or through transaction or session pooling")
        conn = await pg.connect(endpoints["postgres"])
        try:
            await create_table(conn, 0 if params["op"] == "insert" else params["objects"])
        finally:
            await conn.close()

    def client(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any],
               client_id: int) -> WorkloadClient:
        return _Client(endpoints["postgres"], params)


class _Client(WorkloadClient):
    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any]) -> None:
        self.endpoint = endpoint
        self.op = OPS.index(params["op"])
        self.sql = QUERIES[params["op"]]
        self.batch = params["batch"]
        self.keys = key_order(params["objects"], params["key_order"], params["seed"])
        self.n = len(self.keys)
        self.cursors: dict[int, Any] = {}

    async def connect(self) -> Any:
        conn = await pg.connect(self.endpoint)
        if pg.named_statements(self.endpoint):  # never a named one behind a pooler
            await conn.prepare(self.sql)  # parse/plan outside the timed ops
        return conn

    async def close(self, conn: Any) -> None:
        state = self.cursors.pop(id(conn), None)
        if state is not None:
            await state[0].rollback()
        await conn.close(timeout=2)

    def next_op(self, seq: int) -> int:
        return self.op

    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        if op == 3:
            return await self._next_row(conn)
        key = int(self.keys[seq % self.n])
        if op == 0:
            await conn.execute(self.sql, key)
            return OK, ROW_BYTES
        row = await conn.fetchval(self.sql, key)
        return (OK, ROW_BYTES) if row is not None else (MISS, 0)

    async def _next_row(self, conn: Any) -> tuple[int, int]:
        state = self.cursors.get(id(conn))
        if state is None:
            tx = conn.transaction(readonly=True)
            await tx.start()  # a cursor lives in a transaction
            it = conn.cursor(self.sql, prefetch=self.batch).__aiter__()
            state = self.cursors[id(conn)] = (tx, it)
        try:
            await state[1].__anext__()
        except StopAsyncIteration:
            return MISS, 0
        return OK, ROW_BYTES
