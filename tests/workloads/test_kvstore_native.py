"""The kvstore workload on the native core, against real course-protocol servers
(`examples.kvserver`, started by the `command` service): the same records as the
Python paths, and refusals followed through the slow path. Scaling under load on the
native core is in tests/studies/kvstore/test_elastic.py."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from harness.hosts import LocalHost
from harness.loadgen import ClientConfig, ClientRun, native
from harness.results import OK, REDIRECT
from harness.services import SERVICES
from harness.services.base import Endpoint, RunningService
from harness.settings import resolve
from harness.workloads import WORKLOADS
from harness.workloads.kvstore import GET, PUT, KVTextRouter
from tests.fixtures.engines import require_native
from tests.services.test_command import KVSERVER

pytestmark = pytest.mark.integration

WL = WORKLOADS.get("kvstore")
PARAMS = resolve({"records_per_client": 150, "median_bytes": 400, "get_passes": 2}, WL.params)


@pytest.fixture(scope="module")
def kvservers() -> Iterator[RunningService]:
    with LocalHost() as host:
        svc = SERVICES.get("command").start(host, "kv", {**KVSERVER, "servers": 3})
        try:
            yield svc
        finally:
            svc.stop()


def run_client(endpoint: Endpoint, params: Any = PARAMS, **kw: Any) -> ClientRun:
    cfg = ClientConfig(workload=WL.name, params=params,
                       endpoints={"kvstore": endpoint.to_dict()}, client_id=0, **kw)

    async def go() -> ClientRun:
        client = WL.client(cfg.endpoint_objects(), params, 0)
        run = ClientRun(cfg, client)
        await run.connect_all()
        await run.run()
        return run
    return asyncio.run(go())


@pytest.mark.parametrize(("connections", "inflight", "rate"),
                         [(1, 1, None), (2, 3, None), (2, 3, 4000)],
                         ids=["closed", "pipelined", "open"])
def test_native_and_python_paths_record_the_same_ops(
        kvservers: RunningService, monkeypatch: pytest.MonkeyPatch,
        connections: int, inflight: int, rate: int | None) -> None:
    """Three servers, each op sent to its key's server: one connection with one op in
    flight gives the records in the same order; more, or open loop, the same multiset."""
    require_native()
    runs = {}
    for engine in ("native", "python"):
        monkeypatch.setenv(native.ENV, engine)
        runs[engine] = run_client(kvservers.endpoint, ops=1350, warmup_ops=50,
                                  connections=connections, inflight=inflight, timeout_s=5,
                                  rate_ops_s=rate)
    assert runs["native"].engine == "native" and runs["python"].engine == "python"
    arrays = {k: r.rec.to_arrays(WL.ops, 0, 0) for k, r in runs.items()}
    ref, got = arrays["python"], arrays["native"]
    if rate is not None:
        # Open loop: warm-up ops still waiting when the first measured op is due are
        # dropped and counted (run.py); every measured op is a record. Compare those.
        for r, a in ((runs["python"], ref), (runs["native"], got)):
            assert r.unsent_counts()[0] == 0
            assert len(a) + r.unsent_counts()[1] == 1400
            assert int((~a.warmup).sum()) == 1350
        ref, got = ref.take(~ref.warmup), got.take(~got.warmup)
    assert len(ref) == len(got) == (1400 if rate is None else 1350)
    assert set(ref.status.tolist()) == {OK}, Counter(ref.status.tolist())
    # seqs 0-1399 over a cycle of 450 (PUT 150 records, GET them twice): 500 PUTs
    # (seqs 0-49, the warm-up, are PUTs: measured alone, 450 PUTs)
    assert Counter(ref.op.tolist()) == {PUT: 500 if rate is None else 450, GET: 900}
    assert Counter(got.op.tolist()) == Counter(ref.op.tolist())
    rows = lambda a: list(zip(a.op.tolist(), a.status.tolist(), a.nbytes.tolist(),  # noqa: E731
                              a.warmup.tolist(), strict=True))
    if connections == 1 and inflight == 1:
        assert rows(got) == rows(ref)
    else:
        assert Counter(rows(got)) == Counter(rows(ref))
    assert np.all(got.latency_ns > 0)
    if rate is not None:  # open loop: the same schedule (records are in reply order)
        assert np.array_equal(np.sort(got.intended_ns), np.sort(ref.intended_ns))
    sizes = {int(n) for o, n in zip(got.op.tolist(), got.nbytes.tolist(), strict=True) if o == GET}
    assert len(sizes) > 20  # e-mails of many sizes, each GET's own


def test_refusals_go_through_the_slow_path_and_are_recorded(
        kvservers: RunningService, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client whose ring is stale (as before a change it has not heard of) sends
    every op to the first server: each op refused there is an extra `redirect` record
    and is done through the slow path, which learns the ring from the refusal and
    hands the core new routes, so the rest go to the right server directly."""
    require_native()
    monkeypatch.setenv(native.ENV, "native")
    monkeypatch.setattr(KVTextRouter, "adopt", lambda self, conn: None)
    run = run_client(kvservers.endpoint, ops=900, connections=2, inflight=2, timeout_s=5)
    assert run.engine == "native"
    a = run.rec.to_arrays(WL.ops, 0, 0)
    statuses = Counter(a.status.tolist())
    assert statuses[OK] == 900 and set(statuses) == {OK, REDIRECT}, statuses
    # at most the ops in flight before the new routes arrived were refused
    assert 0 < statuses[REDIRECT] <= 20, statuses
    redirected = a.status == REDIRECT
    assert np.all(a.latency_ns[redirected] > 0)
