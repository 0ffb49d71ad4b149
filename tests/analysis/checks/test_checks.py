"""The measurement checks (harness.analysis.checks.registry) on runs with a known answer: each
fires on the pattern it names and stays quiet on steady runs; a run without what a check
needs is skipped, never failed; and the groups are `harness summary`'s."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.analysis.checks import registry as checks
from harness.analysis.checks import words as checkwords
from harness.analysis.checks.runfacts import RunData, RunOps, group_runs
from harness.analysis.data.load import load_runs_only
from harness.analysis.stats import stationarity
from harness.results import OK, OpsArrays, new_manifest, write_run
from tests.fixtures.frames import assert_same_values

NAMES = ["client_saturated", "errors", "target_not_met", "not_steady", "trend", "cold_first_run",
         "machine_busy", "replica_lag", "heavy_tail"]


def manifest(i: int = 0, *, loadgen: dict | None = None, counts: dict | None = None,
             telemetry: dict | None = None, grid: dict | None = None,
             source: str = "harness", experiment: str = "exp") -> Any:
    started = datetime.fromtimestamp(1.7e9 + 60 * i, UTC).isoformat()
    return new_manifest(run_id=f"r{i:02d}-{'-'.join(map(str, (grid or {}).values()))}",
                        experiment=experiment, workload="w", repetition=i + 1,
                        grid_point=grid or {}, started_utc=started, ended_utc=started,
                        loadgen=loadgen or {"mode": "closed"}, counts=counts or {},
                        telemetry=telemetry or {}, source=source)


def ops_facts(logs: np.ndarray) -> RunOps:
    lat = np.exp(logs + math.log(1e5)).astype(np.int64)
    begin = np.arange(lat.size, dtype=np.int64) * 100_000
    return RunOps(int(lat.size), float(lat.mean()) / 1e6, 1.0,
                  stationarity.warmup(begin, lat))


def run(i: int = 0, ops: RunOps | None = None, **kw: Any) -> RunData:
    m = manifest(i, **kw)
    return RunData(m.run_id, m, ops)


def telemetry(client: float = 0.3, other: float = 0.0, window: float = 2.0,
              steal: float = 0.0) -> dict:
    return {"window_s": window,
            "processes": [{"role": "client", "name": "client 0", "cpu_util": client},
                          {"role": "server", "name": "memcached", "cpu_util": 0.4}],
            "hosts": [{"host": "client", "cpus": 2, "other_cpu": other,
                       "steal_util": steal}]}


def test_the_registry_names_the_issues_checks_each_with_its_rule() -> None:
    assert list(checks.CHECKS) == NAMES
    for name, c in checks.CHECKS.items():
        assert c.name == name and c.description and c.threshold
        assert "{side}" in c.caveat


def test_client_saturated_fires_at_nine_tenths_of_a_cpu() -> None:
    runs = [run(0, telemetry=telemetry(0.95)), run(1, telemetry=telemetry(0.5)),
            run(2, telemetry=telemetry(0.92))]
    f = checks.client_saturated(runs)
    assert f is not None and f.runs == (runs[0].run_id, runs[2].run_id)
    assert f.as_dict() == {"check": "client_saturated", "status": "warn", "runs": 2,
                           "detail": f.detail}
    assert "95%" in f.detail and "2 of 3 runs" in f.detail
    assert checks.client_saturated([run(0, telemetry=telemetry(0.85))]) is None


def test_an_open_loop_client_that_kept_its_schedule_polls_and_is_not_saturated() -> None:
    open_kept = {"mode": "open", "target_rate_ops_s": 5000.0, "achieved_rate_ops_s": 5000.0,
                 "send_lag_p99_ms": 0.04}
    r = run(0, telemetry=telemetry(0.99), loadgen=open_kept, counts={"unsent": 0})
    assert checks.client_saturated([r]) is None
    late = run(0, telemetry=telemetry(0.99), loadgen={**open_kept, "send_lag_p99_ms": 30.0})
    assert checks.client_saturated([late]) is not None


def test_runs_without_telemetry_or_over_a_short_window_are_skipped_never_failed() -> None:
    bare = [run(i) for i in range(3)]
    for name in ("client_saturated", "machine_busy"):
        assert checks.CHECKS[name].func(bare) is None
    short = [run(0, telemetry=telemetry(1.0, other=1.5, window=0.1))]
    assert checks.client_saturated(short) is None and checks.machine_busy(short) is None
    mixed = [run(0, telemetry=telemetry(1.0)), run(1)]
    f = checks.client_saturated(mixed)
    assert f is not None and f.judged == 1 and "1 of 1 runs judged (of 2)" in f.detail


def test_machine_busy_fires_on_other_processes_or_steal() -> None:
    f = checks.machine_busy([run(0, telemetry=telemetry(other=0.6)),
                             run(1, telemetry=telemetry(other=0.1))])
    assert f is not None and len(f.runs) == 1 and "0.60 CPUs of client (2 CPUs)" in f.detail
    f = checks.machine_busy([run(0, telemetry=telemetry(steal=0.2))])
    assert f is not None and "stole up to 20%" in f.detail
    assert checks.machine_busy([run(0, telemetry=telemetry(other=0.2))]) is None


def replication(start: list[dict], end: list[dict], *, offsets: tuple[int, int] = (0, 10_000_000),
                window: float = 2.0) -> dict:
    """A run's telemetry with the replication readings of a primary `kv` (its offsets at
    the two edges) and its replicas' entries at each."""
    def reading(offset: int, replicas: list[dict]) -> dict:
        return {"primary": "10.0.0.1:6379", "offset": offset, "connected_replicas": 2,
                "replicas": [{"address": f"10.0.0.{i + 2}:6379", "role": "slave", **r}
                             for i, r in enumerate(replicas)]}

    return {"window_s": window, "replication": {"kv": {"start": reading(offsets[0], start),
                                                       "end": reading(offsets[1], end)}}}


