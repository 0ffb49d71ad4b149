"""`harness import` end to end, then `harness summary` on what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.importers import default_experiment
from harness.paths import name_problem
from tests.importers.conftest import DATA, LEGACY, LEGACY_FILES, write_variant


def test_import_then_summary_by_threads_op(seed, tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    assert main(["import", "perfctest", str(seed("000")), "-o", str(raw),
                 "--experiment", "seed000"]) == 0
    out = capsys.readouterr().out
    assert "1 run(s) written to" in out and "seed000" in out
    if seed.source == "seed":
        assert "136 noise line(s) skipped" in out and "  skipped line 3: Performance" in out
    else:
        assert "1 noise line(s) skipped" in out
        assert "  skipped line 1: nthreads operation time" in out
    assert main(["summary", str(raw), "--by", "threads,op", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["threads"], row["op"], row["ops"]) == (1, "insert", 21)


def test_gae_bench_options_and_aggregated_label(seed, tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    assert main(["import", "gae-bench", str(seed("001")), "-o", str(raw), "--count", "50",
                 "--size", "100"]) == 0
    out = capsys.readouterr().out
    assert "50 aggregated run(s) written to" in out
    assert (raw / default_experiment("gae-bench", seed("001"))).is_dir()  # the default
    assert default_experiment("gae-bench", seed("001")).startswith("gae-bench-")


def test_several_files_one_experiment(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    files = [str(DATA / "redis-benchmark-7.0-n20000-c10-d100.csv"),
             str(DATA / "redis-benchmark-7.0-n10000-c50-P4.csv")]
    # The CSV does not say how many requests: refused without --requests, nothing written.
    assert main(["import", "redis-benchmark-csv", *files, "-o", str(raw)]) == 2
    assert "give --requests N" in capsys.readouterr().err and not raw.exists()
    for path, n in zip(files, ("20000", "10000"), strict=True):
        assert main(["import", "redis-benchmark-csv", path, "--requests", n, "-o", str(raw),
                     "--experiment", "rb"]) == 0
    capsys.readouterr()
    assert main(["summary", str(raw), "--by", "op", "--format", "json"]) == 0
    rows = {r["op"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["set"]["runs"] == 2  # one per file: repetitions of the same op
    assert rows["set"]["ops"] == 30000
    assert rows["set"]["latency_p99_ms"] is None  # two runs' stated p99s do not pool
    assert main(["import", "redis-benchmark", "x", "--requests", "0", "-o", str(raw)]) == 2


def test_nothing_recognisable_exits_2_and_writes_nothing(seed, tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    bad = write_variant(tmp_path, "notes.txt", "nothing to see\n")
    code = main(["import", "kv-report", str(seed("003")), str(bad), "-o", str(raw)])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"error: {bad}: no kv-report records found"
    assert not raw.exists()


def test_reimport_refused(seed, tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    args = ["import", "cluster-perf", str(seed("002")), "-o", str(raw), "--experiment", "c"]
    assert main(args) == 0
    assert main(args) == 2
    assert "already imported" in capsys.readouterr().err
    assert len(list((raw / "c").iterdir())) == 10


def test_unknown_format(tmp_path: Path, capsys) -> None:
    assert main(["import", "wrk2", str(tmp_path), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown import format 'wrk2'" in err and "ycsb-hdr" in err


def test_out_is_required(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["import", "gae-bench", str(tmp_path / "x")])



@pytest.mark.parametrize(("name", "why"), [
    ("../../x", "letters, digits"),         # would write two levels above -o
    ("{tmp}/elsewhere", "letters, digits"),  # an absolute path would be written there
    ("a/b", "letters, digits"),             # would nest a directory
    ("", "letters, digits"),                # would fall back to the default name
    ("x" * 300, "at most 100 characters"),  # longer than a file system takes
])
def test_experiment_must_be_a_plain_name(name: str, why: str, tmp_path: Path,
                                         capsys) -> None:
    name = name.replace("{tmp}", str(tmp_path))
    out = tmp_path / "deep" / "raw"
    before = sorted(tmp_path.rglob("*"))
    # Refused before anything is read: a missing file is not what the error is about,
    # and a good file writes nothing.
    for path in (tmp_path / "not-there.txt", LEGACY / LEGACY_FILES["003"]):
        code = main(["import", "kv-report", str(path), "-o", str(out), "--experiment", name])
        err = capsys.readouterr().err
        assert code == 2
        assert err.startswith("error: --experiment ") and why in err, err
        assert err.count("\n") == 1 and "not-there" not in err
    assert sorted(tmp_path.rglob("*")) == before


def test_default_experiment_of_a_long_file_name_is_a_plain_name(tmp_path: Path,
                                                                capsys) -> None:
    # A file system takes a 250-character file name; the experiment named after it must
    # still be a name the kit can write.
    long = write_variant(tmp_path, "r" * 250 + ".txt",
                         (LEGACY / LEGACY_FILES["003"]).read_text())
    assert main(["import", "kv-report", str(long), "-o", str(tmp_path / "raw")]) == 0
    (exp,) = (tmp_path / "raw").iterdir()
    assert name_problem(exp.name) is None and exp.name.startswith("kv-report-rrr")
