"""The get/set mixes' key and value-size distributions (harness.workloads.mix_dists): the
draws against the distributions' own definitions (scipy's where it has them), and runs
whose keys and sizes are read back from what a real Redis saw (MONITOR) and a real
memcached holds."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest
from scipy import stats

from harness.drivers import memcache
from harness.loadgen import ClientConfig
from harness.results import OK, OpsArrays
from harness.services.base import Endpoint, RunningService
from harness.settings import check_settings
from harness.workloads import WORKLOADS, mix_dists
from harness.workloads.kv_mix import KEY_SEQ_LEN, SET
from tests.fixtures.client_runs import run_client
from tests.fixtures.redis_monitor import RedisMonitor

MC, REDIS = WORKLOADS.get("memcache_mix"), WORKLOADS.get("redis_mix")
BASE = {"get_ratio": 0.5, "key_space": 1000, "key_size_bytes": 16, "value_size_bytes": 100}
N = 200_000


def _params(wl: Any = MC, **kw: Any) -> dict[str, Any]:
    """Every setting resolved, as a spec gives it to prepare and the clients."""
    out = {k: s.default for k, s in wl.params.items()}
    out.update(BASE, **kw)
    return out


def _rng() -> np.random.Generator:
    return np.random.default_rng(12345)


# -- unit: draws against the definitions ----------------------------------------------

def test_zipfian_key_frequencies_follow_the_zipf_pmf() -> None:
    """Against scipy's zipfian (a bounded zipf over 1..N): chi-square over the 20 most
    popular keys and the rest pooled."""
    p = _params(key_dist="zipfian", zipf_s=0.99)
    picks = mix_dists.key_picks(p, 1000, _rng(), N)
    observed = np.bincount(picks, minlength=1000)
    pmf = stats.zipfian.pmf(np.arange(1, 1001), 0.99, 1000)
    top = 20
    obs = np.append(observed[:top], observed[top:].sum())
    exp = np.append(pmf[:top], pmf[top:].sum()) * N
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    assert observed[0] / N == pytest.approx(pmf[0], rel=0.03)


def test_hotspot_sends_its_share_of_ops_to_the_hot_keys() -> None:
    p = _params(key_dist="hotspot", hotspot_keys=0.1, hotspot_ops=0.9)
    picks = mix_dists.key_picks(p, 1000, _rng(), N)
    hot = np.count_nonzero(picks < 100) / N
    assert abs(hot - 0.9) < 4 * np.sqrt(0.9 * 0.1 / N)
    assert picks.min() == 0 and picks.max() == 999


def test_gaussian_keys_are_a_normal_truncated_to_the_key_space() -> None:
    p = _params(key_dist="gaussian", gaussian_sd=0.5)  # wide: many redraws at the edges
    picks = mix_dists.key_picks(p, 1000, _rng(), N)
    mid, sd = 499.5, 500.0
    law = stats.truncnorm((-0.5 - mid) / sd, (999.5 - mid) / sd, loc=mid, scale=sd)
    assert stats.kstest(picks + _rng().uniform(-0.5, 0.5, N), law.cdf).pvalue > 1e-3
    assert picks.min() >= 0 and picks.max() <= 999


def test_sequential_walks_every_key_in_order_and_repeats_after_whole_passes() -> None:
    for space in (1000, 300_001):
        p = _params(key_dist="sequential", key_space=space)
        period = mix_dists.pick_period(p, space, KEY_SEQ_LEN)
        assert period % space == 0 and period >= min(space, KEY_SEQ_LEN)
        picks = mix_dists.key_picks(p, space, _rng(), period)
        assert np.array_equal(picks[:space], np.arange(space))


def test_value_sizes_uniform_and_weighted_list() -> None:
    uniform = mix_dists.value_sizes(
        _params(value_dist="uniform", value_size_min_bytes=10, value_size_max_bytes=19),
        _rng(), N, 1_000_000)
    counts = np.bincount(uniform - 10, minlength=10)
    assert set(uniform.tolist()) == set(range(10, 20))
    assert stats.chisquare(counts).pvalue > 1e-3
    listed = mix_dists.value_sizes(_params(value_dist="list", value_sizes="100:9, 5000:1"),
                                   _rng(), N, 1_000_000)
    share = np.count_nonzero(listed == 5000) / N
    assert set(listed.tolist()) == {100, 5000}
    assert abs(share - 0.1) < 4 * np.sqrt(0.1 * 0.9 / N)


@pytest.mark.parametrize(("params", "message"), [
    ({"value_dist": "list"}, "value_sizes: value_dist 'list' needs sizes"),
    ({"value_dist": "list", "value_sizes": "100:9,abc"}, "entry 2 'abc' is not size:weight"),
    ({"value_dist": "list", "value_sizes": "100:-1"}, "weight must be a number >= 0"),
    ({"value_dist": "list", "value_sizes": "2000000:1"}, "size 2000000 is not between 1"),
    ({"value_dist": "uniform", "value_size_min_bytes": 50, "value_size_max_bytes": 10},
     "value_size_min_bytes 50 is above value_size_max_bytes 10"),
])
def test_bad_distributions_are_refused_with_the_setting_named(
        params: dict[str, Any], message: str) -> None:
    problems = MC.validate(_params(**params), {})
    assert any(message in p for p in problems), problems


def test_settings_are_checked_by_name() -> None:
    assert check_settings("workload.params", {"key_dist": "zipf"}, MC.params)
    assert check_settings("workload.params", {"zipf_s": 0}, MC.params)
    assert not check_settings("workload.params", {"key_dist": "hotspot",
                                                  "hotspot_keys": 0.05}, MC.params)


@pytest.mark.parametrize("wl", [MC, REDIS], ids=["memcache", "redis"])
def test_native_tables_send_what_the_python_paths_send(wl: Any) -> None:
    """With sizes per set, the core's request for entry j (head, then the tail's last
    size + framing bytes) is byte for byte the Python paths' set_seq[j] + tail_seq[j]."""
    p = _params(wl, key_dist="zipfian", value_dist="list", value_sizes="10:1,300:1,4000:1")
    client = wl.client({wl.requires[0]: Endpoint(wl.requires[0], "127.0.0.1", 1)}, p, 0)
    ops = client.native_ops()
    off = np.frombuffer(ops.set_offsets, np.uint32)
    sizes = np.frombuffer(ops.set_sizes, np.uint32)
    assert len(sizes) == client.period == len(off) - 1
    for j in range(0, client.period, 997):
        tail = ops.set_tail[len(ops.set_tail) - (int(sizes[j]) + ops.set_tail_framing_bytes):]
        assert ops.sets[off[j]:off[j + 1]] + tail == client.set_seq[j] + client.tail_seq[j]
        assert int(sizes[j]) == client.sizes[j]