UP = {"link": "up", "behind_bytes": 0, "lag_s": 0}


def test_replica_lag_names_a_replica_behind_at_the_end_down_or_late_to_acknowledge() -> None:
    # 10 MB replicated over 2 s: 5 MB/s, so 1 s of writes is 5 MB.
    behind = run(0, telemetry=replication([UP, UP], [UP, {**UP, "behind_bytes": 6_000_000}]))
    f = checks.replica_lag([behind, run(1, telemetry=replication([UP, UP], [UP, UP]))])
    assert f is not None and f.runs == (behind.run_id,) and f.judged == 2
    assert f.detail.startswith("kv replica 10.0.0.3:6379 in 1 of 2 runs: it was 6,000,000 "
                               "bytes behind the primary at the run's end (1.2 s of the "
                               "run's writes)"), f.detail
    assert f.as_dict()["replicas"] == ["kv replica 10.0.0.3:6379"]
    # Under the bar: half a second of writes, or under 16 KiB whatever the rate.
    assert checks.replica_lag([run(0, telemetry=replication(
        [UP, UP], [UP, {**UP, "behind_bytes": 2_500_000}]))]) is None
    assert checks.replica_lag([run(0, telemetry=replication(
        [UP, UP], [UP, {**UP, "behind_bytes": 16_000}], offsets=(0, 14)))]) is None
    # Its link down at the end, the worst named first and the other after it.
    down = replication([UP, UP], [{"link": "not answering", "error": "refused"},
                                  {**UP, "lag_s": 3}])
    f = checks.replica_lag([run(0, telemetry=down)])
    assert f is not None and f.detail.startswith(
        "kv replica 10.0.0.2:6379 in the run: its link was not answering at the run's "
        "end; also kv replica 10.0.0.3:6379")
    assert "(bar: its link up, at most 1 s of the run's writes" in f.detail
    # Its lag (seconds since its last acknowledgement) grown by 2 s; 0 -> 1 s is jitter.
    f = checks.replica_lag([run(0, telemetry=replication([UP, UP], [UP, {**UP, "lag_s": 2}]))])
    assert f is not None and "its lag grew from 0 s to 2 s" in f.detail
    assert checks.replica_lag([run(0, telemetry=replication(
        [UP, UP], [{**UP, "lag_s": 1}, {**UP, "lag_s": 1}]))]) is None
    # An address that answered from two servers (a proxy spreading connections).
    f = checks.replica_lag([run(0, telemetry=replication(
        [{**UP, "run_id": "a" * 40}], [{**UP, "run_id": "b" * 40}]))])
    assert f is not None and "it answered from two servers at the run's two edges" in f.detail
    assert f.detail.endswith("list the replicas' own addresses to judge each (a proxy's "
                             "spreads the kit's readings over them)")
    assert checks.replica_lag([run(0, telemetry=replication(
        [{**UP, "run_id": "a" * 40}], [{**UP, "run_id": "a" * 40}]))]) is None


