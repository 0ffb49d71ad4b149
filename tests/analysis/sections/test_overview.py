"""The report overview's sentence on checksums says what was checked and what skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.analysis.data.load import SkippedRunWarning
from harness.analysis.sections import overview


def test_all_checked_and_matched(tiny_raw: Path):
    text = overview.analyse(tiny_raw).status().data
    assert "all 4 ops files matched their manifests' checksums" in text


def test_what_was_checked_what_failed_and_what_could_not_be(tiny_raw: Path, tmp_path: Path):
    raw = tmp_path / "raw"
    shutil.copytree(tiny_raw, raw)
    (raw / "tiny" / "tiny-2-1" / "ops.parquet").write_bytes(b"garbage")
    newer = raw / "tiny" / "tiny-1-1" / "manifest.json"
    newer.write_text(json.dumps({**json.loads(newer.read_text()), "schema_version": 99}))
    (raw / "tiny" / "orphan").mkdir()
    shutil.copy(raw / "tiny" / "tiny-1-0" / "ops.parquet", raw / "tiny" / "orphan")
    with pytest.warns(SkippedRunWarning):
        text = overview.analyse(raw).status().data
    assert "every ops file matched" not in text and "all " not in text
    assert ("3 ops files checked against their manifests' checksums: 2 matched, 1 did not "
            "(`tiny/tiny-2-1`: checksum mismatch); 2 not checked (`tiny/orphan`: "
            "ops.parquet but no manifest.json; `tiny/tiny-1-1`: schema_version 99 is not "
            "one this kit reads). The 3 skipped are in no table or figure; the appendix "
            "lists them with why.") in text
    assert text.startswith("2 runs in 1 experiment")


def test_nothing_readable_is_not_nothing_found(tiny_raw: Path, tmp_path: Path):
    raw = tmp_path / "raw"
    shutil.copytree(tiny_raw, raw)
    for ops in raw.glob("tiny/*/ops.parquet"):
        ops.write_bytes(b"garbage")
    with pytest.warns(SkippedRunWarning):
        text = overview.analyse(raw).status().data
    assert text.startswith(f"**No readable runs** under `{raw}`: 4 ops files checked "
                           "against their manifests' checksums: 0 matched, 4 did not")


def test_imported_runs_are_not_a_kit_of_unknown_version(tiny_raw: Path, tmp_path: Path):
    """Issue 26, p.3: the overview said "Measured with kit 0.1.0 (…), ? (?)" where the
    "? (?)" were the imported runs, which no kit measured."""
    from harness.cli import main

    raw = tmp_path / "raw"
    shutil.copytree(tiny_raw, raw)
    legacy = Path(__file__).resolve().parents[3] / "examples/legacy/seed001-gae-bench.txt"
    assert main(["import", "gae-bench", str(legacy), "-o", str(raw / "imported"),
                 "--experiment", "seedx"]) == 0
    study = overview.analyse(raw)
    text = study.status().data
    n = int((study.runs["experiment"] == "seedx").sum())
    assert "?" not in text
    assert (f"{n} imported runs (`seedx`) were measured by the tools of the reports they "
            "were imported from, not by this kit") in text
    assert "Measured with kit " in text
