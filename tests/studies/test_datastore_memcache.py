"""The datastore study above its figure budget: its per-op figures draw every k-th op of
each set, and every table, test and percentile it states is still that of every op."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from harness.analysis import plots
from harness.analysis.load import load
from harness.studies import datastore_memcache
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
