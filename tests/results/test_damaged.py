"""Damaged numbers are a damaged run (issue 48 item 4): a manifest whose counts are not
finite, negative, fractional or absurd, or whose settings, repetition or times no run of
the kit could have written, is named on stderr and skipped by every reader; the gates
exit on what is left, never 1 for the damage itself (the review's one planted
`counts.measured: NaN` printed OverflowError and failed a CI gate)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.results import read_manifest
from tests.fixtures.rawdata import HISTORY_EXPERIMENT, write_history

#: (what is planted, a JSON text edit of one manifest, what the reader says)
DAMAGE = [
    ("measured NaN", (r'"measured": \d+', '"measured": NaN'), "counts.measured is nan"),
    ("ok Infinity", (r'"ok": \d+', '"ok": Infinity'), "counts.ok is inf"),
    ("total negative", (r'"total": \d+', '"total": -5'), "counts.total is -5, negative"),
    ("measured fractional", (r'"measured": \d+', '"measured": 12.5'), "not a whole number"),
    ("error absurd", (r'"error": \d+', '"error": 1e30'), "more than any run holds"),
    ("repetition negative", (r'"repetition": \d+', '"repetition": -1'), "repetition is -1"),
    ("duration Infinity", (r'"duration_s": [^,\n]+', '"duration_s": Infinity'),
     "loadgen.duration_s is inf"),
    ("timeout negative", (r'"timeout_s": [^,\n]+', '"timeout_s": -3'),
     "loadgen.timeout_s is -3"),
    ("times backwards", (r'"ended_utc": "[^"]+"', '"ended_utc": "2000-01-01T00:00:00+00:00"'),
     "ended_utc is before started_utc"),
]


@pytest.fixture(scope="module")
def history_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight points of one configuration, three runs each, nothing changed."""
    return write_history(tmp_path_factory.mktemp("damaged") / "raw", [1.0] * 8)


def _plant(tree: Path, tmp_path: Path, edit: tuple[str, str]) -> tuple[Path, str]:
    raw = tmp_path / "raw"
    shutil.copytree(tree, raw)
    run_dir = sorted((raw / HISTORY_EXPERIMENT).iterdir())[4]
    path = run_dir / "manifest.json"
    text = path.read_text()
    data = json.loads(text)
    data["loadgen"].setdefault("duration_s", 1.0)
    data["loadgen"].setdefault("timeout_s", 1.0)
    text = json.dumps(data, indent=2)
    pattern, new = edit
    damaged, n = re.subn(pattern, new, text, count=1)
    assert n == 1, pattern
    path.write_text(damaged)
    return raw, run_dir.name


@pytest.mark.parametrize(("what", "edit", "said"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_manifest_is_named_and_skipped_by_every_reader(
        history_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str,
        edit: tuple[str, str], said: str) -> None:
    raw, run_id = _plant(history_tree, tmp_path, edit)
    from harness.errors import ResultsError

    with pytest.raises(ResultsError, match=f"{re.escape(said)}.*a damaged run"):
        read_manifest(raw / HISTORY_EXPERIMENT / run_id)
    commands = {
        "summary": (["summary", str(raw)], 0),
        "compare": (["compare", str(raw), str(history_tree)], 0),
        "history": (["history", str(raw), "--by", "commit", "--no-progress"], 0),
        "gate": (["history", str(raw), "--by", "commit", "--gate", "--no-progress"], 0),
        "export": (["export", "csv", str(raw), "-o", str(tmp_path / "x.csv")], 0),
        # One configuration: nothing to explain (2), the damaged run named all the same.
        "explain": (["explain", str(raw), "--experiment", HISTORY_EXPERIMENT], 2),
        "verify": (["verify", str(raw)], 1),  # its job: it names the damage and fails
    }
    for name, (argv, code) in commands.items():
        got = main(argv)
        out, err = capsys.readouterr()
        assert got == code, (name, got, err[-2000:])
        assert "Traceback" not in err and "OverflowError" not in err, (name, err)
        assert run_id in out + err and "a damaged run" in out + err, (name, out, err)
