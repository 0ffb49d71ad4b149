"""What the side-by-side benchmarks share: a generated tree written once, and one side
timed in its own process (wall time, peak RSS from wait4, stdout)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def write_once(raw_dir: Path, write: Callable[[Path], None]) -> bool:
    """`write(tmp)` then rename `tmp` to `raw_dir`, unless `raw_dir` exists (a run cut
    short leaves only the ``.partial`` directory, redone next time); True if written."""
    if raw_dir.exists():
        return False
    tmp = raw_dir.with_name(raw_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    write(tmp)
    tmp.rename(raw_dir)
    return True


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None
          ) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (GiB) and stdout of one child process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} in {cwd} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 2**20, text  # ru_maxrss is in KiB on Linux
