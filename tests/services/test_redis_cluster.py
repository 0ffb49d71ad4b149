"""Redis Cluster launcher against real redis-server nodes (scaling: test_kv_elastic.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from harness.drivers.redis import ClusterClient
from harness.errors import ServiceError
from harness.hosts import LocalHost
from harness.services import SERVICES
from harness.services.redis_cluster import RedisClusterService, slot_owners
from tests.fixtures.servers import processes_in, tcp_listeners

pytestmark = pytest.mark.integration


def require_redis_cluster(host: LocalHost) -> None:
    missing = SERVICES.get("redis_cluster").missing_binaries(host)
    if missing:
        msg = f"{', '.join(missing)} not installed: apt-get install redis-server redis-tools"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture
def two_hosts() -> Iterator[dict[str, LocalHost]]:
    """Two spec hosts that are both this machine: enough to see the spreading."""
    hosts = {"localhost": LocalHost(), "other": LocalHost("other")}
    require_redis_cluster(hosts["localhost"])
    yield hosts


def test_masters_spread_over_hosts_serve_every_slot_and_stop_cleanly(
        two_hosts: dict[str, LocalHost]) -> None:
    svc = SERVICES.get("redis_cluster").start(
        two_hosts["localhost"], "kv",
        {"masters": 2, "maxmemory": "32mb", "policy": "allkeys-lfu",
         "hosts": ["localhost", "other"]}, hosts=two_hosts)
    try:
        assert isinstance(svc, RedisClusterService)
        info = svc.info()
        assert [n["host"] for n in info["nodes"]] == ["localhost", "other"]
        assert svc.endpoint.kind == "kvstore"
        assert svc.endpoint.extra["protocol"] == "redis_cluster"
        assert svc.config["maxmemory"] == str(32 * 1024 * 1024)
        assert svc.config["maxmemory-policy"] == "allkeys-lfu"
        for node in svc.nodes:
            assert tcp_listeners(node.port) == {"127.0.0.1"}
            owners = slot_owners(node.address, node.port, svc.endpoint.auth)
            assert sum(b - a + 1 for a, b, _ in owners) == 16384
            assert {o for _, _, o in owners} == {n.addr for n in svc.nodes}

        async def roundtrip() -> None:
            client = ClusterClient([(svc.endpoint.host, svc.endpoint.port)],
                                   auth=svc.endpoint.auth)
            await client.connect_all()
            assert len(client.conns) == 2
            for i in range(200):
                key = b"key:%d" % i
                assert await client.execute(key, "SET", key, b"v%d" % i) == b"OK"
            assert all([await client.execute(b"key:%d" % i, "GET", b"key:%d" % i)
                        == b"v%d" % i for i in range(200)])
            client.close()

        asyncio.run(roundtrip())
        assert svc.alive()
    finally:
        svc.stop()
    assert not svc.alive()
    for launch in svc.launches.values():
        assert processes_in(launch.workdir) == [] and not os.path.exists(launch.workdir)
    svc.stop()  # a second stop is harmless


def test_a_node_that_cannot_start_is_reported_with_its_log(
        two_hosts: dict[str, LocalHost]) -> None:
    with pytest.raises(ServiceError) as err:
        SERVICES.get("redis_cluster").start(two_hosts["localhost"], "kv",
                                            {"masters": 1, "maxmemory": "lots"})
    assert "argument must be a memory value" in str(err.value)


def test_bad_settings_are_refused_before_starting(two_hosts: dict[str, LocalHost]) -> None:
    launcher = SERVICES.get("redis_cluster")
    host = two_hosts["localhost"]
    with pytest.raises(ServiceError, match="masters must be at least 1"):
        launcher.start(host, "kv", {"masters": 0})
    with pytest.raises(ServiceError, match="policy='lru' must be one of"):
        launcher.start(host, "kv", {"policy": "lru"})
    with pytest.raises(ServiceError, match=r"hosts \['nowhere'\] are not connected"):
        launcher.start(host, "kv", {"hosts": ["nowhere"]})
