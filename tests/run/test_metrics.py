"""The live /metrics endpoint of `harness run --metrics` (`harness.run.metrics`): its bucket
layout and its refusals here, and, against a REAL Prometheus (Debian's `prometheus`)
scraping a real grid on a real memcached, that what Prometheus stored at the end is what
the runs' ops files hold: op counts equal, and the p99 PromQL computes from the buckets
within one bucket of the exact p99 of the run's ops."""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from harness.cli import main as cli_main
from harness.errors import SpecError
from harness.hosts import LocalHost
from harness.loadgen import live
from harness.loadgen.live import Interval
from harness.results import iter_run_dirs, read_manifest, read_ops
from harness.run.metrics import (
    BOUNDS_S,
    BUCKETS_PER_OCTAVE,
    LiveMetrics,
    MetricsEndpoint,
    bucket_of,
)
from harness.spec import load_spec
from harness.spec.access import metrics_listen
from tests.fixtures.servers import require_service


def test_one_bucket_layout_at_most_ten_percent_wide_holding_whole_live_buckets() -> None:
    widths = [b / a - 1 for a, b in itertools.pairwise(BOUNDS_S)]
    assert max(widths) <= 0.10
    assert BOUNDS_S[0] < 1.1e-6 and BOUNDS_S[-1] > 60
    # Each live bucket [2^(b/16), 2^((b+1)/16)) ns lies in the exported bucket it is put in.
    for b in range(16 * 10, 16 * 36):
        i = bucket_of(b)
        lo, hi = 2 ** (b / live.BUCKETS_PER_OCTAVE) / 1e9, 2 ** ((b + 1) / 16) / 1e9
        assert hi <= BOUNDS_S[i] * (1 + 1e-12)
        assert i == 0 or lo >= BOUNDS_S[i - 1] * (1 - 1e-12)
    assert bucket_of(0) == 0 and bucket_of(16 * 60) == len(BOUNDS_S)


def _plan(cid: str, point: dict[str, Any], rate: float | None = None) -> Any:
    return SimpleNamespace(config_id=cid, grid_point=point, repetition=1,
                           size=SimpleNamespace(rate_ops_s=rate))


def test_exposition_adds_processes_and_escapes_untrusted_labels() -> None:
    """Two processes' intervals add up bucket by bucket; a hostile experiment name and grid
    value are label values, escaped, and the text parses back to the same values."""
    from prometheus_client.parser import text_string_to_metric_families

    plan = _plan("c1", {"x": 'a"}\nfake_metric 1'}, 100.0)
    m = LiveMetrics('exp"\n', ("get", "set"))
    m.plan_grid([plan], ["h"])
    m.run_started(plan, "run-1")
    for path in ("p0", "p1"):
        m.take(plan, path, "h", Interval(1, 10**9, 4, 1, 0, counts=[[0, 0, 3, 300],
                                                                    [0, 2, 1, 0]],
                                         op_hist=[[0, 240, 3], [0, 300, 1]],
                                         op_sum_ns=[[0, 4 * 50_000]]))
    with MetricsEndpoint(m, "127.0.0.1", 0, linger_s=0) as ep:
        text = urllib.request.urlopen(ep.url, timeout=10).read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert "fake_metric" not in fams
    ops = {(s.labels["op"], s.labels["status"]): s.value for s in fams["kvbench_ops"].samples
           if s.name == "kvbench_ops_total"}
    assert ops[("get", "ok")] == 6 and ops[("get", "error")] == 2 and ops[("set", "ok")] == 0
    sample = fams["kvbench_ops"].samples[0]
    assert sample.labels["experiment"] == 'exp"\n'
    assert sample.labels["configuration"] == 'x=a"}\nfake_metric 1'
    buckets = {s.labels["le"]: s.value for s in fams["kvbench_latency_seconds"].samples
               if s.name.endswith("_bucket") and s.labels["op"] == "get"}
    assert buckets["+Inf"] == 8
    assert buckets[repr(BOUNDS_S[bucket_of(240)])] == 6
    assert buckets[repr(BOUNDS_S[bucket_of(240) - 1])] == 0
    rate = [s.value for s in fams["kvbench_achieved_ops_per_second"].samples]
    assert rate == [8.0]
    done = [s.value for s in fams["kvbench_grid_finished"].samples]
    assert done == [0.0]
    m.run_ended(plan)  # between runs: no run in progress, 0 ops/s
    after = {f.name: f for f in m.collect()}
    assert [s.value for s in after["kvbench_achieved_ops_per_second"].samples] == [0.0]
    assert after["kvbench_run"].samples == []


@pytest.mark.parametrize("where", ["0.0.0.0:9464", "[::]:9464", "*:9464", "9464x", "70000"])
def test_every_interface_and_nonsense_are_refused(where: str) -> None:
    with pytest.raises(ValueError):
        metrics_listen(where)
    assert metrics_listen("9464") == ("127.0.0.1", 9464)
    assert metrics_listen("[::1]:9464") == ("::1", 9464)