def test_replica_lag_skips_runs_without_replicas_or_without_both_edges() -> None:
    assert checks.replica_lag([run(0, telemetry=telemetry()), run(1)]) is None
    one_edge = replication([UP], [UP])
    del one_edge["replication"]["kv"]["end"]
    late = run(1, telemetry=replication([UP], [{**UP, "behind_bytes": 9_000_000}]))
    f = checks.replica_lag([run(0, telemetry=one_edge), late])
    assert f is not None and f.judged == 1 and "1 of 1 runs judged (of 2)" in f.detail


def test_replica_lag_judges_each_master_of_a_cluster_against_its_own_replicas() -> None:
    """A Redis Cluster's replication is a shard per master (`redis_cluster_replicas`):
    a replica is behind its own master's offset, at its own master's stream's rate."""
    def shard(i: int, offsets: tuple[int, int], end: dict) -> tuple[dict, dict]:
        one = replication([UP], [end], offsets=offsets)["replication"]["kv"]
        for edge in one.values():
            edge["primary"] = f"10.0.1.{i}:6379"
            edge["replicas"][0]["address"] = f"10.0.2.{i}:6379"
        return one["start"], one["end"]

    # Master 1 streamed 10 MB in 2 s, master 2 only 100 kB: 60 kB is 1.2 s of its stream.
    a, b = shard(1, (0, 10_000_000), UP), shard(2, (0, 100_000), {**UP, "behind_bytes": 60_000})
    cluster = {"window_s": 2.0, "replication": {"kv": {
        "start": {"shards": [a[0], b[0]]}, "end": {"shards": [a[1], b[1]]}}}}
    f = checks.replica_lag([run(0, telemetry=cluster)])
    assert f is not None and f.as_dict()["replicas"] == ["kv replica 10.0.2.2:6379"]
    assert "60,000 bytes behind" in f.detail
    cluster["replication"]["kv"]["end"]["shards"][1]["replicas"][0]["behind_bytes"] = 0
    assert checks.replica_lag([run(0, telemetry=cluster)]) is None


def test_errors_fail_a_run_past_the_bar_and_name_the_commonest_kinds_first_message(
        ) -> None:
    def workers(*tallies: list[dict]) -> dict:
        return {"mode": "closed", "workers": [{"client": i, "errors": t}
                                              for i, t in enumerate(tallies)]}

    dup = {"kind": "DuplicatePreparedStatementError: prepared statement # already exists",
           "first": 'DuplicatePreparedStatementError: prepared statement "__asyncpg_stmt_d__"'
                    " already exists"}
    lg = workers([{**dup, "count": 90}], [{**dup, "count": 44},
                                          {"kind": "x", "first": "TimeoutError", "count": 3}])
    bad = run(0, loadgen=lg, counts={"measured": 400, "ok": 266, "error": 131, "timeout": 3})
    f = checks.errors([bad, run(1, counts={"measured": 400, "ok": 400})])
    assert f is not None and f.runs == (bad.run_id,) and f.judged == 2
    assert "up to 33.5% of the measured ops failed" in f.detail and "1 of 2 runs" in f.detail
    assert '"__asyncpg_stmt_d__" already exists (134 times); 1 other kind(s)' in f.detail
    assert f.figures == {"error_share": 134 / 400}
    # At the bar (0.1%) nothing; misses are answers, not failures; no ops, not judged.
    assert checks.errors([run(0, counts={"measured": 1000, "ok": 999, "error": 1})]) is None
    assert checks.errors([run(0, counts={"measured": 10, "ok": 1, "miss": 9})]) is None
    assert checks.errors([run(0, counts={"measured": 0})]) is None
    # A run written before the tallies: its workers' last errors, how often unknown.
    old = run(0, loadgen={"mode": "closed", "workers": [{"last_error": "OSError: gone"}]},
              counts={"measured": 100, "ok": 98, "error": 2})
    f = checks.errors([old])
    assert f is not None and "first of the commonest kind: OSError: gone:" in f.detail


