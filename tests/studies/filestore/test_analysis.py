"""The file-store study's analysis and notebook, on synthetic raw results with known
effects (tests/fixtures/filestore.py: memcache slows inserts 1.25× and removes 1.6×)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from harness import paths
from harness.report import execute_notebook, venv_kernel
from harness.studies import STUDIES, filestore
from harness.studies.design import spec_design
from harness.studies.filestore import analysis
from harness.workloads.filestore import OPS
from tests.fixtures.claims import (
    agrees,
    assert_prose_matches,
    assert_wording_rule,
    stated_ratios,
)
from tests.fixtures.figures import legends_over_axes, published
from tests.fixtures.filestore import write_filestore_runs

NOTEBOOK = paths.notebooks_dir() / "20-filestore.ipynb"


@pytest.fixture(scope="module")
def fs_raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_filestore_runs(tmp_path_factory.mktemp("raw_fs"))


@pytest.fixture(scope="module")
def study(fs_raw: Path, tmp_path_factory: pytest.TempPathFactory) -> filestore.Study:
    return filestore.analyse(fs_raw, figures_dir=tmp_path_factory.mktemp("figs"))


def test_per_run_table_has_configuration_and_baseline(study: filestore.Study) -> None:
    assert study.ran and study.threads == [1, 4] and study.ops_present == list(OPS)
    per = study.per_run
    assert len(per) == 48 and set(per["memcache"]) == {True, False}
    assert (per["noop_ms"] == 0.18).all() and (per["connect_ms"] == 0.05).all()
    assert per["service_ms"].to_numpy() == pytest.approx(
        (per["latency_ms"] - 0.18).to_numpy())
    assert study.threshold_bytes == 102400


def test_memcache_effect_finds_the_planted_effects(study: filestore.Study) -> None:
    eff = study.memcache_effect().set_index(["op", "threads"])
    assert eff.loc[("remove", 1), "ratio"] == pytest.approx(1.6, rel=0.15)
    assert eff.loc[("remove", 1), "significant"]
    assert eff.loc[("find", 1), "ratio"] == pytest.approx(1.0, rel=0.15)
    assert not eff.loc[("find", 1), "significant"]
    assert (eff["p_adjusted"] >= eff["p"]).all() and len(eff) == 6
    assert set(eff["effect_name"]) == {"Cohen's d_z"} and (eff["pairs"] == 4).all()
    # The rows are claims of the section's one family: their intervals are its level's.
    judged = study.family().judged
    assert (eff["ratio_level"] == judged.family.level).all()
    excludes = (eff["ratio_low"] > 1) | (eff["ratio_high"] < 1)
    assert (excludes == eff["significant"]).all()


def test_tables_and_sentences(study: filestore.Study) -> None:
    assert "48 runs of 12 configurations (4 runs each)" in study.status().data
    table = study.config_table()
    assert len(table) == 12 and list(table["op"][:4]) == ["insert"] * 4
    summary = study.summary().data
    assert "Removes with memcache on (the section's family, α = 0.05): 1 thread: " \
           "**slower**" in summary
    assert "slows inserts down is" in summary and "no-op HTTP round trip" in summary
    judged = study.family().judged
    # memcache on/off (6), threads (2 x 6), every pair of ops per setting (3 x 4).
    assert len(judged) == 30
    memcache = study.memcache_findings().data
    threads = study.thread_findings().data
    ops = study.op_findings().data
    assert "Latency, 4 vs 1 threads: worse in" in threads and "one family" in threads
    for text in (memcache, threads, ops, summary):
        assert "Holm" not in text
        assert_prose_matches(text, judged)
        assert_wording_rule(text)
    # Raw and adjusted p beside every listed ratio, as in the sentences (issue 26).
    for text in (threads, ops):
        assert text.count("× [") == text.count(", BH-adjusted p ") > 0
    # p.19: no untested cause; the tests say what, not why.
    assert "queues at the server" not in threads
    for view in (study.config_table_html, study.memcache_effect_html,
                 study.baseline_html, study.service_time_html, study.size_table_html):
        assert "<table" in view().data
    st = study.service_time()
    assert list(st["threads"].unique()) == [1] and len(st) == 6


def test_figures_are_saved(study: filestore.Study, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = published(monkeypatch)
    for figure in (study.throughput, study.latency, study.latency_by_size,
                   study.baseline, study.ecdf):
        assert figure() is not None
    # Issue 51: the panels' legends covered their points and bars.
    assert len(drawn) == 5
    assert [(name, over) for name, fig in drawn.items()
            for over in legends_over_axes(fig)] == []
    assert study.figures_dir is not None
    names = {p.name for p in study.figures_dir.glob("*.png")}
    assert names == {f"filestore-memcache-{n}.png" for n in
                     ("baseline", "ecdf", "latency", "latency-by-size", "throughput")}


def test_absent_experiment_says_not_run(tmp_path: Path) -> None:
    empty = filestore.analyse(tmp_path)
    assert not empty.ran
    note = empty.status()
    assert "**Not run.**" in note.data and "experiments/filestore_memcache.yaml" in note.data
    assert note.metadata == {"harness_not_run": True}
    assert empty.summary() is None and empty.latency() is None


def test_notebook_executes_on_study_data(fs_raw: Path, tmp_path: Path) -> None:
    out = tmp_path / NOTEBOOK.name
    with venv_kernel() as kernel:
        params = {"raw_results": str(fs_raw), "figures_dir": str(tmp_path / "figures")}
        assert execute_notebook(NOTEBOOK, out, params, kernel) is None
    nb = nbformat.read(out, as_version=4)
    texts, images = [], 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", output.get("evalue")
            texts += [str(v) for v in output.get("data", {}).values()]
            images += "image/png" in output.get("data", {})
    text = "\n".join(texts)
    assert "Not run" not in text and "seed's claim" in text
    # The spec's facts, from the spec (the prose no longer types them in).
    spec = STUDIES.get("filestore").specs[0].path()
    assert spec_design(spec).sentence() in text
    assert images == 5
    assert len(list((tmp_path / "figures").glob("*.svg"))) == 5


def test_paired_comparison_on_known_pairs() -> None:
    import pandas as pd

    off = pd.Series([1.0, 2.0, 4.0, 1.5, 3.0], index=[1, 2, 3, 4, 5])
    on = off * pd.Series([2.1, 1.9, 2.0, 2.05, 1.95], index=off.index)
    c = analysis.paired_comparison(on, off)
    assert c is not None and c.n_a == 5 and c.significant
    assert c.ratio.value == pytest.approx(2.0, rel=0.02) and c.ratio.low > 1.8
    assert c.effect_size_name == "Cohen's d_z" and c.effect_size > 5
    # Unpaired, the 4× spread between pairs hides the 2× effect; paired, it does not.
    assert not analysis.stats.compare_two(on, off).significant
    assert analysis.paired_comparison(on.iloc[:1], off) is None


def test_goodput_beside_throughput_where_ops_failed(tmp_path: Path) -> None:
    """Every 8th insert with memcache on is an error, each run's last a timeout: the
    table gains goodput (answered ops over the runs' total wall time, computed here from
    the records) and failed-op counts; a tree without failures says goodput = throughput."""
    import numpy as np

    from harness.analysis.data.load import load

    raw = write_filestore_runs(tmp_path / "raw", reps=3, fail_every=8)
    study = filestore.analyse(raw)
    table = study.config_table().set_index(["op", "threads", "memcache"])
    ops = load(raw).ops
    for threads in (1, 4):
        runs = study.select("insert", threads, True)["run_id"]
        good = wall = failed = 0
        for run_id in runs:
            o = ops[ops["run_id"] == run_id]
            end = (o["start_ns"] + o["latency_ns"]).max()
            wall += (end - o["start_ns"].min()) / 1e9
            bad = o["status"].isin(["error", "timeout"]).to_numpy()
            good, failed = good + int((~bad).sum()), failed + int(bad.sum())
        row = table.loc[("insert", threads, True)]
        # 40 ops: errors at 8, 16, 24, 32, and the 40th a timeout; 3 runs.
        assert failed == 3 * 5 and row["errors"] == failed
        assert row["goodput"] == pytest.approx(good / wall, rel=1e-9)
        assert row["goodput_low"] < row["goodput"] < row["goodput_high"]
        assert row["goodput"] < row["mean_tput"]
    clean = table.loc[("find", 1, True)]
    assert clean["errors"] == 0
    assert clean["goodput"] == pytest.approx(clean["mean_tput"], rel=1e-9)
    html = study.config_table_html().data
    assert "goodput ops/s" in html and "failed ops" in html
    assert "p50/p99 include the failed ops" in html
    assert np.isfinite(table["goodput"]).all()

    plain = filestore.analyse(write_filestore_runs(tmp_path / "ok", reps=2, ops=12))
    html = plain.config_table_html().data
    assert "goodput ops/s" not in html and "goodput equals throughput" in html


def test_a_sampled_study_states_every_ops_numbers(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the figure budget only every k-th op of each run is held: the tables, the
    size medians (DuckDB over the files) and the sentences are still every op's."""
    raw = write_filestore_runs(tmp_path / "raw", ops=200, fail_every=7)
    full = filestore.analyse(raw, figures_dir=tmp_path / "full")
    monkeypatch.setattr(analysis, "FIGURE_OPS", 2_000)
    thin = filestore.analyse(raw, figures_dir=tmp_path / "thin")
    assert not full.loaded.sampled and thin.loaded.sample_every > 1
    for view in ("config_table_html", "memcache_effect_html", "baseline_html",
                 "service_time_html", "size_table_html", "memcache_findings",
                 "thread_findings", "op_findings", "summary"):
        assert getattr(thin, view)().data == getattr(full, view)().data, view
    assert thin.status().data.startswith(full.status().data.split(" The per-op")[0])
    assert "one op in" in thin.status().data
    edges = [0, 4096, 16384, 65536, thin.threshold_bytes, float("inf")]
    a, b = full.size_medians(edges), thin.size_medians(edges)
    assert a[["op", "memcache", "bin", "count"]].astype(str).values.tolist() == \
        b[["op", "memcache", "bin", "count"]].astype(str).values.tolist()
    assert b["median_ms"].to_numpy() == pytest.approx(a["median_ms"].to_numpy(), rel=1e-12)
    assert thin.size_range() == full.size_range()
    for figure in (thin.latency_by_size, thin.ecdf):
        assert figure() is not None


