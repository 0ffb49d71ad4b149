"""Faults injected for real during runs, and what each leaves in the raw results.

A server killed mid-run (the `on_failure` and `fail_if_error_rate_above` policies), a
server stalled with SIGSTOP (closed loop, per-op timeouts), the SSH connection to the
client host cut by killing the sshd processes serving it, SIGTERM to `harness run`, and
the results disk filling up. Each test asserts on the run directories written.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main as cli_main
from harness.errors import HostError
from harness.hosts import LocalHost
from harness.hosts.ssh import SSHHost
from harness.results import iter_run_dirs, read_manifest, read_ops, verify_run
from harness.run.runner import Runner
from harness.spec import load_spec
from tests.fixtures.servers import require_service
from tests.fixtures.sshd import SSHServer
from tests.fixtures.tmpfs import mounted_tmpfs
from tests.run.test_runner import _is_zombie, _tagged_workers

pytestmark = pytest.mark.integration

SPEC = """\
name: {name}
workload: memcache_mix
hosts:
  server: localhost
  client: {client}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: {processes}, connections: {connections}}}
params: {{key_space: 1000}}
grid:
  get_ratio: {ratios}
repetitions: {reps}
run: {run}
on_failure: {on_failure}
"""


def write_spec(tmp_path: Path, *, name: str = "f", client: str = "localhost",
               processes: int = 1, connections: int = 1, ratios: str = "[0.9]",
               reps: int = 1, run: str = "{ops: 1000}", on_failure: str = "continue") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, client=client, processes=processes,
                                connections=connections, ratios=ratios, reps=reps, run=run,
                                on_failure=on_failure))
    return path


@pytest.fixture(autouse=True)
def _memcached_installed() -> None:
    require_service("memcached", LocalHost())


def by_index(raw: Path) -> list:
    """Manifests in the order the runs were started."""
    return sorted((read_manifest(d) for d in iter_run_dirs(raw)), key=lambda m: m.started_utc)


def seconds(m) -> float:
    return (datetime.fromisoformat(m.ended_utc) - datetime.fromisoformat(m.started_utc)
            ).total_seconds()


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or _is_zombie(pid)


# -- a server killed mid-run: the run's status policy and the grid's on_failure ----------

@pytest.mark.parametrize("on_failure", ["stop", "continue"])
def test_server_killed_in_run_1_of_3(tmp_path: Path, on_failure: str,
                                     loadgen_engine: str) -> None:
    """run.fail_if_error_rate_above 0 makes run 1 `failed` (records kept); `stop` then
    skips runs 2-3 and says so. With 0.5 run 1 stays `partial`; `continue` goes on, and
    runs 2-3 fail fast against the dead server, each written with a clear error."""
    limit = 0.0 if on_failure == "stop" else 0.5
    spec = load_spec(write_spec(
        tmp_path, ratios="[0.9, 0.5, 0.1]", on_failure=on_failure,
        run=f"{{ops: 5000000, timeout_s: 1, max_consecutive_errors: 8, "
            f"fail_if_error_rate_above: {limit}}}"))
    killed = []

    def kill_cache_in_run_1(plan, running) -> None:
        if plan.index == 0:
            pid = running["cache"].processes[0].pid
            killed.append(pid)
            threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()

    console = io.StringIO()
    raw = tmp_path / "raw"
    outcomes = Runner(spec, raw, progress=False, stream=console,
                      on_run_start=kill_cache_in_run_1).run()
    mans = by_index(raw)
    first = mans[0]
    assert first.counts["ok"] > 100 and first.counts["error"] == 8  # records kept
    assert first.loadgen["engine"] == loadgen_engine
    verify_run(next(iter_run_dirs(raw)))
    assert "server(s) not running at the end of the run: cache" in first.error
    if on_failure == "stop":
        assert [o.status for o in outcomes] == ["failed"] and len(mans) == 1
        assert first.status == "failed"
        assert first.error.startswith("error rate 0.")
        assert "above run.fail_if_error_rate_above (0.00%)" in first.error
        assert ("on_failure: stop -- run 1 (get_ratio=0.9 rep 1) failed; the remaining 2 "
                "run(s) are skipped" in console.getvalue())
    else:
        assert [o.status for o in outcomes] == ["partial", "failed", "failed"]
        assert [m.grid_point["get_ratio"] for m in mans] == [0.9, 0.5, 0.1]
        assert first.status == "partial" and "error rate" not in first.error
        for m in mans[1:]:
            assert m.status == "failed" and m.counts["total"] == 0
            assert m.error.splitlines() == [
                "ServiceError: server(s) not running before the run: cache (stopped during "
                "an earlier run); no clients started"]
            assert seconds(m) < 3  # failed fast: no clients started, no timeouts waited
        assert "not running before the run: cache" in console.getvalue()
    assert gone(killed[0])


# -- a server that stalls (SIGSTOP) in closed loop -----------------------------------------

def test_stalled_server_gives_timeout_records_and_the_run_ends(tmp_path: Path,
                                                              loadgen_engine: str) -> None:
    """SIGSTOP memcached 0.5 s into a 2.5 s run, with a 0.5 s per-op timeout: each
    connection's ops time out one after another (latency = the timeout) until the run's
    time is up; the run ends on time, and the runner stops the still-stopped server."""
    spec = load_spec(write_spec(
        tmp_path, connections=2,
        run="{duration_s: 2.5, timeout_s: 0.5, max_consecutive_errors: 1000}"))
    pids = []

    def stall(plan, running) -> None:
        pid = running["cache"].processes[0].pid
        pids.append(pid)
        threading.Timer(0.5, os.kill, (pid, signal.SIGSTOP)).start()

        def cont() -> None:
            with contextlib.suppress(ProcessLookupError):  # stopped by the runner already
                os.kill(pid, signal.SIGCONT)
        threading.Timer(3.5, cont).start()

    t0 = time.monotonic()
    [outcome] = Runner(spec, tmp_path / "raw", progress=False, on_run_start=stall).run()
    assert time.monotonic() - t0 < 15  # no hang: the stall costs timeouts, not the run
    [run_dir] = iter_run_dirs(tmp_path / "raw")
    man = verify_run(run_dir)
    ops = read_ops(run_dir).to_pandas()
    timeouts = ops[ops["status"] == "timeout"]
    # 2 connections x ~2 s stopped / 0.5 s: about 8 timeouts, at most one per 0.5 s each
    assert 4 <= len(timeouts) <= 12 and man.counts["timeout"] == len(timeouts)
    lat = timeouts["latency_ns"].to_numpy(np.int64)
    assert (lat >= 0.5e9).all() and (lat < 0.7e9).all()
    assert man.counts["ok"] > 100  # before the stall
    assert (timeouts["start_ns"] >= ops[ops["status"] == "ok"]["start_ns"].min()).all()
    # Timeouts are records, not a fault of the run: the default policy keeps it complete.
    assert man.status == "complete" and outcome.status == "complete" and man.error is None
    assert man.loadgen["engine"] == loadgen_engine
    assert gone(pids[0])  # stop() of a SIGSTOPped server works (TERM + CONT)


def test_a_server_stalled_before_a_run_is_named_while_prepare_waits_and_then_given_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """memcached SIGSTOPped across a run boundary, so the workload's `prepare` (which loads
    the key space; in rep 2 its check that rep 1's is still there) waits on it: every
    PREPARE_NOTE_S a line names the server, and past PREPARE_TIMEOUT_S the run fails with
    a line naming it (before: silence until the server came back, however long). A stall
    shorter than the bound only costs lines."""
    import harness.run.machines as machines_mod  # where `_prepare` reads them

    monkeypatch.setattr(machines_mod, "PREPARE_NOTE_S", 0.5)
    monkeypatch.setattr(machines_mod, "PREPARE_TIMEOUT_S", 3.0)
    spec = load_spec(write_spec(tmp_path, reps=2, run="{ops: 200}"))
    stalls = iter([1.6, 6.0])  # rep 1: shorter than the bound; rep 2: longer

    class StallingRunner(Runner):
        def _run_one(self, plan, ctx, endpoints, sinfo, running, *rest):
            pid = running["cache"].processes[0].pid
            os.kill(pid, signal.SIGSTOP)

            def cont() -> None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            threading.Timer(next(stalls), cont).start()
            return super()._run_one(plan, ctx, endpoints, sinfo, running, *rest)

    console = io.StringIO()
    first, second = StallingRunner(spec, tmp_path / "raw", progress=False,
                                   stream=console).run()
    out = console.getvalue()
    assert first.status == "complete", out
    assert re.search(r"get_ratio=0.9 rep 1: prepare still waiting on memcached at "
                     r"127\.0\.0\.1:\d+ after 1 s", out), out
    assert second.status == "failed" and second.measured_ops == 0
    # (rep 2 finds rep 1's key space on the server: its check of that data is what waits)
    assert ("check of the data did not finish within 3 s waiting on memcached at "
            "127.0.0.1:" in second.error), second.error
    assert "No clients started" in second.error


# -- the SSH connection to the client host cut mid-run -------------------------------------

def _socket_inodes(pid: str) -> set[int]:
    found = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    found.add(int(link[8:-1]))
    return found


def _tcp_connections() -> list[tuple[int, int, int]]:
    """(local port, remote port, inode) of every TCP socket in this namespace."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                out.append((int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16),
                            int(f[9])))
    return out


