"""The capacity search (`harness.run.capacity`): its SLO grammar, its verdict per step, and
its answer checked against queueing theory: on a simulated M/D/1 queue (Lindley's
recursion) and on a real server with a fixed service time (examples/queueserver.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.errors import SpecError
from harness.run import capacity
from harness.run.capacity import SearchSettings, Step, judge, parse_slo, search
from harness.spec import load_spec


@pytest.mark.parametrize(("text", "conditions"), [
    ("p99 < 1ms", [("p99", 1.0)]),
    ("p99<1ms and p50 < 200us", [("p99", 1.0), ("p50", 0.2)]),
    ("p99.9 <= 0.5 s", [("p99.9", 500.0)]),
    ("mean < 150 µs", [("mean", 0.15)]),
])
def test_slo_grammar(text: str, conditions: list[tuple[str, float]]) -> None:
    slo = parse_slo(text)
    assert [c.metric for c in slo.conditions] == [m for m, _ in conditions]
    assert [c.limit_ms for c in slo.conditions] == pytest.approx([x for _, x in conditions])


@pytest.mark.parametrize(("text", "said"), [
    ("p98 < 1ms", "cannot read 'p98 < 1ms'"),
    ("p99 < 1", "cannot read 'p99 < 1'"),
    ("p99 < 0ms", "must be above 0"),
    ("p99 < 1ms and p99 < 2ms", "appears twice"),
    ("", "give an SLO"),
])
def test_a_bad_slo_is_named(text: str, said: str) -> None:
    with pytest.raises(SpecError, match=said):
        parse_slo(text)


def test_a_step_that_did_not_hold_its_target_never_meets_the_slo() -> None:
    slo = parse_slo("p99 < 1ms")
    ok = judge(slo, 1000, 1000, 2, {"p99": (0.5, 0.4, 0.6)}, True)
    assert ok.met and ok.surely_met and not ok.surely_missed
    lagging = judge(slo, 1000, 700, 2, {"p99": (0.5, 0.4, 0.6)}, False, "700 of 1,000")
    assert lagging.met is False and lagging.surely_missed
    assert "did not hold its target (700 of 1,000)" in lagging.detail
    unsure = judge(slo, 1000, 1000, 2, {"p99": (0.9, 0.7, 1.3)}, True)
    assert unsure.met and not unsure.surely_met and not unsure.surely_missed
    unknown = judge(slo, 1000, 1000, 2, {"p99": (math.nan,) * 3}, True)
    assert unknown.met is False and "too few ops" in unknown.detail


def md1_p99_ms(rate: float, service_ms: float, n: int = 60_000, seed: int = 3) -> float:
    """p99 of the sojourn time of an M/D/1 queue (Poisson arrivals at `rate` per second,
    service `service_ms`), by Lindley's recursion W' = max(0, W + S - A)."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1e3 / rate, n)
    w = np.empty(n)
    cur = 0.0
    for i in range(n):
        cur = max(0.0, cur - gaps[i]) if i else 0.0
        w[i] = cur
        cur += service_ms
    return float(np.quantile(w + service_ms, 0.99))


def md1_capacity(service_ms: float, limit_ms: float) -> float:
    lo, hi = 1.0, 1e3 / service_ms
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if md1_p99_ms(mid, service_ms) < limit_ms else (lo, mid)
    return lo


def test_search_finds_the_md1_capacity_within_its_resolution() -> None:
    """Steps measured by a simulated M/D/1 queue (S = 2 ms, so at most 500 ops/s): the
    rate found for p99 < 10 S is the theory's within the resolution, every step the
    search took agrees with theory about meeting it, and the clients are trusted only
    up to what they offered (the closed-loop step is 1/S)."""
    s_ms = 2.0
    truth = md1_capacity(s_ms, 10 * s_ms)
    assert 0.6 * 500 < truth < 500

    def measure(rate: float | None) -> Step:
        if rate is None:
            return judge(slo, None, 1e3 / s_ms, 3, {}, True)
        p = md1_p99_ms(rate, s_ms) if rate < 1e3 / s_ms else math.inf
        return judge(slo, rate, rate, 3, {"p99": (p, p * 0.97, p * 1.03)}, True)

    slo = parse_slo(f"p99 < {10 * s_ms:g}ms")
    result = search(measure, SearchSettings(slo, resolution=0.05))
    assert result.closed_loop_max_ops_s == 500
    assert abs(result.capacity_ops_s / truth - 1) <= 0.05
    assert result.ci_low <= result.capacity_ops_s < result.ci_high
    for s in result.steps[1:]:
        assert s.met == (s.rate_ops_s <= truth * 1.01) or abs(s.rate_ops_s / truth - 1) < 0.02
    assert len(result.steps) <= 12
    doc = result.to_json()
    assert doc["capacity_ops_s"] == result.capacity_ops_s and len(doc["steps"]) == len(
        result.steps)
    assert "capacity: " in result.last_line() and "at p99 < 20 ms" in result.last_line()


