"""KV study analysis on small synthetic raw results with known answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.results import OK, REDIRECT, OpsArrays, new_manifest, write_run
from harness.studies import kvstore
from harness.studies.kvstore.analysis import around_events
from tests.fixtures.claims import assert_prose_matches, assert_wording_rule
from tests.fixtures.figures import legends_over_axes, published

OPS = ("put", "get")


def client_ops(client: int, lat_us: dict[int, float], n: int = 40, t0_ns: int = 0,
               redirect_every: int = 0) -> OpsArrays:
    """Closed loop, one in flight: n PUTs then n GETs back to back; optionally an
    extra redirect record inside every k-th op."""
    ops = np.array([0] * n + [1] * n, np.int8)
    lat = np.array([lat_us[o] * 1000 for o in ops], np.int64)
    start = t0_ns + np.concatenate([[0], np.cumsum(lat[:-1])])
    status = np.full(ops.size, OK, np.int8)
    rows = [ops, start, lat, status]
    if redirect_every:
        idx = np.arange(0, ops.size, redirect_every)
        rows = [np.concatenate([r, extra]) for r, extra in zip(
            rows, [ops[idx], start[idx], lat[idx] // 2, np.full(idx.size, REDIRECT, np.int8)],
            strict=True)]
    m = rows[0].size
    return OpsArrays(OPS, np.full(m, client, np.int32), rows[0], rows[1], rows[2],
                     np.full(m, -1, np.int64), rows[3], np.full(m, 100, np.int64),
                     np.zeros(m, bool))


def write(raw: Path, experiment: str, grid: dict[str, Any], rep: int, parts: list[OpsArrays],
          extra: dict[str, Any] | None = None, connections: int = 1) -> None:
    man = new_manifest(
        run_id=f"{experiment}-{'-'.join(map(str, grid.values()))}-r{rep}",
        # config_id names the grid point, as the runner's does: one run per repetition of it.
        experiment=experiment, workload="kvstore",
        config_id="-".join(f"{k}={v}" for k, v in grid.items()) or "c", repetition=rep,
        params={},
        grid_point=grid, status="complete", started_utc="2026-01-01T00:00:00+00:00",
        ended_utc="2026-01-01T00:00:01+00:00",
        loadgen={"connections": connections, "inflight": 1}, extra=extra or {})
    write_run(raw, man, OpsArrays.concat(parts, OPS))


def write_kv(raw: Path) -> Path:
    """The three experiments: kv_scaling and kv_cache (3 repetitions of each grid point)
    and one kv_elastic run with a scale step."""
    rng = np.random.default_rng(1)
    for rep in (1, 2, 3):
        for masters in (2, 4):
            for procs in (1, 2):
                jitter = rng.uniform(0.95, 1.05)
                parts = [client_ops(c, {0: 100 * jitter * masters / 2, 1: 50 * jitter})
                         for c in range(procs)]
                write(raw, "kv_scaling", {"services.kv.masters": masters,
                                          "clients.processes": procs}, rep, parts)
        for size in (100, 1000):
            for strategy, get_us in (("FIFO", 80), ("LRU", 60), ("LFU", 40)):
                get_us = get_us if size == 100 else 40
                parts = [client_ops(0, {0: 500, 1: get_us * rng.uniform(0.97, 1.03)})]
                write(raw, "kv_cache", {"services.kv.cache_size": size,
                                        "services.kv.strategy": strategy}, rep, parts,
                      connections=1)
    # 2 clients, ops of 1 ms for 4 s; a step from 1.0 to 2.5 s, redirects only inside it.
    parts = []
    for c in range(2):
        full = client_ops(c, {0: 1000, 1: 1000}, n=2000)
        inside = (full.start_ns >= 1.0e9) & (full.start_ns < 2.5e9)
        red = full.take(np.flatnonzero(inside)[::10])
        red = OpsArrays(OPS, red.client, red.op, red.start_ns, red.latency_ns // 2,
                        red.intended_ns, np.full(len(red), REDIRECT, np.int8), red.nbytes,
                        red.warmup)
        parts += [full, red]
    events = [{"at_s": 1.0, "action": "add_node", "service": "kv", "args": {},
               "start_ns": 1_000_000_000, "end_ns": 2_500_000_000, "duration_s": 1.5,
               "result": {"masters": 4, "slots_moved": 4096, "join_s": 0.5,
                          "rebalance_s": 1.0}, "error": None},
              {"at_s": 9.0, "action": "remove_node", "service": "kv", "args": {},
               "skipped": "the clients had finished"}]
    write(raw, "kv_elastic", {}, 1, parts, extra={"timeline": events})
    return raw


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_kv(tmp_path_factory.mktemp("kvraw"))


@pytest.fixture(scope="module")
def study(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> kvstore.Study:
    return kvstore.analyse(raw, figures_dir=tmp_path_factory.mktemp("fig"))


def test_throughput_is_per_client_ops_over_their_time_summed_over_clients(
        study: kvstore.Study) -> None:
    assert study.servers == "services.kv.masters"
    run = study.scaling[(study.scaling["services.kv.masters"] == 2)
                        & (study.scaling["clients.processes"] == 2)]
    get = run[run["op"] == "get"]
    per_client = 1 / (get["throughput_ops_s"] / 2 / 1e6) / 1e6  # back to the mean latency
    assert np.allclose(per_client * 1e6, 50, rtol=0.06)  # 50 us GETs ~ 20,000 ops/s each
    assert np.allclose(get["throughput_ops_s"], 2 * get["per_client_ops_s"])
    assert np.allclose(get["p50_ms"], 0.05, rtol=0.06)
    table = study.scaling_table()
    puts = table[(table["op"] == "put") & (table["clients.processes"] == 1)]
    assert puts.set_index("services.kv.masters")["mean"].pipe(
        lambda s: s[2] / s[4]) == pytest.approx(2, rel=0.1)


def test_strategy_claims_per_cache_size_are_one_family_with_the_scaling_ones(
        study: kvstore.Study) -> None:
    """Issue 26, p.32: "do not differ significantly (p = 0.07)" with no interval; now
    every pair of strategies (and of cache sizes) is a claim of the section's one family,
    printed with its ratio and adjusted interval."""
    fam = study.family()
    keys = [e.key for e in fam.entries]
    assert len(keys) == len(fam.judged) == 6 + 2 * 3 + 1  # scaling, strategies, sizes
    claim = {k: c for k, c in zip(keys, fam.judged.claims, strict=True)}
    # At size 100 GETs take 80/60/40 µs: every pair differs; at 1000 all take 40 µs.
    assert all(claim[("cache", "strategy", 100, a, b)].significant
               for a, b in (("FIFO", "LRU"), ("FIFO", "LFU"), ("LRU", "LFU")))
    assert not any(claim[("cache", "strategy", 1000, a, b)].significant
                   for a, b in (("FIFO", "LRU"), ("FIFO", "LFU"), ("LRU", "LFU")))
    text = study.cache_findings().data
    assert "GET, cache size 100: the strategies differ significantly in 3 of 3 pairs" in text
    assert "GET, cache size 1000: the strategies differ significantly in 0 of 3 pairs" in text
    assert_prose_matches(text, fam.judged, at_least=7)
    # Raw and adjusted p beside every listed ratio, as in the sentences.
    assert text.count("× [") == text.count(", BH-adjusted p ") == 7
    scaling = study.scaling_findings().data
    assert_prose_matches(scaling, fam.judged, at_least=6)
    assert_wording_rule(text + "\n" + scaling, at_least=13)
    assert f"The section's 13 comparisons (servers and clients, cache strategies and sizes) " \
           f"are one family: {fam.judged.sentence('comparisons')}" in scaling
    assert "Holm" not in text + scaling


def test_elastic_series_events_and_redirects(study: kvstore.Study) -> None:
    ev = study.events
    assert list(ev["action"]) == ["add_node"]  # the skipped step has no times
    assert ev.iloc[0][["start_s", "end_s", "size_after", "moved"]].tolist() == \
        [1.0, 2.5, 4, 4096]
    assert ev.iloc[0]["phase_rebalance"] == 1.0
    assert study.series["t_s"].max() < 3.0  # 4 s of ops; the last, partial bin dropped
    around = around_events(study.series, study.events, window_s=1.0)
    during = around[around["when"] == "during"].iloc[0]
    before = around[around["when"] == "before"].iloc[0]
    assert during["redirects_s"] > 0 and before["redirects_s"] == 0
    assert during["ops_s"] == pytest.approx(2000, rel=0.01)  # 2 clients x 1000/s
    elastic_all = study.elastic[study.elastic["op"] == "all"].iloc[0]
    assert elastic_all["redirect_rate"] == pytest.approx(300 / 8000, rel=0.05)
    assert "add_node: 1.5 s per step (1 step; seed 004 took 17.78 s)." in \
        study.steps_summary().data


def test_views_and_figures(study: kvstore.Study, monkeypatch: pytest.MonkeyPatch) -> None:
    for view in (study.status, study.scaling_table_html, study.events_table_html,
                 study.redirect_table_html):
        assert "<table" in view().data
    assert "servers" in study.scaling_findings().data
    drawn = published(monkeypatch)
    for fig in (study.scaling_figure(), study.cache_heatmap(),
                study.cache_heatmap("p50_ms"),
                study.elastic_timeline(), study.step_times()):
        assert fig.format == "png"
    # Issue 51: the scaling and elastic legends sat over their bands and lines.
    assert len(drawn) == 5
    assert [(name, over) for name, fig in drawn.items()
            for over in legends_over_axes(fig)] == []
    assert study.figures_dir is not None
    assert (study.figures_dir / "kvstore-elastic-timeline-1.svg").exists()


def test_missing_experiments_are_said_not_run(tmp_path: Path) -> None:
    empty = kvstore.analyse(tmp_path)
    note = empty.status()
    assert "**Not run.**" in note.data and note.metadata == {"harness_not_run": True}
    assert "No raw results for `kv_cache`" in empty.cache_heatmap().data
    assert not empty.scaling_findings().metadata  # does not end the section


def test_goodput_and_failed_ops_beside_throughput(tmp_path: Path) -> None:
    """Every 4th GET an error (every 20th of those a timeout instead) at the same latency as
    the rest: the GET goodput is exactly 3/4 of the throughput (same busy time), PUTs lose
    nothing; the scaling table shows goodput and the failed-op count, and says that the
    percentiles include the failed ops. A tree without failures says goodput = throughput."""
    from harness.results import ERROR, TIMEOUT

    raw = tmp_path / "raw"
    for rep in (1, 2, 3):
        for procs in (1, 2):
            parts = []
            for c in range(procs):
                a = client_ops(c, {0: 100 * (1 + rep / 20), 1: 50 * (1 + c / 10)})
                status = a.status.copy()
                gets = np.flatnonzero(a.op == 1)
                status[gets[3::4]] = ERROR
                status[gets[39]] = TIMEOUT  # the last GET (also a 4th one)
                parts.append(OpsArrays(OPS, a.client, a.op, a.start_ns, a.latency_ns,
                                       a.intended_ns, status, a.nbytes, a.warmup))
            write(raw, "kv_scaling", {"services.kv.masters": 2, "clients.processes": procs},
                  rep, parts)
    study = kvstore.analyse(raw)
    per = study.scaling.set_index("op")
    assert np.allclose(per.loc["get", "goodput_ops_s"], 0.75 * per.loc["get", "throughput_ops_s"])
    assert np.allclose(per.loc["put", "goodput_ops_s"], per.loc["put", "throughput_ops_s"])
    assert (per.loc["get", "errors"] == 10 * per.loc["get", "clients"]).all()
    assert (per.loc["put", "errors"] == 0).all()
    html = study.scaling_table_html().data
    assert "goodput (aggregate)" in html and "failed ops" in html
    assert "percentiles include the failed ops" in html
    # 3 runs of 1 client: 30 failed GETs in the 1-client row.
    assert ">30<" in html.replace(" ", "")

    clean = tmp_path / "clean"
    for rep in (1, 2):
        write(clean, "kv_scaling", {"services.kv.masters": 2, "clients.processes": 1}, rep,
              [client_ops(0, {0: 100, 1: 50 + rep})])
    html = kvstore.analyse(clean).scaling_table_html().data
    assert "goodput (aggregate)" not in html and "goodput equals throughput" in html


def test_elastic_step_goodput_where_ops_failed(tmp_path: Path) -> None:
    """Every 5th op that starts in seconds 1-3 (the step and the bin it ends in) is an
    error: goodput during the step is 4/5 of the throughput; the table shows it."""
    from harness.results import ERROR

    parts = []
    for c in range(2):
        a = client_ops(c, {0: 1000, 1: 1000}, n=2000)
        status = a.status.copy()
        inside = np.flatnonzero((a.start_ns >= 1.0e9) & (a.start_ns < 3.0e9))
        status[inside[::5]] = ERROR
        parts.append(OpsArrays(OPS, a.client, a.op, a.start_ns, a.latency_ns, a.intended_ns,
                               status, a.nbytes, a.warmup))
    events = [{"at_s": 1.0, "action": "add_node", "service": "kv", "args": {},
               "start_ns": 1_000_000_000, "end_ns": 2_500_000_000, "duration_s": 1.5,
               "result": {"masters": 4}, "error": None}]
    write(tmp_path, "kv_elastic", {}, 1, parts, extra={"timeline": events})
    study = kvstore.analyse(tmp_path)
    around = around_events(study.series, study.events, window_s=1.0)
    during = around[around["when"] == "during"].iloc[0]
    before = around[around["when"] == "before"].iloc[0]
    assert during["good_s"] == pytest.approx(0.8 * during["ops_s"], rel=1e-3)
    assert before["good_s"] == before["ops_s"]
    html = study.events_table_html(window_s=1.0).data
    assert "goodput/s during" in html and "p99 includes the failed ops" in html


def test_a_sampled_study_computes_from_every_op(raw: Path, study: kvstore.Study,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the figure budget no experiment's ops are held at once: the per-run,
    per-second and pooled numbers are computed one run at a time from the files, and
    are the same, row for row, as from every op in memory."""
    import pandas as pd

    from harness.studies.kvstore import analysis

    monkeypatch.setattr(analysis, "FIGURE_OPS", 500)
    thin = kvstore.analyse(raw)
    assert thin.scaling_loaded is not None and thin.scaling_loaded.sampled
    for part in ("scaling", "cache", "elastic", "series", "events"):
        pd.testing.assert_frame_equal(getattr(thin, part), getattr(study, part),
                                      check_exact=False, rtol=1e-12, obj=part)
    for view in ("scaling_table_html", "scaling_findings", "cache_findings",
                 "events_table_html", "steps_summary", "redirect_table_html"):
        assert getattr(thin, view)().data == getattr(study, view)().data, view


