"""Find and remove what emulated networks left behind: `harness netem cleanup`.

Everything the kit creates for an emulated cluster carries the prefix `hkv-`: network
namespaces, interfaces (bridge, veths), the state directory /tmp/hkv-<tag>-XXXXXX with
the servers' data below it, and the relays' `--tag hkv-<tag>`. Cleanup looks for all of
them on this machine: processes inside the namespaces, processes whose working directory
or arguments lie in a state directory, relays by tag; it stops those, then deletes the
namespaces (their veths and qdiscs go with them), the remaining interfaces and the
directories. Idempotent: a second call finds nothing.

Names in /tmp and command lines are anyone's to choose, so a name proves nothing: a state
directory counts only if it is a real directory (not a link) of this user, and a process
outside the namespaces is stopped only if a path it runs in or names lies inside such a
directory, or it is a relay whose `--tag` is exactly the tag of one. Another user's
directory, and any process that merely has the prefix in its arguments, is left alone.

Resources of a tag whose owner (the process that created them, recorded with its start
time in the state directory) is still running are in use and left alone, unless `force`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import select
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.hosts.fdsafe import remove_at
from harness.netem import OWNER_FILE, PREFIX, proc_start_time
from harness.text import printable

TAG_RE = re.compile(rf"{re.escape(PREFIX)}([0-9a-f]{{6}})(?![0-9a-f])")
STOP_WAIT_S = 10.0


@dataclass
class Leftovers:
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)
    #: pid -> short description (command line)
    processes: dict[int, str] = field(default_factory=dict)
    #: tags whose owner is still running, and that owner's pid
    in_use: dict[str, int] = field(default_factory=dict)
    #: pid -> its start time when found (so that it is told from a later process)
    started: dict[int, str | None] = field(default_factory=dict)

    def empty(self) -> bool:
        return not (self.namespaces or self.links or self.dirs or self.processes)


def _tag(text: str) -> str | None:
    m = TAG_RE.search(text)
    return m.group(1) if m else None


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return subprocess.CompletedProcess(["ip", *args], 127, "", "ip: command not found")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _owner_alive(state_dir: Path) -> int | None:
    try:
        owner = json.loads((state_dir / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    pid = owner.get("pid")
    if isinstance(pid, int) and _alive(pid) and proc_start_time(pid) == owner.get("start"):
        return pid
    return None


def _mine(path: Path) -> bool:
    """A state directory of this user: a real directory, not a link to one."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def find_leftovers(tmp_dir: str | None = None, *, force: bool = False) -> Leftovers:
    """Everything with the prefix on this machine, split into in-use and removable
    (with `force`, nothing counts as in use)."""
    tmp = Path(tmp_dir or tempfile.gettempdir())
    found = Leftovers()
    dirs = sorted(p for p in tmp.glob(f"{PREFIX}*") if _mine(p))
    # Namespaces and links are the whole machine's, not `tmp`'s: a live session whose
    # state lies in the system's temp directory is in use whatever `tmp` is (a cleanup
    # of another directory once took a running test bed's namespaces and its sshd).
    owners = sorted({*dirs, *(p for p in Path(tempfile.gettempdir()).glob(f"{PREFIX}*")
                               if _mine(p))})
    for d in owners:
        tag, owner = _tag(d.name), None if force else _owner_alive(d)
        if tag and owner:
            found.in_use[tag] = owner
    busy = set(found.in_use)

    def mine(name: str) -> bool:
        return _tag(name) not in busy

    found.dirs = [d for d in dirs if mine(d.name)]
    out = _ip("netns", "list").stdout.splitlines()
    found.namespaces = [n for n in (line.split()[0] for line in out if line.strip())
                        if n.startswith(PREFIX) and mine(n)]
    for line in _ip("-o", "link", "show").stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(PREFIX) and mine(name):
                found.links.append(name)
    pids: set[int] = set()
    for ns in found.namespaces:
        pids |= {int(p) for p in _ip("netns", "pids", ns).stdout.split() if p.isdigit()}
    roots = [str(d) for d in found.dirs]
    tags = {f"{PREFIX}{t}" for t in (_tag(d.name) for d in found.dirs) if t}
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        argv = _cmdline(pid)
        with contextlib.suppress(OSError):
            argv.append(os.readlink(entry / "cwd"))
        inside = any(a == r or a.startswith(f"{r}/") for a in argv for r in roots)
        relay = any(a == "--tag" and b in tags for a, b in itertools.pairwise(argv))
        if inside or relay:
            pids.add(pid)
    for pid in sorted(pids):
        if _alive(pid):
            found.started[pid] = proc_start_time(pid)
            found.processes[pid] = " ".join(_cmdline(pid))[:120] or f"pid {pid}"
    return found


