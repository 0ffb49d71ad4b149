"""What a run costs beyond what it measures: a grid of short runs, wall time per run.

Runs the issue-41 grid (memcache_mix on one memcached, 4 connections, 2 configurations x
20 repetitions of 200 ops; `--spec` for another) with `harness run`, alternating the
kit's quick starts and the slow ones it had before (`KVBENCH_SLOW_STARTS=1`: a fresh
interpreter per local worker, no client built ahead, a prepare before every run, 0.1 s
to the common start), `--repeats` times each. Per `harness run`: wall time per run, the
time its workers measured per run (the longest worker's `ran_s`), and the difference,
what a run costs beyond its measurement. `--kit DIR` runs the slow side with another
checkout of the kit instead (a worktree of an earlier commit: the real "before").

Usage: .venv/bin/python benchmarks/turnaround.py [--repeats 5] [--kit /tmp/before]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

SPEC = """\
name: grid40
description: 2 configurations x 20 repetitions of 200 ops on one memcached
workload: memcache_mix
hosts: {server: localhost, client: localhost}
services:
  cache: {kind: memcached, host: server}
clients: {hosts: [client], processes: 1, connections: 4}
params: {key_space: 1000}
grid:
  value_size_bytes: [100, 1000]
repetitions: 20
run: {ops: 200}
"""


def one(spec: Path, out: Path, slow: bool, kit: Path | None) -> tuple[float, float, int]:
    """(wall s per run, measured s per run, runs) of one `harness run`."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, KVBENCH_SLOW_STARTS="1" if slow else "0")
    cwd = None
    if slow and kit is not None:
        env["PYTHONPATH"] = str(kit)
        cwd = str(kit)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(spec), "--out",
                           str(out), "-q", "--no-progress"], env=env, cwd=cwd,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"harness run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    wall = time.perf_counter() - t0
    ran = []
    for m in out.glob("*/*/manifest.json"):
        data = json.loads(m.read_text())
        ran.append(max((w.get("cpu", {}).get("ran_s", 0.0)
                        for w in data["loadgen"].get("workers", [])), default=0.0))
    return wall / len(ran), sum(ran) / len(ran), len(ran)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--spec", type=Path, help="another grid (default: the issue's)")
    ap.add_argument("--kit", type=Path, help="a checkout of an earlier kit for the slow side")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="turnaround-"))
    spec = args.spec or tmp / "grid40.yaml"
    if args.spec is None:
        spec.write_text(SPEC)
    rows: dict[str, list[tuple[float, float]]] = {"quick": [], "slow": []}
    for r in range(args.repeats):
        for name in ("quick", "slow") if r % 2 == 0 else ("slow", "quick"):
            wall, ran, n = one(spec, tmp / name, name == "slow", args.kit)
            rows[name].append((wall, ran))
            print(f"{name:5s} {n} runs: {wall * 1000:6.0f} ms a run, measuring "
                  f"{ran * 1000:5.1f} ms, beyond it {(wall - ran) * 1000:6.0f} ms", flush=True)
    print()
    med = {k: (median(w for w, _ in v), median(w - r for w, r in v)) for k, v in rows.items()}
    for k, (wall, beyond) in med.items():
        print(f"median {k:5s}: {wall * 1000:6.0f} ms a run, {beyond * 1000:6.0f} ms beyond "
              "what it measures")
    print(f"slow / quick: {med['slow'][0] / med['quick'][0]:.2f}x the wall time a run")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
