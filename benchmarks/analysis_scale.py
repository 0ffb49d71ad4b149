"""How fast and how big is analysis on large runs? Load + per-run summary of 10 M ops.

Usage: python benchmarks/analysis_scale.py [--ops 10000000] [--runs 100] [--dir DIR]

Writes synthetic raw results (once; reused if present) with `harness.results.write_run`,
then measures, in a fresh child process so generation does not count: `load` (manifest
checksums, Parquet columns) and `run_summary` + `summary_table`-style grouping. Prints the
wall time of each step and the child's peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

EXPERIMENT = "scale"


def generate(raw_dir: Path, total_ops: int, runs: int, seed: int = 0) -> None:
    from harness.results import STATUS_CODE, OpsArrays, new_manifest, write_run

    rng = np.random.default_rng(seed)
    per_run = total_ops // runs
    ops_names = ("get", "set")
    for i in range(runs):
        lat = rng.lognormal(np.log(100_000), 0.4, per_run).astype(np.int64)
        clients = rng.integers(0, 8, per_run).astype(np.int32)
        # 8 closed-loop clients: each client's ops follow one another.
        start = np.zeros(per_run, np.int64)
        for c in range(8):
            idx = np.flatnonzero(clients == c)
            start[idx] = np.concatenate([[0], np.cumsum(lat[idx][:-1] + 5_000)])
        status = np.where(rng.random(per_run) < 0.001, STATUS_CODE["error"],
                          STATUS_CODE["ok"]).astype(np.int8)
        ops = OpsArrays(
            op_names=ops_names,
            client=clients,
            op=(rng.random(per_run) < 0.1).astype(np.int8),
            start_ns=start,
            latency_ns=lat,
            intended_ns=np.full(per_run, -1, np.int64),
            status=status,
            nbytes=np.full(per_run, 100, np.int64),
            warmup=np.arange(per_run) < 1000,
        )
        manifest = new_manifest(
            run_id=f"scale-{i:04d}", experiment=EXPERIMENT, workload="synthetic",
            config_id=f"clients={1 + i % 4}", repetition=i // 4,
            grid_point={"clients": 1 + i % 4}, started_utc="2024-01-01T00:00:00Z",
            ended_utc="2024-01-01T00:00:00Z",
        )
        write_run(raw_dir, manifest, ops)


def measure(raw_dir: Path) -> dict[str, float]:
    """Runs in the child: times and peak RSS of load + summaries."""
    from harness.analysis.load import load
    from harness.analysis.summary import run_summary, summarise

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    loaded = load(raw_dir)
    t1 = time.perf_counter()
    per_run = run_summary(loaded)
    t2 = time.perf_counter()
    by_op = summarise(loaded, ["clients", "op"])
    t3 = time.perf_counter()
    return {
        "ops": len(loaded.ops),
        "runs": len(per_run),
        "groups": len(by_op),
        "load_s": t1 - t0,
        "run_summary_s": t2 - t1,
        "grouped_summary_s": t3 - t2,
        "total_s": t3 - t0,
        "rss_after_imports_mib": rss_before,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--dir", type=Path,
                        default=Path(__file__).resolve().parent / "out" / "analysis_scale")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    raw_dir = args.dir / f"{args.ops}ops-{args.runs}runs"
    if args.measure:
        print(json.dumps(measure(raw_dir)))
        return 0
    if not raw_dir.exists():
        t = time.perf_counter()
        tmp = raw_dir.with_name(raw_dir.name + ".partial")
        generate(tmp, args.ops, args.runs)
        tmp.rename(raw_dir)
        print(f"generated {args.ops:,} ops in {args.runs} runs in "
              f"{time.perf_counter() - t:.1f} s under {raw_dir}")
    child = subprocess.run(
        [sys.executable, __file__, "--measure", "--ops", str(args.ops), "--runs",
         str(args.runs), "--dir", str(args.dir)],
        capture_output=True, text=True, check=True,
    )
    r = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"ops loaded (measured): {r['ops']:,} in {r['runs']} runs")
    print(f"load (checksums + Parquet columns): {r['load_s']:.2f} s")
    print(f"per-run summary:                    {r['run_summary_s']:.2f} s")
    print(f"summary by clients x op:            {r['grouped_summary_s']:.2f} s")
    print(f"total:                              {r['total_s']:.2f} s")
    print(f"peak RSS: {r['peak_rss_mib']:.0f} MiB "
          f"(after imports: {r['rss_after_imports_mib']:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
