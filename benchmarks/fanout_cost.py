"""Fixed cost of SSH orchestration per run, with 1, 4 and 16 client machines.

For each number of client machines N, a spec with N SSH client hosts (one client
process each, memcached as the server, 1 s closed-loop runs) is run R times by the kit
"before" (a git ref, extracted with `git archive`) and "after" (this checkout), side by
side and alternating. Per run it prints, as medians over runs:

  before_s   run start (Runner._run_one entered) -> first op of any client
  after_s    last op of any client ends -> run written (records collected, files removed)
  fixed_s    before_s + after_s: what a run costs beyond its measured span
  spread_ms  start spread across client processes (max - min of their start lag)
  slack_ms   how long before the common start every machine had its go files (> 0:
             orchestration was not what delayed a start; the spread is then the client
             machines' own wake-up latency, e.g. 16 processes on 2 shared cores)

and the ratio after/before of fixed_s. The machines are either 16 SSH host entries to
one sshd on 127.0.0.1 (`--bed loopback`, default, no root needed) or network-namespace
machines of the test bed, each with its own address and sshd (`--bed machines`, root).

    .venv/bin/python benchmarks/fanout_cost.py                      # 1, 4, 16 clients
    .venv/bin/python benchmarks/fanout_cost.py --clients 16 --runs 5 --bed machines
    .venv/bin/python benchmarks/fanout_cost.py --before 4f8a26a     # the kit to compare
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Run in a child process whose PYTHONPATH selects the kit: times each run's phases.
DRIVER = r"""
import json, sys, time
from pathlib import Path
from harness.run.clients import ClientGroup
from harness.results import read_manifest, read_ops
from harness.run.runner import Runner
from harness.spec import load_spec

marks = []
_go, _one = ClientGroup.go, Runner._run_one

def go(self):
    marks[-1]["start_at_ns"] = start = _go(self)
    marks[-1]["released_ns"] = time.time_ns()  # every go file written by now
    return start

def run_one(self, plan, *args, **kwargs):
    marks.append({"begin_ns": time.time_ns()})
    out = _one(self, plan, *args, **kwargs)
    marks[-1].update(end_ns=time.time_ns(), run_dir=str(out.run_dir), status=out.status)
    return out

ClientGroup.go, Runner._run_one = go, run_one


def phase(cls, name):
    inner = getattr(cls, name)

    def timed(self, *args, **kwargs):
        t0 = time.time_ns()
        try:
            return inner(self, *args, **kwargs)
        finally:
            marks[-1].setdefault("phases", {})[name] = (time.time_ns() - t0) / 1e9

    setattr(cls, name, timed)


for name in ("start", "wait_ready", "go", "collect", "stop"):
    phase(ClientGroup, name)
Runner(load_spec(sys.argv[1]), Path(sys.argv[2]), progress=False).run()
for m in marks:
    ops = read_ops(m["run_dir"], ["start_ns", "latency_ns"]).to_pandas()
    lags = [w.get("start_lag_ns", 0) for w in read_manifest(m["run_dir"]).loadgen["workers"]]
    first = m["start_at_ns"] + int(ops.start_ns.min())
    last = m["start_at_ns"] + int((ops.start_ns + ops.latency_ns).max())
    print(json.dumps({"status": m["status"], "before_s": (first - m["begin_ns"]) / 1e9,
                      "after_s": (m["end_ns"] - last) / 1e9,
                      "spread_ms": (max(lags) - min(lags)) / 1e6,
                      "slack_ms": (m["start_at_ns"] - m["released_ns"]) / 1e6,
                      "lags_ms": sorted(round(lag / 1e6, 2) for lag in lags),
                      "phases": m.get("phases", {})}))
"""

SPEC = """\
name: fanout{n}
workload: memcache_mix
hosts:
{hosts}
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [{clients}], processes: {n}, connections: 1}}
params: {{key_space: 1000}}
repetitions: {runs}
run: {{duration_s: 1}}
"""


def extract(ref: str, into: Path) -> Path:
    """The kit at git `ref`, as files (no worktree is registered)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "harness"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def python_for(kit: Path, into: Path, name: str) -> Path:
    """A wrapper running this venv's Python on `kit`'s harness (for remote workers)."""
    path = into / f"python-{name}"
    path.write_text(f"#!/bin/sh\nPYTHONPATH={kit} exec {sys.executable} \"$@\"\n")
    path.chmod(0o755)
    return path


