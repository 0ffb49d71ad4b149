"""Fetch records that runs left on client machines and complete those runs.

When copying a client's records failed (the machine became unreachable, the copy did
not match its checksum), the run was written `partial` or `failed`, its manifest lists
the files in `extra.pending_records`, and the files stay on the machine. `harness
collect SPEC` (and `harness run SPEC --resume`, before it runs anything) copies them,
checks each copy's sha256 against the one computed on the machine, merges the records
into the run, writes the run again under the same run id and only then removes the
files on the machine.

A manifest is read back, so the files it names prove nothing by themselves: each entry
must be of the shape the runner writes, name a host of the spec, and every file must lie
directly in a work directory holding the entry's owner mark (`harness.hosts.owned`).
A run with any other entry is named in one line and left as it is: nothing is read,
removed or rewritten.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from harness.errors import HarnessError, HostError
from harness.hosts import Host, connect_host
from harness.hosts.fdsafe import remove_at
from harness.hosts.owned import (
    is_token,
    owned_files,
    remove_owned_empty_dirs,
    remove_owned_files,
)
from harness.results import (
    STATUS_CODE,
    TMP_PREFIX,
    Manifest,
    OpsArrays,
    OpsParts,
    iter_run_dirs,
    read_manifest,
    read_ops,
    tally,
    verify_run,
    write_run,
)
from harness.run.runstatus import (
    quick_stats,
    run_counts,
    run_status,
    send_lag_p99_ms,
    target_met,
)
from harness.run.transfer import client_prefix, fetch_records
from harness.spec import RunPlan, Spec, expand
from harness.text import printable
from harness.workloads import WORKLOADS

PENDING = "pending_records"


@dataclass(frozen=True)
class CollectReport:
    runs_with_pending: int
    runs_completed: int
    #: Record files still on client machines after this attempt.
    files_still_pending: int


def ops_from_table(table: pa.Table, op_names: tuple[str, ...]) -> OpsArrays:
    """ops.parquet's table back into arrays, op codes in `op_names` order."""
    def codes(col: str, names: Mapping[str, int]) -> np.ndarray:
        values = table.column(col).to_pylist()
        return np.array([names[v] for v in values], dtype=np.int8)

    intended = table.column("intended_ns").to_numpy(zero_copy_only=False)
    return OpsArrays(
        op_names,
        client=table.column("client").to_numpy().astype(np.int32),
        op=codes("op", {n: i for i, n in enumerate(op_names)}),
        start_ns=table.column("start_ns").to_numpy().astype(np.int64),
        latency_ns=table.column("latency_ns").to_numpy().astype(np.int64),
        intended_ns=np.nan_to_num(intended.astype(float), nan=-1).astype(np.int64),
        status=codes("status", STATUS_CODE),
        nbytes=table.column("bytes").to_numpy().astype(np.int64),
        warmup=table.column("warmup").to_numpy(zero_copy_only=False).astype(np.bool_),
    )


def _pending_problem(pending: list[dict[str, Any]], spec: Spec) -> str | None:
    """Why `pending` (a manifest's entries) is not what the runner writes, or None."""
    owners = set()
    for i, p in enumerate(pending):
        files = p.get("files")
        if set(p) != {"host", "client", "files", "error", "owner"}:
            return f"entry {i} has fields {sorted(map(str, p))}, not the runner's"
        if not isinstance(p["host"], str) or p["host"] not in spec.hosts:
            return f"entry {i}: host {printable(p['host'])!r} is not a host of {spec.path}"
        if not isinstance(p["client"], int) or isinstance(p["client"], bool):
            return f"entry {i}: client is not a number"
        if not isinstance(p["error"], str):
            return f"entry {i}: error is not text"
        if (not isinstance(files, dict) or "out" not in files or "status" not in files
                or not all(isinstance(k, str) and isinstance(v, str)
                           for k, v in files.items())):
            return f"entry {i}: files is not the runner's mapping of names to paths"
        if not is_token(p["owner"]):
            return f"entry {i} holds no owner token (written by another kit version?)"
        owners.add(p["owner"])
    if len(owners) > 1:
        return "entries of one run with different owner tokens"
    return None


