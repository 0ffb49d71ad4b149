"""`harness report` over a large tree: 1,000 runs in 20 experiments of a user's own.

Usage: python benchmarks/report_scale.py [--experiments 20] [--runs 1000] [--ops 2400]
       [--dir DIR]

Writes the tree once (reused if present) through `new_manifest` and `write_run`: each
experiment a grid of value_size {100, 4096} x appendonly {false, true}, its runs spread
over the four configurations in repetitions, one closed-loop client alternating get and
set (gets miss 5 %; appendonly makes sets ~1.8x slower, and 0.5 % of them time out;
4096-byte values 1.3x), run-to-run variation of 5 %. Then runs `harness report` on it in
its own process, as `make report` does, and prints what it printed (the time per
notebook) and its wall time and peak RSS. Goal (issue 41, item 3): under 2 minutes.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sides import write_once  # this script's directory is first on sys.path

CONFIGS = [(size, aof) for size in (100, 4096) for aof in (False, True)]


def generate(raw_dir: Path, experiments: int, runs: int, ops: int, seed: int = 0) -> None:
    from harness.results import STATUS_CODE, OpsArrays, new_manifest, write_run

    rng = np.random.default_rng(seed)
    warmup = 50
    n = warmup + ops
    per_exp = runs // experiments
    for e in range(experiments):
        name = f"own{e:02d}"
        for i in range(per_exp):
            size, aof = CONFIGS[i % len(CONFIGS)]
            rep = i // len(CONFIGS) + 1
            op = np.arange(n) % 2
            median_ms = np.where(op == 0, 0.20, 0.25 * (1.8 if aof else 1.0))
            median_ms = median_ms * (1.3 if size == 4096 else 1.0) * rng.lognormal(0, 0.05)
            lat = rng.lognormal(np.log(median_ms * 1e6), 0.3)
            status = np.full(n, STATUS_CODE["ok"])
            status[(op == 0) & (rng.random(n) < 0.05)] = STATUS_CODE["miss"]
            if aof:
                slow = (op == 1) & (rng.random(n) < 0.005)
                status[slow], lat[slow] = STATUS_CODE["timeout"], 20e6
            lat = lat.astype(np.int64)
            starts = np.concatenate([[0], np.cumsum(lat[:-1] + 30_000)]).astype(np.int64)
            arrays = OpsArrays(op_names=("get", "set"), client=np.zeros(n, np.int32),
                               op=op.astype(np.int8), start_ns=starts, latency_ns=lat,
                               intended_ns=np.full(n, -1, np.int64),
                               status=status.astype(np.int8),
                               nbytes=np.full(n, size, np.int64),
                               warmup=np.arange(n) < warmup)
            minute = i % 60
            manifest = new_manifest(
                run_id=f"{name}-{size}-{str(aof).lower()}-{rep:03d}", experiment=name,
                workload="redis_mix", repetition=rep,
                config_id=f"appendonly={str(aof).lower()}-value_size={size}",
                grid_point={"value_size": size, "appendonly": aof},
                params={"value_size_bytes": size},
                started_utc=f"2024-03-02T{10 + i // 60:02d}:{minute:02d}:00Z",
                ended_utc=f"2024-03-02T{10 + i // 60:02d}:{minute:02d}:01Z",
                loadgen={"processes": 1, "connections": 1, "inflight": 1, "mode": "closed",
                         "ops": ops, "warmup_ops": warmup})
            write_run(raw_dir, manifest, arrays)
        print(f"  generated {e + 1}/{experiments} experiments", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=2400, help="measured ops per run")
    parser.add_argument("--dir", type=Path,
                        default=Path(__file__).resolve().parent / "out" / "report_scale")
    args = parser.parse_args()
    raw_dir = args.dir / f"{args.runs}runs-{args.experiments}experiments-{args.ops}ops"
    t = time.perf_counter()
    if write_once(raw_dir, lambda tmp: generate(tmp, args.experiments, args.runs, args.ops)):
        print(f"generated {args.runs} runs in {args.experiments} experiments in "
              f"{time.perf_counter() - t:.0f} s under {raw_dir}")
    out = Path(tempfile.mkdtemp(prefix="kvbench-report-scale-"))
    here = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "harness.cli", "report", "--raw", str(raw_dir),
           "--out", str(out)]
    t0 = time.perf_counter()
    # Its lines (the time per notebook) as they come: stderr and stdout both.
    done = subprocess.run(cmd, cwd=here, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"harness report exited {done.returncode}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(f"harness report over {args.runs} runs in {args.experiments} experiments: "
          f"{wall:.1f} s wall (goal: under 120 s), peak RSS {rss:.2f} GiB; report in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
