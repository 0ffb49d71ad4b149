"""`until: decided`: which configurations get another round, from the comparisons of each
configuration with the first, judged by the group-sequential test of
`harness.analysis.stats.sequential` on the complete runs' throughput in the output
directory, and what the live line says about those still open.

Every round re-reads the runs and replays each comparison's looks from its first runs
(`sequential.replay`), so a resumed run finds the state it stopped in. The grid's
comparisons are one family at alpha 0.05, Bonferroni over them (`family_alpha`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from harness.analysis.stats import sequential
from harness.spec import DecideRule, RunPlan

#: The family's level: the chance that any comparison of the grid ends on a false verdict.
ALPHA = 0.05


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

    def more(self, templates: list[RunPlan],
             by_config: Mapping[str, Mapping[int, tuple[float, float]]]) -> list[str]:
        """The config_ids to repeat once more this round (the base first, when any is)."""
        if len(templates) < 2:
            self._once("one", "until decided: one configuration, nothing to compare")
            return []
        base, others = templates[0], templates[1:]
        rates = {p.config_id: [by_config.get(p.config_id, {})[r][1]
                               for r in sorted(by_config.get(p.config_id, {}))]
                 for p in templates}
        alpha = sequential.family_alpha(ALPHA, len(others))
        most = self.rule.max_repetitions
        open_: list[tuple[RunPlan, str]] = []
        for plan in others:
            b, c = rates[base.config_id], rates[plan.config_id]
            looks = (sequential.replay(b, c, first=self.first, max_n=most, alpha=alpha,
                                       margin=self.rule.equivalence)
                     if min(len(b), len(c)) >= self.first else [])
            look = looks[-1] if looks else None
            what = _said(look, min(len(b), len(c)), self.first)
            if look is not None and look.decided:
                self._once(plan.config_id, f"until decided: {_label(plan)} against "
                           f"{_label(base)}: {what} (look {look.look})")
                continue
            if len(c) >= most or self.asked.get(plan.config_id, 0) >= most:
                self._once(plan.config_id, f"until decided: {_label(plan)}: still open "
                           f"after {most} repetitions (max_repetitions): {what}")
                continue
            open_.append((plan, what))
        if not open_:
            self._once("end", "until decided: every comparison with "
                       f"{_label(base)} is answered or at max_repetitions")
            return []
        want = [p.config_id for p, _ in open_]
        longest = max(len(rates[p.config_id]) for p, _ in open_)
        if len(rates[base.config_id]) <= longest and len(rates[base.config_id]) < most:
            want.insert(0, base.config_id)
        now = time.monotonic()
        spent, budget = now - self.started, self.rule.budget_s
        since, runs = self.last or (self.started, sum(len(r) for r in rates.values()))
        per_run = (now - since) / runs if runs else 0.0
        if budget is not None and spent + per_run * len(want) > budget:
            why = (f"spent ({spent:.0f} s)" if spent >= budget else
                   f"nearly spent ({spent:.0f} s; the next round of {len(want)} run(s) "
                   f"would take about {per_run * len(want):.0f} s)")
            self._once("budget", f"until decided: budget {budget:.0f} s {why}; "
                       f"{len(open_)} comparison(s) still open: "
                       + "; ".join(f"{_label(p)}: {w}" for p, w in open_))
            return []
        left = f", {budget - spent:.0f} s of budget left" if budget is not None else ""
        self.say(f"until decided: {len(open_)} of {len(others)} comparison(s) with "
                 f"{_label(base)} open{left}: "
                 + "; ".join(f"{_label(p)}: {w}" for p, w in open_))
        self.last = (now, len(want))
        for cid in want:
            self.asked[cid] = self.asked.get(cid, 0) + 1
        return want

    def _once(self, key: str, line: str) -> None:
        if ("said", key) not in self.told:
            self.told.add(("said", key))
            self.say(line)
