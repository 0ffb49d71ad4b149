"""Step 1 of a recovery (`harness.run.recovery`): the hidden temp directories of an
experiment. A run directory written whole but not yet renamed (killed between its last
fsync and the rename) is verified and moved into place; the old copy of a run `harness
collect` was replacing is put back if the new one is not in place; anything else
half-written is removed. Each with a line. A name that is a link or a file is not the
kit's: left alone."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.hosts.fdsafe import remove_at
from harness.results import MANIFEST, TMP_PREFIX, verify_run
from harness.text import printable


@dataclass
class Recovered:
    """What `recover` did, for its caller's summary and for tests."""

    runs_written: list[str] = field(default_factory=list)
    runs_left: list[str] = field(default_factory=list)
    processes_stopped: list[str] = field(default_factory=list)
    temp_dirs: list[str] = field(default_factory=list)


def recover_temp_dirs(exp_dir: Path, say: Callable[[str], None],
                      found: Recovered | None = None) -> Recovered:
    """Step 1 of the module docstring: the hidden temp directories of `exp_dir`. Each is
    removed or renamed through a descriptor of `exp_dir` opened once (`remove_at`), so a
    directory exchanged for a link meanwhile is not followed."""
    found = found or Recovered()
    try:
        fd = os.open(exp_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return found
    try:
        _recover_in(exp_dir, fd, say, found)
    finally:
        os.close(fd)
    return found


def _recover_in(exp_dir: Path, fd: int, say: Callable[[str], None], found: Recovered) -> None:
    temps = sorted(n for n in os.listdir(fd) if n.startswith(TMP_PREFIX))
    # The old copies of replaced runs first: whether a staging copy matters depends on them.
    temps.sort(key=lambda n: not n.startswith(f"{TMP_PREFIX}old-"))
    for tmp_name in temps:
        d = exp_dir / tmp_name
        name = tmp_name[len(TMP_PREFIX):]
        if not _is_dir(fd, tmp_name):
            say(f"{printable(d)}: not a directory the kit wrote (a link or a file); left "
                "alone")
            continue
        if name.startswith("old-"):
            target = name[len("old-"):]
            if _exists(fd, f"{target}/{MANIFEST}"):
                remove_at(fd, tmp_name)
                say(f"{printable(d)}: removed (the old copy of run {printable(target)}, "
                    "replaced already)")
            else:
                os.rename(tmp_name, target, src_dir_fd=fd, dst_dir_fd=fd)
                os.fsync(fd)
                say(f"{printable(exp_dir / target)}: put back (a `harness collect` was "
                    "replacing it when it stopped; the records it was fetching are still on "
                    "their machine)")
        elif name.startswith("collect-"):
            remove_at(fd, tmp_name)
            say(f"{printable(d)}: removed (a replacement `harness collect` had not put in "
                "place; the run it was replacing is intact)")
        elif (_exists(fd, f"{tmp_name}/{MANIFEST}") and not _exists(fd, name)
              and _whole(d)):
            os.rename(tmp_name, name, src_dir_fd=fd, dst_dir_fd=fd)
            os.fsync(fd)
            say(f"{printable(exp_dir / name)}: found whole in its temp directory (the "
                "harness stopped between writing and renaming it); verified and moved into "
                "place")
            found.runs_written.append(name)
        else:
            remove_at(fd, tmp_name)
            say(f"{printable(d)}: removed (a run directory left half-written; its records "
                "are written again from the client machines where they still are)")
        found.temp_dirs.append(tmp_name)


def _is_dir(fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _exists(fd: int, rel: str) -> bool:
    try:
        os.stat(rel, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _whole(run_dir: Path) -> bool:
    try:
        verify_run(run_dir)
    except HarnessError:
        return False
    return True


