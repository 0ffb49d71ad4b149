"""Short sentences for the report, written from the statistics (never eyeballed).

A sentence claims a difference only when the test says so at the chosen alpha, and
always names the test, the p-value and the number of samples; a non-significant result
keeps its CI and says whether it rules out a change beyond ±5% (`verdict.decide`), e.g.

    memcache reads are 3.4× faster than datastore reads (95% CI 3.1–3.7×,
    Welch t on log ratio p < 0.001, n = 10 sets each).
    LRU and FIFO show no significant difference (ratio 1.01×, 95% CI 0.98–1.04×, within
    ±5%; Welch t on log ratio p = 0.41, n = 10 sets each).
    LRU vs FIFO is inconclusive: too few runs to tell (ratio 1.10×, 95% CI 0.85–1.42×, ...).
"""

from __future__ import annotations

import math

from harness.analysis import verdict
from harness.analysis.stats import Comparison, Estimate, MultiComparison


def fmt_p(p: float) -> str:
    """``p < 0.001`` below a thousandth, else two significant digits (``p = 0.041``)."""
    if math.isnan(p):
        return "p = n/a"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}" if p < 0.01 else f"p = {p:.2f}"


def fmt_ratio(x: float) -> str:
    """3.4×, 1.03×, 22× — enough digits to tell neighbours apart, no more."""
    if math.isnan(x):
        return "n/a"
    if x < 2:
        return f"{x:.2f}×"
    if x < 10:
        return f"{x:.1f}×"
    return f"{x:.0f}×"


def _range(low: float, high: float) -> str:
    return f"{fmt_ratio(low).rstrip('×')}–{fmt_ratio(high)}"


def fmt_n(n_a: int, n_b: int | None = None, unit: str = "runs") -> str:
    if n_b is None:
        return f"n = {n_a} {unit}"
    if n_a == n_b:
        return f"n = {n_a} {unit} each"
    return f"n = {n_a} and {n_b} {unit}"


def fmt_estimate(est: Estimate, unit: str = "", digits: int = 3) -> str:
    """``2.08 ms (95% CI 1.90–2.40)``."""
    level = round(est.confidence * 100)
    space = " " if unit else ""
    value = f"{est.value:.{digits}g}{space}{unit}"
    if math.isnan(est.low):
        return value
    return f"{value} ({level}% CI {est.low:.{digits}g}–{est.high:.{digits}g})"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def compare_sentence(
    c: Comparison,
    label_a: str,
    label_b: str,
    *,
    unit: str = "runs",
    lower_is_better: bool = True,
    better: str = "faster",
    p_adjusted: float | None = None,
) -> str:
    """One sentence on `c` (a comparison of a vs b): which is better, by how much, or neither.

    The outcome is `Comparison.verdict` (with `p_adjusted`, e.g. Holm's, in place of the
    raw p when given): a non-significant result says whether its CI rules out changes
    beyond ±5% (no significant difference) or not (inconclusive), and keeps its CI.

    With `lower_is_better` (latencies) the ratio reported is slow/fast; otherwise
    (throughputs) high/low. `better` is the comparative used (faster, higher, cheaper).
    """
    p = c.p_value if p_adjusted is None else p_adjusted
    p_text = fmt_p(p) if p_adjusted is None else f"Holm-adjusted {fmt_p(p)}"
    evidence = f"{c.test} {p_text}, {fmt_n(c.n_a, c.n_b, unit)}"
    if not p < c.alpha:
        return _cap(not_significant_sentence(c, label_a, label_b, evidence))
    a_wins = (c.mean_a < c.mean_b) if lower_is_better else (c.mean_a > c.mean_b)
    # The ratio is reported as winner-over-loser in the quantity's own direction, ≥ 1.
    r = c.ratio
    if lower_is_better == a_wins:
        value, low, high = 1 / r.value, 1 / r.high, 1 / r.low
    else:
        value, low, high = r.value, r.low, r.high
    winner, loser = (label_a, label_b) if a_wins else (label_b, label_a)
    # "memcache reads (hits) are": judge number by the noun before any parenthesis.
    verb = "are" if winner.split(" (")[0].endswith("s") else "is"
    level = round(r.confidence * 100)
    sentence = (f"{winner} {verb} {fmt_ratio(value)} {better} than {loser} "
                f"({level}% CI {_range(low, high)}, {evidence})")
    if low <= 1.0:
        # A rank test can find a consistent difference while a few slow runs widen the
        # interval of the ratio of means past 1; say so instead of leaving a puzzle.
        sentence += ("; the difference is consistent across runs, but the ratio of means "
                     "is uncertain enough that its interval includes 1")
    return _cap(sentence + ".")


def not_significant_sentence(c: Comparison, label_a: str, label_b: str, evidence: str,
                             threshold: float = verdict.DEFAULT_THRESHOLD) -> str:
    """"No significant difference" only where the CI excludes changes beyond `threshold`;
    otherwise "too few runs to tell", with the estimate and its CI either way."""
    r = c.ratio
    level = round(r.confidence * 100)
    ci = (f"ratio {fmt_ratio(r.value)}" if math.isnan(r.low) else
          f"ratio {fmt_ratio(r.value)}, {level}% CI {_range(r.low, r.high)}")
    outcome = verdict.decide(r.low, r.high, 1.0, ratio=r.value, higher_is_better=True,
                             threshold=threshold)
    if outcome == verdict.NO_DIFFERENCE:
        return (f"{label_a} and {label_b} show no significant difference ({ci}, within "
                f"±{threshold:.0%}; {evidence}).")
    return (f"{label_a} vs {label_b} is inconclusive: too few runs to tell ({ci}, which "
            f"allows a difference of more than {threshold:.0%}; {evidence}).")


def multi_sentence(
    m: MultiComparison, what: str, *, unit: str = "runs", labels: dict[str, str] | None = None
) -> str:
    """The omnibus result, then which pairs differ after Holm correction."""
    labels = labels or {}
    sizes = set(m.n.values())
    n_text = f"n = {sizes.pop()} {unit} each" if len(sizes) == 1 else (
        "n = " + ", ".join(str(v) for v in m.n.values()) + f" {unit}"
    )
    head = f"{m.test} {fmt_p(m.p_value)}, {n_text}"
    if not m.significant:
        return _cap(f"the {what} do not differ significantly ({head}).")
    same = [
        (labels.get(c.name_a, c.name_a), labels.get(c.name_b, c.name_b), p)
        for c, p in zip(m.pairwise, m.p_holm, strict=True)
        if p >= m.alpha
    ]
    text = f"the {what} differ significantly ({head})"
    if not same:
        return _cap(text + "; every pair differs after Holm correction.")
    pairs = "; ".join(f"{a} vs {b}, Holm-adjusted {fmt_p(p)}" for a, b, p in same)
    return _cap(text + f"; all pairs differ after Holm correction except {pairs}.")


def not_run_sentence(study: str, raw_dir: str) -> str:
    return f"No raw results for `{study}` under `{raw_dir}`."
