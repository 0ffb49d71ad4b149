"""The heavy-tail check: Hill's estimator against a known answer, its false alarms on
lognormal latencies and power on Pareto(1.5) by seeded simulation, and the note that
opens a section where it fires (percentiles first)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.checks import tails
from harness.analysis.data.load import Loaded
from harness.analysis.stats import loo
from tests.fixtures.frames import RTOL


def test_hill_on_exact_pareto_quantiles():
    # The n-quantiles of a Pareto(alpha): the estimator's answer is alpha up to O(1/k).
    n, alpha = 100_000, 1.5
    x = (1 - (np.arange(n) + 0.5) / n) ** (-1 / alpha)
    assert tails.hill(x, 316) == pytest.approx(alpha, rel=0.02)
    with pytest.raises(ValueError, match="k must be"):
        tails.hill(x[:10], 10)


def test_heavy_tail_is_a_one_line_call():
    rng = np.random.default_rng(0)
    fires, alpha, detail = tails.heavy_tail((1 - rng.random(10_000)) ** (-1 / 1.5) * 1e6)
    assert fires and alpha == pytest.approx(1.5, abs=0.3)
    assert detail.startswith(f"Hill tail index {alpha:.2f} from the top 100 of 10,000 "
                             "latencies (k = √n): below 2")
    fires, alpha, detail = tails.heavy_tail(rng.lognormal(13, 0.5, 10_000).astype(np.int64))
    assert not fires and alpha > 4 and "not below 2" in detail
    fires, alpha, detail = tails.heavy_tail(rng.lognormal(13, 0.5, 999))
    assert not fires and math.isnan(alpha) and "too few" in detail


@pytest.mark.parametrize(("draw", "n", "low", "high"), [
    (lambda r, n: r.lognormal(0, 0.5, n), 1000, 0, 0),       # false alarms
    (lambda r, n: r.lognormal(0, 1.0, n), 10_000, 0, 1),
    (lambda r, n: (1 - r.random(n)) ** (-1 / 1.5), 1000, 40, 50),  # power
    (lambda r, n: (1 - r.random(n)) ** (-1 / 1.5), 10_000, 49, 50),
])
def test_false_alarms_and_power(draw, n, low, high):
    rng = np.random.default_rng(n)
    fired = sum(tails.heavy_tail(draw(rng, n))[0] for _ in range(50))
    assert low <= fired <= high


def _loaded(groups: dict[str, np.ndarray], runs_per_group: int = 2) -> Loaded:
    runs, ops = [], []
    for g, lat in groups.items():
        for r, part in enumerate(np.array_split(lat, runs_per_group)):
            rid = f"{g}-{r}"
            runs.append({"run_id": rid, "cfg": g})
            ops.append(pd.DataFrame({"run_id": rid, "op": "get", "latency_ns": part,
                                     "status": "ok", "warmup": False}))
    return Loaded(pd.DataFrame(runs), pd.concat(ops, ignore_index=True))


def test_the_section_opens_with_the_percentiles_where_it_fires():
    rng = np.random.default_rng(5)
    heavy = (1 - rng.random(4000)) ** (-1 / 1.3) * 1e5
    light = rng.lognormal(np.log(1e5), 0.5, 4000)
    checks = tails.group_checks(_loaded({"a": heavy, "b": light}), ["cfg"])
    assert checks[("a",)].check.fires and not checks[("b",)].check.fires
    note = tails.section_note(checks, lambda k: f"config {k[0]}")
    assert note.startswith("**Heavy tails: read the percentiles.** In 1 of 2 groups")
    assert "mean latency, the throughput and their intervals" in note
    p50, p99 = np.quantile(heavy, [0.5, 0.99]) / 1e6
    a = checks[("a",)].check
    assert f"| config a | {p50:.3g} | {p99:.3g} | {a.alpha_hat:.2f} | 4,000 |" in note
    assert "config b" not in note
    assert tails.section_note({("b",): checks[("b",)]}) is None


def test_the_dict_entry_is_what_other_checks_can_sit_beside():
    rng = np.random.default_rng(8)
    warn = tails.heavy_tail_check((1 - rng.random(4000)) ** (-1 / 1.5) * 1e6)
    assert warn["check"] == "heavy_tail" and warn["status"] == "warn"
    assert warn["k"] == 63 and warn["ops"] == 4000 and warn["tail_index"] < 2
    assert warn["detail"].startswith(f"Hill tail index {warn['tail_index']:.2f} from the top 63")
    ok = tails.heavy_tail_check(rng.lognormal(13, 0.5, 4000))
    assert ok["status"] == "ok" and ok["tail_index"] > 2
    few = tails.heavy_tail_check(rng.lognormal(13, 0.5, 10))
    assert few["status"] == "ok" and few["tail_index"] is None and few["ops"] == 10
    # From the top only (the sorted-runs path `harness summary` takes): the same answer,
    # its index to 1e-12 (two paths' sums of the same logs), its words exactly.
    lat = np.rint((1 - rng.random(5000)) ** (-1 / 1.5) * 1e5).astype(np.int64)
    runs = loo.RunSorted([np.sort(lat[:2000]), np.sort(lat[2000:])], np.array([0, 1]))
    top, full = tails.check_top(runs.top(tails.tail_k(5000) + 1), 5000), tails.check(lat)
    assert (top.fires, top.k, top.n, top.detail) == (full.fires, full.k, full.n, full.detail)
    assert top.alpha_hat == pytest.approx(full.alpha_hat, rel=RTOL, abs=0)


def test_hill_is_the_same_whatever_order_the_latencies_come_in():
    """Paths hand Hill's estimate the same latencies in other orders (a run's sorted top,
    a partition of them all); it sums their logs in one order, so the index is the same
    to the last bit (unsorted, 20 orders of these gave 3 different last digits)."""
    rng = np.random.default_rng(3)
    lat = np.rint((1 - rng.random(10_000)) ** (-1 / 1.5) * 1e5)
    k = tails.tail_k(lat.size)
    assert len({tails.hill(rng.permutation(lat), k) for _ in range(20)}) == 1


def _write_runs(raw: Path, experiment: str, draw, runs: int = 3, ops: int = 2000) -> None:
    from harness.results import OK, OpsArrays, new_manifest, write_run

    rng = np.random.default_rng(len(experiment))
    for r in range(runs):
        lat = np.maximum(np.rint(draw(rng, ops)), 1).astype(np.int64)
        start = np.concatenate([[0], np.cumsum(lat[:-1])])
        arrays = OpsArrays(("get",), np.zeros(ops, np.int32), np.zeros(ops, np.int8), start,
                           lat, np.full(ops, -1, np.int64), np.full(ops, OK, np.int8),
                           np.zeros(ops, np.int64), np.zeros(ops, bool))
        write_run(raw, new_manifest(run_id=f"{experiment}-{r}", experiment=experiment,
                                    workload="kvstore", config_id="c", repetition=r + 1,
                                    grid_point={}, started_utc="t0", ended_utc="t1"), arrays)


def test_harness_summary_lists_the_check_where_it_fires(tmp_path: Path, capsys) -> None:
    """`harness summary --format json`: each row's `checks` holds the heavy_tail entry
    where Hill's index of its pooled latencies is below 2, and nothing elsewhere; the
    table prints it as a warning under the table, csv as JSON text."""
    import json

    from harness.cli import main

    _write_runs(tmp_path, "pareto", lambda r, n: (1 - r.random(n)) ** (-1 / 1.3) * 1e5)
    _write_runs(tmp_path, "lognormal", lambda r, n: r.lognormal(np.log(1e5), 0.5, n))
    assert main(["summary", str(tmp_path), "--format", "json"]) == 0
    rows = {r["experiment"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["lognormal"]["checks"] == []
    (entry,) = rows["pareto"]["checks"]
    assert entry["check"] == "heavy_tail" and entry["status"] == "warn"
    assert entry["runs"] == 3 and entry["ops"] == 6000 and entry["tail_index"] < 2
    assert "the mean's (and throughput's) interval is unreliable" in entry["detail"]
    assert main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (f"warning: heavy_tail (experiment=pareto; 3 runs): {entry['detail']}"
            in out.splitlines())
    assert "experiment=lognormal" not in out
    assert main(["summary", str(tmp_path), "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("experiment")
    (same,) = json.loads(table.loc["pareto", "checks"])
    assert same == {**entry, "tail_index": pytest.approx(entry["tail_index"], rel=1e-9)}
    assert json.loads(table.loc["lognormal", "checks"]) == []
