"""What a change costs a whole `harness run`: two checkouts, one spec, side by side.

Runs `harness run SPEC` from each checkout in turn (which goes first flips every
repeat, so slow drift hits both), each in its own fresh output directory, and reads
every run's manifest: the achieved rate, and the CPU seconds the client workers used
per 1,000 ops where the manifest records them (telemetry, schema 2). Prints the median
per checkout and the per-repeat ratios. Used for issue 25's "telemetry adds nothing per
op": the merge before telemetry against the merge that added it.

    .venv/bin/python benchmarks/checkout_runs.py /tmp/tel-before /tmp/tel-after \\
        --spec benchmarks/specs/memcached_closed.yaml --repeats 5

Each checkout needs its native extension built in place (`python setup.py build_ext
--inplace`); both run on this venv's Python, the checkout first on PYTHONPATH. Traffic
goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def one(checkout: Path, spec: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run([sys.executable, "-m", "harness.cli", "run", str(spec), "--out", str(out),
                    "-q", "--no-progress"], cwd=checkout, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    [man] = [json.loads(p.read_text()) for p in out.glob("*/*/manifest.json")]
    rate = float(man["loadgen"]["achieved_rate_ops_s"])
    ops = int(man["counts"]["measured"])
    procs = (man.get("telemetry") or {}).get("processes") or []
    cpu = sum(p["cpu_user_s"] + p["cpu_sys_s"] for p in procs if p.get("role") == "client")
    return {"rate": rate, "cpu_ms_per_kop": 1e6 * cpu / ops if procs else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    got: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for side in order:
                res = one(getattr(args, side), args.spec.resolve(), Path(tmp) / f"{side}{r}")
                got[side].append(res)
                print(f"repeat {r + 1} {side}: {res['rate']:,.0f} ops/s", file=sys.stderr,
                      flush=True)
    b = [x["rate"] for x in got["before"]]
    a = [x["rate"] for x in got["after"]]
    ratios = [y / x for x, y in zip(b, a, strict=True)]
    print(f"| checkout | median ops/s | runs |\n|---|---|---|\n"
          f"| before ({args.before}) | {statistics.median(b):,.0f} | {len(b)} |\n"
          f"| after ({args.after}) | {statistics.median(a):,.0f} | {len(a)} |")
    print(f"after/before per repeat: {', '.join(f'{x:.3f}' for x in ratios)}; median "
          f"{statistics.median(ratios):.3f}")
    cpu = [x["cpu_ms_per_kop"] for x in got["after"]]
    print(f"after: client CPU {statistics.median(cpu):.1f} ms per 1,000 ops (telemetry)")


if __name__ == "__main__":
    main()
