"""Nothing measured is lost, whatever stops `harness run` and wherever.

Signals and kills land at exact system calls: strace's fault injection (`-e
inject=fsync:signal=...:when=N`) delivers them at the Nth fsync (or rename) of the
harness's main thread, where the run directory is written. Which call is which comes from
a reference pass of the same spec traced with `-y` (file names of descriptors), so the
tests follow the write path, not a count typed here. After each kill, the next `harness
run --resume` must leave exactly the runs the spec asks for, nothing hidden counted,
nothing left running and every record kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest, read_ops, verify_run
from harness.run.clients import CHUNK_ENV
from harness.run.inflight import STATE_DIR, STATE_FILE
from harness.run.until import completed_runs
from harness.services.memcached import memcached_stats
from tests.fixtures.procs import worker_base
from tests.fixtures.servers import require_service
from tests.fixtures.tmpfs import mounted_tmpfs
from tests.run.test_runner import _is_zombie, _tagged_workers

pytestmark = pytest.mark.integration

SPEC = """\
name: {name}
workload: memcache_mix
hosts: {{server: localhost, client: localhost}}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 2, connections: 2}}
params: {{key_space: 1000}}
repetitions: {reps}
run: {run}
"""
STRACE = shutil.which("strace")


@pytest.fixture(scope="module")
def write_steps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, int]]:
    """The first run's write steps of the spec `write_spec` makes (a reference pass)."""
    if STRACE is None:
        if os.environ.get("CI"):
            pytest.fail("strace is missing under CI; .ci/run installs it")
        pytest.skip("strace is not installed (make setup and .ci/run install it)")
    require_service("memcached", LocalHost())
    tmp = tmp_path_factory.mktemp("reference")
    return points_of_first_run(write_path_calls(write_spec(tmp), tmp / "raw", tmp))


def write_spec(tmp_path: Path, name: str = "k", reps: int = 2,
               run: str = "{ops: 4000}") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, reps=reps, run=run))
    return path


@pytest.fixture(autouse=True)
def _memcached_installed() -> None:
    require_service("memcached", LocalHost())


