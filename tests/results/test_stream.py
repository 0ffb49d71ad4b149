"""A run's records in parts (`results.stream`): exact order statistics in passes, and
the tally the manifest takes from parts against the one from the records joined."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.results import OK, REDIRECT, TIMEOUT, OpsArrays, OpsParts, stream, tally


@pytest.mark.parametrize("kind", ["lognormal", "few_values", "int64_extremes", "one"])
def test_percentiles_in_passes_are_numpys(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Holding at most 1,000 values at once (several narrowing passes), the linear
    percentiles over 7 parts are `np.percentile`'s over all values."""
    monkeypatch.setattr(stream, "KEEP_VALUES", 1000)
    rng = np.random.default_rng(7)
    for trial in range(8):
        n = 1 if kind == "one" else int(rng.integers(2_000, 40_000))
        if kind == "lognormal":
            v = rng.lognormal(12, 1.5, n).astype(np.int64)
        elif kind == "few_values":
            v = rng.integers(-5, 5, n)
        elif kind == "int64_extremes":
            v = rng.integers(-2**62, 2**62, n)
        else:
            v = np.array([42], np.int64)
        parts = np.array_split(v, 7)
        qs = [0, 1, 50, 99, 99.9, 100]
        got = stream.percentiles(lambda parts=parts: iter(parts), n, qs)
        want = np.percentile(v, qs)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-6), (trial, got, want)


def _ops(rng: np.random.Generator, n: int, client: int, t0: int) -> OpsArrays:
    status = rng.choice([OK, OK, OK, TIMEOUT, REDIRECT], n).astype(np.int8)
    start = t0 + np.sort(rng.integers(0, 10**9, n))
    intended = start - rng.integers(0, 10**5, n)
    return OpsArrays(("get", "set"), np.full(n, client, np.int32),
                     rng.integers(0, 2, n).astype(np.int8), start,
                     rng.lognormal(11, 1, n).astype(np.int64), intended, status,
                     np.full(n, 100, np.int64), np.arange(n) < n // 10)


def test_a_tally_from_parts_on_disk_is_the_tally_of_the_records_joined(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts, rate, p50/p99, error rate, send lag and the last end: streamed from npz
    parts (the in-memory limit below the run) as from the records in one piece."""
    rng = np.random.default_rng(3)
    parts = [_ops(rng, 5000, c, k * 10**9) for c in range(2) for k in range(3)]
    paths = []
    for k, p in enumerate(parts):
        paths.append(tmp_path / f"p{k}.npz")
        p.save_npz(paths[-1])
    joined = tally(OpsArrays.concat(parts, ("get", "set")))
    monkeypatch.setattr(stream, "IN_MEMORY_RECORDS", 1000)
    monkeypatch.setattr(stream, "KEEP_VALUES", 2000)
    streamed = tally(OpsParts(("get", "set"), list(paths)))
    assert streamed.counts == joined.counts and streamed.records == 30_000
    assert streamed.quick() == pytest.approx(joined.quick(), rel=1e-12)
    assert streamed.send_lag_p99_ms == pytest.approx(joined.send_lag_p99_ms, rel=1e-12)
    assert streamed.last_end_ns == joined.last_end_ns
    assert joined.counts == OpsArrays.concat(parts, ("get", "set")).counts()
