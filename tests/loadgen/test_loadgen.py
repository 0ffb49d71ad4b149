"""The timed loop against a real memcached: counts, concurrency, failures as records."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest

from harness.loadgen import ClientConfig, ClientRun, Recorder, native
from harness.results import ERROR, MISS, OK, TIMEOUT
from harness.services.base import Endpoint, RunningService
from harness.workloads import WORKLOADS
from tests.fixtures.engines import require_native

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


def test_recorder_grows_keeping_its_records() -> None:
    rec = Recorder(16)
    rec.start[:16] = np.arange(16)
    view = rec.views[0]
    rec.grow()
    assert rec.capacity == 32 and len(rec.start) == 32
    assert list(rec.start[:16]) == list(range(16))
    with pytest.raises(ValueError):  # a writer's old view: it takes the new ones
        view[0] = 1


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


# -- the callback path (workloads with `issuer`) against the awaited path ----------------

MIX = WORKLOADS.get("memcache_mix")
MIX_PARAMS = {"get_ratio": 0.8, "key_space": 200, "key_size_bytes": 16,
              "value_size_bytes": 100}


class _AwaitedOnly:
    """memcache_mix's client with its fast paths withheld: every op awaits `execute`."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def issuer(self, done: Any, fail: Any) -> None:
        return None

    def pipeline(self) -> None:
        return None

    def native_ops(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _mix_run(endpoint: Endpoint, awaited: bool = False, **kw: Any) -> ClientRun:
    cfg = ClientConfig(workload=MIX.name, params=MIX_PARAMS,
                       endpoints={"memcached": endpoint.to_dict()}, client_id=1, **kw)

    async def go() -> ClientRun:
        eps = cfg.endpoint_objects()
        await MIX.prepare(eps, MIX_PARAMS)
        client = MIX.client(eps, MIX_PARAMS, 1)
        run = ClientRun(cfg, _AwaitedOnly(client) if awaited else client)  # type: ignore[arg-type]
        await run.connect_all()
        await run.run()
        return run
    return asyncio.run(go())


@pytest.mark.parametrize("inflight", [1, 4], ids=["callback-chain", "batched-pipe"])
def test_fast_and_awaited_paths_record_the_same_ops(
        memcached_server: RunningService, inflight: int) -> None:
    """One connection: every path issues the same seqs and memcached answers in order,
    so the records match column by column except the times. One op in flight runs the
    callback chain, four the batched pipe."""
    runs = [_mix_run(memcached_server.endpoint, awaited, ops=400, warmup_ops=30,
                     inflight=inflight) for awaited in (False, True)]
    fast, awaited = (r.rec.to_arrays(MIX.ops, 1, 0) for r in runs)
    assert len(fast) == len(awaited) == 430
    for col in ("op", "status", "nbytes", "warmup"):
        assert getattr(fast, col).tolist() == getattr(awaited, col).tolist(), col
    assert set(fast.status.tolist()) == {OK} and int(fast.warmup.sum()) == 30
    assert 0.7 < float((fast.op == 0).mean()) < 0.9  # gets, get_ratio 0.8
    assert np.all(fast.latency_ns > 0) and np.all(np.diff(fast.start_ns) >= 0)


def test_callback_path_records_each_op_once_through_a_stall(
        memcached_server: RunningService, loadgen_engine: str) -> None:
    """memcached frozen for 0.6 s with a 0.15 s timeout, 2 connections x 2 in flight:
    ops time out, their connections are replaced, and the late replies of timed-out
    ops are not recorded again: exactly one record per op."""
    pid = memcached_server.processes[0].pid
    threading.Timer(0.3, os.kill, (pid, signal.SIGSTOP)).start()
    threading.Timer(0.9, os.kill, (pid, signal.SIGCONT)).start()
    try:
        run = _mix_run(memcached_server.endpoint, ops=60_000, connections=2, inflight=2,
                       timeout_s=0.15, max_consecutive_errors=10_000)
    finally:
        time.sleep(0.7)  # the SIGCONT has fired, even if the run failed early
    ops = run.rec.to_arrays(MIX.ops, 1, 0)
    timeouts = ops.latency_ns[ops.status == TIMEOUT]
    assert len(ops) == 60_000, "one record per op, no more, no less"
    assert timeouts.size >= 4 and not run.aborted
    assert np.all(timeouts >= 0.15e9) and np.all(timeouts < 0.6e9)
    assert int((ops.status == OK).sum()) == 60_000 - int((ops.status != OK).sum())


def _kill_after_gets(endpoint: Endpoint, pid: int, gets: int, limit_s: float = 30.0) -> None:
    """SIGKILL `pid` once memcached's own `stats` count at least `gets` gets (or after
    `limit_s`)."""
    import socket

    deadline = time.monotonic() + limit_s
    with socket.create_connection((endpoint.host, endpoint.port), timeout=5) as sock:
        while time.monotonic() < deadline:
            sock.sendall(b"stats\r\n")
            buf = b""
            while not buf.endswith(b"END\r\n"):
                buf += sock.recv(65536)
            stats = dict(line.split()[1:3] for line in buf.decode().splitlines()
                         if line.startswith("STAT "))
            if int(stats.get("cmd_get", 0)) >= gets:
                break
            time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)


