"""harness.studies.cluster and notebook 30-cluster on synthetic runs with known effects.

The synthetic study: every object of an op takes its setup's time (plus noise), where a
write costs 100 µs on one node, + 200 µs per standby in a cluster, + the round trip over
a network; reads cost 50 µs everywhere. So replication and network steps of the writes
are known, the reads have none, and the fit must find 1 µs per µs of round trip.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness import paths
from harness.analysis.sections import tables
from harness.analysis.stats import multiplicity
from harness.report import execute_notebook, venv_kernel
from harness.results import OK, write_run
from harness.studies import cluster as cluster_views
from harness.studies.cluster import analysis as cluster
from tests.fixtures.claims import assert_prose_matches, assert_wording_rule
from tests.fixtures.figures import legends_over_axes, published
from tests.fixtures.rawdata import make_ops, manifest_for

SETUPS = [("single", 1, "none", 0.0), ("local-cluster", 2, "none", 0.0),
          ("local-cluster", 4, "none", 0.0), ("network-cluster", 2, "lan", 0.2),
          ("network-cluster", 2, "wifi", 3.0), ("network-cluster", 4, "lan", 0.2),
          ("network-cluster", 4, "wifi", 3.0)]
N = 200


def true_us(op: str, nodes: int, rtt_ms: float) -> float:
    if op not in ("insert", "search_delete"):
        return 50.0
    return 100.0 + 200.0 * (nodes - 1) + rtt_ms * 1e3


def write_cluster(raw_dir: Path, reps: int = 4, seed: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    i = 0
    for mode, nodes, profile, rtt in SETUPS:
        for op in cluster.OPS:
            for rep in range(1, reps + 1):
                us = true_us(op, nodes, rtt) * rng.lognormal(0, 0.03)
                lat = rng.normal(us * 1e3, us * 30, N).clip(1000).astype(np.int64)
                grid = {"services.db.mode": mode, "services.db.nodes": nodes,
                        "services.db.profile": profile, "op": op}
                m = manifest_for(run_id=f"c{i:04d}", experiment="cluster_modes",
                                 workload="cluster", grid_point=grid, repetition=rep,
                                 params={"objects": N}, ops=N, warmup_ops=0)
                config = {"mode": mode, "nodes": nodes, "standbys": nodes - 1,
                          "profile": profile, "link": {"rtt_ms": rtt},
                          "emulation": "relay" if rtt else "none"}
                m = dataclasses.replace(m, services={"db": {
                    "kind": "pg_cluster", "host": "client", "version": "15.6",
                    "config": config}})
                write_run(raw_dir, m, make_ops(op, lat, np.full(N, OK), np.zeros(N, bool),
                                               gap_ns=0))
                i += 1
    return raw_dir


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cluster(tmp_path_factory.mktemp("cluster-raw"))


@pytest.fixture(scope="module")
def runs(raw: Path):
    return cluster.load_study(cluster_views.Study(raw, 0.05, None))[1]


def test_per_run_frame_takes_the_setup_from_the_manifest(runs) -> None:
    assert len(runs) == len(SETUPS) * 5 * 4
    assert cluster.setup_order(runs) == [
        "single", "local n=2", "local n=4", "network n=2 lan", "network n=2 wifi",
        "network n=4 lan", "network n=4 wifi"]
    one = runs[(runs["setup"] == "network n=2 wifi") & (runs["op"] == "insert")]
    assert (one["objects"] == N).all() and (one["rtt_ms"] == 3.0).all()
    # µs per object is the run's wall time / N: back-to-back ops, so about the latency.
    assert one["us_per_object"].mean() == pytest.approx(3300, rel=0.05)
    assert np.allclose(one["total_ms"] * 1e3 / N, one["us_per_object"])


def test_seed_table_has_every_op_and_setup(runs) -> None:
    t = cluster.seed_table(runs)
    assert len(t) == 35 and list(t["op"].unique()) == list(cluster.OPS)
    row = t[(t["op"] == "insert") & (t["setup"] == "local n=4")].iloc[0]
    assert row["us"] == pytest.approx(700, rel=0.05) and row["n"] == 4
    assert row["us_low"] < row["us"] < row["us_high"]


def test_decomposition_finds_the_known_steps(runs) -> None:
    d = cluster.decomposition(runs).set_index(["op", "src", "dst"])
    rep = d.loc[("insert", "single", "local n=4")]
    assert rep["step"] == "replication" and rep["significant"]
    assert rep["added_us"] == pytest.approx(600, rel=0.1)  # 3 standbys x 200 µs
    net = d.loc[("insert", "local n=2", "network n=2 wifi")]
    assert net["added_us"] == pytest.approx(3000, rel=0.05) and net["significant"]
    reads = d.reset_index()
    reads = reads[~reads["op"].isin(["insert", "search_delete"])]
    assert len(reads) == 18 and not reads["significant"].any()
    assert reads["verdict"].isin(["no significant difference", "inconclusive"]).all()
    assert rep["verdict"] == "worse"  # more time per object


def test_fit_recovers_one_round_trip_per_commit(runs) -> None:
    fit = cluster.rtt_fit(runs).set_index("term")["estimate"]
    assert fit["per µs of RTT"] == pytest.approx(1.0, abs=0.05)
    assert fit["per extra standby [µs]"] == pytest.approx(200, rel=0.15)
    assert cluster.rtt_fit(runs[runs["mode"] == "single"]).empty  # nothing to fit


def test_findings_are_written_from_the_tests(raw: Path) -> None:
    study = cluster_views.analyse(raw)
    text = study.findings().data
    assert "the network adds" in text and "replication adds" in text
    assert "of their 18 steps: " in text and "Holm" not in text
    assert "make no significant difference" not in text.split("of their 18 steps")[1]
    d = study.decomposition()
    judged = d.attrs["judged"]
    level = multiplicity.fmt_level(judged.family.level)
    # One family over every step of every operation (p.26 adjusted per operation).
    assert len(judged) == len(d) == 30
    assert f"The 30 steps of all operations are one family: {judged.sentence('steps')}" \
        in text
    # Every step sentence gives its ratio and its µs at the family's level, from the
    # decomposition table's numbers.
    assert_prose_matches(text, judged, at_least=12)
    assert_wording_rule(text, at_least=12)
    f = tables.num(3)
    for row in d[d["op"].isin(["insert", "search_delete"])].itertuples():
        if row.significant:  # magnitudes, smaller first
            low, high = sorted((abs(row.added_low), abs(row.added_high)))
        else:  # signed
            low, high = row.added_low, row.added_high
        assert (f"CI {f(low)} to {f(high)}" in text
                or f"CI {f(abs(low))} to {f(abs(high))}" in text), row
    assert all(f"{level} CI" in line for line in text.splitlines()
               if ("inconclusive" in line or "no significant difference (" in line)
               and not line.startswith("- Searches"))
    slope = re.search(r"each µs of round trip adds ([0-9.]+) µs per insert", text)
    assert slope and float(slope.group(1)) == pytest.approx(1.0, abs=0.05)


def test_added_time_and_ratio_are_one_interval(runs) -> None:
    """Issue 26, p.26-27: "adds 1,076 µs (95% CI -20.3-2,171)" beside a ratio test that
    disagreed. The added µs are now the ratio's own adjusted interval at the from-mean:
    one excludes 0 exactly when the other excludes 1, and "adds" needs the verdict."""
    d = cluster.decomposition(runs)
    np.testing.assert_allclose(d["added_us"], d["from_us"] * (d["ratio"] - 1))
    excludes_0 = (d["added_low"] > 0) | (d["added_high"] < 0)
    excludes_1 = (d["ratio_low"] > 1) | (d["ratio_high"] < 1)
    assert (excludes_0 == excludes_1).all() and (excludes_1 == d["significant"]).all()
    # A step that is not significant is never said to add anything.
    row = d[~d["significant"]].iloc[0]
    sentence = cluster_views.views._step_sentence(row, d.attrs["judged"][row.name])
    assert " adds " not in sentence and " saves " not in sentence
    assert "inconclusive" in sentence or "no significant difference" in sentence or \
        "not significant after adjustment" in sentence


def test_a_slope_whose_interval_includes_0_adds_nothing() -> None:
    row = {"estimate": 120.0, "low": -30.0, "high": 270.0}
    text = cluster_views.views._slope(row, "each extra standby", "µs")
    assert "adds" not in text and "includes 0" in text
    assert cluster_views.views._slope({**row, "low": 30.0}, "each extra standby", "µs") == \
        "each extra standby adds 120 µs (95% CI 30 to 270)"


def test_tables_use_the_kits_interval_of_a_mean(runs) -> None:
    """Issue 26, p.22: "75.7 (0-190)" was a t or BCa interval picked by a Shapiro-Wilk
    pre-test and cut at 0; the methodology promises the jackknife of the log."""
    from harness.analysis.stats import comparisons as stats

    t = cluster.seed_table(runs)
    assert set(t["method"]) == {"jackknife over runs, t on log"}
    row = t.iloc[0]
    g = runs[(runs["op"] == row["op"]) & (runs["setup"] == row["setup"])]
    est = stats.run_mean_ci(g["us_per_object"])
    assert (row["us_low"], row["us_high"]) == pytest.approx((est.low, est.high))
    assert (t["us_low"] > 0).all()


def test_no_legend_covers_a_plot(raw: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51, p.27: the setups' legend sat over the bars; the growth panels' over
    their points."""
    drawn = published(monkeypatch)
    study = cluster_views.analyse(raw)
    for figure in (study.us_figure, study.decomposition_figure, study.growth_figure):
        assert figure() is not None
    assert sorted(drawn) == ["cluster_modes-decomposition", "cluster_modes-insert-growth",
                             "cluster_modes-us-per-object"]
    assert [(name, over) for name, fig in drawn.items()
            for over in legends_over_axes(fig)] == []


