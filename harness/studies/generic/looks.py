"""An experiment run with `until: decided`: the looks it took, seen (issue 52 item 5).

`harness run` leaves `<experiment>/decided.json` beside the runs (`harness.run.decide`):
per comparison of a configuration with the first, its state at every look, the runs a
side and the repeated confidence interval of the throughput ratio. This part of the
experiment's section says how the rounds ended and draws each comparison's intervals
look by look, with the equivalence margin, so a reader sees where each was decided and
how many runs it took. The file is read back as untrusted input: a field missing or of
the wrong kind leaves the part out with one line saying so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.figures.style import legend_outside, new_figure, publish
from harness.analysis.sections.display import markdown
from harness.results.decided import DECIDED_FILE, read_decided
from harness.text import printable

#: Comparisons drawn in one figure (the rest are counted in the words).
MOST_DRAWN = 8


def parts(raw_dir: Path, experiment: str, figures_dir: Path | None) -> list[Any] | None:
    """The words and the figure, or None when the experiment has no decided.json."""
    data = read_decided(Path(raw_dir) / experiment)
    if data is None:
        return None
    try:
        comps = [_comparison(c) for c in data["comparisons"]]
        words = _words(data, comps)
    except (KeyError, TypeError, ValueError):
        return [markdown(f"`{DECIDED_FILE}` of `{printable(experiment)}` is not one "
                         "`until: decided` wrote; its looks are left out.")]
    fig = _figure(experiment, comps, float(data["equivalence"]))
    return [markdown(words), publish(fig, f"{experiment}-looks", figures_dir)]


def _comparison(c: dict[str, Any]) -> dict[str, Any]:
    looks = [(int(k["n_cand"]), float(k["ratio"]), _num(k["low"]), _num(k["high"]))
             for k in c["looks"]]
    return {"label": printable(str(c["configuration"]))[:60],
            "base": printable(str(c["base"]))[:60], "state": printable(str(c["state"])),
            "looks": looks}


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _words(data: dict[str, Any], comps: list[dict[str, Any]]) -> str:
    states: dict[str, int] = {}
    for c in comps:
        states[c["state"]] = states.get(c["state"], 0) + 1
    tally = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
    runs = max((c["looks"][-1][0] for c in comps if c["looks"]), default=0)
    return (f"**Stopped when answered** (`until: decided`): {len(comps)} comparison(s) of "
            f"a configuration with the first, judged after every round by a "
            f"{printable(str(data['method']))} test on the runs' throughput, "
            f"{printable(str(data['family']))} over the comparisons at "
            f"{float(data['alpha']):g} (each interval below is valid at every look, not "
            f"only at the last); equivalent: within ±{float(data['equivalence']):.0%}. "
            f"Ended: {printable(str(data['ended']))}; {tally}; at most {runs} runs a "
            f"configuration (the first round {int(data['first'])}).")


def _figure(experiment: str, comps: list[dict[str, Any]], margin: float) -> Any:
    fig = new_figure()
    ax = fig.axes[0]
    ax.axhspan(1 / (1 + margin), 1 + margin, color="#dddddd", zorder=0,
               label=f"within ±{margin:.0%} (equivalent)")
    ax.axhline(1, color="#555555", lw=0.8, zorder=1)
    drawn = comps[:MOST_DRAWN]
    offsets = np.linspace(-0.2, 0.2, len(drawn)) if len(drawn) > 1 else [0.0]
    for c, dx in zip(drawn, offsets, strict=True):
        pts = [(n + dx, r, lo, hi) for n, r, lo, hi in c["looks"]
               if r > 0 and lo > 0 and hi > 0 and math.isfinite(hi)]
        if not pts:
            continue
        x, r, lo, hi = (np.array(v) for v in zip(*pts, strict=True))
        ax.errorbar(x, r, yerr=[r - lo, hi - r], marker="o", ms=3, lw=0.8, capsize=2,
                    label=f"{c['label']} vs {c['base']}: {c['state']}")
    ax.set_yscale("log")
    ax.set_xlabel("runs per configuration at the look")
    ax.set_ylabel("throughput ratio, configuration / first\n(repeated 95% CI, log scale)")
    more = f" (first {MOST_DRAWN} of {len(comps)})" if len(comps) > MOST_DRAWN else ""
    ax.set_title(f"{printable(experiment)[:60]}: each look's interval{more}")
    legend_outside(ax)
    return fig
