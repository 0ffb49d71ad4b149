"""`until: decided`: which configurations get another round, from the comparisons of each
configuration with the first, judged by the group-sequential test of
`harness.analysis.stats.sequential` on the complete runs' throughput in the output
directory, and what the live line says about those still open.

Every round re-reads the runs and replays each comparison's looks from its first runs
(`sequential.replay`), so a resumed run finds the state it stopped in. The grid's
comparisons are one family at alpha 0.05, Bonferroni over them (`family_alpha`)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import paths
from harness.analysis.stats import sequential
from harness.results.decided import DECIDED_FILE, DECIDED_VERSION, read_decided  # noqa: F401 - read_decided: its readers import it from here too
from harness.spec import DecideRule, RunPlan

#: The family's level: the chance that any comparison of the grid ends on a false verdict.
ALPHA = 0.05


def _finite(d: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN or infinity: None in their place."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in d.items()}


def decided_lines(data: dict[str, Any]) -> list[str]:
    """What `harness compare --experiment E` prints of a decided.json: the verdicts the
    rounds stopped on, each with its repeated CI (one warning line for a file this kit
    did not write: fields missing or of the wrong kind)."""
    try:
        return _lines(data)
    except (KeyError, TypeError, ValueError, IndexError):
        return [f"warning: {DECIDED_FILE} is not one `until: decided` wrote; left out"]


def _lines(data: dict[str, Any]) -> list[str]:
    out = [f"until decided ({data['method']}; {data['family']} over "
           f"{len(data['comparisons'])} comparison(s) at {data['alpha']:g}; equivalent: "
           f"within ±{data['equivalence']:.0%}): {data['ended']}"]
    for c in data["comparisons"]:
        last = c["looks"][-1] if c["looks"] else None
        if last is None or last["low"] is None or last["high"] is None:
            out.append(f"  {c['configuration']} vs {c['base']}: {c['state']}, no "
                       "interval")
            continue
        out.append(f"  {c['configuration']} vs {c['base']}: {c['state']} "
                   f"{last['ratio']:.3f}x [{last['low']:.3f}, {last['high']:.3f}] "
                   f"at look {last['look']}, {last['n_cand']} runs a side")
    return out


def comparisons(templates: list[RunPlan]) -> list[tuple[RunPlan, RunPlan]]:
    """(base, candidate) pairs: each configuration against the first, within each `op`
    when the grid varies it (as `harness compare` within a tree pairs them: ops differ in
    what they measure, not in how well)."""
    groups: dict[Any, list[RunPlan]] = {}
    for plan in templates:
        groups.setdefault(plan.grid_point.get("op"), []).append(plan)
    return [(group[0], plan) for group in groups.values() for plan in group[1:]]


def _label(plan: RunPlan) -> str:
    return " ".join(f"{k}={v}" for k, v in plan.grid_point.items()) or "default"


def _said(look: sequential.Look | None, runs: int, first: int) -> str:
    """A comparison's state in a few words: the ratio and its repeated CI, and why."""
    if look is None:
        return f"{runs} complete run(s), a look needs {first} a side"
    if look.state == sequential.OPEN and look.low != look.low:  # NaN: no spread yet
        return f"no interval yet at {look.n_cand} runs"
    ci = f"{look.ratio:.3f}x [{look.low:.3f}, {look.high:.3f}] at {look.n_cand} runs"
    if look.state == sequential.OPEN:
        return f"{ci}: the interval neither excludes 1 nor lies within the margin"
    return f"{look.state} {ci}"


