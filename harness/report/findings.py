"""The report's "Summary of findings": the page after the contents that says what the
measurements answered, gathered from the answers each section published."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

from harness.analysis.sections.answers import Answer
from harness.report.render import Section

#: The most decided answers of one experiment on the summary page; the rest are counted.
FINDINGS_PER_SECTION = 3


def _ratio_text(a: Answer) -> str:
    if not all(map(math.isfinite, (a.ratio, a.low, a.high, a.level))):
        return f"{a.ratio:.3g}×" if math.isfinite(a.ratio) else "—"
    return f"{a.ratio:.3g}× [{a.low:.3g}, {a.high:.3g}] ({a.level:.1%})".replace(".0%)", "%)")


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


def findings_html(sections: Sequence[Section]) -> str:
    """The "Summary of findings" page: per section that published answers, and per
    experiment in it, its decided verdicts (up to `FINDINGS_PER_SECTION`, in the
    section's order: its headline claims first) with ratio and interval, each linking to
    the part of the section that argues it; the checks that qualify them (a row's own
    where the section names them per configuration, else the experiment's, once); the
    inconclusive ones and the rest counted."""
    counts: dict[str, dict[str, int]] = {}
    for s in sections:
        counts.update(s.check_counts)
    esc = html.escape
    parts = ["<p>Each verdict that is not inconclusive, with its ratio (the first named "
             "against the second) and the interval printed beside it in its section, at "
             "its family's adjusted level; each links to where it is argued. The overview "
             "counts the measurement checks, the appendix lists them per configuration.</p>"]
    shown = 0
    for s in sections:
        if s.failed or s.not_run or not s.answers:
            continue
        parts.append(f'<h2><a href="#{esc(s.anchor)}">{esc(s.title)}</a></h2>')
        experiments = list(dict.fromkeys(a.experiment for a, _ in s.answers))
        for exp in experiments:
            mine = [(a, href) for a, href in s.answers if a.experiment == exp]
            decided = [(a, href) for a, href in mine if not a.inconclusive]
            own = any(a.caveat for a, _ in decided)
            head = f"Experiment <code>{esc(exp)}</code>" if exp else "Its experiments"
            line = "" if own else _checks_line(exp, counts)
            parts.append(f'<p class="exp">{head}: {len(mine)} comparison'
                         f"{'s' if len(mine) != 1 else ''}, {len(decided)} decided"
                         + (f"; {esc(line)}" if line else "") + ".</p>")
            if not decided:
                continue
            shown += 1
            rows = "".join(
                f'<tr><td><a href="{esc(href)}">{esc(a.claim)}</a></td>'
                f'<td class="verdict {esc(a.verdict.replace(" ", "-"))}">{esc(a.verdict)}'
                f"</td><td>{esc(_ratio_text(a))}</td>"
                + (f"<td>{esc(a.caveat)}</td>" if own else "") + "</tr>"
                for a, href in decided[:FINDINGS_PER_SECTION])
            qualified = "<th>qualified by</th>" if own else ""
            parts.append('<table class="kv-table findings"><thead><tr><th>compared</th>'
                         f"<th>verdict</th><th>ratio [interval]</th>{qualified}</tr>"
                         f"</thead><tbody>{rows}</tbody></table>")
            more = len(decided) - FINDINGS_PER_SECTION
            undecided = len(mine) - len(decided)
            if more > 0 or undecided:
                said = ([f"{more} more decided"] if more > 0 else []) + (
                    [f"{undecided} inconclusive (too few runs to tell)"] if undecided else [])
                parts.append(f'<p class="more">In the section also: {"; ".join(said)}.</p>')
    if not shown:
        parts.append("<p>No comparison reached a verdict: every one the sections make is "
                     "inconclusive (too few runs to tell) or there is none; the sections "
                     "give the estimates with their intervals.</p>")
    return "\n".join(parts)
