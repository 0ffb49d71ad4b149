"""Remove and signal what the kit owns without looking anything up twice; runs where the
items are (`python -m harness.hosts.fdsafe`, one JSON request on stdin, one JSON answer
on stdout; `harness.hosts.owned` sends it, locally and over SSH alike).

A path that is checked and then removed by name is looked up twice, and between the two
a process that can write one of its parent directories can exchange that parent with a
symbolic link (renameat2 RENAME_EXCHANGE): `rm -rf` then follows the link out of the
tree. Here a path is opened once, one component at a time from "/", each with
O_NOFOLLOW | O_DIRECTORY; the owner mark is read through the opened directory, and what
lies under it is removed through descriptors (unlinkat, and `shutil.rmtree` with
`dir_fd`, which re-checks each directory it opens). The directory's own name goes last,
from its parent's descriptor, and only while that name still is the directory checked
(same device and inode): rmdir removes nothing but an empty directory anyway.

A process is pinned by a pidfd before its start time and environment are read, and is
signalled through it, so a pid the kernel hands to another process meanwhile is never
signalled. Its process group (servers and workers run in sessions of their own) is
signalled member by member, each pinned the same way while the leader is proven alive.

Standard library only, and nothing of the kit but the mark's name: this is what a client
machine runs on the word of a state file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import shutil
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from harness.hosts.base import OWNER_ENV, OWNER_MARK

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """The item is not the kit's (or not there); the message says why, in one line."""


# -- directories --------------------------------------------------------------------------
@contextlib.contextmanager
def opened(path: str) -> Iterator[tuple[int, str, int]]:
    """(parent fd, last name, fd) of the directory `path` (absolute, canonical), each
    component opened without following a link; raises Refused saying why not."""
    parts = path.split("/")[1:] if path.startswith("/") else []
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise Refused("not an absolute canonical path")
    fds: list[int] = [os.open("/", _DIR)]
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                fds.append(os.open(name, _DIR, dir_fd=fds[-1]))
            except FileNotFoundError:
                raise Refused("gone") from None
            except OSError as exc:
                # A link fails O_NOFOLLOW | O_DIRECTORY with ENOTDIR (ELOOP without the
                # latter), as a file does; which of the two is asked only to say why.
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and not last:
                    raise Refused("not a canonical path (a link or .. on the way)") from None
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Refused("a symbolic link" if _is_link(fds[-1], name) else
                                  "not a directory") from None
                raise Refused(f"cannot be opened ({exc.strerror})") from None
            if len(fds) > 2:
                os.close(fds.pop(0))
        yield fds[0], parts[-1], fds[1]
    finally:
        for fd in fds:
            os.close(fd)


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def check_mark(fd: int, token: str) -> None:
    """Raise Refused unless the directory `fd` holds a regular mark file with `token`."""
    try:
        # O_NONBLOCK: a FIFO planted as the mark must not hang the check.
        m = os.open(OWNER_MARK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    dir_fd=fd)
    except OSError:
        raise Refused("holds no owner mark of the kit") from None
    try:
        if not stat.S_ISREG(os.fstat(m).st_mode):
            raise Refused("holds no owner mark of the kit")
        if os.read(m, 65).decode("ascii", "replace") != token:
            raise Refused("marked by another run")
    finally:
        os.close(m)


def _same(parent: int, name: str, fd: int) -> bool:
    try:
        there = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return False
    here = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)


def remove_at(dir_fd: int, name: str) -> None:
    """Remove the entry `name` of the directory `dir_fd` (a tree: through descriptors)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except IsADirectoryError:
        shutil.rmtree(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except PermissionError:  # Linux says EPERM, not EISDIR, for unlink of a directory
        if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise
        shutil.rmtree(name, dir_fd=dir_fd)


def empty_out(fd: int, keep: Callable[[str], bool] = lambda name: False) -> None:
    """Remove every entry of the directory `fd` but those `keep` names."""
    for name in os.listdir(fd):
        if not keep(name):
            remove_at(fd, name)


def remove_dir(path: str, token: str) -> None:
    """Remove the work directory `path` if it holds `token`'s mark; Refused otherwise."""
    with opened(path) as (parent, name, fd):
        check_mark(fd, token)
        empty_out(fd)
        if _same(parent, name, fd):
            os.rmdir(name, dir_fd=parent)