def test_validate_names_the_export_field(tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SPEC.format(name="bad", port="0.0.0.0:9464", run="{ops: 10}"))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert "export.prometheus" in str(err.value) and "every interface" in str(err.value)
    assert cli_main(["validate", str(path), "--out", str(tmp_path / "raw")]) != 0
    said = capsys.readouterr()
    assert "export.prometheus" in said.err + said.out
    path.write_text(SPEC.format(name="ok", port="127.0.0.1:9464", run="{ops: 10}"))
    assert load_spec(path).metrics_at == ("127.0.0.1", 9464)
    # Refused before anything starts.
    assert cli_main(["run", str(path), "--out", str(tmp_path / "raw"),
                     "--metrics", "[::]:9464"]) != 0
    said = capsys.readouterr()
    assert "--metrics: '::' means every interface" in said.err + said.out
    assert not (tmp_path / "raw").exists()


# -- against a real Prometheus -------------------------------------------------------------

SPEC = """\
name: {name}
workload: memcache_mix
hosts:
  server: localhost
  client: localhost
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 2, connections: 2}}
params: {{key_space: 1000}}
grid: {{run.rate_ops_s: [2000, 3000]}}
run: {run}
export: {{prometheus: "{port}"}}
"""


DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "grafana" / "kvbench-live.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Prometheus:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        args = {"query": promql, **({"time": repr(at)} if at is not None else {})}
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode(args)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def wait(self, promql: str, what: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """Poll until `promql` returns something (a safety bound, not an assertion)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                got = self.query(promql)
            except OSError:
                got = []
            if got or time.monotonic() > deadline:
                assert got, f"Prometheus never had {what} ({promql})"
                return got
            time.sleep(0.2)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[_Prometheus, int]]:
    """Debian's prometheus on loopback, scraping 127.0.0.1:<kit port> every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        msg = "prometheus not installed: apt-get install prometheus (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    kit_port, prom_port = _free_port(), _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - {{job_name: kvbench, static_configs: [{{targets: ['127.0.0.1:{kit_port}']}}]}}\n")
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=log, stderr=subprocess.STDOUT)
    prom = _Prometheus(prom_port)
    try:
        prom.wait("vector(1)", "its query API up")
        yield prom, kit_port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _bucket_index(seconds: float) -> int:
    """The exported bucket holding `seconds` (upper bounds 2^(j/8) ns)."""
    return math.ceil(math.log2(seconds * 1e9) * BUCKETS_PER_OCTAVE)


