"""Every built-in study across three machines of the test bed: its servers on `srv`, its
clients on `cli`, and `harness` on the control machine; at the smallest scale that still
runs every kind of op, and each run must complete with its ops recorded.

The loopback versions of these runs stay in the other tests; here what differs is that
every connection crosses the bridge with the machines' own addresses, so a server that
trusts loopback only (or listens on it) fails as it would on real machines.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from harness.cli import EXIT_OK, main
from harness.hosts import LocalHost
from harness.paths import experiments_dir
from harness.run.runner import Runner
from harness.services.base import RunningService
from harness.services.postgres import DATABASE, USER, find_pg_binaries
from harness.spec import RunPlan, load_spec
from tests.fixtures.machines import TestBed

#: Per study: overrides (as `--set` would give them) that make it small.
SMALL: dict[str, dict[str, Any]] = {
    "datastore_vs_memcache": {
        "repetitions": 1, "run.ops": 5, "run.warmup_ops": 1,
    },
    "filestore_memcache": {
        "repetitions": 1, "run.ops": 8, "run.warmup_ops": 1, "params.files": 8,
        "params.rtt_probes": 2,
        "grid": {"op": ["insert", "find", "remove"], "memcache": [True, False]},
    },
    "cluster_modes": {
        "repetitions": 1, "run.ops": 30, "params.objects": 30,
        "grid": {"services.db.mode": ["single", "local-cluster"],
                 "services.db.nodes": [1, 2], "op": ["insert", "hash_search"]},
        "exclude": [{"services.db.mode": "single", "services.db.nodes": 2},
                    {"services.db.mode": "local-cluster", "services.db.nodes": 1}],
    },
    "kv_scaling": {
        "repetitions": 1, "run.duration_s": 0.5, "run.warmup_s": 0.1,
        "params.records_per_client": 50,
        "grid": {"services.kv.masters": [2], "clients.processes": [2]},
    },
    "kv_cache": {
        "repetitions": 1, "run.ops": 200, "params.records_per_client": 40,
        "grid": {"services.kv.cache_size": [20], "services.kv.strategy": ["LRU"]},
    },
    "kv_elastic": {
        "run.duration_s": 5, "clients.processes": 1, "params.records_per_client": 200,
        "services.kv.settings.masters": 2,
        "timeline": [{"at_s": 1, "action": "add_node", "service": "kv"},
                     {"at_s": 3, "action": "remove_node", "service": "kv"}],
    },
}


def three_machines(bed: TestBed) -> dict[str, Any]:
    """Overrides that put the spec's `server` on srv and `client` on cli."""
    return {"hosts": bed.hosts_yaml({"server": "srv", "client": "cli"})}


def real_standby(bed: TestBed) -> dict[str, Any]:
    """cluster_modes' network-cluster with its standby on a machine of its own."""
    return {
        "hosts": bed.hosts_yaml({"server": "srv", "client": "cli", "standby": "oth"}),
        "services.db.settings.standby_hosts": ["standby"],
        "services.db.settings.primary_address": bed["srv"].address,
        "repetitions": 1, "run.ops": 30, "params.objects": 30, "exclude": [],
        "grid": {"services.db.mode": ["network-cluster"], "services.db.nodes": [2],
                 "op": ["insert", "hash_search"]},
    }


def audit(bed: TestBed, found: list[str]) -> Callable[[RunPlan, dict[str, RunningService]],
                                                       None]:
    """An `on_run_start` hook: while the servers serve, check who may reach them.

    Every TCP listener on the server machine is on its own address (or loopback), never
    a wildcard; PostgreSQL admits the client machine and refuses `oth`, a machine the
    spec does not name. Appends one line per check to `found`.
    """
    srv = bed["srv"]
    psql = find_pg_binaries(LocalHost())["psql"]

    def hook(plan: RunPlan, running: dict[str, RunningService]) -> None:
        for line in srv.run(["ss", "-ltnH"]).stdout.splitlines():
            local = line.split()[3].rsplit(":", 1)[0].strip("[]")
            assert local in (srv.address, "127.0.0.1", "::1"), line
            found.append(f"listen {local}")
        for svc in running.values():
            if svc.endpoint.kind != "postgres":
                continue
            for m in ("cli", "oth"):  # with the server's password: only the address decides
                res = bed[m].run(["env", f"PGPASSWORD={svc.endpoint.auth.password}", psql,
                                  "-X", "-A", "-t", "-w", "-h", svc.endpoint.host, "-p",
                                  str(svc.endpoint.port), "-U", USER, "-d", DATABASE, "-c",
                                  "SELECT 1"], check=False, timeout=30)
                if m == "cli":
                    assert res.returncode == 0 and res.stdout.strip() == "1", res.stderr
                else:
                    assert res.returncode != 0
                    assert f'no pg_hba.conf entry for host "{bed[m].address}"' in res.stderr
                found.append(f"postgres {m} {res.returncode == 0}")

    return hook


