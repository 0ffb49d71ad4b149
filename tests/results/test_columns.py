"""A worker's raw columns (`results.columns`): the records derived from them, checked
against values worked out by hand, the same after a round trip through a part file,
and files of either form read alike."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from harness.loadgen.spill import _HashingWriter
from harness.results import MISS, OK, OUTCOME_WARMUP, TIMEOUT, OpsArrays, OpsParts, outcome
from harness.results.columns import (
    FORMAT,
    RecordColumns,
    load_records,
    records_columns,
    records_len,
)
from harness.run.transfer import _check_npz

OPS = ("get", "set")


def _columns(open_loop: bool, key: bool = False) -> RecordColumns:
    # Four ops of a run that began at clock 1,000 with a warm-up until clock 1,100; the
    # process started 5 ns after the run's common start (offset).
    start = np.array([1_050, 1_090, 1_120, 1_200], np.int64)
    end = np.array([1_080, 1_150, 1_125, 1_290], np.int64)
    intended = np.array([1_040, 1_105, 1_100, 1_199], np.int64)
    packed = np.array([outcome(OK, 100) | 0, outcome(MISS, 0) | 0,
                       outcome(OK, 7) | 1, outcome(TIMEOUT, 0) | 1 | OUTCOME_WARMUP], np.int64)
    return RecordColumns(OPS, 4, start, end, packed, intended if open_loop else None,
                         base_ns=1_000, warmup_end_ns=1_100, offset_ns=5,
                         key=np.array([9, 8, 7, -1], np.int64) if key else None)


def test_closed_loop_records_are_worked_out_from_the_columns() -> None:
    a = _columns(open_loop=False).to_arrays()
    assert a.start_ns.tolist() == [55, 95, 125, 205]  # start - base + offset
    assert a.latency_ns.tolist() == [30, 60, 5, 90]  # end - start
    assert a.intended_ns.tolist() == [-1] * 4
    assert a.op.tolist() == [0, 0, 1, 1]
    assert a.status.tolist() == [OK, MISS, OK, TIMEOUT]
    assert a.nbytes.tolist() == [100, 0, 7, 0]
    # the time-based warm-up (start before 1,100) or the counted one (the packed flag)
    assert a.warmup.tolist() == [True, True, False, True]
    assert a.client.tolist() == [4] * 4 and a.key is None


def test_open_loop_latency_runs_from_the_intended_start() -> None:
    a = _columns(open_loop=True).to_arrays()
    assert a.latency_ns.tolist() == [40, 45, 25, 91]  # end - intended
    assert a.intended_ns.tolist() == [45, 110, 105, 204]
    # intended before 1,100, or the counted flag
    assert a.warmup.tolist() == [True, False, False, True]


@pytest.mark.parametrize("open_loop", [False, True])
@pytest.mark.parametrize("key", [False, True])
def test_a_part_file_reads_back_as_the_same_records(tmp_path: Path, open_loop: bool,
                                                    key: bool) -> None:
    cols = _columns(open_loop, key)
    path = tmp_path / "c4.part00000.npz"
    with open(path, "wb") as f:
        hashed = _HashingWriter(f)
        cols.save_npz(hashed)  # type: ignore[arg-type]
    # hashed as written, without seeking back: the file's own sha256
    assert hashed.sha256.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert hashed.bytes == path.stat().st_size
    want, got = cols.to_arrays(), load_records(path)
    for f in ("client", "op", "start_ns", "latency_ns", "intended_ns", "status", "nbytes",
              "warmup"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
        assert getattr(got, f).dtype == getattr(want, f).dtype, f
    assert (got.key is None) == (not key)
    if key:
        assert got.key.tolist() == [9, 8, 7, -1]
    assert records_len(path) == 4
    assert records_columns(path, ["latency_ns", "status"])["latency_ns"].tolist() == (
        want.latency_ns.tolist())
    _check_npz(path)  # what transfer asks of a copy
    # a run's parts of both forms tally alike
    derived = tmp_path / "c4.npz"
    want.save_npz(derived)
    assert records_len(derived) == 4
    joined = OpsParts(OPS, [path, derived]).joined()
    assert len(joined) == 8
    assert sorted(joined.latency_ns.tolist()) == sorted(want.latency_ns.tolist() * 2)
    assert joined.start_ns.tolist() == sorted(want.start_ns.tolist() * 2)


def test_a_newer_columns_format_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "c0.part00000.npz"
    np.savez(path, format=np.array("kvbench-columns-99"), op_names=np.array(OPS),
             client_id=0, base_ns=0, warmup_end_ns=0, offset_ns=0,
             start=np.zeros(1, np.int64), end=np.zeros(1, np.int64),
             outcome=np.zeros(1, np.int64))
    with pytest.raises(ValueError, match=f"kvbench-columns-99, this kit reads {FORMAT}"):
        load_records(path)


def test_derived_records_files_read_as_before(tmp_path: Path) -> None:
    a = OpsArrays.concat([_columns(False).to_arrays()], OPS)
    path = tmp_path / "c4.npz"
    a.save_npz(path)
    got = load_records(path)
    assert got.latency_ns.tolist() == a.latency_ns.tolist()
    assert records_columns(path, ["status"])["status"].tolist() == a.status.tolist()
