"""Files the kit writes into a directory a user names (`harness.paths.created`,
`write_new`): never through a symbolic link planted there, whole or not at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.paths import created, write_new

#: Keeps putting a link to `victim` at `target` (and taking it away) until killed.
PLANTER = r"""
import os, sys
target, victim = sys.argv[1:3]
print("planting", flush=True)
while True:
    try:
        os.symlink(victim, target)
    except FileExistsError:
        pass
    try:
        os.unlink(target)
    except FileNotFoundError:
        pass
"""


def test_a_file_is_written_whole_and_replaces_a_regular_file(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert write_new(out, "first") == out
    write_new(out, b"second")
    assert out.read_text() == "second"
    with pytest.raises(RuntimeError), created(out) as f:
        f.write("half")
        raise RuntimeError("the writer failed half way")
    assert out.read_text() == "second"  # the old file stays whole
    assert sorted(os.listdir(tmp_path)) == ["report.html"]  # no temporary left


@pytest.mark.parametrize("kind", ["link to a file", "link to nothing", "directory"])
def test_what_is_not_a_regular_file_at_the_name_is_refused_by_name(tmp_path: Path,
                                                                  kind: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("the user's")
    out = tmp_path / "report.html"
    if kind == "directory":
        out.mkdir()
    else:
        out.symlink_to(victim if kind == "link to a file" else tmp_path / "nowhere")
    with pytest.raises(HarnessError, match=f"{out}.*(symbolic link|not a regular file)"):
        write_new(out, "report")
    assert victim.read_text() == "the user's"
    assert not (tmp_path / "nowhere").exists()


def test_a_link_planted_while_writing_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("the user's")
    out = tmp_path / "report.html"
    planter = subprocess.Popen([sys.executable, "-c", PLANTER, str(out), str(victim)],
                               stdout=subprocess.PIPE, text=True)
    assert planter.stdout is not None and planter.stdout.readline() == "planting\n"
    outcomes = {"written": 0, "refused": 0}
    try:
        for _ in range(500):
            try:
                write_new(out, "report")
                outcomes["written"] += 1
            except HarnessError:
                outcomes["refused"] += 1
            assert victim.read_text() == "the user's"
    finally:
        planter.kill()
        planter.wait()
    assert outcomes["refused"] > 0, outcomes  # the planter was there
