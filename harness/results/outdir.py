"""Is a raw-results directory usable, before anything is measured into it?

`harness run` (at its start), `harness validate` and `harness hosts check` ask this of
`--out`: it exists or can be made, it is a directory (not a file, not a dangling
symlink), this process can write there, the filesystem accepts the experiment's name,
and there is room for at least one run. A problem found after a run was measured would
cost its records; found here it costs nothing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from harness.errors import ResultsError
from harness.results.schema import TMP_PREFIX

#: Bytes one record takes in ops.parquet (zstd) at most, measured on memcache_mix runs
#: (about 6-9), rounded up: the room check errs towards asking for more.
BYTES_PER_RECORD = 12
#: A run's directory besides its records: manifest, Parquet footer, file-system blocks.
RUN_OVERHEAD_BYTES = 256 * 1024
#: The longest run id the runner makes (`harness.run.context.run_id_for`: stamp, config id cut to
#: 60 characters, repetition, random suffix), under its hidden temp name.
LONGEST_RUN_DIR = len(TMP_PREFIX) + 16 + 1 + 60 + 1 + 5 + 1 + 6


def out_dir_problems(out_dir: Path, experiment: str, records_per_run: int) -> list[str]:
    """What stops runs of `experiment` (`records_per_run` at most) from being written
    under `out_dir`; empty when nothing does. Creates nothing but a probe file that it
    removes at once."""
    out_dir = Path(out_dir)
    existing, missing = out_dir, []
    while not os.path.lexists(existing):
        missing.append(existing.name)
        if existing.parent == existing:
            break
        existing = existing.parent
    if os.path.islink(existing) and not existing.exists():
        return [f"{existing}: a symlink to {os.readlink(existing)}, which does not exist"]
    if not existing.is_dir():
        what = "is a file" if existing.is_file() else "is not a directory"
        if existing == out_dir:
            return [f"{out_dir}: {what}, not a raw-results directory"]
        return [f"{out_dir}: cannot be made: {existing} {what}"]
    problems = []
    try:
        fd, probe = tempfile.mkstemp(prefix=".harness-probe-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return [f"{out_dir}: cannot write in {existing} ({exc.strerror or exc})"]
    try:
        name_max = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for part in [*missing, experiment]:
        if len(part.encode()) > name_max:
            problems.append(f"{out_dir}: the name {part[:40]!r}... is {len(part.encode())} "
                            f"bytes, longer than the {name_max} this file system allows")
    if name_max < LONGEST_RUN_DIR:
        problems.append(f"{out_dir}: this file system allows names of only {name_max} bytes; "
                        f"run directories need {LONGEST_RUN_DIR}")
    st = os.statvfs(existing)
    free = st.f_bavail * st.f_frsize
    need = records_per_run * BYTES_PER_RECORD + RUN_OVERHEAD_BYTES
    if free < need:
        problems.append(f"{out_dir}: {free / 2**20:,.1f} MiB free, and one run needs about "
                        f"{need / 2**20:,.1f} MiB ({records_per_run:,} records); free some "
                        "space or choose another --out")
    return problems


def check_out_dir(out_dir: Path, experiment: str, records_per_run: int) -> None:
    """`out_dir_problems`, raised as one ResultsError."""
    problems = out_dir_problems(out_dir, experiment, records_per_run)
    if problems:
        raise ResultsError("\n".join(problems))
