"""The report's "Summary of findings": the page after the contents that says what the
measurements answered, gathered from the answers each section published.

Per experiment: the question it asked (its spec's `description`), then the answer: its
decided verdicts, headline claims first; for an experiment of one configuration, its
headline figures with their intervals; for a comparison of two trees, its rows' ratios
pooled; where nothing was decided, what it would take. Each links to where it is argued.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

from harness.analysis.data.formats import bound_text, num, unbounded
from harness.analysis.sections.answers import Answer, Estimate, Question
from harness.analysis.stats import planning, verdict
from harness.report.render import Section

#: The most decided answers of one experiment on the summary page; the rest are counted.
FINDINGS_PER_SECTION = 3
_esc = html.escape


def _ratio_text(a: Answer) -> str:
    if not all(map(math.isfinite, (a.ratio, a.low, a.high, a.level))):
        return f"{a.ratio:.3g}×" if math.isfinite(a.ratio) else "—"
    if unbounded(a.ratio, a.low, a.high):
        return f"{a.ratio:.3g}× [{bound_text(None, a.ratio, a.low, a.high)}]"
    return f"{a.ratio:.3g}× [{a.low:.3g}, {a.high:.3g}] ({a.level:.1%})".replace(".0%)", "%)")


def _estimate_text(e: Estimate) -> str:
    unit = "" if e.unit in ("", "%") else e.unit if e.unit == "×" else f" {e.unit}"
    if e.unit == "%":
        return f"{e.value:.2%}".replace(".00%", "%")
    fmt = (lambda v: f"{v:.3g}") if e.unit == "×" else num(4)
    value = fmt(e.value)
    if not (math.isfinite(e.low) and math.isfinite(e.high)):
        return f"{value}{unit}"
    if unbounded(e.value, e.low, e.high):
        return f"{value}{unit} ({bound_text(e.runs or None, e.value, e.low, e.high)})"
    return f"{value}{unit} [{fmt(e.low)}, {fmt(e.high)}]"


def _checks_line(experiment: str, counts: Mapping[str, Mapping[str, int]]) -> str:
    """The checks that failed in `experiment` (configurations each), or that none did."""
    if experiment not in counts:
        return ""
    failed = counts[experiment]
    if not failed:
        return "no measurement check failed in its configurations"
    return "measurement checks that failed: " + "; ".join(
        f"{check} in {n} configuration{'s' if n != 1 else ''}"
        for check, n in sorted(failed.items(), key=lambda kv: -kv[1]))


def _question_html(q: Question, href: str) -> list[str]:
    """The question as asked, then the figures that answer it where there is no verdict
    to give (one configuration; two trees' pooled ratios)."""
    out = []
    if q.question:
        out.append(f'<p class="question">Asked: <em>{_esc(q.question)}</em></p>')
    if q.estimates:
        interval = ("95% interval over runs" if q.experiment else
                    "interval: the rows' own, averaged on the log scale")
        rows = "".join(f"<tr><td>{_esc(e.name)}</td><td>{_esc(_estimate_text(e))}</td></tr>"
                       for e in q.estimates)
        out.append(f'<table class="kv-table findings"><thead><tr><th><a href="{_esc(href)}">'
                   f"answer</a></th><th>value [{interval}]</th></tr></thead>"
                   f"<tbody>{rows}</tbody></table>")
    if q.qualified_by:
        out.append(f'<p class="more">Qualified by: {_esc(q.qualified_by)}.</p>')
    return out


def findings_html(sections: Sequence[Section]) -> str:
    """The "Summary of findings" page: per section that published answers or questions,
    and per experiment in it, the question and its answer (module docstring); the checks
    that qualify it (a row's own where the section names them per configuration, else
    the experiment's, once); the inconclusive ones and the rest counted."""
    counts: dict[str, dict[str, int]] = {}
    for s in sections:
        counts.update(s.check_counts)
    parts = ["<p>Per experiment, the question it asked and the answer: each verdict that is "
             "not inconclusive with its ratio (the first named against the second) and the "
             "interval printed beside it in its section, at its family's adjusted level; "
             "an experiment of one configuration, its figures with their intervals. Each "
             "links to where it is argued. The overview counts the measurement checks, the "
             "appendix lists them per configuration.</p>"]
    shown = 0
    for s in sections:
        if s.failed or s.not_run or not (s.answers or s.questions):
            continue
        parts.append(f'<h2><a href="#{_esc(s.anchor)}">{_esc(s.title)}</a></h2>')
        questions = {q.experiment: (q, href) for q, href in s.questions}
        experiments = list(dict.fromkeys([*(q.experiment for q, _ in s.questions),
                                          *(a.experiment for a, _ in s.answers)]))
        for exp in experiments:
            shown += _experiment_html(parts, exp, s, questions.get(exp), counts)
    if not shown:
        parts.append("<p>No comparison reached a verdict: every one the sections make is "
                     "inconclusive (too few runs to tell) or there is none; the sections "
                     "give the estimates with their intervals.</p>")
    return "\n".join(parts)


def _experiment_html(parts: list[str], exp: str, s: Section,
                     asked: tuple[Question, str] | None,
                     counts: Mapping[str, Mapping[str, int]]) -> int:
    """One experiment's question and answer into `parts`; 1 if it answered something
    (a decided verdict, or figures), else 0."""
    mine = [(a, href) for a, href in s.answers if a.experiment == exp]
    decided = [(a, href) for a, href in mine if not a.inconclusive]
    own = any(a.caveat for a, _ in decided)
    head = (f"Experiment <code>{_esc(exp)}</code>" if exp else
            "The comparison" if asked is not None else "Its experiments")
    line = "" if own or (asked and asked[0].qualified_by) else _checks_line(exp, counts)
    said = (f"{len(mine)} comparison{'s' if len(mine) != 1 else ''}, {len(decided)} decided"
            if mine else "one configuration" if asked and asked[0].estimates else "")
    parts.append(f'<p class="exp">{head}' + (f": {said}" if said else "")
                 + (f"; {_esc(line)}" if line else "") + ".</p>")
    if asked is not None:
        parts.extend(_question_html(*asked))
    if not decided:
        if mine and asked is not None and asked[0].would_take:
            parts.append(f'<p class="more">{_esc(asked[0].would_take)}</p>')
        elif mine:  # a study's: its answers carry their intervals, not their runs
            took = planning.times_text([(a.ratio, a.low, a.high) for a, _ in mine],
                                       verdict.DEFAULT_THRESHOLD)
            if took:
                parts.append(f'<p class="more">{_esc(took)}</p>')
        return int(bool(asked and asked[0].estimates))
    rows = "".join(
        f'<tr><td><a href="{_esc(href)}">{_esc(a.claim)}</a></td>'
        f'<td class="verdict {_esc(a.verdict.replace(" ", "-"))}">{_esc(a.verdict)}'
        f"</td><td>{_esc(_ratio_text(a))}</td>"
        + (f"<td>{_esc(a.caveat)}</td>" if own else "") + "</tr>"
        for a, href in decided[:FINDINGS_PER_SECTION])
    qualified = "<th>qualified by</th>" if own else ""
    parts.append('<table class="kv-table findings"><thead><tr><th>compared</th>'
                 f"<th>verdict</th><th>ratio [interval]</th>{qualified}</tr>"
                 f"</thead><tbody>{rows}</tbody></table>")
    more = len(decided) - FINDINGS_PER_SECTION
    undecided = len(mine) - len(decided)
    if more > 0 or undecided:
        said_more = ([f"{more} more decided"] if more > 0 else []) + (
            [f"{undecided} inconclusive (too few runs to tell)"] if undecided else [])
        parts.append(f'<p class="more">In the section also: {"; ".join(said_more)}.</p>')
    return 1
