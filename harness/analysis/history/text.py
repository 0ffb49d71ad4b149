"""`harness history`'s outputs: an aligned table, JSON, and Markdown for a pull request.

Every name printed (experiments, configurations, labels, run ids) was read from a tree
anyone may have written: terminal text goes through `printable`, Markdown cells are
escaped (`md_cell`), so neither a control sequence nor a link or HTML tag gets through.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from harness.analysis.history.changes import History
from harness.analysis.stats.multiplicity import fmt_level
from harness.text import printable

UNITS = {"throughput_ops_s": "ops/s", "latency_mean_ms": "ms", "latency_p50_ms": "ms",
         "latency_p99_ms": "ms"}
#: Left-out runs listed one by one, at most (the JSON lists all).
LIST_LEFT_OUT = 10
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def md_cell(text: object) -> str:
    """Text safe in a Markdown table cell: printable, Markdown's specials escaped (no
    link, emphasis, HTML or column break can come from a name)."""
    return _MD_SPECIAL.sub(r"\\\1", printable(str(text)).replace("\n", " "))


def _g(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3g}"


def _reason_kind(reason: str) -> str:
    """A reason's kind, to count by: up to its colon, and never half a parenthesis ("no
    label commit (labels in this tree: ...)" counts as "no label commit")."""
    kind = reason.split(":", 1)[0]
    return kind.split(" (", 1)[0] if kind.count("(") != kind.count(")") else kind


def head(h: History) -> str:
    metrics = sorted({s.metric for s in h.series})
    by = f", points by label {h.by}" if h.by else ", one point per run"
    found = (f"{len(h.changes)} change(s)" if h.changes else "no change point")
    effect = f" of at least {h.min_effect:.0%}" if h.min_effect else ""
    untested = len(h.family.p_adjusted) - h.family.m
    why = (f" ({untested} more could not be tested: a side had too few ops for an "
           "interval of its percentile, or one run)") if untested else ""
    return (f"{len({s[:3] for s in _keys(h)})} series x {len(metrics)} metric(s) over "
            f"{h.points} point(s){by}: {found}{effect}. "
            f"Candidates: {h.family.sentence('candidate changes')}{why}. "
            f"A change needs {h.min_runs} runs on each side.")


def _keys(h: History) -> list[tuple[str, str, str, str]]:
    return [(s.experiment, s.config_id, s.op, s.metric) for s in h.series]


def left_out_lines(h: History) -> list[str]:
    """A line of counts by reason, then the first `LIST_LEFT_OUT` runs with theirs."""
    if not h.left_out:
        return []
    kinds = Counter(_reason_kind(r["reason"]) for r in h.left_out)
    lines = [f"left out: {len(h.left_out)} run(s) ("
             + ", ".join(f"{n} {printable(k)}" for k, n in kinds.most_common()) + ")"]
    for r in h.left_out[:LIST_LEFT_OUT]:
        lines.append(f"  {printable(r['run_id'])} ({printable(r['experiment'])}): "
                     f"{printable(r['reason'])}")
    if len(h.left_out) > LIST_LEFT_OUT:
        lines.append(f"  ... and {len(h.left_out) - LIST_LEFT_OUT} more (--format json "
                     "lists every one)")
    return lines


def _rows(h: History, cell: type[str] | object = printable) -> list[list[str]]:
    rows = []
    for c in h.changes:
        ci = (f"{_g(c.ratio)}x [{_g(c.ci_low)}, {_g(c.ci_high)}]")
        rows.append([cell(c.experiment), cell(c.config_id), cell(c.op),  # type: ignore[operator]
                     f"{c.metric} ({UNITS[c.metric]})", cell(c.point),  # type: ignore[operator]
                     c.started_utc[:19], c.direction, ci, f"{c.q:.2g}",
                     f"{c.runs_before}/{c.runs_after}"])
    return rows


def _columns(h: History) -> list[str]:
    level = fmt_level(h.family.level) if h.family.m else "95%"
    return ["experiment", "config", "op", "metric", h.by or "first run", "started (UTC)",
            "change", f"after/before [{level} CI]", "q", "runs before/after"]


def render(h: History, fmt: str = "table") -> str:
    """``table``, ``json`` or ``markdown`` (see the module doc)."""
    if fmt == "json":
        return json.dumps(h.as_dict(), indent=2, default=str)
    lines = [head(h)]
    if fmt == "markdown":
        lines = [lines[0], ""]  # no name from the tree in it (`by` is a plain name)
        if h.changes:
            cols = _columns(h)
            lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            lines += ["| " + " | ".join(r) + " |" for r in _rows(h, md_cell)]
            lines.append("")
        lines += [f"- {md_cell(x.strip())}" for x in left_out_lines(h)]
        return "\n".join(lines).rstrip() + "\n"
    if fmt != "table":
        raise ValueError(f"format must be table, json or markdown, not {fmt!r}")
    if h.changes:
        rows = [_columns(h), *_rows(h)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                  for r in rows]
    lines += left_out_lines(h)
    lines += [f"skipped: {printable(s)}" for s in h.skipped]
    return "\n".join(lines)


_SHORT = {"throughput_ops_s": "throughput", "latency_mean_ms": "mean", "latency_p50_ms": "p50",
          "latency_p99_ms": "p99"}


def report_text(h: History) -> str:
    """The report's Markdown for one experiment's history: a sentence, a compact table
    of the changes (the heading names the experiment), what was left out, and how the
    figure under it reads."""
    lines = [head(h), ""]
    if h.changes:
        level = fmt_level(h.family.level)
        cols = ["configuration", "op", "metric", h.by or "run", "change",
                f"after/before [{level} CI]", "q"]
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for c in h.changes:
            lines.append("| " + " | ".join([
                md_cell(c.config_id), md_cell(c.op), _SHORT[c.metric], md_cell(c.point),
                c.direction, f"{_g(c.ratio)}x [{_g(c.ci_low)}, {_g(c.ci_high)}]",
                f"{c.q:.2g}"]) + " |")
        lines.append("")
    lines += [f"- {md_cell(x.strip())}" for x in left_out_lines(h)]
    lines += ["", "The figure: each point's pooled value with its 95% interval over its "
              "runs (latencies on a log axis), the level of each stretch between changes "
              "as a line, and each change as a dashed line (red: worse, green: better) "
              "with its ratio after/before and interval."]
    return "\n".join(lines)
