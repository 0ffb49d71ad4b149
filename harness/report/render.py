"""One executed notebook -> one report section: its markdown and outputs as HTML (code
hidden), its headings numbered for the contents, and what its outputs hand the report
beside their content (markers: not run, omitted, failed parts, the appendix, and the
published answers and check counts of `harness.analysis.sections.answers`)."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from harness.analysis.sections import answers as answers_mod
from harness.analysis.sections.answers import Answer, Question
from harness.report import sanitize

NOT_RUN_MARKER = "harness_not_run"  # == harness.analysis.sections.display.NOT_RUN_MARKER
OMIT_MARKER = "harness_omit_section"  # == harness.analysis.sections.display.OMIT_MARKER
FAILED_PART_MARKER = "harness_failed_part"  # == sections.display.FAILED_PART_MARKER
APPENDIX_MARKER = "harness_appendix"  # == harness.analysis.sections.display.APPENDIX_MARKER


@dataclass
class Section:
    """One executed notebook, rendered."""

    name: str
    title: str
    anchor: str
    body: str
    subsections: list[tuple[str, str]] = field(default_factory=list)
    failed: str | None = None
    not_run: bool = False
    #: An optional section with nothing to show: left out of the report.
    omit: bool = False
    #: Parts of the section that could not be drawn (one experiment of several), each
    #: shown where it would have been; the rest of the section stands.
    failed_parts: list[str] = field(default_factory=list)
    #: The verdicts the section published (`harness.analysis.sections.answers`), each with the
    #: link to the part of the section that argues it.
    answers: list[tuple[Answer, str]] = field(default_factory=list)
    #: The questions it answers, each with the link to its part of the section.
    questions: list[tuple[Question, str]] = field(default_factory=list)
    #: Failed measurement checks per experiment (configurations per check), if published.
    check_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Outputs the section moves to the report's appendix (rendered HTML).
    appendix: list[str] = field(default_factory=list)


_ANCHOR_LINK = re.compile(r'<a class="anchor-link" href="#[^"]*">.*?</a>')
_HEADING = re.compile(r"<h([1-3])(?: id=\"[^\"]*\")?>(.*?)</h\1>", re.S)


def _markdown(text: str) -> str:
    # A markdown table (the comparison's) is laid out as the kit's own tables are: a
    # bare <table> kept its words at 10 pt, and its last columns ran off the page.
    return _ANCHOR_LINK.sub("", sanitize.markdown(text)).replace(
        "<table>", '<table class="kv-table">')


def _output_html(output: dict) -> tuple[str, bool]:
    """HTML for one output, and whether it carries the not-run marker."""
    kind = output.get("output_type")
    if kind == "error":
        return (f'<div class="failed"><strong>Error:</strong> '
                f'{html.escape(output.get("ename", ""))}: '
                f'{html.escape(output.get("evalue", ""))}</div>'), False
    if kind not in ("display_data", "execute_result"):
        return "", False  # stdout/stderr (warnings, logs) are not report content
    data = output.get("data", {})
    meta = output.get("metadata", {})
    not_run = NOT_RUN_MARKER in json.dumps(meta)
    if "text/html" in data:
        return f'<div class="output">{_joined(data["text/html"])}</div>', not_run
    if "image/svg+xml" in data:
        return f'<figure>{sanitize.svg_image(_joined(data["image/svg+xml"]))}</figure>', not_run
    if "image/png" in data:
        b64 = _joined(data["image/png"]).replace("\n", "")
        return f'<figure><img src="data:image/png;base64,{b64}" alt=""></figure>', not_run
    if "text/markdown" in data:
        return f'<div class="output">{_markdown(_joined(data["text/markdown"]))}</div>', not_run
    return "", not_run  # text/plain alone is a repr, not content


def _marker(meta: Any, key: str) -> Any:
    """`key`'s value in an output's metadata, at its top or under a MIME type (IPython
    files a display object's metadata under its type)."""
    if not isinstance(meta, dict):
        return None
    if key in meta:
        return meta[key]
    return next((v[key] for v in meta.values() if isinstance(v, dict) and key in v), None)


def _joined(value: str | list[str]) -> str:
    return "".join(value) if isinstance(value, list) else value


def render_notebook(path: Path, index: int, failed: str | None = None) -> Section:
    """A section from an executed notebook: markdown and outputs, code hidden."""
    nb = nbformat.read(path, as_version=4)
    if not failed and any(OMIT_MARKER in json.dumps(o.get("metadata", {}))
                          for c in nb.cells for o in c.get("outputs", [])):
        return Section(path.stem, path.stem, f"sec-{index}", "", omit=True)
    parts: list[str] = []
    not_run = False
    failed_parts: list[str] = []
    published: list[Answer] = []
    asked: list[Question] = []
    check_counts: dict[str, dict[str, int]] = {}
    appendix: list[str] = []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "parameters" in tags or "injected-parameters" in tags or "report-hide" in tags:
            continue
        if cell.cell_type == "markdown":
            parts.append(_markdown(cell.source))
        elif cell.cell_type == "code":
            for output in cell.get("outputs", []):
                meta = output.get("metadata", {})
                what = _marker(meta, FAILED_PART_MARKER)
                if what:
                    failed_parts.append(str(what))
                published += answers_mod.read(_marker(meta, answers_mod.MARKER))
                asked += answers_mod.read_questions(_marker(meta, answers_mod.QUESTIONS_MARKER))
                check_counts.update(answers_mod.read_checks(
                    _marker(meta, answers_mod.CHECKS_MARKER)))
                text, marker = _output_html(output)
                if _marker(meta, APPENDIX_MARKER):
                    appendix.append(text)
                    continue
                parts.append(text)
                not_run = not_run or marker
        if not_run:
            break  # the study did not run: the rest of its section would be empty headings
    body = "\n".join(p for p in parts if p)
    anchor = f"sec-{index}"
    title = path.stem
    subsections: list[tuple[str, str]] = []
    counter = 0

    def number(match: re.Match) -> str:
        nonlocal title, counter
        level, text = int(match.group(1)), match.group(2)
        if level == 1:
            title = re.sub(r"<[^>]+>", "", text)
            return ""  # the section title is rendered by the template
        counter += 1
        sub_id = f"{anchor}-{counter}"
        if level == 2:
            subsections.append((sub_id, re.sub(r"<[^>]+>", "", text)))
        return f'<h{level + 1} id="{sub_id}">{text}</h{level + 1}>'

    # Whatever the outputs held: only the report's tags, attributes and URLs are kept.
    body = _HEADING.sub(number, sanitize.clean(body))
    if failed:
        body += (f'<div class="failed"><strong>This section failed to execute:</strong> '
                 f"{html.escape(failed)}</div>")
    # An answer links to the part of the section under its heading, else to the section.
    by_heading = {_plain_heading(text): sub_id for sub_id, text in subsections}
    linked = [(a, f"#{by_heading.get(_plain_heading(a.heading), anchor)}")
              for a in published]
    questions = [(q, f"#{by_heading.get(_plain_heading(q.heading), anchor)}")
                 for q in asked]
    return Section(path.stem, title, anchor, body, subsections, failed, not_run,
                   failed_parts=failed_parts, answers=linked, questions=questions,
                   check_counts=check_counts,
                   appendix=[sanitize.clean(a) for a in appendix if a])


def _plain_heading(text: str) -> str:
    """A heading's words, whether written in Markdown (`code`) or rendered (<code>)."""
    text = html.unescape(re.sub(r"<[^>]+>", "", text)).replace("`", "")
    return " ".join(text.split()).casefold()
