"""`harness explain` on trees no run of the kit writes (issue 48 item 8, attack 1): a key
of thousands of values, many keys of many values over few runs, keys whose values print
like terms, no spread at all, latencies of 0, a key some runs lack. Each is explained
or refused in one line, in work bounded by the runs and terms, never answered wrong."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.explain.analysis import MAX_TERMS, explain, explain_table
from harness.analysis.explain.data import RunTable
from harness.errors import ResultsError
from harness.results import write_run
from tests.fixtures.rawdata import make_ops, manifest_for

EXPERIMENT = "tampered"


def _table(points: list[dict], y: dict[float, np.ndarray], factors: dict[str, tuple],
           covariates: pd.DataFrame | None = None) -> RunTable:
    runs = pd.DataFrame(points)
    runs.insert(0, "run_id", [f"r{i}" for i in range(len(points))])
    runs.insert(1, "config_id", [repr(sorted(p.items(), key=str)) for p in points])
    cov = covariates if covariates is not None else pd.DataFrame(index=range(len(points)))
    return RunTable(runs, {q: pd.Series(v) for q, v in y.items()}, cov, factors, [], [])


def test_a_key_of_ten_thousand_values_is_refused_before_its_design_is_built() -> None:
    """20,000 terms over 10,000 runs would be a 1.6 GB design and hours of work: refused
    with what to do instead (its values are numbers: a trend is one term)."""
    n = 10_000
    points = [{"v": i + 1, "t": i % 2} for i in range(n)]
    table = _table(points, {0.5: np.ones(n)}, {"v": tuple(range(1, n + 1)), "t": (0, 1)})
    with pytest.raises(ResultsError) as exc:
        explain_table(table, EXPERIMENT, quantiles=(0.5,))
    message = str(exc.value)
    assert f"more than explain fits ({MAX_TERMS:,} terms" in message
    assert "v (10,000)" in message and "--trend v" in message


def test_many_keys_of_many_values_over_few_runs_are_explained_exactly() -> None:
    """Six keys of 20 values, each varied alone from one baseline (115 configurations,
    two runs each): every other combination of the keys' values (20^5 per term) is
    absent, and the main effects model is saturated, so a key's effect at a value is
    the ratio of that configuration's geometric mean to the baseline's."""
    rng = np.random.default_rng(8)
    keys = [f"k{i}" for i in range(6)]
    base = dict.fromkeys(keys, 0)
    configs = [base] + [{**base, k: v} for k in keys for v in range(1, 20)]
    points = [c for c in configs for _ in range(2)]
    y = rng.lognormal(0, 0.2, len(points))
    table = _table(points, {0.5: y}, {k: tuple(range(20)) for k in keys})
    e = explain_table(table, EXPERIMENT, quantiles=(0.5,), interactions=1)
    logs = np.log(y).reshape(-1, 2).mean(axis=1)  # each configuration's mean log
    got = {t.term: t.effect_ratio for t in e.terms}
    assert len(got) == 6 * 19
    for i, c in enumerate(configs[1:], start=1):
        key = next(k for k in keys if c[k])
        assert math.isclose(got[f"{key}={c[key]}"], math.exp(logs[i] - logs[0]),
                            rel_tol=1e-9)


def test_two_trends_and_their_interaction_are_ordinary_least_squares() -> None:
    """Two numeric keys as trends per doubling: each main term is its slope at the other's
    mean log, the interaction the slope's change per doubling of the other (statsmodels'
    OLS on centred log2 values, as the model is written)."""
    import statsmodels.api as sm

    rng = np.random.default_rng(2)
    a_vals, b_vals = (1, 2, 4, 8), (1, 3, 9)
    points = [{"a": a, "b": b} for a in a_vals for b in b_vals for _ in range(3)]
    la = np.log2([p["a"] for p in points]) - np.log2(a_vals).mean()
    lb = np.log2([p["b"] for p in points]) - np.log2(b_vals).mean()
    logy = 0.1 * la - 0.05 * lb + 0.03 * la * lb + rng.normal(0, 0.02, len(points))
    table = _table(points, {0.5: np.exp(logy)}, {"a": a_vals, "b": b_vals})
    e = explain_table(table, EXPERIMENT, quantiles=(0.5,), trend=("a", "b"))
    got = {t.term: math.log(t.effect_ratio) for t in e.terms}
    fit = sm.OLS(logy, np.column_stack([np.ones(len(points)), la, lb, la * lb])).fit()
    assert math.isclose(got["a (per doubling)"], fit.params[1], rel_tol=1e-9)
    assert math.isclose(got["b (per doubling)"], fit.params[2], rel_tol=1e-9)
    assert math.isclose(got["a (per doubling):b (per doubling)"], fit.params[3],
                        rel_tol=1e-9)


def test_a_value_that_prints_like_an_interaction_is_not_taken_for_it() -> None:
    """Key a's value "1:b=2" makes a main term named "a=1:b=2", as the interaction of
    a=1 with b=2 is named: each keeps its own estimate (a="1:b=2" doubles every
    latency; no interaction)."""
    rng = np.random.default_rng(3)
    factors = {"a": (0, 1, "1:b=2"), "b": (1, 2)}
    points = [{"a": a, "b": b} for a in factors["a"] for b in factors["b"] for _ in range(4)]
    y = np.array([2.0 if p["a"] == "1:b=2" else 1.0 for p in points])
    y = y * rng.lognormal(0, 0.02, len(points))
    e = explain_table(_table(points, {0.5: y}, factors), EXPERIMENT, quantiles=(0.5,))
    [main] = [t for t in e.terms if t.term == "a=1:b=2" and t.kind == "main"]
    [inter] = [t for t in e.terms if t.term == "a=1:b=2" and t.kind == "interaction"]
    assert main.significant and 1.9 < main.effect_ratio < 2.1
    assert not inter.significant and 0.95 < inter.effect_ratio < 1.05


def test_no_spread_and_no_difference_is_no_finding() -> None:
    """Every run's p99 the same (a latency a damaged file repeats): a ratio of exactly 1
    with no spread is not a significant effect."""
    factors = {"a": (1, 2), "b": (1, 2)}
    points = [{"a": a, "b": b} for a in (1, 2) for b in (1, 2) for _ in range(3)]
    table = _table(points, {0.99: np.full(len(points), 4.6e12)}, factors)
    e = explain_table(table, EXPERIMENT, quantiles=(0.99,))
    assert [t.effect_ratio for t in e.terms] == [1.0, 1.0, 1.0]
    assert not any(t.significant for t in e.terms)
    assert all(t.p == 1.0 for t in e.terms)


def _write(raw: Path, points: list[dict], latency_ns: float = 1e5) -> Path:
    rng = np.random.default_rng(1)
    for i, pt in enumerate(points):
        lat = (rng.lognormal(np.log(latency_ns), 0.3, 300) if latency_ns else
               np.zeros(300)).astype(np.int64)
        m = manifest_for(run_id=f"r{i:03d}", experiment=EXPERIMENT, workload="memcache_mix",
                         grid_point=pt, repetition=i // 4 + 1, ops=300, warmup_ops=0)
        m = dataclasses.replace(m, config_id=",".join(f"{k}={v}" for k, v in pt.items()))
        write_run(raw, m, make_ops("get", lat, np.zeros(300), np.zeros(300, bool)))
    return raw


def test_latencies_of_zero_are_named_as_such(tmp_path: Path) -> None:
    points = [{"a": a, "t": t} for _ in range(3) for a in (1, 2) for t in (1, 2)]
    raw = _write(tmp_path / "raw", points, latency_ns=0)
    with pytest.raises(ResultsError) as exc:
        explain(raw, EXPERIMENT)
    assert "a p50 of 0 ms" in str(exc.value) and "no measured ops" not in str(exc.value)


def test_a_key_some_runs_lack_is_said_to_be_pooled_over(tmp_path: Path) -> None:
    """Half the runs have x null (a NaN written as null): x is no factor, and the
    output says so instead of dropping it silently."""
    points = [{"x": x, "t": t} for _ in range(3) for x in (None, 1.0) for t in (1, 2)]
    e = explain(_write(tmp_path / "raw", points), EXPERIMENT)
    assert list(e.factors) == ["t"]
    assert any("grid key x is no factor: 6 of 12 runs have no value for it" in n
               for n in e.notes)


def test_a_megabyte_value_and_escape_sequences_reach_the_terminal_clipped_and_shown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A grid value of a megabyte is printed as its first characters and a count; a key
    holding escape sequences (a window title, a screen clear, a bidi override) is
    printed with each shown as an escape, never sent."""
    from harness.cli import main as cli_main

    big, esc = "A" * 1_000_000, "k\x1b]0;title\x07\x1b[2J\u202e"
    points = [{esc: s, "t": t} for _ in range(3) for s in ("small", big) for t in (1, 2)]
    raw = _write(tmp_path / "raw", points)
    assert cli_main(["explain", str(raw), "--experiment", EXPERIMENT]) == 0
    out = capsys.readouterr().out
    assert len(out) < 5_000 and "(999,880 more characters)" in out
    assert "\x1b" not in out and "\u202e" not in out
    assert "k\\x1b]0;title\\x07\\x1b[2J\\u202e" in out


def test_an_interaction_of_values_holding_colons_is_said_of_its_two_terms() -> None:
    """A value such as an address ("10.0.0.1:6379") holds the ":" that joins an
    interaction's name: its words name the two terms as they are."""
    from harness.analysis.explain.text import sentence

    rng = np.random.default_rng(4)
    factors = {"addr": ("10.0.0.1:6379", "10.0.0.2:6379"), "b": (1, 2)}
    points = [{"addr": a, "b": b} for a in factors["addr"] for b in (1, 2) for _ in range(4)]
    y = np.array([3.0 if p == {"addr": "10.0.0.2:6379", "b": 2} else 1.0 for p in points])
    e = explain_table(_table(points, {0.5: y * rng.lognormal(0, 0.02, len(points))}, factors),
                      EXPERIMENT, quantiles=(0.5,))
    [inter] = [t for t in e.terms if t.kind == "interaction"]
    assert inter.significant
    assert sentence(inter).startswith("addr=10.0.0.2:6379 together with b=2 further mul")
