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
import functools
import math
import struct
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
#: HdrHistogram's V2 cookies: the compressed form's, and the inflated counts' (the bits
#: 0xf0 hold a word size, which V2 does not use).
_COMPRESSED_COOKIE, _ENCODED_COOKIE = 0x1C849304, 0x1C849303
#: The inflated form's header: cookie, payload length, normalizing index offset,
#: significant figures, lowest discernible and highest trackable value, conversion ratio.
_HEADER = struct.Struct(">iiiiqqd")
#: Bytes of one count's ZigZag LEB128 varint that a count this import takes can need:
#: 8 hold 56 bits, counts (and runs of empty buckets) far beyond `MAX_OPS`.
_MAX_VARINT_BYTES = 8
_INT64_MAX = (1 << 63) - 1
#: Up to this many bytes of counts (or non-empty buckets) are read in Python: numpy's
#: calls cost more than they save on a few (an interval log of 10,000 one-count
#: histograms in a 1 MB file: 3 s with numpy alone).
_FEW = 256


@dataclass(frozen=True)
class Layout:
    """Where HdrHistogram puts a value (its `AbstractHistogram` arithmetic), from a
    header's lowest discernible value and significant figures; bounded before any count
    is read: at most 64 buckets of at most 2^17 sub-buckets (5 figures)."""

    unit_magnitude: int
    sub_bucket_half_count_magnitude: int
    counts_len: int

    @staticmethod
    def of(lowest: int, highest: int, digits: int, where: str) -> Layout:
        """HdrHistogram's own checks of a header (Java's, which allows 0 to 5 figures),
        each an ImportFormatError naming `where`."""
        layout = _layout(lowest, highest, digits)
        if isinstance(layout, str):
            raise _damaged(where, layout)
        return layout

    def top(self, index: int) -> int:
        """The highest value counts index `index` stands for: what HdrHistogram's
        recorded iterator reports (its `highestEquivalentValue(valueFromIndex)`)."""
        half, unit = self.sub_bucket_half_count_magnitude, self.unit_magnitude
        bucket, sub = (index >> half) - 1, (index & ((1 << half) - 1)) + (1 << half)
        if bucket < 0:
            bucket, sub = 0, sub - (1 << half)
        return (sub << (bucket + unit)) + (1 << (bucket + unit)) - 1

    def highest_equivalent(self, index: np.ndarray, where: str) -> np.ndarray:
        """`top` of each counts index (ascending), at once; one past int64 is damage."""
        if not len(index):
            return np.zeros(0, np.int64)
        if (largest := self.top(int(index[-1]))) > _INT64_MAX:  # values rise with index
            raise _damaged(where, f"a count at {largest:,}, past a 64-bit value")
        if len(index) <= _FEW:
            return np.array([self.top(i) for i in index.tolist()], np.int64)
        half, unit = self.sub_bucket_half_count_magnitude, self.unit_magnitude
        bucket = (index >> half) - 1
        sub = (index & ((1 << half) - 1)) + (1 << half)
        low = bucket < 0
        sub[low] -= 1 << half
        bucket[low] = 0
        shift = bucket + unit
        return (sub << shift) + ((np.int64(1) << shift) - 1)


@functools.lru_cache(maxsize=64)  # a log's intervals share their header
def _layout(lowest: int, highest: int, digits: int) -> Layout | str:
    """`Layout.of` worked out, or what is wrong with the header."""
    if not 0 <= digits <= 5:
        return f"{digits} significant figures (HdrHistogram has 0 to 5)"
    if lowest < 1 or highest < 2 * lowest:
        return (f"a value range of {lowest} to {highest} (HdrHistogram needs a lowest "
                "value of 1 or more and a highest of twice that or more)")
    # Java's and hdrh's formula (floating point, so that both place values alike).
    unit = math.floor(math.log(lowest) / math.log(2))
    count_magnitude = (2 * 10**digits - 1).bit_length()  # ceil(log2(2 * 10^digits))
    half = max(count_magnitude, 1) - 1
    if unit + half > 61:
        return (f"{digits} significant figures above a lowest value of {lowest}: more "
                "than a 64-bit value holds")
    sub_bucket_count = 1 << (half + 1)
    smallest_untrackable, buckets = sub_bucket_count << unit, 1
    while smallest_untrackable <= highest:
        if smallest_untrackable > (1 << 62) - 1:  # hdrh's overflow guard
            buckets += 1
            break
        smallest_untrackable <<= 1
        buckets += 1
    return Layout(unit, half, (buckets + 1) << half)


