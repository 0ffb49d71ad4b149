"""Failed ops are a finding, not a footnote (issue 50 item 2): a server that stalls
mid-run (SIGSTOP, as a paused VM or a long fork does) makes ops time out; the run is
"complete", and `harness run` names it and exits 1, `harness summary` fails its
`errors` check with the first message of the commonest kind of failure and how often,
and the manifest keeps each client's tally by kind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest
from harness.results.failures import failure_kinds
from tests.fixtures.byhand import ByHand, start_redis
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration


def _commands(address: str) -> int:
    host, port = address.rsplit(":", 1)
    out = subprocess.run(["redis-cli", "-h", host, "-p", port, "INFO", "stats"],
                         capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        if line.startswith("total_commands_processed:"):
            return int(line.split(":")[1])
    return 0


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_server_that_stalls_mid_run_gives_a_named_finding_and_a_failing_exit(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand], engine: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    require_service("redis", LocalHost())
    server = by_hand(start_redis(tmp_path, ""))
    spec = tmp_path / "stall.yaml"
    spec.write_text(
        "name: stall\nworkload: redis_mix\nhosts: {client: localhost}\n"
        f"services:\n  kv: {{kind: redis, address: '{server.address}'}}\n"
        "clients: {hosts: [client], processes: 1, connections: 2}\n"
        "params: {key_space: 200}\n"
        # Open loop at a modest rate: the ops due during the stall are sent and time out
        # (a closed loop would wait, and fail only the few in flight).
        "run: {duration_s: 6, rate_ops_s: 500, timeout_s: 0.1, "
        "max_consecutive_errors: 100000}\n")
    raw = tmp_path / "raw"
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(spec), "--out",
                            str(raw), "--no-progress"], env={**os.environ,
                                                               "KVBENCH_ENGINE": engine},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The event: the measured ops are flowing (well past the preload's sets).
        deadline = time.monotonic() + 240
        while _commands(server.address) < 700 and run.poll() is None:
            assert time.monotonic() < deadline, "the run never sent its ops"
            time.sleep(0.05)
        assert run.poll() is None, run.communicate()
        [proc] = server.procs
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(1.0)  # the stall: ten timeouts' worth, whatever the machine's speed
        os.kill(proc.pid, signal.SIGCONT)
        out, err = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, (out, err)
    assert "1 run(s) with failed ops over 0.1% of their measured ops" in err, err
    [run_dir] = iter_run_dirs(raw)
    man = read_manifest(run_dir)
    assert man.status == "complete", man.error
    kinds = failure_kinds(man)
    assert kinds and all(n for _, n, _ in kinds), kinds
    first = kinds[0][2]
    assert "TimeoutError" in first and "0.1 s" in first, kinds
    assert cli_main(["summary", str(raw)]) == 0
    said = capsys.readouterr()
    text = said.out + said.err
    assert "errors" in text and "of the measured ops failed" in text, text
    assert f"first of the commonest kind: {first}" in text, text
