"""Attack `harness run` as an unlucky machine and an impatient user would, and count
what each attack costs: runs lost, processes orphaned, temp directories left,
tracebacks, hangs.

Each trial runs a small memcached grid (3 runs) under one attack, then `harness run
--resume` (what a user does next), and checks the tree:

- a signal (SIGKILL, SIGINT, SIGTERM, or SIGINT twice) at the k-th fsync or rename of
  the harness's main thread (strace's fault injection: an exact moment in the write of
  a run directory), or
- SIGKILL or SIGINT at a random moment while a run is measured (its client processes
  have their go file).

A run is *lost* when the attacked harness had measured it (its clients got the go) and,
after the resume, no run directory holds its records: none of its configuration and
repetition started before the resume did. *Orphans* are memcached or client processes
of the trial still running 5 s after the resume ended; *temp* are its /tmp/harness-*
directories and hidden `.tmp-*` run directories left at the end.

    python benchmarks/chaos_runs.py --trials 40             # this checkout
    python benchmarks/chaos_runs.py --trials 40 --checkout /tmp/kv-before
                                                             # an earlier one (git worktree)

The checkout's code runs with this checkout's .venv (PYTHONPATH points at it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = """\
name: chaos
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache: {kind: memcached, host: server}
clients: {hosts: [client], processes: 2, connections: 2}
params: {key_space: 1000}
grid: {get_ratio: [0.5, 0.9, 0.99]}
repetitions: 1
run: {duration_s: 1.5}
"""
ATTACKS = ("kill@fsync", "kill@rename", "int@fsync", "term@fsync", "int2@fsync",
           "kill@random", "int@random")


def procs_tagged(tag: str) -> list[tuple[int, str]]:
    """(pid, comm) of the processes carrying the trial's tag in their environment."""
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if f"HARNESS_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                stat = (proc / "stat").read_text()
                if stat.rsplit(") ", 1)[1].split()[0] != "Z":
                    out.append((int(proc.name), (proc / "comm").read_text().strip()))
        except (OSError, IndexError):
            continue
    return out


def measuring(tag: str) -> set[int]:
    """Run indexes whose client processes (of this trial) have their go file."""
    found = set()
    for pid, _ in procs_tagged(tag):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"harness.worker" not in argv:
            continue
        cfg = argv[-2].decode()
        m = re.search(r"run(\d{5})-c\d{3}\.json$", cfg)
        if m and Path(cfg.removesuffix(".json") + ".go").exists():
            found.add(int(m.group(1)))
    return found


def command(checkout: Path, work: Path) -> tuple[list[str], dict[str, str], Path]:
    spec = work / "chaos.yaml"
    spec.write_text(SPEC)
    raw = work / "raw"
    tmpdir = work / "tmp"
    tmpdir.mkdir(exist_ok=True)
    # `python -m` puts the working directory first on sys.path: run in `work`, so that
    # PYTHONPATH (the checkout under test) decides which kit is imported.
    env = {**os.environ, "PYTHONPATH": str(checkout), "TMPDIR": str(tmpdir)}
    return ([sys.executable, "-m", "harness.cli", "run", str(spec), "--out", str(raw),
             "--no-progress", "-q"], env, raw)


def reference(checkout: Path) -> dict[str, list[int]]:
    """For each traced syscall, the run being written at each of its calls (-1: not a
    run's write), from one traced pass of the spec: strace counts every call."""
    with tempfile.TemporaryDirectory(prefix="chaos-ref-") as work:
        base, env, _ = command(checkout, Path(work))
        log = Path(work) / "trace"
        subprocess.run(["strace", "-qq", "-y", "-o", str(log), "-e", "trace=fsync,rename",
                        "--", *base], env=env, check=True, capture_output=True, cwd=work)
        calls: dict[str, list[int]] = {"fsync": [], "rename": []}
        run = 0
        for line in log.read_text().splitlines():
            m = re.match(r'(fsync)\(\d+<([^>]*)>\)|(rename)\("([^"]*)"', line)
            if not m:
                continue
            call, name = m.group(1) or m.group(3), Path(m.group(2) or m.group(4)).name
            in_run = name in ("ops.parquet", "manifest.json") or name.startswith(".tmp-")
            after = call == "fsync" and name == "chaos"  # the directory fsync after rename
            calls[call].append(run if in_run or after else -1)
            run += after
        return calls


