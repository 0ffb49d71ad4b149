"""Routing of a mix on a Redis Cluster (`harness.workloads.cluster_reads`), from a
captured CLUSTER NODES reply: no server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.drivers.redis import key_slot
from harness.drivers.redis_nodes import layout
from harness.hosts.endpoint import Endpoint
from harness.settings import resolve
from harness.workloads.kv_mix import key_of
from harness.workloads.redis_mix import (
    KEY_PREFIX,
    ClusterMixClient,
    ClusterReplicaReads,
    RedisMix,
)

CAPTURED = (Path(__file__).parents[1] / "data" / "drivers"
            / "redis-7.0.15-cluster-nodes-3x1.txt")


@pytest.mark.parametrize("replicas", [False, True])
def test_each_entry_sets_on_its_keys_master_and_gets_there_or_from_its_replica(
        replicas: bool) -> None:
    found = layout(CAPTURED.read_text(), "127.0.0.1")
    params = resolve({"key_space": 3000, "read_from": "replicas" if replicas else "primary"},
                     RedisMix.params)
    ep = Endpoint("redis", "127.0.0.1", 1, {"protocol": "redis_cluster"})
    client = RedisMix().client({"redis": ep}, params, 0)
    assert type(client) is (ClusterReplicaReads if replicas else ClusterMixClient)
    client.route(found)
    masters = len(found.masters)
    assert client.servers[:masters] == list(found.masters)
    assert client.servers[masters:] == ([r for rs in found.replicas for r in rs]
                                        if replicas else [])
    picks = client.keynums(np.arange(client.period)).tolist()
    for j in range(client.period):
        owner = found.owner[key_slot(key_of(KEY_PREFIX, picks[j], params["key_size_bytes"]))]
        assert client.set_to[j] == owner
        got = client.servers[client.get_to[j]]
        assert got in found.replicas[owner] if replicas else got == found.masters[owner]
    assert client.native_ops() is None and client.pipeline() is None
