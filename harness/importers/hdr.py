"""HdrHistogram payloads -> per-op latencies at histogram precision (memtier, YCSB).

A compressed histogram (``HISTFAAAA...``: zlib-compressed, base64-encoded, as memtier's
JSON and HdrHistogram interval logs carry it) holds counts per bucket, not the ops. The
ops it stands for are rebuilt as one latency per counted op: each bucket's ops carry the
bucket's highest equivalent value, the value HdrHistogram's own ``valueAtPercentile``
returns, so percentiles of the rebuilt ops match the tool's within one bucket (relative
width 10^-significant digits). The mean is then up to one bucket above the tool's.

`spread_over_seconds` lays such latencies out on a per-second time axis whose counts and
quantiles the tool stated (memtier's "Time-Serie").
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.errors import ImportFormatError
from harness.importers.numbers import DEFAULT_MAX_OPS, MAX_OPS, too_many


@dataclass(frozen=True)
class DecodedHistogram:
    """Bucket values (the highest equivalent value of each non-empty bucket, in the
    tool's unit) and their counts, ascending; `significant_digits` as encoded."""

    values: np.ndarray
    counts: np.ndarray
    significant_digits: int

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def latencies(self, ns_per_unit: float) -> np.ndarray:
        """One latency per counted op, ascending, in nanoseconds (float)."""
        return np.repeat(self.values.astype(np.float64) * ns_per_unit, self.counts)


#: A compressed histogram inflates to its counts array: a few MB even for an hour at
#: microsecond resolution. One that would inflate past this is a zip bomb, refused before.
MAX_INFLATED_BYTES = 32 << 20
#: Characters of base64 one histogram may have (its compressed form is far smaller).
MAX_PAYLOAD_CHARS = 8 << 20


def _check_size(text: str, where: str) -> None:
    """Refuse a payload whose zlib body inflates past `MAX_INFLATED_BYTES`, inflating
    at most that much to find out (HdrHistogram's decoder inflates without bound)."""
    if len(text) > MAX_PAYLOAD_CHARS:
        raise ImportFormatError(f"{where}: a compressed histogram of {len(text):,} "
                                f"characters, more than {MAX_PAYLOAD_CHARS:,}")
    try:
        raw = base64.b64decode(text)
        inflated = zlib.decompressobj().decompress(raw[8:], MAX_INFLATED_BYTES + 1)
    except (ValueError, zlib.error, binascii.Error) as exc:
        raise ImportFormatError(f"{where}: damaged compressed histogram ({exc})") from None
    if len(inflated) > MAX_INFLATED_BYTES:
        raise ImportFormatError(f"{where}: the compressed histogram inflates past "
                                f"{MAX_INFLATED_BYTES >> 20} MB; is the file damaged?")


def decode(payload: str, where: str, max_ops: int = DEFAULT_MAX_OPS) -> DecodedHistogram:
    """Decode a compressed histogram; `where` names it in the error if it is damaged,
    inflates too far, or counts more than `max_ops` ops."""
    from hdrh.histogram import HdrHistogram  # imported here: only imports that carry one

    text = payload.strip()
    _check_size(text, where)
    try:
        hist = HdrHistogram.decode(text)
    except (ValueError, TypeError, KeyError, IndexError, zlib.error, binascii.Error) as exc:
        raise ImportFormatError(f"{where}: damaged compressed histogram ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - hdrh raises bare exceptions on bad payloads
        raise ImportFormatError(f"{where}: damaged compressed histogram ({exc})") from None
    values, counts = [], []
    for item in hist.get_recorded_iterator():
        values.append(item.value_iterated_to)
        counts.append(item.count_added_in_this_iter_step)
    total = sum(counts)
    if total > MAX_OPS or any(c < 0 for c in counts):
        raise ImportFormatError(f"{where}: histogram counts {total:,} ops (more than "
                                f"{MAX_OPS:,} or negative); is the file damaged?")
    if total > max_ops:
        raise too_many(where, total, max_ops)
    return DecodedHistogram(np.asarray(values, np.int64), np.asarray(counts, np.int64),
                            int(hist.significant_figures))


#: A second's stated quantiles as (probability, key) pairs, read where present.
_QUANTILE_KEYS: tuple[tuple[float, str], ...] = (
    (0.0, "min"), (0.5, "p50"), (0.9, "p90"), (0.95, "p95"), (0.99, "p99"),
    (0.999, "p99.9"), (0.9999, "p99.99"), (1.0, "max"),
)


@dataclass(frozen=True)
class Second:
    """One second of a tool's time series: its offset, op count and stated latency
    quantiles (keys of `_QUANTILE_KEYS`, plus ``mean``), in the tool's unit."""

    offset_s: float
    count: int
    quantiles: Mapping[str, float]


def _targets(sec: Second) -> np.ndarray:
    """`count` target latencies that follow the second's stated quantiles (piecewise
    linear between them), or its mean where no quantile is stated."""
    points = [(p, sec.quantiles[k]) for p, k in _QUANTILE_KEYS if k in sec.quantiles]
    probs = (np.arange(sec.count) + 0.5) / sec.count
    if not points:
        return np.full(sec.count, sec.quantiles.get("mean", 0.0), np.float64)
    xs, ys = zip(*sorted(points), strict=True)
    return np.interp(probs, xs, np.maximum.accumulate(ys))


def spread_over_seconds(latencies_sorted: np.ndarray, seconds: Sequence[Second],
                        duration_s: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(start_ns, latency_ns) of every op, laid out on the seconds' time axis.

    The seconds' counts must add up to the number of latencies. Which op fell in which
    second is not recorded, so latencies are matched to seconds by rank: every second
    gets target values following its stated quantiles, all targets are sorted, and the
    i-th smallest latency goes to the i-th smallest target. The pooled latencies are
    exactly the histogram's; a slow second gets the slow ops. Inside a second, ops start
    evenly spaced over the second (the last one cut at `duration_s`), in rank order.
    """
    counts = np.array([s.count for s in seconds], np.int64)
    if int(counts.sum()) != len(latencies_sorted):
        raise ValueError("the seconds' counts do not add up to the latencies")
    targets = np.concatenate([_targets(s) for s in seconds if s.count]) if len(
        latencies_sorted) else np.zeros(0)
    order = np.argsort(targets, kind="stable")
    latency = np.empty(len(latencies_sorted), np.float64)
    latency[order] = latencies_sorted
    starts = np.empty(len(latencies_sorted), np.float64)
    pos = 0
    for i, sec in enumerate(seconds):
        n = int(counts[i])
        if not n:
            continue
        span_s = 1.0
        if duration_s is not None:
            span_s = min(1.0, max(duration_s - sec.offset_s, 0.0)) or 1.0
        starts[pos:pos + n] = (sec.offset_s + np.arange(n) * (span_s / n)) * 1e9
        # Rank order inside the second: the second's own latencies, ascending.
        mine = slice(pos, pos + n)
        latency[mine] = np.sort(latency[mine])
        pos += n
    return np.rint(starts).astype(np.int64), latency
