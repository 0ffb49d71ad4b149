"""The `ycsb` workload without servers: presets and overrides, op mixes of A-F, keys,
the insert shares of client processes, workload D's skew towards recent inserts, and
what a spec may not ask (memcached scans, a server of no kind it knows)."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from harness.errors import SpecError, WorkloadError
from harness.services.base import Endpoint
from harness.spec import expand, load_spec
from harness.workloads import WORKLOADS
from harness.workloads.ycsb import INSERT_SHARE, YcsbClient
from harness.workloads.ycsb_gen import Zipfian, fnvhash64, zeta
from harness.workloads.ycsb_props import INSERT, OPS, PRESETS, READ, Props, problems
from tests.workloads.test_ycsb_gen import gray_pmf

WL = WORKLOADS.get("ycsb")
NOWHERE = {"redis": Endpoint("redis", "127.0.0.1", 1)}
N_OPS = 40_000
#: YCSB's workload files: the share of each op.
MIXES: dict[str, dict[str, float]] = {
    "a": {"read": 0.5, "update": 0.5},
    "b": {"read": 0.95, "update": 0.05},
    "c": {"read": 1.0},
    "d": {"read": 0.95, "insert": 0.05},
    "e": {"scan": 0.95, "insert": 0.05},
    "f": {"read": 0.5, "read_modify_write": 0.5},
}


def _client(client_id: int = 0, **params: Any) -> YcsbClient:
    client = WL.client(NOWHERE, params, client_id)
    assert isinstance(client, YcsbClient)
    return client


@pytest.mark.parametrize("workload", sorted(MIXES))
def test_op_mix_of_each_core_workload(workload: str) -> None:
    client = _client(workload=workload)
    counts = Counter(OPS[client.next_op(seq)] for seq in range(N_OPS))
    assert set(counts) == set(MIXES[workload])
    for op, share in MIXES[workload].items():
        assert counts[op] / N_OPS == pytest.approx(share, abs=0.02), (op, counts)


def test_presets_and_overrides() -> None:
    d = Props.of({"workload": "d"})
    assert d.request_distribution == "latest" and d.proportions == (0.95, 0, 0.05, 0, 0)
    e = Props.of({"workload": "e"})
    assert (e.max_scan_length, e.scan_length_distribution) == (100, "uniform")
    # Not in the preset: CoreWorkload's defaults.
    assert Props.of({"workload": "a"}).max_scan_length == 1000
    assert set(PRESETS) == set(MIXES)
    # A param set wins over the preset; proportions are weights (YCSB normalises them).
    p = Props.of({"workload": "a", "read_proportion": 0.8, "request_distribution": "uniform",
                  "max_scan_length": 7})
    assert p.proportions == (0.8, 0.5, 0, 0, 0) and p.request_distribution == "uniform"
    client = _client(workload="a", read_proportion=0.8)
    reads = sum(client.next_op(s) == READ for s in range(N_OPS)) / N_OPS
    assert reads == pytest.approx(0.8 / 1.3, abs=0.01)
    # YCSB's room for inserts in the zipfian chooser: operationcount x insert x 2.
    assert Props.of({"workload": "e", "operation_count": 1000}).expected_new_keys == 100


def test_choices_are_seeded_per_client_and_seed() -> None:
    def ops(client: YcsbClient) -> list[int]:
        return [client.next_op(s) for s in range(5000)]

    assert ops(_client(0)) == ops(_client(0))
    assert ops(_client(0)) != ops(_client(1))
    assert ops(_client(0)) != ops(_client(0, seed=1))
    # A chunk drawn again (a late op after it was dropped) is the same chunk.
    c = _client(0)
    first = c._chunk(10)[0]
    for s in range(0, 10 * 4096, 4096):
        c._chunk(s)
    assert c._chunk(10)[0] == first and c._chunk(10)[0] is not first


def test_keys_and_each_process_inserting_in_its_own_share() -> None:
    a, b = _client(0, workload="d"), _client(3, workload="d")
    # Loaded records: YCSB's keys, the same for every process.
    assert a.key(0) == b.key(0) == f"user{fnvhash64(0)}"
    assert a.key(999) == b.key(999) == f"user{fnvhash64(999)}"
    # The k-th insert of process i is keynum 1000 + i * 2^32 + k.
    assert a.key(1000) == f"user{fnvhash64(1000)}"
    assert b.key(1005) == f"user{fnvhash64(1000 + 3 * INSERT_SHARE + 5)}"
    assert _client(3, workload="d", insert_order="ordered").key(1005) == (
        f"user{1000 + 3 * INSERT_SHARE + 5}")


def test_workload_d_reads_concentrate_on_recent_inserts() -> None:
    """D's reads, with every insert acknowledged as it is drawn: the offset of a read's
    keynum below the last insert follows the latest generator (offset 0 with probability
    1 / zeta(last)), so most reads land on the newest few records."""
    client = _client(workload="d")
    offsets, last_at_read = [], []
    for seq in range(N_OPS):
        chunk, j = client._chunk(seq)
        if client.next_op(seq) == INSERT:
            client.counter.acknowledge(client.counter.next())
            continue
        last = client.counter.last
        offsets.append(last - client.chooser.keynum(chunk.keys[j], last))
        last_at_read.append(last)
    offsets_a = np.array(offsets)
    inserted = client.counter.last - 999
    assert inserted == pytest.approx(0.05 * N_OPS, rel=0.1)
    assert offsets_a.min() == 0
    def expected(offsets_below: int) -> float:
        """P(offset < k) by the definition, averaged over the reads: a zipfian over the
        `last` items at the read, zeta grown to it, eta of the 999 items the generator
        was built with (SkewedLatestGenerator over YCSB's ZipfianGenerator)."""
        shares = []
        for n in last_at_read[::100]:
            z = SimpleNamespace(theta=0.99, items=n, zetan=zeta(n, 0.99))
            z.eta = Zipfian(0, 999, 0.99, z.zetan).eta
            pmf = gray_pmf(z, max(offsets_below, 2))  # type: ignore[arg-type]
            shares.append(pmf[:offsets_below].sum())
        return float(np.mean(shares))

    assert (offsets_a == 0).mean() == pytest.approx(expected(1), abs=0.01)
    # The newest 30 of 1,000 to 3,000 records: ~45 % of the reads (uniform: ~1.5 %).
    assert (offsets_a < 30).mean() == pytest.approx(expected(30), abs=0.01)
    # Records inserted during the run (the newest up to 2,000) take ~3/4 of the reads,
    # though the loaded 1,000 were all there is at the start.
    at_read = np.array(last_at_read) - 999
    assert (offsets_a < at_read).mean() > 0.7


def test_problems_name_the_field() -> None:
    assert problems({"workload": "a"}, "redis") == []
    [msg] = problems({"workload": "e"}, "memcached")
    assert msg.startswith("params.workload: memcached has no scans") and "0.95" in msg
    [msg] = problems({"workload": "a", "scan_proportion": 0.1}, "memcached")
    assert msg.startswith("params.scan_proportion: memcached has no scans")
    assert problems({"workload": "e"}, "redis") == problems({"workload": "e"}, "postgres") == []
    assert problems({"workload": "c", "zipfian_constant": 1.0}, "redis") == [
        "params.zipfian_constant: must be below 1 (Gray's method divides by 1 - theta)"]
    assert problems({"workload": "a", "read_proportion": 0.0, "update_proportion": 0.0},
                    "redis") == ["params: every op's proportion is 0: nothing to draw"]
    assert problems({"workload": "d", "record_count": 1}, "redis")[0].startswith(
        "params.workload: latest needs record_count")
    assert problems({"request_distribution": "hotspot", "record_count": 3}, "redis") == [
        "params.hotspot_data_fraction: the hot set has no record (3 x 0.2 < 1)"]
    assert problems({"workload": "c", "field_length": 200_000}, "memcached")[0].startswith(
        "params.field_length: a record is 2,000,")
    assert problems({"workload": "c"}, "postgres", inflight=4)[0].startswith(
        "clients.inflight: PostgreSQL runs one query at a time")
    with pytest.raises(WorkloadError, match="memcached has no scans"):
        WL.client({"memcached": Endpoint("memcached", "127.0.0.1", 1)}, {"workload": "e"}, 0)
    with pytest.raises(WorkloadError, match=r"params\.workload: 'g' is not one of"):
        _client(workload="g")
    with pytest.raises(WorkloadError, match=r"params\.record_count: must be at least 1"):
        _client(record_count=0)
    with pytest.raises(WorkloadError, match="needs exactly one of redis, memcached, postgres"):
        WL.client({}, {"workload": "a"}, 0)


def _spec(tmp_path: Path, services: str, params: str = "{workload: a}",
          clients: str = "{processes: 1}") -> Path:
    path = tmp_path / "ycsb.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: y
        workload: ycsb
        services: {services}
        clients: {clients}
        params: {params}
        run: {{ops: 100}}
        """))
    return path


def test_spec_takes_one_server_of_the_three_kinds(tmp_path: Path) -> None:
    for kind in ("redis", "memcached", "postgres"):
        assert load_spec(_spec(tmp_path, f"{{db: {{kind: {kind}}}}}")).workload == "ycsb"
    with pytest.raises(SpecError) as info:
        load_spec(_spec(tmp_path, "{a: {kind: redis}, b: {kind: postgres}}"))
    assert "needs exactly one service of one of the kinds redis, memcached, postgres, " \
           "found 2 (redis, postgres)" in str(info.value)
    with pytest.raises(SpecError, match="kinds redis, memcached, postgres, found 0"):
        load_spec(_spec(tmp_path, "{app: {kind: filestore_app}}"))


def test_spec_refuses_scans_on_memcached_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(_spec(tmp_path, "{cache: {kind: memcached}}", "{workload: e}"))
    [problem] = info.value.problems
    assert "params.workload: memcached has no scans" in problem
    # In a grid, the run that scans is named.
    path = _spec(tmp_path, "{cache: {kind: memcached}}", "{workload: a}")
    path.write_text(path.read_text() + "grid: {scan_proportion: [0.0, 0.2]}\n")
    with pytest.raises(SpecError, match=r"params.scan_proportion: memcached has no scans.*"
                                        r"\(in run scan_proportion=0.2 rep 1\)"):
        load_spec(path)
    with pytest.raises(SpecError, match=r"clients\.inflight: PostgreSQL"):
        load_spec(_spec(tmp_path, "{db: {kind: postgres}}", clients="{inflight: 2}"))


def test_the_example_spec() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "ycsb" / "redis.yaml"
    plans = expand(load_spec(example))
    assert sorted({p.params["workload"] for p in plans}) == sorted(MIXES)
    assert len(plans) == 6 * 5
    with pytest.raises(SpecError, match=r"memcached has no scans.*workload=e"):
        load_spec(example, overrides={"services.db.kind": "memcached"})
