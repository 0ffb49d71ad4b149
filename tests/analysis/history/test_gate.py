"""`harness history --gate` as a CI job uses it: a regression fails the job on the first
point where it can be shown and, with --since, until it is fixed or accepted; newest runs
too few to judge are said, only when they lie off their level; exit codes 0/1/2/3.

Trees are written with `write_history` (seeded lognormal latencies whose level steps
where the test says: the known answer).
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from harness.analysis.history.changes import history
from harness.analysis.history.gate import (
    FAIL,
    GATE_LEVEL,
    PASS,
    PENDING,
    Newest,
    decide,
    gate,
)
from harness.analysis.stats.changepoints import TailTest
from harness.cli import main as cli_main
from harness.cli.exits import (
    EXIT_NOT_JUDGEABLE,
    EXIT_PASS,
    EXIT_REGRESSION,
    EXIT_UNREADABLE,
)
from harness.errors import ResultsError
from tests.fixtures.rawdata import HISTORY_EXPERIMENT, write_history


def _gate(raw: Path, *args: str) -> tuple[int, str, str]:
    """`harness history RAW --gate ARGS` in its own process, as CI runs it."""
    done = subprocess.run([sys.executable, "-m", "harness.cli", "history", str(raw),
                           "--gate", *args], capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout.strip().splitlines()[-1], done.stderr


def test_the_issues_three_cases_one_run_per_point(tmp_path: Path) -> None:
    """Issue 49: 15 runs of one configuration, one run per point (no label)."""
    three = write_history(tmp_path / "three", [1.0] * 12 + [1.15] * 3, reps=1, label=False)
    code, last, err = _gate(three)
    assert code == EXIT_REGRESSION and last.startswith("gate: FAIL: 3 of 3 series x metrics")
    assert "began in the newest 3 point(s)" in last and last.endswith("from c13-r1")
    assert err == ""  # no progress-bar frames in a CI log
    one = write_history(tmp_path / "one", [1.0] * 14 + [1.15], reps=1, label=False)
    code, last, _ = _gate(one)
    assert code == EXIT_PASS and last.startswith("gate: not yet judgeable: the newest runs")
    assert last.endswith("a change needs 3 runs: 2 more run(s) will tell")
    assert _gate(one, "--strict")[0] == EXIT_NOT_JUDGEABLE
    flat = write_history(tmp_path / "flat", [1.0] * 15, reps=1, label=False)
    for extra in ((), ("--strict",)):
        code, last, _ = _gate(flat, *extra)
        assert (code, last) == (EXIT_PASS, "gate: pass: no worse level began in the newest "
                                           "3 point(s)")


def test_a_regression_fails_until_it_is_accepted_or_fixed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three runs per commit: worse from c06; a job that records the last accepted commit
    (--since) fails at every commit after it until it is accepted or fixed."""
    raw = write_history(tmp_path / "raw", [1.0] * 5 + [1.25] * 4)
    h = history(raw, by="commit")
    assert {(c.point, c.direction) for c in h.changes} == {("c06", "worse")}
    # The default window is the newest 3 points (c07-c09): c06 is before it.
    assert gate(h).verdict == PASS and "3 of 3 series x metrics stay in a worse" in \
        gate(h).line
    assert gate(h, window=4).verdict == FAIL
    assert gate(h, since="c05").verdict == FAIL and "after c05" in gate(h, since="c05").line
    assert gate(h, since="c06").verdict == PASS  # accepted: c06 is no longer open
    assert gate(h, since="c06-r2").verdict == PASS  # a run id names its point
    with pytest.raises(ResultsError, match="--since 'c99'"):
        gate(h, since="c99")
    assert cli_main(["history", str(raw), "--by", "commit", "--gate", "--since", "c99"]) == \
        EXIT_UNREADABLE
    assert capsys.readouterr().err.startswith("error: --since 'c99': no point")
    # Fixed at c10: the newest level is better than the one before it.
    write_history(raw, [1.0] * 3, start_minute=30, first=10, seed=4)
    fixed = history(raw, by="commit")
    assert [c.point for c in fixed.changes if c.metric == "latency_p50_ms"] == ["c06", "c10"]
    assert gate(fixed, since="c05").verdict == PASS


def _runs_ops(raw: Path) -> list[Path]:
    return sorted((raw / HISTORY_EXPERIMENT).iterdir())


def _damage(manifest: Path) -> None:
    """counts.measured NaN (issue 48 item 4)."""
    text = manifest.read_text()
    doc = json.loads(text)
    measured = doc["counts"]["measured"]
    manifest.write_text(text.replace(f'"measured": {measured}', '"measured": NaN'))


