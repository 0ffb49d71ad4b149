"""Proof that a directory, a file or a process is the kit's own, before it is removed or
signalled on the word of something read back (a state file, a manifest).

What the kit reads back from disk may have been written by someone else (a colleague's
results tree, a tampered state file), so a path or a pid in it proves nothing. Each
`harness run` draws a random *owner token* and leaves it where only the kit puts it:

- in a **mark file** (`MARK`) inside every work directory it makes (`Host.mkdtemp` on a
  host whose `owner` is set), and
- in the **environment** (`OWNER_ENV`) of every process it starts there (`Host.start`,
  the agents and the workers they fork).

The token is recorded with what it names (the state file, a manifest's pending records).
Something read back is acted on only if, on that host now:

- a directory is an absolute, canonical path (no symbolic link on the way, no `..`),
  is not itself a link, and holds a regular mark file with the recorded token;
- a file lies directly in such a directory and is not a link;
- a process has the recorded start time (so a reused pid is told apart) and carries the
  token in its environment (so a pid copied from `ps` into a forged file is not).

One shell command per call and host, for any number of items: the checks run where the
items are, local or over SSH, with nothing but POSIX sh, coreutils and /proc.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence

from harness.hosts.base import OWNER_ENV, Host
from harness.hosts.base import OWNER_MARK as MARK

_TOKEN = re.compile(r"^[0-9a-f]{32}$")
#: Anything a path may not hold to be checked in one line of the script's output.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")

_DIRS = r"""
t=$1; shift
for p; do
  case $p in /*) ;; *) echo "not an absolute path"; continue;; esac
  if [ -L "$p" ]; then echo "a symbolic link"; continue; fi
  if [ ! -e "$p" ]; then echo "gone"; continue; fi
  if [ ! -d "$p" ]; then echo "not a directory"; continue; fi
  if [ "$(realpath -e -- "$p" 2>/dev/null)" != "$p" ]; then
    echo "not a canonical path (a link or .. on the way)"; continue; fi
  m="$p/.kvbench-owner"
  if [ -L "$m" ] || [ ! -f "$m" ]; then echo "holds no owner mark of the kit"; continue; fi
  if [ "$(head -c 64 -- "$m")" != "$t" ]; then echo "marked by another run"; continue; fi
  echo ok
done
"""

_PIDS = r"""
t=$1; shift
for p; do
  if [ -r "/proc/$p/stat" ] && read -r s < "/proc/$p/stat"; then
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qxF "KVBENCH_OWNER=$t"
    then e=1; else e=0; fi
    echo "$p $e ${s##*) }"
  fi
done
"""


def new_token() -> str:
    """A fresh owner token (128 random bits, hex)."""
    return secrets.token_hex(16)


def is_token(value: object) -> bool:
    return isinstance(value, str) and bool(_TOKEN.match(value))


def owned_dirs(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """path -> None where it is a work directory this token's run made on `host`, else
    why not (one line). No command runs for a bad token or paths that cannot be one."""
    out: dict[str, str | None] = {}
    ask: list[str] = []
    for p in dict.fromkeys(paths):
        why = _path_problem(p) or (None if is_token(token) else "no valid owner token")
        if why is not None:
            out[p] = why
        else:
            ask.append(p)
    if ask:
        res = host.run(["sh", "-c", _DIRS, "sh", token, *ask], check=False, timeout=60)
        lines = res.stdout.splitlines()
        for i, p in enumerate(ask):
            line = lines[i] if i < len(lines) else f"could not be checked (exit {res.returncode})"
            out[p] = None if line == "ok" else line
    return out


def owned_files(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """path -> None where it is a file (or a name for one) directly in a work directory
    this token's run made on `host`, and not a symbolic link; "gone" where that
    directory is gone; else why not."""
    out: dict[str, str | None] = {}
    parents: dict[str, list[str]] = {}
    for p in dict.fromkeys(paths):
        why = _path_problem(p)
        parent, _, base = p.rpartition("/") if why is None else ("", "", "")
        if why is None and (base in ("", ".", "..", MARK) or not parent):
            why = "not a file name"
        if why is not None:
            out[p] = why
        else:
            parents.setdefault(parent, []).append(p)
    dirs = owned_dirs(host, token, list(parents))
    links = _links(host, [p for d, ps in parents.items() if dirs[d] is None for p in ps])
    for d, ps in parents.items():
        for p in ps:
            out[p] = ("gone" if dirs[d] == "gone"
                      else f"its directory {d} is not the kit's: {dirs[d]}" if dirs[d]
                      else "a symbolic link" if p in links else None)
    return out


def owned_pids(host: Host, token: str, procs: Iterable[tuple[int, int | None]]
               ) -> dict[int, str | None]:
    """pid -> None where the process runs now with the recorded start time (clock ticks
    after boot) and this token in its environment; else why not ("gone" when it does
    not run). A process recorded without a start time is never the kit's."""
    procs = list(procs)
    out: dict[int, str | None] = {}
    if not is_token(token):
        return {pid: "no valid owner token" for pid, _ in procs}
    pids = [pid for pid, _ in procs if isinstance(pid, int) and pid > 1]
    found: dict[int, tuple[bool, int]] = {}
    if pids:
        res = host.run(["sh", "-c", _PIDS, "sh", token, *map(str, pids)], check=False,
                       timeout=60)
        for line in res.stdout.splitlines():
            pid, env, *fields = line.split()
            # From field 3 (state) on: the start time is field 22; a zombie is gone.
            if len(fields) > 19 and fields[0] != "Z" and pid.isdigit():
                found[int(pid)] = (env == "1", int(fields[19]))
    for pid, ticks in procs:
        if pid not in found:
            out[pid] = "gone" if isinstance(pid, int) and pid > 1 else "not a process id"
        elif ticks is None:
            out[pid] = "recorded without a start time"
        elif found[pid][1] != ticks:
            out[pid] = "another process now (its start time differs)"
        elif not found[pid][0]:
            out[pid] = "not started by this run (no owner token in its environment)"
        else:
            out[pid] = None
    return out


def remove_owned_dirs(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """Remove each of `paths` proven the kit's (`owned_dirs`); path -> None where removed
    (or gone already), else why it was left alone."""
    checked = owned_dirs(host, token, paths)
    mine = [p for p, why in checked.items() if why is None]
    if mine:
        host.run(["rm", "-rf", "--", *mine], check=False)
    return {p: None if why in (None, "gone") else why for p, why in checked.items()}


def remove_owned_empty_dirs(host: Host, token: str, paths: Sequence[str]) -> list[str]:
    """Remove each of `paths` proven the kit's (`owned_dirs`) that holds nothing but its
    owner mark (a work directory whose files were all collected and discarded); the
    paths removed. A directory with anything else in it stays: it may hold records."""
    checked = owned_dirs(host, token, paths)
    mine = [p for p, why in checked.items() if why is None]
    if not mine:
        return []
    # A listing that fails (`find` missing, a permission) removes nothing.
    script = ('for d; do o=$(find "$d" -mindepth 1 -maxdepth 1 ! -name "$M" -print -quit) '
              '|| continue; [ -z "$o" ] && rm -rf -- "$d" && printf "%s\\n" "$d"; done')
    res = host.run(["sh", "-c", f"M={MARK}; {script}", "sh", *mine], check=False, timeout=60)
    return [line for line in res.stdout.splitlines() if line in mine]


def prune_owned_dir(host: Host, token: str, path: str, keep: Sequence[str]) -> bool:
    """Remove from directory `path`, proven the kit's (`owned_dirs`), every entry but its
    owner mark and those whose names begin with one of the prefixes `keep`; True if it
    was the kit's and pruned."""
    prefixes = list(keep)
    if not all(k and "/" not in k for k in prefixes):  # a client not named: keep it all
        return False
    if owned_dirs(host, token, [path]).get(path) is not None:
        return False
    script = ('d=$1; m=$2; shift 2; for f in "$d"/* "$d"/.[!.]*; do '
              '[ -e "$f" ] || [ -L "$f" ] || continue; b=${f##*/}; [ "$b" = "$m" ] && continue; '
              'k=0; for p; do case $b in "$p"*) k=1;; esac; done; '
              '[ $k = 1 ] || rm -rf -- "$f"; done')
    host.run(["sh", "-c", script, "sh", path, MARK, *prefixes], check=False, timeout=60)
    return True


