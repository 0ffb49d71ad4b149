"""Soak: N minutes of mixed load through the real harness; is memory flat, is every
op record kept?

Usage: python benchmarks/soak.py [--minutes 30] [--run-seconds 20] [--processes 4]
                                 [--connections 1] [--studies a,b] [--out DIR] [--keep]

A one-hour soak at full speed, one run that keeps every record:
    python benchmarks/soak.py --minutes 60 --run-seconds 3600 --processes 1 \
        --connections 32 --studies memcache_mix

In this one process, `harness.run.runner.Runner` runs duration-based runs back to back, in
rounds of about a minute per study (`--round-runs`), until the time is up:

- memcache_mix (get/set 9:1) against memcached;
- datastore_memcache, store_read and store_write alternating, against PostgreSQL and
  memcached;
- redis_mix against Redis, if this tree has that workload and redis-server is installed.

Each run has `--processes` client processes (4), each a closed loop on one connection.
Every `--sample-s` seconds a thread samples the resident memory (VmRSS) of this process
(the harness) and of every client process (found through an environment tag they
inherit). After each study's runs, every run directory is verified (checksum) and its
row count compared with what the workers said they recorded (their status files'
`records`, in the manifest's loadgen.workers); then it is deleted unless `--keep`.

At the end it prints, per process kind, RSS first / after the first round / last / max,
and the records written vs ops issued, with a verdict. Traffic goes to 127.0.0.1 only;
servers are stopped after each study's runs and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

STUDIES = {
    "memcache_mix": {
        "workload": "memcache_mix",
        "services": {"cache": {"kind": "memcached", "host": "localhost",
                               "settings": {"memory_mb": 128}}},
        "params": {"get_ratio": 0.9, "key_space": 10000},
    },
    "datastore_memcache": {
        "workload": "datastore_memcache",
        "services": {"datastore": {"kind": "postgres", "host": "localhost",
                                   "settings": {"fsync": False}},
                     "cache": {"kind": "memcached", "host": "localhost"}},
        "params": {"value_size_bytes": 100},
        "grid": {"op": ["store_read", "store_write"]},  # alternating, one run each
    },
    "redis_mix": {
        "workload": "redis_mix",
        "services": {"store": {"kind": "redis", "host": "localhost"}},
        "params": {"get_ratio": 0.9, "key_space": 10000},
    },
}


@dataclass
class Tally:
    runs: int = 0
    issued: int = 0
    written: int = 0
    errors: int = 0
    timeouts: int = 0
    mismatches: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)


def rss_kib(pid: int | str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def tagged_workers(tag: bytes) -> list[int]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (b"harness.worker" in (proc / "cmdline").read_bytes()
                    and tag in (proc / "environ").read_bytes().split(b"\0")):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


class Sampler(threading.Thread):
    """(seconds since start, harness RSS KiB, [RSS KiB of each client process])."""

    def __init__(self, tag: bytes, every_s: float) -> None:
        super().__init__(daemon=True)
        self.tag, self.every_s = tag, every_s
        self.samples: list[tuple[float, int, list[int]]] = []
        self.t0 = time.monotonic()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            workers = [r for r in map(rss_kib, tagged_workers(self.tag)) if r]
            self.samples.append((time.monotonic() - self.t0, rss_kib("self") or 0, workers))
            self.done.wait(self.every_s)


def available(name: str) -> str | None:
    """Why a study cannot run here, or None."""
    from harness.hosts import LocalHost
    from harness.services import SERVICES
    from harness.workloads import WORKLOADS

    if name not in WORKLOADS:
        return f"no workload {name!r} in this tree"
    host = LocalHost()
    for svc in STUDIES[name]["services"].values():
        missing = SERVICES.get(svc["kind"]).missing_binaries(host)
        if missing:
            return f"{', '.join(missing)} not installed"
    return None


def write_spec(spec_dir: Path, name: str, reps: int, args: argparse.Namespace,
               round_no: int) -> Path:
    study = STUDIES[name]
    data = {
        "name": f"soak-{name}", "workload": study["workload"],
        "hosts": {"localhost": "localhost"}, "services": study["services"],
        "clients": {"hosts": ["localhost"], "processes": args.processes,
                    "connections": args.connections},
        "params": study["params"], "grid": study.get("grid", {}),
        "repetitions": reps,
        "run": {"duration_s": args.run_seconds, "timeout_s": 5, "seed": round_no},
    }
    path = spec_dir / f"{name}-{round_no}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def check_runs(exp_dir: Path, tally: Tally) -> None:
    from harness.results import iter_run_dirs, verify_run

    for run_dir in iter_run_dirs(exp_dir):
        man = verify_run(run_dir)
        issued = sum(int(w.get("records", 0)) for w in man.loadgen["workers"])
        rows = int(man.ops_file["rows"])
        tally.runs += 1
        tally.issued += issued
        tally.written += rows
        tally.errors += man.counts.get("error", 0)
        tally.timeouts += man.counts.get("timeout", 0)
        tally.statuses[man.status] = tally.statuses.get(man.status, 0) + 1
        if issued != rows or len(man.loadgen["workers"]) != man.loadgen["processes"]:
            tally.mismatches.append(f"{run_dir}: workers recorded {issued}, file has {rows}")


def mib(kib: float) -> str:
    return f"{kib / 1024:8.1f}"


def report(sampler: Sampler, warm_t: float | None, tallies: dict[str, Tally],
           minutes: float) -> int:
    samples = sampler.samples
    harness = [(t, r) for t, r, _ in samples]
    warm = next((r for t, r in harness if warm_t is not None and t >= warm_t), harness[-1][1])
    h_first, h_last, h_max = harness[0][1], harness[-1][1], max(r for _, r in harness)
    w_peaks = [(t, max(ws)) for t, _, ws in samples if ws]
    span = samples[-1][0]
    first_w = [p for t, p in w_peaks if t <= span * 0.2] or [0]
    last_w = [p for t, p in w_peaks if t >= span * 0.8] or [0]
    print(f"\nsoak: {minutes:g} min asked, {span / 60:.1f} min sampled, "
          f"{len(samples)} samples every {sampler.every_s:g} s")
    print("RSS MiB             first    warm     last      max")
    print(f"harness          {mib(h_first)} {mib(warm)} {mib(h_last)} {mib(h_max)}")
    print(f"client (largest) {mib(max(first_w))}        - {mib(max(last_w))} "
          f"{mib(max((p for _, p in w_peaks), default=0))}   (first/last 20% of the time)")
    print("\nstudy                 runs   ops issued  records written  errors  timeouts  "
          "statuses")
    for name, t in tallies.items():
        print(f"{name:20s} {t.runs:5d} {t.issued:12,d} {t.written:16,d} {t.errors:7d} "
              f"{t.timeouts:9d}  {t.statuses}")
    growth = h_last - warm
    flat = growth <= max(20 * 1024, 0.10 * warm)
    lost = sum(t.issued - t.written for t in tallies.values())
    mismatches = [m for t in tallies.values() for m in t.mismatches]
    for m in mismatches:
        print(f"MISMATCH {m}")
    kept = "all kept" if not lost and not mismatches else "LOST"
    print(f"\nverdict: harness memory {'flat' if flat else 'GROWING'} ({growth / 1024:+.1f} "
          f"MiB since the first round); records {kept} "
          f"({sum(t.written for t in tallies.values()):,} written of "
          f"{sum(t.issued for t in tallies.values()):,} issued, {len(mismatches)} run(s) off)")
    return 0 if flat and not lost and not mismatches else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--run-seconds", type=float, default=20.0, help="duration of each run")
    ap.add_argument("--processes", type=int, default=4, help="client processes per run")
    ap.add_argument("--connections", type=int, default=1, help="connections per process")
    ap.add_argument("--studies", help="comma-separated: only these (default: all)")
    ap.add_argument("--round-runs", type=int,
                    help="runs per study per round (default: about a minute of runs)")
    ap.add_argument("--sample-s", type=float, default=2.0, help="RSS sampling interval")
    ap.add_argument("--out", type=Path, help="raw results directory (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    args = ap.parse_args(argv)

    from harness.run.runner import Runner
    from harness.spec import load_spec

    names = []
    wanted = args.studies.split(",") if args.studies else list(STUDIES)
    unknown = set(wanted) - set(STUDIES)
    if unknown:
        ap.error(f"--studies: no {', '.join(sorted(unknown))}; known: {', '.join(STUDIES)}")
    for name in wanted:
        why = available(name)
        if why:
            print(f"skipping {name}: {why}", file=sys.stderr)
        else:
            names.append(name)
    tag = f"HARNESS_SOAK_TAG={uuid.uuid4().hex}"
    os.environ["HARNESS_SOAK_TAG"] = tag.split("=", 1)[1]  # client processes inherit it
    work = Path(tempfile.mkdtemp(prefix="harness-soak-"))
    out = args.out or work / "raw"
    sampler = Sampler(tag.encode(), args.sample_s)
    sampler.start()
    tallies = {n: Tally() for n in names}
    deadline = time.monotonic() + args.minutes * 60
    reps = args.round_runs or max(1, round(60 / args.run_seconds))
    warm_t: float | None = None
    round_no = 0
    try:
        while time.monotonic() < deadline:
            round_no += 1
            for name in names:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                runs = max(1, min(reps, round(left / args.run_seconds)))
                per_config = max(1, runs // len(STUDIES[name].get("grid", {}).get("op", [0])))
                spec = load_spec(write_spec(work, name, per_config, args, round_no))
                Runner(spec, out, progress=False, stream=sys.stderr).run()
                check_runs(out / spec.name, tallies[name])
                if not args.keep:
                    shutil.rmtree(out / spec.name, ignore_errors=True)
            if warm_t is None:
                warm_t = time.monotonic() - sampler.t0
    except KeyboardInterrupt:
        print("interrupted: reporting what ran so far", file=sys.stderr)
    finally:
        sampler.done.set()
        sampler.join()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return report(sampler, warm_t, tallies, args.minutes)


if __name__ == "__main__":
    sys.exit(main())