def test_the_notebook_executes_and_draws(raw: Path, tmp_path: Path) -> None:
    nb = paths.notebooks_dir() / "30-cluster.ipynb"
    out = tmp_path / nb.name
    with venv_kernel() as kernel:
        params = {"raw_results": str(raw), "figures_dir": str(tmp_path / "fig")}
        assert execute_notebook(nb, out, params, kernel) is None
        text = out.read_text()
        assert "image/png" in text and "Not run" not in text
        for name in ("us-per-object", "decomposition", "insert-growth"):
            assert (tmp_path / "fig" / f"cluster-modes-{name}.png").exists()
        empty = tmp_path / "empty"
        empty.mkdir()
        params = {"raw_results": str(empty), "figures_dir": str(tmp_path / "fig2")}
        assert execute_notebook(nb, tmp_path / "empty.ipynb", params, kernel) is None
        assert "Not run" in (tmp_path / "empty.ipynb").read_text()


def test_a_sampled_load_gives_the_same_per_run_frame(raw: Path, runs, monkeypatch) -> None:
    """Above the figure budget only a sample of ops is held; the per-run frame, which every
    table and fit of the study comes from, is still every op's."""
    monkeypatch.setattr(cluster, "FIGURE_OPS", 1_000)
    loaded, thin = cluster.load_study(cluster_views.Study(raw, 0.05, None))
    assert loaded is not None and loaded.sample_every == 28  # 28,000 ops
    pd.testing.assert_frame_equal(thin.drop(columns="run_dir", errors="ignore"),
                                  runs.drop(columns="run_dir", errors="ignore"),
                                  check_exact=False, rtol=1e-12)
