"""The client-machine agent (harness.agent) and its control side (harness.run.agentctl),
locally and over a real sshd on 127.0.0.1."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harness.errors import HostError
from harness.hosts import LocalHost
from harness.hosts.ssh import SSHHost
from harness.run.agentctl import AgentLink, AgentPool
from harness.run.workerctl import alive, sha256_of
from tests.fixtures.sshd import SSHServer

pytestmark = pytest.mark.integration

SLEEPER = [sys.executable, "-c", "import time, sys; time.sleep(float(sys.argv[1]))"]


def test_local_agent_runs_the_steps_of_a_run(tmp_path: Path) -> None:
    link = AgentLink(LocalHost())
    try:
        assert link.call("hello")["pid"] > 0
        cfg = tmp_path / "c.json"
        link.call("write", path=str(cfg), text='{"x": 1}')
        assert cfg.read_text() == '{"x": 1}'
        pid = link.call("spawn", argv=[*SLEEPER, "0.3"], log=str(tmp_path / "w.log"))["pid"]
        # ready: the file appears only after the process is gone -> "dead" names it
        assert link.call("ready", pairs=[[pid, str(tmp_path / "never")]],
                         timeout_s=10)["dead"] == pid
        # go files hold the start time; info reads statuses and checksums
        link.call("go", start_at_ns=123, files=[str(tmp_path / "a.go")])
        assert (tmp_path / "a.go").read_text() == "123"
        info = link.call("info", status=[str(cfg), str(tmp_path / "none")],
                         out=[str(cfg), str(tmp_path / "none")])
        assert info["status"] == {str(cfg): {"x": 1}, str(tmp_path / "none"): None}
        assert info["digest"][str(cfg)] == sha256_of(str(cfg))
        link.call("rm", files=[str(cfg), str(tmp_path / "none")])
        assert not cfg.exists()
        with pytest.raises(HostError, match="`nonsense` failed there: ValueError"):
            link.call("nonsense")
        with pytest.raises(HostError, match="`wait` failed there"):
            link.call("wait", pids=["not a pid"])
        assert link.call("hello")  # still serving
    finally:
        link.close()


def test_wait_answers_while_other_requests_are_served_and_stop_kills_groups(
        tmp_path: Path) -> None:
    link = AgentLink(LocalHost())
    try:
        pid = link.call("spawn", argv=[*SLEEPER, "60"], log=str(tmp_path / "w.log"))["pid"]
        waiting = link.send("wait", pids=[pid])
        t0 = time.monotonic()
        assert link.call("clock")["time_ns"] > 0  # not blocked behind the wait
        assert not waiting.event.is_set()
        link.call("stop", pids=[pid], grace_s=5)
        waiting.result(10)
        assert time.monotonic() - t0 < 10 and not alive(pid)
    finally:
        link.close()


def test_a_dead_agent_fails_pending_requests_and_the_pool_starts_a_new_one(
        tmp_path: Path) -> None:
    pool = AgentPool()
    host = LocalHost()
    try:
        link = pool.get(host)
        agent_pid = link.call("hello")["pid"]
        pid = link.call("spawn", argv=[*SLEEPER, "60"], log=str(tmp_path / "w.log"))["pid"]
        waiting = link.send("wait", pids=[pid])
        os.kill(agent_pid, 9)
        with pytest.raises(HostError, match="control channel lost during `wait`"):
            waiting.result(10)
        assert alive(pid)  # the worker lives on without its agent
        again = pool.get(host)
        assert again is not link and again.call("hello")["pid"] != agent_pid
        again.call("stop", pids=[pid], grace_s=5)
        assert not alive(pid)
    finally:
        pool.close()


def test_over_ssh_workers_are_forked_and_outlive_the_channel(sshd: SSHServer,
                                                             tmp_path: Path) -> None:
    """A forked worker runs `harness.run.worker` from the agent's imported kit: given a
    config it cannot read it fails the same way a fresh interpreter would, in its log."""
    with SSHHost.connect(sshd.host_spec()) as host:
        link = AgentLink(host)
        try:
            agent_pid = link.call("hello")["pid"]
            off, unc = link.clock_offset_ns()
            assert abs(off) <= unc + 1_000_000  # same clock, via the channel
            log = tmp_path / "w.log"
            pid = link.call("spawn", argv=[host.python, "-m", "harness.worker",
                                           str(tmp_path / "absent.json")],
                            log=str(log), fork=True)["pid"]
            link.call("wait", pids=[pid], timeout=30)
            assert "absent.json" in log.read_text()
            # A long one, then the channel closes: the agent exits, the worker does not.
            pid = link.call("spawn", argv=[*SLEEPER, "60"], log=str(log))["pid"]
        finally:
            link.close()
        deadline = time.monotonic() + 10
        while alive(agent_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(agent_pid) and alive(pid)
        os.killpg(pid, 9)


def test_the_agent_reads_proc_and_a_busy_series_and_procstat_serves_the_same() -> None:
    """`procsnap` (harness.hosts.procstat through the agent): the machine now, the agent its
    `self`; between a start and a stop, the busy share of each second. procstat's own
    server answers the same request over the same kind of link (machines without an
    agent)."""
    from harness.hosts import procstat

    link = AgentLink(LocalHost())
    served = AgentLink(LocalHost(), [sys.executable, "-c", procstat.script(), "--serve"])
    try:
        pid = link.call("hello")["pid"]
        first = link.call("procsnap", detail=[pid], series="start")
        assert first["snapshot"]["self"] == pid and "busy" not in first
        assert first["snapshot"]["peak_rss"][str(pid)] > 1 << 20
        time.sleep(2.3)
        last = link.call("procsnap", series="stop")
        assert len(last["busy"]) >= 2 and all(0 <= b <= 1 for b in last["busy"])
        assert link.call("procsnap", series="stop")["busy"] == []  # no series on
        snap = served.call("procsnap", detail=[])["snapshot"]
        assert snap["machine"] == first["snapshot"]["machine"] and snap["self"] != pid
        assert served.call("procsnap")["snapshot"]["self"] == snap["self"]  # one process
    finally:
        link.close()
        served.close()
