"""The timed loop against a real memcached: counts, concurrency, failures as records."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from harness.loadgen import ClientConfig, ClientRun, Recorder
from harness.results import ERROR, MISS, OK
from harness.services.base import Endpoint, RunningService
from harness.workloads import WORKLOADS

pytestmark = pytest.mark.integration
WL = WORKLOADS.get("datastore_memcache")


def _cfg(endpoint: Endpoint, op: str, **kw: object) -> ClientConfig:
    endpoints = {"memcached": endpoint.to_dict(),
                 "postgres": Endpoint("postgres", "127.0.0.1", 1).to_dict()}
    base = dict(workload=WL.name, params={"op": op, "value_size_bytes": 100},
                endpoints=endpoints, client_id=3)
    base.update(kw)
    return ClientConfig(**base)  # type: ignore[arg-type]


def _run(cfg: ClientConfig, prepare: bool = True) -> ClientRun:
    async def go() -> ClientRun:
        eps = cfg.endpoint_objects()
        if prepare:
            await _prepare_mc(eps)  # postgres is not needed for mem_* ops
        run = ClientRun(cfg, WL.client(eps, cfg.params, cfg.client_id))
        await run.connect_all()
        await run.run()
        return run
    return asyncio.run(go())


async def _prepare_mc(eps: dict[str, Endpoint]) -> None:
    from harness.drivers import memcache
    from harness.workloads.datastore_memcache import HIT_KEY

    mc = await memcache.connect(eps["memcached"].host, eps["memcached"].port)
    assert await mc.set(HIT_KEY, b"x" * 100) == b"STORED"
    mc.close()


def test_recorder_grows_in_place() -> None:
    rec = Recorder(16)
    col = rec.start
    rec.grow()
    assert rec.capacity == 32 and rec.start is col and len(col) == 32


@pytest.mark.parametrize(("connections", "inflight"), [(1, 1), (2, 4)])
def test_exact_op_count_with_warmup_flags(memcached_server: RunningService,
                                          connections: int, inflight: int) -> None:
    cfg = _cfg(memcached_server.endpoint, "mem_read_hit", ops=300, warmup_ops=20,
               connections=connections, inflight=inflight)
    run = _run(cfg)
    ops = run.rec.to_arrays(WL.ops, 3, 0)
    assert len(ops) == 320
    assert int(ops.warmup.sum()) == 20
    assert set(ops.status.tolist()) == {OK}
    assert set(ops.nbytes.tolist()) == {100}
    assert np.all(ops.latency_ns > 0) and np.all(ops.start_ns >= 0)
    assert set(ops.client.tolist()) == {3}
    assert WL.ops[int(ops.op[0])] == "mem_read_hit"


def test_misses_are_records_with_status_miss(memcached_server: RunningService) -> None:
    run = _run(_cfg(memcached_server.endpoint, "mem_read_miss", ops=50))
    ops = run.rec.to_arrays(WL.ops, 0, 0)
    assert len(ops) == 50 and set(ops.status.tolist()) == {MISS}


def test_duration_mode_runs_for_about_the_duration(memcached_server: RunningService) -> None:
    run = _run(_cfg(memcached_server.endpoint, "mem_write", duration_s=0.5, warmup_s=0.2))
    ops = run.rec.to_arrays(WL.ops, 0, 0)
    assert len(ops) > 100  # a real server answers thousands per second
    span_s = (ops.start_ns.max() - ops.start_ns.min()) / 1e9
    assert 0.6 <= span_s <= 0.9
    warm = ops.start_ns[ops.warmup]
    assert warm.size and warm.max() < 0.25e9 <= ops.start_ns[~ops.warmup].min() + 0.05e9


def test_dead_server_gives_error_records_then_stops(memcached_server: RunningService) -> None:
    endpoint = memcached_server.endpoint
    memcached_server.stop()
    run = _run(_cfg(endpoint, "mem_read_hit", ops=1000, max_consecutive_errors=15),
               prepare=False)
    ops = run.rec.to_arrays(WL.ops, 0, 0)
    assert run.aborted
    assert len(ops) == 15 and set(ops.status.tolist()) == {ERROR}
    assert "Connection" in (run.last_error or "") or "connect" in (run.last_error or "")
