"""`harness explain`'s outputs: an aligned table, JSON, and one sentence per significant
term written from its numbers (the report's "what drives the tail")."""

from __future__ import annotations

import json
import math

from harness.analysis.explain.analysis import Explained, Term
from harness.analysis.stats.multiplicity import fmt_level
from harness.text import finite_data, printable


def _p(q: float) -> str:
    return f"p{q * 100:g}"


def _g(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3g}"


#: Longest name or value the table and the words print (JSON keeps them whole): a
#: grid value of a megabyte is one line of a megabyte otherwise.
MAX_SHOWN = 120


def shown(text: object) -> str:
    """`text` safe to print, clipped to `MAX_SHOWN` characters with a count of the rest."""
    s = str(text)
    return printable(s if len(s) <= MAX_SHOWN else
                     f"{s[:MAX_SHOWN]}... ({len(s) - MAX_SHOWN:,} more characters)")


def _name(t: Term) -> str:
    alias = f" (aliased with {', '.join(map(shown, t.aliased_with))})" if t.aliased_with else ""
    return shown(t.term) + alias


def head(e: Explained) -> str:
    factors = ", ".join(f"{shown(k)} ({len(v):,} values, baseline "
                        f"{shown(v[0])})" for k, v in e.factors.items())
    return (f"{printable(e.experiment)}: {e.runs} runs in {e.configurations} "
            f"configurations; factors {factors}. Each run's own quantile, on a log scale, "
            f"regressed on the factors; SEs from {e.variance}. "
            f"{e.family.sentence('terms')}.")


def render(e: Explained, fmt: str = "table") -> str:
    """``table`` or ``json``."""
    if fmt == "json":
        # Strict JSON: an estimate that is not finite (no runs to estimate from) is null.
        return json.dumps(finite_data(e.as_dict()), indent=2, default=str, allow_nan=False)
    if fmt != "table":
        raise ValueError(f"format must be table or json, not {fmt!r}")
    level = fmt_level(e.family.level) if e.family.m else "95%"
    rows = [["quantile", "term", f"effect (ratio) [{level} CI]", "q", "df", ""]]
    for t in e.terms:
        rows.append([_p(t.quantile), _name(t),
                     f"{_g(t.effect_ratio)}x [{_g(t.ci_low)}, {_g(t.ci_high)}]",
                     f"{t.q:.2g}", f"{t.df:.1f}", "significant" if t.significant else ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head(e)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    for name, with_ in e.aliases:
        lines.append(f"note: {shown(name)} is not estimated on its own: " + (
            f"the runs cannot tell it from {shown(with_[0])} (aliased)" if with_ else
            "it is a combination of the terms estimated (configurations are missing)"))
    if e.left_out:
        lines.append(f"left out: {len(e.left_out)} run(s)")
        lines += [f"  {shown(r['run_id'])}: {printable(r['reason'])}"
                  for r in e.left_out[:10]]
    lines += [f"note: {printable(n)}" for n in e.notes]
    return "\n".join(lines)


def sentence(t: Term) -> str:
    """One significant term in words, from its numbers."""
    level = fmt_level(t.ci_level)
    ci = f"{_g(t.ci_low)}-{_g(t.ci_high)}, {level} CI"
    change = ("multiplies" if t.kind != "interaction" else
              "further multiplies")
    what = _p(t.quantile)
    if t.kind == "interaction":
        a, b = t.of or t.term.split(":", 1)  # a Term of its own making may lack `of`
        return (f"{shown(a)} together with {shown(b)} {change} {what} by "
                f"{_g(t.effect_ratio)} ({ci}) beyond what each does alone"
                + (f" (aliased with {', '.join(map(shown, t.aliased_with))})"
                   if t.aliased_with else "") + ".")
    return (f"{shown(t.term)} {change} {what} by {_g(t.effect_ratio)} ({ci}), averaged "
            "over the other factors.")
