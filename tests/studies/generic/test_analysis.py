"""The generic study on captured data: which experiments it takes, that its numbers are
`harness summary`'s, that it finds the effects a simulation put in, and that the report
shows it only when there is something of the user's to show."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness import paths
from harness.analysis.stats import multiplicity, verdict
from harness.cli import main
from harness.report import build_report
from harness.studies import GENERIC_NOTEBOOK
from harness.studies.generic import analyse, analysis, own_experiments
from tests.fixtures.claims import assert_wording_rule
from tests.fixtures.rawdata import GRID_EXPERIMENT, write_datastore_memcache, write_grid

SEED = paths.project_root() / "examples" / "legacy" / "seed001-gae-bench.txt"


def test_own_experiments_leave_out_built_in_studies_and_imports(tmp_path: Path,
                                                                capsys) -> None:
    raw = tmp_path / "raw"
    write_grid(raw)
    write_datastore_memcache(raw)  # the datastore study's spec's name: a built-in's
    assert main(["import", "gae-bench", str(SEED), "-o", str(raw)]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in raw.iterdir() if p.is_dir()) == sorted(
        [GRID_EXPERIMENT, "datastore_vs_memcache", *own_imports(raw)])
    assert own_experiments(raw) == [GRID_EXPERIMENT]
    study = analyse(raw)
    assert [s.name for s in study.sections] == [GRID_EXPERIMENT]


def own_imports(raw: Path) -> list[str]:
    return [p.name for p in raw.iterdir() if p.is_dir()
            and p.name not in (GRID_EXPERIMENT, "datastore_vs_memcache")]


def test_configuration_numbers_are_harness_summarys(grid_raw: Path, capsys) -> None:
    """Every number of the configuration table equals `harness summary --format json`'s
    for the same configuration (the same functions, not a second formula)."""
    assert main(["summary", str(grid_raw), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    [section] = analyse(grid_raw).sections
    table = analysis.configurations(section.loaded)
    assert len(table) == len(summary) == 4
    for row in summary:
        [mine] = [r for _, r in table.iterrows() if r["value_size"] == row["value_size"]
                  and r["appendonly"] == row["appendonly"]]
        for field, value in row.items():  # (JSON keeps 10 decimals)
            if field in mine.index and isinstance(value, float):
                assert mine[field] == pytest.approx(value, rel=1e-9, abs=1e-10), field
        assert mine["runs"] == row["runs"] and mine["ops"] == row["ops"]


def test_effects_find_the_slowdowns_put_in(grid_raw: Path) -> None:
    """`write_grid` makes sets 1.8x slower with appendonly and every op 1.3x slower at
    4096 bytes: the effect rows say worse for both keys at every value of the other,
    and each verdict lies on the side its interval does."""
    [section] = analyse(grid_raw).sections
    eff = section.effects()
    t = eff.table
    assert set(t["key"]) == {"appendonly", "value_size"}
    assert len(t) == 2 * 2 * len(analysis.EFFECT_METRICS)  # 2 keys x 2 other values
    mean = t[t["metric"] == "latency_mean"]
    assert set(mean["verdict"]) == {verdict.WORSE}
    aof = mean[mean["key"] == "appendonly"]
    # Half the ops are sets, 1.8x slower (plus timeouts at 20 ms): about 1.4-1.7x.
    assert ((aof["ratio"] > 1.3) & (aof["ratio"] < 1.9)).all()
    for r in t.itertuples(index=False):
        assert r.p_adj >= r.p
        higher_is_better = analysis.EFFECT_METRICS[r.metric][1]
        if r.verdict in (verdict.BETTER, verdict.WORSE):
            up = r.verdict == verdict.BETTER if higher_is_better else r.verdict == verdict.WORSE
            assert (r.ratio_ci_low > 1) if up else (r.ratio_ci_high < 1), r
    # Issue 26: one family by the kit's one rule (BH, FCR-adjusted intervals), so a row is
    # better or worse exactly when its printed interval excludes 1, at the stated level.
    assert eff.procedure == "Benjamini-Hochberg" and eff.family is not None
    assert (t["ratio_ci_level"] == eff.family.level).all()
    excludes = (t["ratio_ci_low"] > 1) | (t["ratio_ci_high"] < 1)
    assert (t["verdict"].isin([verdict.BETTER, verdict.WORSE]) == excludes).all()
    text = section.effect_findings().data
    for r in t.itertuples(index=False):
        assert f"`{r.value}` (at {r.at})" in text
    assert f"{len(t)} comparisons, one family: {eff.family.sentence('comparisons')}" in text
    assert "Holm" not in text
    level = multiplicity.fmt_level(eff.family.level)  # 95% only when every row is significant
    assert text.count(f"({level} CI ") == int(t["ratio_ci_low"].notna().sum())
    assert_wording_rule(text, at_least=len(t))


def test_the_spec_order_sets_the_reference(grid_raw: Path) -> None:
    """A grid key's first value in the spec is the one the others are compared with."""
    [section] = analyse(grid_raw).sections
    t = analysis.effects(section.loaded, {"appendonly": [True, False],
                                          "value_size": [4096, 100]}).table
    assert set(t["reference"]) == {True, 4096}
    assert set(t[t["metric"] == "latency_mean"]["verdict"]) == {verdict.BETTER}
    assert analysis.value_order([100, 4096], None, "value_size") == [100, 4096]
    assert analysis.value_order([100, 4096, 7], {"value_size": [4096, 100]},
                                "value_size") == [4096, 100, 7]


