"""`harness summary RAW --by op` against a plain DuckDB query over the same Parquet files.

Usage: python benchmarks/analysis_scale.py [--records 100000000] [--runs 200] [--dir DIR]
       [--repeats 1] [--before CHECKOUT]

Writes synthetic raw results once (reused if present; 8 closed-loop clients per run, two
ops, 0.1% errors, 1000 warm-up ops per run, each run's ops in start order as the kit
writes them) through `new_manifest` and `write_run`, then
runs each side in its own process and prints its wall time and peak RSS (from wait4),
and the ratios. Sides: the summary the first time (it hashes every ops file and
remembers it), the summary again (verification remembered), and the plain query:
count, mean and exact p50/p99 per op over the measured ops, no checksums, no intervals.
Goals: the summary within 1.25x the plain query's time (issue 41; 1.5x in issue 16)
and 4 GB.
`--before CHECKOUT` also times the summary of another checkout of the kit (e.g. a
`git worktree` of an earlier commit, run with this Python and its PYTHONPATH), taking
turns with this one, so a change is measured side by side.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sides import timed, write_once  # this script's directory is first on sys.path

EXPERIMENT = "scale"

PLAIN_QUERY = """
import sys, duckdb
print(duckdb.sql(f'''
    SELECT op::VARCHAR AS op, count(*) AS ops, avg(latency_ns) / 1e6 AS mean_ms,
           quantile_cont(latency_ns, [0.5, 0.99]) AS p_ns,
           count(*) FILTER (WHERE status::VARCHAR IN ('error', 'timeout')) AS errors
    FROM read_parquet('{sys.argv[1]}/*/*/ops.parquet')
    WHERE NOT warmup AND status::VARCHAR <> 'redirect'
    GROUP BY ALL ORDER BY op
''').df().to_string())
"""


def generate(raw_dir: Path, records: int, runs: int, seed: int = 0) -> None:
    from harness.results import STATUS_CODE, OpsArrays, new_manifest, write_run

    rng = np.random.default_rng(seed)
    per_run = records // runs
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
            op_names=("get", "set"), client=clients,
            op=(rng.random(per_run) < 0.1).astype(np.int8), start_ns=start, latency_ns=lat,
            intended_ns=np.full(per_run, -1, np.int64), status=status,
            nbytes=np.full(per_run, 100, np.int64), warmup=np.arange(per_run) < 1000,
        )
        # As the kit writes a run: its clients' parts joined in start order
        # (`OpsArrays.concat`), not interleaved at random.
        ops = OpsArrays.concat([ops], ops.op_names)
        manifest = new_manifest(
            run_id=f"scale-{i:04d}", experiment=EXPERIMENT, workload="synthetic",
            repetition=i // 4 + 1, grid_point={"clients": 1 + i % 4},
            started_utc="2024-01-01T00:00:00Z", ended_utc="2024-01-01T00:00:00Z",
        )
        write_run(raw_dir, manifest, ops)
        if (i + 1) % 20 == 0:
            print(f"  generated {i + 1}/{runs} runs", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1,
                        help="repeat the cached summary and the plain query; medians")
    parser.add_argument("--dir", type=Path,
                        default=Path(__file__).resolve().parent / "out" / "analysis_scale")
    parser.add_argument("--before", type=Path,
                        help="a checkout of an earlier kit to time side by side")
    args = parser.parse_args()
    raw_dir = args.dir / f"{args.records}records-{args.runs}runs-packed"
    t = time.perf_counter()
    if write_once(raw_dir, lambda tmp: generate(tmp, args.records, args.runs)):
        print(f"generated {args.records:,} records in {args.runs} runs in "
              f"{time.perf_counter() - t:.0f} s under {raw_dir}")
    size = sum(p.stat().st_size for p in raw_dir.rglob("ops.parquet"))
    print(f"{args.records:,} records in {args.runs} runs, {size / 2**30:.2f} GiB of Parquet")
    # A fresh verification cache: the first summary hashes, the second remembers.
    cache = tempfile.mkdtemp(prefix="kvbench-cache-")
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    summary = [sys.executable, "-m", "harness.cli", "summary", str(raw_dir), "--by", "op"]
    # `python -m` puts its working directory first on sys.path, before PYTHONPATH: each
    # side runs in its own checkout, or both would run this one.
    here = Path(__file__).resolve().parent.parent
    first = timed(summary, env, here)
    before_env = {**env, "PYTHONPATH": str(args.before.resolve())} if args.before else None
    if before_env:
        timed(summary, before_env, args.before)  # its own first (hashing) pass, untimed
    again, before, plain = [], [], []
    for _ in range(args.repeats):  # taking turns: a busy moment hits every side alike
        again.append(timed(summary, env, here))
        if before_env:
            before.append(timed(summary, before_env, args.before))
        plain.append(timed([sys.executable, "-c", PLAIN_QUERY, str(raw_dir)], env))
    shutil.rmtree(cache, ignore_errors=True)

    def med(xs: list[tuple[float, float, str]], i: int) -> float:
        return float(np.median([x[i] for x in xs]))

    print(f"{'':40s} {'wall s':>8s} {'peak RSS GiB':>13s}")
    print(f"{'harness summary --by op (hashing)':40s} {first[0]:8.1f} {first[1]:13.2f}")
    print(f"{'harness summary --by op (remembered)':40s} {med(again, 0):8.1f} "
          f"{med(again, 1):13.2f}")
    if before:
        print(f"{'  the same, --before checkout':40s} {med(before, 0):8.1f} "
              f"{med(before, 1):13.2f}")
    print(f"{'plain DuckDB query':40s} {med(plain, 0):8.1f} {med(plain, 1):13.2f}")
    if before:
        print(f"ratio before/plain: time {med(before, 0) / med(plain, 0):.2f}x; "
              f"per repeat this/before: "
              + ", ".join(f"{a[0] / b[0]:.2f}" for a, b in zip(again, before, strict=True)))
    print(f"ratio summary/plain: time {med(again, 0) / med(plain, 0):.2f}x "
          f"(goal <= 1.25x), memory {med(again, 1) / med(plain, 1):.2f}x "
          f"(goal: summary <= 4 GiB)")
    print("summary:\n" + again[-1][2] + "plain query:\n" + plain[-1][2])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
