"""Live numbers during a run against a real memcached: the worker's intervals add up to its
records on both engines, and `harness run` prints a line per second over every client
process (local and over SSH), none with --quiet, with the same records either way."""

from __future__ import annotations

import asyncio
import io
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main as cli_main
from harness.hosts import LocalHost
from harness.loadgen import ClientConfig, ClientRun
from harness.loadgen.live import Interval, Sampler, histogram, merge, percentile_ns
from harness.results import ERROR, TIMEOUT, iter_run_dirs, read_ops
from harness.run.runner import Runner
from harness.services.base import RunningService
from harness.spec import load_spec
from harness.workloads import WORKLOADS
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration

LINE = re.compile(r"^\s+\[\s*(\d+) s\]\s+([\d,]+) ops/s\s+p50 ([\d.]+) ms\s+"
                  r"p99 ([\d.]+) ms\s+errors (\d+)")

SPEC = """\
name: {name}
workload: memcache_mix
hosts:
  server: localhost
  client: localhost
{extra_host}services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [{clients}], processes: 2, connections: 4}}
params: {{key_space: 1000}}
run: {run}
"""


@pytest.fixture(autouse=True)
def _memcached_installed() -> None:
    require_service("memcached", LocalHost())


def status_lines(text: str) -> list[re.Match[str]]:
    return [m for line in text.splitlines() if (m := LINE.match(line))]


def test_histogram_percentiles_within_bucket_precision() -> None:
    rng = np.random.default_rng(1)
    lat = rng.lognormal(np.log(200_000), 0.8, 50_000).astype(np.int64)
    halves = merge([histogram(lat[:20_000]), histogram(lat[20_000:])])
    assert sum(halves.values()) == lat.size
    for q in (50, 99, 99.9):
        exact = np.percentile(lat, q, method="inverted_cdf")
        assert percentile_ns(halves, q) == pytest.approx(exact, rel=0.025)
    assert percentile_ns({}, 50) is None


@pytest.mark.parametrize("rate_ops_s", [None, 5000.0], ids=["closed", "open"])
def test_sampler_intervals_add_up_to_the_records(memcached_server: RunningService,
                                                  loadgen_engine: str, tmp_path: Path,
                                                  rate_ops_s: float | None) -> None:
    """Read during the run (the native core writes from its own thread; in closed loop
    its columns grow past their first 64 Ki records), every interval whole: the
    intervals' ops and errors are the records', and their pooled percentiles the
    records' (open loop: latency from the intended start) within bucket precision."""
    wl = WORKLOADS.get("memcache_mix")
    params = {"get_ratio": 0.9, "key_space": 1000, "key_size_bytes": 16,
              "value_size_bytes": 100}
    cfg = ClientConfig(workload=wl.name, params=params,
                       endpoints={"memcached": memcached_server.endpoint.to_dict()},
                       client_id=0, connections=4, inflight=4, duration_s=3.0,
                       rate_ops_s=rate_ops_s)
    live = tmp_path / "c0.live"

    async def go() -> tuple[ClientRun, Sampler]:
        await wl.prepare(cfg.endpoint_objects(), params)
        run = ClientRun(cfg, wl.client(cfg.endpoint_objects(), params, 0))
        await run.connect_all()
        sampler = Sampler(run, str(live))
        sampler.start()
        await run.run()
        sampler.stop()
        return run, sampler

    run, sampler = asyncio.run(go())
    assert run.engine == loadgen_engine
    intervals = [Interval.from_dict(d) for d in json.loads(live.read_text())["intervals"]]
    assert [i.k for i in intervals] == list(range(1, len(intervals) + 1))
    assert intervals[-1].final and not any(i.final for i in intervals[:-1])
    full = intervals[:-1]
    assert len(full) >= 2 and all(i.ops > 0 for i in full)
    ops = run.rec.to_arrays(wl.ops, 0, 0)
    assert sum(i.ops for i in intervals) == len(ops) == run.rec.n
    assert sum(i.errors for i in intervals) == int(np.isin(ops.status, [ERROR, TIMEOUT]).sum())
    # Per op and status (what /metrics serves): the records' counts and bytes exactly.
    by = Counter()
    for i in intervals:
        for op, status, n, nbytes in i.counts:
            by[(op, status, "n")] += n
            by[(op, status, "bytes")] += nbytes
    want = Counter()
    for op, status, nbytes in zip(ops.op, ops.status, ops.nbytes, strict=True):
        want[(int(op), int(status), "n")] += 1
        want[(int(op), int(status), "bytes")] += int(nbytes)
    assert +by == +want
    assert sum(c for i in intervals for _, _, c in i.op_hist) == pytest.approx(
        len(ops), rel=0.01)
    # Each second's rate is the run's, within a generous factor (a busy machine).
    overall = len(ops) / 3.0
    for i in full:
        assert overall / 5 < i.ops * 1e9 / i.dt_ns < overall * 5
    pooled = merge(i.hist for i in intervals)
    for q in (50, 99):
        exact = np.percentile(ops.latency_ns, q, method="inverted_cdf")
        # Within bucket precision (~2%), and sampling above HIST_SAMPLE records a second.
        assert percentile_ns(pooled, q) == pytest.approx(exact, rel=0.05)
    assert sampler.cpu_ns > 0


