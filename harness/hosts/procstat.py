"""What /proc says about a machine: its CPUs, its load and every process's CPU time.

Read at a run's edges on every machine of the run (`harness.run.telemetry`): in the harness
process on this machine, by the machine's agent on a client machine
(`harness.run.agent`), and on any other machine by ``python -c`` with this module's source
(`script`, as a one-shot or as a small server of snapshots, `serve`). So it imports
nothing but the standard library and does nothing on import.

A snapshot costs one read of /proc/stat, /proc/loadavg and /proc/uptime and one of
/proc/<pid>/stat per process (a few ms for a few hundred processes); /proc/<pid>/status
only for the processes of the sessions asked about (`detail`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: /proc/<pid>/stat flag of a kernel thread: not a process of anyone's.
PF_KTHREAD = 0x00200000
#: Fields of one process in a snapshot's "procs" (lists, to keep it small over SSH).
PROC_FIELDS = ("pid", "ppid", "sid", "utime", "stime", "cutime", "cstime", "start",
               "kernel", "comm")


def cpu_times(text: str | None = None) -> tuple[int, int, int]:
    """(busy, steal, total) clock ticks of all CPUs since boot, from /proc/stat's first
    line. Busy: user, nice, system, irq, softirq (guest time is inside user already);
    idle and iowait are not busy; steal is time a hypervisor gave to someone else."""
    if text is None:
        text = Path("/proc/stat").read_text()
    values = [int(v) for v in text.split("\n", 1)[0].split()[1:]]
    values += [0] * (8 - len(values))
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    busy = user + nice + system + irq + softirq
    return busy, steal, busy + idle + iowait + steal


def _proc(pid: str) -> list[Any] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone since the directory was listed
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    comm = text[text.find("(") + 1:text.rfind(")")]
    f = text[text.rfind(")") + 2:].split()
    # f[0] is field 3 of proc(5): state; ppid 4, session 6, flags 9, utime 14, stime 15,
    # cutime 16, cstime 17, starttime 22.
    return [int(pid), int(f[1]), int(f[3]), int(f[11]), int(f[12]), int(f[13]),
            int(f[14]), int(f[19]), bool(int(f[6]) & PF_KTHREAD), comm]


def _peak_rss(pid: int) -> int | None:
    """VmHWM (the process's peak resident set) in bytes; None for a kernel thread or a
    process gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def machine_id() -> str:
    """Which kernel and pid namespace this is: spec hosts with one id see the same
    processes (namespaces of one machine, an SSH host on loopback)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "?"
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = "?"
    return f"{boot} {pidns}"


def snapshot(detail: Iterable[int] = ()) -> dict[str, Any]:
    """This machine now, as plain JSON data: CPU ticks (`cpu_times`), CPUs, load, uptime,
    every process (`PROC_FIELDS`) and the peak RSS of every process in the sessions of
    the pids in `detail`."""
    stat = Path("/proc/stat").read_text()
    busy, steal, total = cpu_times(stat)
    wanted = set(detail)
    procs = [p for p in map(_proc, (d for d in os.listdir("/proc") if d.isdigit())) if p]
    sessions = {p[2] for p in procs if p[0] in wanted}
    return {
        "machine": machine_id(),
        "self": os.getpid(),
        "tck": os.sysconf("SC_CLK_TCK"),
        "cpus": sum(1 for line in stat.splitlines()
                    if line.startswith("cpu") and line[3:4].isdigit()),
        "busy": busy, "steal": steal, "total": total,
        "loadavg": float(Path("/proc/loadavg").read_text().split()[0]),
        "uptime_s": float(Path("/proc/uptime").read_text().split()[0]),
        "procs": procs,
        "peak_rss": {str(p[0]): _peak_rss(p[0]) for p in procs if p[2] in sessions},
    }


def script() -> str:
    """Source for ``python -c`` on a machine without the kit (run as __main__ there)."""
    return Path(__file__).read_text()


def serve() -> int:
    """Answer each request line, ``{"id": N, "detail": [pids]}``, with ``{"id": N, "ok":
    true, "snapshot": ...}`` until the input closes: the agents' line protocol
    (`harness.run.agentctl`), so a machine's two snapshots cost one interpreter start-up,
    paid before the run rather than at its edges."""
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            reply = {"id": req.get("id"), "ok": True,
                     "snapshot": snapshot(int(p) for p in req.get("detail") or [])}
        except (OSError, ValueError) as exc:
            reply = {"id": req.get("id"), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply, allow_nan=False) + "\n")
        sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print `snapshot` of the pids given as arguments, as JSON; with ``--serve``, `serve`."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--serve"]:
        return serve()
    print(json.dumps(snapshot(int(a) for a in args), allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