def test_memcache_sentences_state_the_numbers_of_the_table_beside_them(
        study: filestore.Study) -> None:
    """Issue 26, item 4: every number in prose equals the table beside it. Each memcache
    sentence's ratio, interval, raw and adjusted p are its row of the memcache table (the
    table shows three digits, a sentence as many as tell neighbours apart; a significant
    sentence names the winner first, so its ratio is the row's or its inverse)."""
    import html as html_lib
    import re

    table = html_lib.unescape(study.memcache_effect_html().data)
    rows = re.findall(r"<tr><td>(\w+)</td><td class=\"num\">(\d+)</td>(?:<td[^>]*>[^<]*</td>"
                      r"){3}<td class=\"num\">([\d.]+)× \(([\d.]+)–([\d.]+)\)</td><td>[^<]*"
                      r"</td><td>([^<]*)</td><td>([^<]*)</td>", table)
    assert len(rows) == 6, table
    text = study.memcache_findings().data
    for op, threads, *numbers, p, p_adj in rows:
        r, lo, hi = map(float, numbers)
        noun = {"insert": "Inserts", "find": "Finds", "remove": "Removes"}[op]
        (line,) = [x for x in text.splitlines()
                   if x.startswith(f"- {threads} thread") and f"{noun} (memcache" in x]
        ((sr, _, slo, shi),) = stated_ratios(line)
        if not agrees(sr, r):  # winner first: off/on
            r, lo, hi = 1 / r, 1 / hi, 1 / lo
        assert agrees(sr, r) and agrees(slo, lo) and agrees(shi, hi), (line, numbers)
        for shown, said in ((p, "p"), (p_adj, "BH-adjusted p")):
            assert re.search(rf"{said} (?:= )?{re.escape(shown)}[,;)]", line), (said, shown, line)
