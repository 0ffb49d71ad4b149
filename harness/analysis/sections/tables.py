"""Tables as clean HTML for notebooks and the report (no pandas styling noise)."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence

import pandas as pd

# The formatters live below the data's summaries; tables.num etc. are what callers use.
from harness.analysis.data.formats import (  # noqa: F401
    Formatter,
    bound_text,
    human,
    num,
    pct,
    ratio_text,
    unbounded,
)


def to_html(
    df: pd.DataFrame,
    *,
    caption: str | None = None,
    formats: Mapping[str, Formatter] | None = None,
    headers: Mapping[str, str] | None = None,
    numeric: Sequence[str] | None = None,
    css_class: str = "kv-table",
) -> str:
    """An HTML table; numeric columns right-aligned, values formatted per column."""
    formats = dict(formats or {})
    headers = dict(headers or {})
    numeric = set(numeric if numeric is not None else df.select_dtypes("number").columns)
    if df.empty:
        # Say so explicitly: an empty table in a report reads like a rendering bug.
        cols = list(df.columns) or [""]
        df = pd.DataFrame([["(none)"] + [""] * (len(cols) - 1)], columns=cols)
        numeric = set()
    out = [f'<table class="{css_class}">']
    if caption:
        out.append(f"<caption>{html.escape(caption)}</caption>")
    out.append("<thead><tr>")
    for col in df.columns:
        cls = ' class="num"' if col in numeric else ""
        out.append(f"<th{cls}>{html.escape(headers.get(col, str(col)))}</th>")
    out.append("</tr></thead><tbody>")
    default = num()
    for row in df.itertuples(index=False):
        out.append("<tr>")
        for col, value in zip(df.columns, row, strict=True):
            fmt = formats.get(col, default if col in numeric else _text)
            text = fmt(value)
            long = len(max(text.split(), key=len, default="")) > LONG_TOKEN
            cls = " ".join(c for c, on in (("num", col in numeric), ("long", long)) if on)
            out.append(f"<td{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}>"
                       f"{breakable(text) if long else html.escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


#: A word longer than this (a run id, a grid point) gets break points (`breakable`).
LONG_TOKEN = 24
_BREAK_AFTER = re.compile(r"([,=/_\-.:;&])")


def breakable(text: str) -> str:
    """`text` as HTML with a line-break opportunity (``<wbr>``) after each separator of
    its long words, so a table of run ids wraps them at their commas and dashes instead of
    growing past the page (short words never break)."""
    return "".join(html.escape(part) + ("<wbr>" if _BREAK_AFTER.fullmatch(part) else "")
                   for part in _BREAK_AFTER.split(text) if part)


def _text(v: object) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return str(v)


def show(df: pd.DataFrame, **kwargs):
    """`to_html` wrapped for display in a notebook."""
    from IPython.display import HTML  # notebooks only

    return HTML(to_html(df, **kwargs))


def ci_column(table: pd.DataFrame, value: str = "mean", low: str = "ci_low",
              high: str = "ci_high", digits: int = 3, suffix: str = "",
              runs: str = "runs") -> pd.Series:
    """``2.08 (1.90–2.40)`` strings from a value and its CI columns; an interval that
    bounds nothing (`formats.unbounded`) is ``2.08 (too few runs to bound (3 runs; about
    40 would))``, its runs from the `runs` column where the table has one."""
    f = num(digits)

    def one(row: pd.Series) -> str:
        if isinstance(row[low], float) and math.isnan(row[low]):
            return f"{f(row[value])}{suffix}"
        if unbounded(row[value], row[low], row[high]):
            n = int(row[runs]) if runs in row and not pd.isna(row[runs]) else None
            return f"{f(row[value])}{suffix} ({bound_text(n, row[value], row[low], row[high])})"
        return f"{f(row[value])}{suffix} ({f(row[low])}–{f(row[high])})"

    return table.apply(one, axis=1)


def ratio_table_html(table: pd.DataFrame, group: str, *, unit: str = "ms",
                     caption: str | None = None, labels: Mapping[str, str] | None = None) -> str:
    """Seed 001's table done properly: mean per op with CI, ratio to the fastest with CI."""
    labels = labels or {}
    shown = pd.DataFrame({
        group: [labels.get(str(v), str(v)) for v in table[group]],
        "n": table["n"],
        "mean": ci_column(table, suffix=""),
        "ratio": [
            "1 (baseline)" if b else s
            for b, s in zip(table["baseline"], ci_column(table, "ratio", "ratio_low",
                                                         "ratio_high", suffix="×"), strict=True)
        ],
        "method": table["method"],
    })
    numeric = ["n", "mean", "ratio"]
    levels = table.loc[~table["baseline"], "ratio_level"].dropna().unique() \
        if "ratio_level" in table.columns else []
    from harness.analysis.stats.multiplicity import fmt_level

    ratio_head = (f"ratio to fastest ({fmt_level(float(levels[0]))} CI)" if len(levels) == 1
                  else "ratio to fastest (95% CI)")
    if "seed_ms" in table.columns:
        # The historical baseline beside ours, when the study has one.
        shown.insert(4, "seed_ms", table["seed_ms"].to_numpy())
        numeric.append("seed_ms")
    return to_html(
        shown,
        caption=caption,
        headers={group: group, "n": "sets (n)", "mean": f"mean time per op [{unit}] (95% CI)",
                 "ratio": ratio_head, "method": "CI method",
                 "seed_ms": f"seed 001 [{unit}]"},
        numeric=numeric,
    )
