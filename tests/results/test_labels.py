"""Labels: what a key and a value may be, `--label KEY=VALUE`, and a manifest's check."""

from __future__ import annotations

import pytest

from harness.errors import ResultsError
from harness.results import new_manifest
from harness.results.labels import label_problem, labels_key, labels_problems, parse_label


def test_plain_names_and_printable_text_are_labels() -> None:
    assert label_problem("commit", "3f2a9c1") is None
    assert label_problem("redis.version", "7.2.4 (debian)") is None
    assert "plain name" in label_problem("1st", "x")
    assert "plain name" in label_problem("a b", "x")
    assert "must be text" in label_problem("version", 7.2)  # YAML's 7.2 is a number
    assert "control characters" in label_problem("commit", "abc\x1b[2J")
    assert "1 to 200" in label_problem("commit", "")
    assert "1 to 200" in label_problem("commit", "x" * 201)
    assert labels_problems({f"k{i}": "v" for i in range(40)}) == ["40 labels: at most 32"]
    assert labels_problems(["commit"]) == ["labels must be a mapping of name -> text, "
                                           "not list"]


def test_parse_label_splits_at_the_first_equals() -> None:
    assert parse_label("commit=abc") == ("commit", "abc")
    assert parse_label("flags=-O2 -DX=1") == ("flags", "-O2 -DX=1")
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_label("commit")
    with pytest.raises(ValueError, match="plain name"):
        parse_label("=abc")


def test_a_manifest_read_back_with_bad_labels_is_refused() -> None:
    def made(labels: object) -> object:
        return new_manifest(run_id="r1", experiment="e", workload="w", repetition=1,
                            grid_point={}, labels=labels)

    assert made({"commit": "abc"}).labels == {"commit": "abc"}
    with pytest.raises(ResultsError, match="label key"):
        made({"bad key": "x"})
    with pytest.raises(ResultsError, match="must be text"):
        made({"commit": 1})
    assert labels_key({"b": "2", "a": "1"}) == labels_key({"a": "1", "b": "2"})