def _spec(tmp_path: Path, name: str, run: str, clients: str = "client",
          extra_host: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, run=run, clients=clients, extra_host=extra_host))
    return path


class _Timed(io.StringIO):
    """A stream that notes when each status line was written."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def write(self, s: str) -> int:
        if LINE.match(s):
            self.times.append(time.monotonic())
        return super().write(s)


def test_run_prints_a_line_per_second_over_local_and_ssh_clients(tmp_path: Path,
                                                                 sshd) -> None:
    remote = (f"{{target: '{sshd.target}', python: '{sys.executable}', "
              f"known_hosts: '{sshd.known_hosts}', identity_file: '{sshd.identity_file}'}}")
    seconds = 5
    path = _spec(tmp_path, "live", f"{{duration_s: {seconds}}}", clients="client, remote",
                 extra_host=f"  remote: {remote}\n")
    stream = _Timed()
    [outcome] = Runner(load_spec(path), tmp_path / "raw", progress=False, stream=stream,
                       live=True).run()
    returned = time.monotonic()
    assert outcome.status == "complete"
    lines = status_lines(stream.getvalue())
    assert len(lines) >= seconds - 1, stream.getvalue()
    assert [int(m.group(1)) for m in lines] == sorted({int(m.group(1)) for m in lines})
    for m in lines:
        p50, p99 = float(m.group(3)), float(m.group(4))
        assert 0 < p50 <= p99 < 10_000 and int(m.group(5)) == 0
    # Summed over both processes (one over SSH): the per-second rates are the run's
    # throughput, not a share of it (one process alone would be about half).
    rates = [float(m.group(2).replace(",", "")) for m in lines if "(last)" not in m.group(0)]
    assert 0.6 < statistics.median(rates) / outcome.throughput_ops_s < 1.6
    # Printed as the run went, not all at its end.
    assert stream.times[0] < returned - 1.0


def test_quiet_prints_no_line_and_records_are_the_same(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The same ops-bounded run with and without live numbers: lines only without
    --quiet, and the same records (ops, statuses, sizes per client; timings differ)."""
    # enough ops for a run of a few seconds, so the live run prints a line on a fast machine
    path = _spec(tmp_path, "same", "{ops: 500000}")
    records = {}
    for flag in ("live", "quiet"):
        raw = tmp_path / flag
        argv = ["run", str(path), "--out", str(raw), "--no-progress"]
        assert cli_main([*argv, "-q"] if flag == "quiet" else argv) == 0
        err = capsys.readouterr().err
        lines = status_lines(err)
        assert (len(lines) > 0) if flag == "live" else (lines == []), err
        [run_dir] = list(iter_run_dirs(raw))
        ops = read_ops(run_dir).to_pandas()
        records[flag] = (list(ops.columns), Counter(zip(ops["client"], ops["op"],
                                                        ops["status"], ops["bytes"],
                                                        strict=True)))
    assert records["live"] == records["quiet"]
    assert sum(records["live"][1].values()) == 500_000


def test_the_runs_last_partial_second_is_no_line_but_a_full_one_is() -> None:
    """Second 3 of two processes that both ended 0.6 s into it is not printed (a rate over
    0.6 s reads like a drop; the run's own line follows); had they ended 0.98 s in, it is,
    marked (last); a process that ended early leaves the other's full seconds printed."""
    from types import SimpleNamespace

    from harness.run.livestatus import LiveStatus

    def status(last_dt_s: float, ends: tuple[int, int] = (3, 3)) -> list[str]:
        group = SimpleNamespace(plan=SimpleNamespace(size=SimpleNamespace(warmup_s=0.0)),
                                workers=[])
        lines: list[str] = []
        live = LiveStatus(group, lines.append)  # type: ignore[arg-type]
        for path, end in zip(("a", "b"), ends, strict=True):
            live.got[path] = {k: Interval(k, int((last_dt_s if k == end else 1.0) * 1e9),
                                          1000, 0, 0, [[10, 1000]], k == end)
                              for k in range(1, end + 1)}
            live.seen[path], live.final[path] = end, end
        live.emit(flush=True)
        return lines

    assert [ln.split("]")[0].strip() for ln in status(0.6)] == ["[   1 s", "[   2 s"]
    full = status(0.98)
    assert len(full) == 3 and "(last)" in full[2]
    # b ended after 2 s: second 3 is a's alone, a full second of a process still running.
    early = status(0.6, ends=(4, 2))
    assert [ln.split("]")[0].strip() for ln in early] == ["[   1 s", "[   2 s", "[   3 s"]