@contextlib.contextmanager
def loopback_bed(n: int) -> Iterator[tuple[dict[str, dict[str, str]], str]]:
    """n host entries (c0..) for one sshd on 127.0.0.1; the server runs locally."""
    from tests.fixtures.sshd_variants import SSHDaemon

    with tempfile.TemporaryDirectory(prefix="fanout-sshd-") as d:
        daemon = SSHDaemon(Path(d), sftp=True)
        daemon.start()
        try:
            s = daemon.server
            entry = {"target": s.target, "known_hosts": s.known_hosts,
                     "identity_file": s.identity_file}
            yield {f"c{i}": dict(entry) for i in range(n)}, "localhost"
        finally:
            daemon.stop()


@contextlib.contextmanager
def machines_bed(n: int) -> Iterator[tuple[dict[str, dict[str, str]], dict[str, str]]]:
    """n namespace machines (c0..) with their own sshd, and one more for the server."""
    from tests.fixtures.machines import machine_bed

    with machine_bed(["s", *(f"c{i}" for i in range(n))]) as bed:
        hosts = bed.hosts_yaml({f"c{i}": f"c{i}" for i in range(n)})
        yield hosts, bed.hosts_yaml({"server": "s"})["server"]


def measure(kit: Path, python: Path, hosts: dict, server: object, n: int, runs: int,
            work: Path) -> list[dict]:
    names = [f"c{i}" for i in range(n)]
    entries = {"server": server, **{k: {**hosts[k], "python": str(python)} for k in names}}
    spec = work / f"fanout{n}-{kit.name}.yaml"
    spec.write_text(SPEC.format(
        n=n, runs=runs, clients=", ".join(names),
        hosts="\n".join(f"  {k}: {json.dumps(v)}" for k, v in entries.items())))
    out = subprocess.run([sys.executable, "-c", DRIVER, str(spec), str(work / "raw")],
                         env={**os.environ, "PYTHONPATH": str(kit)}, cwd=work, capture_output=True,
                         text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{kit}: the run failed:\n{out.stderr[-3000:]}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    bad = [r for r in rows if r["status"] != "complete"]
    if bad:
        raise SystemExit(f"{kit}: runs not complete: {bad}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", default="1,4,16", help="client machine counts")
    ap.add_argument("--runs", type=int, default=3, help="runs per spec (per repeat)")
    ap.add_argument("--repeats", type=int, default=2, help="alternating repeats per kit")
    ap.add_argument("--before", default=None, help="git ref of the old kit "
                    "(default: merge-base of HEAD and main)")
    ap.add_argument("--bed", choices=("loopback", "machines"), default="loopback")
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    ref = args.before or subprocess.run(
        ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], check=True,
        capture_output=True, text=True).stdout.strip()
    bed = loopback_bed if args.bed == "loopback" else machines_bed
    print(f"fan-out cost per run: before = {ref[:10]}, after = this checkout; bed "
          f"{args.bed}; {args.runs} runs x {args.repeats} repeats of 1 s each; medians")
    print(f"{'N':>3} {'kit':>6} {'before_s':>9} {'after_s':>8} {'fixed_s':>8} "
          f"{'spread_ms':>9} {'slack_ms':>8}")
    with tempfile.TemporaryDirectory(prefix="fanout-") as tmp:
        work = Path(tmp)
        (work / "before").mkdir()
        kits = {"before": extract(ref, work / "before"), "after": ROOT}
        pythons = {k: python_for(v, work, k) for k, v in kits.items()}
        for n in counts:
            with bed(n) as (hosts, server):
                rows: dict[str, list[dict]] = {k: [] for k in kits}
                for rep in range(args.repeats):
                    for k in kits:
                        w = work / f"{k}-{n}-{rep}"
                        w.mkdir()
                        rows[k] += measure(kits[k], pythons[k], hosts, server, n,
                                           args.runs, w)
            fixed = {}
            for k, rs in rows.items():
                med = {f: statistics.median(r[f] for r in rs)
                       for f in ("before_s", "after_s", "spread_ms", "slack_ms")}
                fixed[k] = statistics.median(r["before_s"] + r["after_s"] for r in rs)
                print(f"{n:>3} {k:>6} {med['before_s']:9.3f} {med['after_s']:8.3f} "
                      f"{fixed[k]:8.3f} {med['spread_ms']:9.2f} {med['slack_ms']:8.1f}")
            print(f"{n:>3} {'ratio':>6} {'':>9} {'':>8} "
                  f"{fixed['after'] / fixed['before']:7.2f}x", flush=True)


if __name__ == "__main__":
    main()
