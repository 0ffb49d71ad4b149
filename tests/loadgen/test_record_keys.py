"""`run.record_keys`: each op's key number in ops.parquet (schema v3's optional `key`
column), from the seq every engine records. Checked against what a real Redis was sent
(its MONITOR stream, op by op), through the runner into ops.parquet and the CSV export,
and refused before anything runs for a workload whose clients cannot name their keys."""

from __future__ import annotations

import asyncio
import csv
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.errors import ResultsError, SpecError
from harness.exporters.csv_tables import export_csv
from harness.loadgen import ClientConfig
from harness.results import (
    KEY_FIELD,
    OPS_SCHEMA,
    SCHEMA_VERSION,
    OpsArrays,
    read_manifest,
    read_ops,
    verify_run,
)
from harness.run.runner import Runner
from harness.services.base import RunningService
from harness.spec import load_spec
from harness.workloads import WORKLOADS
from harness.workloads.ycsb_gen import key_name
from tests.fixtures.client_runs import run_client
from tests.fixtures.redis_monitor import RedisMonitor

MIX = WORKLOADS.get("redis_mix")


def _arrays(n: int, key: np.ndarray | None) -> OpsArrays:
    z = np.zeros(n, np.int64)
    return OpsArrays(("get", "set"), z.astype(np.int32), z.astype(np.int8), np.arange(n), z,
                     z - 1, z.astype(np.int8), z, z.astype(bool), key=key)


# -- unit: the records and the file ------------------------------------------------------

def test_keys_survive_the_hand_over_and_the_parquet_file(tmp_path: Path) -> None:
    ops = _arrays(5, None).with_keys(np.array([3, -1, 0, 7, 3]))
    ops.save_npz(tmp_path / "o.npz")
    back = OpsArrays.load_npz(tmp_path / "o.npz")
    assert back.key is not None and back.key.tolist() == [3, -1, 0, 7, 3]
    table = back.to_table()
    assert table.schema.equals(OPS_SCHEMA.append(KEY_FIELD))
    assert table.column("key").to_pylist() == [3, None, 0, 7, 3]  # -1: unknown
    assert _arrays(3, None).to_table().schema.equals(OPS_SCHEMA)  # no keys: no column
    with pytest.raises(ResultsError, match="some parts recorded keys"):
        OpsArrays.concat([ops, _arrays(2, None)], ("get", "set"))
    with pytest.raises(ResultsError, match="2 keys for 5 records"):
        _arrays(5, None).with_keys(np.array([1, 2]))


def test_a_workload_that_cannot_name_its_keys_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: k\nworkload: kvstore\nservices: {kv: {kind: kvserver}}\n"
                    "run: {ops: 10, record_keys: true}\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert "run.record_keys: workload 'kvstore' does not name its ops' keys" in str(err.value)
    assert "memcache_mix" in str(err.value) and "ycsb" in str(err.value)


# -- integration: what the server saw ------------------------------------------------------

def _client_run(wl: Any, ep: Any, params: dict[str, Any], **kw: Any) -> OpsArrays:
    """One client process's run against Redis `ep`, its records with their keys as the
    worker makes them."""
    cfg = ClientConfig(workload=wl.name, params=params, endpoints={"redis": ep.to_dict()},
                       client_id=1, record_keys=True, **kw)
    return run_client(wl, cfg).arrays(wl.ops)


