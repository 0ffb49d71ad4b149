"""A crash of a process that holds a server's password leaves no core file (issue 48
item 8, attack 5): `harness run` started from a shell that allows core dumps, against a
Redis that takes a password; its worker is killed with SIGSEGV while it measures."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.hosts import LocalHost
from harness.run.agent import WORKER_COMM
from tests.fixtures.byhand import ByHand, start_redis
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _worker_of(harness: int) -> int | None:
    """A worker (a process named kvbench-worker) descended from `harness`."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_bytes().strip() != WORKER_COMM:
                continue
        except OSError:
            continue
        pid = int(d.name)
        while pid > 1:
            pid = _parent(pid)
            if pid == harness:
                return int(d.name)
    return None


def _core_limit(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max core file size"):
            return line.split()[4]
    raise AssertionError(f"no core limit in /proc/{pid}/limits")


def test_a_crashed_worker_holding_a_password_leaves_no_core_file(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand]) -> None:
    require_service("redis", LocalHost())
    password = "core-secret-" + tmp_path.name[-8:]
    server = by_hand(start_redis(tmp_path, f"user default off\nuser bench on >{password} "
                                           "~* &* +@all\n"))
    spec = tmp_path / "pw.yaml"
    spec.write_text(
        "name: pw\nworkload: redis_mix\nhosts: {client: localhost}\nservices:\n"
        f"  kv: {{kind: redis, address: '{server.address}', "
        "auth: {user: bench, password_env: CORE_PW}}\n"
        "clients: {hosts: [client], processes: 1, connections: 1}\n"
        "params: {key_space: 100}\nrun: {duration_s: 600, warmup_s: 0}\n")
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("core dumps are off for this user (hard RLIMIT_CORE 0): nothing to test")

    def allow_cores() -> None:  # a shell with `ulimit -c unlimited` (or its hard limit)
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))

    harness = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", str(spec), "--out",
         str(tmp_path / "raw"), "-q", "--no-progress"], cwd=tmp_path,
        env={**os.environ, "CORE_PW": password}, preexec_fn=allow_cores,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        worker = None
        while worker is None and harness.poll() is None:
            worker = _worker_of(harness.pid)
            time.sleep(0.05)
        assert worker is not None, harness.communicate()[0]
        assert _core_limit(worker) == "0"
        os.kill(worker, signal.SIGSEGV)
        out = harness.communicate()[0]
    finally:
        if harness.poll() is None:  # SIGTERM: the run stops its agent and worker too
            harness.terminate()
            try:
                harness.wait(timeout=120)
            except subprocess.TimeoutExpired:
                harness.kill()
                harness.wait()
    assert "the process died" in out, out
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if not pattern.startswith("|"):  # a file: where a core would be, none is
        where = Path(pattern) if pattern.startswith("/") else tmp_path / pattern
        cores = list(where.parent.glob(where.name.split("%")[0] + "*"))
        assert not [c for c in cores if password.encode() in c.read_bytes()], cores


def test_an_agent_started_with_core_dumps_allowed_turns_them_off_itself() -> None:
    """Over SSH an agent inherits nothing from `harness run`'s limits: started by a
    shell that allows core files (as sshd's session would), it lowers its own soft
    limit to 0 before it reads a command, so the workers it forks inherit 0 too."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("core dumps are off for this user (hard RLIMIT_CORE 0): nothing to test")

    def allow_cores() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))

    agent = subprocess.Popen([sys.executable, "-m", "harness.agent"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, preexec_fn=allow_cores)
    try:
        limit = _core_limit(agent.pid)
        while limit != "0" and agent.poll() is None:  # until main() has run
            time.sleep(0.02)
            limit = _core_limit(agent.pid)
        assert limit == "0"
    finally:
        agent.stdin.close()
        try:
            agent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
