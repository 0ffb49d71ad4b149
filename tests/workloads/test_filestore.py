"""The `filestore` workload against the real app (uvicorn + memcached)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.datasets.filegen import file_sizes
from harness.hosts import LocalHost
from harness.results import MISS, OK
from harness.services import Endpoint, RunningService
from harness.services.external import http_get
from harness.settings import check_settings, resolve
from harness.workloads import WORKLOADS
from harness.workloads.filestore import app_url
from tests.fixtures.filestore import filestore_stack

pytestmark = pytest.mark.integration

W = WORKLOADS.get("filestore")


def params(**over: Any) -> dict[str, Any]:
    return resolve({"files": 6, "median_bytes": 30_000, "sigma": 1.5, "rtt_probes": 5,
                    **over}, W.params)


@pytest.fixture(scope="module")
def app() -> Iterator[RunningService]:
    with LocalHost() as host, filestore_stack(host) as (_, svc):
        yield svc


def stats(app: RunningService) -> dict[str, Any]:
    return json.loads(http_get(app.endpoint.host, app.endpoint.port, "/stats")[2])


def run_ops(app: RunningService, p: dict[str, Any], seqs: range, client_id: int = 0
            ) -> list[tuple[int, int]]:
    async def main() -> list[tuple[int, int]]:
        client = W.client({"filestore": app.endpoint}, p, client_id)
        conn = await client.connect()  # the first connect prepares the client's files
        try:
            return [await client.execute(conn, client.next_op(s), s) for s in seqs]
        finally:
            await client.close(conn)

    return asyncio.run(main())


def test_insert_find_remove_record_status_and_file_size(app: RunningService) -> None:
    p = params()
    sizes = file_sizes(6, "lognormal", 1, median_bytes=30_000, sigma=1.5)
    assert run_ops(app, {**p, "op": "insert"}, range(6)) == [(OK, s) for s in sizes]
    assert run_ops(app, {**p, "op": "find"}, range(8)) == [
        (OK, s) for s in sizes + sizes[:2]]
    # Each file is removed once; the second pass over the first two finds nothing.
    assert run_ops(app, {**p, "op": "remove"}, range(8)) == [
        *((OK, s) for s in sizes), (MISS, 0), (MISS, 0)]


def test_memcache_param_sets_the_header(app: RunningService) -> None:
    before = stats(app)
    run_ops(app, params(op="find", memcache=True), range(6), client_id=1)
    mid = stats(app)
    small = sum(s < 102400 for s in file_sizes(6, "lognormal", 1, median_bytes=30_000,
                                                sigma=1.5))
    assert mid["memcache_hits"] - before["memcache_hits"] == small
    run_ops(app, params(op="find", memcache=False), range(6), client_id=1)
    after = stats(app)
    assert after["memcache_hits"] == mid["memcache_hits"]
    assert after["memcache_misses"] == mid["memcache_misses"]


def test_clients_work_on_their_own_files(app: RunningService) -> None:
    assert all(st == OK for st, _ in run_ops(app, params(op="find"), range(6), client_id=3))
    assert all(st == OK for st, _ in run_ops(app, params(op="remove"), range(6),
                                             client_id=2))
    ep = app.endpoint
    for i in range(6):  # client 2 removed its own files, not client 3's
        assert http_get(ep.host, ep.port, f"/files/c2-{i}.txt")[0] == 404
        assert http_get(ep.host, ep.port, f"/files/c3-{i}.txt")[0] == 200


def test_insert_prepare_deletes_first_so_every_put_creates(app: RunningService) -> None:
    p = params(op="insert", files=3)
    run_ops(app, p, range(3), client_id=4)
    before = stats(app)["requests"]
    run_ops(app, p, range(3), client_id=4)
    # 3 deletes, 3 creating PUTs, and the /stats request itself
    assert stats(app)["requests"] - before == 7
    ep = app.endpoint
    assert all(http_get(ep.host, ep.port, f"/files/c4-{i}.txt")[0] == 200 for i in range(3))


def test_a_connection_the_server_closed_is_reopened(app: RunningService) -> None:
    async def main() -> tuple[int, int]:
        client = W.client({"filestore": app.endpoint}, params(op="find", files=2), 5)
        conn = await client.connect()
        conn.http.close()
        await asyncio.sleep(0.05)
        result = await client.execute(conn, 1, 0)
        await client.close(conn)
        return result

    assert asyncio.run(main())[0] == OK


def test_baseline_measures_connect_and_noop_round_trips(app: RunningService) -> None:
    base = asyncio.run(W.baseline({"filestore": app.endpoint}, params(rtt_probes=7)))
    assert base is not None
    for key in ("tcp_connect_ms", "http_noop_ms"):
        s = base[key]
        assert s["n"] == 7 and 0 < s["min"] <= s["median"] <= s["max"]
        assert s["min"] <= s["avg"] <= s["max"] and s["stddev"] >= 0
    assert base["noop"] == "GET /health"
    assert base["target"] == f"127.0.0.1:{app.endpoint.port}"
    assert asyncio.run(W.baseline({"filestore": app.endpoint}, params(rtt_probes=0))) is None


def test_validate_and_urls() -> None:
    ok = params()
    assert W.validate(ok, {}) == []
    assert W.validate({**ok, "size_dist": "uniform", "min_bytes": 9, "max_bytes": 1}, {}) == [
        "need 0 <= min_bytes <= max_bytes"]
    assert W.validate(ok, {"median_bytes": [1000, 0]}) == [
        "lognormal needs median_bytes > 0 and sigma >= 0"]
    assert check_settings("params", {"files": 0}, W.params) == [
        "params.files: must be at least 1"]
    ep = Endpoint("filestore", "10.0.0.1", 81, {"url": "http://10.0.0.1:81/app"})
    assert app_url(ep).base_path == "/app/"
    assert app_url(Endpoint("filestore", "::1", 82)).netloc == "::1:82"