def test_batched_pipe_records_every_op_it_sent_when_the_server_dies(
        memcached_server: RunningService, loadgen_engine: str) -> None:
    """memcached killed under 2 connections x 4 in flight: the ops in flight become error
    records, reconnects fail as error records, the run aborts after its error limit, and
    every op that was sent (every seq taken) has exactly one record."""
    pid = memcached_server.processes[0].pid
    # Kill once the server has served the measured ops' first thousands, not after a fixed
    # time: on a busy machine prepare and connect can take longer than any fixed delay.
    threading.Thread(target=_kill_after_gets, args=(memcached_server.endpoint, pid, 3000),
                     daemon=True).start()
    run = _mix_run(memcached_server.endpoint, ops=5_000_000, connections=2, inflight=4,
                   timeout_s=2, max_consecutive_errors=40)
    ops = run.rec.to_arrays(MIX.ops, 1, 0)
    assert run.aborted and run.consecutive_errors >= 40
    assert len(ops) == run.seq, "one record per op taken"
    statuses = ops.status.tolist()
    assert set(statuses) == {OK, ERROR} and statuses.count(OK) > 1000
    # After the first error nothing new succeeds: the errors are the tail of the records,
    # but for replies the other connection had already received (at most its 4 in
    # flight) when the first connection's loss was handled.
    first_error = statuses.index(ERROR)
    assert statuses[first_error:].count(OK) <= 4, statuses[first_error:first_error + 20]
    assert statuses[-40:] == [ERROR] * 40
    assert "Connection" in (run.last_error or "")


# -- the native core against the Python paths ----------------------------------------------

@pytest.mark.parametrize(("connections", "inflight"), [(1, 1), (1, 4)])
def test_native_and_python_paths_record_the_same_ops(
        memcached_server: RunningService, monkeypatch: pytest.MonkeyPatch,
        connections: int, inflight: int) -> None:
    """The same run on the native core, the Python fast path and the awaited path: one
    connection answers in order, so every column but the times is equal."""
    require_native()
    runs = {}
    for name in ("native", "python", "awaited"):
        monkeypatch.setenv(native.ENV, "python" if name == "awaited" else name)
        runs[name] = _mix_run(memcached_server.endpoint, name == "awaited", ops=3000,
                              warmup_ops=100, connections=connections, inflight=inflight)
    assert runs["native"].engine == "native" and runs["python"].engine == "python"
    arrays = {k: r.rec.to_arrays(MIX.ops, 1, 0) for k, r in runs.items()}
    ref = arrays["awaited"]
    assert len(ref) == 3100 and set(ref.status.tolist()) == {OK}
    for name in ("native", "python"):
        got = arrays[name]
        for col in ("op", "status", "nbytes", "warmup", "client"):
            assert getattr(got, col).tolist() == getattr(ref, col).tolist(), (name, col)
        assert np.all(got.latency_ns > 0) and np.all(np.diff(got.start_ns) >= 0)
        assert np.all(got.intended_ns == -1)


