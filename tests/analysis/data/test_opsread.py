"""The summary's one read of each ops file (`opsread.run_ops`): its C split of a batch
by key (`_opsplit`) and numpy's give the same groups, sums, warm-ups and sorted
latencies, batch by batch; the C split refuses what it cannot read."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.data import opsread
from harness.results import STATUS_CODE, OpsArrays, new_manifest, write_run

OPS = ("get", "set", "delete")


def _split_built() -> None:
    """Skip where the C split is not built (no compiler); under CI it must be."""
    if opsread._opsplit is None:
        if os.environ.get("CI"):
            pytest.fail("the C ops split (harness.analysis.data._opsplit) is not built under CI")
        pytest.skip("the C ops split is not built here (no C compiler at install)")


@pytest.fixture(scope="module")
def ops_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of 3 clients: every status, warm-up, open-loop intents with nulls, a
    late client whose ops begin before the others' (b is not in order by op)."""
    rng = np.random.default_rng(7)
    n = 30_000
    client = rng.integers(0, 3, n).astype(np.int32)
    start = np.sort(rng.integers(0, 10**10, n)) - np.where(client == 2, 10**6, 0)
    statuses = list(STATUS_CODE.values())
    ops = OpsArrays(
        op_names=OPS, client=client, op=rng.integers(0, 3, n).astype(np.int8),
        start_ns=start, latency_ns=rng.lognormal(11, 1, n).astype(np.int64),
        intended_ns=np.where(rng.random(n) < 0.3, -1, start - rng.integers(0, 10**4, n)),
        status=rng.choice(statuses, n, p=[0.8, 0.1, 0.04, 0.03, 0.03]).astype(np.int8),
        nbytes=np.full(n, 100, np.int64), warmup=np.arange(n) < 2_000,
    )
    manifest = new_manifest(run_id="r1", experiment="e", workload="w", repetition=1, grid_point={},
                            started_utc="2026-01-01T00:00:00Z",
                            ended_utc="2026-01-01T00:00:01Z")
    return write_run(tmp_path_factory.mktemp("raw"), manifest, ops) / "ops.parquet"


def _parts(path: Path, keys: list[str]) -> dict[tuple[object, ...], dict[str, object]]:
    out = {}
    for key, part in opsread.run_ops(str(path), keys, warmups=True).items():
        fields = dataclasses.asdict(part)
        fields["lat"] = [a.tolist() for a in part.lat]
        out[key] = fields
    return out


@pytest.mark.parametrize("keys", [[], ["op"], ["client"], ["op", "client"]], ids=str)
def test_the_c_split_is_numpys_in_every_field(ops_file: Path, keys: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _split_built()
    monkeypatch.setattr(opsread, "BATCH_ROWS", 7_001)  # five batches, groups across them
    native = _parts(ops_file, keys)
    monkeypatch.setattr(opsread, "_opsplit", None)
    plain = _parts(ops_file, keys)
    # Exact, floats too: both splits give the same integers in the same order, and the
    # float fields (mean_ns, the warm-up) are then one numpy computation of them, not
    # sums of the same numbers in another order.
    assert native == plain
    assert len(plain) == {0: 1, 1: 3, 2: 9}[len(keys)]
    assert sum(p["n_err"] for p in plain.values()) > 0
    assert sum(p["n_miss"] for p in plain.values()) > 0
    assert all(p["warmup"] is not None for p in plain.values())


def test_the_c_split_refuses_buffers_it_cannot_read() -> None:
    """Buffers of one length, codes and statuses in range, or a ValueError."""
    _split_built()
    from harness.analysis.data import _opsplit

    n = 4
    codes = np.array([0, 1, 0, 1], np.int8)
    args = dict(codes=codes, warmup=np.zeros(n, bool), status=np.zeros(n, np.int8),
                kinds=bytes([0]), lat=np.arange(n, dtype=np.int64),
                b=np.arange(n, dtype=np.int64), lat_out=np.zeros(n, np.int64),
                b_out=np.zeros(n, np.int64), stats=np.zeros((2, 7), np.int64))

    def split(**change: object) -> None:
        _opsplit.split(*{**args, **change}.values())

    for change in ({"lat": np.arange(n + 1, dtype=np.int64)}, {"b_out": np.zeros(n, np.int32)},
                   {"codes": codes.astype(np.int16)}, {"stats": np.zeros((2, 6), np.int64)}):
        with pytest.raises(ValueError, match="contiguous buffers of one length"):
            split(**change)
    with pytest.raises(ValueError, match="a code outside"):
        split(stats=np.zeros((1, 7), np.int64))
    with pytest.raises(ValueError, match="a status outside"):
        split(status=np.array([0, 0, 1, 0], np.int8))
    with pytest.raises(TypeError, match="read-write bytes-like"):  # Python's own check
        split(lat_out=np.zeros(n, np.int64).tobytes())
    split()
    assert args["stats"][:, 0].tolist() == [2, 2]
    assert args["lat_out"].tolist() == [0, 2, 1, 3]


def test_codes_of_a_large_dictionary_go_through_the_c_split(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A foreign file whose op dictionary has int16 indices (300 names) is split in C
    as numpy splits it."""
    _split_built()
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 3_000
    names = [f"op{i}" for i in range(300)]
    rng = np.random.default_rng(1)
    table = pa.table({
        "op": pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 300, n), pa.int16()),
                                             names),
        "start_ns": np.arange(n, dtype=np.int64), "latency_ns": rng.integers(1, 99, n),
        "intended_ns": pa.nulls(n, pa.int64()),
        "status": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), ["ok"]),
        "warmup": np.zeros(n, bool),
    })
    pq.write_table(table, tmp_path / "ops.parquet")
    native = _parts(tmp_path / "ops.parquet", ["op"])
    monkeypatch.setattr(opsread, "_opsplit", None)
    plain = _parts(tmp_path / "ops.parquet", ["op"])
    assert native == plain and len(plain) == 300
