"""Imported results: intervals over runs only; a single run gets none and says so."""

from __future__ import annotations

from pathlib import Path

from harness.analysis import imported
from harness.cli import main
from tests.importers.conftest import LEGACY, LEGACY_FILES


def _seed(number: str) -> Path:
    """The seed report's figures as they travel with the repository (examples/legacy)."""
    return LEGACY / LEGACY_FILES[number]


def test_one_perfctest_run_gets_no_interval_over_its_ops(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    assert main(["import", "perfctest", str(_seed("000")), "-o", str(raw),
                 "--experiment", "seed000"]) == 0
    capsys.readouterr()
    page = imported.analyse(raw).perfctest().data
    assert "One run each, so no interval" in page
    assert "95% CI" not in page and "CI over operations" not in page


def test_gae_bench_sets_are_the_runs_of_its_intervals(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    assert main(["import", "gae-bench", str(_seed("001")), "-o", str(raw), "--count", "50",
                 "--size", "100"]) == 0
    capsys.readouterr()
    study = imported.analyse(raw)
    per = study.per_run
    assert per.groupby("op")["run_id"].nunique().min() >= 2  # one run per set
    page = study.gae_bench().data
    assert "95% CI over sets" in page
