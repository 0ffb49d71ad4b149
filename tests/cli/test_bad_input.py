"""Bad input gives one clear message naming the file and field, and no traceback:
impossible grids and run sizes, a missing server binary, a raw-results directory with a
corrupt ops file or a manifest of a newer schema."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.errors import SpecError
from harness.results import KNOWN_SCHEMA_VERSIONS
from harness.spec import MAX_RUNS, load_spec

BASE = """\
name: t
workload: memcache_mix
services:
  cache: {kind: memcached}
"""


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return info.value.problems


def test_every_grid_point_excluded(tmp_path: Path) -> None:
    found = problems(tmp_path, "grid: {get_ratio: [0.5, 0.9]}\nrun: {ops: 10}\n"
                               "exclude: [{get_ratio: 0.5}, {get_ratio: 0.9}]\n")
    assert found == [f"{tmp_path / 'spec.yaml'}:exclude: every one of the grid's 2 "
                     "configurations is excluded; nothing would run (line 7)"]


def test_client_counts_below_one_in_the_grid(tmp_path: Path) -> None:
    found = problems(tmp_path, "grid: {clients.processes: [0, 2], clients.inflight: [-1]}\n"
                               "run: {ops: 10}\n")
    path = tmp_path / "spec.yaml"
    assert found == [f"{path}:grid.clients.processes.0: must be at least 1 (line 5)",
                     f"{path}:grid.clients.inflight.0: must be at least 1 (line 5)"]


def test_fewer_ops_than_client_processes(tmp_path: Path) -> None:
    found = problems(tmp_path, "clients: {processes: 4}\nrun: {ops: 3}\n")
    assert found == [f"{tmp_path / 'spec.yaml'}:run.ops: 3 ops cannot be shared by 4 client "
                     "processes (each needs at least one); raise run.ops or lower "
                     "clients.processes (line 6)"]
    found = problems(tmp_path, "grid: {clients.processes: [1, 8]}\nrun: {ops: 5}\n")
    assert [p.split(":", 1)[1] for p in found] == [
        "grid.clients.processes: 5 ops cannot be shared by 8 client processes (each needs "
        "at least one); raise run.ops or lower clients.processes (line 5)"]


def test_a_grid_too_big_to_be_meant_is_refused_before_it_expands(tmp_path: Path) -> None:
    values = list(range(1, 101))
    found = problems(tmp_path, f"grid: {{key_space: {values}, value_size_bytes: {values}, "
                               f"clients.connections: {values[:20]}}}\nrun: {{ops: 10}}\n")
    assert found == [f"{tmp_path / 'spec.yaml'}:grid: 100 x 100 x 20 configurations x 1 "
                     f"repetitions = 200,000 runs, more than {MAX_RUNS:,}; narrow the grid "
                     "or split the experiment (line 5)"]


@pytest.mark.parametrize(("run", "message"), [
    ("{ops: 10, fail_if_error_rate_above: 1.5}",
     "run.fail_if_error_rate_above: 1.5 is not a share of the ops: give a number from 0 "
     "to 1, e.g. 0.05 for 5%"),
    ("{ops: 10, fail_if_error_rate_above: '5%'}",
     "run.fail_if_error_rate_above: expected int or float or null, got str '5%'"),
    ("{duration_s: .inf}", "run.duration_s: must be a finite number, not inf"),
    ("{duration_s: .nan}", "run.duration_s: must be a finite number, not nan"),
    ("{ops: 10, timeout_s: 0}", "run.timeout_s: must be positive"),
    ("{ops: 10, warmup_ops: -1}", "run.warmup_ops: must be 0 or more"),
    ("{ops: 10, max_consecutive_errors: 0}", "run.max_consecutive_errors: must be at least 1"),
])
def test_impossible_run_sizes(tmp_path: Path, run: str, message: str) -> None:
    found = problems(tmp_path, f"run: {run}\n")
    assert [p.split(":", 1)[1].rsplit(" (line", 1)[0] for p in found] == [message]


def test_wrongly_typed_names_are_spec_errors_not_crashes(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: t\nworkload: memcache_mix\nservices:\n"
                    "  cache: {kind: [memcached], host: {a: 1}, settings: [1]}\n"
                    "clients: {hosts: [[client]]}\nrun: {ops: 10}\n"
                    "timeline: [{at_s: 1, action: x, service: [cache]}]\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = "\n".join(info.value.problems)
    assert "services.cache.kind: expected a service kind name, got ['memcached']" in text
    assert "services.cache.host: unknown host {'a': 1}" in text
    assert "clients.hosts: unknown host ['client']" in text
    assert "timeline.0.service: unknown service ['cache']" in text


# -- through the CLI: one message, exit 2, no traceback ------------------------------------

def test_missing_server_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + "run: {ops: 10}\n")
    bin_dir = tmp_path / "bin"  # a PATH with a shell and nothing else
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to(shutil.which("sh"))
    monkeypatch.setenv("PATH", str(bin_dir))
    assert cli_main(["run", str(path), "--out", str(tmp_path / "raw"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: {path}:services.cache: memcached not found on host 'localhost'; install it "
        "there (Debian: see docs/servers.md) or use environment.yml"]
    assert not (tmp_path / "raw").exists()


def _copy_runs(tiny_raw: Path, tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(tiny_raw, raw)
    return raw


def test_summary_skips_a_corrupt_ops_file_with_a_warning(
        tiny_raw: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    raw = _copy_runs(tiny_raw, tmp_path)
    runs = sorted(p.parent for p in raw.rglob("manifest.json"))
    truncated, garbage = runs[0], runs[1]
    ops = truncated / "ops.parquet"
    ops.write_bytes(ops.read_bytes()[: ops.stat().st_size // 2])
    (garbage / "ops.parquet").write_bytes(b"PAR1 not really")
    assert cli_main(["summary", str(raw), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    warnings = err.splitlines()
    assert len(warnings) == 2 and "Traceback" not in err
    assert warnings[0].startswith(f"warning: skipping run {truncated}: ")
    assert warnings[1].startswith(f"warning: skipping run {garbage}: ")
    assert all("checksum mismatch" in w for w in warnings)
    header, *rows = out.splitlines()
    assert "throughput_ops_s" in header and rows  # the table of the good runs
    assert cli_main(["verify", str(raw)]) == 1
    out = capsys.readouterr().out
    assert out.count("BAD ") == 2 and f"{len(runs) - 2} run(s) ok, 2 bad" in out


def test_a_manifest_of_a_newer_schema_is_named(
        tiny_raw: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    raw = _copy_runs(tiny_raw, tmp_path)
    newer = sorted(raw.rglob("manifest.json"))[0]
    data = json.loads(newer.read_text())
    data["schema_version"] = 99
    newer.write_text(json.dumps(data))
    # Named and skipped (issue 16): the other runs are still summarised.
    assert cli_main(["summary", str(raw)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"warning: skipping run {newer.parent}: schema_version 99 is not one this kit reads "
        f"(known: {sorted(KNOWN_SCHEMA_VERSIONS)}); it was written by a newer kit: upgrade "
        "the kit to read it"]
    assert cli_main(["verify", str(raw)]) == 1
    assert f"BAD {newer}: schema_version 99" in capsys.readouterr().out


def test_unreadable_spec_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"name: t\n\xff\xfeworkload: x\n")
    assert cli_main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {path}:2: not UTF-8 text (byte 0xff at offset 8); save the spec as UTF-8\n")
    if os.geteuid() != 0:  # root reads anything
        path.chmod(0)
        assert cli_main(["validate", str(path)]) == 2
        assert "cannot read spec (Permission denied)" in capsys.readouterr().err
