"""The answers a report section gives, for the report's "Summary of findings" page.

A study's notebook states its verdicts in its own words; `publish` also hands them to
`harness report` as records in an output's metadata (the report shows nothing there,
JupyterLab a plain-text list), and the report gathers every section's records onto one
page after the contents, each linking to where it is argued. The overview publishes the
measurement checks that failed per experiment the same way (`publish_checks`), so each
answer can name the checks that qualify it.

What comes back from an executed notebook is read with `read` and `read_checks`: field
by field, with anything of the wrong type dropped (the report escapes every string).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from harness.analysis.stats import verdict as verdicts

#: Output metadata key of a section's answers (a list of `Answer` records).
MARKER = "harness_answers"
#: Output metadata key of the failed checks per experiment: {experiment: {check: count}}.
CHECKS_MARKER = "harness_check_counts"
#: Output metadata key of the questions a section answers (a list of `Question` records).
QUESTIONS_MARKER = "harness_questions"


@dataclass(frozen=True)
class Answer:
    """One verdict a section states: what was compared, the verdict, the ratio with its
    interval (at `level`, the family's adjusted level where it is one of many), the
    experiment it rests on, the checks that qualify it in words (empty: see the
    experiment's), and the heading of the part of the section that argues it."""

    claim: str
    verdict: str
    ratio: float
    low: float
    high: float
    level: float
    experiment: str = ""
    caveat: str = ""
    heading: str = ""

    @property
    def inconclusive(self) -> bool:
        return self.verdict == verdicts.INCONCLUSIVE


@dataclass(frozen=True)
class Estimate:
    """A headline figure with its interval (NaN bounds: none), its unit, and the runs
    it rests on."""

    name: str
    value: float
    low: float
    high: float
    unit: str = ""
    runs: int = 0


@dataclass(frozen=True)
class Question:
    """What an experiment asked (its spec's `description`; a comparison of two trees
    asks whether the candidate changed anything) and the part of the answer that is not
    a verdict: the headline figures of an experiment of one configuration (or a
    comparison's ratios over all its rows), the checks that qualify them, and, where no
    comparison was decided, what it would take."""

    experiment: str
    question: str = ""
    estimates: tuple[Estimate, ...] = ()
    qualified_by: str = ""
    would_take: str = ""
    heading: str = ""


def from_claim(claim_text: str, claim: Any, *, experiment: str = "", caveat: str = "",
               heading: str = "") -> Answer:
    """An `Answer` from a judged claim of the kit's one rule (`multiplicity.Claim`)."""
    return Answer(claim_text, claim.verdict, float(claim.ratio), float(claim.low),
                  float(claim.high), float(claim.level), experiment, caveat, heading)


def _plain(answers: Sequence[Answer]) -> str:
    decided = [a for a in answers if not a.inconclusive]
    lines = [f"{len(decided)} of {len(answers)} comparisons decided "
             "(in the report's summary of findings):"]
    lines += [f"  {a.claim}: {a.verdict}, {a.ratio:.3g}x [{a.low:.3g}, {a.high:.3g}]"
              for a in decided]
    return "\n".join(lines)


def publish(answers: Iterable[Answer], questions: Iterable[Question] = ()) -> Any:
    """The display object that hands `answers` (and `questions`) to the report (a
    plain-text list in JupyterLab; nothing in the report's section itself)."""
    from IPython.display import DisplayObject

    items = list(answers)
    asked = [{**_record(q), "estimates": [_record(e) for e in q.estimates]}
             for q in questions]

    class _Answers(DisplayObject):
        def _repr_pretty_(self, p: Any, cycle: bool) -> None:
            p.text(_plain(items))

        def _repr_mimebundle_(self, include: Any = None, exclude: Any = None
                              ) -> tuple[dict[str, str], dict[str, Any]]:
            return ({"text/plain": _plain(items)},
                    {MARKER: [_record(a) for a in items], QUESTIONS_MARKER: asked})

    return _Answers(data="")


def _record(a: Any) -> dict[str, Any]:
    # JSON has no NaN: an interval that could not be drawn travels as null.
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(a).items()}


def publish_checks(counts: Mapping[str, Mapping[str, int]]) -> Any:
    """The display object that hands the failed checks per experiment (configurations
    per check) to the report's summary of findings."""
    from IPython.display import DisplayObject

    data = {str(e): {str(c): int(n) for c, n in cs.items()} for e, cs in counts.items()}

    class _Counts(DisplayObject):
        def _repr_mimebundle_(self, include: Any = None, exclude: Any = None
                              ) -> tuple[dict[str, str], dict[str, Any]]:
            return ({"text/plain": ""}, {CHECKS_MARKER: data})

    return _Counts(data="")


_FLOATS = {"ratio", "low", "high", "level"}


def read(value: Any) -> list[Answer]:
    """The answers in an output's metadata; a record with a field of the wrong type is
    left out (it came from a file, not from this code)."""
    out = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        kwargs: dict[str, Any] = {}
        for f in fields(Answer):
            v = item.get(f.name, "" if f.name not in _FLOATS else None)
            if f.name in _FLOATS:
                if v is None:
                    v = math.nan
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    break
                kwargs[f.name] = float(v)
            elif isinstance(v, str):
                kwargs[f.name] = v
            else:
                break
        else:
            out.append(Answer(**kwargs))
    return out


def read_checks(value: Any) -> dict[str, dict[str, int]]:
    """The failed checks per experiment in an output's metadata, entries of the wrong
    type left out."""
    if not isinstance(value, dict):
        return {}
    return {e: {c: n for c, n in cs.items() if isinstance(c, str) and isinstance(n, int)
                and not isinstance(n, bool)}
            for e, cs in value.items() if isinstance(e, str) and isinstance(cs, dict)}


def _fields(cls: Any, item: Any, floats: set[str], ints: set[str] = frozenset()
            ) -> dict[str, Any] | None:
    """`item`'s fields of the dataclass `cls` (strings and numbers only, of the right
    kind), or None where one is of the wrong type."""
    if not isinstance(item, dict):
        return None
    out: dict[str, Any] = {}
    for f in fields(cls):
        v = item.get(f.name)
        if f.name in floats:
            v = math.nan if v is None else v
            if isinstance(v, bool) or not isinstance(v, int | float):
                return None
            out[f.name] = float(v)
        elif f.name in ints:
            if not isinstance(v, int) or isinstance(v, bool):
                return None
            out[f.name] = v
        elif f.type in ("str", str):
            if v is None:
                continue  # the record's default
            if not isinstance(v, str):
                return None
            out[f.name] = v[:2000]
    return out


def read_questions(value: Any) -> list[Question]:
    """The questions in an output's metadata, read as `read` reads answers: a record or
    an estimate with a field of the wrong type is left out."""
    out = []
    for item in value if isinstance(value, list) else []:
        got = _fields(Question, item, set())
        if got is None:
            continue
        estimates = []
        for e in item.get("estimates") or [] if isinstance(item.get("estimates"), list) else []:
            fe = _fields(Estimate, e, {"value", "low", "high"}, {"runs"})
            if fe is not None and isinstance(fe.get("name"), str):
                estimates.append(Estimate(**fe))
        out.append(Question(**got, estimates=tuple(estimates[:12])))
    return out
