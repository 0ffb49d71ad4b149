"""summary_table and friends against hand-computed answers (see write_tiny)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.analysis.data.load import load
from harness.analysis.data.summary import SUMMARY_COLUMNS, run_summary, summarise
from harness.analysis.summary_table import LEFT_OUT_COLUMNS, summary_table
from harness.errors import ResultsError


def test_default_grouping_hand_computed(tiny_raw: Path):
    table = summary_table(tiny_raw)
    assert list(table.columns) == ["experiment", "size", *SUMMARY_COLUMNS,
                                   *LEFT_OUT_COLUMNS]
    assert (table[list(LEFT_OUT_COLUMNS)] == 0).all().all()  # every run complete, once
    one = table[table["size"] == 1].iloc[0]
    # ops 1,2,3,4 ms (warm-up 100 ms excluded) and 2,4 ms (one error)
    assert one["runs"] == 2 and one["ops"] == 6
    # Each run counts once: 4 ops in 10 ms and 2 in 6 ms are 2.5 and 3 ms per op, so the
    # harmonic mean of the rates is 2 / 5.5 ms (not 6 / 16 ms, which lets the longer
    # run decide), and the mean latency the mean of 2.5 and 3 ms (not 16 / 6).
    assert one["throughput_ops_s"] == pytest.approx(2 / 0.0055)
    assert one["latency_mean_ms"] == pytest.approx((10 / 4 + 6 / 2) / 2)
    assert one["latency_p50_ms"] == pytest.approx(2.5)
    assert one["latency_p99_ms"] == pytest.approx(4.0)
    assert one["error_rate"] == pytest.approx(1 / 6)
    # The error is not goodput: 4 of 4 and 1 of 2 answered, over the same 5.5 ms per op.
    assert one["goodput_ops_s"] == pytest.approx((4 / 4 + 1 / 2) / 0.0055)
    two = table[table["size"] == 2].iloc[0]
    # 10 + 20 ms for 2 ops and 30 ms for 1: 15 and 30 ms per op, harmonically 2 / 45 ms.
    assert two["ops"] == 3 and two["throughput_ops_s"] == pytest.approx(2 / 0.045)
    assert two["error_rate"] == 0  # a miss is not an error
    assert two["goodput_ops_s"] == two["throughput_ops_s"]  # a miss is an answer


def test_by_op_and_by_nothing(tiny_raw: Path):
    by_op = summary_table(tiny_raw, by=["op"])
    assert list(by_op.columns) == ["op", *SUMMARY_COLUMNS, *LEFT_OUT_COLUMNS]
    assert by_op.iloc[0]["ops"] == 9 and by_op.iloc[0]["runs"] == 4
    total = summary_table(tiny_raw, by=[])
    assert list(total.columns) == [*SUMMARY_COLUMNS, *LEFT_OUT_COLUMNS]
    assert total.iloc[0]["ops"] == 9


def test_by_run_level_columns(tiny_raw: Path):
    table = summary_table(tiny_raw, by=["status", "repetition"])
    assert list(table["repetition"]) == [0, 1]
    assert list(table["ops"]) == [6, 3]


def test_unknown_by_column_lists_available(tiny_raw: Path):
    with pytest.raises(ResultsError, match=r"unknown grouping column 'nope'.*size"):
        summary_table(tiny_raw, by=["nope"])


def test_by_op_splits_inside_a_run(dsmc_raw: Path):
    table = summary_table(dsmc_raw, by=["op"])
    assert len(table) == 5 and (table["runs"] == 10).all() and (table["ops"] == 500).all()
    default = summary_table(dsmc_raw)
    assert list(default.columns[:2]) == ["experiment", "op"]
    writes = default.set_index("op").loc["store_write"]
    assert writes["error_rate"] == pytest.approx(4 / 500)


def test_run_summary_has_full_statistics(tiny_raw: Path):
    per_run = run_summary(load(tiny_raw)).set_index("run_id")
    assert per_run.loc["tiny-1-0", "latency_max_ms"] == pytest.approx(4.0)
    assert per_run.loc["tiny-1-0", "wall_s"] == pytest.approx(0.010)
    assert per_run.loc["tiny-2-0", "miss_rate"] == pytest.approx(0.5)
    assert per_run.loc["tiny-1-1", "error_rate"] == pytest.approx(0.5)
    assert per_run.loc["tiny-1-0", "size"] == 1


def test_run_without_measured_ops_still_counts(tiny_raw: Path):
    loaded = load(tiny_raw)
    ops = loaded.ops[loaded.ops["run_id"].astype(str) != "tiny-2-1"]
    table = summarise(type(loaded)(loaded.runs, ops, loaded.grid_keys))
    two = table[table["size"] == 2].iloc[0]
    assert two["runs"] == 2 and two["ops"] == 2


def test_empty_raw_dir(empty_raw: Path):
    table = summary_table(empty_raw, by=["experiment"])
    assert table.empty
    assert list(table.columns) == ["experiment", *SUMMARY_COLUMNS, *LEFT_OUT_COLUMNS]


def test_provenance_tables(dsmc_raw: Path, tiny_raw: Path):
    from harness.analysis.sections import provenance

    runs = provenance.load_all_runs(dsmc_raw)
    failures = provenance.failures_table(runs)
    assert list(failures["run_id"]) == ["r003", "r007"]  # the two runs with errors
    assert list(failures["error ops"]) == [2, 2]
    clean = provenance.failures_table(provenance.load_all_runs(tiny_raw))
    assert list(clean["run_id"]) == ["tiny-1-1"]
    exps = provenance.experiments_table(runs)
    assert exps.loc[0, "runs"] == 50 and exps.loc[0, "measured ops"] == 2500
    assert exps.loc[0, "complete / partial / failed"] == "50 / 0 / 0"
    hosts = provenance.hosts_table(dsmc_raw)
    assert list(hosts["hostname"]) == ["bench-client"]
    services = provenance.services_table(dsmc_raw)
    assert set(services["kind"]) == {"postgres", "memcached"}
    index = provenance.run_index(runs)  # the appendix: a row per configuration
    assert index["runs"].sum() == 50 and len(index) == runs["config_id"].nunique()
    assert sum(len(ids.split()) for ids in index["run ids"]) == 50
    assert provenance.load_all_runs(dsmc_raw / "absent").empty


def test_failures_table_without_failures(dsmc_raw: Path):
    from harness.analysis.sections import provenance

    runs = provenance.load_all_runs(dsmc_raw)
    ok = runs[~runs["run_id"].isin(["r003", "r007"])]
    assert provenance.failures_table(ok).empty


def test_redirect_records_are_attempts_not_ops(tmp_path):
    """A redirected attempt is its own record, but the op's record spans the retry:
    counting both would inflate ops and throughput."""
    import numpy as np

    from harness.analysis.summary_table import summary_table
    from harness.results import OK, REDIRECT, OpsArrays, new_manifest, write_run

    n = 10
    status = np.array([REDIRECT, OK] * (n // 2), np.int8)
    ops = OpsArrays(("get",), np.zeros(n, np.int32), np.zeros(n, np.int8),
                    np.arange(n, dtype=np.int64) * 1_000_000, np.full(n, 500_000, np.int64),
                    np.full(n, -1, np.int64), status, np.zeros(n, np.int64),
                    np.zeros(n, bool))
    write_run(tmp_path, new_manifest(run_id="r", experiment="kv", workload="kvstore",
                                     config_id="c", repetition=1, grid_point={"op": "get"},
                                     started_utc="t0", ended_utc="t1"), ops)
    [row] = summary_table(tmp_path).to_dict("records")
    assert row["ops"] == 5
    assert row["latency_mean_ms"] == 0.5


def test_resumed_and_doubled_repetitions_count_once(pooling_raw: Path):
    """Ctrl-C, --resume and a concurrent run: 4 repetitions are 4 runs, not 5 or 6."""
    table = summary_table(pooling_raw).set_index("size")
    assert table.loc[1, "runs"] == 4 and table.loc[1, "ops"] == 8
    assert table.loc[1, "latency_p99_ms"] == pytest.approx(1.0)  # no 100 ms partial op
    assert table.loc[2, "runs"] == 1 and table.loc[2, "ops"] == 2
    assert table.loc[2, "latency_mean_ms"] == pytest.approx(2.0)  # not the later 50 ms run


def _left_out(row) -> tuple[int, int, int]:
    return int(row["left_out_partial"]), int(row["left_out_failed"]), \
        int(row["left_out_duplicate"])


def test_each_row_counts_the_runs_it_left_out(pooling_raw: Path):
    table = summary_table(pooling_raw).set_index("size")
    assert list(table.columns[-3:]) == list(LEFT_OUT_COLUMNS)
    assert _left_out(table.loc[1]) == (1, 0, 0)  # the interrupted repetition 2
    assert _left_out(table.loc[2]) == (1, 1, 1)


def test_include_partial_pools_a_repetition_that_never_completed(pooling_raw: Path):
    table = summary_table(pooling_raw, include=["partial"]).set_index("size")
    assert table.loc[1, "runs"] == 4 and table.loc[1, "ops"] == 8  # its re-run counts
    assert _left_out(table.loc[1]) == (0, 0, 1)  # the partial run: a duplicate now
    assert table.loc[2, "runs"] == 2 and table.loc[2, "ops"] == 3
    # A complete run of 2 + 2 ms and the partial one of 100 ms count once each.
    assert table.loc[2, "latency_mean_ms"] == pytest.approx((2 + 100) / 2)
    assert _left_out(table.loc[2]) == (0, 1, 1)


def test_a_group_of_left_out_runs_only_is_a_row_of_zero_runs(pooling_raw: Path):
    table = summary_table(pooling_raw, by=["size", "repetition"], intervals=True)
    failed = table[(table["size"] == 2) & (table["repetition"] == 3)].iloc[0]
    assert failed["runs"] == 0 and failed["ops"] == 0 and _left_out(failed) == (0, 1, 0)
    assert np.isnan(failed["throughput_ops_s"]) and np.isnan(failed["latency_p50_ms_ci_low"])
    by_status = summary_table(pooling_raw, by=["status"]).set_index("status")
    assert list(by_status.index) == ["complete", "failed", "partial"]
    assert by_status.loc["complete", "runs"] == 5 and _left_out(by_status.loc["complete"]) \
        == (0, 0, 1)
    assert by_status.loc["partial", "runs"] == 0 and _left_out(by_status.loc["partial"]) \
        == (2, 0, 0)


def test_by_op_a_left_out_run_counts_where_its_ops_would_go(pooling_raw: Path):
    table = summary_table(pooling_raw, by=["op"])
    assert len(table) == 2
    get = table[table["op"] == "get"].iloc[0]
    assert get["runs"] == 5 and _left_out(get) == (2, 0, 1)
    # The failed run measured no op: a row of its own, op empty, so it is still said.
    none = table[table["op"].isna()].iloc[0]
    assert none["runs"] == 0 and none["ops"] == 0 and _left_out(none) == (0, 1, 0)


def test_summarise_tree_gives_p999_and_goodputs_interval_when_asked(tiny_raw: Path):
    """The explorer's fields: p99.9 and goodput's interval, the throughput interval's
    function over the answered ops; `harness summary`'s own table is unchanged."""
    from harness.analysis.data.summary_ci import TABLE_METRICS
    from harness.analysis.stats import intervals
    from harness.analysis.summary_table import summarise_tree

    plain = summary_table(tiny_raw, intervals=True)
    assert "goodput_ops_s_ci_low" not in plain and "latency_p999_ms" not in plain
    table = summarise_tree(tiny_raw, ["size"], intervals=True,
                           fields=[*SUMMARY_COLUMNS, "latency_p999_ms"],
                           metrics={**TABLE_METRICS, "goodput_ops_s": None}).table
    one = table[table["size"] == 1].iloc[0]
    # size=1: 4 answered ops of 4 in 10 ms, then 1 of 2 (the other an error) in 6 ms;
    # each run counting once, as throughput (`intervals.run_scale`: per op of the run).
    scale = 1 / np.array([4, 2])
    want = intervals.ratio_interval(scale * np.array([4, 1]),
                                    scale * np.array([0.010, 0.006]))
    assert one["goodput_ops_s"] == pytest.approx((4 / 4 + 1 / 2) / 0.0055) == want.value
    assert (one["goodput_ops_s_ci_low"], one["goodput_ops_s_ci_high"]) == pytest.approx(
        (want.low, want.high))
    assert one["goodput_ops_s_ci_low"] != one["throughput_ops_s_ci_low"]
    assert one["latency_p999_ms"] == pytest.approx(np.quantile([1, 2, 3, 4, 2, 4], 0.999))
    assert "latency_p999_ms_ci_low" in table  # NaN here: 6 ops are too few for one
