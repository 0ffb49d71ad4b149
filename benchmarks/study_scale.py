"""The datastore study's notebook calls (analyse, every table, figure and finding) on an
experiment of many ops: wall time and peak memory, side by side with an earlier kit.

Usage: python benchmarks/study_scale.py [--ops 20000000] [--sets 10] [--dir DIR]
       [--repeats 1] [--before CHECKOUT]

Writes a `datastore_vs_memcache` experiment once (reused if present): the study's five
operations x `--sets` sets, lognormal latencies per operation, `--ops` measured ops in all
(plus 5 warm-up ops per set), through `new_manifest` and `write_run`. Then each side runs
in its own process (its own checkout first on sys.path) and does what the notebook
10-datastore-memcache does, figures saved to a temporary directory; printed: wall time
and peak RSS (wait4) per side, their ratio, and the figures' total size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from sides import timed, write_once  # this script's directory is first on sys.path

EXPERIMENT = "datastore_vs_memcache"
#: op -> median latency (ms) and log-sd: about the seed's proportions.
OPS = {"store_write": (8.0, 0.3), "store_read": (2.0, 0.3), "mem_write": (0.3, 0.4),
       "mem_read_hit": (0.25, 0.4), "mem_read_miss": (0.2, 0.4)}

NOTEBOOK = """
import sys
from harness.studies import datastore_memcache as d
s = d.analyse(sys.argv[1], figures_dir=sys.argv[2])
for call in ("status", "ratio_table_html", "time_bars", "findings", "throughput_bars",
             "ecdf", "percentile_figure", "latency_table_html", "per_set_figure",
             "over_time", "describe"):
    getattr(s, call)()
print(s.describe().data)
"""


def generate(raw_dir: Path, ops: int, sets: int, seed: int = 0) -> None:
    from harness.results import STATUS_CODE, OpsArrays, new_manifest, write_run

    rng = np.random.default_rng(seed)
    per_run = ops // (sets * len(OPS))
    warmup = 5
    for s in range(sets):
        for op, (median_ms, sigma) in OPS.items():
            n = per_run + warmup
            lat = rng.lognormal(np.log(median_ms * 1e6), sigma, n).astype(np.int64)
            start = np.concatenate([[0], np.cumsum(lat[:-1] + 2_000)])
            status = STATUS_CODE["miss"] if op == "mem_read_miss" else STATUS_CODE["ok"]
            arrays = OpsArrays(
                op_names=(op,), client=np.zeros(n, np.int32), op=np.zeros(n, np.int8),
                start_ns=start, latency_ns=lat, intended_ns=np.full(n, -1, np.int64),
                status=np.full(n, status, np.int8), nbytes=np.full(n, 100, np.int64),
                warmup=np.arange(n) < warmup)
            manifest = new_manifest(
                run_id=f"{op}-{s:03d}", experiment=EXPERIMENT, workload="datastore_memcache",
                repetition=s + 1, grid_point={"op": op},
                started_utc="2024-01-01T00:00:00Z", ended_utc="2024-01-01T00:00:00Z")
            write_run(raw_dir, manifest, arrays)
        print(f"  generated set {s + 1}/{sets}", file=sys.stderr)


def timed_study(raw_dir: Path, checkout: Path) -> tuple[float, float, float, str]:
    """Wall seconds, peak RSS (GiB), figures' MiB and stdout of the notebook's calls."""
    figures = tempfile.mkdtemp(prefix="kvbench-figs-")
    try:
        wall, rss, text = timed([sys.executable, "-c", NOTEBOOK, str(raw_dir), figures],
                                {**os.environ, "PYTHONPATH": str(checkout)}, checkout)
        size = sum(p.stat().st_size for p in Path(figures).rglob("*") if p.is_file())
    finally:
        shutil.rmtree(figures, ignore_errors=True)
    return wall, rss, size / 2**20, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000_000)
    parser.add_argument("--sets", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--dir", type=Path,
                        default=Path(__file__).resolve().parent / "out" / "study_scale")
    parser.add_argument("--before", type=Path,
                        help="a checkout of an earlier kit to time side by side")
    args = parser.parse_args()
    raw_dir = args.dir / f"{args.ops}ops-{args.sets}sets"
    write_once(raw_dir, lambda tmp: generate(tmp, args.ops, args.sets))
    here = Path(__file__).resolve().parent.parent
    sides = {"this kit": here} | ({"--before": args.before.resolve()} if args.before else {})
    timed_study(raw_dir, here)  # the first pass hashes every ops file and remembers it
    results: dict[str, list[tuple[float, float, float, str]]] = {k: [] for k in sides}
    for _ in range(args.repeats):  # taking turns: a busy moment hits both sides alike
        for name, checkout in sides.items():
            results[name].append(timed_study(raw_dir, checkout))
    print(f"{args.ops:,} measured ops in {args.sets * len(OPS)} runs")
    print(f"{'':12s} {'wall s':>8s} {'peak RSS GiB':>13s} {'figures MiB':>12s}")
    for name, rs in results.items():
        print(f"{name:12s} {np.median([r[0] for r in rs]):8.1f} "
              f"{np.median([r[1] for r in rs]):13.2f} {np.median([r[2] for r in rs]):12.1f}")
    if args.before:
        ratios = [a[0] / b[0] for a, b in zip(results["this kit"], results["--before"],
                                                strict=True)]
        print("this / before per repeat: time " + ", ".join(f"{r:.2f}" for r in ratios))
    for name, rs in results.items():
        print(f"--- {name}:\n{rs[-1][3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
