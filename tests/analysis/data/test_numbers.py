"""`load(max_ops=)`: a large experiment's ops are kept as every k-th op of each run (for
figures), while every number (`numbers`: summaries, per-run tables, intervals) still
comes from every op in the files, equal to the full load's; the pandas functions refuse a
sample rather than count it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.data import summary, summary_ci
from harness.analysis.data.load import load
from harness.analysis.data.numbers import group_intervals, run_summary, summarise, summarise_with_ci
from harness.analysis.data.summary_ci import TABLE_METRICS
from harness.errors import ResultsError
from tests.fixtures.frames import assert_same_table
from tests.fixtures.rawdata import write_datastore_memcache


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 5 ops x 4 sets x 3,000 measured ops (+5 warm-up each): 60,100 records.
    return write_datastore_memcache(tmp_path_factory.mktemp("sampled"), sets=4,
                                    ops_per_set=3_000)


def test_below_the_limit_nothing_is_sampled(raw: Path) -> None:
    full, same = load(raw), load(raw, max_ops=60_100)
    assert not same.sampled and same.sample_every == 1
    pd.testing.assert_frame_equal(full.ops, same.ops)


def test_every_kth_op_of_each_run_is_kept(raw: Path) -> None:
    full, thin = load(raw), load(raw, max_ops=10_000)
    assert thin.sample_every == 7  # ceil(60,100 / 10,000)
    for run_id, ops in full.ops.groupby("run_id", observed=True):
        kept = thin.ops[thin.ops["run_id"] == run_id]
        np.testing.assert_array_equal(kept["start_ns"].to_numpy(),
                                      ops["start_ns"].to_numpy()[::7])
    assert len(thin.ops) <= 10_000


@pytest.mark.parametrize("by", [None, ["op"], ["run_id", "op"], ["op", "status"]], ids=str)
def test_numbers_of_a_sampled_load_are_those_of_every_op(raw: Path, by: list[str] | None
                                                         ) -> None:
    full, thin = load(raw), load(raw, max_ops=10_000)
    assert thin.sampled
    assert_same_table(summarise(full, by), summarise(thin, by))


def test_per_run_table_and_intervals_of_a_sampled_load(raw: Path) -> None:
    full, thin = load(raw), load(raw, max_ops=10_000)
    assert_same_table(run_summary(full, by_op=True), run_summary(thin, by_op=True))
    assert_same_table(summarise_with_ci(full, ["op"], TABLE_METRICS),
                      summarise_with_ci(thin, ["op"], TABLE_METRICS))
    want, got = group_intervals(full, ["op"]), group_intervals(thin, ["op"])
    assert want.keys() == got.keys()
    for key, cells in want.items():
        for field, iv in cells.items():
            assert (got[key][field].low, got[key][field].high) == \
                pytest.approx((iv.low, iv.high), rel=1e-12), (key, field)


def test_the_pandas_path_refuses_a_sample(raw: Path) -> None:
    thin = load(raw, max_ops=10_000)
    for call in (lambda: summary.summarise(thin, ["op"]),
                 lambda: summary.run_summary(thin),
                 lambda: summary_ci.group_intervals(thin, ["op"]),
                 lambda: summary_ci.summarise_with_ci(thin, ["op"])):
        with pytest.raises(ResultsError, match=r"one in 7 of each run.*analysis\.data\.numbers"):
            call()
