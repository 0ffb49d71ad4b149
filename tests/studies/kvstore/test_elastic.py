"""Scale up and down under load, end to end through the runner, on both KV backends:
no acknowledged PUT may be lost.

Each client PUTs versioned values (the value names the op's seq) and GETs, while the
timeline adds a node and then removes one. After the run, still inside the runner's
service block, every key is read back: it must hold the value of its last acknowledged
PUT (or of a later PUT that failed without an answer, which may have been applied).
The op sequence is rebuilt from the records: with one op in flight per client, an op's
own record spans every extra attempt record (redirect / error) it caused.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from harness.drivers.kvtext import KVTextClient
from harness.drivers.redis import ClusterClient
from harness.hosts import LocalHost
from harness.results import read_manifest, read_ops
from harness.run.runner import Runner
from harness.services.base import RunningService
from harness.spec import load_spec
from harness.workloads import WORKLOADS
from harness.workloads.kvstore import PUT
from tests.fixtures.engines import require_native
from tests.services.test_command import KVSERVER
from tests.services.test_redis_cluster import require_redis_cluster

pytestmark = pytest.mark.integration

SPEC = """\
name: elastic
workload: kvstore
services:
  kv: {{kind: {kind}, settings: {settings}}}
clients: {{processes: 2}}
params: {params}
timeline:
  - {{at_s: {add_at}, action: add_node, service: kv}}
  - {{at_s: {remove_at}, action: remove_node, service: kv, args: {{node: 0}}}}
run: {{duration_s: {duration}, timeout_s: 5}}
"""


class ReadBackRunner(Runner):
    """Reads every key back at the end of each run, while its servers still run."""

    def _run_one(self, plan: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = super()._run_one(plan, *args, **kwargs)
        running: dict[str, RunningService] = args[3]  # (ctx, endpoints, sinfo, running, ...)
        self.expected = expected_values(outcome.run_dir, dict(plan.params))
        self.found = asyncio.run(read_back(running["kv"], list(self.expected)))
        return outcome


def expected_values(run_dir: Path, params: dict[str, Any]
                    ) -> dict[bytes, tuple[bytes, list[bytes]]]:
    """key -> (value of the last acknowledged PUT, values of later unanswered PUTs)."""
    ops = read_ops(run_dir).to_pandas()
    wl = WORKLOADS.get("kvstore")
    endpoint = {"kvstore": _endpoint()}
    out: dict[bytes, tuple[bytes, list[bytes]]] = {}
    for client_id, rows in ops.groupby("client"):
        # An op's record spans its attempts'; on the native core the first attempt
        # starts with the op (both at its first send), so the longer sorts first.
        rows = rows.assign(neg_latency=-rows.latency_ns).sort_values(
            ["start_ns", "neg_latency"], kind="stable")
        client = wl.client(endpoint, params, int(client_id))
        seq, op_start, op_end = 0, -1, -1
        for r in rows.itertuples():
            end = r.start_ns + r.latency_ns
            if op_start <= r.start_ns and end <= op_end:  # an attempt within the op
                assert r.status in ("redirect", "error"), r
                continue
            op_start, op_end = r.start_ns, end
            code = client.next_op(seq)
            assert wl.ops[code] == r.op, f"client {client_id} seq {seq}: {r.op}"
            if code == PUT:
                i = client.index(PUT, seq)
                key, value = client.records[i].key, client.value(i, seq)
                if r.status == "ok":
                    out[key] = (value, [])
                elif key in out:
                    out[key][1].append(value)
            seq += 1
    return out


def _endpoint() -> Any:
    from harness.services.base import Endpoint

    return Endpoint("kvstore", "127.0.0.1", 1, {"protocol": "kvtext"})


async def read_back(svc: RunningService, keys: list[bytes]) -> dict[bytes, bytes | None]:
    if svc.kind == "redis_cluster":
        nodes = [(n.address, n.port) for n in svc.nodes]  # type: ignore[attr-defined]
        client: Any = ClusterClient(nodes, auth=svc.endpoint.auth)
        await client.connect_all()
        get = lambda k: client.execute(k, "GET", k)  # noqa: E731
    else:
        nodes = [(s.address, s.port) for s in svc.servers]  # type: ignore[attr-defined]
        client = KVTextClient(nodes)
        await client.connect_all()
        get = client.get
    try:
        return {k: await get(k) for k in keys}
    finally:
        client.close()


#: Versioned values, so a read tells which PUT it returns (the Python paths).
MIX = ("{records_per_client: 300, mode: mix, put_ratio: 0.5, key_dist: uniform, "
       "versioned: true, median_bytes: 600}")
#: The seeds' PUT-then-GET passes, which run on the native core where it is built.
PASSES = "{records_per_client: 300, mode: put_then_get, median_bytes: 600}"


def run_elastic(tmp_path: Path, kind: str, settings: dict[str, Any], add_at: float,
                remove_at: float, duration: float, params: str = MIX) -> ReadBackRunner:
    path = tmp_path / "elastic.yaml"
    path.write_text(SPEC.format(kind=kind, settings=settings, add_at=add_at,
                                remove_at=remove_at, duration=duration, params=params))
    runner = ReadBackRunner(load_spec(path), tmp_path / "raw", progress=False)
    [outcome] = runner.run()
    assert outcome.status == "complete", outcome.error
    man = read_manifest(outcome.run_dir)
    add, remove = man.extra["timeline"]
    assert add["action"] == "add_node" and remove["action"] == "remove_node"
    assert add["error"] is None and remove["error"] is None, (add, remove)
    assert add["start_ns"] >= add_at * 1e9 and remove["start_ns"] >= add["end_ns"]
    # The clients ran through both events' starts (the property needs PUTs around
    # them); how long a hand-over then takes is the machine's speed, not the property:
    # a loaded CI machine took 23 s to finish Redis's scale-down (issue 41, item 4).
    assert remove["start_ns"] < duration * 1e9, "the scale-down began after the clients"
    assert man.counts["redirect"] > 0  # clients were sent elsewhere around the events
    assert len(runner.expected) > 100
    lost = {k: (runner.found[k], v) for k, (v, maybe) in runner.expected.items()
            if runner.found[k] != v and runner.found[k] not in maybe}
    assert not lost, f"{len(lost)} acknowledged PUTs lost or stale, e.g. {next(iter(lost))!r}"
    runner.manifest = man
    return runner


def test_course_protocol_servers_lose_no_acknowledged_put(tmp_path: Path) -> None:
    run_elastic(tmp_path, "command", {**KVSERVER, "servers": 2}, 1.0, 2.5, 5.0)


def test_course_protocol_on_the_native_core_loses_no_acknowledged_put(tmp_path: Path) -> None:
    """The same scaling with the seeds' op sequence, which the native core runs: the
    refusals around the hand-overs and the lost server go through its slow path."""
    require_native()
    runner = run_elastic(tmp_path, "command", {**KVSERVER, "servers": 2}, 1.0, 2.5, 5.0,
                         params=PASSES)
    assert runner.manifest.loadgen["engine"] == "native"


def test_redis_cluster_loses_no_acknowledged_put(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    require_redis_cluster(LocalHost())
    # nodes.conf is fsynced on every slot handed over; tmpfs keeps the test short.
    if os.path.isdir("/dev/shm"):
        monkeypatch.setenv("TMPDIR", "/dev/shm")
    run_elastic(tmp_path, "redis_cluster", {"masters": 3}, 1.0, 1.5, 22.0)
