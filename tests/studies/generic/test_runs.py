"""A user's own experiment, measured for real and analysed: memcached's get/set mix over
value sizes, with the spec's order of values kept as the reference."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from harness.hosts import LocalHost
from harness.results import read_manifest
from harness.run.runner import Runner
from harness.spec import load_spec
from harness.studies.generic import analyse, analysis, own_experiments
from tests.fixtures.engines import require_native
from tests.fixtures.machines import TestBed
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

SPEC = """\
name: mc_values
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache: {kind: memcached, host: server, settings: {threads: 1}}
clients: {hosts: [client], processes: 1, connections: 2}
params: {key_space: 200, get_ratio: 0.5}
grid:
  value_size_bytes: [100000, 100]
repetitions: 2
run: {ops: 400, warmup_ops: 20, timeout_s: 5}
"""


def test_own_spec_measured_and_analysed(tmp_path: Path) -> None:
    require_service("memcached", LocalHost())
    spec = tmp_path / "mine.yaml"
    spec.write_text(SPEC)
    raw = tmp_path / "raw"
    outcomes = Runner(load_spec(spec), raw, progress=False).run()
    assert [o.status for o in outcomes] == ["complete"] * 4
    assert own_experiments(raw) == ["mc_values"]
    [section] = analyse(raw).sections
    man = read_manifest(Path(section.loaded.runs["run_dir"].iloc[0]))
    assert man.typed_extra.spec["grid"] == {"value_size_bytes": [100000, 100]}
    said = section.measured()
    for words in ("Workload `memcache_mix`", "1 client process × 2 connections",
                  "closed loop", "400 measured ops per run", "`cache`: memcached"):
        assert words in said, said
    t = section.effects().table
    # The spec's first value is the reference: 100 bytes against 100 kB.
    assert set(t["reference"]) == {100000} and set(t["value"]) == {100}
    assert len(t) == len(analysis.EFFECT_METRICS)
    # The effect is what DuckDB reads in the ops files: sets move 1,000x fewer bytes,
    # and the mean latency's ratio is that of the pooled measured ops. (Whether 100 B is
    # faster is the machine's to say: under load a 400-op run can go either way.)
    runs = section.loaded.runs
    files = {int(v): [str(Path(d) / "ops.parquet") for d in g["run_dir"]]
             for v, g in runs.groupby("value_size_bytes")}
    duck = {v: duckdb.sql(f"""SELECT avg(latency_ns) AS mean_ns,
                                     avg(bytes) FILTER (WHERE op::VARCHAR = 'set') AS set_bytes
                              FROM read_parquet({fs!r})
                              WHERE NOT warmup AND status::VARCHAR <> 'redirect'""").fetchall()[0]
            for v, fs in files.items()}
    assert duck[100][1] * 1000 == duck[100000][1] > 0
    mean = t[t["metric"] == "latency_mean"].iloc[0]
    assert mean["base"] == pytest.approx(duck[100000][0] / 1e6, rel=1e-9)
    assert mean["cand"] == pytest.approx(duck[100][0] / 1e6, rel=1e-9)
    assert mean["ratio"] == pytest.approx(duck[100][0] / duck[100000][0], rel=1e-9)
    assert mean["ratio_ci_low"] < mean["ratio"] < mean["ratio_ci_high"]
    table = analysis.configurations(section.loaded)
    assert list(table["runs"]) == [2, 2] and list(table["ops"]) == [800, 800]


PAUSED = """\
name: mc_paused
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache: {kind: memcached, host: server, settings: {threads: 1}}
clients: {hosts: [client], processes: 1, connections: 1}
params: {key_space: 200}
grid:
  clients.pause_us: [0, 2000]