def _damaged(where: str, what: str) -> ImportFormatError:
    return ImportFormatError(f"{where}: damaged compressed histogram ({what})")


def _inflate(text: str, where: str) -> bytes:
    """The inflated counts of a compressed histogram (base64 of cookie, length, zlib),
    inflating at most `MAX_INFLATED_BYTES` (zlib inflates without bound)."""
    if len(text) > MAX_PAYLOAD_CHARS:
        raise ImportFormatError(f"{where}: a compressed histogram of {len(text):,} "
                                f"characters, more than {MAX_PAYLOAD_CHARS:,}")
    try:
        raw = base64.b64decode(text)  # as hdrh decodes it: characters not of base64 skipped
    except (ValueError, binascii.Error) as exc:
        raise _damaged(where, f"not base64: {exc}") from None
    if len(raw) < 8:
        raise _damaged(where, f"{len(raw)} bytes, shorter than its header")
    cookie, length = struct.unpack_from(">ii", raw)
    if cookie & ~0xF0 != _COMPRESSED_COOKIE:
        raise _damaged(where, f"cookie {cookie & 0xFFFFFFFF:#x} is not HdrHistogram's V2")
    if length != len(raw) - 8:
        raise _damaged(where, f"says {length} compressed bytes, holds {len(raw) - 8}")
    z = zlib.decompressobj()
    try:
        inflated = z.decompress(raw[8:], MAX_INFLATED_BYTES + 1)
    except zlib.error as exc:
        raise _damaged(where, str(exc)) from None
    if len(inflated) > MAX_INFLATED_BYTES:
        raise ImportFormatError(f"{where}: the compressed histogram inflates past "
                                f"{MAX_INFLATED_BYTES >> 20} MB; is the file damaged?")
    if not z.eof:
        raise _damaged(where, "its zlib stream is cut short")
    return inflated


def _buckets(data: bytes, layout: Layout, where: str
             ) -> tuple[np.ndarray, np.ndarray, int]:
    """(counts index, count) of each non-empty bucket, ascending, and their total, from
    the counts'
    ZigZag LEB128 varints (a negative one a run of empty buckets), as HdrHistogram's
    `fillCountsArrayFromSourceBuffer` reads them. A varint of more than
    `_MAX_VARINT_BYTES` bytes, one cut short, more of them than buckets, or a run of
    empty buckets longer than the counts array is damage. A few bytes are read in Python
    (numpy's calls cost more than they save there), more with numpy at once."""
    if len(data) > _FEW:
        return _buckets_numpy(np.frombuffer(data, np.uint8), layout, where)
    index, counts, at, z, shift, tokens = [], [], 0, 0, 0, 0
    for b in data:
        z |= (b & 0x7F) << shift
        if b >= 0x80:
            shift += 7
            if shift >= 7 * _MAX_VARINT_BYTES:
                raise _too_long(where)
            continue
        count, z, shift, tokens = (z >> 1) ^ -(z & 1), 0, 0, tokens + 1
        if count < 0:
            if -count > layout.counts_len:
                raise _run_past_last(where, -count, layout)
            at -= count
        else:
            if count:
                index.append(at)
                counts.append(count)
            at += 1
    if shift:
        raise _cut_short(where)
    if tokens > layout.counts_len:
        raise _more_than_buckets(where, layout)
    return np.array(index, np.int64), np.array(counts, np.int64), sum(counts)


