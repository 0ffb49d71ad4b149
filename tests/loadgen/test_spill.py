"""Records spilled in chunks while a client runs (`loadgen.recorder`, `loadgen.spill`):
the same records as a run kept whole, on both engines, against a real memcached."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from harness.loadgen import ClientConfig, ClientRun
from harness.loadgen.recorder import Chunk, Recorder
from harness.results import OK, OpsArrays
from harness.services.base import RunningService
from harness.workloads import WORKLOADS
from tests.fixtures.client_runs import run_client

pytestmark = pytest.mark.integration

MIX = WORKLOADS.get("memcache_mix")
PARAMS = {"get_ratio": 0.8, "key_space": 300, "key_size_bytes": 16, "value_size_bytes": 64,
          "key_dist": "zipfian", "zipf_s": 0.99}


# -- unit: the recorder's chunks ----------------------------------------------------------

def test_full_columns_are_sealed_and_writing_goes_on_at_zero() -> None:
    got: list[Chunk] = []
    rec = Recorder(0, chunk_records=4, sink=got.append)
    for j in range(10):
        rec.record(j, j + 1, 0, OK, 0, 0, j)
    assert [(c.k, c.base, c.n) for c in got] == [(0, 0, 4), (1, 4, 4)]
    assert rec.n == 2 and rec.count == 10 and rec.capacity == 4
    assert [list(c.start[:c.n]) for c in got] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert list(rec.start[:rec.n]) == [8, 9]
    # The records of run indices 3..9, wherever they are.
    assert [(h.k if isinstance(h, Chunk) else "cur", lo, hi)
            for h, lo, hi in rec.segments(3, 10)] == [(0, 3, 4), (1, 0, 4), ("cur", 0, 2)]
    assert [(lo, hi) for _, lo, hi in rec.segments(9, 10)] == [(1, 2)]


def test_a_sealed_chunk_is_freed_once_written_and_read() -> None:
    rec = Recorder(0, chunk_records=4, sink=lambda c: None)
    rec.read(0)  # a live reader at the start
    for j in range(9):
        rec.record(j, j, 0, OK, 0, 0, j)
    first, second = rec.sealed
    rec.written(first)
    assert rec.sealed == [first, second]  # the reader has not read it yet
    rec.read(6)
    assert rec.sealed == [second] and len(rec.free) == 1  # its columns are taken again
    rec.written(second)
    assert rec.sealed == [second]
    rec.read(None)  # the reader stopped
    assert rec.sealed == []


def test_a_batch_that_does_not_fit_goes_whole_into_new_columns() -> None:
    got: list[Chunk] = []
    rec = Recorder(0, chunk_records=8, sink=got.append)
    rec.n = 6
    i = rec.n
    rec.n = i + 4  # a pipelined batch of 4 reserved at 6
    assert rec.room(i, 4) == 0 and rec.n == 4 and [c.n for c in got] == [6]


def test_a_recorder_kept_whole_grows() -> None:
    rec = Recorder(16)
    for j in range(40):
        rec.record(j, j, 0, OK, 0, 0, j)
    assert rec.capacity == 64 and list(rec.start[:40]) == list(range(40)) and not rec.sealed


# -- both engines against a real memcached ------------------------------------------------

def _cfg(server: RunningService, **kw: Any) -> ClientConfig:
    return ClientConfig(**{"workload": MIX.name, "params": PARAMS, "client_id": 2,
                           "endpoints": {"memcached": server.endpoint.to_dict()},
                           "connections": 3, "record_keys": True, **kw})


def _spilled(server: RunningService, cfg: ClientConfig,
             chunk_records: int) -> tuple[ClientRun, list[OpsArrays]]:
    parts: list[OpsArrays] = []

    def sink(run: ClientRun, chunk: Chunk) -> None:
        parts.append(run.arrays(MIX.ops, 0, chunk))
        run.rec.written(chunk)

    run = run_client(MIX, cfg, prepare=True, chunk_records=chunk_records, sink=sink)
    return run, [*parts, run.arrays(MIX.ops, 0)]


@pytest.mark.parametrize("rate", [None, 20_000.0], ids=["closed", "open"])
def test_chunks_hold_every_record_of_the_run(memcached_server: RunningService,
                                             loadgen_engine: str, rate: float | None) -> None:
    """6,000 ops in chunks of 1,000 (the native core seals a little early: it keeps room
    for every op in flight) hold what a run kept whole holds: each seq's op and key
    once, and every record whole."""
    cfg = _cfg(memcached_server, ops=6000, warmup_ops=500, rate_ops_s=rate,
               inflight=1 if rate else 4)
    run, parts = _spilled(memcached_server, cfg, 1000)
    whole = run_client(MIX, cfg).arrays(MIX.ops, 0)
    assert run.engine == loadgen_engine
    assert len(parts) >= 7 and all(len(p) <= 1000 for p in parts)
    got = OpsArrays.concat(parts, MIX.ops)
    assert len(got) == run.rec.count
    # Open loop drops the warm-up ops still waiting when the first measured one is due:
    # the measured ops are the same, the warm-up records may differ in number.
    m, mw = ~got.warmup, ~whole.warmup
    assert int(m.sum()) == int(mw.sum()) == 6000
    if rate is None:
        assert len(got) == len(whole) == 6500 and int(got.warmup.sum()) == 500
    # The same (op, key) pairs as the whole run's.
    assert Counter(zip(got.op[m].tolist(), got.key[m].tolist(), strict=True)) == Counter(
        zip(whole.op[mw].tolist(), whole.key[mw].tolist(), strict=True))
    assert set(got.status.tolist()) == {OK}
    assert np.all(got.latency_ns > 0) and np.all(got.start_ns >= 0)
    # Chunks follow each other in time: each starts after the previous one's first op.
    firsts = [int(p.start_ns.min()) for p in parts if len(p)]
    assert firsts == sorted(firsts)
    if rate is not None:
        assert np.all(got.intended_ns >= 0)


def test_ycsb_keys_logged_per_op_leave_the_log_as_chunks_are_written(
        redis_server: RunningService) -> None:
    """YCSB's workload D (inserts, reads of the latest) runs on the Python path, whose
    client logs each op's key: spilled in chunks of 500, every record has its key and
    the log is empty at the end (it does not grow with the run)."""
    wl = WORKLOADS.get("ycsb")
    params = {"workload": "d", "record_count": 300}
    cfg = ClientConfig(workload="ycsb", params=params, client_id=0,
                       endpoints={"redis": redis_server.endpoint.to_dict()},
                       connections=2, ops=3000, record_keys=True)
    parts: list[OpsArrays] = []

    def sink(run: ClientRun, chunk: Chunk) -> None:
        parts.append(run.arrays(wl.ops, 0, chunk))
        run.rec.written(chunk)

    run = run_client(wl, cfg, prepare=True, chunk_records=500, sink=sink)
    got = OpsArrays.concat([*parts, run.arrays(wl.ops, 0)], wl.ops)
    assert run.engine == "python" and len(parts) == 5 and len(got) == 3000
    assert set(got.status.tolist()) == {OK} and int((got.key < 0).sum()) == 0
    inserts = got.key[got.op == wl.ops.index("insert")]
    assert len(inserts) > 50 and np.all(inserts >= 300)
    assert run.client._keylog == {}