def test_target_not_met_counts_unsent_ops_and_names_the_lag() -> None:
    lg = {"mode": "open", "arrival": "fixed", "target_rate_ops_s": 300_000.0,
          "achieved_rate_ops_s": 78_000.0, "send_lag_p99_ms": 412.0}
    f = checks.target_not_met([run(0, loadgen=lg, counts={"measured": 234_000,
                                                          "unsent": 887_000})])
    assert f is not None
    assert "achieved 26% of the 300,000 ops/s target" in f.detail
    assert "887,000 ops intended" in f.detail and "send lag p99 up to 412 ms" in f.detail
    met = {**lg, "achieved_rate_ops_s": 299_000.0, "send_lag_p99_ms": 0.1}
    assert checks.target_not_met([run(0, loadgen=met, counts={"unsent": 0})]) is None
    assert checks.target_not_met([run(0, counts={"unsent": 5})]) is None  # closed loop
    unsent_only = {**met}
    assert checks.target_not_met([run(0, loadgen=unsent_only, counts={"unsent": 3})])


def test_a_poisson_shortfall_within_chance_is_not_the_clients() -> None:
    """100 intended ops at 1000/s, 93 arrived by chance: 93% of the target, not met by
    the 95% bar alone, but a Poisson schedule gives as few 1 time in 4."""
    lg = {"mode": "open", "arrival": "poisson", "target_rate_ops_s": 1000.0,
          "achieved_rate_ops_s": 930.0, "send_lag_p99_ms": 0.1}
    assert checks.target_not_met([run(0, loadgen=lg, counts={"measured": 93})]) is None
    far = {**lg, "achieved_rate_ops_s": 600.0}
    assert checks.target_not_met([run(0, loadgen=far, counts={"measured": 60})])


def test_not_steady_finds_a_warm_up_and_suggests_how_long() -> None:
    rng = np.random.default_rng(3)
    warm = []
    for i in range(3):
        x = rng.normal(0, 0.4, 3000)
        x[:300] += np.log(3) * (1 - np.arange(300) / 300)  # x3 decaying over 300 ops
        warm.append(run(i, ops_facts(x), loadgen={"mode": "closed", "ops": 3000}))
    f = checks.not_steady(warm)
    assert f is not None and len(f.runs) == 3
    w = warm[0].ops.warmup
    assert 100 <= w.ops <= 400 and w.ratio > 1.5
    assert "raise run.warmup_ops by about" in f.detail
    steady = [run(i, ops_facts(rng.normal(0, 0.4, 3000))) for i in range(20)]
    assert checks.not_steady(steady) is None
    timed = [run(0, ops_facts(np.concatenate([rng.normal(1, 0.4, 200),
                                              rng.normal(0, 0.4, 2800)])),
                 loadgen={"mode": "closed", "duration_s": 3})]
    f = checks.not_steady(timed)
    assert f is not None and "raise run.warmup_s by about 0.02 s" in f.detail
    # An import's records need not be in the order they ran: not judged.
    assert checks.not_steady([run(0, timed[0].ops, source="imported")]) is None


def test_a_start_faster_than_the_rest_is_no_warm_up_to_wait_out() -> None:
    """Issue 51: a demo run whose first ops were faster (0.63x) was told to "raise
    run.warmup_s", as if it were warming up. A fast start is the server slowing as the
    run goes on (a cache or pool filling, the data growing): said so, with what to do."""
    rng = np.random.default_rng(6)
    fast = [run(0, ops_facts(np.concatenate([rng.normal(np.log(0.6), 0.4, 300),
                                             rng.normal(0, 0.4, 2700)])),
                loadgen={"mode": "closed", "duration_s": 3})]
    f = checks.not_steady(fast)
    assert f is not None and fast[0].ops.warmup.ratio < 0.8
    assert "x the latency of the rest" in f.detail
    assert "the start was faster, so this is no warm-up to wait out" in f.detail
    assert "the server slowed as the run went on" in f.detail
    assert "fill the server before measuring" in f.detail
    assert not f.detail.endswith("to leave them out")
    # A slow start is still a warm-up, told to wait it out.
    slow = [run(0, ops_facts(np.concatenate([rng.normal(np.log(1.6), 0.4, 300),
                                             rng.normal(0, 0.4, 2700)])),
                loadgen={"mode": "closed", "duration_s": 3})]
    f = checks.not_steady(slow)
    assert f is not None and "to leave them out" in f.detail
    assert "faster" not in f.detail