def test_fixed_duration_runs_average_rates_arithmetically(tmp_path: Path) -> None:
    """Issue 26, p.29: the caption said arithmetic for these fixed-duration runs while
    the table computed harmonic means (`harmonic_rates` found no duration column)."""
    raw = tmp_path / "raw"
    for rep, lat in ((1, 50), (2, 100), (3, 200)):
        man_loadgen = {"connections": 1, "inflight": 1, "duration_s": 2.0}
        man = new_manifest(
            run_id=f"kv-r{rep}", experiment="kv_scaling", workload="kvstore",
            config_id="c", repetition=rep, params={},
            grid_point={"services.kv.masters": 2, "clients.processes": 1},
            status="complete", started_utc="2026-01-01T00:00:00+00:00",
            ended_utc="2026-01-01T00:00:01+00:00", loadgen=man_loadgen)
        write_run(raw, man, OpsArrays.concat([client_ops(0, {0: lat, 1: lat})], OPS))
    study = kvstore.analyse(raw)
    rates = study.scaling.loc[study.scaling["op"] == "get", "throughput_ops_s"].to_numpy()
    row = study.scaling_table().set_index("op").loc["get"]
    assert row["mean"] == pytest.approx(rates.mean())  # not 3 / sum(1 / rates)
    assert row["mean"] > 1.1 * 3 / np.sum(1 / rates)
    html = study.scaling_table_html().data
    assert "arithmetic (fixed-duration runs) mean over runs" in html
    assert "harmonic mean over runs" not in html
    # Issue 51: the figure beside that table still said "harmonic mean" in its caption.
    drawn: dict[str, Any] = {}
    study.publish = lambda fig, name: drawn.setdefault(name, fig)  # type: ignore[method-assign]
    study.scaling_figure()
    title = drawn["scaling-throughput"].get_suptitle()
    assert "lines: arithmetic mean over runs" in title and "harmonic" not in title


