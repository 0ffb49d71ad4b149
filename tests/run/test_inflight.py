"""The experiment's lock and state file (`harness.run.inflight`) are never written
through a symbolic link planted in the raw-results tree (issue 48 item 2): the lock
would truncate the file a link points at, the state would overwrite it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ResultsError
from harness.run.inflight import LOCK_FILE, STATE_DIR, STATE_FILE, ExperimentLock


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_text("the user's")
    return path


def test_a_link_planted_as_the_lock_is_refused_and_its_target_untouched(
        tmp_path: Path, victim: Path) -> None:
    exp = tmp_path / "raw" / "exp"
    (exp / STATE_DIR).mkdir(parents=True)
    (exp / STATE_DIR / LOCK_FILE).symlink_to(victim)
    with pytest.raises(ResultsError, match="a symbolic link there is not followed"):
        ExperimentLock(exp).acquire()
    assert victim.read_text() == "the user's"


def test_a_state_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    exp = tmp_path / "raw" / "exp"
    exp.mkdir(parents=True)
    (exp / STATE_DIR).symlink_to(elsewhere)
    with pytest.raises(ResultsError, match="is a symbolic link"):
        ExperimentLock(exp).acquire()
    assert list(elsewhere.iterdir()) == []


def test_a_link_planted_as_the_state_file_is_not_written_through(
        tmp_path: Path, victim: Path) -> None:
    exp = tmp_path / "raw" / "exp"
    lock = ExperimentLock(exp, spec="s.yaml")
    lock.acquire()
    try:
        (exp / STATE_DIR / STATE_FILE).symlink_to(victim)
        lock.state.scratch.append("/tmp/x")  # something to save
        lock.save()
        assert lock.unsaved is not None and "symbolic link" in lock.unsaved
        assert victim.read_text() == "the user's"
    finally:
        lock.keep()