def test_a_burst_of_load_after_a_normal_start_is_no_warm_up() -> None:
    """As real runs on a shared machine showed: latency doubles for a tenth of the run
    from a third of the way in. MSER cuts after it, but the run's start was like its
    end: not_steady stays quiet (machine_busy is the check for that)."""
    rng = np.random.default_rng(4)
    x = rng.normal(0, 0.3, 5000)
    x[1500:2000] += np.log(2)
    w = ops_facts(x).warmup
    assert w is not None and w.ops >= 2000 and abs(w.z) >= checks.STEADY_Z
    assert w.front < checks.STEADY_FRONT and not checks.unsteady(w)


def test_runs_too_short_to_judge_are_skipped() -> None:
    x = np.zeros(stationarity.MIN_OPS - 1)
    x[:50] = 3
    assert ops_facts(x).warmup is None
    assert checks.not_steady([run(0, ops_facts(x))]) is None


def test_a_groups_floor_of_failing_runs_rises_with_its_size() -> None:
    assert [checks._steady_floor(k) for k in (1, 5, 6, 20, 35, 36)] == [1, 1, 2, 2, 2, 3]


def test_trend_and_cold_first_run() -> None:
    rng = np.random.default_rng(8)
    drift = [run(i, RunOps(1000, 0.1 * 1.03 ** i * rng.lognormal(0, 0.01), 1.0, None))
             for i in range(8)]
    f = checks.trend(drift)
    assert f is not None and len(f.runs) == 8 and "rises" in f.detail and "+3" in f.detail
    assert checks.trend(drift[:4]) is None  # too few runs to tell
    cold = [run(i, RunOps(1000, (0.15 if i == 0 else 0.1) * rng.lognormal(0, 0.02), 1.0,
                          None)) for i in range(5)]
    f = checks.cold_first_run(cold)
    assert f is not None and f.runs == (cold[0].run_id,) and "1.5" in f.detail
    flat = [run(i, RunOps(1000, 0.1 * rng.lognormal(0, 0.02), 1.0, None)) for i in range(5)]
    assert checks.cold_first_run(flat) is None
    imported = [run(i, r.ops, source="imported") for i, r in enumerate(drift)]
    assert checks.trend(imported) is None and checks.cold_first_run(imported) is None


def test_false_alarms_on_steady_groups_stay_below_the_bar() -> None:
    """A tiny version of benchmarks/checks_calibration.py (its figures are in
    benchmarks/README.md): 300 groups of 5 steady runs."""
    rng = np.random.default_rng(12)
    fired = {name: 0 for name in ("trend", "cold_first_run")}
    for _ in range(300):
        group = [run(i, RunOps(1000, 0.1 * rng.lognormal(0, 0.05), 1.0, None))
                 for i in range(5)]
        for name in fired:
            fired[name] += checks.CHECKS[name].func(group) is not None
    assert fired["trend"] <= 0.05 * 300 and fired["cold_first_run"] <= 0.05 * 300 + 5
    steady = [run(i, ops_facts(rng.normal(0, 0.5, 1000))) for i in range(200)]
    assert sum(checks.not_steady([r]) is not None for r in steady) <= 2


# -- over raw results, as `harness summary` groups them ---------------------------------

def write(raw: Path, name: str, i: int, grid: dict, lat_ns: np.ndarray, **kw: Any) -> None:
    n = lat_ns.size
    m = manifest(i, grid=grid, experiment=name, **kw)
    ops = OpsArrays(op_names=("get", "set"), client=np.zeros(n, np.int32),
                    op=(np.arange(n) % 2).astype(np.int8),
                    start_ns=np.concatenate([[0], np.cumsum(lat_ns[:-1])]).astype(np.int64),
                    latency_ns=lat_ns.astype(np.int64), intended_ns=np.full(n, -1, np.int64),
                    status=np.full(n, OK, np.int8), nbytes=np.full(n, 100, np.int64),
                    warmup=np.zeros(n, bool))
    write_run(raw, m, ops)


@pytest.fixture
def checked_raw(tmp_path: Path) -> Path:
    """Experiment `chk`, grid size {1, 2}, 5 runs each: size=1's clients saturated in 3
    runs and its runs warming up; size=2 steady and quiet."""
    rng = np.random.default_rng(5)
    for size in (1, 2):
        for i in range(5):
            lat = rng.lognormal(np.log(1e5), 0.3, 2000)
            if size == 1:
                lat[:200] *= 4
            tel = telemetry(0.97 if size == 1 and i < 3 else 0.4)
            write(tmp_path, "chk", 2 * i + size, {"size": size}, lat, telemetry=tel)
    return tmp_path


