"""Short sentences for the report, written from the statistics (never eyeballed).

One wording rule for every finding: a sentence says "better/worse" (or the quantity's own
comparative: faster, slower, higher) only when the finding's family judged it so
(`multiplicity.judge`); otherwise it gives the estimate with its adjusted interval and
says "no significant difference" (the interval lies within ±5%), "not significant after
adjustment" (the raw p alone was below q) or "inconclusive". Every interval is printed at
the level the family's rule sets, and the level is stated, e.g.

    Memcache reads are 3.4× faster than datastore reads (99% CI 3.0–3.8×; Welch t on log
    ratio p < 0.001, BH-adjusted p < 0.001, n = 10 sets each).
    LRU and FIFO show no significant difference (ratio 1.01×, 98.3% CI 0.98–1.04×, within
    ±5%; Welch t on log ratio p = 0.41, BH-adjusted p = 0.82, n = 10 sets each).
    LRU vs FIFO is inconclusive: too few runs to tell (ratio 1.10×, 98.3% CI 0.85–1.42×, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from harness.analysis.data.formats import bound_text, unbounded
from harness.analysis.stats import multiplicity, verdict
from harness.analysis.stats.comparisons import Comparison, Estimate, MultiComparison


def plural(n: object, noun: str) -> str:
    """``1 server``, ``3 servers``: a count in words."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def fmt_p(p: float) -> str:
    """``p < 0.001`` below a thousandth, else two significant digits (``p = 0.041``)."""
    if math.isnan(p):
        return "p = n/a"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}" if p < 0.01 else f"p = {p:.2f}"


def p_cell(p: float) -> str:
    """A p-value for a table cell: ``0.041``, ``< 0.001``, ``–``."""
    return "–" if math.isnan(p) else fmt_p(p).removeprefix("p = ").removeprefix("p ")


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


def ci_text(level: float, low: float, high: float, suffix: str = "×") -> str:
    """``98.3% CI 1.2–1.5×``: an interval with the level it was printed at."""
    return f"{multiplicity.fmt_level(level)} CI {_range(low, high)}" if suffix == "×" \
        else f"{multiplicity.fmt_level(level)} CI {low:.3g}–{high:.3g}{suffix}"


def p_pair(claim: multiplicity.Claim) -> str:
    """``p = 0.003, BH-adjusted p = 0.012``: a claim's raw and adjusted p side by side."""
    short = "BH" if claim.method == multiplicity.FDR else multiplicity.NAMES[claim.method]
    return f"{fmt_p(claim.p)}, {short}-adjusted {fmt_p(claim.p_adjusted)}"


def evidence_text(claim: multiplicity.Claim, n_a: int, n_b: int, unit: str = "runs") -> str:
    """``Welch t on log ratio p = 0.003, BH-adjusted p = 0.012, n = 5 runs each``."""
    return f"{claim.test.test} {p_pair(claim)}, {fmt_n(n_a, n_b, unit)}"


def outcome_text(claim: multiplicity.Claim, threshold: float = verdict.DEFAULT_THRESHOLD
                 ) -> str:
    """What a claim that is not better/worse is called: "no significant difference",
    "not significant after adjustment" (its raw p alone was below q), or "inconclusive"."""
    if claim.verdict == verdict.NO_DIFFERENCE:
        return f"no significant difference (within ±{threshold:.0%})"
    if claim.significant_unadjusted:
        return "not significant after adjustment"
    return "inconclusive"


def claim_sentence(
    claim: multiplicity.Claim,
    label_a: str,
    label_b: str,
    *,
    n: tuple[int, int],
    unit: str = "runs",
    lower_is_better: bool = True,
    better: str = "faster",
    threshold: float = verdict.DEFAULT_THRESHOLD,
) -> str:
    """One sentence on a judged claim about a/b (`claim.ratio` = a / b, `n` its runs).

    Better/worse (as `better`, e.g. "faster") only with the family's verdict, the ratio
    given winner over loser (≥ 1) with its adjusted interval; otherwise the estimate
    a/b with its adjusted interval and `outcome_text`. With `lower_is_better` (latencies)
    a lower a wins; otherwise (throughputs) a higher a.
    """
    evidence = evidence_text(claim, n[0], n[1], unit)
    r, low, high = claim.ratio, claim.low, claim.high
    if not claim.significant:
        if math.isnan(low):
            return _cap(f"{label_a} vs {label_b} is inconclusive (ratio {fmt_ratio(r)}; no "
                        f"interval: {claim.test.test}, {fmt_n(n[0], n[1], unit)}).")
        ci = (f"ratio {fmt_ratio(r)}, {bound_text(min(n), r, low, high)}"
              if unbounded(r, low, high) else
              f"ratio {fmt_ratio(r)}, {ci_text(claim.level, low, high)}")
        outcome = outcome_text(claim, threshold)
        if claim.verdict == verdict.NO_DIFFERENCE:
            return _cap(f"{label_a} and {label_b} show no significant difference ({ci}, "
                        f"within ±{threshold:.0%}; {evidence}).")
        if outcome == "inconclusive":
            outcome += ": too few runs to tell"
        return _cap(f"{label_a} vs {label_b} is {outcome} ({ci}, which allows a difference "
                    f"of more than {threshold:.0%}; {evidence}).")
    a_wins = (r < 1) if lower_is_better else (r > 1)
    if lower_is_better == a_wins:  # report winner over loser, >= 1
        value, low, high = 1 / r, 1 / high, 1 / low
    else:
        value = r
    winner, loser = (label_a, label_b) if a_wins else (label_b, label_a)
    # "memcache reads (hits) are": judge number by the noun before any parenthesis.
    verb = "are" if winner.split(" (")[0].endswith("s") else "is"
    return _cap(f"{winner} {verb} {fmt_ratio(value)} {better} than {loser} "
                f"({ci_text(claim.level, low, high)}; {evidence}).")