def test_counts_agree_across_pages_and_a_single_run_claims_no_interval(
        study: kvstore.Study, raw: Path) -> None:
    """Issue 26, p.3/28/34: kv_elastic's ops were 433,507 on one page and 431,874 on
    another (redirects counted once and not the other), "during" + "outside steps" did
    not add up to the whole run, and "each number above is an estimate with its interval
    over repeated runs" was said of a single run."""
    import re

    from harness.analysis.data.load import load

    records = load(raw, experiments=["kv_elastic"]).ops  # every measured record
    html = study.describe().data
    row = re.search(r"elastic</td>\s*<td[^>]*>kv_elastic</td>\s*<td[^>]*>1</td>\s*"
                    r"<td[^>]*>([\d,]+)</td>\s*<td[^>]*>([\d,]+)</td>", html)
    assert row, html
    ops, redirects = (int(x.replace(",", "")) for x in row.groups())
    assert redirects == int((records["status"] == "redirect").sum()) > 0
    assert ops + redirects == len(records)  # the overview's measured ops
    split = study.steps_split.sum(numeric_only=True)
    whole = study.elastic[study.elastic["op"] != "all"]["ops"].sum()
    assert split["ops_during"] + split["ops_outside"] == whole == ops
    table = study.redirect_table_html().data
    assert f"{int(split['ops_during']):,}" in table and f"{int(split['ops_outside']):,}" in table
    text = study.reading().data
    assert "`kv_elastic` ran once per configuration: its numbers describe that run, with no " \
           "interval" in text
    assert "numbers of `kv_scaling`, `kv_cache` are estimates with their intervals" in text
