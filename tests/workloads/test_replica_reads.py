"""`read_from: replicas` (`harness.workloads.replica_reads`) on the kit's example: a
primary and two replicas the kit starts, the GETs on the replicas, spread evenly, the
SETs on the primary, on both engines, in closed loop with requests in flight and in
open loop; `read_from: primary` the same mix on the primary alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.paths import experiments_dir
from harness.results import iter_run_dirs, read_manifest
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration


def _example(tmp_path: Path, run: dict, clients: dict) -> Path:
    spec = yaml.safe_load((experiments_dir() / "deployment" / "redis_replicas.yaml")
                          .read_text())
    spec.update(repetitions=1, run=run, clients={**spec["clients"], **clients})
    spec["params"]["key_space"] = 2000
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("mode", ["closed, 4 in flight", "open loop"])
def test_the_gets_go_to_the_replicas_spread_evenly_and_the_sets_to_the_primary(
        tmp_path: Path, loadgen_engine: str, mode: str) -> None:
    require_service("redis", LocalHost())
    run = ({"ops": 6000, "warmup_ops": 200} if mode.startswith("closed") else
           {"duration_s": 1, "warmup_s": 0.2, "rate_ops_s": 2000})
    spec = _example(tmp_path, run, {"inflight": 4 if mode.startswith("closed") else 1,
                                    "connections": 4})
    raw = tmp_path / "raw"
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    mans = {m.grid_point["read_from"]: m for m in map(read_manifest, iter_run_dirs(raw))}
    assert set(mans) == {"primary", "replicas"}
    for where, m in mans.items():
        assert m.status == "complete" and m.loadgen["engine"] == loadgen_engine
        assert m.counts["error"] == m.counts["timeout"] == m.counts["miss"] == 0, m.counts
        d = m.telemetry["counters"]["kv"]["delta"]
        gets = [d.get(f"{k}cmdstat_get_calls", 0) for k in ("", "replica0.", "replica1.")]
        sets = [d.get(f"{k}cmdstat_set_calls", 0) for k in ("", "replica0.", "replica1.")]
        assert sets[0] > 0 and sets[1] == sets[2] == sets[0], sets
        # Every get of the run on the primary, or on the replicas and none on the primary.
        assert sum(gets) + sets[0] >= m.counts["total"], (gets, sets, m.counts)
        if where == "primary":
            assert gets[1:] == [0, 0], gets
        else:
            assert gets[0] == 0 and abs(gets[1] - gets[2]) <= 0.1 * sum(gets), gets
        assert [r["link"] for r in m.telemetry["replication"]["kv"]["end"]["replicas"]] == [
            "up", "up"]
