"""`harness explain`: known quantile effects found with intervals that hold them, nothing
where there is nothing, aliases named, unsound runs left out."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.analysis.explain.analysis import explain
from harness.analysis.explain.text import render, sentence
from harness.cli import main as cli_main
from harness.spec.design import fractional
from tests.fixtures.rawdata import FACTORIAL_EXPERIMENT, write_factorial


def _terms(e) -> dict:
    return {(t.quantile, t.term): t for t in e.terms}


def test_a_shift_a_fatter_tail_and_nothing_are_told_apart(tmp_path: Path) -> None:
    e = explain(write_factorial(tmp_path / "raw"), FACTORIAL_EXPERIMENT)
    t = _terms(e)
    assert e.runs == 24 and e.configurations == 8 and not e.left_out
    assert list(e.factors) == ["threads", "conns", "value_size"]
    for q in (0.5, 0.99):  # threads=2 multiplies every quantile by 0.7
        th = t[(q, "threads=2")]
        assert th.significant and th.ci_low < 0.7 < th.ci_high
    assert t[(0.99, "conns=16")].significant and t[(0.99, "conns=16")].effect_ratio > 1.3
    assert not t[(0.5, "conns=16")].significant or t[(0.5, "conns=16")].effect_ratio < 1.05
    for q in (0.5, 0.99):
        assert not t[(q, "value_size=4096")].significant
        assert not t[(q, "threads=2:value_size=4096")].significant
    found = [x for x in e.terms if x.significant]
    assert all(x.ci_low > 1 or x.ci_high < 1 for x in found)  # verdict = interval
    assert "threads=2 multiplies p99 by 0.7" in sentence(t[(0.99, "threads=2")])
    doc = json.loads(render(e, "json"))
    assert set(doc["terms"][0]) >= {"quantile", "term", "effect_ratio", "ci_low",
                                    "ci_high", "q"}
    assert doc["runs"] == 24 and doc["left_out"] == []


def test_a_fractional_design_estimates_the_main_effects_and_names_aliases(
        tmp_path: Path) -> None:
    d = fractional(["threads", "conns", "value_size"], [(1, 2), (4, 16), (100, 4096)], 3)
    assert len(d.points()) == 4
    raw = write_factorial(tmp_path / "raw", reps=4, points=d.points())
    e = explain(raw, FACTORIAL_EXPERIMENT)
    t = _terms(e)
    assert t[(0.99, "threads=2")].ci_low < 0.7 < t[(0.99, "threads=2")].ci_high
    # Resolution III: every two-factor interaction shares a main effect's column.
    assert {name for name, _ in e.aliases} == {"threads=2:conns=16",
                                               "threads=2:value_size=4096",
                                               "conns=16:value_size=4096"}
    assert "is not estimated on its own" in render(e)


def test_the_command_line_explains_and_refuses_what_it_cannot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = write_factorial(tmp_path / "raw")
    assert cli_main(["explain", str(raw), "--experiment", FACTORIAL_EXPERIMENT,
                     "--format", "json", "--interactions", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not any(":" in t["term"] for t in doc["terms"])
    assert cli_main(["explain", str(raw), "--experiment", FACTORIAL_EXPERIMENT,
                     "--trend", "threads"]) == 0
    out = capsys.readouterr().out
    assert "threads (per doubling)" in out
    assert cli_main(["explain", str(raw), "--experiment", FACTORIAL_EXPERIMENT,
                     "--with", "cpu"]) != 0
    assert "no telemetry" in capsys.readouterr().err
    assert cli_main(["explain", str(raw), "--experiment", "nope"]) != 0
    assert math.isfinite(1.0)


def test_the_intervals_are_those_of_welch_and_of_statsmodels_hc3() -> None:
    """Checked against code we did not write: one factor of two values is Welch's t on
    the two configurations' log quantiles (scipy); with unreplicated cells, HC3 with the
    residual df is statsmodels' OLS(cov_type="HC3")."""
    import numpy as np
    import pandas as pd
    import statsmodels.api as sm
    from scipy import stats

    from harness.analysis.explain.analysis import explain_table
    from harness.analysis.explain.data import RunTable

    rng = np.random.default_rng(4)
    a, b = rng.lognormal(0, 0.05, 4), rng.lognormal(0.2, 0.15, 6)  # unequal variances
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(10)],
                         "config_id": ["x=0"] * 4 + ["x=1"] * 6, "x": [0] * 4 + [1] * 6})
    table = RunTable(runs, {0.5: pd.Series(np.concatenate([a, b]))},
                     pd.DataFrame(index=range(10)), {"x": (0, 1)}, [], [])
    [t] = explain_table(table, quantiles=(0.5,)).terms
    welch = stats.ttest_ind(np.log(b), np.log(a), equal_var=False)
    assert math.isclose(math.log(t.effect_ratio), np.log(b).mean() - np.log(a).mean())
    assert math.isclose(t.p, welch.pvalue, rel_tol=1e-9)
    assert math.isclose(t.df, welch.df, rel_tol=1e-9)
    # Two factors, one run per configuration plus a covariate: HC3.
    n = 12
    x1, x2 = np.tile([0, 1], 6), np.repeat([0, 1], 6)
    cov = rng.normal(0.5, 0.2, n)
    y = 0.1 * x1 - 0.2 * x2 + 0.3 * cov + rng.normal(0, 0.05, n)
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(n)],
                         "config_id": [f"c{i}" for i in range(n)], "x1": x1, "x2": x2})
    table = RunTable(runs, {0.5: pd.Series(np.exp(y))}, pd.DataFrame({"cpu": cov}),
                     {"x1": (0, 1), "x2": (0, 1)}, [], [])
    got = {t.term: t for t in explain_table(table, quantiles=(0.5,), interactions=1,
                                            covariates=["cpu"]).terms}
    design = np.column_stack([np.ones(n), 2 * x1 - 1, 2 * x2 - 1, cov - cov.mean()])
    fit = sm.OLS(y, design).fit(cov_type="HC3")
    # Deviation coding: a main effect is twice its coefficient (from -1 to +1).
    assert math.isclose(math.log(got["x1=1"].effect_ratio), 2 * fit.params[1])
    assert math.isclose(got["x1=1"].p, float(stats.t.sf(abs(fit.tvalues[1]), n - 4) * 2),
                        rel_tol=1e-6)
    # A covariate's effect is per its step (+0.1 core): a tenth of the per-core slope.
    assert math.isclose(math.log(got["cpu (per +0.1 core)"].effect_ratio),
                        0.1 * fit.params[3])