def manifests(raw: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(raw.rglob("manifest.json"))]


@pytest.mark.parametrize("study", [*sorted(SMALL), "cluster_modes+real_standby"])
def test_study_runs_across_three_machines(study: str, machines: TestBed,
                                          tmp_path: Path) -> None:
    if study.endswith("+real_standby"):
        study, overrides = study.split("+")[0], real_standby(machines)
    else:
        overrides = {**SMALL[study], **three_machines(machines)}
    spec = load_spec(experiments_dir() / f"{study}.yaml", overrides)
    raw = tmp_path / "raw"
    checked: list[str] = []
    outcomes = Runner(spec, raw, progress=False, on_run_start=audit(machines, checked)).run()
    assert outcomes
    assert any(c.startswith("listen ") for c in checked)
    if study in ("datastore_vs_memcache", "cluster_modes"):
        assert {"postgres cli True", "postgres oth False"} <= set(checked)
    for o in outcomes:
        assert o.status == "complete", (o.plan.label(), o.error)
        assert o.measured_ops > 0
    found = manifests(raw)
    assert len(found) == len(outcomes)
    for m in found:
        assert m["status"] == "complete"
        # The servers ran on srv and the records came from cli, by their addresses.
        for svc in m["services"].values():
            assert svc["host"] == "server" and svc["address"] == machines["srv"].address
            if svc["kind"] in ("postgres", "pg_cluster"):  # exactly us and the client
                assert svc["config"]["admitted"] == [f"{machines.control_address}/32",
                                                     f"{machines['cli'].address}/32"]
        assert m["loadgen"]["client_hosts"] == ["client"]
        ops = pq.read_table(Path(raw, m["experiment"], m["run_id"], "ops.parquet"))
        counts = m["counts"]
        assert ops.num_rows == counts["total"] and counts["measured"] > 0
        assert counts["error"] == counts["timeout"] == 0, counts
        if "standby" in spec.hosts:  # replication crossed the bridge to its own machine
            config = m["services"]["db"]["config"]
            assert config["network"] == "real"
            assert config["standby_addresses"] == [machines["oth"].address]
            assert [r["client_addr"] for r in config["replication"]] == [
                machines["oth"].address]


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "three_machines"


def test_the_worked_example_is_the_built_in_study_on_other_hosts() -> None:
    example = yaml.safe_load((EXAMPLE / "datastore_vs_memcache.yaml").read_text())
    built_in = yaml.safe_load((experiments_dir() / "datastore_vs_memcache.yaml").read_text())
    assert example.pop("inventory") == "inventory.yaml"
    assert example.pop("hosts") == {"server": "db1", "client": "load1"}
    built_in.pop("hosts")
    assert example == built_in
    inventory = yaml.safe_load((EXAMPLE / "inventory.yaml").read_text())
    assert set(inventory) == {"db1", "load1"}


def test_the_worked_example_checks_and_runs_on_three_machines(
        machines: TestBed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "datastore_vs_memcache.yaml"
    shutil.copy(EXAMPLE / "datastore_vs_memcache.yaml", spec)
    # The inventory as a user would fill it in, with the bed's machines.
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(
        {"db1": machines["srv"].spec_entry(), "load1": machines["cli"].spec_entry()}))
    assert main(["hosts", "check", str(spec)]) == EXIT_OK
    out = capsys.readouterr().out
    # server, client, control -> server, client -> server
    assert len([line for line in out.splitlines() if ": ok" in line]) == 4, out
    raw = tmp_path / "raw"
    assert main(["run", str(spec), "--out", str(raw), "--no-progress", "--set",
                 "repetitions=1", "--set", "run.ops=5", "--set", "run.warmup_ops=1"]) == EXIT_OK
    found = manifests(raw)
    assert len(found) == 5 and all(m["status"] == "complete" for m in found)