def remove_empty_dir(path: str, token: str) -> bool:
    """Remove `path` if it holds `token`'s mark and nothing else; whether it was."""
    with opened(path) as (parent, name, fd):
        check_mark(fd, token)
        if os.listdir(fd) != [OWNER_MARK] or not _same(parent, name, fd):
            return False
        os.unlink(OWNER_MARK, dir_fd=fd)
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError:  # something arrived meanwhile: it stays, proven as before
            _write_mark(fd, token)
            return False
        return True


def prune_dir(path: str, token: str, keep: Sequence[str]) -> None:
    """Remove from `path` (holding `token`'s mark) every entry but the mark and those whose
    names begin with one of `keep`."""
    with opened(path) as (_, _, fd):
        check_mark(fd, token)
        empty_out(fd, lambda n: n == OWNER_MARK or any(n.startswith(k) for k in keep))


def check_dir(path: str, token: str) -> None:
    """Refused unless `path` is a directory holding `token`'s mark (nothing changes)."""
    with opened(path) as (_, _, fd):
        check_mark(fd, token)


def check_file(path: str, token: str) -> None:
    """Refused unless `path` names a file (or no file yet) directly in a directory holding
    `token`'s mark, and is not a symbolic link (nothing changes)."""
    _file_at(path, token, remove=False)


def remove_file(path: str, token: str) -> None:
    """`check_file`, then remove the file through its directory's descriptor (a name with
    no file is fine)."""
    _file_at(path, token, remove=True)


