"""`harness compare`'s table as text: aligned, Markdown or JSON, each interval that
bounds nothing said so, each verdict with the failed checks it rests on
(`harness.analysis.compare` makes the table)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from harness.analysis.data.formats import bound_text, human, ratio_text, unbounded
from harness.analysis.stats import multiplicity


def verdict_text(row: dict[str, Any]) -> str:
    """The verdict, qualified by the failed checks it rests on ("worse, but the client
    was saturated in 3 of 5 base runs")."""
    return f"{row['verdict']}, but {row['caveat']}" if row.get("caveat") else row["verdict"]


def _fmt(x: object) -> str:
    return human(x)


#: The unit of each metric, shown in the text and Markdown tables.
UNITS = {"throughput": "ops/s", "latency_mean": "ms", "latency_p50": "ms",
         "latency_p99": "ms"}


def render(table: pd.DataFrame, by: Sequence[str], fmt: str,
           family: multiplicity.Family | None = None) -> str:
    """``table``: aligned text; ``markdown``: a pipe table; ``json``: a list of rows. The
    ratio's column states the level its intervals were printed at, and `family` (how the
    rows were judged) is said under the table."""
    if fmt == "json":
        return table.to_json(orient="records", indent=2)
    rows = []
    for r in table.to_dict("records"):
        def ci(v: float, lo: float, hi: float, n: int, text: Any = _fmt) -> str:
            if math.isnan(lo):
                return ""
            if unbounded(v, lo, hi):  # an interval that bounds nothing says so
                return f" [{bound_text(n, v, lo, hi)}]"
            return f" [{text(lo)}, {text(hi)}]"

        unit = UNITS.get(r["metric"])
        nb, nc = (int(r[k]) if isinstance(r[k], int | float) and r[k] == r[k] else 0
                  for k in ("n_base", "n_cand"))
        rows.append([*(_fmt(r[k]) for k in by),
                     f"{r['metric']} ({unit})" if unit else r["metric"],
                     _fmt(r["base"]) + ci(r["base"], r["base_ci_low"], r["base_ci_high"], nb),
                     _fmt(r["cand"]) + ci(r["cand"], r["cand_ci_low"], r["cand_ci_high"], nc),
                     ratio_text(r["ratio"]) + ci(r["ratio"], r["ratio_ci_low"],
                                                 r["ratio_ci_high"], min(nb, nc),
                                                 lambda x: ratio_text(x)[:-1]),
                     _p(r["p"]), _p(r["p_adjusted"]),
                     f"{r['n_base']}/{r['n_cand']}", verdict_text(r)])
    levels = table["ratio_ci_level"].dropna().unique() if len(table) else []
    level = multiplicity.fmt_level(float(levels[0])) if len(levels) == 1 else "adjusted"
    name = table["adjustment"].iloc[0] if len(table) else multiplicity.NAMES[
        multiplicity.FDR]
    head = [*by, "metric", "base [95% CI]", "cand [95% CI]", f"cand/base [{level} CI]",
            "p", f"p ({'BH' if name == multiplicity.NAMES[multiplicity.FDR] else name})",
            "runs", "verdict"]
    # Why a row has no test (one run, too few ops beyond a percentile), once per reason.
    notes = sorted({f"{r['metric']}: {r['test'][len('none: '):]}"
                    for r in table.to_dict("records") if r["test"].startswith("none: ")})
    if family is not None:
        notes.insert(0, family.sentence("rows"))
    if fmt == "markdown":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines + [""] + [f"- {n}" for n in notes] if notes else lines)
    if fmt != "table":
        raise ValueError(f"format must be table, json or markdown, not {fmt!r}")
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [head, *rows]]
    return "\n".join(lines + [f"note: {n}" for n in notes])


def _p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.3g}"
