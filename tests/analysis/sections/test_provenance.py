"""What ran where, from the manifests: the overview's hosts table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from harness.analysis.sections import provenance
from harness.results import STATUS_CODE, write_run
from tests.fixtures.rawdata import make_ops, manifest_for

VM = {"hostname": "vm", "cpu_model": "AMD EPYC", "cpu_count": 2, "kernel": "6.18.44",
      "python": "3.11.7", "os": "Linux-6.18.44-x86_64-with-glibc2.36"}


def _run(raw: Path, run_id: str, experiment: str, hosts: dict) -> None:
    m = dataclasses.replace(manifest_for(run_id=run_id, experiment=experiment,
                                         workload="w", grid_point={}, repetition=1),
                            hosts=hosts)
    lat = np.full(50, 20_000, np.int64)
    write_run(raw, m, make_ops("get", lat, np.full(50, STATUS_CODE["ok"]),
                               np.zeros(50, bool)))


def test_one_machine_under_two_names_is_one_row(tmp_path: Path) -> None:
    """Issue 51: the demo's hosts table listed its one machine twice, once as the spec's
    `client` and once as its `server`. A machine is one row, with every name it had."""
    here = {**VM, "address": "127.0.0.1"}
    _run(tmp_path, "a1", "alpha", {"client": {**here, "harness_host": "client"},
                                   "server": {**here, "harness_host": "server"}})
    _run(tmp_path, "b1", "beta", {"node1": {**here, "harness_host": "node1"},
                                  # another machine: its own address
                                  "node2": {**VM, "hostname": "vm2", "address": "10.0.0.2"}})
    table = provenance.hosts_table(tmp_path)
    assert table[["host", "address", "hostname", "experiments"]].to_dict("records") == [
        {"host": "client, node1, server", "address": "127.0.0.1", "hostname": "vm",
         "experiments": "alpha, beta"},
        {"host": "node2", "address": "10.0.0.2", "hostname": "vm2", "experiments": "beta"}]
    # An experiment asked for alone: its names only.
    assert list(provenance.hosts_table(tmp_path, ["alpha"])["host"]) == ["client, server"]
