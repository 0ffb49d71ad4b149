"""A Redis Cluster with replicas started by the kit (`replicas_per_master`), and
`redis_mix` reading from them (`read_from: replicas`), against real redis-server nodes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from harness.analysis.checks.replicas import behind, run_figures
from harness.cli import main as cli_main
from harness.errors import WorkloadError
from harness.hosts import LocalHost
from harness.hosts.endpoint import Endpoint
from harness.paths import experiments_dir
from harness.results import iter_run_dirs, read_manifest
from harness.services import SERVICES
from harness.workloads.cluster_reads import read_layout
from tests.fixtures.hostile import bulk, scripted
from tests.fixtures.servers import tcp_listeners
from tests.services.test_redis_cluster import require_redis_cluster

pytestmark = pytest.mark.integration

MASTERS = 3


def _spec(tmp_path: Path, settings: str, grid: str = "read_from: [primary, replicas]",
          extra: str = "") -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text("name: mine\nworkload: redis_mix\nhosts: {client: localhost}\n"
                    "services:\n  kv: {kind: redis_cluster, host: client, settings: "
                    f"{{provides: redis, {settings}}}}}\nclients: {{hosts: [client], "
                    "processes: 1, connections: 4}\nparams: {key_space: 500, get_ratio: 0.8}\n"
                    f"grid: {{{grid}}}\nrepetitions: 1\nrun: {{ops: 3000, warmup_ops: 100}}\n"
                    + extra)
    return path


def _example(tmp_path: Path, run: dict, clients: dict) -> Path:
    spec = yaml.safe_load((experiments_dir() / "deployment" / "redis_cluster_replicas.yaml")
                          .read_text())
    spec.update(repetitions=1, run=run, clients={**spec["clients"], **clients})
    spec["params"]["key_space"] = 2000
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("mode", ["closed", "closed, 4 in flight", "open loop"])
def test_gets_land_on_the_replicas_of_each_keys_master_and_sets_on_the_masters(
        tmp_path: Path, mode: str) -> None:
    require_redis_cluster(LocalHost())
    run = ({"duration_s": 1, "warmup_s": 0.2, "rate_ops_s": 2000} if mode == "open loop"
           else {"ops": 4000, "warmup_ops": 200})
    spec = _example(tmp_path, run, {"inflight": 4 if "4 in flight" in mode else 1,
                                    "connections": 4})
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = {m.grid_point["read_from"]: m for m in map(read_manifest, iter_run_dirs(raw))}
    assert set(mans) == {"primary", "replicas"}
    for where, m in mans.items():
        assert m.status == "complete" and m.loadgen["engine"] == "python", m.status
        assert m.counts["error"] == m.counts["timeout"] == m.counts["miss"] == 0, m.counts
        kv = m.services["kv"]
        replicas = kv["config"]["replicas"]
        # One replica per master, each master replicated once, none a master itself.
        assert len(replicas) == MASTERS
        masters = {r["master"] for r in replicas}
        assert len(masters) == MASTERS and not masters & {r["address"] for r in replicas}
        delta = m.telemetry["counters"]["kv"]["delta"]
        gets = [delta.get(f"{k}cmdstat_get_calls", 0)
                for k in ("", *(f"replica{i}." for i in range(MASTERS)))]
        hits = [delta.get(f"{k}keyspace_hits", 0)
                for k in ("", *(f"replica{i}." for i in range(MASTERS)))]
        sets = [delta.get(f"{k}cmdstat_set_calls", 0)
                for k in ("", *(f"replica{i}." for i in range(MASTERS)))]
        # The sets on the masters (summed), applied by each master's replica (what it
        # had applied when read: replication is asynchronous).
        assert sets[0] > 0 and min(sets[1:]) > 0 and sum(sets[1:]) <= sets[0], sets
        if where == "primary":
            assert gets[0] >= 0.7 * m.counts["total"] and gets[1:] == [0] * MASTERS, gets
            assert hits[0] == gets[0] and hits[1:] == [0] * MASTERS, hits
        else:  # every replica takes its master's share of the reads
            assert gets[0] == 0 and hits[0] == 0, (gets, hits)
            assert sum(gets[1:]) >= 0.7 * m.counts["total"], gets
            assert min(gets[1:]) > 0.2 * sum(gets[1:]) and hits[1:] == gets[1:], gets
            assert delta.get("cmdstat_readonly_calls", 0) == 0
            assert sum(delta.get(f"replica{i}.cmdstat_readonly_calls", 0)
                       for i in range(MASTERS)) >= 4 * MASTERS
        shards = m.telemetry["replication"]["kv"]["end"]["shards"]
        assert sorted(s["primary"] for s in shards) == sorted(masters)
        assert all(r["link"] == "up" for s in shards for r in s["replicas"])
        # The replica_lag check judges each master's replica: none fell behind.
        assert behind(m.telemetry) == [] and run_figures(m.telemetry)["up"] == MASTERS
    # Every node, replicas too, stopped with the cluster: no pid left, no port listening.
    for m in mans.values():
        kv = m.services["kv"]
        assert len(kv["pids"]) == 2 * MASTERS
        assert not [p for p in kv["pids"] if Path(f"/proc/{p}").exists()
                    and "redis" in Path(f"/proc/{p}/comm").read_text()]
        for address in [n["address"] for n in kv["nodes"]] + [r["address"]
                                                                for r in kv["replicas"]]:
            assert tcp_listeners(int(address.rpartition(":")[2])) == set(), address


def test_read_from_replicas_on_a_cluster_without_replicas_is_refused_by_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = _spec(tmp_path, "masters: 3")
    assert cli_main(["validate", str(spec)]) == 2
    assert "read_from: replicas needs a redis_cluster service with replicas" in (
        capsys.readouterr().err)


@pytest.mark.parametrize("action", ["add_node", "remove_node"])
def test_scaling_a_cluster_with_replicas_is_refused_by_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture, action: str) -> None:
    spec = _spec(tmp_path, "masters: 3, replicas_per_master: 1", grid="read_from: [primary]",
                 extra=f"timeline: [{{at_s: 1, service: kv, action: {action}}}]\n")
    spec.write_text(spec.read_text().replace("run: {ops: 3000, warmup_ops: 100}",
                                             "run: {duration_s: 5}"))
    assert cli_main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any("replicas_per_master" in line and action in line for line in err), err


def test_replicas_with_fewer_than_three_masters_are_refused_by_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = _spec(tmp_path, "masters: 2, replicas_per_master: 1", grid="read_from: [primary]")
    assert cli_main(["validate", str(spec)]) == 2
    assert "replicas_per_master: 1 needs masters: 3 or more" in capsys.readouterr().err


@pytest.mark.parametrize(("reply", "says"), [
    (b":7\r\n", "CLUSTER NODES answered 7"),
    (bulk(b"id 127.0.0.1:7000@17000 master - 0 0 1 connected 0-99999\n"), "not a slot range"),
    (bulk(b"id 127.0.0.1:7000@17000 master - 0 0 1 connected 0-100\n"), "every slot's master"),
    (bulk(b"id nohost master - 0 0 1 connected 0-16383\n"), "is not host:port"),
])
def test_a_layout_that_is_not_one_is_refused_in_words(reply: bytes, says: str) -> None:
    """What a client reads when it first connects: refused with a WorkloadError."""
    with scripted(lambda words: reply) as front:
        ep = Endpoint("redis", "127.0.0.1", front.port, {"protocol": "redis_cluster"})
        with pytest.raises(WorkloadError, match=says):
            asyncio.run(read_layout(ep))


def test_a_cluster_at_an_address_has_its_replicas_found_counted_and_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster the kit did not start (here: started beforehand, then named by one
    node's address): its replicas come from CLUSTER NODES, into the manifest, the
    counters and the replication state, and `read_from: replicas` reads them."""
    require_redis_cluster(LocalHost())
    svc = SERVICES.get("redis_cluster").start(LocalHost(), "pre", {
        "masters": MASTERS, "replicas_per_master": 1})
    try:
        assert svc.endpoint.auth is not None
        monkeypatch.setenv("RCPW", svc.endpoint.auth.password)
        spec = tmp_path / "spec.yaml"
        spec.write_text(
            "name: mine\nworkload: redis_mix\nhosts: {client: localhost}\nservices:\n"
            f"  kv: {{kind: redis_cluster, address: '{svc.nodes[0].addr}', auth: "
            "{password_env: RCPW}, settings: {provides: redis}}\nclients: {hosts: [client], "
            "processes: 1, connections: 2}\nparams: {key_space: 300, get_ratio: 0.8}\n"
            "grid: {read_from: [primary, replicas]}\nrepetitions: 1\n"
            "run: {ops: 1500, warmup_ops: 100}\n")
        raw = tmp_path / "raw"
        assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
        mans = {m.grid_point["read_from"]: m for m in map(read_manifest, iter_run_dirs(raw))}
        pairs = sorted((r["address"], r["master"]) for r in svc.config["replicas"])
        for where, m in mans.items():
            assert m.counts["error"] == m.counts["miss"] == 0, m.counts
            assert sorted((r["address"], r["master"])
                          for r in m.services["kv"]["config"]["replicas"]) == pairs
            delta = m.telemetry["counters"]["kv"]["delta"]
            on_replicas = sum(delta.get(f"replica{i}.cmdstat_get_calls", 0)
                              for i in range(MASTERS))
            on_masters = delta.get("cmdstat_get_calls", 0)
            assert (on_masters, on_replicas)[where == "replicas"] >= 0.7 * m.counts["total"]
            assert (on_masters, on_replicas)[where == "primary"] == 0, (on_masters, on_replicas)
            shards = m.telemetry["replication"]["kv"]["end"]["shards"]
            assert sorted(r["address"] for s in shards for r in s["replicas"]) == sorted(
                r for r, _ in pairs)
    finally:
        svc.stop()
