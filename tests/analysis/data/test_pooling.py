"""Which runs are pooled: complete ones, one per repetition; the rest left out with why
(the runs of `write_pooling`: an interrupted and resumed repetition, a concurrent run,
a partial repetition never re-run and a failed one)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.data import pooling
from harness.analysis.data.load import load, load_runs, load_runs_only
from harness.errors import ResultsError


def _reasons(left_out: pd.DataFrame) -> dict[str, str]:
    return dict(zip(left_out["run_id"], left_out["left_out"], strict=True))


def test_complete_runs_one_per_repetition_by_default(pooling_raw: Path):
    runs = load_runs(pooling_raw)
    assert len(runs) == 9
    pooled, left_out = pooling.pool(runs)
    assert sorted(pooled["run_id"]) == ["pool-1-1-0", "pool-1-2-2", "pool-1-3-3",
                                        "pool-1-4-4", "pool-2-1-5"]
    # The partial run of the resumed repetition is partial first: it was not asked for.
    assert _reasons(left_out) == {"pool-1-2-1": "partial", "pool-2-1-6": "duplicate",
                                  "pool-2-2-7": "partial", "pool-2-3-8": "failed"}
    assert len(pooled) + len(left_out) == len(runs)  # every run is one or the other


def test_include_partial_adds_those_whose_repetition_has_no_complete_run(pooling_raw: Path):
    pooled, left_out = pooling.pool(load_runs(pooling_raw), ("partial",))
    assert sorted(pooled["run_id"]) == ["pool-1-1-0", "pool-1-2-2", "pool-1-3-3",
                                        "pool-1-4-4", "pool-2-1-5", "pool-2-2-7"]
    assert _reasons(left_out) == {"pool-1-2-1": "duplicate", "pool-2-1-6": "duplicate",
                                  "pool-2-3-8": "failed"}


def test_the_earliest_start_is_kept_whatever_the_run_ids_say(pooling_raw: Path):
    runs = load_runs(pooling_raw)
    # The later of the two concurrent runs given the smaller run_id: the time decides.
    later = runs["run_id"] == "pool-2-1-6"
    runs.loc[later, "run_id"] = "a-later-run"
    pooled, left_out = pooling.pool(runs)
    assert "pool-2-1-5" in set(pooled["run_id"])
    assert _reasons(left_out)["a-later-run"] == "duplicate"
    # Without start times (imported runs have none) the least run_id is kept.
    runs["started_utc"] = ""
    pooled, left_out = pooling.pool(runs)
    assert _reasons(left_out)["pool-2-1-5"] == "duplicate"


def test_failed_runs_are_never_pooled():
    with pytest.raises(ResultsError, match="failed runs are never pooled"):
        pooling.pool(pd.DataFrame(columns=["status"]), ("failed",))
    with pytest.raises(ResultsError, match=r"unknown run status 'partal'.*partial"):
        pooling.check_include(["partal"])


def test_counts_and_words(pooling_raw: Path):
    _, left_out = pooling.pool(load_runs(pooling_raw))
    assert pooling.counts(left_out) == {"pooling": {"partial": 2, "failed": 1,
                                                    "duplicate": 1}}
    assert pooling.phrase({"partial": 2, "failed": 1, "duplicate": 1}) == \
        "2 partial, 1 failed and 1 duplicate run"
    assert pooling.phrase({"partial": 3}) == "3 partial runs"
    assert pooling.phrase({}) == ""


def test_load_pools_and_keeps_what_it_left_out(pooling_raw: Path):
    loaded = load(pooling_raw)
    assert len(loaded.runs) == 5 and len(loaded.left_out) == 4
    assert set(loaded.ops["run_id"].astype(str)) == set(loaded.runs["run_id"])
    assert (loaded.ops["latency_ns"] <= 2_000_000).all()  # no op of a left-out run
    wide = load(pooling_raw, include=["partial"])
    assert len(wide.runs) == 6 and len(wide.left_out) == 3
    runs_only = load_runs_only(pooling_raw)
    assert list(runs_only.runs["run_id"]) == list(loaded.runs["run_id"])
    assert _reasons(runs_only.left_out) == _reasons(loaded.left_out)
    every = load(pooling_raw, pool=False)  # exports: every run as recorded
    assert len(every.runs) == 9 and every.left_out.empty


def test_complete_unique_runs_lose_nothing(dsmc_raw: Path):
    loaded = load(dsmc_raw)
    assert len(loaded.runs) == 50 and loaded.left_out.empty


def test_imported_runs_are_complete_and_none_is_a_duplicate(tmp_path: Path):
    """Imports write complete runs and number repetitions on from those already there, so
    pooling leaves none out: the seed reports, and two files of one tool in one
    experiment (the same ops in both)."""
    from harness import paths
    from harness.cli import main

    raw = tmp_path / "raw"
    legacy = paths.project_root() / "examples" / "legacy"
    for fmt, name in (("gae-bench", "seed001-gae-bench.txt"),
                      ("perfctest", "seed000-perfctest.result"),
                      ("cluster-perf", "seed002-cluster-perf.log"),
                      ("kv-report", "seed003-kv-report.txt")):
        assert main(["import", fmt, str(legacy / name), "-o", str(raw)]) == 0
    data = paths.project_root() / "tests" / "data" / "importers"
    assert main(["import", "redis-benchmark-csv", "--requests", "10000", "--experiment",
                 "rb", str(data / "redis-benchmark-7.0-n10000-c50-P4.csv"),
                 str(data / "redis-benchmark-7.0-n20000-c10-d100.csv"), "-o", str(raw)]) == 0
    every = load_runs(raw)
    assert set(every["source"]) == {"imported"} and set(every["status"]) == {"complete"}
    loaded = load_runs_only(raw)
    assert loaded.left_out.empty and len(loaded.runs) == len(every)
    assert every["experiment"].eq("rb").sum() > every[every["experiment"] == "rb"][
        "config_id"].nunique()  # repetitions of one config from two files: both kept
