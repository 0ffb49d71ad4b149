"""Step 1 of a recovery (`harness.run.recovery`): the hidden temp directories of an
experiment. A run directory written whole but not yet renamed (killed between its last
fsync and the rename) is verified and moved into place; the old copy of a run `harness
collect` was replacing is put back if the new one is not in place; anything else
half-written is removed. Each with a line. A name that is a link or a file is not the
kit's: left alone."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.results import MANIFEST, TMP_PREFIX, verify_run
from harness.results.io import fsync_dir
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
    """Step 1 of the module docstring: the hidden temp directories of `exp_dir`."""
    found = found or Recovered()
    if not exp_dir.is_dir():
        return found
    temps = sorted(p for p in exp_dir.iterdir() if p.name.startswith(TMP_PREFIX))
    # The old copies of replaced runs first: whether a staging copy matters depends on them.
    temps.sort(key=lambda p: not p.name.startswith(f"{TMP_PREFIX}old-"))
    for d in temps:
        name = d.name[len(TMP_PREFIX):]
        if d.is_symlink() or not d.is_dir():
            say(f"{printable(d)}: not a directory the kit wrote (a link or a file); left "
                "alone")
            continue
        if name.startswith("old-"):
            target = exp_dir / name[len("old-"):]
            if (target / MANIFEST).exists():
                shutil.rmtree(d)
                say(f"{d}: removed (the old copy of run {target.name}, replaced already)")
            else:
                os.rename(d, target)
                fsync_dir(exp_dir)
                say(f"{target}: put back (a `harness collect` was replacing it when it "
                    "stopped; the records it was fetching are still on their machine)")
        elif name.startswith("collect-"):
            shutil.rmtree(d)
            say(f"{d}: removed (a replacement `harness collect` had not put in place; the "
                "run it was replacing is intact)")
        elif (d / MANIFEST).exists() and not (exp_dir / name).exists() and _whole(d):
            os.rename(d, exp_dir / name)
            fsync_dir(exp_dir)
            say(f"{exp_dir / name}: found whole in its temp directory (the harness stopped "
                "between writing and renaming it); verified and moved into place")
            found.runs_written.append(name)
        else:
            shutil.rmtree(d)
            say(f"{d}: removed (a run directory left half-written; its records are written "
                "again from the client machines where they still are)")
        found.temp_dirs.append(d.name)
    return found


def _whole(run_dir: Path) -> bool:
    try:
        verify_run(run_dir)
    except HarnessError:
        return False
    return True