def test_search_says_when_even_the_lowest_rate_misses() -> None:
    slo = parse_slo("p99 < 1ms")

    def measure(rate: float | None) -> Step:
        return judge(slo, rate, rate or 1000.0, 1, {"p99": (5.0, 4.0, 6.0)}, True)

    result = search(measure, SearchSettings(slo))
    assert result.capacity_ops_s is None and "missed the SLO" in result.stopped
    assert result.last_line().startswith("capacity: none found")


QUEUE_SPEC = """\
name: queue
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache:
    kind: command
    host: server
    settings:
      command: "{python} {kit}/examples/queueserver.py --port {port} --service-ms 0.5"
      provides: memcached
      ready: tcp
clients: {hosts: [client], processes: 1, connections: 4}
params: {key_space: 20}
repetitions: 2
run: {duration_s: 0.6, warmup_s: 0.2, timeout_s: 5, arrival: poisson}
search: {slo: "p50 < 2.5ms", resolution: 0.5}
"""


@pytest.mark.integration
def test_search_on_a_server_of_known_capacity(tmp_path: Path, capsys) -> None:
    """examples/queueserver.py serves one request at a time in 0.5 ms: the closed-loop
    step finds at most 1/S, the capacity found at p50 < 5 S lies below it, every step
    is an ordinary run in the tree, and search.json holds what the last line says. (The
    median: on a shared 2-core machine the p99 of any Python server has a noise floor
    of several ms; benchmarks/capacity_md1.py checks p99 against theory on a quiet one.)"""
    spec = tmp_path / "queue.yaml"
    spec.write_text(QUEUE_SPEC)
    assert load_spec(spec).raw["search"]["slo"] == "p50 < 2.5ms"
    out = tmp_path / "raw"
    figures = tmp_path / "figures"
    code = main(["run", str(spec), "--out", str(out), "-q", "--no-progress",
                 "--figures", str(figures)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    doc = json.loads((out / "queue" / "search.json").read_text())
    top = doc["closed_loop_max_ops_s"]
    assert 500 < top <= 2000
    assert 0.25 * top <= doc["capacity_ops_s"] < top
    assert all(s["p50_ci"][0] is not None for s in doc["steps"][1:])
    last = printed.strip().splitlines()[-1]
    assert last.startswith(f"capacity: {doc['capacity_ops_s']:,.0f} ops/s")
    assert "p50 < 2.5 ms" in last
    runs = list((out / "queue").glob("*/manifest.json"))
    assert len(runs) == 2 * len(doc["steps"])
    assert {s["met"] for s in doc["steps"][1:]} == {True, False}
    assert (figures / "queue-capacity.png").stat().st_size > 10_000
    # The generic study's section of the experiment shows the curve and the answer.
    from harness.studies.generic import analyse

    [section] = analyse(out, figures_dir=tmp_path / "f2").sections
    said, _figure = section.capacity()
    assert f"found **{doc['capacity_ops_s']:,.0f} ops/s**" in said.data
    assert (tmp_path / "f2" / "queue-capacity.png").exists()
    # Two trees that both swept the load: one figure of both curves for the comparison.
    from harness.analysis.figures import sweeps

    assert sweeps.compare_figure(out, out) is not None


def test_a_bad_search_block_is_named_before_anything_runs(tmp_path: Path) -> None:
    spec = tmp_path / "queue.yaml"
    spec.write_text(QUEUE_SPEC.replace('slo: "p50 < 2.5ms"', 'slo: "p50 < 2.5"'))
    with pytest.raises(SpecError, match=r"search: .*cannot read 'p50 < 2.5'"):
        load_spec(spec)
    grid = tmp_path / "grid.yaml"
    grid.write_text(QUEUE_SPEC.replace("repetitions: 2",
                                       "repetitions: 2\ngrid: {get_ratio: [0.5, 0.9]}"))
    with pytest.raises(SpecError, match="one configuration"):
        capacity.run_search(grid, {}, tmp_path / "raw",
                            capacity.settings_from(load_spec(grid).raw["search"]))
