"""End to end against real PostgreSQL and memcached: run, resume, faults, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.errors import SpecError
from harness.hosts import LocalHost, free_port
from harness.results import iter_run_dirs, read_manifest, read_ops, verify_run
from harness.run.runner import Runner
from harness.spec import load_spec
from tests.fixtures.procs import tagged_workers
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

SPEC = """\
name: {name}
workload: datastore_memcache
hosts:
  server: {server}
  client: {client}
services:
  datastore: {{kind: postgres, host: server, settings: {{fsync: false}}}}
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: {processes}, connections: 1}}
params: {{value_size_bytes: 100}}
grid:
  op: {ops}
repetitions: {reps}
run: {{ops: {n}, warmup_ops: 5, timeout_s: 2, max_consecutive_errors: 20}}
"""


def write_spec(tmp_path: Path, name: str = "t", ops: str = "[store_write, mem_read_hit]",
               reps: int = 2, n: int = 30, processes: int = 1, server: str = "localhost",
               client: str = "localhost", extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, ops=ops, reps=reps, n=n, processes=processes,
                                server=server, client=client) + extra)
    return path


@pytest.fixture(autouse=True)
def _servers_installed() -> None:
    host = LocalHost()
    require_service("postgres", host)
    require_service("memcached", host)


def manifests(raw: Path) -> list:
    return [read_manifest(d) for d in iter_run_dirs(raw)]


def test_run_writes_one_complete_directory_per_configuration_and_repetition(
        tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    spec = load_spec(write_spec(tmp_path, processes=2))
    outcomes = Runner(spec, raw, progress=False).run()
    assert [o.status for o in outcomes] == ["complete"] * 4
    mans = manifests(raw)
    assert len(mans) == 4
    assert sorted((m.grid_point["op"], m.repetition) for m in mans) == [
        ("mem_read_hit", 1), ("mem_read_hit", 2), ("store_write", 1), ("store_write", 2)]
    for m, run_dir in zip(mans, iter_run_dirs(raw), strict=True):
        verify_run(run_dir)
        assert m.counts["measured"] == 30 and m.counts["warmup"] == 5
        assert m.counts["ok"] == 30
        assert m.services["datastore"]["version"][:2].isdigit()
        assert m.services["cache"]["config"]["maxbytes"] == 64 * 1024 * 1024
        assert m.hosts["client"]["cpu_count"] >= 1 and m.hosts["server"]["kernel"]
        assert m.loadgen["processes"] == 2 and len(m.loadgen["workers"]) == 2
        assert m.kit["version"] and m.spec_file.endswith("t.yaml")
        ops = read_ops(run_dir).to_pandas()
        assert sorted(ops["client"].unique()) == [0, 1]
        assert set(ops["op"].astype(str)) == {m.grid_point["op"]}
        # Warm-up ops too: a clean run has no error anywhere in its raw data.
        assert set(ops["status"].astype(str)) == {"ok"} and ops["warmup"].sum() == 5
    # Nothing left running: every server pid recorded in the manifests is gone.
    for m in mans:
        for svc in m.services.values():
            for pid in svc["pids"]:
                assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_resume_skips_complete_runs_and_redoes_missing_ones(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    path = write_spec(tmp_path, ops="[mem_write]", reps=3, n=10)
    Runner(load_spec(path), raw, progress=False).run()
    assert len(manifests(raw)) == 3
    assert Runner(load_spec(path), raw, progress=False, resume=True).run() == []
    victim = next(d for d in iter_run_dirs(raw) if read_manifest(d).repetition == 2)
    for f in victim.iterdir():
        f.unlink()
    victim.rmdir()
    redone = Runner(load_spec(path), raw, progress=False, resume=True).run()
    assert [(o.plan.repetition, o.status) for o in redone] == [(2, "complete")]
    assert sorted(m.repetition for m in manifests(raw)) == [1, 2, 3]
    # Without --resume every run is new: never overwritten, a new run_id each time.
    Runner(load_spec(path), raw, progress=False).run()
    assert len({m.run_id for m in manifests(raw)}) == 6


def test_labels_go_into_every_manifest_and_resume_counts_runs_of_the_same_labels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--label adds to the spec's labels; --resume skips only runs labelled alike (a run
    of another commit is not one of this commit's repetitions), and pooling keeps both
    commits' runs (no duplicates of each other), grouped apart by ``label_commit``."""
    raw = tmp_path / "raw"
    path = write_spec(tmp_path, ops="[mem_write]", reps=2, n=10,
                      extra="labels: {suite: nightly, commit: spec}\n")
    base = ["run", str(path), "--out", str(raw), "--no-progress", "-q"]
    assert cli_main([*base, "--label", "commit=aaa111"]) == 0
    assert cli_main([*base, "--label", "commit=bbb222", "--resume"]) == 0  # not done yet
    assert cli_main([*base, "--label", "commit=bbb222", "--resume"]) == 0  # now it is
    labels = sorted((m.labels["commit"], m.repetition) for m in manifests(raw))
    assert labels == [("aaa111", 1), ("aaa111", 2), ("bbb222", 1), ("bbb222", 2)]
    assert {m.labels["suite"] for m in manifests(raw)} == {"nightly"}
    capsys.readouterr()
    assert cli_main(["summary", str(raw), "--by", "label_commit", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["label_commit"], r["runs"]) for r in rows) == [("aaa111", 2),
                                                                   ("bbb222", 2)]
    # A bad label is refused before anything runs, naming it.
    assert cli_main([*base, "--label", "commit"]) != 0
    assert "--label 'commit': expected KEY=VALUE" in capsys.readouterr().err
    assert len(manifests(raw)) == 4


