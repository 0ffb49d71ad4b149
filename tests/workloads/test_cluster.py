"""Workload `cluster` (seed 002) against a real PostgreSQL: plans, ops, run rules."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.drivers import postgres as pg
from harness.results import MISS, OK
from harness.services import RunningService
from harness.workloads import WORKLOADS
from harness.workloads.cluster import HASH_INDEX, OPS, QUERIES, TREE_INDEX, create_table

pytestmark = pytest.mark.integration
WORKLOAD = WORKLOADS.get("cluster")


def params(**kw: Any) -> dict[str, Any]:
    return {**{k: s.default for k, s in WORKLOAD.params.items()}, **kw}


@pytest.fixture
def server(start_server) -> RunningService:
    return start_server("postgres", fsync=False)


async def _plans(svc: RunningService, rows: int) -> dict[str, str]:
    conn = await pg.connect(svc.endpoint)
    try:
        await create_table(conn, rows)
        out = {}
        for op in ("hash_search", "tree_search", "sequential", "search_delete"):
            sql = QUERIES[op]
            # What the workload runs: a prepared statement, whose generic plan PostgreSQL
            # switches to after five executions; check the custom plan and the generic one.
            types, arg = ("(int4)", "(42)") if "$1" in sql else ("", "")
            for mode in ("force_custom_plan", "force_generic_plan"):
                await conn.execute(f"SET plan_cache_mode = {mode}")
                await conn.execute(f"PREPARE q {types} AS {sql}")
                explain = await conn.fetch(f"EXPLAIN EXECUTE q{arg}")
                await conn.execute("DEALLOCATE q")
                out[f"{op}/{mode}"] = "\n".join(r[0] for r in explain)
        return out
    finally:
        await conn.close()


@pytest.mark.parametrize("rows", [2_000, 100_000])
def test_each_search_uses_the_index_the_seed_names(server: RunningService, rows: int) -> None:
    plans = asyncio.run(_plans(server, rows))
    for mode in ("force_custom_plan", "force_generic_plan"):
        assert f"Index Scan using {HASH_INDEX} on record" in plans[f"hash_search/{mode}"]
        assert f"Index Only Scan using {TREE_INDEX} on record" in plans[f"tree_search/{mode}"]
        # The sequential op walks the b-tree in key order; no sort, no heap scan.
        seq = plans[f"sequential/{mode}"]
        assert f"Index Only Scan using {TREE_INDEX}" in seq
        assert "Sort" not in seq and "Seq Scan" not in seq
        sd = plans[f"search_delete/{mode}"]
        assert "Delete on record" in sd and f"Index Scan using {HASH_INDEX}" in sd


async def _run_op(svc: RunningService, p: dict[str, Any], n_ops: int) -> tuple[list[int], int]:
    """prepare, then `n_ops` ops through one client connection; statuses and rows left."""
    await WORKLOAD.prepare({"postgres": svc.endpoint}, p)
    client = WORKLOAD.client({"postgres": svc.endpoint}, p, 0)
    conn = await client.connect()
    statuses = [(await client.execute(conn, OPS.index(p["op"]), seq))[0]
                for seq in range(n_ops)]
    await client.close(conn)
    check = await pg.connect(svc.endpoint)
    try:
        left = await check.fetchval("SELECT count(*) FROM record")
        distinct = await check.fetchval("SELECT count(DISTINCT hkey) FROM record "
                                        "WHERE hkey = tkey")
        assert distinct == left  # every row holds its key in both columns
    finally:
        await check.close()
    return statuses, left


def test_ops_visit_every_object_once(server: RunningService) -> None:
    n = 300
    statuses, left = asyncio.run(_run_op(server, params(op="insert", objects=n), n))
    assert statuses == [OK] * n and left == n
    for op in ("hash_search", "tree_search"):
        statuses, left = asyncio.run(_run_op(server, params(op=op, objects=n), n))
        assert statuses == [OK] * n and left == n
    # sequential: n rows through a cursor fetching 64 at a time, then the end of the scan.
    statuses, left = asyncio.run(_run_op(server, params(op="sequential", objects=n,
                                                         batch=64), n + 1))
    assert statuses == [OK] * n + [MISS] and left == n
    statuses, left = asyncio.run(_run_op(server, params(op="search_delete", objects=n), n))
    assert statuses == [OK] * n and left == 0


def test_shuffled_order_is_a_fixed_permutation() -> None:
    from harness.workloads.cluster import key_order

    a, b = key_order(1000, "shuffled", 7), key_order(1000, "shuffled", 7)
    assert (a == b).all() and sorted(a) == list(range(1000)) and (a != range(1000)).any()
    assert list(key_order(5, "ascending", 7)) == [0, 1, 2, 3, 4]
