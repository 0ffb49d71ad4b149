"""A run's labels: string key/value pairs that say what was measured beyond the spec.

`harness run SPEC --label commit=$(git rev-parse --short HEAD) --label version=7.2.4`, or
a spec's ``labels:`` mapping, writes them into each manifest (schema 4). They name the
points of a history (`harness history --by commit`), keep runs of different builds from
counting as duplicates of each other (`harness.analysis.data.pooling`), and reach the runs
table as ``label_<key>`` columns (`harness summary --by label_commit`).

Labels are read back from trees anyone may have written: keys are short plain names, values
short printable text, so a label can become a column, a figure's tick or an HTML cell
without surprises (`label_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from harness.text import printable

#: A label's key: a plain name that can prefix a column (``label_commit``).
KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
MAX_VALUE_CHARS = 200
MAX_LABELS = 32
#: The runs table's column for a label: ``label_<key>``.
COLUMN_PREFIX = "label_"


def label_problem(key: object, value: object) -> str | None:
    """Why `key`: `value` is not a label, or None."""
    if not isinstance(key, str) or not KEY_RE.match(key):
        return (f"label key {printable(str(key))!r} is not a plain name (a letter, then up "
                "to 63 letters, digits and _.-)")
    if not isinstance(value, str):
        return (f"label {key}: the value must be text, not {type(value).__name__} "
                f"(quote it: {key}: \"{value}\")")
    if not value or len(value) > MAX_VALUE_CHARS:
        return f"label {key}: the value must be 1 to {MAX_VALUE_CHARS} characters"
    if printable(value) != value or "\n" in value or "\t" in value:
        return f"label {key}: the value {printable(value)!r} holds control characters"
    return None


def labels_problems(labels: object) -> list[str]:
    """Every problem of a labels mapping (empty: fine)."""
    if not isinstance(labels, Mapping):
        return [f"labels must be a mapping of name -> text, not {type(labels).__name__}"]
    problems = [p for k, v in labels.items() if (p := label_problem(k, v))]
    if len(labels) > MAX_LABELS:
        problems.append(f"{len(labels)} labels: at most {MAX_LABELS}")
    return problems


def parse_label(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (as `--label` takes it) -> (key, value); raises ValueError naming
    what is wrong."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"--label {printable(text)!r}: expected KEY=VALUE, e.g. "
                         "--label commit=abc1234")
    if problem := label_problem(key.strip(), value):
        raise ValueError(f"--label {printable(text)!r}: {problem}")
    return key.strip(), value


def labels_key(labels: Mapping[str, Any] | None) -> str:
    """One hashable text for a labels mapping (pooling's duplicate key): sorted JSON."""
    return json.dumps(dict(labels or {}), sort_keys=True)