def test_group_checks_over_a_tree_by_configuration_and_by_op(checked_raw: Path) -> None:
    loaded = load_runs_only(checked_raw)
    found = checks.group_checks(loaded)
    assert {k: [f.check for f in v] for k, v in found.items()} == {
        ("chk", 1): ["client_saturated", "not_steady"], ("chk", 2): []}
    by_op = checks.group_checks(loaded, ["size", "op"])
    assert sorted(by_op) == [(1, "get"), (1, "set"), (2, "get"), (2, "set")]
    assert [f.check for f in by_op[(1, "get")]] == ["client_saturated", "not_steady"]
    [runs] = [v for k, v in group_runs(loaded, ["size", "op"]).items() if k == (2, "set")]
    assert len(runs) == 5 and all(r.ops is not None and r.ops.n == 1000 for r in runs)
    table = checkwords.findings_table(found, ["experiment", "size"])
    assert list(table.columns) == ["experiment", "size", "check", "runs", "judged", "detail"]
    assert table[["check", "runs", "judged"]].values.tolist() == [
        ["client_saturated", 3, 5], ["not_steady", 5, 5]]


def test_summary_rows_gain_their_groups_checks(checked_raw: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    import json

    from harness.cli import main

    assert main(["summary", str(checked_raw), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [[c["check"] for c in r["checks"]] for r in rows] == [
        ["client_saturated", "not_steady"], []]
    assert rows[0]["checks"][0]["runs"] == 3 and "97%" in rows[0]["checks"][0]["detail"]
    assert main(["summary", str(checked_raw)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[:2] for line in out if line.startswith("warning:")] == [
        ["warning", "client_saturated (experiment=chk, size=1; 3 runs)"],
        ["warning", "not_steady (experiment=chk, size=1; 5 runs)"]]


def test_a_compare_verdict_resting_on_a_failed_check_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """CAND is 1.5x slower; its runs were fine but 3 of BASE's 5 had a saturated client:
    "worse, but the client was saturated in 3 of 5 base runs"."""
    import json

    from harness.analysis.compare import comparison
    from harness.cli import main

    rng = np.random.default_rng(9)
    for side, slow in (("base", 1.0), ("cand", 1.5)):
        for i in range(5):
            lat = rng.lognormal(np.log(1e5 * slow), 0.3, 2000)
            tel = telemetry(0.95 if side == "base" and i < 3 else 0.3)
            write(tmp_path / side, "cmp", i, {}, lat, telemetry=tel)
    result = comparison(tmp_path / "base", tmp_path / "cand", metrics=["latency_mean"])
    assert result.table["verdict"].tolist() == ["worse", "worse"]  # worse_beyond reads it
    assert result.table["caveat"].tolist() == ["the client was saturated in 3 of 5 base "
                                               "runs"] * 2
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "cand"),
                 "--metric", "latency_mean"]) == 0
    out = capsys.readouterr().out
    assert "worse, but the client was saturated in 3 of 5 base runs" in out
    assert "warning: client_saturated (BASE op=get; 3 runs): a client process used up to " \
        "95%" in out
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "cand"),
                 "--format", "json"]) == 0
    got = capsys.readouterr()
    rows = json.loads(got.out)
    assert {r["caveat"] for r in rows} == {"the client was saturated in 3 of 5 base runs"}
    assert "warning: client_saturated (BASE op=set; 3 runs)" in got.err


def test_the_reports_checks_table_per_experiment(checked_raw: Path, tmp_path: Path) -> None:
    """The overview's "Measurement checks": what each check asks, one table of counts
    (experiment x check) and each check's worst case, a sentence for an experiment
    without failures and for one without telemetry; the counts handed to the summary of
    findings; the rows per configuration marked for the appendix. The generic study's
    section shows its table and its verdicts name the checks."""
    from harness.analysis.sections import answers, overview
    from harness.studies import generic

    rng = np.random.default_rng(1)
    for i in range(3):
        write(checked_raw, "quiet", i, {}, rng.lognormal(np.log(1e5), 0.3, 600))
    main_part, counts, appendix = overview.analyse(checked_raw).checks_parts()
    got = main_part.data
    assert all(f"<code>{name}</code>" in got for name in NAMES)
    # One row for chk (quiet failed none): 1 of its 2 configurations, per failed check.
    assert got.count("1 of 2") == 2 and "<td>quiet</td>" not in got
    assert "size=1" in got and "3 of 5" in got and "5 of 5" in got and "size=2" not in got
    assert "No check failed in <code>quiet</code>." in got
    assert "The runs of <code>quiet</code> carry no telemetry" in got
    assert counts._repr_mimebundle_()[1] == {answers.CHECKS_MARKER: {
        "chk": {"client_saturated": 1, "not_steady": 1}, "quiet": {}}}
    assert appendix.metadata == {"harness_appendix": True}
    assert "chk: measurement checks that failed, per configuration" in appendix.data
    assert "size=1" in appendix.data and "size=2" not in appendix.data
    study = generic.analyse(checked_raw, ["chk"], figures_dir=tmp_path)
    [section] = study.sections
    assert "client_saturated" in section.checks_table().data
    rows = section.effects().table
    assert set(rows["caveat"]) == {"the client was saturated in 3 of 5 size=1 runs; the "
                                   "start was not steady in 5 of 5 size=1 runs"}
    assert "; but the client was saturated in 3 of 5 size=1 runs" in \
        section.effect_findings().data