def test_no_sweep_no_capacity_figure(grid_raw: Path) -> None:
    from harness.analysis.figures import sweeps

    [section] = analyse(grid_raw).sections
    assert section.capacity() is None
    assert sweeps.compare_figure(grid_raw, grid_raw) is None


def test_per_second_counts_whole_seconds_only(grid_raw: Path) -> None:
    """Only seconds every op of which is in: a run's last, partial second would read as a
    collapse. The runs last 0.6-1.3 s, so only runs past 1 s give their second 0, and its
    throughput is the mean over the configuration's runs of their ops in it."""
    [section] = analyse(grid_raw).sections
    got = analysis.per_second(section.loaded)
    ops = section.loaded.ops
    ops = ops[~ops["warmup"].to_numpy(bool)]
    runs = section.loaded.runs
    expected = {}
    for (aof, size), group in runs.groupby(["appendonly", "value_size"]):
        mine = ops[ops["run_id"].astype(str).isin(group["run_id"].astype(str))]
        per_run = mine.groupby(mine["run_id"].astype(str), observed=True)["start_ns"]
        if (per_run.max() >= 1e9).all():
            in_first = (mine["start_ns"] < 1e9).sum()
            expected[f"appendonly={aof}, value_size={size}"] = in_first / len(group)
    assert expected and len(expected) < 4  # some configurations have no whole second
    assert dict(zip(got["config"], got["throughput_ops_s"], strict=True)) == pytest.approx(
        expected)
    assert set(got["second"]) == {0}


def test_report_names_each_experiment_and_leaves_the_part_out_without_one(
        grid_raw: Path, tmp_path: Path) -> None:
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(paths.notebooks_dir() / GENERIC_NOTEBOOK, nbs)
    kw = dict(pdf=False, notebooks_dir=nbs, figures_dir=tmp_path / "figures", progress=False)
    html = build_report(grid_raw, tmp_path / "r1", **kw)["html"].read_text()
    toc = html[html.index("<h2>Contents</h2>"):html.index("</nav>")]
    assert "Your own experiments" in toc
    assert f"Experiment {GRID_EXPERIMENT}</a>" in toc
    # The report keeps short names on one line (harness.report.wrapping marks them).
    body = html[html.index("</nav>"):].replace('<code class="name">', "<code>")
    for words in ("Workload <code>redis_mix</code>", "12 runs pooled over 4 configurations",
                  "95% CI over runs", "one family"):
        assert words in body, words
    # The heavy-tail note comes before the configuration table (percentiles first).
    assert body.index("Heavy tails: read the percentiles") < body.index("95% CI over runs")
    figures = {p.name for p in (tmp_path / "figures").glob("*.png")}
    assert {"redis-appendonly-effects.png", "redis-appendonly-latency-cdf.png"} <= figures
    raw = tmp_path / "dsmc"
    write_datastore_memcache(raw)
    html = build_report(raw, tmp_path / "r2", **kw)["html"].read_text()
    assert "Your own experiments" not in html


def test_an_experiment_with_no_complete_run_says_why(tmp_path: Path) -> None:
    raw = write_grid(tmp_path / "raw", repetitions=1)
    for m in raw.rglob("manifest.json"):
        data = json.loads(m.read_text())
        data["status"] = "partial"
        m.write_text(json.dumps(data))
    study = analyse(raw)
    assert not study.sections and GRID_EXPERIMENT in study.empty
    assert "partial" in study.empty[GRID_EXPERIMENT]
    assert [s.name for s in analyse(raw, include=["partial"]).sections] == [GRID_EXPERIMENT]


def test_a_heavy_tail_leads_the_section_with_its_percentiles(grid_raw: Path) -> None:
    """Issue 26, item 3: `write_grid`'s appendonly sets time out at 20 ms now and then, a
    tail Hill's index puts below 2; the section says so before its tables, with those
    groups' p50 and p99, and the other groups are not named."""
    [section] = analyse(grid_raw).sections
    note = section.heavy_tails().data
    assert note.startswith("**Heavy tails: read the percentiles.** In 2 of 8 groups")
    assert "the mean latency, the throughput and their intervals" in note
    rows = [line for line in note.splitlines() if line.startswith("| appendonly")]
    assert len(rows) == 2 and all("op=set" in r and "appendonly=True" in r for r in rows)