def _file_at(path: str, token: str, *, remove: bool) -> None:
    parent, _, base = path.rpartition("/")
    if base in ("", ".", "..", OWNER_MARK) or not parent:
        raise Refused("not a file name")
    with _parent_of_file(parent, token) as fd:
        try:
            st = os.stat(base, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise Refused("a symbolic link")
        if stat.S_ISDIR(st.st_mode):
            raise Refused("not a file")
        if remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(base, dir_fd=fd)


@contextlib.contextmanager
def _parent_of_file(parent: str, token: str) -> Iterator[int]:
    """The descriptor of a file's directory, proven the kit's, open while in use."""
    with contextlib.ExitStack() as stack:
        try:
            _, _, fd = stack.enter_context(opened(parent))
            check_mark(fd, token)
        except Refused as why:
            if str(why) == "gone":
                raise
            raise Refused(f"its directory {parent} is not the kit's: {why}") from None
        yield fd


def _write_mark(fd: int, token: str) -> None:
    with contextlib.suppress(OSError):
        m = os.open(OWNER_MARK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                    dir_fd=fd)
        try:
            os.write(m, token.encode())
        finally:
            os.close(m)


# -- processes ----------------------------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on, or None where there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return text.rpartition(") ")[2].split()


def _has_token(pid: int, token: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    return f"{OWNER_ENV}={token}".encode() in env.split(b"\0")


def _alive(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    return True


def pin(pid: int, ticks: int | None, token: str) -> int:
    """A pidfd of process `pid`, proven the kit's: it runs with the recorded start time
    (clock ticks after boot) and `token` in its environment. Refused otherwise."""
    if ticks is None:
        raise Refused("recorded without a start time")
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        raise Refused("gone") from None
    try:
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 20 or fields[0] == "Z":
            raise Refused("gone")
        if int(fields[19]) != ticks:
            raise Refused("another process now (its start time differs)")
        if not _has_token(pid, token):
            raise Refused("not started by this run (no owner token in its environment)")
        # Alive now, after the reads: what was read was the pinned process's, not a
        # process that took its pid after it exited.
        if not _alive(fd):
            raise Refused("gone")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _group_members(leader: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != leader:
            fields = _stat_fields(int(entry))
            if fields is not None and len(fields) > 2 and fields[2] == str(leader):
                out.append(int(entry))
    return out


def signal_group(leader_fd: int, leader: int, sig: int) -> None:
    """Send `sig` to the pinned process `leader` and to each member of its process group,
    each pinned by its own pidfd while the leader is alive (so the group is its)."""
    with contextlib.suppress(ProcessLookupError):
        signal.pidfd_send_signal(leader_fd, sig)
    for pid in _group_members(leader):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            fields = _stat_fields(pid)
            if (fields is not None and len(fields) > 2 and fields[2] == str(leader)
                    and _alive(fd) and (_alive(leader_fd) or sig == signal.SIGKILL)):
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(fd, sig)
        finally:
            os.close(fd)


def stop(token: str, procs: Iterable[tuple[int, int | None]], grace_s: float
         ) -> dict[int, str | None]:
    """TERM (and CONT) the groups of the processes proven the kit's (`pin`), wait up to
    `grace_s` for their leaders, KILL what is left; pid -> None where stopped, "gone"
    where it did not run, else why it was left alone."""
    out: dict[int, str | None] = {}
    pinned: dict[int, int] = {}
    for pid, ticks in procs:
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
            out[pid] = "not a process id"
            continue
        try:
            pinned[pid] = pin(pid, ticks, token)
            out[pid] = None
        except Refused as why:
            out[pid] = str(why)
    try:
        for pid, fd in pinned.items():
            signal_group(fd, pid, signal.SIGTERM)
            signal_group(fd, pid, signal.SIGCONT)  # a stopped process cannot act on TERM
        deadline = time.monotonic() + grace_s
        left = dict(pinned)
        while left and time.monotonic() < deadline:
            # A pidfd turns readable when its process exits (a zombie too, which a
            # signal 0 would still find).
            ready, _, _ = select.select(list(left.values()), [], [],
                                        max(0.0, deadline - time.monotonic()))
            left = {p: fd for p, fd in left.items() if fd not in ready}
        for pid, fd in left.items():
            signal_group(fd, pid, signal.SIGKILL)
    finally:
        for fd in pinned.values():
            os.close(fd)
    return out


# -- the request ----------------------------------------------------------------------------
def _each(paths: object, act: Callable[[str], object]) -> list[object]:
    """[result or {"refused": why}] per path, in order."""
    out: list[object] = []
    for p in paths if isinstance(paths, list) else []:
        try:
            if not isinstance(p, str) or "\0" in p:
                raise Refused("not a path")
            out.append(act(p))
        except Refused as why:
            out.append({"refused": str(why)})
        except OSError as exc:
            out.append({"refused": f"could not be removed ({exc.strerror or exc})"})
    return out


def handle(req: dict) -> object:
    """Carry out one request (see `harness.hosts.owned` for who sends which)."""
    token = req.get("token")
    if not isinstance(token, str) or len(token) != 32:
        raise ValueError("no valid owner token")
    op, items = req.get("op"), req.get("items")
    if op == "check_dirs":
        return _each(items, lambda p: check_dir(p, token))
    if op == "check_files":
        return _each(items, lambda p: check_file(p, token))
    if op == "remove_dirs":
        return _each(items, lambda p: remove_dir(p, token))
    if op == "remove_empty_dirs":
        return _each(items, lambda p: remove_empty_dir(p, token))
    if op == "remove_files":
        return _each(items, lambda p: remove_file(p, token))
    if op == "prune":
        keep = [k for k in req.get("keep", []) if isinstance(k, str) and k and "/" not in k]
        return _each(items, lambda p: prune_dir(p, token, keep))
    if op == "stop":
        procs = [(p[0], p[1]) for p in items or [] if isinstance(p, list) and len(p) == 2
                 and (p[1] is None or isinstance(p[1], int))]
        grace = req.get("grace_s", 10.0)
        got = stop(token, procs, float(grace) if isinstance(grace, int | float) else 10.0)
        return [[pid, why] for pid, why in got.items()]
    raise ValueError(f"unknown op {op!r}")


def main() -> int:
    try:
        req = json.loads(sys.stdin.read(1 << 24))
        answer = handle(req if isinstance(req, dict) else {})
    except (ValueError, TypeError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    print(json.dumps({"ok": answer}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