def test_heavy_tail_from_each_runs_largest_equals_hill_on_every_pooled_latency(
        tmp_path: Path) -> None:
    """The registered heavy_tail keeps only each run's largest latencies, as many as the
    group's estimate could need (`RunOps.top_ns`): its tail index is `tails.check`'s on
    all of the group's latencies, by configuration and by op."""
    from harness.analysis.checks import tails
    from harness.analysis.data.load import load

    rng = np.random.default_rng(13)
    for i in range(4):  # runs of unequal length, so one run's share of the top varies
        n = 1500 + 700 * i
        write(tmp_path, "tail", i, {}, np.maximum((1 - rng.random(n)) ** (-1 / 1.4) * 1e5,
                                                  1))
    loaded = load_runs_only(tmp_path)
    everything = load(tmp_path, columns=["op", "latency_ns"]).ops
    for by in (None, ["op"]):
        for key, found in checks.group_checks(loaded, by).items():
            [f] = [x for x in found if x.check == "heavy_tail"]
            mine = everything if by is None else everything[everything["op"] == key[0]]
            want = tails.check(mine["latency_ns"].to_numpy())
            assert want.fires and f.figures["ops"] == want.n
            assert f.figures["tail_index"] == pytest.approx(want.alpha_hat, rel=1e-12)
            assert f.figures["k"] == want.k and f.detail == want.detail


def test_a_heavy_tail_qualifies_the_means_verdicts_not_the_percentiles(
        tmp_path: Path) -> None:
    """Pareto latencies (tail index 1.2: heavy_tail fires) on both sides: `compare` and an
    own experiment's effects say "too heavy for a mean" beside the mean and throughput,
    never beside p50 or p99, whose reading is what the check recommends. A check that is
    not about the mean (a saturated client) still qualifies every metric."""
    from harness.analysis.compare import comparison
    from harness.studies import generic

    rng = np.random.default_rng(21)
    for side, scale in (("base", 1.0), ("cand", 1.3)):
        for i in range(3):
            lat = np.maximum((1 - rng.random(3000)) ** (-1 / 1.2) * 1e5 * scale, 1)
            tel = telemetry(0.95 if side == "cand" and i == 0 else 0.3)
            write(tmp_path / side, "tail", i, {}, lat, telemetry=tel)
            write(tmp_path / "own", "tail", 10 * i + (side == "cand"),
                  {"size": 1 if side == "base" else 2}, lat, telemetry=tel)
    heavy = "latencies' tail was too heavy for a mean"
    table = comparison(tmp_path / "base", tmp_path / "cand", by=[]).table
    by_metric = dict(zip(table["metric"], table["caveat"], strict=True))
    assert set(by_metric) == {"throughput", "latency_mean", "latency_p50", "latency_p99"}
    for metric, said in by_metric.items():
        assert (heavy in said) == (metric in ("throughput", "latency_mean")), (metric, said)
        assert "the client was saturated in 1 of 3 cand runs" in said
    [section] = generic.analyse(tmp_path / "own", ["tail"], figures_dir=tmp_path).sections
    rows = section.effects().table
    by_metric = dict(zip(rows["metric"], rows["caveat"], strict=True))
    assert set(by_metric) == {"throughput", "latency_mean", "latency_p99"}
    for metric, said in by_metric.items():
        assert (heavy in said) == (metric != "latency_p99"), (metric, said)
        assert "the client was saturated in 1 of 3 size=2 runs" in said


