"""Runs whose clients spill their records in chunks (`loadgen.spill`), end to end: the
harness copies every part, checks it, and writes ops.parquet from them, part by part
when the run is too long to join in memory (`results.stream`); the manifest's counts
and percentiles are the records' own. Chunks of a few hundred records (`CHUNK_ENV`)
put runs of seconds through the paths an hour-long run takes."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest, read_ops, verify_run
from harness.results import stream as results_stream
from harness.run.clients import CHUNK_ENV
from harness.run.runner import Runner
from harness.spec import load_spec
from tests.fixtures.machines import TestBed
from tests.fixtures.procs import tagged_workers
from tests.fixtures.servers import require_service

pytestmark = pytest.mark.integration


def _spec(tmp_path: Path, hosts: dict[str, Any], run: dict[str, Any],
          processes: int = 2) -> Path:
    path = tmp_path / "spill.yaml"
    path.write_text(yaml.safe_dump({
        "name": "spill", "workload": "memcache_mix", "hosts": hosts,
        "services": {"cache": {"kind": "memcached", "host": "server"}},
        "clients": {"hosts": ["client"], "processes": processes, "connections": 4},
        "params": {"get_ratio": 0.9, "key_space": 1000},
        "run": run, "repetitions": 1,
    }))
    return path


def _check_run(raw: Path, outcome: Any) -> tuple[dict[str, Any], Any]:
    """The run is whole: rows per client are what each worker recorded, no part file is
    left on the client machine, and the manifest's figures are the records' own."""
    [run_dir] = list(iter_run_dirs(raw))
    man = read_manifest(run_dir)
    verify_run(run_dir, man)
    workers = man.loadgen["workers"]
    assert all(w["state"] == "complete" for w in workers), workers
    table = read_ops(run_dir)
    clients = table.column("client").to_numpy()
    for w in workers:
        assert int(np.count_nonzero(clients == w["client"])) == w["records"]
        assert len(w["parts"]) >= 3  # it did spill
    assert table.num_rows == sum(w["records"] for w in workers) == man.counts["total"]
    lat = table.column("latency_ns").to_numpy()
    warm = table.column("warmup").to_numpy()
    assert man.counts["measured"] == int((~warm).sum())
    p50, p99 = np.percentile(lat[~warm], [50, 99]) / 1e6
    assert (outcome.latency_p50_ms, outcome.latency_p99_ms) == (pytest.approx(p50, abs=1e-9),
                                                                pytest.approx(p99, abs=1e-9))
    return {"man": man, "table": table, "workers": workers}, run_dir


@pytest.mark.parametrize("streamed", [False, True], ids=["joined", "streamed"])
def test_a_spilled_run_is_written_whole(tmp_path: Path, loadgen_engine: str, streamed: bool,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes, 6,000 measured ops each, chunks of 300 records, live status on
    (its sampler reads records across chunks): every record reaches ops.parquet. Joined
    in memory it is sorted by start as ever; streamed (the in-memory limit set below the
    run), each part is sorted, the p50/p99 are numpy's exactly, and so is the send lag."""
    require_service("memcached", LocalHost())
    monkeypatch.setenv(CHUNK_ENV, "300")
    if streamed:
        monkeypatch.setattr(results_stream, "IN_MEMORY_RECORDS", 2000)
        monkeypatch.setattr(results_stream, "KEEP_VALUES", 500)  # several passes
    run = {"ops": 12000, "warmup_ops": 400}
    if streamed:
        run["rate_ops_s"] = 8000
    raw = tmp_path / "raw"
    lines = io.StringIO()
    [outcome] = Runner(load_spec(_spec(tmp_path, {"server": "localhost",
                                                  "client": "localhost"}, run)),
                       raw, progress=False, live=True, stream=lines).run()
    assert outcome.status == "complete", outcome.error
    got, run_dir = _check_run(raw, outcome)
    man, table, workers = got["man"], got["table"], got["workers"]
    assert man.loadgen["engine"] == loadgen_engine
    for w in workers:  # the clients' copies are gone once the run is written
        assert not any(Path(p["file"]).exists() for p in w["parts"])
    start = table.column("start_ns").to_numpy()
    meta = pq.read_metadata(run_dir / "ops.parquet")
    if not streamed:
        assert np.all(np.diff(start) >= 0)
    else:
        assert meta.num_row_groups >= 6  # written part by part
        row = 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            assert np.all(np.diff(start[row:row + n]) >= 0)
            row += n
        intended = table.column("intended_ns").to_numpy(zero_copy_only=False)
        warm = table.column("warmup").to_numpy()
        lag = (start - intended)[~warm]
        assert man.loadgen["send_lag_p99_ms"] == pytest.approx(
            np.percentile(lag, 99) / 1e6, abs=1e-9)
    assert "ops/s" in lines.getvalue()  # live lines came out


