"""`harness compare` end to end: two raw-results trees written by `harness run` against a
real memcached. Both are throttled to known rates (open loop at 4000 and 400 ops/s), so
the candidate's throughput is known to be a tenth of the base's: unthrottled, the base's
three runs swung so much on a busy machine that n = 3 could not call a 60x drop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

SPEC = """\
name: cmp
workload: memcache_mix
hosts:
  server: localhost
  client: localhost
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 1, connections: 1}}
params: {{key_space: 500, get_ratio: 0.9}}
repetitions: 3
run: {run}
"""


def _run(tmp_path: Path, name: str, run: str) -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(SPEC.format(run=run))
    raw = tmp_path / name
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress"]) == 0
    return raw


def test_compare_two_real_trees(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    require_service("memcached", LocalHost())
    base = _run(tmp_path, "base", "{ops: 2400, warmup_ops: 100, rate_ops_s: 4000}")
    cand = _run(tmp_path, "cand", "{ops: 400, warmup_ops: 20, rate_ops_s: 400}")
    capsys.readouterr()
    # The offered rate differs, and is the point: compare says so only when told.
    assert cli_main(["compare", str(base), str(cand)]) == 2
    assert "target_rate_ops_s: 4000 against 400" in capsys.readouterr().err
    code = cli_main(["compare", str(base), str(cand), "--format", "json",
                     "--metric", "throughput", "latency_mean", "--fail-if-worse", "5",
                     "--allow-different", "target_rate_ops_s"])
    rows = {(r["op"], r["metric"]): r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {(op, m) for op in ("get", "set")
                         for m in ("throughput", "latency_mean")}
    get = rows[("get", "throughput")]
    assert get["n_base"] == get["n_cand"] == 3
    # 90% of 400 ops/s are gets: ~360/s, against ~3600/s. A client on a loaded machine
    # can fall behind a 4000 ops/s schedule for part of a short run (seen in the
    # 4-worker suite: 3,056/s), so the base is held to 25%; the ratio is the point.
    assert get["cand"] == pytest.approx(360, rel=0.15)
    assert get["base"] == pytest.approx(3600, rel=0.25)
    assert 0.05 < get["ratio"] < 0.2 and get["verdict"] == "worse" and get["p"] < 0.05
    assert get["ratio_ci_low"] < get["ratio"] < get["ratio_ci_high"]
    assert code == 1  # --fail-if-worse: throughput is worse by far more than 5%
    # The same tree against itself: ratio 1, nothing better or worse.
    assert cli_main(["compare", str(base), str(base), "--format", "json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert all(r["ratio"] == pytest.approx(1) for r in same)
    assert not any(r["verdict"] in ("better", "worse") for r in same)
