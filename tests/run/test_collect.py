"""Collecting client records from real SSH machines: without SFTP, with checksums, and
never deleting a record file on a client before its copy is verified here.

The client machine is a real sshd on 127.0.0.1 (tests/fixtures/sshd_variants.py) whose
config has no `Subsystem sftp` line; a broken transfer is that sshd killed (listener and
connections) as collection begins, so the copy fails for real, then brought back.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.results import OpsArrays, iter_run_dirs, read_manifest, read_ops, verify_run
from harness.run.clients import ClientGroup, Collected
from harness.run.recollect import _config_and_log
from harness.run.runner import Runner
from harness.run.transfer import fetch_records
from harness.run.workerctl import sha256_of
from harness.spec import load_spec
from tests.fixtures.servers import require_service
from tests.fixtures.sshd_variants import SSHDaemon

pytestmark = pytest.mark.integration

SPEC = """\
name: nosftp
workload: memcache_mix
hosts:
  server: localhost
  box: {{target: '{target}', python: '{python}', known_hosts: '{known_hosts}',
        identity_file: '{identity_file}'}}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [box], processes: 2, connections: 1}}
params: {{key_space: 1000}}
run: {{ops: 2000}}
"""


@pytest.fixture(autouse=True)
def _memcached_installed() -> None:
    require_service("memcached", LocalHost())


def write_spec(tmp_path: Path, daemon: SSHDaemon) -> Path:
    s = daemon.server
    path = tmp_path / "nosftp.yaml"
    path.write_text(SPEC.format(target=s.target, python=sys.executable,
                                known_hosts=s.known_hosts, identity_file=s.identity_file))
    return path


def test_machine_without_sftp_gives_a_complete_run_with_every_record(
        tmp_path: Path, sshd_no_sftp: SSHDaemon) -> None:
    spec = load_spec(write_spec(tmp_path, sshd_no_sftp))
    [outcome] = Runner(spec, tmp_path / "raw", progress=False).run()
    [run_dir] = iter_run_dirs(tmp_path / "raw")
    man = verify_run(run_dir)
    assert (outcome.status, man.status, man.error) == ("complete", "complete", None)
    assert [w["state"] for w in man.loadgen["workers"]] == ["complete", "complete"]
    assert man.ops_file["rows"] == 2000 == len(read_ops(run_dir))


@pytest.mark.parametrize("command", ["collect", "run --resume"])
def test_broken_transfer_keeps_records_on_the_client_and_collect_recovers_them(
        tmp_path: Path, sshd_no_sftp: SSHDaemon, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture, command: str) -> None:
    """The client machine's sshd dies as collection begins: the run is not complete, its
    error names the machine and where the records are, the record files are still there;
    with the machine back, `harness collect` (or `harness run --resume`) fetches and
    verifies them and completes the run, under the same run id."""
    path = write_spec(tmp_path, sshd_no_sftp)
    original = ClientGroup.collect
    kept: list[list[str]] = []

    def collect_with_the_machine_gone(self: ClientGroup) -> Collected:
        kept.append([w.files["out"] for w in self.workers])
        sshd_no_sftp.stop()
        return original(self)

    monkeypatch.setattr(ClientGroup, "collect", collect_with_the_machine_gone)
    [outcome] = Runner(load_spec(path), tmp_path / "raw", progress=False).run()
    monkeypatch.undo()
    [run_dir] = iter_run_dirs(tmp_path / "raw")
    man = verify_run(run_dir)
    assert outcome.status in ("partial", "failed") and man.status == outcome.status
    [outs] = kept
    for remote in outs:
        assert Path(remote).is_file(), f"{remote} was deleted before it was copied"
        assert remote in man.error
    assert "box" in man.error and "harness collect" in man.error

    sshd_no_sftp.start()
    verb, *flags = command.split()
    capsys.readouterr()
    assert cli_main([verb, str(path), "--out", str(tmp_path / "raw"), *flags]) == 0
    out = capsys.readouterr()
    assert "2 record file(s) collected; now complete" in out.out + out.err
    [again] = iter_run_dirs(tmp_path / "raw")
    assert again == run_dir  # the same run, now whole: --resume did not run it again
    man = verify_run(run_dir)
    assert man.extra["collected_later"][0]["clients"] == [0, 1]
    assert (man.status, man.error) == ("complete", None)
    assert [w["state"] for w in man.loadgen["workers"]] == ["complete", "complete"]
    assert man.ops_file["rows"] == 2000 == len(read_ops(run_dir))
    for remote in outs:  # copied and verified: now removed from the client
        assert not Path(remote).exists()
    # With them the work directory: nothing of the run stays on the machine, not even
    # the clients' configurations, which name the server (and would name its password).
    assert not Path(outs[0]).parent.exists()
    # Nothing left to pick up: a second collect changes nothing.
    assert cli_main(["collect", str(path), "--out", str(tmp_path / "raw")]) == 0
    assert "nothing to collect" in capsys.readouterr().out
    assert [d.name for d in iter_run_dirs(tmp_path / "raw")] == [run_dir.name]


def _client_files(d: Path, cid: int, records: int, status: dict | None) -> dict[str, str]:
    files = {k: str(d / f"c{cid}.{k}") for k in ("ready", "go", "status", "log")}
    files["out"] = str(d / f"c{cid}.npz")
    ops = OpsArrays.empty(("get", "set"))
    ops = OpsArrays(ops.op_names, *(np.zeros(records, a.dtype) for a in (
        ops.client, ops.op, ops.start_ns, ops.latency_ns, ops.intended_ns, ops.status,
        ops.nbytes, ops.warmup)))
    ops.save_npz(Path(files["out"]))
    if status is not None:
        Path(files["status"]).write_text(json.dumps(status))
    return files


def test_a_copy_that_does_not_match_its_checksum_is_pending_and_the_file_stays(
        tmp_path: Path) -> None:
    """Client 0's status carries the sha256 of what it wrote, client 1's a different one
    (the file changed after it was written): 0 is loaded and its files may go, 1 is
    pending with its path named, and nothing is removed on the machine by fetching."""
    d = tmp_path / "machine"
    d.mkdir()
    f0 = _client_files(d, 0, 5, None)
    Path(f0["status"]).write_text(json.dumps({"state": "complete", "out": sha256_of(f0["out"])}))
    f1 = _client_files(d, 1, 7, {"state": "complete", "out": {"sha256": "0" * 64}})
    (tmp_path / "copies").mkdir()
    got = fetch_records(LocalHost("m1"), [(0, f0), (1, f1)], tmp_path / "copies",
                        spec_path="x.yaml")
    assert [len(OpsArrays.load_npz(p)) for p in got.parts] == [5]
    [p] = got.pending
    assert (p.host, p.client, p.files["out"]) == ("m1", 1, f1["out"])
    assert "checksum mismatch" in p.error and f1["out"] in p.error
    assert "`harness collect x.yaml`" in p.error and got.errors == [p.error]
    assert sorted(got.discardable) == sorted(f0[k] for k in ("ready", "go", "status", "out"))
    assert Path(f0["out"]).exists() and Path(f1["out"]).exists()
    assert list((tmp_path / "copies").iterdir()) == [tmp_path / "copies" / "m1-c0.npz"]


def test_a_kept_work_directory_holds_only_the_records_not_yet_copied(
        tmp_path: Path, sshd_no_sftp: SSHDaemon, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """Three runs; the machine is gone as the second one's records are collected and back
    for the third. Its work directory stays for `harness collect`, with the second run's
    files only: the other runs' configurations (which name the server) and logs go, as
    a finished grid's do. Once those records are collected, the directory goes too."""
    path = write_spec(tmp_path, sshd_no_sftp)
    path.write_text(path.read_text() + "repetitions: 3\n")
    original = ClientGroup.collect
    kept: list[list[str]] = []

    def second_with_the_machine_gone(self: ClientGroup) -> Collected:
        if self.plan.index != 1:
            return original(self)
        kept.append([w.files["out"] for w in self.workers])
        sshd_no_sftp.stop()
        try:
            return original(self)
        finally:
            sshd_no_sftp.start()  # back for the third run

    monkeypatch.setattr(ClientGroup, "collect", second_with_the_machine_gone)
    outcomes = Runner(load_spec(path), tmp_path / "raw", progress=False).run()
    monkeypatch.undo()
    assert [o.status for o in outcomes][::2] == ["complete", "complete"]
    [outs] = kept
    workdir = Path(outs[0]).parent
    left = sorted(p.name for p in workdir.iterdir())
    assert ".kvbench-owner" in left, left
    assert [n for n in left if n != ".kvbench-owner"
            and not n.startswith(("run00001-c000.", "run00001-c001."))] == [], left
    for remote in outs:
        assert Path(remote).is_file()
        assert Path(remote[: -len(".npz")] + ".json").is_file()  # the worker's config
    [pending] = [read_manifest(d).typed_extra.pending_records
                 for d in iter_run_dirs(tmp_path / "raw")
                 if read_manifest(d).typed_extra.pending_records]
    assert sorted(p["files"]["config"] for p in pending) == sorted(
        o[: -len(".npz")] + ".json" for o in outs)  # named, as the records are

    capsys.readouterr()
    assert cli_main(["collect", str(path), "--out", str(tmp_path / "raw")]) == 0
    assert "now complete" in capsys.readouterr().out
    assert not workdir.exists()
    assert [verify_run(d).status for d in iter_run_dirs(tmp_path / "raw")] == ["complete"] * 3


def test_a_collected_clients_configuration_is_the_one_its_files_name() -> None:
    """Named since this round; a manifest written before names only the records, and
    the configuration is then the file beside them that the client's name begins."""
    new = {"out": "/w/run00003-c001.npz", "log": "/w/run00003-c001.log",
           "config": "/w/run00003-c001.json"}
    assert _config_and_log(new) == ["/w/run00003-c001.json", "/w/run00003-c001.log"]
    old = {k: v for k, v in new.items() if k != "config"}
    assert _config_and_log(old) == ["/w/run00003-c001.json", "/w/run00003-c001.log"]
    assert _config_and_log({"out": "/w/notrecords.txt", "log": "/w/x.log"}) == []