def test_the_summarys_one_read_gives_the_checks_the_same_facts_and_findings(
        tmp_path: Path) -> None:
    """`harness summary` takes the checks' per-run facts from the read its figures make
    (`queries.one_pass(warmups=True)` -> `runfacts.from_read`), not from a second read of
    every ops file: the same facts run by run (count, mean, wall time, MSER-5) and the
    same findings, by configuration and by op, on a tree where the checks fire (a warm-up,
    saturated clients, a heavy tail, a drift, a cold first run) and one run has no
    measured op at all."""
    from harness.analysis.checks import runfacts
    from harness.analysis.data import queries

    rng = np.random.default_rng(41)
    for size in (1, 2, 3):
        for i in range(6):
            n = 1500 + 300 * i
            if size == 1:  # a warm-up in every run, saturated clients in half of them
                lat = rng.lognormal(np.log(1e5), 0.3, n)
                lat[:250] *= 4
            elif size == 2:  # a heavy tail, and the first run cold
                lat = np.maximum((1 - rng.random(n)) ** (-1 / 1.3) * 1e5, 1)
                lat *= 3 if i == 0 else 1
            else:  # drifting slower run after run
                lat = rng.lognormal(np.log(1e5 * (1 + 0.15 * i)), 0.2, n)
            write(tmp_path, "one", 3 * i + size, {"size": size}, lat,
                  telemetry=telemetry(0.97 if size == 1 and i % 2 else 0.4))
    m = manifest(99, grid={"size": 3}, experiment="one")
    ops = OpsArrays(op_names=("get", "set"), client=np.zeros(10, np.int32),
                    op=np.zeros(10, np.int8), start_ns=np.arange(10, dtype=np.int64),
                    latency_ns=np.full(10, 1000, np.int64),
                    intended_ns=np.full(10, -1, np.int64), status=np.full(10, OK, np.int8),
                    nbytes=np.zeros(10, np.int64), warmup=np.ones(10, bool))
    write_run(tmp_path, m, ops)  # every op a warm-up op: no measured ops
    loaded = load_runs_only(tmp_path)
    for by in (None, ["size", "op"]):
        _, _, read = queries.one_pass(loaded, by, warmups=True)
        once = runfacts.from_read(loaded, read)
        twice = group_runs(loaded, by)
        assert sorted(once, key=str) == sorted(twice, key=str)
        for key, runs in twice.items():
            assert [r.run_id for r in once[key]] == [r.run_id for r in runs]
            for a, b in zip(once[key], runs, strict=True):
                if b.ops is None:
                    assert a.ops is None
                    continue
                assert a.ops is not None
                # One function of the same latencies in the same order on both sides
                # (numpy's mean, MSER-5): equal to the last bit.
                assert (a.ops.n, a.ops.mean_ms, a.ops.wall_s, a.ops.warmup) == (
                    b.ops.n, b.ops.mean_ms, b.ops.wall_s, b.ops.warmup)
        found = checks.group_checks(loaded, by, facts=once)
        # The findings' figures to 1e-12, their words exactly: the two reads hand
        # heavy_tail each run's top latencies in another order (sorted, or a partition's),
        # and a sum in another order may differ in its last bits on another CPU (the
        # issue's 1.3204038806742637 and 1.320403880674264); the words print rounded.
        assert sorted(found, key=str) == sorted(twice, key=str)
        own = checks.group_checks(loaded, by)
        assert_same_values({k: [f.as_dict() for f in v] for k, v in found.items()},
                           {k: [f.as_dict() for f in own[k]] for k in found})
        fired = {f.check for v in found.values() for f in v}
        assert {"client_saturated", "not_steady", "heavy_tail", "trend"} <= fired, fired


def test_a_warning_names_only_the_keys_its_configuration_has() -> None:
    """Experiments with and without an `op` grid key in one tree: the rows of the one
    without had "op=nan" in their warnings."""
    f = checks.Finding("errors", ("r1",), 1, "up to 10% of the measured ops failed")
    by = ["experiment", "op"]
    lines = checkwords.warning_lines({("mine", float("nan")): [f], ("theirs", "get"): [f],
                                      ("other", None): [f], ("sentinel", "\0nan"): [f]}, by)
    assert lines[0].startswith("warning: errors (experiment=mine; 1 run): ")
    assert lines[1].startswith("warning: errors (experiment=theirs, op=get; 1 run): ")
    assert "op=" not in lines[2] and "op=" not in lines[3]