def test_server_killed_mid_run_gives_partial_run_with_records_kept(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    spec = load_spec(write_spec(tmp_path, ops="[mem_read_hit]", reps=1, n=5_000_000))

    def kill_cache(plan, running) -> None:
        pid = running["cache"].processes[0].pid
        threading.Timer(0.7, os.kill, (pid, signal.SIGKILL)).start()

    [outcome] = Runner(spec, raw, progress=False, on_run_start=kill_cache).run()
    assert outcome.status == "partial"
    [run_dir] = list(iter_run_dirs(raw))
    man = verify_run(run_dir)
    assert man.status == "partial"
    assert "cache" in man.error and "not running" in man.error
    assert man.counts["ok"] > 100  # what was measured before the kill is kept
    assert man.counts["error"] == 20  # then max_consecutive_errors error records
    ops = read_ops(run_dir).to_pandas()
    errors = ops[ops["status"] == "error"]
    assert errors["start_ns"].min() > ops[ops["status"] == "ok"]["start_ns"].max()


def test_unreachable_host_is_a_spec_error_before_anything_starts(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    path = write_spec(tmp_path, server=f"root@127.0.0.1:{port}")
    with pytest.raises(SpecError) as info:
        Runner(load_spec(path), tmp_path / "raw", progress=False).run()
    assert any(":hosts.server: cannot connect" in p for p in info.value.problems)
    assert not (tmp_path / "raw").exists()


def test_cli_run_summary_and_bad_spec(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    raw = tmp_path / "raw"
    path = write_spec(tmp_path, ops="[mem_read_hit, mem_read_miss]", reps=2, n=20)
    assert cli_main(["run", str(path), "--out", str(raw), "--no-progress"]) == 0
    capsys.readouterr()
    assert cli_main(["summary", str(raw), "--by", "op", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["op"] for r in rows] == ["mem_read_hit", "mem_read_miss"]
    for r in rows:
        assert r["runs"] == 2 and r["ops"] == 40 and r["error_rate"] == 0
        assert r["throughput_ops_s"] > 0 and 0 < r["latency_p50_ms"] <= r["latency_p99_ms"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("repetitions", "repetitons"))
    assert cli_main(["run", str(bad), "--out", str(raw)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:repetitons: unknown field (did you mean 'repetitions'?)" in err
    assert "Traceback" not in err
    assert cli_main(["run", str(path), "--dry-run"]) == 0
    assert "4 run(s)" in capsys.readouterr().out


def _tagged_workers(tag: str) -> list[int]:
    return tagged_workers(tag)


def test_ctrl_c_keeps_the_current_run_as_partial_and_resume_finishes(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    path = write_spec(tmp_path, ops="[mem_read_hit]", reps=2, n=3_000_000)
    cmd = [sys.executable, "-m", "harness.cli", "run", str(path), "--out", str(raw),
           "--no-progress"]
    # Unique per test run: tmp_path names repeat across concurrent pytest sessions.
    tag_value = uuid.uuid4().hex
    tag = f"HARNESS_TEST_TAG={tag_value}"
    env = {**os.environ, "HARNESS_TEST_TAG": tag_value}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    # Wait until this harness's client process is measuring: workers inherit the tag.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _tagged_workers(tag):
        time.sleep(0.05)
    workers = _tagged_workers(tag)
    assert workers, "the harness never started a client process"
    # Measuring once released: its go file exists (a fresh interpreter can take over a
    # second to get there on a busy machine; a Ctrl-C before that finds nothing to keep).
    config = (Path(f"/proc/{workers[0]}/cmdline").read_bytes().split(b"\0")[-2]).decode()
    go_file = Path(config.removesuffix(".json") + ".go")
    while time.monotonic() < deadline and not go_file.exists():
        time.sleep(0.01)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    [man] = manifests(raw)
    assert man.status == "partial" and "interrupted" in man.error
    assert man.counts["ok"] > 0
    for svc in man.services.values():
        for pid in svc["pids"]:
            assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid)
    resumed = subprocess.run(
        [*cmd, "--resume", "--set", "run.ops=200"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    statuses = sorted(m.status for m in manifests(raw))
    assert statuses == ["complete", "complete", "partial"]


def test_same_spec_over_ssh_gives_the_same_set_of_runs(tmp_path: Path, sshd) -> None:
    """Servers and clients on the loopback SSH host instead of localhost."""
    remote = (f"{{target: '{sshd.target}', python: '{sys.executable}', "
              f"known_hosts: '{sshd.known_hosts}', identity_file: '{sshd.identity_file}'}}")
    local_raw, ssh_raw = tmp_path / "local", tmp_path / "ssh"
    kw = dict(ops="[store_read, mem_read_hit]", reps=2, n=20, processes=2)
    Runner(load_spec(write_spec(tmp_path, name="same", **kw)), local_raw,
           progress=False).run()
    ssh_spec = write_spec(tmp_path, name="same", server=remote, client=remote, **kw)
    outcomes = Runner(load_spec(ssh_spec), ssh_raw, progress=False).run()
    assert [o.status for o in outcomes] == ["complete"] * 4

    def runs(raw: Path) -> list[tuple]:
        return sorted((m.config_id, m.repetition, m.status, m.counts["measured"])
                      for m in manifests(raw))

    assert runs(ssh_raw) == runs(local_raw)
    for m in manifests(ssh_raw):
        assert m.hosts["server"]["harness_host"] == "server"
        assert {w["host"] for w in m.loadgen["workers"]} == {"client"}
        assert m.services["cache"]["host"] == "server"
        # Credentials never reach the manifest: no key material, no identity file path.
        text = json.dumps(m.to_dict())
        assert "PRIVATE KEY" not in text and str(sshd.identity_file) not in text


def test_clients_on_two_hosts_start_together_and_merge_into_one_run(
        tmp_path: Path, sshd) -> None:
    remote = (f"{{target: '{sshd.target}', python: '{sys.executable}', "
              f"known_hosts: '{sshd.known_hosts}', identity_file: '{sshd.identity_file}'}}")
    path = write_spec(tmp_path, ops="[mem_read_hit]", reps=1, n=4000, processes=2)
    text = path.read_text().replace("  client: localhost\n",
                                    f"  client: localhost\n  remote: {remote}\n")
    path.write_text(text.replace("hosts: [client]", "hosts: [client, remote]"))
    [outcome] = Runner(load_spec(path), tmp_path / "raw", progress=False).run()
    assert outcome.status == "complete"
    [run_dir] = list(iter_run_dirs(tmp_path / "raw"))
    man = read_manifest(run_dir)
    assert sorted(w["host"] for w in man.loadgen["workers"]) == ["client", "remote"]
    offsets = man.loadgen["clock_offsets"]
    assert offsets["client"] == {"offset_ns": 0, "uncertainty_ns": 0}
    assert abs(offsets["remote"]["offset_ns"]) <= offsets["remote"]["uncertainty_ns"] + 1e6
    ops = read_ops(run_dir).to_pandas()
    ops = ops[~ops["warmup"]]
    assert sorted(ops["client"].unique()) == [0, 1] and len(ops) == 4000
    first = ops.groupby("client")["start_ns"].min()
    # Released by one common start despite ~0.2 s per SSH command on the remote side.
    assert abs(first[0] - first[1]) < 50_000_000


def test_until_adds_repetitions_while_the_ci_is_wide(tmp_path: Path) -> None:
    import io

    raw = tmp_path / "raw"
    path = write_spec(tmp_path, ops="[mem_read_hit, mem_write]", reps=2, n=50)
    # 0.001 % cannot be reached on a real machine: every configuration runs to the max.
    path.write_text(path.read_text() + "until: {ci_within_pct: 0.001, max_repetitions: 4}\n")
    console = io.StringIO()
    outcomes = Runner(load_spec(path), raw, progress=False, stream=console).run()
    assert len(outcomes) == 8
    reps = sorted((m.grid_point["op"], m.repetition) for m in manifests(raw))
    assert reps == [(op, r) for op in ("mem_read_hit", "mem_write") for r in (1, 2, 3, 4)]
    said = console.getvalue()
    assert said.count("after 4 repetitions (max_repetitions)") == 2
    # A lax target is met by the minimum: nothing is added (resume: nothing runs at all).
    path.write_text(path.read_text().replace("0.001", "99"))
    assert Runner(load_spec(path), raw, progress=False, resume=True).run() == []


def test_until_is_validated(tmp_path: Path) -> None:
    path = write_spec(tmp_path, reps=3)
    path.write_text(path.read_text() + "until: {ci_within_pct: 0, max_repetitions: 2}\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = "\n".join(info.value.problems)
    assert ":until.ci_within_pct: required: a percentage" in text
    path.write_text(path.read_text().replace("ci_within_pct: 0,", "ci_within_pct: 5,"))
    with pytest.raises(SpecError, match=r"until.max_repetitions: must be at least"):
        load_spec(path)
    path.write_text(path.read_text().replace("max_repetitions", "max_reps"))
    with pytest.raises(SpecError, match=r"until.max_reps: unknown setting"):
        load_spec(path)
