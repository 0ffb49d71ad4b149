"""`harness history`: change points of a tree's series, the gate, what is left out.

The trees are written with `write_run` from seeded lognormal latencies whose level
steps where the test says: the known answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.history import runs as history_runs
from harness.analysis.history.changes import history
from harness.analysis.history.gate import FAIL, PASS, gate
from harness.analysis.history.text import md_cell, render
from harness.cli import main as cli_main
from tests.fixtures.rawdata import write_history


def test_a_step_is_found_where_it_is_with_its_ratio_and_nothing_else(tmp_path: Path) -> None:
    raw = write_history(tmp_path / "raw", [1.0] * 5 + [1.3] * 5)
    h = history(raw, by="commit")
    assert h.points == 10 and not h.left_out
    found = {(c.metric, c.point, c.direction) for c in h.changes}
    assert found == {("throughput_ops_s", "c06", "worse"), ("latency_p50_ms", "c06", "worse"),
                     ("latency_p99_ms", "c06", "worse")}
    mean_ms, gap_ms = 0.1 * np.exp(0.3**2 / 2), 0.02  # ops back to back, 20 us apart
    for c in h.changes:
        truth = ((mean_ms + gap_ms) / (1.3 * mean_ms + gap_ms)
                 if c.metric == "throughput_ops_s" else 1.3)
        assert c.ci_low < truth < c.ci_high  # the interval holds the true step
        assert c.ci_high < 1 or c.ci_low > 1  # significant: it excludes 1
        assert c.runs_before == 15 and c.runs_after == 15 and c.q < 0.05
        assert c.run_id == "c06-r1" and not c.newest
    # The step began before the gate's window (the newest 3 points): accepted, said so.
    outcome = gate(h)
    assert outcome.verdict == PASS and "stay in a worse level" in outcome.line
    doc = json.loads(render(h, "json"))
    assert set(doc) >= {"changes", "points", "left_out"}
    assert set(doc["changes"][0]) >= {"experiment", "config_id", "metric", "run_id",
                                      "started_utc", "direction", "ratio", "ci_low",
                                      "ci_high", "q"}


def test_no_step_no_change_and_one_outlying_point_is_no_change(tmp_path: Path) -> None:
    flat = history(write_history(tmp_path / "a", [1.0] * 12), by="commit")
    assert flat.changes == () and flat.family.m >= 1  # tested, and nothing found
    # One run per point (no --by): one slow run in the middle is an outlier, not a level.
    raw = write_history(tmp_path / "b", [1.0] * 6 + [2.0] + [1.0] * 6, reps=1, label=False)
    h = history(raw)
    assert h.points == 13 and h.changes == ()


def test_the_gate_fails_on_a_worse_newest_point_and_says_which(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = write_history(tmp_path / "raw", [1.0] * 6 + [1.25])
    h = history(raw, by="commit")
    newest = [c for c in h.changes if c.newest]
    assert {c.metric for c in newest} == {"throughput_ops_s", "latency_p50_ms",
                                          "latency_p99_ms"}
    assert gate(h).verdict == FAIL
    assert cli_main(["history", str(raw), "--by", "commit", "--gate", "--no-progress"]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("gate: FAIL") and "from c07" in last and "x [" in last
    # --min-effect above the step: no change, the gate passes.
    assert cli_main(["history", str(raw), "--by", "commit", "--gate", "--min-effect", "40%",
                     "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("gate: pass")
    # Better is no failure.
    better = write_history(tmp_path / "better", [1.0] * 6 + [0.8])
    assert gate(history(better, by="commit")).verdict == PASS


def test_unsound_and_failed_runs_are_left_out_with_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    busy = {"window_s": 2.0, "hosts": [{"host": "client", "cpus": 2, "other_cpu": 0.9,
                                        "steal_util": 0.0}]}
    raw = write_history(tmp_path / "raw", [1.0] * 6)
    write_history(raw, [3.0], telemetry=busy, start_minute=30, first=7)  # slow: busy
    write_history(raw, [3.0], reps=1, start_minute=40, first=8, status="failed")
    h = history(raw, by="commit")
    assert h.changes == () and h.points == 6  # the busy point raised no alarm
    reasons = [r["reason"] for r in h.left_out]
    assert len(reasons) == 4 and reasons[0] == "failed"
    assert all(r.startswith("machine_busy: processes other than") for r in reasons[1:])
    lines = render(h, "table")
    assert "left out: 4 run(s) (3 machine_busy, 1 failed)" in lines
    # Without the check the busy point would have been a change: the test can fail.
    monkeypatch.setattr(history_runs, "RUN_CHECKS", ())
    assert history(raw, by="commit").changes


def test_names_from_the_tree_are_escaped_in_markdown(tmp_path: Path) -> None:
    assert md_cell("get|<img src=x onerror=alert(1)>") == \
        "get\\|\\<img src=x onerror=alert\\(1\\)\\>"
    # The escape is shown as text (printable), its backslash escaped: no control left.
    assert md_cell("[click](javascript:x)\x1b[2J") == \
        "\\[click\\]\\(javascript:x\\)\\\\x1b\\[2J"
    raw = write_history(tmp_path / "raw", [1.0] * 5 + [1.3] * 5, op="get|<b>x</b>")
    md = render(history(raw, by="commit"), "markdown")
    assert "<b>" not in md and "get\\|\\<b\\>x\\</b\\>" in md
    assert md.count("\n|") >= 4  # header, rule, three changes


def test_the_report_section_shows_a_labelled_history_and_omits_itself_otherwise(
        tmp_path: Path) -> None:
    from harness.analysis.history import report as history_report
    from harness.analysis.sections.display import OMIT_MARKER

    raw = write_history(tmp_path / "raw", [1.0] * 5 + [1.3] * 5)
    parts = history_report.section_parts(raw, figures_dir=tmp_path / "f")
    text = parts[0].data
    assert "points by label `commit`" in text and "| threads=4 | get | p99 | c06 | worse |" \
        in text
    assert (tmp_path / "f" / "history-my-cache-history.png").exists()
    assert parts[1].format == "png"
    # Repetitions of one run without labels are no history: the section leaves itself out.
    flat = write_history(tmp_path / "flat", [1.0] * 8, label=False)
    [note] = history_report.section_parts(flat)
    assert note.metadata == {OMIT_MARKER: True}


def test_the_explorer_draws_a_series_with_its_changes(tmp_path: Path) -> None:
    from harness.analysis.explore.history import history_figure

    raw = write_history(tmp_path / "raw", [1.0] * 5 + [1.3] * 5)
    fig = history_figure(raw, "my_cache_history", "latency_p99_ms")
    assert fig.png.startswith(b"\x89PNG")
    dashed = [la for la in fig.spec["layer"] if la.get("mark", {}).get("strokeDash")]
    assert len(dashed) == 1  # the change's rule, its data inline with its label
    assert "worse at c06: " in json.dumps(fig.spec["datasets"])


def test_no_progress_bar_frames_where_stderr_is_no_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = write_history(tmp_path / "raw", [1.0] * 4)
    # Without --no-progress: the bars would draw if stderr (captured here) were a terminal.
    assert cli_main(["history", str(raw), "--by", "commit"]) == 0
    err = capsys.readouterr().err
    assert "reading runs" not in err and "runs read" not in err and "%|" not in err, err


def test_the_left_out_line_counts_reasons_with_balanced_parentheses() -> None:
    """The README's `history --by commit` printed "left out: 372 run(s) (283 no label
    commit (labels in this tree, 89 no start time (an import))": a reason's kind was cut
    at its colon, inside a parenthesis."""
    from types import SimpleNamespace

    from harness.analysis.history.text import left_out_lines

    h = SimpleNamespace(left_out=[
        {"run_id": "r1", "experiment": "e", "reason": "no label commit (labels in this "
         "tree: version)"},
        {"run_id": "r2", "experiment": "e", "reason": "no start time (an import): not in "
         "time order"}])
    first = left_out_lines(h)[0]
    assert first == "left out: 2 run(s) (1 no label commit, 1 no start time (an import))"
    assert first.count("(") == first.count(")")
