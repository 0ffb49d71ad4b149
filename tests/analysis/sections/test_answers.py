"""The answers a section hands to the report's summary of findings survive the trip
through an executed notebook's metadata, and what comes back is read as untrusted: a
record of the wrong shape is dropped, never trusted or crashed on."""

from __future__ import annotations

import json
import math

from harness.analysis.sections import answers
from harness.analysis.sections.answers import Answer


def _metadata(display: object) -> dict:
    data, meta = display._repr_mimebundle_()  # type: ignore[attr-defined]
    assert set(data) == {"text/plain"}  # the report shows nothing of it in the section
    return json.loads(json.dumps(meta))  # as nbformat writes it: JSON, no NaN


def test_answers_round_trip_through_json_metadata() -> None:
    sent = [Answer("a against b: throughput", "better", 1.5, 1.2, 1.9, 0.975, "exp",
                   "", "Experiment `exp`"),
            Answer("c against d: p99 latency", "inconclusive", 1.1, math.nan, math.nan,
                   0.975, "exp")]
    meta = _metadata(answers.publish(sent))
    got = answers.read(meta[answers.MARKER])
    assert got[0] == sent[0]
    assert got[1].claim == sent[1].claim and math.isnan(got[1].low) and got[1].inconclusive
    assert "1 of 2 comparisons decided" in answers._plain(sent)


def test_records_of_the_wrong_shape_are_dropped() -> None:
    good = {"claim": "x", "verdict": "worse", "ratio": 2, "low": 1.5, "high": 2.5,
            "level": 0.95}
    bad = [{**good, "ratio": "2"}, {**good, "claim": 3}, {**good, "ratio": True},
           {**good, "heading": ["a"]}, "not a record", None]
    assert answers.read([*bad, good]) == [Answer("x", "worse", 2.0, 1.5, 2.5, 0.95)]
    assert answers.read({"claim": "x"}) == [] and answers.read(None) == []


def test_check_counts_are_read_as_untrusted() -> None:
    meta = _metadata(answers.publish_checks({"e": {"trend": 2}, "f": {}}))
    assert answers.read_checks(meta[answers.CHECKS_MARKER]) == {"e": {"trend": 2}, "f": {}}
    assert answers.read_checks({"e": {"trend": "2", "not_steady": True, "heavy_tail": 1},
                                "f": [1], 3: {}}) == {"e": {"heavy_tail": 1}}
    assert answers.read_checks("x") == {}