repetitions: 1
run: {ops: 150, timeout_s: 5}
"""


def test_a_pause_reaches_the_worker_and_the_sentence(tmp_path: Path) -> None:
    """clients.pause_us travels spec -> worker -> core -> manifest -> report: with one op
    in flight every paused op waits the pause out, and the sentence of what was measured
    names the values and what they cost."""
    require_native()
    require_service("memcached", LocalHost())
    spec = tmp_path / "paused.yaml"
    spec.write_text(PAUSED)
    raw = tmp_path / "raw"
    outcomes = Runner(load_spec(spec), raw, progress=False).run()
    assert [o.status for o in outcomes] == ["complete"] * 2
    [section] = analyse(raw).sections
    runs = section.loaded.runs
    assert sorted(runs["loadgen_pause_us"]) == [0.0, 2000.0]
    assert set(runs["loadgen_engine"]) == {"native"}
    table = analysis.configurations(section.loaded).set_index("clients.pause_us")
    assert table.loc[2000, "latency_p50_ms"] >= 2.0 > table.loc[0, "latency_p50_ms"]
    said = section.measured()
    assert "a pause of 0 or 2000 µs before each wait" in said, said


def test_a_pause_reaches_a_worker_on_another_machine(tmp_path: Path,
                                                    machines: TestBed) -> None:
    """memcached on srv, the client process on cli over SSH: the pause crosses in the
    client config to the remote worker's core (every op of the paused runs waits it out
    between srv and cli's own addresses) and comes back in the manifest."""
    import yaml

    require_native()
    hosts = yaml.safe_dump({"hosts": machines.hosts_yaml({"server": "srv", "client": "cli"})})
    spec = tmp_path / "paused.yaml"
    spec.write_text(PAUSED.replace("hosts: {server: localhost, client: localhost}\n", hosts))
    outcomes = Runner(load_spec(spec), tmp_path / "raw", progress=False).run()
    assert [o.status for o in outcomes] == ["complete"] * 2, [o.error for o in outcomes]
    [section] = analyse(tmp_path / "raw").sections
    runs = section.loaded.runs
    assert sorted(runs["loadgen_pause_us"]) == [0.0, 2000.0]
    assert set(runs["loadgen_engine"]) == {"native"}
    assert {read_manifest(Path(d)).hosts["client"]["address"] for d in runs["run_dir"]} == {
        machines["cli"].address}
    table = analysis.configurations(section.loaded).set_index("clients.pause_us")
    assert table.loc[2000, "latency_p50_ms"] >= 2.0 > table.loc[0, "latency_p50_ms"]


def test_a_replicated_redis_has_its_replication_beside_the_latency(tmp_path: Path) -> None:
    """The example of reads from replicas, shortened: the section's replication table
    has a row per configuration with the primary's stream, how far the replicas were
    behind at the end and their links; an experiment without replicas has none."""
    import yaml

    from harness.paths import experiments_dir

    require_service("redis", LocalHost())
    spec = yaml.safe_load((experiments_dir() / "deployment" / "redis_replicas.yaml")
                          .read_text())
    spec.update(repetitions=1, run={"ops": 2000, "warmup_ops": 100})
    spec["params"]["key_space"] = 500
    path = tmp_path / "replicas.yaml"
    path.write_text(yaml.safe_dump(spec))
    raw = tmp_path / "raw"
    assert [o.status for o in Runner(load_spec(path), raw, progress=False).run()] == [
        "complete"] * 2
    [section] = analyse(raw).sections
    table = section.replication_table().data
    for words in ("replication beside the latency", "<td>primary</td>",
                  "<td>replicas</td>", "behind at end, bytes (max)", "2 of 2"):
        assert words in table, table
    assert table.count("2 of 2") == 2  # both replicas linked at the end of both runs
    spec = tmp_path / "mine.yaml"
    spec.write_text(SPEC.replace("repetitions: 2", "repetitions: 1").replace(
        "[100000, 100]", "[100]"))
    require_service("memcached", LocalHost())
    Runner(load_spec(spec), tmp_path / "mc", progress=False).run()
    [plain] = analyse(tmp_path / "mc").sections
    assert plain.replication_table() is None
