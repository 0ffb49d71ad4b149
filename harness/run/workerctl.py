"""Client-host side of starting and watching worker processes, run as
``python -m harness.workerctl COMMAND ...`` through the Host interface.

Polling files and pids from the harness would cost one command per check; over SSH
each command is a round trip of ~0.1 s, so the polling runs on the client host and
the harness issues one command per step.

Commands (exit 0 on success):
  ready TIMEOUT_S PID:FILE ...   wait until every FILE exists; exit 3 naming a PID
                                 that died first, 4 on timeout
  go START_AT_NS FILE ...        write START_AT_NS into each FILE atomically
  wait PID ...                   wait until every PID has exited
  status FILE ...                print {"FILE": <parsed JSON or null>, ...}
  digest FILE ...                print {"FILE": {"sha256": HEX, "bytes": N} or null, ...}
                                 (the harness checks its copies against these)
  clock                          answer each line on stdin with this host's time.time_ns()
                                 (the harness estimates clock offsets from the exchange)
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        # A zombie has exited; only its parent has not collected it yet.
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def ready(timeout_s: float, pairs: list[str]) -> int:
    pending = [(int(p), f) for p, f in (pair.split(":", 1) for pair in pairs)]
    deadline = time.monotonic() + timeout_s
    while pending:
        for pid, f in list(pending):
            if os.path.exists(f):
                pending.remove((pid, f))
            elif not alive(pid):
                print(json.dumps({"dead": pid}, allow_nan=False))
                return 3
        if time.monotonic() > deadline:
            print(json.dumps({"timeout": [pid for pid, _ in pending]}, allow_nan=False))
            return 4
        time.sleep(0.002)
    return 0


def go(start_at_ns: str, files: list[str]) -> int:
    for f in files:
        Path(f + ".tmp").write_text(start_at_ns)
        os.replace(f + ".tmp", f)
    return 0


def wait(pids: list[str]) -> int:
    for pid in map(int, pids):
        while alive(pid):
            time.sleep(0.005)
    return 0


def status(files: list[str]) -> int:
    out: dict[str, object] = {}
    for f in files:
        try:  # a NaN or Infinity in a status file (an older worker's) passed on as null
            out[f] = json.loads(Path(f).read_text(), parse_constant=lambda _: None)
        except (OSError, ValueError):
            out[f] = None
    print(json.dumps(out, allow_nan=False))
    return 0


def sha256_of(path: str) -> dict[str, object] | None:
    h, n = hashlib.sha256(), 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                n += len(chunk)
    except OSError:
        return None
    return {"sha256": h.hexdigest(), "bytes": n}


def digest(files: list[str]) -> int:
    print(json.dumps({f: sha256_of(f) for f in files}, allow_nan=False))
    return 0


def clock() -> int:
    for _ in sys.stdin:
        sys.stdout.write(f"{time.time_ns()}\n")
        sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m harness.workerctl ready|go|wait|status|digest|clock ... "
              "(the control machine runs it on client machines)", file=sys.stderr)
        return 2
    cmd, rest = args[0], args[1:]
    if cmd == "ready":
        return ready(float(rest[0]), rest[1:])
    if cmd == "go":
        return go(rest[0], rest[1:])
    if cmd == "wait":
        return wait(rest)
    if cmd == "status":
        return status(rest)
    if cmd == "digest":
        return digest(rest)
    if cmd == "clock":
        return clock()
    print(f"unknown command {cmd!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
