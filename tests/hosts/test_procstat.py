"""harness.hosts.procstat reads /proc as the telemetry needs it: CPU ticks of every process,
those of an exited child with the parent that waited for it, on a machine without the
kit."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

from harness.hosts import procstat
from harness.run.telemetry import CSTIME, CUTIME, PID, STIME, UTIME

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def _row(snap: dict, pid: int) -> list:
    [row] = [r for r in snap["procs"] if r[PID] == pid]
    return row


def test_cpu_times_of_a_proc_stat_line() -> None:
    # Captured on the 2-core test machine: user nice system idle iowait irq softirq steal.
    line = "cpu  367052 0 143682 131509 4739 0 21891 622 0 0\ncpu0 1 2 3 4\n"
    assert procstat.cpu_times(line) == (532625, 622, 532625 + 131509 + 4739 + 622)


def test_an_exited_childs_cpu_moves_to_the_parent_that_waited_for_it() -> None:
    """What the telemetry's session sums rely on: a PostgreSQL backend, a worker gone
    before the end snapshot still count, with the process that reaped them."""
    before = procstat.snapshot()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", BURN], check=True)
    after = procstat.snapshot()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_s = (used.ru_utime - children.ru_utime) + (used.ru_stime - children.ru_stime)
    me0, me1 = _row(before, os.getpid()), _row(after, os.getpid())
    waited = (me1[CUTIME] + me1[CSTIME] - me0[CUTIME] - me0[CSTIME]) / after["tck"]
    assert child_s >= 0.3
    assert abs(waited - child_s) <= 2 / after["tck"]  # ticks truncate: a tick each end
    assert me1[UTIME] + me1[STIME] >= me0[UTIME] + me0[STIME]


def test_the_script_runs_without_the_kit_and_reads_the_sessions_asked_about() -> None:
    """As on a server machine: `python -I -S -c` (no site-packages, so no harness)."""
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    out = subprocess.run([python, "-I", "-S", "-c", procstat.script(), str(os.getpid())],
                         check=True, capture_output=True, text=True, cwd="/").stdout
    snap = json.loads(out)
    here = procstat.snapshot()
    assert snap["machine"] == here["machine"] == procstat.machine_id()
    assert snap["cpus"] == here["cpus"] >= 1 and snap["tck"] == here["tck"]
    assert snap["self"] != os.getpid() and _row(snap, snap["self"])
    assert snap["peak_rss"][str(os.getpid())] > 1 << 20  # this session's processes
    assert all(_row(snap, int(p))[2] == os.getsid(os.getpid()) for p in snap["peak_rss"])
    assert 0 <= snap["busy"] <= snap["total"] and snap["uptime_s"] > 0