def _without(error: str | None, lines: list[str]) -> str | None:
    text = error or ""
    for line in lines:
        text = text.replace(line, "")
    kept = [ln for ln in text.split("\n") if ln.strip()]
    return "\n".join(kept) or None


def _replace_run(run_dir: Path, manifest: Manifest, ops: OpsArrays | OpsParts) -> Path:
    """Write `manifest` + `ops` as the run `run_dir` (same run id). The new directory is
    written and verified next to the old one first; the old one is removed last."""
    exp_dir = run_dir.parent
    staging = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}collect-", dir=exp_dir))
    try:
        new_dir = write_run(staging, manifest, ops)
        verify_run(new_dir)
        old = f"{TMP_PREFIX}old-{run_dir.name}"
        # Through one descriptor of the experiment's directory: nothing here follows a
        # directory exchanged for a link meanwhile (`harness.hosts.fdsafe`).
        fd = os.open(exp_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            # hidden: readers skip it; both copies exist meanwhile
            os.rename(run_dir.name, old, src_dir_fd=fd, dst_dir_fd=fd)
            os.rename(new_dir.relative_to(exp_dir), run_dir.name, src_dir_fd=fd,
                      dst_dir_fd=fd)
            os.fsync(fd)
            remove_at(fd, old)
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            fd = os.open(exp_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                remove_at(fd, staging.name)
            finally:
                os.close(fd)
    return run_dir


def _config_and_log(files: Mapping[str, str]) -> list[str]:
    """A collected client's configuration and log on its machine: as its files name
    them, or (manifests written before they named the configuration) beside its
    records, by the name its records file gives (`transfer.client_prefix`)."""
    log = [files["log"]] if "log" in files else []
    if "config" in files:
        return [files["config"], *log]
    prefix = client_prefix(files)
    if not prefix:
        return []
    where = str(files["out"]).rpartition("/")[0]
    return [f"{where}/{prefix}json", *log]


def collect_pending(spec: Spec, out_dir: Path,
                    say: Callable[[str], None] = print) -> CollectReport:
    """Fetch every pending record file of `spec`'s runs under `out_dir`."""
    exp_dir = Path(out_dir) / spec.name
    runs = []
    if exp_dir.is_dir():
        for d in iter_run_dirs(exp_dir):
            man = read_manifest(d)
            if man.typed_extra.pending_records:
                runs.append((d, man))
    if not runs:
        return CollectReport(0, 0, 0)
    plans: dict[tuple[str, int], RunPlan] = {(p.config_id, 1): p for p in expand(spec)
                                             if p.repetition == 1}
    op_names = WORKLOADS.get(spec.workload).ops
    hosts: dict[str, Host | None] = {}
    completed = still = 0
    try:
        for run_dir, man in runs:
            pending: list[dict[str, Any]] = [dict(p) for p in man.typed_extra.pending_records]
            bad = _pending_problem(pending, spec)
            if bad is not None:
                say(f"{run_dir.name}: {PENDING} {bad}; the run is left as it is")
                continue
            for name in sorted({p["host"] for p in pending} - set(hosts)):
                try:
                    if name not in spec.hosts:
                        raise HostError(f"host {name!r} is not in {spec.path}")
                    hosts[name] = connect_host(spec.hosts[name])
                except HostError as exc:
                    hosts[name] = None
                    say(f"{name}: cannot connect ({exc}); its records stay there")
            parts: list[Path] = []
            left: list[dict[str, Any]] = []
            resolved: list[str] = []
            new_errors: list[str] = []
            statuses: dict[int, dict[str, Any]] = {}
            discard: dict[str, tuple[str, list[str]]] = {}
            # The copies stay until the run is written again from them.
            tmp = tempfile.mkdtemp(prefix="harness-collect-")
            try:
                for name in sorted({p["host"] for p in pending}):
                    mine = [p for p in pending if p["host"] == name]
                    host = hosts[name]
                    if host is None:
                        left += mine
                        continue
                    token = mine[0]["owner"]
                    checked = owned_files(host, token, [f for p in mine
                                                        for f in p["files"].values()])
                    refused = [(f, why) for f, why in checked.items() if why is not None]
                    if refused:
                        break
                    got = fetch_records(host, [(p["client"], p["files"]) for p in mine],
                                        Path(tmp), spec_path=str(spec.path),
                                        unfinished_pending=True)
                    parts += got.parts
                    statuses.update({s["client"]: s for s in got.statuses})
                    failed_again = {p.client for p in got.pending}
                    left += [asdict(p) for p in got.pending]
                    resolved += [p["error"] for p in mine if p["client"] not in failed_again]
                    new_errors += [e for e in got.errors
                                   if e not in (p.error for p in got.pending)]
                    collected = [p["files"] for p in mine if p["client"] not in failed_again]
                    discard[name] = (token, [*got.discardable, *(
                        f for files in collected for f in _config_and_log(files))])
                else:
                    refused = []
                if refused:
                    say(f"{run_dir.name}: its records on {name} are not proven this kit's "
                        f"({refused[0][0]}: {refused[0][1]}); the run is left as it is")
                    continue
                if not parts and len(left) == len(pending):
                    still += len(left)
                    continue
                old_ops = ops_from_table(read_ops(run_dir), op_names)
                ops = OpsParts(op_names, [old_ops, *parts])
                if _finish_collected(run_dir, man, ops, plans, spec, statuses, new_errors,
                                     left, pending, resolved, discard, hosts, say):
                    completed += 1
                still += len(left)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        for h in hosts.values():
            if h is not None:
                with contextlib.suppress(HostError):
                    h.close()
    return CollectReport(len(runs), completed, still)


def _finish_collected(run_dir: Path, man: Manifest, ops: OpsParts,
                      plans: dict[tuple[str, int], RunPlan], spec: Spec,
                      statuses: dict[int, dict[str, Any]], new_errors: list[str],
                      left: list[dict[str, Any]], pending: list[dict[str, Any]],
                      resolved: list[str], discard: dict[str, tuple[str, list[str]]],
                      hosts: dict[str, Host | None], say: Callable[[str], None]) -> bool:
    """Write `run_dir` again with the records collected now; True if now complete."""
    error = _without(man.error, [p["error"] for p in pending])
    errors = [e for e in (error or "").split("\n") if e]
    errors += [e for e in new_errors if e not in (man.error or "")]
    errors += [p["error"] for p in left]
    workers = [statuses.get(w.get("client"), w) if w.get("client") in statuses
               else w for w in man.loadgen.get("workers", [])]
    summed = tally(ops)  # once, in passes over the parts
    n, rate, *_, err = quick_stats(summed)
    plan = plans.get((man.config_id, 1))
    if plan is None:
        raise HarnessError(f"{run_dir}: configuration {man.config_id} is not in "
                           f"{spec.path} any more; collect with the spec it ran")
    # Decided again from all the records: the policy's and the no-ops line.
    errors = [e for e in errors if not e.startswith(("error rate ", "no measured ops: "))]
    interrupted = any(e.startswith("interrupted") for e in errors)
    status = run_status(plan, n, err, errors, workers, interrupted, ops=summed)
    when = datetime.now(UTC).isoformat(timespec="milliseconds")
    extra = {k: v for k, v in man.extra.items() if k != PENDING}
    if left:
        extra[PENDING] = left
    extra["collected_later"] = [*man.typed_extra.collected_later,
                                {"utc": when, "clients": sorted(statuses)}]
    loadgen = {**man.loadgen, "workers": workers,
               "achieved_rate_ops_s": rate if n else None,
               "target_met": target_met(plan, rate) if plan.size.open_loop
               else None,
               "send_lag_p99_ms": send_lag_p99_ms(summed) if plan.size.open_loop
               else None}
    new = replace(man, status=status, error="\n".join(errors) or None,
                  loadgen=loadgen, extra=extra,
                  counts=run_counts(plan, summed, workers), ops_file={})
    _replace_run(run_dir, new, ops)
    # Written and verified here: the copies on the machines can go, and with them the
    # collected clients' configurations (they name the servers' passwords) and logs,
    # and a work directory left with nothing else in it.
    for name, (token, files) in discard.items():
        host = hosts[name]
        if host is not None:
            remove_owned_files(host, token, files)
            remove_owned_empty_dirs(host, token, sorted({f.rpartition("/")[0]
                                                         for f in files} - {""}))
    say(f"{run_dir.name}: {len(resolved)} record file(s) collected; now {status}")
    return status == "complete"