@pytest.mark.integration
@pytest.mark.parametrize(("connections", "inflight"), [(4, 1), (2, 4)])
@pytest.mark.usefixtures("loadgen_engine")
def test_each_records_key_is_the_key_redis_was_sent(
        redis_server: RunningService, connections: int, inflight: int) -> None:
    """Op by op: the (command, key) pairs Redis ran are the records' (op, key) pairs, on
    every engine and path (native; Python's callbacks and pipelined batches)."""
    ep = redis_server.endpoint
    params = {k: s.default for k, s in MIX.params.items()}
    params.update(key_space=300, key_dist="zipfian", get_ratio=0.7)
    asyncio.run(MIX.prepare({"redis": ep}, params))
    monitor = RedisMonitor(ep)
    ops = _client_run(MIX, ep, params, ops=6000, warmup_ops=500, connections=connections,
                      inflight=inflight)
    seen = monitor.commands(6500)
    assert len(ops) == len(seen) == 6500
    sent = Counter((cmd.decode().lower(), int(key.rsplit(b":", 1)[1])) for cmd, key, _ in seen)
    recorded = Counter(zip((MIX.ops[o] for o in ops.op.tolist()), ops.key.tolist(),
                           strict=True))
    assert recorded == sent
    assert Counter(ops.key.tolist()).most_common(1)[0][0] == 0  # zipfian: key 0 hottest


@pytest.mark.integration
def test_ycsb_records_the_keynum_of_each_read_and_update(redis_server: RunningService) -> None:
    wl = WORKLOADS.get("ycsb")
    ep = redis_server.endpoint
    params = {"workload": "a", "record_count": 200}
    asyncio.run(wl.prepare({"redis": ep}, params))
    monitor = RedisMonitor(ep)
    ops = _client_run(wl, ep, params, ops=2000, connections=2)
    seen = monitor.commands(2000)
    ran = Counter(key.decode() for cmd, key, _ in seen if cmd in (b"HGETALL", b"HMSET"))
    assert ops.key.min() >= 0 and ops.key.max() < 200
    assert Counter(key_name(k, False) for k in ops.key.tolist()) == ran
    assert sum(ran.values()) == 2000


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_keys_reach_ops_parquet_and_the_export_through_the_runner(tmp_path: Path) -> None:
    spec = tmp_path / "keys.yaml"
    spec.write_text(
        "name: keys\nworkload: memcache_mix\nservices: {cache: {kind: memcached}}\n"
        "clients: {processes: 2, connections: 2}\n"
        "params: {key_space: 100, key_dist: hotspot, hotspot_keys: 0.1, hotspot_ops: 0.9}\n"
        "run: {ops: 4000, warmup_ops: 200, record_keys: true}\n")
    [outcome] = Runner(load_spec(spec), tmp_path / "raw", progress=False).run()
    assert outcome.status == "complete", outcome.error
    man = verify_run(outcome.run_dir)
    assert man.ops_file["columns"][-1] == "key" and man.schema_version == SCHEMA_VERSION
    table = read_ops(outcome.run_dir).to_pandas()
    assert table["key"].notna().all() and len(table) == 4200
    measured = table[~table["warmup"]]
    hot = (measured["key"] < 10).mean()
    assert abs(hot - 0.9) < 4 * np.sqrt(0.9 * 0.1 / len(measured))
    assert set(measured["client"]) == {0, 1}
    [out] = export_csv(tmp_path / "raw", tmp_path / "ops.csv", per="op")
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4000 and Counter(int(r["key"]) for r in rows) == Counter(
        measured["key"].astype(int).tolist())
    assert read_manifest(outcome.run_dir).params["key_dist"] == "hotspot"


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_a_native_run_without_keys_keeps_no_seqs(redis_server: RunningService) -> None:
    """The seq column costs 8 bytes per op: the native core, asked for no keys, writes
    none and the recorder holds none; the Python paths always write them."""
    ep = redis_server.endpoint
    params = {k: s.default for k, s in MIX.params.items()}
    asyncio.run(MIX.prepare({"redis": ep}, params))
    run = run_client(MIX, ClientConfig(workload=MIX.name, params=params,
                                       endpoints={"redis": ep.to_dict()}, client_id=0,
                                       ops=3000, connections=2))
    assert run.rec.n == 3000
    if run.engine == "native":
        assert not run.rec.keep_seq and len(run.rec.seq) == 0
        with pytest.raises(RuntimeError, match="kept no seqs"):
            run.rec.seqs()
    else:
        assert sorted(run.rec.seqs().tolist()) == list(range(3000))
