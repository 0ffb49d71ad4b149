"""Open-loop arrival schedules."""

from __future__ import annotations

import numpy as np
import pytest

from harness.loadgen.schedule import Schedule


def test_fixed_schedule_is_evenly_spaced_and_phase_shifted() -> None:
    s = Schedule(1000.0, "fixed")
    assert [s.at(i) for i in range(4)] == [0, 1_000_000, 2_000_000, 3_000_000]
    half = Schedule(1000.0, "fixed", phase=0.5)
    assert half.at(0) == 500_000 and half.at(2) == 2_500_000


def test_poisson_schedule_has_the_rate_and_is_seeded() -> None:
    s = Schedule(2000.0, "poisson", seed=7)
    offsets = np.array([s.at(i) for i in range(100_000)])
    gaps = np.diff(offsets)
    assert np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(500_000, rel=0.02)
    # exponential gaps: the standard deviation equals the mean
    assert gaps.std() == pytest.approx(gaps.mean(), rel=0.05)
    again = Schedule(2000.0, "poisson", seed=7)
    assert [again.at(i) for i in (0, 70_000, 99_999)] == [offsets[0], offsets[70_000],
                                                          offsets[99_999]]
    assert Schedule(2000.0, "poisson", seed=8).at(10) != offsets[10]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Schedule(0, "fixed")
    with pytest.raises(ValueError):
        Schedule(10, "bursty")


@pytest.mark.parametrize("arrival", ["fixed", "poisson"])
def test_offsets_in_chunks_equal_at(arrival: str) -> None:
    """The native core takes the schedule as arrays: the same values as `at`."""
    chunked = Schedule(1234.5, arrival, seed=3, phase=0.3)
    single = Schedule(1234.5, arrival, seed=3, phase=0.3)
    got = np.concatenate([chunked.offsets(0, 100), chunked.offsets(100, 70_000)])
    assert got.dtype == np.int64
    assert got.tolist() == [single.at(s) for s in range(70_100)]
    assert chunked.offsets(5, 0).size == 0


@pytest.mark.parametrize("arrival", ["fixed", "poisson"])
@pytest.mark.parametrize("rate", [1234.5, 3.0, 2_000_000.0])
def test_count_before_counts_the_ops_meant_to_start_earlier(arrival: str, rate: float) -> None:
    """What the open loop's accounting rests on: the ops intended in a window, from the
    schedule alone (every op before the cut, none after it, the cut itself excluded)."""
    s = Schedule(rate, arrival, seed=5, phase=0.4)
    offsets = Schedule(rate, arrival, seed=5, phase=0.4).offsets(0, 200_000)
    cuts = [0, 1, int(offsets[0]), int(offsets[0]) + 1, *offsets[[7, 999, 150_000]].tolist(),
            int(offsets[150_000]) + 1, int(offsets[-1])]
    for cut in cuts:
        assert s.count_before(cut) == int(np.searchsorted(offsets, cut, "left")), cut
    assert s.count_before(-5) == 0
