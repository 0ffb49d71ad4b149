"""CLI commands that are not covered by the runner tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
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
    from tests.results.test_results import arrays, manifest

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
    # The checks that warn come last (a JSON list; none here).
    assert header.endswith(",left_out_partial,left_out_failed,left_out_duplicate,checks")
    assert one.startswith("pooling,1,4,8,") and one.endswith(",0,0,1,[]")
    assert two.startswith("pooling,2,2,3,") and two.endswith(",0,1,1,[]")


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
    spec = Path(__file__).resolve().parents[2] / "experiments/datastore_vs_memcache.yaml"
    assert main(["validate", str(spec), "--set", "nokeyvalue"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


# -- typos and trees without runs: one line, exit 2, in every command -------------------------

def test_a_missing_empty_or_mistyped_tree_is_exit_2_in_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tests.fixtures.rawdata import write_tiny

    raw = write_tiny(tmp_path / "raw")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        ("summary", str(empty)): f"{empty}: no runs in it",
        ("summary", str(tmp_path / "nope")): "no such raw-results directory",
        ("summary", str(raw), "--experiment", "tinny"):
            "no experiment 'tinny' (did you mean 'tiny'?); experiments there: tiny",
        ("compare", str(raw), str(empty)): f"{empty}: no runs in it",
        ("report", "--raw", str(tmp_path / "nope"), "--out", str(tmp_path / "r")):
            "no such raw-results directory",
        ("export", "csv", str(raw), "-o", str(tmp_path / "x.csv"), "--experiment", "t"):
            "no experiment 't'",
    }
    for argv, message in cases.items():
        assert main(list(argv)) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_summary_finds_imported_experiments_and_pools_them_beside_runs_with_bool_keys(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`harness import -o raw/imported` puts experiments one level down; `--experiment`
    finds them. An import with stated percentiles beside a run whose grid key is boolean
    (a file-store run's `memcache: true`) made `summary` without --by a pandas merge error."""
    from harness.results import STATUS_CODE, write_run
    from tests.fixtures.rawdata import make_ops, manifest_for

    raw = tmp_path / "raw"
    root = Path(__file__).resolve().parents[2]
    assert main(["import", "gae-bench", str(root / "examples/legacy/seed001-gae-bench.txt"),
                 "-o", str(raw / "imported"), "--experiment", "seedx"]) == 0
    lat = np.array([1, 2, 3], np.int64) * 1_000_000
    for rep, memcache in enumerate([True, False], 1):
        write_run(raw, manifest_for(run_id=f"fs-{rep}", experiment="fs", workload="filestore",
                                    grid_point={"memcache": memcache}, repetition=1, ops=3,
                                    warmup_ops=0),
                  make_ops("insert", lat, np.full(3, STATUS_CODE["ok"]), np.zeros(3, bool)))
    capsys.readouterr()
    assert main(["summary", str(raw), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["experiment"] for r in rows} == {"seedx", "fs"}
    assert main(["summary", str(raw), "--experiment", "seedx,fs", "--format", "json"]) == 0
    assert {r["experiment"] for r in json.loads(capsys.readouterr().out)} == {"seedx", "fs"}


def test_tables_print_units_and_thousands_separators_never_exponents(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import re

    from harness.results import STATUS_CODE, write_run
    from tests.fixtures.rawdata import make_ops, manifest_for

    rng = np.random.default_rng(3)
    for tree in ("a", "b"):
        for rep in (1, 2, 3):
            lat = rng.integers(15_000, 25_000, 20_000).astype(np.int64)  # ~50,000 ops/s
            write_run(tmp_path / tree, manifest_for(
                run_id=f"{tree}{rep}", experiment="fast", workload="w", grid_point={},
                repetition=rep, ops=20_000, warmup_ops=0),
                make_ops("get", lat, np.full(20_000, STATUS_CODE["ok"]),
                         np.zeros(20_000, bool), gap_ns=0))
    assert main(["summary", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "throughput ops/s [95% CI]" in out and "p99 ms [95% CI]" in out
    assert re.search(r" 60,000 +\d\d,\d{3} \[\d\d,\d{3}, \d\d,\d{3}\]", out), out
    assert not re.search(r"\de[+-]\d", out), out
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--by", "experiment"]) == 0
    out = capsys.readouterr().out
    assert "throughput (ops/s)" in out and "latency_p99 (ms)" in out
    assert re.search(r"\d\d,\d{3} \[\d\d,\d{3}, \d\d,\d{3}\]", out), out
    assert re.search(r"\d\.\d\dx \[\d\.\d\d, \d\.\d\d\]", out), out
    assert not re.search(r"\de[+-]\d", out), out


def test_summary_pools_several_trees_as_one(tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    """`harness summary A B` (issue 51 item 7): the runs of both trees in one table, a
    run found in both (a copy) counted once and its copy a duplicate; an experiment of
    either tree may be named, and a name neither holds is exit 2 naming both trees."""
    import shutil

    from harness.results import STATUS_CODE, write_run
    from tests.fixtures.rawdata import make_ops, manifest_for

    rng = np.random.default_rng(5)

    def run(tree: str, run_id: str, experiment: str, rep: int) -> Path:
        lat = rng.integers(15_000, 25_000, 500).astype(np.int64)
        return write_run(tmp_path / tree, manifest_for(
            run_id=run_id, experiment=experiment, workload="w", grid_point={},
            repetition=rep, ops=500, warmup_ops=0),
            make_ops("get", lat, np.full(500, STATUS_CODE["ok"]), np.zeros(500, bool)))

    first = run("a", "fast-1", "fast", 1)
    run("a", "fast-2", "fast", 2)
    run("b", "fast-3", "fast", 3)
    run("b", "slow-1", "slow", 1)
    shutil.copytree(first, tmp_path / "b" / "fast" / first.name)  # the same run, copied
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    assert main(["summary", a, b, "--format", "json"]) == 0
    rows = {r["experiment"]: r for r in json.loads(capsys.readouterr().out)}
    assert sorted(rows) == ["fast", "slow"]
    assert (rows["fast"]["runs"], rows["fast"]["ops"], rows["fast"]["left_out_duplicate"]
            ) == (3, 1500, 1)
    assert (rows["slow"]["runs"], rows["slow"]["left_out_duplicate"]) == (1, 0)
    # One tree alone: its own runs only.
    assert main(["summary", a, "--format", "json"]) == 0
    assert [(r["experiment"], r["runs"]) for r in json.loads(capsys.readouterr().out)
            ] == [("fast", 2)]
    # The table says the copy was left out, under it.
    assert main(["summary", a, b]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "left out: fast: 1 duplicate run")
    assert main(["summary", a, b, "--experiment", "slow", "--format", "json"]) == 0
    assert [r["experiment"] for r in json.loads(capsys.readouterr().out)] == ["slow"]
    assert main(["summary", a, b, "--experiment", "slo"]) == 2
    err = capsys.readouterr().err
    assert f"{a}, {b}: no experiment 'slo' (did you mean 'slow'?)" in err, err
    assert main(["summary", a, str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such raw-results directory" in capsys.readouterr().err