@pytest.mark.integration
def test_prometheus_scrapes_what_the_ops_files_hold(
        tmp_path: Path, prometheus: tuple[_Prometheus, int],
        capsys: pytest.CaptureFixture) -> None:
    require_service("memcached", LocalHost())
    prom, port = prometheus
    path = tmp_path / "metrics.yaml"
    # From the spec's export:, every second of a 3 s open-loop run at two offered rates.
    path.write_text(SPEC.format(name="metrics", port=f"127.0.0.1:{port}",
                                run="{duration_s: 3}"))
    raw = tmp_path / "raw"
    assert cli_main(["run", str(path), "--out", str(raw), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"metrics (Prometheus) at http://127.0.0.1:{port}/metrics" in err
    # Each run's first status line says it too.
    noted = [line for line in err.splitlines() if " ops/s " in line and line.endswith(
        f"(metrics: http://127.0.0.1:{port}/metrics)")]
    assert len(noted) == 2, err
    # The event, not a time: the endpoint stayed up until a scrape of the final values.
    assert "served their final values to a scrape" in err, err
    # What Prometheus stored: polled until the grid's end is in it.
    prom.wait('kvbench_grid_finished{experiment="metrics"} == 1', "the grid's end")

    runs = {}
    for run_dir in iter_run_dirs(raw):
        manifest = read_manifest(run_dir)
        runs[manifest.config_id] = (manifest, read_ops(run_dir).to_pandas())
    assert len(runs) == 2
    # Each run's manifest says where it was served.
    assert {m.extra["live_metrics"] for m, _ in runs.values()} == {
        f"http://127.0.0.1:{port}/metrics"}
    got = Counter()
    for row in prom.query('sum by (config_id, op, status) (kvbench_ops_total'
                          '{experiment="metrics"})'):
        m = row["metric"]
        got[(m["config_id"], m["op"], m["status"])] = int(float(row["value"][1]))
    want = Counter()
    for cid, (_, ops) in runs.items():
        for (op, status), n in ops.groupby(["op", "status"], observed=True).size().items():
            want[(cid, str(op), str(status))] = int(n)
    assert +got == +want and sum(want.values()) > 1000

    # The second configuration's series were at zero from the grid's start (scraped
    # during the first run), so increase() over the grid counts all of its run.
    second = max(runs, key=lambda cid: runs[cid][0].started_utc)
    [low] = prom.query(f'min(min_over_time(kvbench_latency_seconds_count{{config_id="{second}"'
                       '}[10m]))')
    assert float(low["value"][1]) == 0
    hosts = {r["metric"]["host"] for r in prom.query("kvbench_ops_total")}
    assert hosts == {"client"}  # the spec's name of the client machine
    latency = runs[second][1]["latency_ns"].to_numpy()
    exact_s = float(np.percentile(latency, 99, method="inverted_cdf")) / 1e9
    [row] = prom.query(
        'histogram_quantile(0.99, sum by (le) (increase(kvbench_latency_seconds_bucket'
        f'{{experiment="metrics", config_id="{second}"}}[10m])))')
    from_prom_s = float(row["value"][1])
    assert abs(_bucket_index(from_prom_s) - _bucket_index(exact_s)) <= 1, (from_prom_s,
                                                                           exact_s)
    # The offered rates are the grid's.
    rates = {r["metric"]["config_id"]: float(r["value"][1]) for r in prom.query(
        'kvbench_target_ops_per_second{experiment="metrics"}')}
    assert sorted(rates.values()) == [2000.0, 3000.0]

    # The example dashboard's queries run in this Prometheus, at the grid's last scrape;
    # its throughput panel has the grid's two configurations.
    [end] = prom.query('timestamp(kvbench_grid_finished{experiment="metrics"} == 1)')
    at = float(end["value"][1])
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = (target["expr"].replace("$experiment", "metrics")
                    .replace("$__rate_interval", "5s"))
            got_rows = prom.query(expr, at=at)
            if panel["id"] == 1:
                assert {r["metric"]["configuration"] for r in got_rows} == {
                    "run.rate_ops_s=2000", "run.rate_ops_s=3000"}, expr


class _Scraper:
    """Fetches a /metrics page every 0.3 s from a thread, keeping the last body."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.last = ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(0.3):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    self.last = r.read().decode()
            except OSError:
                pass  # not up yet, or gone


@pytest.mark.integration
def test_two_client_machines_add_up_bucket_by_bucket(tmp_path: Path, sshd,
                                                     capsys: pytest.CaptureFixture) -> None:
    """Client processes on this machine and on another (over SSH): per host, the counts
    are that host's ops in the ops file, and the histograms' buckets, added over hosts
    and processes, are exactly the ops file's latencies bucketed in the same layout."""
    from prometheus_client.parser import text_string_to_metric_families

    require_service("memcached", LocalHost())
    remote = (f"{{target: '{sshd.target}', python: '{sys.executable}', "
              f"known_hosts: '{sshd.known_hosts}', identity_file: '{sshd.identity_file}'}}")
    port = _free_port()
    spec = (SPEC.format(name="hosts", port=f"127.0.0.1:{port}", run="{duration_s: 3}")
            .replace("  client: localhost\n", f"  client: localhost\n  remote: {remote}\n")
            .replace("hosts: [client]", "hosts: [client, remote]")
            .replace("[2000, 3000]", "[3000]"))
    path = tmp_path / "hosts.yaml"
    path.write_text(spec)
    scraper = _Scraper(f"http://127.0.0.1:{port}/metrics")
    scraper.thread.start()
    try:
        assert cli_main(["run", str(path), "--out", str(tmp_path / "raw"), "--no-progress",
                         "-q"]) == 0
    finally:
        scraper.stop.set()
        scraper.thread.join()
    assert "served their final values to a scrape" in capsys.readouterr().err
    [run_dir] = list(iter_run_dirs(tmp_path / "raw"))
    manifest = read_manifest(run_dir)
    host_of = {w["client"]: w["host"] for w in manifest.loadgen["workers"]}
    ops = read_ops(run_dir).to_pandas()
    ops["host"] = ops["client"].map(host_of)
    want = {(str(h), str(o), str(s)): int(n) for (h, o, s), n in
            ops.groupby(["host", "op", "status"], observed=True).size().items()}
    assert {h for h, _, _ in want} == {"client", "remote"}
    fams = {f.name: f for f in text_string_to_metric_families(scraper.last)}
    got = {(s.labels["host"], s.labels["op"], s.labels["status"]): int(s.value)
           for s in fams["kvbench_ops"].samples if s.value}
    assert got == want
    # Added over hosts and processes, bucket by bucket: the ops file's own histogram.
    summed: Counter[str] = Counter()
    for s in fams["kvbench_latency_seconds"].samples:
        if s.name.endswith("_bucket"):
            summed[s.labels["le"]] += int(s.value)
    lat = ops["latency_ns"].to_numpy()
    live_buckets = (np.log2(np.maximum(lat, 1)) * live.BUCKETS_PER_OCTAVE).astype(np.int64)
    exported = np.bincount([bucket_of(int(b)) for b in live_buckets],
                           minlength=len(BOUNDS_S) + 1).cumsum()
    assert summed["+Inf"] == len(ops)
    assert [summed[repr(b)] for b in BOUNDS_S] == exported[:-1].tolist()
