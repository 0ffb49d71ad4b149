"""`harness compare` on synthetic trees with a known answer: fields, verdicts, one
Benjamini-Hochberg family over the rows with intervals that agree, --fail-if-worse and
--gate familywise, experiment directories, bad input. The end-to-end run against a
real memcached is tests/analysis/test_compare_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness import cli
from harness.analysis.compare import ROW_FIELDS, compare, comparison, load_tree, render
from harness.analysis.data import pooling
from harness.analysis.data.summary_ci import group_intervals
from harness.analysis.stats import multiplicity, verdict
from harness.errors import ResultsError
from harness.results import OK, write_run
from tests.fixtures.rawdata import make_ops, manifest_for


def write_tree(raw: Path, scale: dict[str, float], *, seed: int, reps: int = 5,
               ops: int = 200) -> Path:
    """Experiment `exp`: ops a and b, `reps` runs each of `ops` closed-loop ops with a
    lognormal(0.5) op spread and 3% run-to-run spread; op latencies x `scale[op]`."""
    rng = np.random.default_rng(seed)
    for o, (op, factor) in enumerate(scale.items()):
        for rep in range(reps):
            lat = rng.lognormal(np.log(1e6 * factor * rng.lognormal(0, 0.03)), 0.5, ops)
            m = manifest_for(run_id=f"{op}{rep}", experiment="exp", workload="w",
                             grid_point={"op": op}, repetition=rep + 1, ops=ops,
                             warmup_ops=0, started_utc=f"2024-03-01T10:{o:02d}:{rep:02d}Z")
            write_run(raw, m, make_ops(op, lat.astype(np.int64), np.full(ops, OK),
                                       np.zeros(ops, bool), gap_ns=0))
    return raw


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = write_tree(tmp_path_factory.mktemp("base"), {"a": 1.0, "b": 1.0}, seed=1)
    cand = write_tree(tmp_path_factory.mktemp("cand"), {"a": 1.5, "b": 1.0}, seed=2)
    return base, cand


def test_known_slowdown_is_worse_and_json_has_the_fields(trees, capsys):
    base, cand = trees
    assert cli.main(["compare", str(base), str(cand), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(list(r) == ["op", *ROW_FIELDS] for r in rows)
    by = {(r["op"], r["metric"]): r for r in rows}
    slow = by[("a", "latency_mean")]
    assert slow["verdict"] == verdict.WORSE and 1.3 < slow["ratio"] < 1.7
    assert slow["ratio_ci_low"] < slow["ratio"] < slow["ratio_ci_high"]
    assert slow["n_base"] == slow["n_cand"] == 5 and slow["test"] == verdict.LOG_RATIO_TEST
    assert by[("a", "throughput")]["verdict"] == verdict.WORSE  # lower throughput is worse
    assert by[("a", "latency_p50")]["verdict"] == verdict.WORSE
    # 200 ops per run back no p99 interval: inconclusive, and the reason is given.
    p99 = by[("a", "latency_p99")]
    assert p99["verdict"] == verdict.INCONCLUSIVE and p99["p"] is None
    assert p99["p_adjusted"] is None
    assert p99["test"].startswith("none: too few ops")
    for metric in ("throughput", "latency_mean", "latency_p50"):
        assert by[("b", metric)]["verdict"] not in (verdict.BETTER, verdict.WORSE)


def test_swapped_trees_say_better(trees):
    base, cand = trees
    t = compare(cand, base, metrics=["latency_mean", "throughput"]).set_index(
        ["op", "metric"])
    assert t.loc[("a", "latency_mean"), "verdict"] == verdict.BETTER
    assert t.loc[("a", "throughput"), "verdict"] == verdict.BETTER


def test_rows_are_one_bh_family_with_intervals_at_its_level(trees):
    base, cand = trees
    t = compare(base, cand, metrics=["throughput", "latency_mean"])
    ib, ic = group_intervals(load_tree(base), ["op"]), group_intervals(load_tree(cand), ["op"])
    raw = []
    for r in t.itertuples():
        field = {"throughput": "throughput_ops_s", "latency_mean": "latency_mean_ms"}[r.metric]
        b, c = ib[(r.op,)][field], ic[(r.op,)][field]
        raw.append(verdict.log_ratio_test(b.log_value, b.se_log, b.df,
                                          c.log_value, c.se_log, c.df))
    np.testing.assert_allclose(t["p"], [x.p for x in raw])  # raw p as tested
    fam = multiplicity.adjust([x.p for x in raw])
    np.testing.assert_allclose(t["p_adjusted"], fam.p_adjusted)
    # a's two rows are worse (R = 2 of m = 4): intervals at 1 - 2 * 0.05 / 4 = 97.5%.
    assert fam.rejections == 2
    np.testing.assert_allclose(t["ratio_ci_level"], 0.975)
    for r, x in zip(t.itertuples(), raw, strict=True):
        assert (r.ratio_ci_low, r.ratio_ci_high) == pytest.approx(
            (x.at_level(0.975).low, x.at_level(0.975).high))
        assert (r.verdict in (verdict.BETTER, verdict.WORSE)) == (
            r.ratio_ci_low > 1 or r.ratio_ci_high < 1)
    assert set(t["adjustment"]) == {"Benjamini-Hochberg"}


def test_table_states_the_level_and_both_p(trees):
    base, cand = trees
    c = comparison(base, cand, metrics=["throughput", "latency_mean"])
    text = render(c.table, ["op"], "table", c.family)
    head, *_, note = text.splitlines()
    assert "cand/base [97.5% CI]" in head and "  p  " in head and "p (BH)" in head
    assert note == ("note: Benjamini-Hochberg at q = 0.05 over the 4 tested rows, 2 "
                    "significant; intervals FCR-adjusted at 97.5% (1 − R·q/m, R = "
                    "rejections; Benjamini-Yekutieli)")
    md = render(c.table, ["op"], "markdown", c.family)
    assert md.startswith("| op | metric | base [95% CI] | cand [95% CI] | cand/base [97.5% CI] "
                         "| p | p (BH) | runs | verdict |")
    # Each cell's interval is the row's, in the render's number format.
    row = c.table.iloc[0]
    assert f"[{row.ratio_ci_low:.2f}, {row.ratio_ci_high:.2f}]" in text.splitlines()[1]


def test_gate_familywise_is_bonferroni_with_simultaneous_intervals(trees, capsys):
    base, cand = trees
    t = compare(base, cand, gate="familywise")
    tested = t["p"].notna()
    m = int(tested.sum())
    np.testing.assert_allclose(t.loc[tested, "p_adjusted"],
                               np.minimum(1, m * t.loc[tested, "p"]))
    np.testing.assert_allclose(t["ratio_ci_level"], 1 - 0.05 / m)
    assert set(t["adjustment"]) == {"Bonferroni"}
    excludes = (t["ratio_ci_low"] > 1) | (t["ratio_ci_high"] < 1)
    assert (t["verdict"].isin([verdict.WORSE, verdict.BETTER]) == excludes).all()
    assert cli.main(["compare", str(base), str(cand), "--fail-if-worse", "5",
                     "--gate", "familywise"]) == 1
    out = capsys.readouterr().out
    assert "p (Bonferroni)" in out and "intervals at " in out and "simultaneous" in out


def test_trees_read_by_duckdb_judge_as_the_ops_in_pandas(trees):
    """Paths go through DuckDB (one group in memory at a time), `Loaded` frames through
    pandas: the same intervals, p-values and verdicts."""
    base, cand = trees
    sql = compare(base, cand)
    pandas = compare(load_tree(base), load_tree(cand))
    assert sql["verdict"].tolist() == pandas["verdict"].tolist()
    assert sql["test"].tolist() == pandas["test"].tolist()
    numeric = [c for c in ROW_FIELDS if sql[c].dtype.kind == "f"]
    assert len(numeric) >= 10
    np.testing.assert_allclose(sql[numeric].to_numpy(float), pandas[numeric].to_numpy(float),
                               rtol=1e-9, equal_nan=True)


def test_fail_if_worse_exit_code(trees, capsys):
    base, cand = trees
    assert cli.main(["compare", str(base), str(cand), "--fail-if-worse", "5"]) == 1
    assert "significantly worse by more than 5%" in capsys.readouterr().err
    assert cli.main(["compare", str(base), str(cand), "--fail-if-worse", "80"]) == 0
    assert cli.main(["compare", str(cand), str(base), "--fail-if-worse", "5"]) == 0


def test_same_tree_and_experiment_dir(trees, capsys):
    base, _ = trees
    t = compare(base, base / "exp", metrics=["throughput"])
    assert (t["ratio"] == 1).all() and (t["p"] == 1).all() and (t["p_adjusted"] == 1).all()
    assert not t["verdict"].isin([verdict.BETTER, verdict.WORSE]).any()
    assert cli.main(["compare", str(base), str(base), "--format", "markdown",
                     "--metric", "throughput"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()  # head, rule, a, b, and how the family was judged
    assert lines[0].startswith("| op | metric |") and len(lines) == 6
    assert lines[5].startswith("- Benjamini-Hochberg at q = 0.05 over the 2 tested rows, 0 "
                               "significant; intervals FCR-adjusted at 97.5% (1 − q/m: none")


def test_bad_input_is_a_clear_error(trees, tmp_path, capsys):
    base, _ = trees
    assert cli.main(["compare", str(base), str(tmp_path / "nope")]) == 2
    assert "nope: no such raw-results directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["compare", str(base), str(empty)]) == 2
    assert "empty: no runs in it" in capsys.readouterr().err
    other = write_tree(tmp_path / "other", {"c": 1.0}, seed=3, reps=2, ops=20)
    with pytest.raises(ResultsError, match=r"no group in common on op: base has \['a', 'b'\]"):
        compare(base, other)
    with pytest.raises(ResultsError, match="unknown metric 'speed'"):
        compare(base, base, metrics=["speed"])



def test_compare_pools_as_summary_does(pooling_raw: Path, tiny_raw: Path):
    t = compare(pooling_raw, tiny_raw, metrics=["throughput"])
    assert (list(t["n_base"]), list(t["n_cand"])) == ([5], [4])  # not 9 runs of `pooling`
    c = comparison(pooling_raw, pooling_raw / "pooling", metrics=["throughput"],
                   include=["partial"])
    assert list(c.table["n_base"]) == list(c.table["n_cand"]) == [6]
    assert pooling.counts(c.left_out["BASE"]) == {"pooling": {"failed": 1, "duplicate": 2}}
    # Trees a notebook loaded were pooled when loaded: their left-out runs are theirs.
    loaded = load_tree(pooling_raw)
    assert len(comparison(loaded, loaded).left_out["CAND"]) == 4


def test_compare_says_what_it_left_out(pooling_raw: Path, tiny_raw: Path, capsys):
    assert cli.main(["compare", str(pooling_raw), str(tiny_raw), "--metric",
                     "throughput"]) == 0
    # Below the table: the checks' warnings (tiny's run with failed ops fails `errors`),
    # and what was left out.
    [left] = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("left out")]
    assert left.startswith("left out: of BASE, pooling: 2 partial, 1 failed and 1 duplicate "
                           "run (--include partial adds the partial ones; ")
    assert cli.main(["compare", str(tiny_raw), str(pooling_raw), "--include", "partial",
                     "--format", "json"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)  # json stays json
    # Matched on the op and the shared grid key `size` (never pooled across sizes): the
    # 6 runs with partial ones included are 4 of size 1 and 2 of size 2, per metric.
    assert sorted((r["size"], r["n_cand"]) for r in rows if r["metric"] == "throughput") == [
        (1, 4), (2, 2)]
    assert err.startswith("left out: of CAND, pooling: 1 failed and 2 duplicate runs (")
    assert cli.main(["compare", str(tiny_raw), str(tiny_raw)]) == 0
    assert "left out" not in capsys.readouterr().out


def test_report_section_is_omitted_unless_configured(trees):
    from harness.analysis.compare import section, section_parts
    from harness.analysis.sections.display import OMIT_MARKER

    assert OMIT_MARKER in section(None, None).metadata
    base, cand = trees
    shown, published, figure = section_parts(base, cand)
    assert not shown.metadata and "| op | metric |" in shown.data
    # The report's summary of findings: each row's verdict and the comparison's question.
    meta = published._repr_mimebundle_()[1]
    assert len(meta["harness_answers"]) == len(compare(base, cand))
    assert meta["harness_questions"][0]["question"].startswith(f"Did {cand} change")
    assert "worse" in shown.data.split("\n")[0]  # the tally names the verdicts
    assert figure.data[:8] == b"\x89PNG\r\n\x1a\n"  # the forest plot


@pytest.mark.parametrize("runs", [3, 5, 10])
def test_false_better_worse_rate_of_compares_statistic_on_identical_trees(runs):
    # compare's path: pooled throughput per side (jackknife over runs), then Welch's t
    # on the log ratio and the verdict. Identical distributions, 10% run-to-run spread.
    rng = np.random.default_rng(runs)
    sims, ops = 1500, 100
    from harness.analysis.stats import intervals

    calls = 0
    for _ in range(sims):
        sides = []
        for _side in range(2):
            busy = rng.lognormal(0, 0.5, (runs, ops)).sum(axis=1) * rng.lognormal(0, 0.1, runs)
            sides.append(intervals.ratio_interval(np.full(runs, float(ops)), busy))
        b, c = sides
        r = verdict.log_ratio_test(b.log_value, b.se_log, b.df, c.log_value, c.se_log, c.df)
        calls += verdict.decide(r.low, r.high, r.p, ratio=r.ratio,
                                higher_is_better=True) in (verdict.BETTER, verdict.WORSE)
    assert calls / sims <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / sims)


def test_a_tree_of_left_out_runs_only_says_so(pooling_raw: Path, tmp_path: Path):
    import shutil

    raw = tmp_path / "raw"
    shutil.copytree(pooling_raw, raw)
    for run in raw.glob("pooling/*"):
        if '"status": "complete"' in (run / "manifest.json").read_text():
            shutil.rmtree(run)
    with pytest.raises(ResultsError, match=r"no run to compare: every one was left out: "
                       r"pooling: 2 partial and 1 failed run \(--include partial"):
        compare(raw, raw)
    assert list(compare(raw, raw, include=["partial"])["n_base"]) == [2] * 4


def test_an_interval_that_bounds_nothing_is_printed_as_such(trees):
    """A ratio's interval of "0.00-506x" told a reader nothing and looked like a result:
    beyond 10x either side it is "too few runs to bound", with the runs it has."""
    base, cand = trees
    t = compare(base, cand, metrics=["latency_mean"])
    row = t.index[t["op"] == "b"][0]
    t.loc[row, ["ratio_ci_low", "ratio_ci_high"]] = [0.001, 506.0]
    t.loc[row, ["cand_ci_low", "cand_ci_high"]] = [0.0, 1e6]
    text = render(t, ["op"], "table")
    line = next(ln for ln in text.splitlines() if ln.lstrip().startswith("b "))
    assert "[too few runs to bound (5 runs; about " in line and "506" not in line
    assert "1e+06" not in line and "1,000,000" not in line
    a = next(ln for ln in text.splitlines() if ln.lstrip().startswith("a "))
    assert "too few runs" not in a and "[" in a  # a bounded interval prints as before