def cut_my_ssh_connections(port: int) -> list[int]:
    """SIGKILL the sshd processes serving this process's connections to `port` (the
    per-connection children of the listening sshd); returns their pids."""
    mine = _socket_inodes("self")
    conns = _tcp_connections()
    client_ports = {lp for lp, rp, inode in conns if rp == port and inode in mine}
    server_ends = {inode for lp, rp, inode in conns if lp == port and rp in client_ports}
    victims = []
    for proc in Path("/proc").glob("[0-9]*"):
        if _socket_inodes(proc.name) & server_ends:
            cmdline = (proc / "cmdline").read_bytes()
            assert cmdline.startswith(b"sshd"), cmdline  # never anything else
            victims.append(int(proc.name))
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return victims


def test_ssh_host_reconnects_after_a_cut_and_never_reruns_a_command(
        sshd: SSHServer, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with SSHHost.connect(sshd.host_spec()) as host:
        survivor = host.start(["sleep", "60"], log_path=str(tmp_path / "s.log"))
        try:
            timer = threading.Timer(0.7, lambda: cut.extend(cut_my_ssh_connections(sshd.port)))
            cut: list[int] = []
            timer.start()
            t0 = time.monotonic()
            with pytest.raises(HostError, match="lost while a command ran \\(not re-run\\)"):
                host.run(["sh", "-c", f"echo run >> {marker}; sleep 5"])
            assert time.monotonic() - t0 < 4.5 and cut
            # The next command reconnects, with the same host-key checks.
            assert host.run(["echo", "back"]).stdout == "back\n"
            assert host.reconnects == 1 and "re-established" in host.reconnect_log[0]
            assert marker.read_text() == "run\n"  # the cut command did not run again
            assert host.is_alive(survivor)  # started in its own session: outlives the link
            data = os.urandom(100_000)
            (tmp_path / "a").write_bytes(data)
            host.put(tmp_path / "a", str(tmp_path / "b"))  # SFTP on the new connection
            assert (tmp_path / "b").read_bytes() == data
        finally:
            host.stop(survivor, timeout_s=5)
    with pytest.raises(HostError, match="was closed"):
        host.run(["true"])  # a closed host does not reconnect by itself


def test_ssh_cut_mid_run_reconnects_and_keeps_every_record(
        sshd: SSHServer, tmp_path: Path) -> None:
    """Clients on the SSH host, open loop 2 x 500 ops/s for 3 s; 1 s in, the sshd
    processes serving the harness's connection are killed. The workers run on (their
    own sessions), the harness reconnects, waits, and collects every record."""
    client = (f"{{target: '{sshd.target}', python: '{sys.executable}', "
              f"known_hosts: '{sshd.known_hosts}', identity_file: '{sshd.identity_file}'}}")
    spec = load_spec(write_spec(tmp_path, client=client, processes=2,
                                run="{ops: 3000, rate_ops_s: 1000, timeout_s: 2}"))
    cut: list[int] = []

    def cut_link(plan, running) -> None:
        threading.Timer(1.0, lambda: cut.extend(cut_my_ssh_connections(sshd.port))).start()

    [outcome] = Runner(spec, tmp_path / "raw", progress=False, on_run_start=cut_link).run()
    assert cut, "no sshd process served the harness's connection"
    [run_dir] = iter_run_dirs(tmp_path / "raw")
    man = verify_run(run_dir)
    workers = man.loadgen["workers"]
    assert [w["state"] for w in workers] == ["complete", "complete"]
    issued = sum(w["records"] for w in workers)
    assert issued == 3000 and man.ops_file["rows"] == issued == len(read_ops(run_dir))
    assert man.counts["ok"] + man.counts["miss"] == 3000
    assert "SSH connection dropped during the run and was re-established" in man.error
    assert "attempt 1" in man.error
    # Nothing was lost, so the run stays complete; the note says what happened.
    assert man.status == "complete" == outcome.status


# -- SIGTERM to `harness run` ---------------------------------------------------------------

def test_sigterm_stops_like_ctrl_c_and_resume_continues(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    path = write_spec(tmp_path, reps=2, run="{ops: 3000000, timeout_s: 2}")
    cmd = [sys.executable, "-m", "harness.cli", "run", str(path), "--out", str(raw),
           "--no-progress"]
    tag = f"HARNESS_TEST_TAG={tmp_path.name}-term"
    env = {**os.environ, "HARNESS_TEST_TAG": f"{tmp_path.name}-term"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _tagged_workers(tag):
        time.sleep(0.05)
    workers = _tagged_workers(tag)
    assert workers, "the harness never started a client process"
    # Measuring once released: its go file exists (a fresh interpreter takes ~0.5-1 s
    # to get there on a busy machine; a SIGTERM before that finds nothing to keep).
    config = (Path(f"/proc/{workers[0]}/cmdline").read_bytes().split(b"\0")[-2]).decode()
    go_file = Path(config.removesuffix(".json") + ".go")
    while time.monotonic() < deadline and not go_file.exists():
        time.sleep(0.01)
    time.sleep(0.7)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "--resume" in err and "Traceback" not in err
    [man] = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert man.status == "partial" and man.error.startswith("interrupted")
    assert man.counts["ok"] > 0 and man.loadgen["workers"][0]["state"] == "stopped"
    assert all(gone(pid) for pid in workers) and not _tagged_workers(tag)
    for svc in man.services.values():
        assert all(gone(pid) for pid in svc["pids"])
    resumed = subprocess.run([*cmd, "--resume", "--set", "run.ops=200"], capture_output=True,
                             text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(read_manifest(d).status for d in iter_run_dirs(raw)) == [
        "complete", "complete", "partial"]


# -- the results disk fills up -------------------------------------------------------------

@pytest.fixture
def small_tmpfs(tmp_path: Path):
    with mounted_tmpfs(tmp_path / "small", "size=512k") as mnt:
        yield mnt


def test_a_full_disk_keeps_the_last_state_file_and_says_so(small_tmpfs: Path) -> None:
    """The experiment's state file cannot be rewritten on a full disk: the last one stays
    (it still names what was running), the lock says why, and nothing raises (CI once
    met this as a traceback at the end of a disk-full run)."""
    from harness.run.inflight import STATE_FILE, ExperimentLock, ServerEntry

    lock = ExperimentLock(small_tmpfs / "exp", spec="x.yaml")
    lock.acquire()
    try:
        lock.add_servers([ServerEntry("cache", "memcached", "server", 1, 1)])
        before = (lock.dir / STATE_FILE).read_text()
        filler = small_tmpfs / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as fh:
            while True:
                fh.write(b"x" * 4096)
                fh.flush()
        lock.add_servers([ServerEntry("cache", "memcached", "server", 2, 2)])
        assert lock.unsaved and "No space left on device" in lock.unsaved
        assert (lock.dir / STATE_FILE).read_text() == before
        assert not (lock.dir / f"{STATE_FILE}.tmp").exists()
        filler.unlink()
        lock.save()
        assert lock.unsaved is None and '"pid": 2' in (lock.dir / STATE_FILE).read_text()
    finally:
        lock.state.servers = []
        lock.release()


def test_disk_full_stops_with_a_clear_error_and_keeps_every_record(
        small_tmpfs: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Runs of ~150 KB into a 512 KB tmpfs: a few fit, then one cannot be written. Its
    records stay on the client machine, named in the error; once there is room, --resume
    writes that run first and measures the rest."""
    path = write_spec(tmp_path, name="full", reps=10, processes=2,
                      run="{ops: 20000, timeout_s: 2}")
    code = cli_main(["run", str(path), "--out", str(small_tmpfs), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: {small_tmpfs / 'full'}: no space left on the device "
                           "while writing run ")
    m = re.search(r"its 20,000 records are kept on client at (/\S+); the runs written "
                  r"before it are intact", line)
    assert m, line
    assert len(list(Path(m.group(1)).glob("*.npz"))) == 2
    assert (f"Free some space there and continue with `harness run {path} --resume`, which "
            "writes them first" in line)
    assert "Traceback" not in err
    exp = small_tmpfs / "full"
    assert not [p for p in exp.iterdir() if p.name.startswith(".tmp-")]
    written = list(iter_run_dirs(small_tmpfs))
    assert 1 <= len(written) < 10
    assert all(read_manifest(d).status == "complete" for d in written)
    assert cli_main(["verify", str(small_tmpfs)]) == 0
    assert f"{len(written)} run(s) ok, 0 bad" in capsys.readouterr().out
    # and nothing is left running
    for d in written:
        for svc in json.loads((d / "manifest.json").read_text())["services"].values():
            assert all(gone(pid) for pid in svc["pids"])
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_tmpfs)], check=True)
    assert cli_main(["run", str(path), "--out", str(small_tmpfs), "--no-progress",
                     "--resume"]) == 0
    err = capsys.readouterr().err
    assert "20,000 records recovered and written as complete" in err
    mans = [read_manifest(d) for d in iter_run_dirs(small_tmpfs)]
    assert sorted(m.repetition for m in mans) == list(range(1, 11))
    assert all(m.status == "complete" for m in mans)
    assert not Path(m.group(1)).exists()


# -- a machine's link goes silent (no FIN, no RST) on the multi-machine test bed ------------

SILENT_SPEC = """\
name: silent
workload: memcache_mix
hosts: {hosts}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 2, connections: 1}}
params: {{key_space: 1000}}
repetitions: 2
run: {{duration_s: 8, timeout_s: 1, max_consecutive_errors: 1000000}}
on_failure: continue
"""


def test_a_client_machine_gone_silent_is_noticed_in_time_and_the_grid_goes_on(
        tmp_path: Path) -> None:
    """1 s into run 1 the client machine's interface is set down: its packets vanish, no
    FIN or RST. The harness notices within NOTICE_BOUND_S (8 s), writes run 1 with an
    error naming the silent link and where the records are, and goes on (on_failure:
    continue): run 2 fails at once (the machine is unreachable). With the link back,
    `harness collect` fetches run 1's records from the machine."""
    import yaml

    from harness.hosts.sshwatch import NOTICE_BOUND_S
    from tests.fixtures.machines import machine_bed

    assert NOTICE_BOUND_S <= 10
    with machine_bed(["s", "c"]) as bed:
        hosts = bed.hosts_yaml({"server": "s", "client": "c"})
        path = tmp_path / "silent.yaml"
        path.write_text(SILENT_SPEC.format(hosts=yaml.safe_dump(hosts, default_flow_style=True,
                                                                width=10_000).strip()))
        cli = bed["c"]
        dropped: list[float] = []

        def go_silent() -> None:
            cli.run(["ip", "link", "set", cli.interface, "down"])
            dropped.append(time.time())

        def drop_once(plan, running) -> None:
            if not dropped:
                threading.Timer(1.0, go_silent).start()

        t0 = time.monotonic()
        try:
            outcomes = Runner(load_spec(path), tmp_path / "raw", progress=False,
                              on_run_start=drop_once).run()
        finally:
            time.sleep(0.2)
            cli.run(["ip", "link", "set", cli.interface, "up"])
        took = time.monotonic() - t0
        assert [o.status for o in outcomes] == ["failed", "failed"]  # records not here yet
        first, second = by_index(tmp_path / "raw")
        noticed_after = datetime.fromisoformat(first.ended_utc).timestamp() - dropped[0]
        assert noticed_after <= 15, noticed_after
        assert "link is silent" in first.error and cli.address in first.error
        [p0, p1] = first.extra["pending_records"]
        assert p0["files"]["out"] in first.error and "harness collect" in first.error
        assert "unreachable" in second.error or "not retried" in second.error
        assert seconds(second) < 5  # a silent machine does not cost the reconnect backoff
        assert took < 60, took

        # The machine is back: its client processes finished on their own; fetch them.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
                Path(p["files"]["status"]).exists() for p in (p0, p1)):
            time.sleep(0.2)
        assert cli_main(["collect", str(path), "--out", str(tmp_path / "raw")]) == 0
        again, _ = by_index(tmp_path / "raw")
        man = verify_run(tmp_path / "raw" / "silent" / first.run_id)
        assert again.run_id == first.run_id and man.ops_file["rows"] > 0
        assert man.status == "partial"  # the silent link stays in its error
        assert "pending_records" not in man.extra