def claims_text(items: Sequence[tuple[str, str, str, multiplicity.Claim, tuple[int, int]]],
                **sentence: object) -> list[str]:
    """`claim_sentence` for each (head, label a, label b, claim, runs) that is decided or
    shown equivalent; the inconclusive ones together in one sentence at the end (six
    identical paragraphs saying "inconclusive: too few runs to tell" told a reader
    nothing six times), each with its ratio and interval."""
    out, open_, level = [], [], ""
    for head, a, b, claim, n in items:
        if not claim.significant and outcome_text(claim) == "inconclusive":
            r, low, high = claim.ratio, claim.low, claim.high
            ci = ("no interval" if math.isnan(low) else bound_text(min(n), r, low, high)
                  if unbounded(r, low, high) else _range(low, high).rstrip("×"))
            level = level or multiplicity.fmt_level(claim.level)
            open_.append(f"{head + ', ' if head else ''}{a} vs {b} {fmt_ratio(r)} [{ci}]: "
                         "inconclusive")
        else:
            out.append(f"{head}: " * bool(head) + claim_sentence(claim, a, b, n=n,
                                                                 **sentence))  # type: ignore[arg-type]
    if open_:
        out.append(f"Too few runs to tell in {len(open_)} of {len(items)} (ratios with their "
                   f"{level} CIs, each allowing a difference beyond the threshold): "
                   + "; ".join(open_) + ".")
    return out


def compare_sentence(
    c: Comparison,
    label_a: str,
    label_b: str,
    *,
    unit: str = "runs",
    lower_is_better: bool = True,
    better: str = "faster",
) -> str:
    """`claim_sentence` for one comparison on its own (a family of one: its 95% CI and
    raw p); findings made together are judged together and worded by `claim_sentence`."""
    if c.log_ratio is None:
        raise ValueError(f"{c.test} gives no log-ratio test to judge; use the default test")
    claim = multiplicity.judge([c.log_ratio], True, q=c.alpha)[0]
    return claim_sentence(claim, label_a, label_b, n=(c.n_a, c.n_b), unit=unit,
                          lower_is_better=lower_is_better, better=better)


def claims_table(judged: multiplicity.Judged, names: Sequence[str],
                 runs: Sequence[tuple[int, int]] | None = None, *,
                 higher_is_better: Sequence[bool] | bool = False,
                 threshold: float = verdict.DEFAULT_THRESHOLD,
                 words: tuple[str, str] = (verdict.BETTER, verdict.WORSE)) -> pd.DataFrame:
    """A family's claims as the findings word them, one row each: `names` (``a / b``),
    the ratio a/b and its interval at the family's level (the header says which), the
    test, raw and adjusted p, runs (`runs`: per claim, a's and b's), and the verdict or,
    without one, `outcome_text`: the table beside the sentences, with the same numbers.
    `words`: what a significant a is called against b (e.g. faster, slower)."""
    hib = ([higher_is_better] * len(judged) if isinstance(higher_is_better, bool)
           else list(higher_is_better))
    level = multiplicity.fmt_level(judged.family.level)
    short = "BH" if judged.family.method == multiplicity.FDR else judged.family.name
    rows = []
    for i, (c, name) in enumerate(zip(judged.claims, names, strict=True)):
        if c.significant:
            up = c.ratio > 1
            outcome = words[0] if up == hib[i] else words[1]
        else:
            outcome = outcome_text(c, threshold)
        rows.append({
            "comparison": name, "ratio": fmt_ratio(c.ratio),
            f"{level} CI": "–" if math.isnan(c.low) else _range(c.low, c.high),
            "test": c.test.test, "p": p_cell(c.p), f"p ({short})": p_cell(c.p_adjusted),
            **({"runs": f"{runs[i][0]} / {runs[i][1]}"} if runs is not None else {}),
            "verdict": outcome})
    return pd.DataFrame(rows)


def family_sentence(judged: multiplicity.Judged, what: str) -> str:
    """``These 10 comparisons are one family: Benjamini-Hochberg at q = 0.05 ...``."""
    return (f"These {len(judged)} {what} are one family: "
            f"{judged.family.sentence(what)}.")


def multi_sentence(
    m: MultiComparison, what: str, *, unit: str = "runs", labels: dict[str, str] | None = None
) -> str:
    """The omnibus result, then which pairs differ after adjustment, each with its ratio
    and adjusted interval."""
    labels = labels or {}
    sizes = set(m.n.values())
    n_text = f"n = {sizes.pop()} {unit} each" if len(sizes) == 1 else (
        "n = " + ", ".join(str(v) for v in m.n.values()) + f" {unit}"
    )
    head = f"{m.test} {fmt_p(m.p_value)}, {n_text}"
    text = (f"the {what} differ significantly ({head})" if m.significant else
            f"the {what} are not shown to differ by the omnibus test ({head})")
    if m.judged is None:
        return _cap(text + ".")
    pairs = "; ".join(
        f"{labels.get(c.name_a, c.name_a)}/{labels.get(c.name_b, c.name_b)} "
        f"{fmt_ratio(j.ratio)} ({_range(j.low, j.high)}): "
        f"{'significant' if j.significant else outcome_text(j)}"
        for c, j in zip(m.pairwise, m.judged.claims, strict=True))
    return _cap(f"{text}; pairwise ({m.judged.family.sentence('pairs')}): {pairs}.")


def not_run_sentence(study: str, raw_dir: str) -> str:
    return f"No raw results for `{study}` under `{raw_dir}`."
