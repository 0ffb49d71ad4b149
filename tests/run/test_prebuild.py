"""The agent's prebuilt clients (`harness.run.worker.prebuild`): one per configuration,
taken by every worker forked for it, and no more of them than the agent's memory
budget allows (a client of a large key space is hundreds of MB of encoded requests)."""

from __future__ import annotations

import pytest

from harness.loadgen import ClientConfig
from harness.run import worker
from tests.loadgen.test_loadgen import MIX, MIX_PARAMS

ENDPOINT = {"memcached": {"kind": "memcached", "host": "127.0.0.1", "port": 11211}}


def _cfg(value_size: int) -> ClientConfig:
    return ClientConfig(workload=MIX.name, params={**MIX_PARAMS, "value_size_bytes": value_size},
                        endpoints=ENDPOINT, client_id=0)


@pytest.fixture(autouse=True)
def _empty() -> None:
    worker._BUILT.clear()


def test_a_configuration_is_built_once_and_each_worker_takes_it() -> None:
    assert worker.prebuild(_cfg(100)) and worker.prebuild(_cfg(100))
    assert len(worker._BUILT) == 1
    client, prebuilt = worker._client(_cfg(100), MIX)
    assert prebuilt and client is next(iter(worker._BUILT.values()))
    # Another configuration (or client id) is not served another's client.
    assert worker._client(_cfg(200), MIX)[1] is False
    assert worker._client(ClientConfig(**{**_cfg(100).to_dict(), "client_id": 1}), MIX)[1] \
        is False


def test_past_the_memory_budget_only_the_newest_client_is_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for size in (100, 200, 300):
        worker.prebuild(_cfg(size))
    assert len(worker._BUILT) == 3
    monkeypatch.setattr(worker, "MAX_BUILT_RSS_BYTES", 0)
    worker.prebuild(_cfg(400))
    assert len(worker._BUILT) == 1 and worker._client(_cfg(400), MIX)[1]
    monkeypatch.setattr(worker, "MAX_BUILT", 2)
    monkeypatch.setattr(worker, "MAX_BUILT_RSS_BYTES", 1 << 40)
    for size in (500, 600, 700):
        worker.prebuild(_cfg(size))
    assert len(worker._BUILT) == 2 and worker._client(_cfg(700), MIX)[1]
    assert not worker._client(_cfg(500), MIX)[1]
