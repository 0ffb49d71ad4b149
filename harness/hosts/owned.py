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

One command per call and host, for any number of items: `harness.hosts.fdsafe` runs
where the items are, local or over SSH, and checks and removes (or signals) through the
descriptors it opened, so nothing is looked up twice (a check and then an `rm -rf` by
name could be sent elsewhere by a parent directory exchanged for a link in between).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence

from harness.hosts.base import OWNER_ENV, Host
from harness.hosts.base import OWNER_MARK as MARK

_TOKEN = re.compile(r"^[0-9a-f]{32}$")
#: Anything a path may not hold to be checked in one line of the script's output.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")

#: How long one request to `harness.hosts.fdsafe` may take (a removal of a large tree).
_HELPER_TIMEOUT_S = 600


def new_token() -> str:
    """A fresh owner token (128 random bits, hex)."""
    return secrets.token_hex(16)


def is_token(value: object) -> bool:
    return isinstance(value, str) and bool(_TOKEN.match(value))


def owned_dirs(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """path -> None where it is a work directory this token's run made on `host`, else
    why not (one line). No command runs for a bad token or paths that cannot be one."""
    return _ask(host, "check_dirs", token, paths)


def owned_files(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """path -> None where it is a file (or a name for one) directly in a work directory
    this token's run made on `host`, and not a symbolic link; "gone" where that
    directory is gone; else why not."""
    return _ask(host, "check_files", token, paths)


def remove_owned_dirs(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """Remove each of `paths` proven the kit's (as `owned_dirs`); path -> None where
    removed (or gone already), else why it was left alone."""
    got = _ask(host, "remove_dirs", token, paths)
    return {p: None if why == "gone" else why for p, why in got.items()}


def remove_owned_empty_dirs(host: Host, token: str, paths: Sequence[str]) -> list[str]:
    """Remove each of `paths` proven the kit's (`owned_dirs`) that holds nothing but its
    owner mark (a work directory whose files were all collected and discarded); the
    paths removed. A directory with anything else in it stays: it may hold records."""
    return [p for p, removed in _ask(host, "remove_empty_dirs", token, paths, raw=True).items()
            if removed is True]


def prune_owned_dir(host: Host, token: str, path: str, keep: Sequence[str]) -> bool:
    """Remove from directory `path`, proven the kit's (`owned_dirs`), every entry but its
    owner mark and those whose names begin with one of the prefixes `keep`; True if it
    was the kit's and pruned."""
    prefixes = list(keep)
    if not all(isinstance(k, str) and k and "/" not in k for k in prefixes):
        return False  # a client not named: keep it all
    return _ask(host, "prune", token, [path], keep=prefixes).get(path, "") is None


def remove_owned_files(host: Host, token: str, paths: Sequence[str]) -> dict[str, str | None]:
    """Remove each of `paths` proven the kit's (as `owned_files`); path -> None where
    removed (or never there), else why it was left alone ("gone" with its directory)."""
    return _ask(host, "remove_files", token, paths)


def stop_owned(host: Host, token: str, procs: Iterable[tuple[int, int | None]],
               grace_s: float = 10.0) -> dict[int, str | None]:
    """TERM (and CONT) the process groups of the processes proven this token's run's (its
    recorded start time and the token in its environment), wait up to `grace_s`, KILL
    what is left; pid -> None where stopped, "gone" where none ran, else why it was left
    alone. Each process is pinned by a pidfd before it is checked and signalled through
    it, so a pid handed to another process meanwhile is never signalled."""
    procs = list(procs)
    if not is_token(token):
        return {pid: "no valid owner token" for pid, _ in procs}
    req = {"op": "stop", "token": token, "grace_s": float(grace_s),
           "items": [[pid, ticks] for pid, ticks in procs]}
    answer = _helper(host, req, timeout=grace_s + 60)
    got: dict[int, str | None] = {}
    for item in answer or []:
        if (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)
                and (item[1] is None or isinstance(item[1], str))):
            got[item[0]] = item[1]
    return {pid: got.get(pid, "could not be checked") for pid, _ in procs}


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


def _ask(host: Host, op: str, token: str, paths: Sequence[str], *, raw: bool = False,
         **more: object) -> dict[str, object]:
    """path -> None where `op` held (or its result, with `raw`), else why not: one
    `harness.hosts.fdsafe` request on `host` for the paths that can be paths at all."""
    out: dict[str, object] = {}
    ask: list[str] = []
    for p in dict.fromkeys(paths):
        why = _path_problem(p) or (None if is_token(token) else "no valid owner token")
        if why is not None:
            out[p] = why
        else:
            ask.append(p)
    if ask:
        answer = _helper(host, {"op": op, "token": token, "items": ask, **more})
        answer = answer if isinstance(answer, list) and len(answer) == len(ask) else None
        for i, p in enumerate(ask):
            item = answer[i] if answer is not None else {"refused": "could not be checked"}
            if isinstance(item, dict):
                refused = item.get("refused")
                out[p] = refused if isinstance(refused, str) else "could not be checked"
            else:
                out[p] = item if raw else None
    return out


def _helper(host: Host, req: dict[str, object], timeout: float = _HELPER_TIMEOUT_S) -> object:
    """The answer of `harness.hosts.fdsafe` on `host` to `req`, or None."""
    res = host.run([host.python, "-m", "harness.hosts.fdsafe"], input=json.dumps(req),
                   check=False, timeout=timeout)
    try:
        answer = json.loads(res.stdout)
    except ValueError:
        return None
    return answer.get("ok") if isinstance(answer, dict) else None