def harness(*args: str, tag: str | None = None, timeout: float = 180,
            strace: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "harness.cli", *args]
    if strace is not None:
        cmd = [STRACE, "-qq", *strace, "--", *cmd]
    env = {**os.environ, **({"HARNESS_TEST_TAG": tag} if tag else {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or _is_zombie(pid)


def memcached_pids(tag: str) -> set[int]:
    """Live memcached processes carrying `tag` (HARNESS_TEST_TAG) in their environment:
    this test's, never another session's on the same machine."""
    found = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if ((proc / "comm").read_text().strip() == "memcached"
                    and f"HARNESS_TEST_TAG={tag}".encode() in (
                        proc / "environ").read_bytes().split(b"\0")
                    and not _is_zombie(int(proc.name))):
                found.add(int(proc.name))
        except OSError:
            continue
    return found


def write_path_calls(path: Path, raw: Path, tmp_path: Path) -> list[tuple[str, str]]:
    """(syscall, file) of every fsync and rename the harness's main thread makes for a
    whole run of `path`, in order (the reference pass)."""
    log = tmp_path / "reference.strace"
    res = harness("run", str(path), "--out", str(raw), "--no-progress", "-q",
                  strace=["-y", "-o", str(log), "-e", "trace=fsync,rename"])
    assert res.returncode == 0, res.stderr
    calls = []
    for line in log.read_text().splitlines():
        m = re.match(r'(fsync)\(\d+<([^>]*)>\)|(rename)\("([^"]*)"', line)
        if m:
            calls.append((m.group(1) or m.group(3), m.group(2) or m.group(4)))
    shutil.rmtree(raw)
    return calls


def points_of_first_run(calls: list[tuple[str, str]]) -> dict[str, tuple[str, int]]:
    """The write steps of the first run directory: name -> (syscall, its count among the
    calls of that syscall, 1-based, as strace's `when=` counts)."""
    seen = {"fsync": 0, "rename": 0}
    steps: dict[str, tuple[str, int]] = {}
    for call, name in calls:
        seen[call] += 1
        base = Path(name).name
        if call == "fsync" and base == "ops.parquet" and "ops" not in steps:
            steps["ops"] = (call, seen[call])
        elif call == "fsync" and base == "manifest.json" and "manifest" not in steps:
            steps["manifest"] = (call, seen[call])
        elif call == "fsync" and base.startswith(".tmp-") and "tmp_dir" not in steps:
            steps["tmp_dir"] = (call, seen[call])
        elif call == "rename" and base.startswith(".tmp-") and "rename" not in steps:
            steps["rename"] = (call, seen[call])
        elif call == "fsync" and "rename" in steps and "exp_dir" not in steps:
            steps["exp_dir"] = (call, seen[call])
    assert set(steps) == {"ops", "manifest", "tmp_dir", "rename", "exp_dir"}, calls
    return steps


def assert_whole(raw: Path, name: str, reps: int) -> list:
    """Exactly one complete run per repetition, nothing hidden or left, all verified."""
    exp = raw / name
    mans = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert sorted(m.repetition for m in mans if m.status == "complete") == list(
        range(1, reps + 1)), [(m.repetition, m.status) for m in mans]
    assert not [p for p in exp.iterdir() if p.name.startswith(".tmp-")]
    assert not (exp / STATE_DIR / STATE_FILE).exists()
    for d in iter_run_dirs(raw):
        verify_run(d)
    return mans


def test_sigkill_at_each_step_of_writing_a_run_and_resume_completes(
        tmp_path: Path, write_steps: dict[str, tuple[str, int]]) -> None:
    path = write_spec(tmp_path)
    for step, (call, when) in write_steps.items():
        raw = tmp_path / f"raw-{step}"
        tag = uuid.uuid4().hex
        res = harness("run", str(path), "--out", str(raw), "--no-progress", "-q", tag=tag,
                      strace=["-o", "/dev/null", "-e", f"trace={call}",
                              "-e", f"inject={call}:signal=SIGKILL:when={when}"])
        assert res.returncode == -signal.SIGKILL or res.returncode == 128 + 9, (
            step, res.returncode, res.stderr)
        orphans = memcached_pids(tag)
        assert orphans, f"{step}: the killed run's memcached should still run"
        state = json.loads((raw / "k" / STATE_DIR / STATE_FILE).read_text())
        assert {s["pid"] for s in state["servers"]} == orphans
        workdir = Path(state["workdirs"]["client"])
        assert workdir.is_dir()
        # Nothing hidden counts as done.
        assert completed_runs(raw / "k") == (
            set() if step in ("ops", "manifest", "tmp_dir", "rename") else
            {(read_manifest(d).config_id, 1) for d in iter_run_dirs(raw)})
        resumed = harness("run", str(path), "--out", str(raw), "--no-progress", "-q",
                          "--resume")
        assert resumed.returncode == 0, (step, resumed.stderr)
        mans = assert_whole(raw, "k", 2)
        assert len(mans) == 2, (step, [m.status for m in mans])
        err = resumed.stderr
        assert "did not end cleanly" in err, (step, err)
        assert re.search(r"stopped memcached server 'cache' \(pid \d+ on server\)", err), err
        if step == "ops":  # half-written: removed, and the records come from the client
            assert "half-written" in err and "records recovered and written as complete" in err
            [rec] = [m for m in mans if "recovered" in m.extra]
            assert rec.extra["recovered"]["by"] == "harness run"
            assert rec.counts["measured"] == 4000 and len(read_ops(
                raw / "k" / rec.run_id)) == 4000
        elif step in ("manifest", "tmp_dir", "rename"):
            assert "found whole in its temp directory" in err and "written already" in err
        else:
            assert "written already" in err
        assert all(gone(pid) for pid in orphans), step
        assert not workdir.exists(), f"{step}: the client work directory was left"


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_a_run_is_written_waits_for_the_write(
        tmp_path: Path, sig: str, write_steps: dict[str, tuple[str, int]]) -> None:
    """One signal at the first, a middle and the last write step (SIGTERM: at the first
    and the last, it takes the same path; SIGKILL is tried at every step above): the run
    is written whole (it was measured in full, so complete), then the grid stops: exit
    130 / 143, and --resume does the rest."""
    path = write_spec(tmp_path)
    code = 130 if sig == "SIGINT" else 143
    names = list(write_steps)
    picked = (names[0], names[len(names) // 2], "rename") if sig == "SIGINT" else (
        names[0], "rename")
    steps = {k: write_steps[k] for k in dict.fromkeys(picked)}
    for step, (call, when) in steps.items():
        raw = tmp_path / f"raw-{step}"
        res = harness("run", str(path), "--out", str(raw), "--no-progress", "-q",
                      strace=["-o", "/dev/null", "-e", f"trace={call}",
                              "-e", f"inject={call}:signal={sig}:when={when}"])
        assert res.returncode == code, (step, res.stderr)
        assert "finishing writing run" in res.stderr and "Traceback" not in res.stderr
        [man] = [read_manifest(d) for d in iter_run_dirs(raw)]
        assert man.status == "complete" and man.counts["measured"] == 4000, step
        assert not (raw / "k" / STATE_DIR / STATE_FILE).exists(), step
        for svc in man.services.values():
            assert all(gone(pid) for pid in svc["pids"]), step
        resumed = harness("run", str(path), "--out", str(raw), "--no-progress", "-q",
                          "--resume")
        assert resumed.returncode == 0, resumed.stderr
        assert "did not end cleanly" not in resumed.stderr
        assert_whole(raw, "k", 2)


def test_a_second_signal_stops_at_once_and_keeps_the_records_for_resume(
        tmp_path: Path, write_steps: dict[str, tuple[str, int]]) -> None:
    """Ctrl-C at the ops file's fsync and again at the next one: the write is abandoned,
    the console says where the records are, and --resume writes them as the run."""
    path = write_spec(tmp_path)
    call, when = write_steps["ops"]
    raw = tmp_path / "raw"
    res = harness("run", str(path), "--out", str(raw), "--no-progress", "-q",
                  strace=["-o", "/dev/null", "-e", f"trace={call}",
                          "-e", f"inject={call}:signal=SIGINT:when={when}+1"])
    assert res.returncode == 130, res.stderr
    assert "stopped at once" in res.stderr and "Traceback" not in res.stderr
    m = re.search(r"its records stay on client \((/[^)]*)\)", res.stderr)
    assert m, res.stderr
    workdir = Path(m.group(1))
    assert sorted(p.suffix for p in workdir.glob("*.npz")) == [".npz", ".npz"]
    assert list(iter_run_dirs(raw)) == []
    resumed = harness("run", str(path), "--out", str(raw), "--no-progress", "-q",
                      "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "4,000 records recovered and written as complete" in resumed.stderr
    assert_whole(raw, "k", 2)
    assert not workdir.exists()


def served_ops(tag: str) -> int:
    """Gets and sets that this test's memcached (carrying `tag`) has answered, by its own
    `stats`: the server's count, not the kit's."""
    [pid] = memcached_pids(tag)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    address, port = argv[argv.index("-l") + 1], int(argv[argv.index("-p") + 1])
    stats = memcached_stats(address, port)
    return int(stats["cmd_get"]) + int(stats["cmd_set"])


def spilled_parts(worker: int) -> int:
    """Parts of records client `worker` has written so far (its `.parts` index)."""
    with contextlib.suppress(OSError, ValueError):
        return len(json.loads(Path(worker_base(worker) + ".parts").read_text()))
    return 0


def _start_and_wait_until_measuring(cmd: list[str], tag: str, served: int = 2000,
                                    parts: int = 0) -> tuple[subprocess.Popen, list]:
    """Start `cmd` (a `harness run` of SPEC: one memcached, two clients) and return once
    both clients are released (their go file) and memcached has answered `served` more
    ops since, and each client has spilled `parts` parts of records: the run is measuring
    and has records, however busy the machine. The deadline only keeps a harness that
    never gets there from hanging the suite."""
    env = {**os.environ, "HARNESS_TEST_TAG": tag}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    deadline = time.monotonic() + 300

    def wait_for(event: Callable[[], object], what: str) -> None:
        while not event():
            if proc.poll() is not None:
                pytest.fail(f"the harness exited ({proc.returncode}) before {what}: "
                            f"{proc.communicate()[1]}")
            assert time.monotonic() < deadline, f"the harness never got to {what}"
            time.sleep(0.01)

    def workers() -> list[int]:
        return _tagged_workers(f"HARNESS_TEST_TAG={tag}")

    wait_for(lambda: len(workers()) == 2, "starting its two clients")
    pids = workers()
    wait_for(lambda: all(Path(worker_base(p) + ".go").exists() for p in pids),
             "releasing its clients")
    before = served_ops(tag)  # the preload is done: ops from here on are measured ones
    wait_for(lambda: served_ops(tag) - before >= served, f"{served} ops measured")
    wait_for(lambda: all(spilled_parts(p) >= parts for p in pids), f"{parts} parts spilled")
    return proc, pids


@pytest.mark.parametrize("chunk", [None, "1000"], ids=["whole", "spilled"])
def test_sigkill_mid_run_leaves_no_orphans_after_cleanup_and_keeps_the_records(
        tmp_path: Path, chunk: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 while the clients measure: the local agent's input closes, so the clients
    stop by themselves and save what they measured; memcached stays until `harness
    cleanup`, which stops it (and only it), writes the run as partial and removes the
    work directory; --resume then measures what is missing. Spilled: the clients had
    written chunks of 1,000 records as they went; cleanup copies those parts too."""
    if chunk:
        monkeypatch.setenv(CHUNK_ENV, chunk)
    path = write_spec(tmp_path, run="{duration_s: 30}")
    raw = tmp_path / "raw"
    tag = uuid.uuid4().hex
    proc, workers = _start_and_wait_until_measuring(
        [sys.executable, "-m", "harness.cli", "run", str(path), "--out", str(raw),
         "--no-progress", "-q"], tag, parts=2 if chunk else 0)
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(gone(p) for p in workers):
        time.sleep(0.1)
    assert all(gone(p) for p in workers), "clients outlived the harness"
    orphans = memcached_pids(tag)
    assert len(orphans) == 1
    state = json.loads((raw / "k" / STATE_DIR / STATE_FILE).read_text())
    workdir = Path(state["workdirs"]["client"])
    [inflight] = state["runs"]
    # A second harness into the same experiment meanwhile: refused while the first holds
    # the lock, allowed (and cleaning up) once it is gone - it is gone now.
    res = harness("cleanup", str(path), "--out", str(raw))
    assert res.returncode == 0, res.stderr + res.stdout
    out = res.stdout + res.stderr
    assert f"stopped memcached server 'cache' (pid {orphans.pop()} on server)" in out
    assert "records recovered and written as partial" in out
    assert "1 run(s) written" in out
    assert not workdir.exists() and not memcached_pids(tag)
    [man] = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert man.run_id == inflight["run_id"] and man.status == "partial"
    assert man.extra["recovered"]["by"] == "harness cleanup"
    assert man.counts["ok"] > 1000
    assert {w["state"] for w in man.loadgen["workers"]} == {"stopped"}
    assert "the harness stopped during this run" in man.error
    rows = read_ops(man_dir := next(iter_run_dirs(raw))).num_rows
    verify_run(man_dir)
    assert rows == sum(w["records"] for w in man.loadgen["workers"]) == man.counts["total"]
    spilled = [len(w.get("parts") or []) for w in man.loadgen["workers"]]
    assert (min(spilled) >= 2) if chunk else spilled == [0, 0]
    again = harness("cleanup", str(path), "--out", str(raw))
    assert again.returncode == 0 and "0 process(es) stopped, 0 run(s) written" in again.stdout


def test_a_second_harness_into_the_same_experiment_is_refused(tmp_path: Path) -> None:
    """The first harness is measuring (waited for, by its clients' go file and memcached's
    count) and stays so until this test stops it: its run is far longer than the test,
    so however long the second harness takes to arrive on a busy machine, it finds the
    first one's run in progress, and Ctrl-C keeps that run as partial."""
    path = write_spec(tmp_path, run="{duration_s: 3600}")
    raw = tmp_path / "raw"
    tag = uuid.uuid4().hex
    proc, workers = _start_and_wait_until_measuring(
        [sys.executable, "-m", "harness.cli", "run", str(path), "--out", str(raw),
         "--no-progress", "-q"], tag)
    try:
        second = harness("run", str(path), "--out", str(raw), "--no-progress", "-q")
        assert second.returncode == 2, second.stderr
        assert (f"another `harness run` is writing this experiment (pid {proc.pid} on "
                in second.stderr)
        assert "Traceback" not in second.stderr
        cleanup = harness("cleanup", str(path), "--out", str(raw))
        assert cleanup.returncode == 2 and "another `harness run`" in cleanup.stderr
        # Still the first run, still measuring: nothing written, its clients there.
        assert proc.poll() is None and list(iter_run_dirs(raw)) == []
        assert not any(gone(p) for p in workers)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    assert proc.returncode == 130
    [man] = [read_manifest(d) for d in iter_run_dirs(raw)]
    assert man.status == "partial" and man.repetition == 1
    assert man.counts["ok"] > 1000  # of the 2,000 memcached had answered before the second


def test_worker_whose_harness_is_gone_exits_before_go(tmp_path: Path) -> None:
    """A client process whose alive file is stale (no agent watches it) and that never
    got its go file exits at once instead of waiting 300 s."""
    from harness.loadgen import ClientConfig
    from harness.run.worker import ORPHAN_BEFORE_GO_S
    from harness.settings import resolve
    from harness.workloads import WORKLOADS

    base = tmp_path / "c000"
    files = {k: f"{base}.{k}" for k in ("ready", "go", "status", "log", "alive", "out")}
    files["out"] = f"{base}.npz"
    Path(files["alive"]).touch()
    old = time.time() - ORPHAN_BEFORE_GO_S - 5
    os.utime(files["alive"], (old, old))
    with require_memcached() as port:
        params = resolve({"key_space": 10}, WORKLOADS.get("memcache_mix").params)
        cfg = ClientConfig(workload="memcache_mix", params=params,
                           endpoints={"memcached": {"kind": "memcached", "host": "127.0.0.1",
                                                    "port": port}},
                           client_id=0, ops=10, files=files)
        (tmp_path / "cfg.json").write_text(json.dumps(dataclasses.asdict(cfg)))
        began = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "harness.worker",
                              str(tmp_path / "cfg.json")], capture_output=True, text=True,
                             timeout=60)
    assert time.monotonic() - began < 20
    status = json.loads(Path(files["status"]).read_text())
    assert status["state"] == "stopped", res.stdout + res.stderr
    assert "the harness that started it is gone" in status["error"]


class require_memcached:
    """A memcached on a free loopback port for the duration of the block."""

    def __enter__(self) -> int:
        from harness.services import SERVICES

        self.svc = SERVICES.get("memcached").start(LocalHost(), "cache", {})
        return self.svc.endpoint.port

    def __exit__(self, *exc: object) -> None:
        self.svc.stop()


def test_watchdog_stops_a_measuring_worker_whose_harness_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from harness.run import worker

    monkeypatch.setattr(worker, "ORPHAN_AFTER_GO_S", 0.5)
    alive = tmp_path / "alive"
    alive.touch()

    class Run:
        stopped = False

        def stop(self) -> None:
            self.stopped = True

    async def scenario(fresh: bool) -> tuple[Run, str | None]:
        run = Run()
        dog = worker._Watchdog(run, str(alive))  # type: ignore[arg-type]
        dog.start()
        for _ in range(30):
            if fresh:
                alive.touch()
            await asyncio.sleep(0.1)
        dog.stop()
        return run, dog.fired

    run, fired = asyncio.run(scenario(fresh=True))
    assert not run.stopped and fired is None
    run, fired = asyncio.run(scenario(fresh=False))
    assert run.stopped and fired and "the harness that started it is gone" in fired


# -- --out checked before anything runs ----------------------------------------------------

@pytest.mark.parametrize("case", ["file", "dangling", "under_file", "long_name"])
def test_bad_out_is_refused_by_validate_and_run_before_anything_starts(
        tmp_path: Path, case: str, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = "k" * 300 if case == "long_name" else "k"
    path = write_spec(tmp_path, name=name if case != "long_name" else "long")
    if case == "long_name":
        path.write_text(path.read_text().replace("name: long", f"name: {name}"))
    out = tmp_path / "out"
    if case == "file":
        out.write_text("not a directory")
        expect = "is a file, not a raw-results directory"
    elif case == "dangling":
        out.symlink_to(tmp_path / "nowhere")
        expect = "a symlink to"
    elif case == "under_file":
        (tmp_path / "f").write_text("x")
        out = tmp_path / "f" / "raw"
        expect = "cannot be made"
    else:  # the spec's own rule comes first (a name is at most 100 characters)
        expect = ":name: "
    tag = uuid.uuid4().hex
    monkeypatch.setenv("HARNESS_TEST_TAG", tag)  # servers started here would carry it
    for cmd in (["validate", str(path), "--out", str(out)],
                ["run", str(path), "--out", str(out), "--no-progress", "-q"]):
        assert cli_main(cmd) == 2, cmd
        err = capsys.readouterr().err
        assert expect in err and "Traceback" not in err, err
        assert str(out) in err or case == "long_name", err
    assert not memcached_pids(tag)  # nothing was started


def test_out_names_longer_than_the_file_system_allows_are_refused(tmp_path: Path) -> None:
    from harness.results.outdir import out_dir_problems

    [problem] = out_dir_problems(tmp_path / "raw", "k" * 300, 1000)
    assert "is 300 bytes, longer than the 255 this file system allows" in problem
    [problem] = out_dir_problems(tmp_path / ("d" * 256) / "raw", "k", 1000)
    assert "longer than the 255" in problem
    assert out_dir_problems(tmp_path / "raw", "k", 1000) == []


@pytest.fixture
def readonly_dir(tmp_path: Path):
    with mounted_tmpfs(tmp_path / "ro", "ro,size=1m") as mnt:
        yield mnt


def test_read_only_out_is_refused_before_anything_starts(
        tmp_path: Path, readonly_dir: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_spec(tmp_path)
    assert cli_main(["run", str(path), "--out", str(readonly_dir / "raw"),
                     "--no-progress", "-q"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write in {readonly_dir} (Read-only file system)" in err
    res = harness("hosts", "check", str(path), "--out", str(readonly_dir))
    assert res.returncode == 1 and "Read-only file system" in res.stdout


# -- the same over SSH, on machines of their own ---------------------------------------------

MACHINE_SPEC = """\
name: remote
workload: memcache_mix
hosts: {hosts}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 2, connections: 2}}
params: {{key_space: 1000}}
repetitions: 2
run: {{duration_s: 60}}
"""


def test_sigkill_with_ssh_machines_leaves_nothing_after_cleanup(tmp_path: Path) -> None:
    """Server and clients on namespace machines with their own addresses, reached over
    SSH. kill -9 of the harness mid-run: the agents' channels close, but over SSH that may
    be a dropped link, so the client processes go on measuring. `harness cleanup` reaches
    both machines over SSH, stops the clients (they save their records) and memcached,
    fetches the records with their checksums, writes the run, removes the work
    directories."""
    import yaml

    from tests.fixtures.machines import machine_bed

    with machine_bed(["s", "c"]) as bed:
        hosts = bed.hosts_yaml({"server": "s", "client": "c"})
        path = tmp_path / "remote.yaml"
        path.write_text(MACHINE_SPEC.format(
            hosts=yaml.safe_dump(hosts, default_flow_style=True, width=10_000).strip()))
        raw = tmp_path / "raw"
        state_file = raw / "remote" / STATE_DIR / STATE_FILE
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(path),
                                 "--out", str(raw), "--no-progress", "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        workers: list[dict] = []
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                state = json.loads(state_file.read_text())
                workers = [w for r in state["runs"] for w in r["workers"]]
                if len(workers) == 2 and all(Path(w["files"]["go"]).exists()
                                             for w in workers):
                    break  # measuring (the machines share this file system)
            time.sleep(0.05)
        assert len(workers) == 2, proc.stderr.read() if proc.poll() is not None else ""
        time.sleep(1.0)
        proc.kill()
        proc.communicate(timeout=30)
        state = json.loads(state_file.read_text())
        [server] = state["servers"]
        assert server["host"] == "server" and not gone(server["pid"])
        time.sleep(2.0)  # the SSH sessions are gone; over SSH the clients measure on
        assert not any(gone(w["pid"]) for w in workers)
        res = harness("cleanup", str(path), "--out", str(raw))
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        for w in workers:
            assert f"client {w['client']} of run" in out and gone(w["pid"])
        assert f"stopped memcached server 'cache' (pid {server['pid']} on server)" in out
        assert gone(server["pid"])
        assert "records recovered and written as partial" in out
        [man] = [read_manifest(d) for d in iter_run_dirs(raw)]
        assert man.extra["recovered"]["by"] == "harness cleanup"
        assert man.counts["ok"] > 1000 and man.hosts["client"]
        assert {w["host"] for w in man.loadgen["workers"]} == {"client"}
        assert not Path(state["workdirs"]["client"]).exists()
        assert not state_file.exists()
