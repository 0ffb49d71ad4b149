"""A latency probe beside the load (`clients.probe`, issue 53 item 4): its spec, its
process in every run, its ops apart in the manifest and in `harness summary`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from harness.errors import SpecError
from harness.spec import load_spec

SERVICE_MS = 1.0
PROBE_RATE = 200
DURATION_S = 2.0

#: examples/queueserver.py: one worker, FIFO over every connection, `SERVICE_MS` each.
#: The load holds 4 requests in flight and reads its replies in batches every 20 ms
#: (`pause_us`): the latency it records is mostly its own wait, not the server's.
SPEC = f"""\
name: probe
workload: memcache_mix
hosts: {{server: localhost, client: localhost}}
services:
  cache:
    kind: command
    host: server
    settings:
      command: "{{python}} {{kit}}/examples/queueserver.py --port {{port}}
        --service-ms {SERVICE_MS}"
      provides: memcached
      ready: tcp
clients: {{hosts: [client], processes: 1, connections: 2, inflight: 2, pause_us: 20000,
          probe: {{rate_ops_s: {PROBE_RATE}}}}}
params: {{key_space: 20}}
run: {{duration_s: {DURATION_S}, warmup_s: 0.3, timeout_s: 5}}
"""


def test_a_bad_probe_is_named_field_by_field(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace(f"rate_ops_s: {PROBE_RATE}",
                                 "rate_ops_s: 1000000, conections: 2, host: elsewhere"))
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    said = str(err.value)
    assert "clients.probe.rate_ops_s: must be at most 10,000" in said
    assert "clients.probe.conections: unknown setting (did you mean 'connections'?)" in said
    spec.write_text(SPEC.replace("probe: {", "probe: {host: elsewhere, "))
    with pytest.raises(SpecError, match=r"clients\.probe\.host: unknown host 'elsewhere'"):
        load_spec(spec)
    spec.write_text(SPEC.replace(f"duration_s: {DURATION_S}", "ops: 500"))
    with pytest.raises(SpecError, match=r"clients\.probe: needs run\.duration_s"):
        load_spec(spec)
    spec.write_text(SPEC)
    probe = load_spec(spec).clients.probe
    assert probe is not None and (probe.rate_ops_s, probe.connections, probe.host) == (
        PROBE_RATE, 1, "client")


@pytest.mark.integration
def test_the_probe_sees_the_server_where_the_load_sees_its_own_wait(tmp_path: Path,
                                                                      capsys) -> None:
    spec = tmp_path / "probe.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "raw"
    code = main(["run", str(spec), "--out", str(out), "-q", "--no-progress"])
    assert code == 0, capsys.readouterr().out
    [run] = (out / "probe").glob("*/manifest.json")
    loadgen = json.loads(run.read_text())["loadgen"]
    assert loadgen["probe_clients"] == [1]  # the process after the load's one
    ops = pd.read_parquet(run.parent / "ops.parquet")
    ops = ops[~ops["warmup"]]
    probe, load = ops[ops["client"] == 1], ops[ops["client"] == 0]
    assert set(ops["client"]) == {0, 1}
    # At about its rate over the measured window (a generous factor: a shared machine).
    assert 0.5 * PROBE_RATE * DURATION_S <= len(probe) <= 1.5 * PROBE_RATE * DURATION_S
    assert loadgen["probe_ops"] == len(probe)
    # The load's rate is its own ops' (the probe's left out).
    span_s = ((load["start_ns"] + load["latency_ns"]).max() - load["start_ns"].min()) / 1e9
    assert loadgen["achieved_rate_ops_s"] == pytest.approx(len(load) / span_s, rel=1e-6)

    capsys.readouterr()
    assert main(["summary", str(out), "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["ops"] == len(load)
    assert row["throughput_ops_s"] == pytest.approx(loadgen["achieved_rate_ops_s"], rel=0.01)
    load_p50 = row["latency_p50_ms"]
    probe_p50 = row["probe_p50_ms"]
    assert probe_p50 == pytest.approx(probe["latency_ns"].median() / 1e6)
    assert load_p50 == pytest.approx(load["latency_ns"].median() / 1e6)
    with capsys.disabled():  # the figures, for whoever runs it with -s
        print(f"\nprobe p50 {probe_p50:.2f} ms, load p50 {load_p50:.2f} ms, "
              f"service {SERVICE_MS} ms")
    # The load's median holds its 20 ms batches; the probe's is the server's service
    # time and what little queue it meets (at most the load's 4 requests, 4 ms).
    assert probe_p50 < load_p50 / 2
    assert 0.9 * SERVICE_MS <= probe_p50 <= 5 * SERVICE_MS
    capsys.readouterr()
    assert main(["summary", str(out)]) == 0
    assert "probe p50 ms" in capsys.readouterr().out
