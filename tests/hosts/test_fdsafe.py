"""Removing and signalling what the kit owns without a second look-up
(`harness.hosts.fdsafe`, sent by `harness.hosts.owned`), under the attack the security
review made: a second process keeps exchanging a parent directory of an owned work
directory with a symbolic link to a directory that is not the kit's (renameat2
RENAME_EXCHANGE), while the kit removes the work directory. Nothing outside the owned
tree may be touched, whichever way each exchange falls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.hosts import LocalHost, fdsafe
from harness.hosts.base import OWNER_ENV
from harness.hosts.owned import (
    mark_local,
    new_token,
    owned_dirs,
    owned_files,
    prune_owned_dir,
    remove_owned_dirs,
    remove_owned_empty_dirs,
    remove_owned_files,
    stop_owned,
)

#: Exchanges `a` and `b` (a directory and a link) as fast as it can until killed.
RACER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
print("racing", flush=True)
while True:
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
"""


@pytest.fixture
def race(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    """(descriptor of the real a/, victim, root): root/a is a real directory half the time
    and a link to `victim`'s directory the other half; `victim` holds a precious file and
    no mark, at the same relative place as the owned work directory a/work."""
    root = Path(os.path.realpath(tmp_path))
    parent = root / "a"
    parent.mkdir()
    # Reaches the real directory whichever name the race has given it.
    real = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    outside = root / "outside"
    victim = outside / "work"
    victim.mkdir(parents=True)
    (victim / "precious").write_text("not the kit's")
    link = root / "alink"
    link.symlink_to(outside)
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(parent), str(link)],
                             stdout=subprocess.PIPE, text=True)
    assert racer.stdout is not None and racer.stdout.readline() == "racing\n"
    try:
        yield real, victim, root
    finally:
        racer.kill()
        racer.wait()
        os.close(real)
    assert racer.returncode == -signal.SIGKILL, "the racer stopped by itself"


def _fresh_owned(real: int, root: Path, token: str) -> str:
    """Make the owned work directory a/work (with a file and a subdirectory), through a
    descriptor of the real directory that a/ names half the time (the test's own set-up
    must not follow the link either); its path as the kit is given it."""
    if "work" not in os.listdir(real):
        os.mkdir("work", dir_fd=real)
        for name, text in (("work/run00000-c000.npz", "records"),
                           ("work/.kvbench-owner", token)):
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=real)
            os.write(fd, text.encode())
            os.close(fd)
        os.mkdir("work/sub", dir_fd=real)
    return str(root / "a" / "work")


def _untouched(victim: Path) -> None:
    assert (victim / "precious").read_text() == "not the kit's"
    assert sorted(os.listdir(victim)) == ["precious"]


def test_removal_never_follows_an_exchanged_parent(race: tuple[int, Path, Path]) -> None:
    real, victim, root = race
    token = new_token()
    outcomes: dict[str, int] = {}
    for _ in range(1000):
        path = _fresh_owned(real, root, token)
        try:
            fdsafe.remove_dir(path, token)
            why = "removed"
        except fdsafe.Refused as exc:
            why = str(exc)
        outcomes[why] = outcomes.get(why, 0) + 1
        _untouched(victim)
    # The race ran both ways: some attempts met the link and were refused, some removed
    # the real work directory; the directory outside was never touched.
    assert outcomes.get("removed", 0) > 0, outcomes
    assert outcomes.get("not a canonical path (a link or .. on the way)", 0) > 0, outcomes
    assert set(outcomes) <= {"removed", "not a canonical path (a link or .. on the way)"}


def test_files_prune_and_empty_removal_never_follow_an_exchanged_parent(
        race: tuple[int, Path, Path]) -> None:
    real, victim, root = race
    token = new_token()
    (victim / ".kvbench-owner").write_text(new_token())  # marked, by another run
    removed = 0
    for i in range(300):
        path = _fresh_owned(real, root, token)
        act = i % 3
        try:
            if act == 0:
                fdsafe.remove_file(f"{path.rsplit('/', 1)[0]}/work/precious", token)
                fdsafe.remove_file(f"{path}/run00000-c000.npz", token)
            elif act == 1:
                fdsafe.prune_dir(path, token, ["nothing-kept"])
            else:
                fdsafe.remove_empty_dir(path, token)
            removed += 1
        except fdsafe.Refused:
            pass
        assert (victim / "precious").read_text() == "not the kit's"
        assert sorted(os.listdir(victim)) == [".kvbench-owner", "precious"]
    assert removed > 0


def test_through_the_host_the_race_is_lost_too(race: tuple[int, Path, Path]) -> None:
    """The same, as `harness cleanup` does it: `remove_owned_dirs` on a Host (which runs
    `python -m harness.hosts.fdsafe` there), 40 times."""
    real, victim, root = race
    token = new_token()
    seen: set[str | None] = set()
    with LocalHost() as host:
        for _ in range(40):
            path = _fresh_owned(real, root, token)
            seen.add(remove_owned_dirs(host, token, [path])[path])
            _untouched(victim)
    assert seen <= {None, "not a canonical path (a link or .. on the way)"}


