"""Consistent hashing: MD5 of a key on a ring of 2**128 positions.

A server sits at MD5("host:port") and is responsible for the keys from its predecessor's
position (exclusive) up to its own (inclusive), wrapping around. The course protocol's
metadata lists each server's range as ``<from>,<to>,<host>:<port>;`` with `from` and
`to` as 32 hex digits, both inclusive (one server alone: from = to + 1, the whole ring).
"""

from __future__ import annotations

import bisect
import hashlib

SIZE = 1 << 128


def position(data: bytes) -> int:
    return int.from_bytes(hashlib.md5(data).digest(), "big")


class Ring:
    def __init__(self, members: list[str]) -> None:
        if not members:
            raise ValueError("a ring needs at least one server")
        self.members = sorted(set(members), key=lambda m: position(m.encode()))
        self.points = [position(m.encode()) for m in self.members]

    def owner(self, key: bytes) -> str:
        """The server responsible for `key`."""
        i = bisect.bisect_left(self.points, position(key))
        return self.members[i % len(self.members)]

    def range_of(self, member: str) -> tuple[int, int]:
        """(first, last) position `member` is responsible for, both inclusive."""
        i = self.members.index(member)
        return (self.points[i - 1] + 1) % SIZE, self.points[i]

    def metadata(self) -> str:
        parts = []
        for m in self.members:
            first, last = self.range_of(m)
            parts.append(f"{first:032x},{last:032x},{m};")
        return "".join(parts)

    @classmethod
    def from_metadata(cls, text: str) -> Ring:
        return cls([part.split(",")[2] for part in text.strip().split(";") if part])


def in_range(pos: int, first: int, last: int) -> bool:
    """Whether `pos` lies in [first, last] on the ring (the range may wrap around 0)."""
    return first <= pos <= last if first <= last else pos >= first or pos <= last
