"""Numbers read from imported files: impossible ones are an ImportFormatError naming where
they were read, for every importer, never Python's own ValueError or OverflowError."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.errors import ImportFormatError
from harness.importers.numbers import MAX_OPS, amount, check_stated, count, whole
from tests.importers.test_fuzz_importers import SAMPLES, _outcome

WHERE = "f.txt:7"
#: More digits than Python's int() converts (sys.int_info.default_max_str_digits).
HUGE = "9" * 4301


@pytest.mark.parametrize(("value", "message"), [
    ("-5", "ops -5 is negative"),
    ("0", "ops 0 is below 1"),
    (-5.0, "ops -5 is negative"),
    (2.5, "ops 2.5 is not a whole number"),
    (float("nan"), "ops nan is not a whole number"),
    (float("inf"), "ops inf is not a whole number"),
    ("1.5", "ops 1.5 is not a whole number"),
    ("٣", "is not a whole number"),  # a digit to str.isdigit, not to a count
    (HUGE, "ops 999999999999... (4301 characters) has more digits than any measurement"),
    (str(MAX_OPS + 1), f"is more than {MAX_OPS:,}"),
    (True, "is not a number"),
])
def test_impossible_counts_name_the_place(value: object, message: str) -> None:
    with pytest.raises(ImportFormatError, match=re.escape(message)) as info:
        count(value, WHERE, "ops")  # type: ignore[arg-type]
    assert str(info.value).startswith(f"{WHERE}: ")


def test_counts_that_are_fine() -> None:
    assert count("5012", WHERE, "ops") == 5012
    assert count(5012.0, WHERE, "ops") == 5012
    assert count("0", WHERE, "ops", least=0) == 0
    assert whole("0" * 30 + "7", WHERE, "x") == 7  # leading zeros are not magnitude


@pytest.mark.parametrize(("value", "positive", "message"), [
    ("-0.5", False, "t -0.5 is negative"),
    ("nan", False, "t nan is not a finite number"),
    ("1e400", False, "t 1e400 is not a finite number"),
    (HUGE, False, "is not a finite number"),
    (10**400, False, "is not a finite number"),  # an int no float holds
    ("0", True, "t 0 is zero"),
    ("abc", False, "t abc is not a number"),
])
def test_impossible_amounts(value: object, positive: bool, message: str) -> None:
    with pytest.raises(ImportFormatError, match=re.escape(message)):
        amount(value, WHERE, "t", positive=positive)  # type: ignore[arg-type]


def test_amounts_that_are_fine() -> None:
    assert amount("0", WHERE, "t") == 0.0
    assert amount(2241, WHERE, "t", positive=True) == 2241.0


@pytest.mark.parametrize(("figures", "message"), [
    ({"p50": 5.0, "p99": 0.001}, "p50 5 is above p99 0.001"),
    ({"min": 2.0, "p50": 1.0}, "min 2 is above p50 1"),
    ({"p99.9": 3.0, "max": 2.0}, "p99.9 3 is above max 2"),
    ({"min": 1.0, "max": 2.0, "avg": 3.0}, "avg 3 is outside min 1 .. max 2"),
    ({"p50": -1.0}, "p50 -1.0 is negative"),
    ({"max": float("inf")}, "max inf is not a finite number"),
])
def test_stated_figures_out_of_order_or_impossible(figures: dict, message: str) -> None:
    with pytest.raises(ImportFormatError, match=re.escape(message)):
        check_stated(figures, WHERE, "set")


def test_stated_figures_name_the_offending_line() -> None:
    with pytest.raises(ImportFormatError, match=r"^f\.txt:9: "):
        check_stated({"p50": 5.0, "p99": 1.0}, WHERE, "read",
                     places={"p50": "f.txt:8", "p99": "f.txt:9"})
    # Equal neighbours are fine (values printed rounded), and so is every real shape.
    check_stated({"min": 0.1, "p50": 0.1, "p99": 2.0, "max": 2.0, "avg": 0.5}, WHERE, "x")


_NUMBER = re.compile(r"\d+")
#: Lines tried per file: each is a parse, and the seed documents are long.
LINES_PER_FILE = 60


def _lines_with_numbers(text: str) -> list[int]:
    found = [i for i, line in enumerate(text.splitlines(keepends=True))
             if _NUMBER.search(line)]
    step = max(1, len(found) // LINES_PER_FILE)
    return found[::step]


@pytest.mark.parametrize(("fmt", "sample"), SAMPLES,
                         ids=[f"{fmt}:{p.name}" for fmt, p in SAMPLES])
def test_a_4301_digit_integer_anywhere_is_a_clean_error_or_ignored(
        fmt: str, sample: Path, tmp_path: Path) -> None:
    """Each (sampled) line with a number gets a 4301-digit one instead: the import fails
    with an ImportFormatError naming the file, in good time, or parses into runs that
    hold nothing impossible (the number was in a line it does not use)."""
    text = sample.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    outcomes = []
    for i in _lines_with_numbers(text):
        changed = _NUMBER.sub(HUGE, lines[i], count=1)
        data = "".join([*lines[:i], changed, *lines[i + 1:]]).encode()
        outcome, detail = _outcome(fmt, tmp_path / sample.name, data)
        outcomes.append((i + 1, outcome, detail))
    assert [o for o in outcomes if o[1] not in ("clean errors", "parsed")] == []
