"""What `harness run --metrics` costs the load: the same spec with the /metrics endpoint
off and on (scraped every second), side by side, median of N pairs (issue 53, item 3).

Each pair runs `harness run SPEC -q` twice, once plain and once with `--metrics
127.0.0.1:PORT`, in an order that flips every pair (slow drift hits both sides), each in
a fresh output directory. While the "on" side runs, Debian's `prometheus` (if installed;
else a loop in this process fetching the page once a second) scrapes it every second.
From each run's manifest: the achieved ops/s, and the client workers' CPU per 1,000 ops
(telemetry); from the OS, the CPU of the whole `harness run` process tree (control
process, agent, workers, servers) per 1,000 ops. Prints both sides and the on/off ratios.

    .venv/bin/python benchmarks/metrics_cost.py --spec benchmarks/specs/memcached_closed.yaml \\
        --pairs 5

"Off" is `-q`: no live numbers at all (no per-second sampler in the workers), so the
ratio is everything the endpoint adds: the per-op breakdown of each second's records in
the workers, the control machine's adding up, and the scrapes. Traffic stays on loopback.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Scraper:
    """A real Prometheus scraping 127.0.0.1:`port` every second, or a loop doing the same."""

    def __init__(self, port: int, tmp: Path) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.scrapes = 0
        binary = shutil.which("prometheus")
        if binary is not None:
            conf = tmp / "prometheus.yml"
            conf.write_text("global: {scrape_interval: 1s}\nscrape_configs:\n  - {job_name: "
                            f"kvbench, static_configs: [{{targets: ['127.0.0.1:{port}']}}]}}\n")
            self.proc = subprocess.Popen(
                [binary, f"--config.file={conf}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{free_port()}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.kind = "prometheus " + subprocess.run(
                [binary, "--version"], capture_output=True, text=True,
                check=False).stdout.split("\n")[0].split()[2]
        else:
            self.thread = threading.Thread(target=self._loop, daemon=True)
            self.thread.start()
            self.kind = "a scraping loop (prometheus not installed)"

    def _loop(self) -> None:
        while not self.stop.wait(1.0):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                            timeout=1) as r:
                    r.read()
                self.scrapes += 1
            except OSError:
                pass  # between runs: nothing listens

    def close(self) -> None:
        self.stop.set()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def one(spec: Path, out: Path, metrics_port: int | None) -> dict[str, float]:
    argv = [sys.executable, "-m", "harness.cli", "run", str(spec), "--out", str(out), "-q",
            "--no-progress"]
    if metrics_port is not None:
        argv += ["--metrics", f"127.0.0.1:{metrics_port}", "--metrics-linger", "3"]
    cpu0 = children_cpu_s()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree_cpu = children_cpu_s() - cpu0
    [man] = [json.loads(p.read_text()) for p in out.glob("*/*/manifest.json")]
    ops = int(man["counts"]["measured"])
    records = int(man["counts"].get("records", ops))
    procs = (man.get("telemetry") or {}).get("processes") or []
    cpu = sum(p["cpu_user_s"] + p["cpu_sys_s"] for p in procs if p.get("role") == "client")
    return {"rate": float(man["loadgen"]["achieved_rate_ops_s"]),
            "client_ms_per_kop": 1e6 * cpu / ops if procs else float("nan"),
            "tree_ms_per_kop": 1e6 * tree_cpu / max(records, ops)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", type=Path, default=Path("benchmarks/specs/memcached_closed.yaml"))
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    port = free_port()
    got: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        scraper = Scraper(port, Path(tmp))
        try:
            for r in range(args.pairs):
                for side in (("off", "on") if r % 2 == 0 else ("on", "off")):
                    res = one(args.spec.resolve(), Path(tmp) / f"{side}{r}",
                              port if side == "on" else None)
                    got[side].append(res)
                    print(f"pair {r + 1} {side}: {res['rate']:,.0f} ops/s, client "
                          f"{res['client_ms_per_kop']:.2f} ms CPU/1,000 ops", file=sys.stderr,
                          flush=True)
        finally:
            scraper.close()

    def med(side: str, key: str) -> float:
        return statistics.median(x[key] for x in got[side])

    print(f"scraped every second by {scraper.kind}; {args.pairs} pairs of {args.spec}")
    print("| endpoint | median ops/s | client CPU ms / 1,000 ops | whole run CPU ms / 1,000 "
          "ops |\n|---|---|---|---|")
    for side in ("off", "on"):
        print(f"| {side} | {med(side, 'rate'):,.0f} | {med(side, 'client_ms_per_kop'):.2f} | "
              f"{med(side, 'tree_ms_per_kop'):.2f} |")
    for key, what in (("rate", "ops/s"), ("client_ms_per_kop", "client CPU per op"),
                      ("tree_ms_per_kop", "whole-run CPU per op")):
        ratios = [b[key] / a[key] for a, b in zip(got["off"], got["on"], strict=True)]
        print(f"on/off {what} per pair: {', '.join(f'{x:.3f}' for x in ratios)}; median "
              f"{statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
