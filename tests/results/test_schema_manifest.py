"""The packed outcome round trip, and the one manifest builder."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ResultsError
from harness.results import (
    OUTCOME_WARMUP,
    STATUSES,
    Loadgen,
    Manifest,
    new_manifest,
    outcome,
    unpack_outcomes,
)
from harness.spec import config_id


def test_unpack_inverts_the_packing_the_load_generator_uses() -> None:
    rng = np.random.default_rng(3)
    n = 1000
    ops = rng.integers(0, 128, n)
    statuses = rng.integers(0, len(STATUSES), n)
    nbytes = rng.integers(0, 1 << 40, n)
    warm = rng.random(n) < 0.3
    packed = np.array([outcome(int(s), int(b)) | int(o) | (OUTCOME_WARMUP if w else 0)
                       for o, s, b, w in zip(ops, statuses, nbytes, warm, strict=True)])
    op, status, got_bytes, got_warm = unpack_outcomes(packed)
    assert op.dtype == np.int8 and status.dtype == np.int8
    assert np.array_equal(op, ops) and np.array_equal(status, statuses)
    assert np.array_equal(got_bytes, nbytes) and np.array_equal(got_warm, warm)


def test_new_manifest_derives_what_it_can() -> None:
    grid = {"op": "get", "threads": 4}
    man = new_manifest(run_id="r", experiment="e", workload="w", repetition=1,
                       grid_point=grid, params={"threads": 1, "size": 100},
                       loadgen=Loadgen(processes=1, connections=4, more={"engine": "native"}))
    assert isinstance(man, Manifest)
    assert man.config_id == config_id(grid)
    assert man.params == {"threads": 4, "size": 100, "op": "get"}  # the grid point wins
    assert man.loadgen["connections"] == 4 and man.loadgen["engine"] == "native"
    assert man.loadgen["mode"] is None
    assert Manifest.from_dict(man.to_dict()) == man


def test_new_manifest_refuses_what_it_does_not_know() -> None:
    kw = dict(run_id="r", experiment="e", workload="w", repetition=1, grid_point={})
    with pytest.raises(ResultsError, match="unknown manifest fields \\['colour'\\]"):
        new_manifest(**kw, colour="red")  # type: ignore[arg-type]
    with pytest.raises(ResultsError, match="schema_version is the kit's"):
        new_manifest(**kw, schema_version=2)  # type: ignore[arg-type]
    with pytest.raises(ResultsError, match="run status"):
        new_manifest(**kw, status="done")  # type: ignore[arg-type]
