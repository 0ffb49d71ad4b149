"""Open-loop arrival schedules: when each op of a client process is meant to start.

An op's latency in open loop is measured from its intended start, so a server stall
shows up in every op that should have started during it (no coordinated omission, as
with YCSB's intended-time measurement and wrk2).
"""

from __future__ import annotations

import math
from array import array

import numpy as np

ARRIVALS = ("fixed", "poisson")
_CHUNK = 1 << 16


class Schedule:
    """Intended start offsets (ns from the run's start) at `rate_ops_s` for one process.

    `fixed`: evenly spaced, shifted by `phase` (a fraction of one interval) so that
    several processes interleave. `poisson`: exponential gaps from a seeded generator.
    """

    def __init__(self, rate_ops_s: float, arrival: str = "fixed", *, seed: int = 0,
                 phase: float = 0.0) -> None:
        if rate_ops_s <= 0:
            raise ValueError("rate_ops_s must be positive")
        if arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {ARRIVALS}")
        self.interval_ns = 1e9 / rate_ops_s
        self.arrival = arrival
        self.phase_ns = phase * self.interval_ns
        self._rng = np.random.default_rng(seed)
        self._offsets = array("q")
        self._last = self.phase_ns

    def at(self, seq: int) -> int:
        """Intended start of the `seq`-th op (0-based), ns from the run's start."""
        if self.arrival == "fixed":
            return int(self.phase_ns + seq * self.interval_ns)
        offsets = self._offsets
        while seq >= len(offsets):
            gaps = self._rng.exponential(self.interval_ns, _CHUNK)
            chunk = self._last + np.cumsum(gaps)
            self._last = float(chunk[-1])
            offsets.frombytes(chunk.astype(np.int64).tobytes())
        return offsets[seq]

    def offsets(self, first: int, count: int) -> np.ndarray:
        """`at(s)` for s in first..first+count-1 as one int64 array (the native core
        takes the schedule in chunks; same values as `at`)."""
        if count <= 0:
            return np.empty(0, np.int64)
        if self.arrival == "fixed":
            seqs = np.arange(first, first + count, dtype=np.float64)
            return (self.phase_ns + seqs * self.interval_ns).astype(np.int64)
        self.at(first + count - 1)  # draws the gaps up to the last one
        return np.frombuffer(self._offsets, np.int64)[first:first + count].copy()

    def count_before(self, offset_ns: int) -> int:
        """How many ops are meant to start before `offset_ns` (ns from the run's start):
        the first seq whose `at` is at or after it. The open loop's accounting counts
        the ops intended in a window with it, and its pacer all the ops due at once."""
        if self.arrival == "fixed":
            # The arithmetic guess, then `at` itself settles the rounding at the edge.
            seq = max(0, math.ceil((offset_ns - self.phase_ns) / self.interval_ns))
            while seq > 0 and self.at(seq - 1) >= offset_ns:
                seq -= 1
            while self.at(seq) < offset_ns:
                seq += 1
            return seq
        while self._last < offset_ns:  # draw the gaps up to the cut
            self.at(len(self._offsets))
        # A view for this call only: `at` extends the array, which no live view allows.
        return int(np.searchsorted(np.frombuffer(self._offsets, np.int64), offset_ns, "left"))
