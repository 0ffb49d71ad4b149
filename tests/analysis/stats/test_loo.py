"""One-sort leave-one-out percentiles equal numpy's and `intervals.quantile_interval`."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.analysis.stats.intervals import quantile_interval
from harness.analysis.stats.loo import numpy_linear, quantile_interval_sorted

QS = (0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000, 4097])
def test_numpy_linear_is_np_quantile_bit_for_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    for x in (rng.lognormal(0, 1, n), rng.integers(0, 5, n) / 1e6):  # ties too
        s = np.sort(x)
        for q in QS:
            assert numpy_linear(n, q, s.__getitem__) == np.quantile(x, q), (n, q)


def _same(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, float) and np.isnan(x):
            assert np.isnan(y), f.name
        else:
            assert x == y, (f.name, x, y)


@pytest.mark.parametrize("runs,per_run", [(2, 2000), (5, 1000), (7, 333), (3, 50), (1, 500)])
def test_interval_equals_the_one_pass_per_run_version(runs: int, per_run: int) -> None:
    rng = np.random.default_rng(runs * per_run)
    lat_ns = np.concatenate([rng.lognormal(np.log(1e5 * rng.uniform(0.8, 1.2)), 0.4,
                                           per_run + r).astype(np.int64)
                             for r in range(runs)])
    run = np.repeat(np.arange(runs) * 3 + 1, [per_run + r for r in range(runs)])
    lat = lat_ns / 1e6
    order = np.argsort(lat_ns, kind="stable")
    for q in (0.5, 0.9, 0.99):
        _same(quantile_interval(lat, run, q), quantile_interval_sorted(lat[order], run[order], q))


def test_scaled_values_are_those_of_the_divided_array() -> None:
    from harness.analysis.stats.loo import SortedOps

    rng = np.random.default_rng(9)
    ns = np.sort(rng.lognormal(np.log(1e5), 0.5, 3001).astype(np.int64))
    run = rng.integers(0, 4, ns.size).astype(np.int32)
    scaled, divided = SortedOps(ns, run, 1e6), SortedOps(ns / 1e6, run)
    for q in QS:
        assert scaled.quantile(q) == divided.quantile(q) == np.quantile(ns / 1e6, q)
        assert np.array_equal(scaled.leave_one_out(q), divided.leave_one_out(q))
    assert SortedOps(ns, run).quantile(0.99) == np.quantile(ns, 0.99)


@pytest.mark.parametrize("runs,per_run", [(2, 2000), (5, 1000), (7, 333), (3, 50), (1, 500),
                                          (4, 3)])
def test_per_run_sorted_ops_equal_the_pooled_sort(runs: int, per_run: int) -> None:
    """`RunSorted` (each run sorted, percentiles by counting) gives `quantile_interval`'s
    intervals and `SortedOps`' percentiles, leave-one-outs and tails, ties included."""
    from harness.analysis.stats.loo import RunSorted, SortedOps

    rng = np.random.default_rng(runs * per_run + 7)
    sizes = [per_run + r for r in range(runs)]
    parts = [rng.lognormal(np.log(1e5 * rng.uniform(0.8, 1.2)), 0.4, m).astype(np.int64)
             for m in sizes]
    parts[0][: len(parts[0]) // 3] = 100_000  # ties across runs
    lat_ns = np.concatenate(parts)
    run = np.repeat(np.arange(runs) * 3 + 1, sizes)
    order = np.argsort(lat_ns, kind="stable")
    pooled = SortedOps(lat_ns[order], run[order], 1e6)
    per = RunSorted([np.sort(p) for p in parts], np.arange(runs) * 3 + 1, 1e6)
    assert per.n == pooled.n and np.array_equal(per.counts, pooled.counts)
    assert np.array_equal(per.labels, pooled.labels)
    for q in QS:
        assert per.quantile(q) == pooled.quantile(q) == np.quantile(lat_ns / 1e6, q), q
        assert np.array_equal(per.per_run(q), pooled.per_run(q))
        if runs > 1:
            assert np.array_equal(per.leave_one_out(q), pooled.leave_one_out(q)), q
        value = pooled.quantile(q)
        assert per.tail_runs(value, q) == pooled.tail_runs(value, q), q
    for q in (0.5, 0.9, 0.99):
        _same(per.interval(q), quantile_interval(lat_ns / 1e6, run, q))
    assert per.max() == lat_ns.max() / 1e6


def test_int32_runs_count_as_their_int64_selves() -> None:
    """`compact` stores a run as int32 when it fits; percentiles, leave-one-outs and
    tails are those of the int64 runs, also with a run that does not fit."""
    from harness.analysis.stats.loo import RunSorted, compact

    rng = np.random.default_rng(3)
    parts = [np.sort(rng.lognormal(np.log(1e5), 0.6, 800 + r).astype(np.int64))
             for r in range(4)]
    parts[3][-1] = 2**40  # one run too wide for int32: stays int64
    small = [compact(p) for p in parts]
    assert [p.dtype for p in small] == [np.int32] * 3 + [np.int64]
    wide, narrow = RunSorted(parts, np.arange(4), 1e6), RunSorted(small, np.arange(4), 1e6)
    for q in QS:
        assert wide.quantile(q) == narrow.quantile(q)
        assert np.array_equal(wide.leave_one_out(q), narrow.leave_one_out(q))
        assert np.array_equal(wide.per_run(q), narrow.per_run(q))
        v = wide.quantile(q)
        assert wide.tail_runs(v, q) == narrow.tail_runs(v, q)
    assert compact(np.array([-(2**31), 5])).dtype == np.int64  # the bound itself: not inside


@pytest.mark.parametrize("native", [True, False], ids=["C", "numpy"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("spread", [0.0, 1e3, 1e6, 1e9, 1e13])
def test_sort_ints_is_numpys_sort_on_every_span(dtype: type, spread: float, native: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Both paths (the C radix sort and numpy's digits): one digit, two, three, and the
    comparison sort past 32 bits of span; negative values and the int32 extremes wrap
    through the unsigned digits and back."""
    from harness.analysis.stats import loo
    from harness.analysis.stats.loo import sort_ints

    if native:
        _radix_built()
    else:
        monkeypatch.setattr(loo, "_radix", None)
    rng = np.random.default_rng(int(spread) % 97)
    x = (rng.random(50_000) * spread).astype(np.int64) + rng.integers(-5, 5)
    if dtype is np.int32:
        if spread > 2**31:
            x = np.clip(x, -(2**31) + 1, 2**31 - 2)
            x[:2] = [-(2**31) + 1, 2**31 - 2]  # a span of 2**32 - 3
        x = x.astype(np.int32)
    got = sort_ints(x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, np.sort(x))


def _radix_built() -> None:
    """Skip where the C radix sort is not built (no compiler); under CI it must be."""
    import os

    from harness.analysis.stats import loo

    if loo._radix is None:
        if os.environ.get("CI"):
            pytest.fail("the C radix sort (harness.analysis.stats._radix) is not built under CI")
        pytest.skip("the C radix sort is not built here (no C compiler at install)")


def test_the_c_sort_refuses_buffers_it_cannot_sort() -> None:
    """Two uint32 buffers of one length, or a ValueError before anything is touched."""
    _radix_built()
    from harness.analysis.stats.loo import _radix

    a = np.array([3, 1, 2], np.uint32)
    for scratch in (np.zeros(2, np.uint32), np.zeros(3, np.int64), np.zeros(3, np.uint16)):
        with pytest.raises(ValueError, match="two contiguous uint32 buffers"):
            _radix.sort_u32(a, scratch)
    assert a.tolist() == [3, 1, 2]
    with pytest.raises(TypeError, match="read-write bytes-like"):  # Python's own check
        _radix.sort_u32(np.zeros(6, np.uint32)[::2], np.zeros(3, np.uint32))
    b = np.zeros(3, np.uint32)
    assert (a, b)[_radix.sort_u32(a, b)].tolist() == [1, 2, 3]
