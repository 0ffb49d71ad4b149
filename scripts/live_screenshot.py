"""The manual's picture of a grid watched live (docs/live.md): Prometheus' own graph page,
taken by Debian's chromium while `harness run --metrics` runs a small open-loop grid on a
local memcached that Debian's prometheus scrapes every second.

    .venv/bin/python scripts/live_screenshot.py docs/img/live-prometheus.png

Everything listens on 127.0.0.1; the temporary Prometheus and the grid's output go away.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

SPEC = """\
name: live_demo
workload: memcache_mix
hosts: {{server: localhost, client: localhost}}
services:
  cache: {{kind: memcached, host: server, settings: {{threads: 1}}}}
clients: {{hosts: [client], processes: 2, connections: 8}}
params: {{key_space: 10000}}
grid: {{run.rate_ops_s: [2000, 6000, 12000]}}
order: grouped
run: {{duration_s: {seconds}, arrival: poisson}}
export: {{prometheus: "127.0.0.1:{port}"}}
"""

QUERIES = [
    'histogram_quantile(0.99, sum by (le, configuration) '
    '(rate(kvbench_latency_seconds_bucket{experiment="live_demo"}[5s])))',
    'sum by (configuration) (kvbench_achieved_ops_per_second{experiment="live_demo"})',
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("png", type=Path)
    ap.add_argument("--seconds", type=int, default=12, help="each run's length")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus not installed: apt-get install prometheus")
    kit, prom = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s}\nscrape_configs:\n  - {job_name: kvbench, "
            f"static_configs: [{{targets: ['127.0.0.1:{kit}']}}]}}\n")
        spec = tmp / "live_demo.yaml"
        spec.write_text(SPEC.format(seconds=args.seconds, port=kit))
        server = subprocess.Popen(
            [binary, f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        grid = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(spec),
                                 "--out", str(tmp / "raw"), "--no-progress"])
        try:
            # Into the third configuration's run: the first two are on the graph.
            time.sleep(3 * args.seconds)
            graph = "&".join(
                f"g{i}.expr={urllib.parse.quote(q)}&g{i}.tab=0&g{i}.range_input=1m"
                for i, q in enumerate(QUERIES))
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                             headless=True, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 1100})
                page.goto(f"http://127.0.0.1:{prom}/graph?{graph}")
                page.wait_for_timeout(3000)
                args.png.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.png), full_page=True)
                browser.close()
            print(f"{args.png} written")
        finally:
            grid.wait(timeout=600)
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
