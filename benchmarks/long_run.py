"""One long run at full speed through the real harness: is every kit process's memory
flat in the run's length, and is every record kept?

Usage: python benchmarks/long_run.py [--seconds 600] [--workload memcache_mix]
                                     [--connections 32] [--processes 1] [--keep DIR]

memcached (or Redis for redis_mix) is started by the harness on 127.0.0.1 and pinned to
CPU 0 with its client processes on CPU 1 where the machine has two (taskset). The run
is closed loop, as fast as the server answers, on the native core when it is built.
Every second a thread reads the resident memory (VmRSS) of this process (the harness)
and of every process started under it that carries this run's environment tag (the
machine's agent and the client processes; the server excluded). At the end it prints,
per kind, RSS at second 10, at the end of the measured part, the most during the run
and the most while the records were collected and written; the growth from second 10
to the end; and the records: what the workers said they recorded against the rows of
ops.parquet. Goal (issue 30): growth <= 64 MiB for every process.
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
from pathlib import Path

import yaml
from soak import rss_kib  # this script's directory is first on sys.path

SERVICES = {
    "memcache_mix": {"cache": {"kind": "memcached", "host": "localhost",
                               "settings": {"memory_mb": 1024}}},
    "redis_mix": {"store": {"kind": "redis", "host": "localhost"}},
}
GOAL_MIB = 64.0


def tagged(tag: bytes) -> dict[int, str]:
    """pid -> kind ("agent", "worker") of the kit's processes carrying `tag`."""
    found: dict[int, str] = {}
    me = os.getpid()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            pid = int(proc.name)
            if pid == me or tag not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            cmd = (proc / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if b"harness.worker" in cmd:
            found[pid] = "worker"
        elif b"harness.agent" in cmd or (b"harness" in cmd and b"python" in cmd):
            found[pid] = "agent"
    return found


class Sampler(threading.Thread):
    """(seconds since start, phase, {kind: largest RSS KiB of that kind})."""

    def __init__(self, tag: bytes) -> None:
        super().__init__(daemon=True)
        self.tag = tag
        self.samples: list[tuple[float, str, dict[str, int]]] = []
        self.phase = "prepare"
        self.t0 = time.monotonic()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            by_kind: dict[str, int] = {"harness": rss_kib("self") or 0}
            for pid, kind in tagged(self.tag).items():
                r = rss_kib(pid)
                if r:
                    by_kind[kind] = max(by_kind.get(kind, 0), r)
            self.samples.append((time.monotonic() - self.t0, self.phase, by_kind))
            self.done.wait(1.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--workload", choices=sorted(SERVICES), default="memcache_mix")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="write the run here and keep it")
    args = ap.parse_args(argv)

    from harness.loadgen import native
    from harness.results import iter_run_dirs, read_manifest, verify_run
    from harness.run.runner import Runner
    from harness.spec import load_spec

    two = (os.cpu_count() or 1) >= 2
    services = SERVICES[args.workload]
    tag = uuid.uuid4().hex
    os.environ["HARNESS_LONGRUN_TAG"] = tag  # the agent and workers inherit it
    work = Path(tempfile.mkdtemp(prefix="harness-longrun-"))
    out = args.keep or work / "raw"
    spec_path = work / "long.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": "long_run", "workload": args.workload,
        "hosts": {"localhost": "localhost"}, "services": services,
        "clients": {"hosts": ["localhost"], "processes": args.processes,
                    "connections": args.connections},
        "params": {"get_ratio": 0.9, "key_space": 100000},
        "run": {"duration_s": args.seconds, "warmup_s": 1, "timeout_s": 5},
    }, sort_keys=False))
    sampler = Sampler(f"HARNESS_LONGRUN_TAG={tag}".encode())
    sampler.start()
    started: list[float] = []

    def on_start(plan: object, running: dict) -> None:
        started.append(time.monotonic() - sampler.t0)
        sampler.phase = "run"
        if two:  # the server on CPU 0, the clients on CPU 1
            for svc in running.values():
                for proc in svc.processes:
                    os.system(f"taskset -a -p -c 0 {proc.pid} >/dev/null 2>&1")
            for pid, kind in tagged(sampler.tag).items():
                if kind == "worker":
                    os.system(f"taskset -a -p -c 1 {pid} >/dev/null 2>&1")

        def collecting() -> None:
            time.sleep(args.seconds + 1.0)
            sampler.phase = "collect"

        threading.Thread(target=collecting, daemon=True).start()

    print(f"long run: {args.workload}, {args.seconds:g} s, {args.processes} x "
          f"{args.connections} connections, engine {native.engine()}", file=sys.stderr)
    try:
        runner = Runner(load_spec(spec_path), out, progress=True, stream=sys.stderr,
                        on_run_start=on_start)
        [outcome] = runner.run()
    finally:
        sampler.done.set()
        sampler.join()
    [run_dir] = list(iter_run_dirs(out / "long_run"))
    man = read_manifest(run_dir)
    verify_run(run_dir, man)
    recorded = sum(int(w.get("records", 0)) for w in man.loadgen["workers"])
    parts = sum(len(w.get("parts") or []) for w in man.loadgen["workers"])
    rows = int(man.ops_file["rows"])
    t_start = started[0] if started else 0.0
    kinds = sorted({k for _, _, by in sampler.samples for k in by})
    print(f"\n{outcome.measured_ops:,} measured ops at {outcome.throughput_ops_s:,.0f} ops/s "
          f"({man.status}); records: workers {recorded:,}, ops.parquet {rows:,} "
          f"({parts} parts spilled) -> {'all kept' if recorded == rows else 'LOST'}")
    print("RSS MiB     s10     end   run max  collect max   growth s10->end")
    ok = recorded == rows
    for kind in kinds:
        run = [(t - t_start, by[kind]) for t, ph, by in sampler.samples
               if ph == "run" and kind in by]
        coll = [by[kind] for _, ph, by in sampler.samples if ph == "collect" and kind in by]
        if not run:
            continue
        s10 = next((r for t, r in run if t >= 10), run[-1][1])
        end = run[-1][1]
        growth = (end - s10) / 1024
        ok &= growth <= GOAL_MIB
        print(f"{kind:8s} {s10 / 1024:7.1f} {end / 1024:7.1f} "
              f"{max(r for _, r in run) / 1024:9.1f} "
              f"{(max(coll) / 1024 if coll else float('nan')):12.1f} {growth:+12.1f}")
    print(f"verdict: {'flat and whole' if ok else 'NOT flat or records lost'} "
          f"(goal: growth <= {GOAL_MIB:g} MiB)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
