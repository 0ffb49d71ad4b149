"""HdrHistogram's V2 wire form written by hand, for histograms no library would write: a
header declaring any range and significant figures, counts as given (ZigZag LEB128, a
negative number a run of empty buckets), any cookie. What the decoder must refuse or
bound is built here; what it must read exactly comes from the libraries themselves."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

COMPRESSED_COOKIE = 0x1C849304 | 0x10
ENCODED_COOKIE = 0x1C849303 | 0x10


def varint(value: int) -> bytes:
    """One count as HdrHistogram writes it: ZigZag, then LEB128 of at most 9 bytes."""
    z = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    for _ in range(8):
        if z < 0x80:
            return bytes(out + bytes([z]))
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes(out + bytes([z & 0xFF]))


def payload(tokens: Sequence[int], *, digits: int = 3, lowest: int = 1,
            highest: int = 3_600_000_000, offset: int = 0, cookie: int = ENCODED_COOKIE,
            outer_cookie: int = COMPRESSED_COOKIE, length: int | None = None,
            body: bytes | None = None) -> str:
    """The base64 text of a compressed histogram holding `tokens` (or raw `body`)."""
    counts = body if body is not None else b"".join(varint(t) for t in tokens)
    inner = struct.pack(">iiiiqqd", cookie, len(counts) if length is None else length,
                        offset, digits, lowest, highest, 1.0) + counts
    packed = zlib.compress(inner, 9)
    return base64.b64encode(struct.pack(">ii", outer_cookie, len(packed)) + packed).decode()


def counts_index(value: int, digits: int, lowest: int = 1) -> int:
    """Where HdrHistogram counts `value` (its `countsArrayIndex`)."""
    unit = (lowest).bit_length() - 1
    half = max((2 * 10**digits - 1).bit_length(), 1) - 1
    mask = ((1 << (half + 1)) - 1) << unit
    bucket = (value | mask).bit_length() - unit - (half + 1)
    sub = value >> (bucket + unit)
    return ((bucket + 1) << half) + sub - (1 << half)


def interval_log(path: Path, payloads: Sequence[str], comment: str = "") -> Path:
    """A YCSB-style interval log, one interval a second, one payload each."""
    lines = ["#[Logging for: READ]",
             f"#[StartTime: 1700000000.000 (seconds since epoch){comment}]",
             '"StartTimestamp","Interval_Length","Interval_Max",'
             '"Interval_Compressed_Histogram"']
    lines += [f"{i}.000,1.000,0.000,{p}" for i, p in enumerate(payloads)]
    path.write_text("\n".join(lines) + "\n")
    return path