def test_an_offered_rate_grid_compares_latency_not_the_throughput_it_set(
        tmp_path: Path) -> None:
    """Grid run.rate_ops_s x value size: across rates throughput is what the spec
    offered, so it gets no verdict (it was "better, 3.0x" at 3x the rate), and the
    section says why; across sizes, at one rate, throughput is still compared."""
    import numpy as np

    from tests.analysis.checks.test_checks import write

    rng = np.random.default_rng(5)
    i = 0
    for rate in (2000, 6000):
        for size in (100, 4096):
            for _ in range(3):
                lat = rng.lognormal(np.log(1e5 * (1.2 if size == 4096 else 1)), 0.2, 1500)
                write(tmp_path, "rates", i, {"run.rate_ops_s": rate, "value_size": size}, lat)
                i += 1
    [section] = analyse(tmp_path, ["rates"], figures_dir=tmp_path).sections
    t = section.effects().table
    assert set(t[t["key"] == "run.rate_ops_s"]["metric"]) == {"latency_mean", "latency_p99"}
    assert set(t[t["key"] == "value_size"]["metric"]) == set(analysis.EFFECT_METRICS)
    said = section.effect_findings().data
    assert "throughput is not compared: `run.rate_ops_s` sets it" in said
    assert said.count("throughput is not compared") == 1


@pytest.fixture
def shell() -> None:
    """An IPython shell, so `display` publishes outputs `capture_output` can hold."""
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.instance()


def _as_own(raw: Path, name: str) -> Path:
    """`raw`'s one experiment renamed `name` (no built-in study owns it then)."""
    [exp] = [d for d in raw.iterdir() if d.is_dir()]
    for m in exp.rglob("manifest.json"):
        data = json.loads(m.read_text())
        data["experiment"] = name
        m.write_text(json.dumps(data))
    exp.rename(raw / name)
    return raw


def test_a_grid_key_named_op_beside_another_experiment_keeps_both_sections(
        tmp_path: Path, grid_raw: Path, shell: None) -> None:
    """The issue's reproduction: an own datastore_memcache experiment whose grid key is
    `op` (also the ops' column) beside another own experiment: every part of both is
    drawn, and the `op` rows are the ops'."""
    from IPython.utils.capture import capture_output

    raw = _as_own(write_datastore_memcache(tmp_path / "raw", sets=3), "my_ds")
    shutil.copytree(grid_raw / GRID_EXPERIMENT, raw / GRID_EXPERIMENT)
    study = analyse(raw)
    assert sorted(s.name for s in study.sections) == sorted(["my_ds", GRID_EXPERIMENT])
    with capture_output() as out:
        study.report()
    shown = "".join(str(o.data) for o in out.outputs)
    assert "Could not be drawn" not in shown
    assert "Experiment `my_ds`" in shown and f"Experiment `{GRID_EXPERIMENT}`" in shown
    assert "store_write" in shown and "mem_read_miss" in shown


def test_an_experiment_that_breaks_a_view_costs_only_its_own_part(
        grid_raw: Path, tmp_path: Path, shell: None) -> None:
    """One experiment's runs without a column every view needs: its parts are each a
    marked note naming it and the error; the other experiment's section is whole."""
    from IPython.utils.capture import capture_output

    from harness.analysis.sections.display import FAILED_PART_MARKER

    raw = tmp_path / "raw"
    shutil.copytree(grid_raw / GRID_EXPERIMENT, raw / GRID_EXPERIMENT)
    _as_own(write_grid(tmp_path / "other", repetitions=2), "broken")
    shutil.copytree(tmp_path / "other" / "broken", raw / "broken")
    study = analyse(raw)
    [bad] = [s for s in study.sections if s.name == "broken"]
    bad.loaded = dataclasses.replace(bad.loaded, runs=bad.loaded.runs.drop(columns=["run_id"]))
    with capture_output() as out:
        study.report()
    failed = [o for o in out.outputs
              if FAILED_PART_MARKER in json.dumps(o.metadata, default=str)]
    assert failed and all("broken" in str(o.data) for o in failed)
    assert "KeyError" in str(failed[0].data)
    good = "".join(str(o.data) for o in out.outputs if o not in failed)
    assert f"Experiment `{GRID_EXPERIMENT}`" in good and "95% CI over runs" in good


def test_what_drives_the_tail_names_the_factors_that_move_p50_and_p99(
        tmp_path: Path) -> None:
    from tests.fixtures.rawdata import FACTORIAL_EXPERIMENT, write_factorial

    raw = write_factorial(tmp_path / "raw")
    [section] = analyse(raw, figures_dir=tmp_path / "f").sections
    text, image = section.tail_drivers()
    said = text.data
    assert said.startswith("### What drives the tail")
    assert "- threads=2 multiplies p50 by 0.7" in said
    assert "- threads=2 multiplies p99 by 0.7" in said
    assert "- conns=16 multiplies p99 by 1.5" in said
    assert "value_size" not in said.split("\n- ", 1)[1]  # no sentence for it
    assert image.format == "png"
    assert (tmp_path / "f" / f"{FACTORIAL_EXPERIMENT.replace('_', '-')}-tail-drivers.png"
            ).exists()


def test_no_tail_drivers_with_one_key_or_a_grid_over_ops(tmp_path: Path) -> None:
    raw = write_datastore_memcache(tmp_path / "raw")  # its grid is op only
    runs = analyse(raw, ["datastore_vs_memcache"]).sections[0]
    assert runs.tail_drivers() is None
