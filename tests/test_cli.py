"""CLI commands that are not covered by the runner tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.hosts import free_port

SPEC = """\
name: hc
workload: datastore_memcache
hosts:
  here: localhost
  there: {there}
services:
  db: {{kind: postgres, host: here}}
  cache: {{kind: memcached, host: there}}
clients: {{hosts: [there]}}
run: {{ops: 10}}
"""


def test_hosts_check_reports_each_host(tmp_path: Path, sshd, capsys: pytest.CaptureFixture
                                       ) -> None:
    there = (f"{{target: '{sshd.target}', python: '{sys.executable}', "
             f"known_hosts: '{sshd.known_hosts}', identity_file: '{sshd.identity_file}'}}")
    spec = tmp_path / "hc.yaml"
    spec.write_text(SPEC.format(there=there))
    assert main(["hosts", "check", str(spec)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["here (localhost): ok", f"there ({sshd.target}): ok"]
    # Each server host, from this machine and from the client host `there`.
    assert sorted(line.split(" (")[0] for line in out[2:]) == [
        "reach control -> here", "reach control -> there", "reach there -> here",
        "reach there -> there"]
    assert all(line.endswith("a free TCP port): ok, from 127.0.0.1") for line in out[2:])


def test_hosts_check_says_what_is_missing_and_what_is_unreachable(
        tmp_path: Path, sshd, capsys: pytest.CaptureFixture) -> None:
    there = (f"{{target: '{sshd.target}', python: /nonexistent/python, "
             f"known_hosts: '{sshd.known_hosts}', identity_file: '{sshd.identity_file}'}}")
    spec = tmp_path / "hc.yaml"
    spec.write_text(SPEC.format(there=there))
    assert main(["hosts", "check", str(spec)]) == 1
    out = capsys.readouterr().out
    assert f"there ({sshd.target}): python /nonexistent/python cannot run the kit" in out
    spec.write_text(SPEC.format(there=f"root@127.0.0.1:{free_port()}"))
    assert main(["hosts", "check", str(spec)]) == 1
    assert "unreachable" in capsys.readouterr().out


def test_list_names_workloads_and_services(capsys: pytest.CaptureFixture) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "workload datastore_memcache" in out and "service memcached" in out
    assert "param value_size_bytes" in out
    # Every service setting with its default and what it does, from the schema itself.
    from harness.services import SERVICES

    for name in SERVICES:
        for key, setting in SERVICES.get(name).settings.items():
            assert f"  setting {key} (default {setting.default!r}): {setting.help}" in out


def test_list_into_a_closed_pipe_is_quiet() -> None:
    import subprocess
    import sys

    res = subprocess.run(f"{sys.executable} -m harness.cli list | head -1", shell=True,
                         capture_output=True, text=True, timeout=60)
    assert res.stdout.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr


def test_verify_flags_a_modified_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from harness.results import write_run
    from tests.test_results import arrays, manifest

    run_dir = write_run(tmp_path, manifest(), arrays())
    assert main(["verify", str(tmp_path)]) == 0
    (run_dir / "ops.parquet").write_bytes(b"garbage")
    assert main(["verify", str(tmp_path)]) == 1
    assert "checksum mismatch" in capsys.readouterr().out


def test_summary_says_what_it_left_out(pooling_raw: Path, capsys: pytest.CaptureFixture
                                       ) -> None:
    assert main(["summary", str(pooling_raw)]) == 0
    head, *_, last = capsys.readouterr().out.splitlines()
    assert "left_out" not in head  # a line under the table instead of three columns
    assert last.startswith("left out: pooling: 2 partial, 1 failed and 1 duplicate run "
                           "(--include partial adds the partial ones; ")
    assert main(["summary", str(pooling_raw), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["runs"], r["left_out_partial"], r["left_out_failed"],
             r["left_out_duplicate"]) for r in rows] == [(4, 1, 0, 0), (1, 1, 1, 1)]
    assert main(["summary", str(pooling_raw), "--include", "partial", "--format",
                 "csv"]) == 0
    header, one, two = capsys.readouterr().out.splitlines()
    assert header.endswith(",left_out_partial,left_out_failed,left_out_duplicate")
    assert one.startswith("pooling,1,4,8,") and one.endswith(",0,0,1")
    assert two.startswith("pooling,2,2,3,") and two.endswith(",0,1,1")


def test_summary_of_complete_runs_says_nothing_was_left_out(
        tiny_raw: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["summary", str(tiny_raw)]) == 0
    assert "left out" not in capsys.readouterr().out


def test_verify_names_run_files_without_a_manifest(tiny_raw: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    import shutil

    raw = tmp_path / "raw"
    shutil.copytree(tiny_raw, raw)
    ops = (raw / "tiny" / "tiny-1-0" / "ops.parquet").read_bytes()
    stray = raw / "tiny" / "orphan"
    # Hidden directories are not runs: a run being written, the runner's lock and state.
    for where in (stray, raw / "tiny" / ".tmp-r9", raw / "tiny" / ".harness" / "r9"):
        where.mkdir(parents=True)
        (where / "ops.parquet").write_bytes(ops)
    assert main(["verify", str(raw)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"BAD {stray}: ops.parquet but no manifest.json, so nothing can read it "
                   "as a run (a copy cut short, or moved by hand?)", "4 run(s) ok, 1 bad"]
    assert main(["verify", str(stray)]) == 1  # the directory itself
    assert "0 run(s) ok, 1 bad" in capsys.readouterr().out
    shutil.rmtree(stray)
    assert main(["verify", str(raw)]) == 0
    assert capsys.readouterr().out == "4 run(s) ok, 0 bad\n"


def test_bad_override_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    spec = Path(__file__).resolve().parent.parent / "experiments/datastore_vs_memcache.yaml"
    assert main(["validate", str(spec), "--set", "nokeyvalue"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
