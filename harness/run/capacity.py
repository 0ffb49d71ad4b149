"""Capacity search: the highest offered rate whose latency meets an SLO.

`harness run SPEC --search "p99 < 1ms"` (or a `search:` block in the spec) measures the
spec's one configuration closed loop first (its maximum rate), then open loop at a
coarse geometric sweep up to that maximum (1/16, 1/8, ... of it), then bisects
(geometric midpoints) between the highest rate that met the SLO and the lowest that did
not, until the bracket is narrower than `resolution` (default 5%). Every step is an
ordinary grid point `run.rate_ops_s: R` with the spec's repetitions, so its runs are in
raw_results like any other (and `--resume` reuses them).

A step *meets* the SLO when every condition's pooled estimate is within its limit AND
every run held its target (achieved at least 95% of it, no op intended in the window
left unsent): a step whose clients could not keep the schedule measured the clients,
not the server, and never counts as meeting it.

The interval on the capacity comes from the steps' own 95% intervals, assuming latency
grows with offered load: its low end is the highest rate whose intervals lie entirely
within the limits (surely met), its high end the lowest rate above the capacity whose
interval lies entirely beyond a limit or that did not hold its target (surely missed;
the bracket's top when none is). Each end rests on one step's 95% interval, so the
pair is conservative rather than an exact 95% interval.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import paths
from harness.errors import SpecError
from harness.spec.slo import (
    METRICS,
    Condition,
    SearchSettings,
    Slo,
    parse_slo,
    settings_from,
)

#: The coarse sweep's rates as fractions of the closed-loop maximum (below a quarter
#: only when that misses: each step must run long enough for its percentile's interval,
#: and low rates need long runs).
COARSE = (1 / 4, 1 / 2, 1.0)
#: How far below the sweep's lowest rate the search goes when even that one misses.
MAX_HALVINGS_BELOW = 6
@dataclass(frozen=True)
class Step:
    """One measured rate (None: closed loop) and what it gave, pooled over its runs."""

    rate_ops_s: float | None
    achieved_ops_s: float
    runs: int
    #: metric -> [estimate, ci_low, ci_high] (ms; NaN where there is none)
    latency_ms: dict[str, list[float]]
    held: bool
    met: bool | None
    surely_met: bool = False
    surely_missed: bool = False
    detail: str = ""


@dataclass(frozen=True)
class SearchResult:
    slo: str
    resolution: float
    capacity_ops_s: float | None
    ci_low: float | None
    ci_high: float | None
    closed_loop_max_ops_s: float
    stopped: str
    steps: list[Step] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        steps = []
        for s in self.steps:
            row: dict[str, Any] = {"rate_ops_s": s.rate_ops_s,
                                   "achieved_ops_s": _r(s.achieved_ops_s), "runs": s.runs}
            for metric, (v, lo, hi) in s.latency_ms.items():
                name = METRICS[metric][0].removeprefix("latency_")
                row[name] = _r(v)
                row[name.replace("_ms", "_ci")] = [_r(lo), _r(hi)]
            row.update(held_target=s.held, met=s.met, detail=s.detail)
            steps.append(row)
        return {"slo": self.slo, "capacity_ops_s": _r(self.capacity_ops_s),
                "ci_low": _r(self.ci_low), "ci_high": _r(self.ci_high),
                "resolution": self.resolution,
                "closed_loop_max_ops_s": _r(self.closed_loop_max_ops_s),
                "stopped": self.stopped, "steps": steps}

    def last_line(self) -> str:
        if self.capacity_ops_s is None:
            return f"capacity: none found ({self.stopped}) at {self.slo}"
        if self.ci_low is not None and self.ci_high is not None:
            ci = f" (95% CI {_rate(self.ci_low)}-{_rate(self.ci_high)})"
        elif self.ci_high is not None:
            ci = (f" (95% CI up to {_rate(self.ci_high)}; no step's interval lay wholly "
                  "within the SLO)")
        else:
            ci = ""
        return f"capacity: {_rate(self.capacity_ops_s)} ops/s{ci} at {self.slo}"


def judge(slo: Slo, rate: float | None, achieved: float, runs: int,
          values: Mapping[str, tuple[float, float, float]], all_held: bool,
          why_not_held: str = "") -> Step:
    """A step's verdict from its pooled estimates and intervals (`values`: metric ->
    (estimate, low, high) in ms)."""
    lat = {c.metric: [float(x) for x in values.get(c.metric, (math.nan,) * 3)]
           for c in slo.conditions}
    if rate is None:  # closed loop: the maximum, not a step of the search
        return Step(None, achieved, runs, lat, True, None, detail="closed loop")
    known = all(not math.isnan(lat[c.metric][0]) for c in slo.conditions)
    within = known and all(lat[c.metric][0] <= c.limit_ms for c in slo.conditions)
    met = bool(all_held and within)
    surely_met = met and all(lat[c.metric][2] <= c.limit_ms for c in slo.conditions)
    surely_missed = (not all_held) or any(lat[c.metric][1] > c.limit_ms
                                          for c in slo.conditions)
    if not all_held:
        detail = f"did not hold its target ({why_not_held})" if why_not_held else \
            "did not hold its target"
    elif not known:
        detail = "too few ops for " + ", ".join(c.metric for c in slo.conditions
                                                 if math.isnan(lat[c.metric][0]))
    else:
        detail = "; ".join(f"{c.metric} {_num(lat[c.metric][0])} ms "
                           f"{'<=' if lat[c.metric][0] <= c.limit_ms else '>'} "
                           f"{_num(c.limit_ms)} ms" for c in slo.conditions)
    return Step(rate, achieved, runs, lat, all_held, met, surely_met, surely_missed, detail)


def search(measure: Callable[[float | None], Step], settings: SearchSettings,
           say: Callable[[str], None] = lambda _m: None) -> SearchResult:
    """Drive `measure` (a rate, or None for closed loop -> its `Step`) as the module
    says. Rates are rounded to 3 significant digits (readable config ids)."""
    steps: list[Step] = []

    def step(rate: float | None) -> Step:
        s = measure(rate)
        steps.append(s)
        what = "closed loop" if rate is None else f"{_rate(rate)} ops/s offered"
        verdict = "" if s.met is None else (" met" if s.met else " missed")
        say(f"search step {len(steps)}: {what}: achieved {_rate(s.achieved_ops_s)} ops/s"
            f"{verdict} ({s.detail})")
        return s

    top = step(None).achieved_ops_s
    if not top > 0:
        return SearchResult(settings.slo.text, settings.resolution, None, None, None, top,
                            "the closed-loop run measured no throughput", steps)
    lo: float | None = None
    hi: float | None = None
    for frac in COARSE:
        rate = _round3(top * frac)
        if step(rate).met:
            lo = rate
        else:
            hi = rate
            break
    halvings = 0
    while lo is None and hi is not None and halvings < MAX_HALVINGS_BELOW \
            and len(steps) < settings.max_steps:
        rate = _round3(hi / 2)
        halvings += 1
        if step(rate).met:
            lo = rate
        else:
            hi = rate
    stopped = ""
    if lo is None:
        stopped = f"even {_rate(hi)} ops/s missed the SLO"
    elif hi is None:
        stopped = ("every step met it up to the closed-loop maximum: the capacity is at "
                   "least that")
    else:
        while hi / lo - 1 > settings.resolution:
            if len(steps) >= settings.max_steps:
                stopped = f"max_steps ({settings.max_steps}) reached"
                break
            mid = _round3(math.sqrt(lo * hi))
            if mid in (lo, hi):
                break
            if step(mid).met:
                lo = mid
            else:
                hi = mid
        stopped = stopped or f"bracket {_rate(lo)}-{_rate(hi)} within {settings.resolution:.0%}"
    if lo is None:
        return SearchResult(settings.slo.text, settings.resolution, None, None, None, top,
                            stopped, steps)
    open_steps = [s for s in steps if s.rate_ops_s is not None]
    sure = [s.rate_ops_s for s in open_steps if s.surely_met and s.rate_ops_s <= lo]
    missed = [s.rate_ops_s for s in open_steps if s.surely_missed and s.rate_ops_s > lo]
    ci_low = max(sure) if sure else None
    ci_high = min(missed) if missed else hi
    return SearchResult(settings.slo.text, settings.resolution, lo, ci_low, ci_high, top,
                        stopped, steps)


def write_result(result: SearchResult, exp_dir: Path) -> Path:
    """`<exp_dir>/search.json`, written whole or not at all (temp file, fsync, rename)."""
    exp_dir.mkdir(parents=True, exist_ok=True)
    path = exp_dir / "search.json"
    with paths.created(path, "w", encoding="utf-8") as fh:
        json.dump(result.to_json(), fh, indent=2, allow_nan=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    return path


def step_values(loaded: Any, rate: float | None, slo: Slo) -> tuple[float, int,
                                                                  dict[str, tuple]]:
    """(achieved ops/s, runs, metric -> (estimate, low, high) ms) of the runs of `rate`
    (None: the closed-loop runs) in `loaded`, as `harness summary` computes them."""
    from harness.analysis.data import numbers

    mine = rate_runs(loaded.runs, rate)
    if mine.empty:
        return 0.0, 0, {}
    sub = loaded.runs_where(loaded.runs.index.isin(mine.index))
    metrics = {"throughput_ops_s": None, **{METRICS[c.metric][0]: METRICS[c.metric][1]
                                            for c in slo.conditions}}
    [group] = numbers.group_intervals(sub, [], metrics).values()
    out = {}
    for c in slo.conditions:
        iv = group.get(c.field)
        out[c.metric] = ((iv.value, iv.low, iv.high) if iv is not None
                         else (math.nan, math.nan, math.nan))
    tput = group["throughput_ops_s"].value
    return float(tput), len(mine), out


def rate_runs(runs: Any, rate: float | None) -> Any:
    """The rows of `runs` measured at offered `rate` (None: closed loop, no rate)."""
    col = runs.get("run.rate_ops_s")
    if col is None:
        return runs if rate is None else runs.iloc[0:0]
    return runs[col.isna()] if rate is None else runs[col == rate]


def held(runs: Any) -> tuple[bool, str]:
    """Whether every run held its open-loop target (`runstatus.target_held`: 95% of it,
    less Poisson's own spread; nothing unsent), and the runs that did not."""
    from harness.run.runstatus import target_held

    bad = []
    for r in runs.itertuples(index=False):
        target = float(getattr(r, "loadgen_target_rate_ops_s", math.nan))
        achieved = float(getattr(r, "loadgen_achieved_rate_ops_s", math.nan))
        unsent = getattr(r, "count_unsent", 0) or 0
        duration = getattr(r, "loadgen_duration_s", None)
        ops = getattr(r, "loadgen_ops", None)
        kept = target_held(target, achieved, str(getattr(r, "loadgen_arrival", "fixed")),
                           None if _nan(duration) else float(duration),
                           None if _nan(ops) else int(ops))
        if math.isnan(achieved) or not kept or (not math.isnan(unsent) and unsent > 0):
            bad.append(f"{_rate(achieved)} of {_rate(target)} ops/s"
                       + (f", {int(unsent):,} unsent" if unsent and unsent > 0 else ""))
    return (not bad), "; ".join(bad[:3])


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _round3(x: float) -> float:
    v = float(f"{x:.3g}")
    return int(v) if v.is_integer() else v


def _rate(x: float | None) -> str:
    return "?" if x is None or math.isnan(x) else f"{x:,.0f}"


def _num(x: float) -> str:
    return f"{x:.3g}"


def _r(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, 6)


__all__ = ["Condition", "SearchResult", "SearchSettings", "Slo", "Step", "asdict", "held",
           "judge", "parse_slo", "search", "settings_from", "step_values", "write_result"]


def min_ops(slo: Slo) -> int:
    """Measured ops a run needs for an interval on each of the SLO's percentiles
    (`intervals.MIN_TAIL_OPS` beyond the strictest one; the mean needs none)."""
    from harness.analysis.stats.intervals import MIN_TAIL_OPS

    tails = [1 - METRICS[c.metric][1] for c in slo.conditions
             if METRICS[c.metric][1] is not None]
    return math.ceil(MIN_TAIL_OPS / min(tails)) if tails else 0


def run_search(spec_path: Path | str, overrides: Mapping[str, Any], out: Path,
               settings: SearchSettings, *, runner_kw: Mapping[str, Any] | None = None,
               say: Callable[[str], None] = print,
               figures_dir: Path | None = None,
               labels: Mapping[str, str] | None = None) -> SearchResult:
    """The search on a spec of one configuration, each step an ordinary `Runner` run of
    the grid point ``run.rate_ops_s: R`` (closed loop: ``run.rate_ops_s: null``) in
    `out`; writes ``<out>/<experiment>/search.json`` (and, given `figures_dir`, the
    latency-throughput figure ``<experiment>-capacity.png/.svg`` there) and returns
    the result. `labels` go into every step's manifests (`harness run --label`)."""
    from harness.analysis.data.load import load
    from harness.run.runner import Runner
    from harness.spec import load_spec

    base = load_spec(spec_path, overrides, labels)
    varied = {k: v for k, v in base.grid.items() if len(v) > 1}
    if varied:
        raise SpecError([f"{base.path}: grid: a search finds the capacity of one "
                        f"configuration, and the grid varies {sorted(varied)}; pick one "
                        "with --set 'grid.KEY=[VALUE]' and search each in turn"])
    if "run.rate_ops_s" in base.grid:
        raise SpecError([f"{base.path}: grid.run.rate_ops_s: the search chooses the rates; "
                        "leave it out of the grid"])

    needed = min_ops(settings.slo)

    def measure(rate: float | None) -> Step:
        step_over = {**overrides, "run.rate_ops_s": None}
        if rate is not None:
            step_over["grid.run.rate_ops_s"] = [rate]
            # Long enough that each run holds the ops its percentiles' intervals need.
            if base.size.duration_s is not None:
                # (10% over: a Poisson count falls short of rate x time half the time)
                seconds = math.ceil(10 * 1.1 * needed / rate) / 10
                if seconds > base.size.duration_s:
                    step_over["run.duration_s"] = seconds
            elif base.size.ops is not None and needed > base.size.ops:
                step_over["run.ops"] = needed
        spec = load_spec(spec_path, step_over, labels)
        Runner(spec, out, **dict(runner_kw or {})).run()
        loaded = load(out, experiments=[spec.name])
        mine = rate_runs(loaded.runs, rate)
        achieved, n, values = step_values(loaded, rate, settings.slo)
        ok, why = held(mine) if rate is not None else (True, "")
        return judge(settings.slo, rate, achieved, n, values, ok and n > 0,
                     why if n else "no complete run")

    result = search(measure, settings, say)
    write_result(result, Path(out) / base.name)
    if figures_dir is not None and any(s.rate_ops_s is not None for s in result.steps):
        from harness.analysis.data.load import load
        from harness.analysis.figures import plots, sweeps

        loaded = load(Path(out), experiments=[base.name])
        fig = sweeps.figure(loaded, base.name, result.to_json())
        saved = plots.save(fig, f"{base.name}-capacity", Path(figures_dir))
        say(f"latency-throughput figure: {saved['png']}")
    return result