def _stop_processes(pids: list[int], ticks: dict[int, str | None]) -> None:
    """Stop each process found (`ticks`: its start time then), pinned by a pidfd and
    proven to be the process found (the same start time) before it is signalled through
    the pidfd: a pid handed to another process since is never signalled."""
    pinned: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fd = os.pidfd_open(pid)
            if ticks.get(pid) is not None and proc_start_time(pid) == ticks[pid] and (
                    _alive(pid)):
                pinned[pid] = fd
            else:
                os.close(fd)
    try:
        for pid, fd in pinned.items():
            # SIGINT is PostgreSQL's fast shutdown (clean, no leaked shared memory); the
            # relays and anything else get TERM. KILL whatever is still there at the end.
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(
                    fd, signal.SIGINT if comm.startswith("postgres") else signal.SIGTERM)
        for sig in (signal.SIGKILL, None):
            deadline = time.monotonic() + STOP_WAIT_S
            left = dict(pinned)
            while left and time.monotonic() < deadline:
                # A pidfd turns readable when its process exits.
                ready, _, _ = select.select(list(left.values()), [], [],
                                            max(0.0, deadline - time.monotonic()))
                left = {p: fd for p, fd in left.items() if fd not in ready}
            for fd in left.values() if sig else ():
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(fd, sig)
    finally:
        for fd in pinned.values():
            os.close(fd)


def _remove_dirs(dirs: list[Path]) -> list[Path]:
    """Remove each state directory through a descriptor of its parent (a name exchanged
    for a link meanwhile is not followed); the ones that could not be."""
    failed = []
    for d in dirs:
        try:
            fd = os.open(d.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            failed.append(d)
            continue
        try:
            st = os.stat(d.name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                failed.append(d)  # no longer the directory found
                continue
            remove_at(fd, d.name)
        except OSError:
            failed.append(d)
        finally:
            os.close(fd)
    return failed


def cleanup(*, force: bool = False, tmp_dir: str | None = None,
            say: Callable[[str], None] = print) -> Leftovers:
    """Remove every leftover (with `force`, also those whose owner still runs); say what
    was removed, and return what was found. Raises nothing: failures are reported."""
    found = find_leftovers(tmp_dir, force=force)
    for tag, pid in sorted(found.in_use.items()):
        say(f"in use, left alone: {PREFIX}{tag} (owner pid {pid} is running; --force "
            "removes it anyway)")
    if found.processes:
        _stop_processes(sorted(found.processes), found.started)
        for pid, what in sorted(found.processes.items()):
            say(f"stopped process {pid}: {printable(what)}")
    for ns in found.namespaces:
        res = _ip("netns", "del", ns)
        say(f"deleted namespace {ns}" if res.returncode == 0 else
            f"could not delete namespace {ns}: {res.stderr.strip()} (needs root)")
    remaining = {line.split(":", 2)[1].strip().split("@")[0]
                 for line in _ip("-o", "link", "show").stdout.splitlines()
                 if line.count(":") >= 2}
    for link in found.links:
        if link not in remaining:
            say(f"deleted link {link} (with its namespace)")
            continue
        res = _ip("link", "del", link)
        say(f"deleted link {link}" if res.returncode == 0 else
            f"could not delete link {link}: {res.stderr.strip()} (needs root)")
    failed = _remove_dirs(found.dirs)
    for d in found.dirs:
        say(printable(f"could not remove {d}" if d in failed else f"removed directory {d}"))
    if found.empty():
        say(f"nothing to clean up (no {PREFIX}* namespaces, links, directories or processes)")
    return found

