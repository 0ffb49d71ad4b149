"""`harness compare` compares like with like (issue 51 items 2-3): two trees whose
workloads, servers, parameters or client settings differ outside `--by` are refused in
one line naming each difference (`--allow-different` to compare all the same, said
above the table); `--by` defaults to the op and every grid key both trees share, so a
grid's configurations are never pooled into one group unasked; and one tree's
experiment is compared within itself, each configuration against the first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.results import iter_run_dirs, read_manifest
from tests.fixtures.rawdata import GRID_EXPERIMENT, write_grid, write_history


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's grid (value_size x appendonly, 3 runs each, redis_mix)."""
    return write_grid(tmp_path_factory.mktemp("grid") / "raw")


def test_two_trees_of_one_grid_are_matched_on_its_keys_not_pooled(
        grid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cand = tmp_path / "cand"
    shutil.copytree(grid, cand)
    assert cli_main(["compare", str(grid), str(cand), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # Each configuration its own group: 3 runs a side, never 6 or 12.
    assert {(r["value_size"], r["appendonly"]) for r in rows} == {
        (100, False), (100, True), (4096, False), (4096, True)}
    assert {r["n_base"] for r in rows} == {3} and {r["n_cand"] for r in rows} == {3}
    assert all(r["ratio"] == pytest.approx(1.0) for r in rows)  # the same runs


def test_unlike_trees_are_refused_naming_each_difference(
        grid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = write_history(tmp_path / "other", [1.0] * 3)  # another workload and keys
    for run_dir in iter_run_dirs(other):
        m = read_manifest(run_dir)
        assert m.workload != "redis_mix" or m.params != {"value_size_bytes": 100}
    assert cli_main(["compare", str(grid), str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err  # one line
    assert err.startswith("error: BASE and CAND are not measurements of like things (")
    assert "--allow-different " in err
    keys = err.rsplit("--allow-different ", 1)[1].split(",")
    assert cli_main(["compare", str(grid), str(other), "--by", "op",
                     "--allow-different", ",".join(keys)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("allowed differences (--allow-different): "), out[:300]


def test_an_experiment_only_the_base_holds_is_left_out_not_a_difference(
        grid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The base tree holds a second experiment (another workload, other keys) that the
    candidate did not re-measure: the shared experiment is compared, the other matches
    nothing; its workload is no reason to refuse (the report's comparison of a README
    tree beside a user's Redis experiment was refused for it)."""
    base = tmp_path / "base"
    shutil.copytree(grid, base)
    write_history(base, [1.0] * 3)
    assert len({read_manifest(d).experiment for d in iter_run_dirs(base)}) == 2
    cand = tmp_path / "cand"
    shutil.copytree(grid, cand)
    assert cli_main(["compare", str(base), str(cand), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["experiment"] for r in rows} == {GRID_EXPERIMENT}
    assert {r["n_base"] for r in rows} == {3} and {r["n_cand"] for r in rows} == {3}


def test_one_experiment_compared_within_itself(
        grid: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["compare", str(grid), "--experiment", GRID_EXPERIMENT, "--format",
                     "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    def config(r: dict) -> frozenset[str]:
        return frozenset(r["configuration"].split(", "))

    # Each of the three other configurations against the first (value_size=100,
    # appendonly=False), one family: every row at one level.
    assert {config(r) for r in rows} == {
        frozenset({"value_size=100", "appendonly=True"}),
        frozenset({"value_size=4096", "appendonly=False"}),
        frozenset({"value_size=4096", "appendonly=True"})}
    assert len({r["ratio_ci_level"] for r in rows}) == 1
    slow = [r for r in rows if config(r) == {"value_size=100", "appendonly=True"}
            and r["op"] == "set" and r["metric"] == "latency_p50"]
    assert slow[0]["verdict"] == "worse" and 1.5 < slow[0]["ratio"] < 2.2  # sets 1.8x
    assert cli_main(["compare", str(grid), "--experiment", GRID_EXPERIMENT, "--baseline",
                     "value_size=4096", "--baseline", "appendonly=True", "--format",
                     "json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert frozenset({"value_size=100", "appendonly=False"}) in {config(r) for r in again}
    assert cli_main(["compare", str(grid), "--experiment", GRID_EXPERIMENT, "--baseline",
                     "nope=1"]) == 2
    assert "--baseline nope: not a grid key varied in" in capsys.readouterr().err