def test_engine_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV, "python")
    assert native.engine() == "python"
    monkeypatch.setenv(native.ENV, "fortran")
    with pytest.raises(native.EngineError, match="KVBENCH_ENGINE='fortran'"):
        native.engine()
    monkeypatch.setattr(native, "_native", None)  # as if no compiler at install time
    monkeypatch.delenv(native.ENV)
    assert native.engine() == "python"
    monkeypatch.setenv(native.ENV, "native")
    with pytest.raises(native.EngineError, match="not built"):
        native.engine()


def test_engine_of_workers_names_what_measured() -> None:
    assert native.engine_of_workers([{"engine": "native"}, {"engine": "native"}]) == "native"
    assert native.engine_of_workers([{"engine": "native"}, {"engine": "python"}]) == "mixed"
    assert native.engine_of_workers([{"state": "failed"}]) is None


def test_a_config_without_recorded_keys_reads_in_a_worker_of_an_older_checkout() -> None:
    """A worker before `record_keys` took exactly these fields: a config not asking for
    keys must not name it (a client machine may run an older checkout), one asking must."""
    from harness.loadgen import ClientConfig

    older = {"workload", "params", "endpoints", "client_id", "connections", "inflight", "ops",
             "duration_s", "warmup_ops", "warmup_s", "timeout_s", "max_consecutive_errors",
             "rate_ops_s", "arrival", "phase", "seed", "files"}
    cfg = ClientConfig(workload="memcache_mix", params={}, endpoints={}, client_id=0)
    assert set(cfg.to_dict()) == older
    keyed = ClientConfig(workload="memcache_mix", params={}, endpoints={}, client_id=0,
                         record_keys=True)
    assert keyed.to_dict()["record_keys"] is True
    assert ClientConfig(**keyed.to_dict()) == keyed


def test_a_pause_holds_the_loop_before_each_wait(
        memcached_server: RunningService, monkeypatch: pytest.MonkeyPatch) -> None:
    """clients.pause_us reaches the core: with one op in flight every reply waits out the
    pause before it is read, so each latency is at least the pause; without it memcached
    on loopback answers far faster. Deep pipelines then batch (the benchmarks measure
    that); here only the floor is certain."""
    require_native()
    monkeypatch.setenv(native.ENV, "native")
    lat = {}
    for pause_us in (0, 3000):
        run = _mix_run(memcached_server.endpoint, ops=120, warmup_ops=0, pause_us=pause_us)
        assert run.engine == "native"
        arrays = run.rec.to_arrays(MIX.ops, 1, 0)
        assert len(arrays) == 120 and set(arrays.status.tolist()) == {OK}
        lat[pause_us] = arrays.latency_ns
    assert int(np.min(lat[3000])) >= 3_000_000
    assert float(np.median(lat[0])) < 1_000_000


def test_the_python_engine_refuses_a_pause(memcached_server: RunningService,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A pause the Python engine cannot honour fails the run by name, not silently."""
    monkeypatch.setenv(native.ENV, "python")
    from harness.errors import WorkloadError

    with pytest.raises(WorkloadError, match=r"clients.pause_us.*KVBENCH_ENGINE=python"):
        _mix_run(memcached_server.endpoint, ops=10, pause_us=100)


def test_a_pause_is_sent_to_workers_only_when_set() -> None:
    """A worker of an older checkout reads a config without a pause; one with a pause
    names it (and that worker would refuse the unknown field, not run unpaused)."""
    plain = ClientConfig(workload="memcache_mix", params={}, endpoints={}, client_id=0)
    assert "pause_us" not in plain.to_dict()
    paused = ClientConfig(workload="memcache_mix", params={}, endpoints={}, client_id=0,
                          pause_us=250.0)
    assert paused.to_dict()["pause_us"] == 250.0
    assert ClientConfig(**paused.to_dict()) == paused
