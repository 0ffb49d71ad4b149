"""Runs that start in milliseconds (issue 41): workers forked from the machine's agent
with their client built once per configuration, and the preload skipped where the
server still holds it. Against real memcached: both paths give the same counts and
statuses and latency distributions no test tells apart; data the server lost is
loaded again."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest, read_ops
from harness.run.clients import SLOW_STARTS_ENV
from harness.run.runner import Runner
from harness.spec import load_spec
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

SPEC = """\
name: {name}
workload: memcache_mix
services: {{cache: {{kind: memcached}}}}
clients: {{processes: 2, connections: 2}}
params: {{key_space: 500}}
grid:
  value_size_bytes: [100, 1000]
repetitions: {reps}
run: {{ops: 400, warmup_ops: 20}}
"""


@pytest.fixture(autouse=True)
def _memcached() -> None:
    require_service("memcached", LocalHost())


def _spec(tmp_path: Path, name: str, reps: int = 4) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, reps=reps))
    return path


def _runs(raw: Path) -> list:
    return sorted((read_manifest(d) for d in iter_run_dirs(raw)), key=lambda m: m.started_utc)


def test_quick_and_slow_starts_measure_alike(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    raw = tmp_path / "raw"
    # Alternated, so that drift on a shared machine falls on both paths alike.
    for round_ in range(3):
        for slow in (False, True):
            monkeypatch.setenv(SLOW_STARTS_ENV, "1" if slow else "0")
            name = "slow" if slow else "quick"
            Runner(load_spec(_spec(tmp_path, f"{name}{round_}", reps=2)), raw / name,
                   progress=False, live=False).run()
    quick, slow = _runs(raw / "quick"), _runs(raw / "slow")
    assert len(quick) == len(slow) == 12
    for m in quick + slow:
        assert m.status == "complete"
        assert m.counts["measured"] == 400 and m.counts["warmup"] == 20
        assert m.counts.get("error", 0) == 0 and m.counts.get("timeout", 0) == 0
    # The quick path forked its workers with their clients ready; the slow did not.
    assert all(w["startup"]["prebuilt"] for m in quick for w in m.loadgen["workers"])
    assert not any(w["startup"]["prebuilt"] for m in slow for w in m.loadgen["workers"])
    # Each configuration's first run prepares; after that, the server still holds it.
    ran = [m.extra["prepare"]["ran"] for m in quick]
    assert ran.count(True) == 2 * 3 and ran.count(False) == 2 * 3
    assert all(m.extra["prepare"]["ran"] for m in slow)

    def medians(ms: list) -> np.ndarray:
        return np.array([float(np.median(read_ops(
            Path(raw / ("quick" if m in quick else "slow") / m.experiment / m.run_id),
            ["latency_ns"]).column("latency_ns").to_numpy())) for m in ms])

    # Each run's median latency: the two paths' runs are one population.
    assert stats.mannwhitneyu(medians(quick), medians(slow)).pvalue > 0.001


def test_data_the_server_lost_is_loaded_again(tmp_path: Path) -> None:
    """A flush during a run: the next run of that data finds fewer items than the key
    space and prepares again, so its gets hit."""
    raw = tmp_path / "raw"

    def flush_after_first(plan, running) -> None:
        if plan.repetition == 1 and plan.params["value_size_bytes"] == 100:
            ep = running["cache"].endpoint
            with socket.create_connection((ep.host, ep.port), timeout=5) as s:
                s.sendall(b"flush_all\r\n")
                assert s.recv(64).startswith(b"OK")

    Runner(load_spec(_spec(tmp_path, "flushed", reps=2)), raw, progress=False,
           live=False, on_run_start=flush_after_first).run()
    runs = [m for m in _runs(raw) if m.params["value_size_bytes"] == 100]
    assert [m.extra["prepare"]["ran"] for m in runs] == [True, True]
    # The flush hit the first run while it ran (its later gets missed); the second run
    # found the server short of the key space, loaded it again, and every get hit.
    assert runs[0].counts.get("miss", 0) > 0 and runs[1].counts.get("miss", 0) == 0
    other = [m for m in _runs(raw) if m.params["value_size_bytes"] == 1000]
    assert [m.extra["prepare"]["ran"] for m in other] == [True, False]
    assert json.loads(other[1].extra["prepare"]["data"])["value_size_bytes"] == 1000


def test_server_sets_split_by_data_only_where_the_pool_keeps_them_all(
        tmp_path: Path) -> None:
    """A grid over value sizes gets a server set per size (no reload between them) when
    the pool keeps every set; with more sets than that, a set per server configuration
    as before (a restart before every run would cost more than the preload)."""
    grid = "  value_size_bytes: [100, 1000]\n"
    few = tmp_path / "few.yaml"
    few.write_text(SPEC.format(name="few", reps=3).replace(grid, grid + (
        "  services.cache.threads: [1, 2]\n")))
    many = tmp_path / "many.yaml"
    many.write_text(SPEC.format(name="many", reps=3).replace(grid, (
        "  value_size_bytes: [100, 1000, 4000]\n  services.cache.threads: [1, 2]\n")))
    for path, starts in ((few, 4), (many, 2)):
        runner = Runner(load_spec(path), tmp_path / "raw", progress=False, live=False)
        assert runner.server_starts(runner.plans()) == starts, path.name
