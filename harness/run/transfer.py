"""Copying client records to the control machine so that none can be lost.

Each record file is copied (SFTP, or an exec channel where a machine has none) and its
copy's sha256 checked against the one computed on the client machine; the files there
are only listed as removable, and removed by the caller once the run is written. A copy
that fails leaves the files where they are, as `PendingRecords` naming machine and path
(`harness collect` fetches them later: `harness.run.recollect`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from harness.errors import HostError
from harness.hosts import Host
from harness.results import sha256_file
from harness.results.columns import is_columns

T = TypeVar("T")


def _once_more(host: Host, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, tried a second time on a host that reconnects a dropped link (for
    steps that only read, so a repeat is harmless)."""
    try:
        return fn(*args)
    except HostError:
        if not hasattr(host, "reconnect"):
            raise
        return fn(*args)


def client_prefix(files: Mapping[str, str]) -> str:
    """What the names of one client's files in its work directory begin with
    (``run00005-c000.``: its configuration, log, status, records and their parts), from
    its records file's name; '' if that is not a records file."""
    name = str(files.get("out", "")).rpartition("/")[2]
    return name.removesuffix(".npz") + "." if name.endswith(".npz") and name != ".npz" else ""


@dataclass(frozen=True)
class PendingRecords:
    """A client process's records left on its machine, not yet copied and verified here."""

    host: str
    client: int
    #: Where they are on that machine: the records (`out`), the status, and the rest.
    files: dict[str, str]
    #: The line in the run's error that says so (removed once they are collected).
    error: str
    #: The owner token of the run that made the work directory they are in
    #: (`harness.hosts.owned`): `harness collect` reads and removes only what it proves.
    owner: str = ""


@dataclass
class Fetched:
    #: Verified local copies of the records files, in order: each client's parts (the
    #: chunks it spilled while it ran) and then its records file.
    parts: list[Path] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pending: list[PendingRecords] = field(default_factory=list)
    discardable: list[str] = field(default_factory=list)


def _ctl_json(host: Host, *args: str) -> dict[str, Any]:
    res = _once_more(host, host.run, [host.python, "-m", "harness.workerctl", *args])
    return dict(json.loads(res.stdout))