# -- integration: what real servers saw -------------------------------------------------

def _config(wl: Any, endpoint: Endpoint, params: dict[str, Any], **kw: Any) -> ClientConfig:
    return ClientConfig(workload=wl.name, params=params,
                        endpoints={wl.requires[0]: endpoint.to_dict()}, client_id=3, **kw)


def _run(wl: Any, cfg: ClientConfig) -> OpsArrays:
    return run_client(wl, cfg, prepare=True).arrays(wl.ops)


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_redis_saw_zipfian_keys_and_listed_value_sizes(redis_server: RunningService) -> None:
    ep = redis_server.endpoint
    p = _params(REDIS, key_dist="zipfian", zipf_s=1.1, value_dist="list",
                value_sizes="64:3,1024:1")
    n = 20_000
    asyncio.run(REDIS.prepare({"redis": ep}, p))
    monitor = RedisMonitor(ep)
    ops = run_client(REDIS, _config(REDIS, ep, p, ops=n, connections=4, inflight=2)
                     ).arrays(REDIS.ops)
    seen = monitor.commands(n)
    assert len(seen) == n == len(ops)
    keys = Counter(int(key.rsplit(b":", 1)[1]) for _, key, _ in seen)  # b"key:00..0123"
    pmf = stats.zipfian.pmf(np.arange(1, 1001), 1.1, 1000)
    top = np.array([keys.get(i, 0) for i in range(10)])
    assert stats.chisquare(np.append(top, n - top.sum()),
                           np.append(pmf[:10], pmf[10:].sum()) * n).pvalue > 1e-3
    set_sizes = Counter(len(value) for cmd, _, value in seen if cmd == b"SET")
    assert set(set_sizes) == {64, 1024}
    sets = sum(set_sizes.values())
    assert abs(set_sizes[1024] / sets - 0.25) < 4 * np.sqrt(0.25 * 0.75 / sets)
    # What the records say each set wrote is what the server was sent.
    recorded = Counter(ops.nbytes[ops.op == SET].tolist())
    assert recorded == set_sizes and set(ops.status.tolist()) == {OK}


@pytest.mark.integration
@pytest.mark.usefixtures("loadgen_engine")
def test_memcached_holds_values_of_the_uniform_sizes(memcached_server: RunningService) -> None:
    ep = memcached_server.endpoint
    p = _params(MC, key_dist="hotspot", value_dist="uniform", value_size_min_bytes=1,
                value_size_max_bytes=3000, key_space=400)
    ops = _run(MC, _config(MC, ep, p, ops=6000, connections=2, inflight=4))
    assert set(ops.status.tolist()) == {OK}
    sizes = ops.nbytes[ops.op == SET]
    assert sizes.min() >= 1 and sizes.max() <= 3000 and len(set(sizes.tolist())) > 100

    async def read_all() -> list[bytes | None]:
        mc = await memcache.connect(ep.host, ep.port)
        try:
            return list(await asyncio.gather(*(mc.get(MC.key(i, 16)) for i in range(400))))
        finally:
            mc.close()

    held = [len(v) for v in asyncio.run(read_all()) if v is not None]
    assert len(held) == 400 and min(held) >= 1 and max(held) <= 3000
    assert stats.kstest(held, stats.randint(1, 3001).cdf).pvalue > 1e-3
