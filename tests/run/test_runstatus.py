"""A finished run's status, counts and console line from its records and its workers'
statuses (`harness.run.runstatus`, `Runner._line`): an overloaded open-loop run is a
result, and a run with no measured op says why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.results import OK, REDIRECT, Manifest, OpsArrays, new_manifest
from harness.run.context import RunOutcome
from harness.run.runner import Runner
from harness.run.runstatus import finish_manifest
from harness.spec import RunPlan, expand, load_spec

SPEC = """\
name: t
workload: memcache_mix
hosts: {{server: localhost, client: localhost}}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 2, connections: 1}}
run: {{duration_s: 2, warmup_s: 0.5{rate}}}
"""


def _plan(tmp_path: Path, rate: float | None) -> RunPlan:
    path = tmp_path / "t.yaml"
    path.write_text(SPEC.format(rate=f", rate_ops_s: {rate}" if rate else ""))
    [plan] = expand(load_spec(path))
    return plan


def _ops(n: int, warm: int, lag_ns: int = 0) -> OpsArrays:
    """`warm` warm-up records then `n - warm` measured ones, 1 ms apart, each sent
    `lag_ns` after its intended start and answered 100 us later."""
    intended = np.arange(n, dtype=np.int64) * 1_000_000
    return OpsArrays(("get", "set"), np.zeros(n, np.int32), np.zeros(n, np.int8),
                     intended + lag_ns, np.full(n, lag_ns + 100_000, np.int64), intended,
                     np.full(n, OK, np.int8), np.zeros(n, np.int64), np.arange(n) < warm)


def _finish(plan: RunPlan, ops: OpsArrays, workers: list[dict]) -> Manifest:
    draft = new_manifest(run_id="r1", experiment="t", workload="memcache_mix", repetition=1,
                         grid_point={}, status="partial")
    return finish_manifest(draft, plan, ops, workers=workers, errors=[], interrupted=False,
                           ended_utc="2026-01-01T00:00:00Z")


def _worker(unsent: int = 0, unsent_warmup: int = 0) -> dict:
    return {"client": 0, "state": "complete", "error": None, "unsent": unsent,
            "unsent_warmup": unsent_warmup}


def test_an_overloaded_run_with_measured_ops_is_complete(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 2_000_000)
    ops = _ops(300, 100, lag_ns=40_000_000)
    man = _finish(plan, ops, [_worker(900, 50), _worker(100, 7)])
    assert man.status == "complete" and man.error is None
    counts = man.typed_counts
    assert (counts.measured, counts.unsent, counts.unsent_warmup) == (200, 1000, 57)
    assert man.counts["ok"] == 200 and man.counts["unsent"] == 1000
    assert man.loadgen["target_met"] is False
    assert man.loadgen["send_lag_p99_ms"] == pytest.approx(40.0)
    assert man.loadgen["achieved_rate_ops_s"] == pytest.approx(200 / 0.2391, rel=1e-3)


def test_send_lag_is_over_measured_sent_ops_only(tmp_path: Path) -> None:
    ops = _ops(200, 100, lag_ns=1_000_000)
    late = ops.start_ns + np.where(ops.warmup, 5_000_000_000, 0)  # a late warm-up
    redirects = np.where(np.arange(200) % 2 == 1, REDIRECT, OK).astype(np.int8)
    ops = OpsArrays(ops.op_names, ops.client, ops.op, late, ops.latency_ns, ops.intended_ns,
                    redirects, ops.nbytes, ops.warmup)
    man = _finish(_plan(tmp_path, 1000), ops, [_worker()])
    assert man.loadgen["send_lag_p99_ms"] == pytest.approx(1.0)
    assert man.typed_counts.unsent == 0 and "unsent" in man.counts  # counted: none


def test_closed_loop_has_no_unsent_counts_nor_send_lag(tmp_path: Path) -> None:
    ops = _ops(50, 10)
    ops = OpsArrays(ops.op_names, ops.client, ops.op, ops.start_ns, ops.latency_ns,
                    np.full(50, -1, np.int64), ops.status, ops.nbytes, ops.warmup)
    man = _finish(_plan(tmp_path, None), ops, [_worker()])
    assert man.status == "complete"
    assert "unsent" not in man.counts and man.loadgen["send_lag_p99_ms"] is None


@pytest.mark.parametrize(("ops", "workers", "why"), [
    (_ops(40, 40), [_worker(5000, 900)],
     "no measured ops: none of the 5,000 ops intended in the measured window was sent"),
    (_ops(40, 40), [_worker()], "no measured ops: all 40 records are warm-up"),
    (_ops(0, 0), [_worker()], "no measured ops: no client process recorded an op"),
])
def test_a_run_without_measured_ops_says_why(tmp_path: Path, ops: OpsArrays,
                                             workers: list[dict], why: str) -> None:
    man = _finish(_plan(tmp_path, 2_000_000), ops, workers)
    assert man.status == "failed"
    assert man.error is not None and man.error.splitlines()[0].startswith(why), man.error


def test_an_error_that_says_why_is_not_repeated(tmp_path: Path) -> None:
    draft = new_manifest(run_id="r1", experiment="t", workload="memcache_mix", repetition=1,
                         grid_point={}, status="partial")
    man = finish_manifest(draft, _plan(tmp_path, 2_000_000), _ops(0, 0), workers=[],
                          errors=["ServiceError: no clients started"], interrupted=False,
                          ended_utc="2026-01-01T00:00:00Z")
    assert man.status == "failed" and man.error == "ServiceError: no clients started"


def _outcome(plan: RunPlan, man: Manifest) -> RunOutcome:
    return RunOutcome(plan, Path("."), man.status, man.typed_counts.measured,
                      man.loadgen["achieved_rate_ops_s"] or 0.0, 0.25, 9.5, 0.0, man.error,
                      unsent=man.typed_counts.unsent,
                      send_lag_p99_ms=man.loadgen["send_lag_p99_ms"])


def test_the_console_line_of_an_overloaded_run(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 2_000_000)
    man = _finish(plan, _ops(300, 100, lag_ns=1_234_500_000), [_worker(887_000)])
    line = Runner._line(_outcome(plan, man), 3, 4)
    assert line.startswith("[3/4] default rep 1: complete, 200 ops, ")
    assert line.endswith(", target 2,000,000 ops/s NOT MET, 887,000 intended ops not sent, "
                         "send lag p99 1,234.5 ms")
    met = _plan(tmp_path, 100)
    line = Runner._line(_outcome(met, _finish(met, _ops(300, 100), [_worker()])), 1, 1)
    assert line.endswith(", target 100 ops/s") and "not sent" not in line


def test_the_console_line_of_a_run_without_measured_ops_says_why(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 2_000_000)
    man = _finish(plan, _ops(40, 40), [_worker(5000)])
    line = Runner._line(_outcome(plan, man), 1, 1)
    assert line.startswith("[1/1] default rep 1: failed (no measured ops: none of the 5,000 ops")
