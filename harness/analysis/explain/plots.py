"""The forest plot of `harness explain`: each term's effect (a ratio, log axis) with its
interval, p50 beside p99, the significant ones filled."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from harness.analysis.explain.analysis import Term
from harness.analysis.figures.style import WIDTH, new_figure, style
from harness.analysis.stats.multiplicity import fmt_level
from harness.text import printable

_TICKS = (0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0,
          10.0)
_WIDE = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
_COLOURS = {0.5: "#2874a6", 0.9: "#7d3c98", 0.99: "#c0392b", 0.999: "#784212"}


def _wrap(name: str, width: int = 28) -> str:
    """A long term on two lines at its interaction's colon."""
    return name.replace(":", ":\n", 1) if len(name) > width and ":" in name else name


def forest(terms: Sequence[Term], *, title: str) -> Figure:
    names = list(dict.fromkeys(t.term for t in terms))
    quantiles = sorted({t.quantile for t in terms})
    fig = new_figure(WIDTH, max(2.4, 0.36 * len(names) + 1.4))
    ax = fig.axes[0]
    with style():
        ax.axvline(1.0, color="#333333", linewidth=0.8, zorder=1)
        y0 = np.arange(len(names))[::-1].astype(float)
        step = 0.6 / max(len(quantiles), 1)
        for k, q in enumerate(quantiles):
            mine = {t.term: t for t in terms if t.quantile == q}
            ys, est, lo, hi, sig = [], [], [], [], []
            for i, n in enumerate(names):
                if n in mine:
                    t = mine[n]
                    ys.append(y0[i] + 0.3 - step * (k + 0.5))
                    est.append(t.effect_ratio)
                    lo.append(t.ci_low)
                    hi.append(t.ci_high)
                    sig.append(t.significant)
            e, lw, hg, s = (np.array(v, float) for v in (est, lo, hi, sig))
            colour = _COLOURS.get(q, "#555555")
            ax.errorbar(e, ys, xerr=[e - lw, hg - e], fmt="none", ecolor=colour,
                        capsize=2, elinewidth=1)
            s = s.astype(bool)
            ax.plot(e[s], np.array(ys)[s], "o", color=colour, markersize=5,
                    label=f"p{q * 100:g} (filled: significant)")
            ax.plot(e[~s], np.array(ys)[~s], "o", mfc="white", color=colour, markersize=5)
        ax.set_xscale("log")
        # Ratios read as ratios: plain ticks where they fall, no powers of ten.
        lo_x, hi_x = ax.get_xlim()
        dense = hi_x / lo_x < 4  # a narrow range gets every step, a wide one 1-2-5
        ticks = [t for t in (_TICKS if dense else _WIDE) if lo_x <= t <= hi_x]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yticks(y0, [_wrap(printable(n)) for n in names], fontsize=7.5)
        level = fmt_level(terms[0].ci_level) if terms else "95%"
        ax.set_xlabel(f"ratio on the quantile, {level} CI (log scale; < 1: faster)",
                      fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=4,
                  frameon=False)
    return fig