def test_input_that_cannot_be_read_is_exit_2_never_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    raw = write_history(tmp_path / "raw", [1.0] * 5)  # nothing changed in it
    _damage(_runs_ops(raw)[4] / "manifest.json")
    for cmd in (["history", str(raw), "--by", "commit", "--gate"],
                ["compare", str(write_history(tmp_path / "base", [1.0])), str(raw),
                 "--fail-if-worse", "5"]):
        done = subprocess.run([sys.executable, "-m", "harness.cli", *cmd],
                              capture_output=True, text=True, timeout=600)
        # Read as a damaged run and left out (0), or refused in one line (2): never a
        # traceback and 1, which a CI job reads as a regression.
        assert done.returncode in (EXIT_PASS, EXIT_UNREADABLE), done.stderr
        assert "Traceback" not in done.stderr
        if done.returncode == EXIT_UNREADABLE:
            assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
    # A tree whose only run is damaged cannot be read at all: 2 either way.
    only = write_history(tmp_path / "only", [1.0], reps=1)
    _damage(_runs_ops(only)[0] / "manifest.json")
    assert cli_main(["history", str(only), "--gate"]) == EXIT_UNREADABLE
    assert cli_main(["compare", str(only), str(raw), "--fail-if-worse", "5"]) == \
        EXIT_UNREADABLE
    capsys.readouterr()
    # Whatever fails while the runs are read (here: an OverflowError from the manifest
    # reader, as a count of inf once gave) is one line and exit 2.
    from harness.analysis.data import tree

    def overflow(run_dir: Path) -> None:
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr(tree, "read_manifest", overflow)
    for cmd in (["history", str(raw), "--gate"], ["compare", str(raw), str(raw)]):
        assert cli_main(cmd) == EXIT_UNREADABLE
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "could not be read (OverflowError: cannot convert" \
            in err, err


def _newest(name: str, *, worse: bool = False, opened: bool = False,
            trailing: tuple[TailTest, ...] = (), confirm_p: float = 1e-6,
            level_points: int = 5) -> Newest:
    return Newest(name, worse, opened, "c07", 1.2 if worse else math.nan, 1.1, 1.3, 0.95,
                  0.001, trailing, TailTest(3, 9, 1.2, confirm_p) if worse else None,
                  level_points if worse else 0)


def test_decide_fails_first_says_pending_only_where_runs_lie_off_and_passes_otherwise(
        ) -> None:
    off = (TailTest(1, 1, 1.15, 1e-6), TailTest(2, 2, 1.07, 0.01))
    near = (TailTest(1, 1, 1.01, 0.4), TailTest(2, 2, 1.0, 0.5))
    kw = {"min_runs": 3, "scope": "in the newest 3 point(s)"}
    fail = decide([_newest("a", worse=True, opened=True), _newest("b", trailing=off)], **kw)
    assert fail.verdict == FAIL and [x.name for x in fail.failing] == ["a"]
    pending = decide([_newest("a", worse=True), _newest("b", trailing=off),
                      _newest("c", trailing=near)], **kw)
    assert pending.verdict == PENDING and pending.more_runs == 2
    assert "the newest runs of 1 of 3 series x metrics" in pending.line
    assert "worst: b 1.15x over 1 run(s)" in pending.line
    quiet = decide([_newest("a", worse=True), _newest("c", trailing=near)], **kw)
    assert quiet.verdict == PASS and quiet.line == (
        "gate: pass: no worse level began in the newest 3 point(s); 1 of 2 series x "
        "metrics stay in a worse level that began before them (accepted)")
    # Off, but among 40 series and metrics whose newest runs lie in their level, p 1e-4
    # (Bonferroni over its 2 stretches: 2e-4) is no finding under Benjamini-Hochberg at
    # the gate's level; alone it is.
    weak = (TailTest(1, 1, 1.05, 1e-4), TailTest(2, 2, 1.0, 0.5))
    crowd = [_newest("w", trailing=weak)] + [_newest(f"n{i}", trailing=near)
                                             for i in range(39)]
    assert decide(crowd, **kw).verdict == PASS
    assert decide(crowd[:1], **kw).verdict == PENDING


def test_a_worse_level_fails_only_where_its_newest_points_lie_worse_at_the_gates_level(
        ) -> None:
    kw = {"min_runs": 3, "scope": "after c05"}
    assert GATE_LEVEL == 0.001
    held = _newest("a", worse=True, opened=True, confirm_p=GATE_LEVEL / 2)
    assert decide([held], **kw).verdict == FAIL
    # Two held at half the level: Benjamini-Hochberg over them, both still fail.
    assert len(decide([held, dataclasses.replace(held, name="b")], **kw).failing) == 2
    # Its newest points not (yet) worse at the gate's level: a level of one point of
    # three runs is not judgeable yet (6 more runs give it three points) ...
    young = _newest("a", worse=True, opened=True, confirm_p=0.01, level_points=1)
    out = decide([young], **kw)
    assert (out.verdict, out.more_runs) == (PENDING, 6)
    assert out.line == ("gate: not yet judgeable: a worse level began after c05 in 1 of 1 "
                        "series x metrics (worst: a 1.2x from c07), its newest points not "
                        "yet worse than the level before at the gate's level 0.001: 6 more "
                        "run(s) will tell")
    # ... and one of five points whose newest three no longer lie worse passes, said.
    faded = _newest("a", worse=True, opened=True, confirm_p=0.01, level_points=5)
    assert decide([faded], **kw).line == (
        "gate: pass: no worse level began after c05; 1 of 1 series x metrics in a worse "
        "level that began after c05, whose newest points no longer lie worse than the "
        "level before it")


def test_a_trailing_run_is_tested_against_its_own_level(tmp_path: Path) -> None:
    raw = write_history(tmp_path / "raw", [1.0] * 6 + [1.3] * 6 + [1.3], reps=1,
                        label=False)
    h = history(raw)
    p50 = next(s for s in h.series if s.metric == "latency_p50_ms")
    assert [c.point for c in p50.changes] == ["c07-r1"]
    # The newest runs are held to the newest level (1.3x), not to the one before it.
    assert p50.trailing and all(abs(math.log(t.ratio)) < 0.1 for t in p50.trailing)
    assert gate(h).verdict != PENDING