def test_a_spilled_run_across_machines(tmp_path: Path, machines: TestBed,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """memcached on srv, the clients on cli over SSH: each part is copied and checked,
    and the part files on cli are removed once the run is written."""
    monkeypatch.setenv(CHUNK_ENV, "250")  # read by the harness, sent in each config
    hosts = machines.hosts_yaml({"server": "srv", "client": "cli"})
    raw = tmp_path / "raw"
    [outcome] = Runner(load_spec(_spec(tmp_path, hosts, {"ops": 4000, "warmup_ops": 100})),
                       raw, progress=False).run()
    assert outcome.status == "complete", outcome.error
    got, _ = _check_run(raw, outcome)
    cli = machines["cli"]
    for w in got["workers"]:
        assert w["host"] == "client"
        files = [p["file"] for p in w["parts"]]
        res = cli.run(["ls", "--", *files], check=False)
        assert res.returncode != 0 and all(f in res.stderr for f in files), res.stdout
    assert json.dumps(got["man"].to_dict()).count(".part") >= 6


def _workers_tagged(tag: str) -> list[int]:
    return tagged_workers(f"SPILL_TEST_TAG={tag}")


def test_the_parts_of_a_client_killed_mid_run_are_kept(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL takes one of two client processes 1.5 s into a 4 s run: it writes no
    status and no records file, but the parts it had spilled are listed in its index,
    copied, checked and written; the run is partial and says how many were kept."""
    require_service("memcached", LocalHost())
    tag = uuid.uuid4().hex
    monkeypatch.setenv("SPILL_TEST_TAG", tag)  # the local workers inherit it
    monkeypatch.setenv(CHUNK_ENV, "500")
    killed: list[int] = []

    def kill_one(plan: Any, running: Any) -> None:
        def later() -> None:
            time.sleep(1.5)
            pid = min(_workers_tagged(tag))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        threading.Thread(target=later, daemon=True).start()

    raw = tmp_path / "raw"
    spec = _spec(tmp_path, {"server": "localhost", "client": "localhost"},
                 {"duration_s": 4, "warmup_s": 0.2})
    [outcome] = Runner(load_spec(spec), raw, progress=False, on_run_start=kill_one).run()
    assert killed and outcome.status == "partial"
    [run_dir] = list(iter_run_dirs(raw))
    man = read_manifest(run_dir)
    verify_run(run_dir, man)
    dead, alive = sorted(man.loadgen["workers"], key=lambda w: w["state"] == "complete")
    assert dead["state"] == "failed" and alive["state"] == "complete"
    assert len(dead["parts"]) >= 3 and dead["records"] == sum(p["records"]
                                                               for p in dead["parts"])
    assert f"the {dead['records']:,} records it had written" in man.error
    clients = read_ops(run_dir).column("client").to_numpy()
    for w in (dead, alive):
        assert int(np.count_nonzero(clients == w["client"])) == w["records"] > 0
    assert not any(Path(p["file"]).exists() for p in dead["parts"])