def remove_owned_files(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """`remove_owned_dirs` for files (`owned_files`)."""
    checked = owned_files(host, token, paths)
    mine = [p for p, why in checked.items() if why is None]
    if mine:
        host.run(["rm", "-f", "--", *mine], check=False)
    return checked


def mark_local(path: str, token: str) -> str:
    """Put the owner mark into a directory made on this machine without a Host (a
    `tempfile.mkdtemp`); returns its canonical path."""
    real = os.path.realpath(path)
    fd = os.open(os.path.join(real, MARK), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return real


def boot_id(host: Host) -> str:
    """The boot id of `host`'s kernel ('' where it has none): a pid and its start time
    name one process only within one boot of one machine."""
    res = host.run(["cat", "/proc/sys/kernel/random/boot_id"], check=False, timeout=30)
    return res.stdout.strip() if res.ok else ""


def owner_env(owner: str | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` with the owner token added (as given when there is no owner)."""
    return {**(env or {}), **({OWNER_ENV: owner} if owner else {})}


def _path_problem(p: object) -> str | None:
    if not isinstance(p, str) or not p:
        return "not a path"
    if _UNSAFE.search(p) or len(p) > 4096:
        return "not a path (control characters or too long)"
    if not p.startswith("/"):
        return "not an absolute path"
    return None


def _links(host: Host, paths: list[str]) -> set[str]:
    if not paths:
        return set()
    script = 'for p; do if [ -L "$p" ]; then echo 1; else echo 0; fi; done'
    res = host.run(["sh", "-c", script, "sh", *paths], check=False, timeout=60)
    flags = res.stdout.splitlines()
    # A path whose answer is missing counts as a link: left alone.
    return {p for i, p in enumerate(paths) if i >= len(flags) or flags[i] != "0"}
