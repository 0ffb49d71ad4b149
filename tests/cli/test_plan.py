"""`harness plan` over a first round measured for real (memcached, a grid of two value
sizes, 3 runs each): a line per configuration with its components and the runs each
run length would need; no first round, or a target that is no percentage, is one line
and exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.hosts import LocalHost
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

SPEC = """\
name: plan_me
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache: {kind: memcached, host: server}
clients: {hosts: [client], processes: 1, connections: 2}
params: {get_ratio: 0.9, key_space: 1000}
grid:
  value_size_bytes: [100, 4096]
repetitions: 3
run: {ops: 4000, warmup_ops: 200}
"""


def test_plan_reads_the_first_round_and_plans_each_configuration(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_service("memcached", LocalHost())
    spec = tmp_path / "plan_me.yaml"
    spec.write_text(SPEC)
    raw = tmp_path / "raw"
    assert main(["plan", str(spec), "--raw", str(raw)]) == 2
    err = capsys.readouterr().err
    assert "no complete run of plan_me" in err and "--set repetitions=3" in err
    assert main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) in (0, 1)
    capsys.readouterr()
    assert main(["plan", str(spec), "--raw", str(raw), "--target", "10%"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "within ±10% of its mean" in out[0]
    rows = [line for line in out if line.startswith("value_size_bytes=")]
    assert len(rows) == 2, out
    for row in rows:
        # runs now, ops/s, the two SDs, then a plan per run length and the cheapest.
        assert re.match(r"value_size_bytes=\d+\s+3\s+[\d,]+\s+[\d.]+%\s+[\d.]+%\s+", row), row
        assert len(re.findall(r"\d(?:\.\d+)? s: ", row)) == 4, row
        assert "-> " in row


def test_a_target_that_is_no_percentage_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "plan_me.yaml"
    spec.write_text(SPEC)
    for bad in ("five", "0%", "150%"):
        with pytest.raises(SystemExit) as exc:
            main(["plan", str(spec), "--target", bad])
        assert exc.value.code == 2
        assert "--target" in capsys.readouterr().err