def trial(attack: str, rng: random.Random, checkout: Path, work: Path,
          ref: dict[str, list[int]]) -> dict:
    base, env, raw = command(checkout, work)
    tmpdir = Path(env["TMPDIR"])
    tag = uuid.uuid4().hex
    env["HARNESS_TEST_TAG"] = tag
    dry = subprocess.run([*base, "--dry-run"], capture_output=True, text=True, env=env,
                         cwd=work)
    plans = {int(i): (c, int(r)) for i, c, r in
             re.findall(r"^\s*(\d+)\s+(\S+)\s+rep (\d+)$", dry.stdout, re.M)}
    how, _, where = attack.partition("@")
    sig = {"kill": "SIGKILL", "int": "SIGINT", "int2": "SIGINT", "term": "SIGTERM"}[how]
    measured: set[int] = set()
    result = {"attack": attack, "traceback": 0, "hang": 0}
    if where in ("fsync", "rename"):
        # A call of a run's write: that run was measured in full, and those before it.
        k = rng.choice([i + 1 for i, r in enumerate(ref[where]) if r >= 0])
        when = f"{k}+1" if how == "int2" else str(k)
        cmd = ["strace", "-qq", "-o", "/dev/null", "-e", f"trace={where}",
               "-e", f"inject={where}:signal={sig}:when={when}", "--", *base]
        measured = set(range(ref[where][k - 1] + 1))
        result["at"] = f"{where} {when}"
        try:
            first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120,
                                   cwd=work)
        except subprocess.TimeoutExpired:
            result["hang"] += 1
            first = None
    else:
        proc = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, cwd=work)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not measuring(tag) and proc.poll() is None:
            time.sleep(0.02)
        pick = rng.uniform(0.1, 4.0)  # into the first or a later run
        seen: set[int] = set()
        until = time.monotonic() + pick
        while time.monotonic() < until:
            seen |= measuring(tag)
            time.sleep(0.01)
        proc.send_signal(getattr(signal, sig))
        measured = {i for i in plans if i <= max(seen | {-1})}
        result["at"] = f"{pick:.2f} s"
        try:
            out, err = proc.communicate(timeout=120)
            first = subprocess.CompletedProcess(base, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            proc.kill()
            result["hang"] += 1
            first = None
    if first is not None:
        result["traceback"] += "Traceback" in first.stderr
    resume_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    try:
        second = subprocess.run([*base, "--resume"], capture_output=True, text=True,
                                env=env, timeout=180, cwd=work)
        result["traceback"] += "Traceback" in second.stderr
    except subprocess.TimeoutExpired:
        result["hang"] += 1
    time.sleep(5)
    # What the attacked harness measured and the tree no longer shows.
    kept = set()
    # Runs in place only: a hidden .tmp- directory is no run to summary, compare or verify.
    for man in raw.glob("chaos/[!.]*/manifest.json"):
        data = json.loads(man.read_text())
        if data["started_utc"] < resume_at:
            kept.add((data["config_id"], data["repetition"]))
    result["measured"] = len(measured)
    result["lost"] = sum(plans[i] not in kept for i in measured if i in plans)
    left = procs_tagged(tag)
    result["orphans"] = len(left)
    for pid, _ in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    result["temp"] = (len(list(tmpdir.glob("harness-*")))
                      + len(list((raw / "chaos").glob(".tmp-*"))))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=len(ATTACKS) * 4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkout", type=Path, default=ROOT)
    args = ap.parse_args()
    if shutil.which("strace") is None:
        raise SystemExit("needs strace (Debian: apt-get install strace)")
    rng = random.Random(args.seed)
    ref = reference(args.checkout.resolve())
    totals: Counter[str] = Counter()
    by_attack: dict[str, Counter[str]] = {}
    for i in range(args.trials):
        attack = ATTACKS[i % len(ATTACKS)]
        with tempfile.TemporaryDirectory(prefix="chaos-") as work:
            r = trial(attack, rng, args.checkout.resolve(), Path(work), ref)
        print(json.dumps(r), flush=True)
        c = by_attack.setdefault(attack, Counter())
        for key in ("measured", "lost", "orphans", "temp", "traceback", "hang"):
            c[key] += r[key]
            totals[key] += r[key]
        c["trials"] += 1
    print(f"\n{args.checkout}: {args.trials} trials")
    print(f"{'attack':<12} {'trials':>6} {'measured':>8} {'lost':>5} {'orphans':>7} "
          f"{'temp':>5} {'tracebk':>7} {'hangs':>5}")
    for attack, c in by_attack.items():
        print(f"{attack:<12} {c['trials']:>6} {c['measured']:>8} {c['lost']:>5} "
              f"{c['orphans']:>7} {c['temp']:>5} {c['traceback']:>7} {c['hang']:>5}")
    print(f"{'all':<12} {args.trials:>6} {totals['measured']:>8} {totals['lost']:>5} "
          f"{totals['orphans']:>7} {totals['temp']:>5} {totals['traceback']:>7} "
          f"{totals['hang']:>5}")


if __name__ == "__main__":
    main()