def _buckets_numpy(data: np.ndarray, layout: Layout, where: str
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """`_buckets` of many bytes at once: memory in proportion to the varints, one pass
    per byte of the longest."""
    ends = np.flatnonzero(data < 0x80)
    # Every varint moves the index on by one or more: more of them than the counts array
    # has entries is damage, refused before they are decoded.
    if len(ends) > layout.counts_len:
        raise _more_than_buckets(where, layout)
    if not len(ends) or ends[-1] != len(data) - 1:
        raise _cut_short(where)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if int(lengths.max()) > _MAX_VARINT_BYTES:
        raise _too_long(where)
    z = np.zeros(len(ends), np.uint64)
    for k in range(int(lengths.max())):
        has = lengths > k
        z[has] |= (data[starts[has] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    tokens = (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64)
    if -int(tokens.min()) > layout.counts_len:
        raise _run_past_last(where, -int(tokens.min()), layout)
    step = np.where(tokens < 0, -tokens, 1)  # no overflow: each step within counts_len
    held = tokens > 0
    counts = tokens[held]
    # Exact in int64 whatever the counts (each below 2^56, at most 2^23 of them).
    total = (int((counts >> 32).sum()) << 32) + int((counts & 0xFFFFFFFF).sum())
    return (np.cumsum(step) - step)[held], counts, total


def _too_long(where: str) -> ImportFormatError:
    return _damaged(where, f"a count of more than {_MAX_VARINT_BYTES} bytes (beyond "
                           f"{MAX_OPS:,} ops)")


def _cut_short(where: str) -> ImportFormatError:
    return _damaged(where, "its last count is cut short")


def _more_than_buckets(where: str, layout: Layout) -> ImportFormatError:
    return _damaged(where, f"more counts than its {layout.counts_len:,} buckets")


def _run_past_last(where: str, run: int, layout: Layout) -> ImportFormatError:
    return _damaged(where, f"a run of {run:,} empty buckets, past its last "
                           f"({layout.counts_len:,})")


def decode(payload: str, where: str, max_ops: int = DEFAULT_MAX_OPS) -> DecodedHistogram:
    """Decode a compressed histogram (HdrHistogram's V2 encoding, as its Java, C and
    Python libraries write it); `where` names it in the error if it is damaged, inflates
    too far, or counts more than `max_ops` ops.

    The header's range and significant figures are checked first, and the counts are
    decoded from their bytes with numpy without making the counts array the header
    declares (6 million entries for 5 figures up to 2^63): the work is in proportion to
    the payload, never to the declared range. Values and counts are exactly those of
    the `hdrhistogram` package's recorded iterator (and of Java's `recordedValues`)."""
    inflated = _inflate(payload.strip(), where)
    if len(inflated) < _HEADER.size:
        raise _damaged(where, f"{len(inflated)} bytes inflated, shorter than its header")
    cookie, length, offset, digits, lowest, highest, _ = _HEADER.unpack_from(inflated)
    if cookie & ~0xF0 != _ENCODED_COOKIE:
        raise _damaged(where, f"cookie {cookie & 0xFFFFFFFF:#x} is not HdrHistogram's V2")
    if not 0 <= length <= len(inflated) - _HEADER.size:
        raise _damaged(where, f"says {length} bytes of counts, holds "
                              f"{len(inflated) - _HEADER.size}")
    if offset != 0:
        raise _damaged(where, f"normalizing index offset {offset}: a shifted "
                              "(DoubleHistogram's) histogram, which this import does not read")
    layout = Layout.of(lowest, highest, digits, where)
    index, counts, total = _buckets(inflated[_HEADER.size:_HEADER.size + length], layout,
                                   where)
    if total > MAX_OPS:
        raise ImportFormatError(f"{where}: histogram counts {total:,} ops (more than "
                                f"{MAX_OPS:,} or negative); is the file damaged?")
    if len(index) and int(index[-1]) >= layout.counts_len:
        raise _damaged(where, f"a count past its {layout.counts_len:,} buckets")
    if total > max_ops:
        raise too_many(where, total, max_ops)
    return DecodedHistogram(layout.highest_equivalent(index, where), counts, digits)


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