def fetch_records(host: Host, clients: Sequence[tuple[int, Mapping[str, str]]], tmp: Path,
                  log_tail: Callable[[int], str] | None = None,
                  spec_path: str = "SPEC", unfinished_pending: bool = False,
                  info: Callable[[list[str], list[str]], tuple[dict, dict]] | None = None
                  ) -> Fetched:
    """Copy the records of `clients` (client id, its files) from `host` into `tmp`: the
    parts each spilled while it ran (`loadgen.spill`, listed in its status with their
    sha256) and its records file. Each copy of a records file is checked against the
    sha256 that `workerctl digest` computes on the host (and the one the worker wrote
    into its status, if any), a part's against the one its status gives; only then are
    that client's files listed as `discardable` (removed once the run is written).
    Whatever cannot be copied is `pending`,
    with an error naming the machine and the path. With `unfinished_pending`, a client
    without a status file (still running: its machine could not be told to stop) is
    pending too, not taken as dead."""
    out = Fetched()
    where = f"{host.name} ({getattr(host, 'target', host.name)})"

    def pending(cid: int, files: Mapping[str, str], why: str) -> None:
        line = (f"client {cid} on {host.name}: records not copied ({why}); they are still "
                f"on {where} at {files['out']}; `harness collect {spec_path}` (or "
                f"`harness run {spec_path} --resume`) fetches them")
        out.errors.append(line)
        out.pending.append(PendingRecords(host.name, cid, dict(files), line,
                                          host.owner or ""))

    try:
        # The parts index of each process too: what one that died had spilled.
        status_files = [f[k] for _, f in clients for k in ("status", "parts") if k in f]
        out_files = [f["out"] for _, f in clients]
        if info is not None:  # over an agent link
            found, digests = info(status_files, out_files)
        else:
            found = _ctl_json(host, "status", *status_files)
            digests = _ctl_json(host, "digest", *out_files)
    except (HostError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        for cid, files in clients:
            out.statuses.append({"client": cid, "host": host.name, "state": "uncollected"})
            pending(cid, files, why)
        return out
    done: list[str] = []
    for cid, files in clients:
        if unfinished_pending and found.get(files["status"]) is None:
            out.statuses.append({"client": cid, "host": host.name, "state": "uncollected"})
            pending(cid, files, "the client process has not finished: no status file yet")
            continue
        status: dict[str, Any] = {"client": cid, "host": host.name}
        died = found.get(files["status"]) is None
        status.update(found.get(files["status"]) or {
            "state": "failed", "error": "no status file (the process died)"})
        out.statuses.append(status)
        remote = digests.get(files["out"])
        index = status.get("parts") if not died else found.get(files.get("parts", ""))
        # A part is a file beside the records file, as the worker writes them; a status
        # naming any other file is not followed.
        here = files["out"].rpartition("/")[0]
        spilled = [p for p in index or [] if isinstance(p, dict)
                   and str(p.get("file", "")).rpartition("/")[0] == here]
        if "parts" in status and not died:
            status["parts"] = spilled
        if died and spilled:  # what it had written before it died is kept
            status["parts"] = spilled
            status["records"] = sum(int(p.get("records", 0)) for p in spilled)
            status["error"] += (f"; the {status['records']:,} records it had written "
                                f"({len(spilled)} parts) are kept")
        # (remote file, local copy, the sha256s it may have): the parts, then `out`.
        copies = [(str(p["file"]), tmp / f"{host.name}-c{cid}.part{k:05d}.npz",
                   {str(p["sha256"])}) for k, p in enumerate(spilled)]
        if remote is not None:
            copies.append((files["out"], tmp / f"{host.name}-c{cid}.npz", {
                remote["sha256"], *([status["out"]["sha256"]]
                                    if isinstance(status.get("out"), dict) else [])}))
        if not copies:  # no records file: the status says why
            done.append(cid)
        else:
            local: list[Path] = []
            why = bad = None
            for remote_path, copy, expected in copies:
                why = _copy_verified(host, remote_path, copy, expected)
                if why is not None:
                    break
                try:
                    _check_npz(copy)
                except (OSError, ValueError, KeyError) as exc:
                    # An intact copy of a bad file: keep the original for inspection.
                    bad = (f"client {cid} on {host.name}: records file {remote_path} is "
                           f"unreadable ({exc}); left there")
                    break
                local.append(copy)
            if why is not None:
                status["collected"] = False
                pending(cid, files, why)
                continue
            if bad is not None:
                out.errors.append(bad)
                continue
            out.parts += local
            done.append(cid)
        if status.get("state") in ("failed", "aborted"):
            tail = log_tail(cid) if log_tail and status["state"] == "failed" else ""
            out.errors.append(f"client {cid} on {host.name}: {status.get('error')}"
                              + (f"\n{tail}" if tail else ""))
    files_of = dict(clients)
    parts_of = {s["client"]: [str(p["file"]) for p in s.get("parts") or []
                              if isinstance(p, dict)] for s in out.statuses}
    out.discardable = [f for cid in done for f in (
        *(files_of[cid][k] for k in ("ready", "go", "status", "out", "alive", "parts")
          if k in files_of[cid]), *parts_of.get(cid, []))]
    return out


def _check_npz(path: Path) -> None:
    """The copy is a records file numpy can read (its members are read when written)."""
    with np.load(path, allow_pickle=False) as z:
        names = {"op_names", "start", "end", "outcome"} if is_columns(z.files) else {
            "op_names", "start_ns", "latency_ns"}
        missing = names - set(z.files)
        if missing:
            raise KeyError(f"no {', '.join(sorted(missing))}")


def remove_files(host: Host, files: Sequence[str]) -> None:
    if files:
        with contextlib.suppress(HostError):
            host.run(["rm", "-f", "--", *files], check=False)


def _copy_verified(host: Host, remote: str, local: Path, expected: set[str]) -> str | None:
    """Copy `remote` to `local` (a second try after a failed copy or a mismatch); None
    when the copy's sha256 is the one computed on the host, else why not."""
    why = ""
    for _ in range(2):
        try:
            _once_more(host, host.get, remote, local)
        except HostError as exc:
            why = str(exc).splitlines()[0]
            continue
        actual = sha256_file(local)
        if len(expected) == 1 and actual in expected:
            return None
        why = (f"checksum mismatch: copy {actual[:16]}..., on the machine "
               f"{' / '.join(sorted(e[:16] + '...' for e in expected))}")
    local.unlink(missing_ok=True)
    return why