@dataclass
class Decider:
    """The rounds of one `harness run` with `until: decided` (state: what was said)."""

    rule: DecideRule
    first: int
    say: Callable[[str], None]
    started: float = field(default_factory=time.monotonic)
    told: set[tuple[str, str]] = field(default_factory=set)
    #: Rounds asked per configuration: one whose runs keep failing stops at the cap too.
    asked: dict[str, int] = field(default_factory=dict)
    #: When the last round was asked for and how many runs it had (None: the first
    #: round, which the clock started with): what a run takes, to see whether the next
    #: round fits in the budget.
    last: tuple[float, int] | None = None
    #: The latest looks of each comparison (its configuration's label first), and why
    #: the rounds ended: what `write` puts in decided.json.
    looks: dict[str, tuple[str, str, list[sequential.Look]]] = field(default_factory=dict)
    ended: str = ""

    def more(self, templates: list[RunPlan],
             by_config: Mapping[str, Mapping[int, tuple[float, float]]]) -> list[str]:
        """The config_ids to repeat once more this round (each base first, when any of
        its comparisons is open)."""
        pairs = comparisons(templates)
        if not pairs:
            self._once("one", "until decided: no two configurations to compare")
            return []
        rates = {p.config_id: [by_config.get(p.config_id, {})[r][1]
                               for r in sorted(by_config.get(p.config_id, {}))]
                 for p in templates}
        alpha = sequential.family_alpha(ALPHA, len(pairs))
        most = self.rule.max_repetitions
        open_: list[tuple[RunPlan, RunPlan, str]] = []
        for base, plan in pairs:
            b, c = rates[base.config_id], rates[plan.config_id]
            looks = (sequential.replay(b, c, first=self.first, max_n=most, alpha=alpha,
                                       margin=self.rule.equivalence)
                     if min(len(b), len(c)) >= self.first else [])
            look = looks[-1] if looks else None
            self.looks[plan.config_id] = (_label(plan), _label(base), looks)
            what = _said(look, min(len(b), len(c)), self.first)
            if look is not None and look.decided:
                self._once(plan.config_id, f"until decided: {_label(plan)} against "
                           f"{_label(base)}: {what} (look {look.look})")
                continue
            if len(c) >= most or self.asked.get(plan.config_id, 0) >= most:
                self._once(plan.config_id, f"until decided: {_label(plan)}: still open "
                           f"after {most} repetitions (max_repetitions): {what}")
                continue
            open_.append((base, plan, what))
        if not open_:
            self.ended = "answered or at max_repetitions"
            self._once("end", f"until decided: all {len(pairs)} comparison(s) answered "
                       "or at max_repetitions")
            return []
        want = self._wanted(open_, rates)
        now = time.monotonic()
        spent, budget = now - self.started, self.rule.budget_s
        since, runs = self.last or (self.started, sum(len(r) for r in rates.values()))
        per_run = (now - since) / runs if runs else 0.0
        still = "; ".join(f"{_label(p)} vs {_label(b)}: {w}" for b, p, w in open_)
        if budget is not None and spent + per_run * len(want) > budget:
            why = (f"spent ({spent:.0f} s)" if spent >= budget else
                   f"nearly spent ({spent:.0f} s; the next round of {len(want)} run(s) "
                   f"would take about {per_run * len(want):.0f} s)")
            self.ended = f"budget {budget:.0f} s {why.split(' (')[0]}"
            self._once("budget", f"until decided: budget {budget:.0f} s {why}; "
                       f"{len(open_)} comparison(s) still open: {still}")
            return []
        left = f", {budget - spent:.0f} s of budget left" if budget is not None else ""
        self.say(f"until decided: {len(open_)} of {len(pairs)} comparison(s) open{left}: "
                 f"{still}")
        self.last = (now, len(want))
        for cid in want:
            self.asked[cid] = self.asked.get(cid, 0) + 1
        return want

    def _wanted(self, open_: list[tuple[RunPlan, RunPlan, str]],
                rates: Mapping[str, list[float]]) -> list[str]:
        """Each open comparison's candidate, and its base while the base has no more
        runs than the longest of its open candidates (and is below the cap)."""
        want: list[str] = []
        for base in dict.fromkeys(b.config_id for b, _, _ in open_):
            longest = max(len(rates[p.config_id]) for b, p, _ in open_ if b.config_id == base)
            if len(rates[base]) <= longest and len(rates[base]) < self.rule.max_repetitions:
                want.append(base)
            want += [p.config_id for b, p, _ in open_ if b.config_id == base]
        return want

    def write(self, exp_dir: Path) -> Path | None:
        """`<exp_dir>/decided.json`: the rule, the family, and each comparison's looks
        (ratio and repeated CI at each), written whole or not at all; None before any
        round was judged."""
        if not self.looks:
            return None
        data = {
            "version": DECIDED_VERSION, "method": sequential.METHOD,
            "family": "Bonferroni", "alpha": ALPHA,
            "equivalence": self.rule.equivalence, "first": self.first,
            "max_repetitions": self.rule.max_repetitions, "budget_s": self.rule.budget_s,
            "ended": self.ended or "stopped",
            "comparisons": [
                {"config_id": cid, "configuration": label, "base": base,
                 "state": looks[-1].state if looks else sequential.OPEN,
                 "looks": [_finite(asdict(look)) for look in looks]}
                for cid, (label, base, looks) in self.looks.items()]}
        path = exp_dir / DECIDED_FILE
        with paths.created(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, allow_nan=False)
            fh.write("\n")
        return path

    def _once(self, key: str, line: str) -> None:
        if ("said", key) not in self.told:
            self.told.add(("said", key))
            self.say(line)
