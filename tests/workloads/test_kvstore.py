"""kvstore workload: op sequences, key choice, values (no servers; the runs against real
servers are in tests/studies/kvstore/test_elastic.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from harness.datasets.emails import GeneratedEmails, decode_value
from harness.errors import WorkloadError
from harness.services.base import Endpoint
from harness.settings import check_settings, resolve
from harness.workloads import WORKLOADS
from harness.workloads.kvstore import GET, PUT, KVClient

WL = WORKLOADS.get("kvstore")
KVTEXT = Endpoint("kvstore", "127.0.0.1", 1, {"protocol": "kvtext", "nodes": ["127.0.0.1:1"]})


def client(client_id: int = 0, endpoint: Endpoint = KVTEXT, **params: Any) -> KVClient:
    return WL.client({"kvstore": endpoint}, resolve(params, WL.params), client_id)


def test_put_then_get_puts_every_record_then_gets_it() -> None:
    c = client(records_per_client=5)
    ops = [c.next_op(s) for s in range(20)]
    assert ops == [PUT] * 5 + [GET] * 5 + [PUT] * 5 + [GET] * 5
    assert [c.index(ops[s], s) for s in range(10)] == [0, 1, 2, 3, 4] * 2
    more = client(records_per_client=2, get_passes=3)
    assert [more.next_op(s) for s in range(10)] == [PUT] * 2 + [GET] * 6 + [PUT] * 2


def test_clients_own_disjoint_records_of_one_dataset() -> None:
    a, b = client(0, records_per_client=3), client(1, records_per_client=3)
    ds = GeneratedEmails(6)
    assert [r.key for r in a.records + b.records] == [ds.record(i).key for i in range(6)]


def test_mix_follows_the_put_ratio_and_is_deterministic() -> None:
    c = client(mode="mix", put_ratio=0.2, key_dist="uniform", records_per_client=50)
    ops = [c.next_op(s) for s in range(5000)]
    assert 0.17 < ops.count(PUT) / len(ops) < 0.23
    again = client(mode="mix", put_ratio=0.2, key_dist="uniform", records_per_client=50)
    assert [again.next_op(s) for s in range(5000)] == ops
    idx = Counter(c.index(op, s) for s, op in enumerate(ops))
    assert set(idx) == set(range(50))


def test_zipf_gets_concentrate_on_few_records() -> None:
    c = client(key_dist="zipf", records_per_client=1000)
    hits = Counter(c.index(GET, s) for s in range(20000))
    top = sum(n for _, n in hits.most_common(100))
    assert top / 20000 > 0.5  # 10% of the records get most GETs
    assert c.index(PUT, 7) == 7  # PUTs of put_then_get still write every record


def test_versioned_values_carry_their_seq_and_stay_one_line() -> None:
    c = client(versioned=True, records_per_client=3)
    value = c.value(1, 42)
    assert b"\n" not in value and decode_value(value).endswith(b"\n-- v42")
    assert client(records_per_client=3).value(1, 42) == c.records[1].value


def test_backend_must_match_the_service() -> None:
    with pytest.raises(WorkloadError, match="backend 'redis_cluster' asked for"):
        client(backend="redis_cluster")
    with pytest.raises(WorkloadError, match="not the service's protocol 'memcache'"):
        client(endpoint=Endpoint("kvstore", "h", 1, {"protocol": "memcache"}))


def test_validate_reports_bad_values() -> None:
    p = resolve({"records_per_client": 0, "put_ratio": 1.5}, WL.params)
    assert WL.validate(p, {"median_bytes": [0]}) == ["need median_bytes > 0 and sigma >= 0"]
    # Each value's own range is its Setting's, checked by the spec.
    assert check_settings("params", {"records_per_client": 0, "put_ratio": 1.5},
                          WL.params) == ["params.records_per_client: must be at least 1",
                                         "params.put_ratio: must be at most 1"]
