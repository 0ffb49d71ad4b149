"""The datastore study above its figure budget: its per-op figures draw every k-th op of
each set, and every table, test and percentile it states is still that of every op."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from harness.analysis.data.load import load
from harness.analysis.figures import plots
from harness.analysis.sections import prose
from harness.analysis.stats import multiplicity
from harness.studies import datastore_memcache
from tests.fixtures.claims import assert_prose_matches, assert_wording_rule
from tests.fixtures.rawdata import write_datastore_memcache


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_datastore_memcache(tmp_path_factory.mktemp("dsmc"), sets=4,
                                    ops_per_set=3_000)


@pytest.fixture(scope="module")
def both(raw: Path) -> tuple[datastore_memcache.Study, datastore_memcache.Study]:
    full = datastore_memcache.analyse(raw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datastore_memcache, "FIGURE_OPS", 10_000)
        thin = datastore_memcache.analyse(raw)
    return full, thin


def test_sampled_only_above_the_budget(
        both: tuple[datastore_memcache.Study, datastore_memcache.Study]) -> None:
    full, thin = both
    assert not full.loaded.sampled
    assert thin.loaded.sample_every == 7 and len(thin.loaded.ops) <= 10_000
    assert "one op in 7 of each set" in thin.describe().data
    assert "one op in" not in full.describe().data


def test_tables_and_findings_are_those_of_every_op(
        both: tuple[datastore_memcache.Study, datastore_memcache.Study]) -> None:
    full, thin = both
    assert thin.ratio_table_html().data == full.ratio_table_html().data
    assert thin.latency_table_html().data == full.latency_table_html().data
    assert thin.findings().data == full.findings().data
    # Counts in the prose are every op's, not the sample's.
    assert full.describe().data.split(" The per-op")[0] == thin.describe().data.split(
        " The per-op")[0]


def test_percentile_figure_from_every_op(
        both: tuple[datastore_memcache.Study, datastore_memcache.Study], raw: Path) -> None:
    _, thin = both
    ops = load(raw).ops
    drawn: dict[str, np.ndarray] = {}
    real = plots.percentiles

    def spy(*args: object, **kw: object) -> Figure:
        drawn.update({k: np.asarray(v) for k, v in kw["values"].items()})  # type: ignore[union-attr]
        assert kw["ops_total"] == {datastore_memcache.LABELS[o]: int(n) for o, n in
                                   ops.groupby("op", observed=True).size().items()}
        return real(*args, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "percentiles", spy)
        assert thin.percentile_figure() is not None
    for op, label in datastore_memcache.LABELS.items():
        lat = ops.loc[ops["op"] == op, "latency_ns"].to_numpy() / 1e6
        np.testing.assert_allclose(drawn[label], np.quantile(lat, plots.PERCENTILE_QS),
                                   rtol=1e-12)


def test_sampled_figures_say_so(
        both: tuple[datastore_memcache.Study, datastore_memcache.Study]) -> None:
    _, thin = both
    for make in (plots.latency_ecdf, plots.latency_over_time):
        fig = make(thin._ops_labelled(), title="t", ops_total=thin._ops_total(),
                   sample_every=thin.loaded.sample_every)
        ax = fig.axes[0]
        assert "one op in 7 of each run drawn" in ax.get_title()
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any("n = 12,000 ops" in t for t in labels), labels


@pytest.fixture(scope="module")
def ten_sets(tmp_path_factory: pytest.TempPathFactory) -> datastore_memcache.Study:
    return datastore_memcache.analyse(write_datastore_memcache(
        tmp_path_factory.mktemp("dsmc10"), sets=10, ops_per_set=50))


def test_findings_are_one_family_and_state_the_tables_numbers(
        ten_sets: datastore_memcache.Study) -> None:
    """Issue 26: p.9 adjusted 3 claims and a separate 10-pair family; now every pair is
    one family, the seed's claims among them, and each sentence's ratio and interval are
    the claims table's."""
    pairs, judged = ten_sets.family()
    assert len(judged) == len(pairs) == 10
    text = ten_sets.findings().data
    names = [f"{a} / {b}" for a, b in pairs]
    table = prose.claims_table(judged, names)
    assert_prose_matches(text, judged, table, at_least=3)
    assert_wording_rule(text, at_least=3)
    assert f"These 10 comparisons (every pair of operations, the seed's among them) are " \
           f"one family: {judged.sentence('comparisons')}" in text
    assert "Holm" not in text and "Holm" not in ten_sets.claims_html().data
    # The ratio table beside them prints the same interval for each ratio to the fastest.
    rt = ten_sets.ratio_table()
    base = rt.loc[rt["baseline"], "op"].item()
    for row in rt[~rt["baseline"]].itertuples():
        assert (row.ratio, row.ratio_low, row.ratio_high) == pytest.approx(
            judged.oriented(row.op, base))
        assert row.ratio_level == judged.family.level
    level = multiplicity.fmt_level(judged.family.level)
    assert f"ratio to fastest ({level} CI)" in ten_sets.ratio_table_html().data


def test_break_even_has_an_interval_and_never_says_more_than_100_percent(
        ten_sets: datastore_memcache.Study) -> None:
    be = ten_sets.break_even()
    assert be is not None and be.low < be.value < be.high
    text = ten_sets.findings().data
    assert f"pays off once more than {be.value:.0%} of reads hit (95% bootstrap interval " \
           f"over sets {be.low:.0%}–{be.high:.0%}" in text
    # A break-even above 1 (a hit costs more than the datastore read) is "never", not
    # "more than 100%".
    never = datastore_memcache.BreakEven(1.4, 0.9, 2.0, 10).sentence()
    assert "never pays off" in never and "100%" in never and "more than 1" not in never
    assert "90%–never" in never
    assert datastore_memcache.break_even_hit_rate(
        {"store_read": 1.0, "mem_read_hit": 1.2, "mem_read_miss": 0.1, "mem_write": 0.1}) > 1