def _workdir(base: Path, name: str, token: str | None, files: list[str]) -> str:
    d = base / name
    d.mkdir()
    path = mark_local(str(d), token) if token else os.path.realpath(d)
    for f in files:
        Path(path, f).write_text("x")
    return path


def test_each_refusal_names_its_reason(tmp_path: Path) -> None:
    token = new_token()
    mine = _workdir(tmp_path, "mine", token, ["f", "run1.npz"])
    other = _workdir(tmp_path, "other", new_token(), ["f"])
    bare = _workdir(tmp_path, "bare", None, ["f"])
    (tmp_path / "link").symlink_to(mine)
    link = str(Path(os.path.realpath(tmp_path), "link"))
    Path(mine, "ln").symlink_to(Path(bare, "f"))
    fifo = _workdir(tmp_path, "fifo", None, [])
    os.mkfifo(Path(fifo, ".kvbench-owner"))  # must not hang the check
    with LocalHost() as host:
        dirs = owned_dirs(host, token, [mine, other, bare, link, fifo,
                                        str(tmp_path / "none"), "relative", f"{mine}/../mine"])
        files = owned_files(host, token, [f"{mine}/f", f"{mine}/ln", f"{other}/f",
                                          f"{mine}/.kvbench-owner", f"{tmp_path}/none/f"])
        assert remove_owned_files(host, token, [f"{mine}/ln", f"{mine}/f"]) == {
            f"{mine}/ln": "a symbolic link", f"{mine}/f": None}
        assert prune_owned_dir(host, token, mine, ["run1"])
        assert sorted(os.listdir(mine)) == [".kvbench-owner", "run1.npz"]  # the link went
        assert remove_owned_empty_dirs(host, token, [mine]) == []
        assert remove_owned_dirs(host, token, [mine, other]) == {
            mine: None, other: "marked by another run"}
    assert dirs == {
        mine: None, other: "marked by another run", bare: "holds no owner mark of the kit",
        link: "a symbolic link", fifo: "holds no owner mark of the kit",
        str(tmp_path / "none"): "gone", "relative": "not an absolute path",
        f"{mine}/../mine": "not an absolute canonical path"}
    assert files == {
        f"{mine}/f": None, f"{mine}/ln": "a symbolic link",
        f"{other}/f": f"its directory {other} is not the kit's: marked by another run",
        f"{mine}/.kvbench-owner": "not a file name", f"{tmp_path}/none/f": "gone"}
    assert not Path(mine).exists()
    assert Path(bare, "f").read_text() == "x"  # the link's target is untouched


def _start(token: str | None, *, ignore_term: bool = False) -> subprocess.Popen[bytes]:
    """A session leader with a child in its group; with `ignore_term`, both ignore TERM."""
    trap = "trap '' TERM; " if ignore_term else ""
    env = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    if token:
        env[OWNER_ENV] = token
    return subprocess.Popen(["sh", "-c", f"{trap}sleep 300 & echo $!; wait"], env=env,
                            stdout=subprocess.PIPE, start_new_session=True)


def _ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()[19])


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_stopping_signals_only_the_proven_groups_and_kills_what_ignores_term() -> None:
    token = new_token()
    mine, stubborn, stranger, wrong = (_start(token), _start(token, ignore_term=True),
                                       _start(None), _start(token))
    procs = [mine, stubborn, stranger, wrong]
    children = [int(p.stdout.readline()) for p in procs if p.stdout is not None]
    try:
        with LocalHost() as host:
            got = stop_owned(host, token, [
                (mine.pid, _ticks(mine.pid)), (stubborn.pid, _ticks(stubborn.pid)),
                (stranger.pid, _ticks(stranger.pid)), (wrong.pid, _ticks(wrong.pid) + 1),
                (999_999_999, 5), (children[2], None)], grace_s=1.0)
        for p in (mine, stubborn):
            p.wait(timeout=30)
        assert got[mine.pid] is None and got[stubborn.pid] is None
        assert got[stranger.pid] == ("not started by this run (no owner token in its "
                                     "environment)")
        assert got[999_999_999] == "gone"
        assert got[wrong.pid] == "another process now (its start time differs)"
        assert got[children[2]] == "recorded without a start time"
        assert stubborn.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 30
        while not (_gone(children[0]) and _gone(children[1])) and time.monotonic() < deadline:
            time.sleep(0.05)  # the group's children, reaped by init
        assert _gone(children[0]) and _gone(children[1])
        assert stranger.poll() is None and wrong.poll() is None
        assert not _gone(children[2]) and not _gone(children[3])
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
