"""Key-value pairs in files on disk, one file per key, with a cache in front.

A file is named by the key's ring position (32 hex digits of its MD5), so the keys of a
hash range are found from the directory listing alone; it holds the key, a newline and
the value. Writes go to a temporary file renamed into place, so a reader never sees half
a value. The cache is write-through: a PUT updates disk and cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from .cache import make_cache
from .ring import in_range, position


class Store:
    def __init__(self, data_dir: str, cache_size: int, strategy: str,
                 fsync: bool = False) -> None:
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cache = make_cache(strategy, cache_size)
        self.fsync = fsync
        self.hits = self.misses = 0

    def _path(self, key: bytes) -> Path:
        return self.dir / f"{position(key):032x}"

    def get(self, key: bytes) -> bytes | None:
        value = self.cache.get(key)
        if value is not None:
            self.hits += 1
            return value
        self.misses += 1
        try:
            stored_key, _, value = self._path(key).read_bytes().partition(b"\n")
        except FileNotFoundError:
            return None
        if stored_key != key:  # an MD5 collision: not worth more than a refusal here
            return None
        self.cache.put(key, value)
        return value

    def put(self, key: bytes, value: bytes) -> bool:
        """Store; True if the key existed (an update)."""
        path = self._path(key)
        existed = path.exists()
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(key + b"\n" + value)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self.cache.put(key, value)
        return existed

    def delete(self, key: bytes) -> bool:
        self.cache.delete(key)
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            return False
        return True

    def items_in(self, first: int, last: int) -> Iterator[tuple[bytes, bytes]]:
        """The pairs whose ring position lies in [first, last] (may wrap around)."""
        for entry in sorted(os.listdir(self.dir)):
            if len(entry) == 32 and in_range(int(entry, 16), first, last):
                try:
                    key, _, value = (self.dir / entry).read_bytes().partition(b"\n")
                except FileNotFoundError:  # deleted meanwhile
                    continue
                yield key, value
