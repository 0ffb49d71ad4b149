"""The displacement strategies: a cache of at most `capacity` entries, key -> value.

FIFO evicts the oldest insertion, LRU the least recently used, LFU the least frequently
used (ties: the least recently used among them). All three are O(1) per operation.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict


class FIFOCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.data: OrderedDict[bytes, bytes] = OrderedDict()

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        if self.capacity <= 0:
            return
        if key not in self.data and len(self.data) >= self.capacity:
            self.data.popitem(last=False)
        self.data[key] = value  # an update keeps the key's place in line

    def delete(self, key: bytes) -> None:
        self.data.pop(key, None)

    def __len__(self) -> int:
        return len(self.data)


class LRUCache(FIFOCache):
    def get(self, key: bytes) -> bytes | None:
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key: bytes, value: bytes) -> None:
        super().put(key, value)
        if key in self.data:
            self.data.move_to_end(key)


class LFUCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.values: dict[bytes, bytes] = {}
        self.freq: dict[bytes, int] = {}
        # frequency -> keys with that frequency, least recently used first
        self.buckets: defaultdict[int, OrderedDict[bytes, None]] = defaultdict(OrderedDict)
        self.min_freq = 0

    def _touch(self, key: bytes) -> None:
        f = self.freq[key]
        del self.buckets[f][key]
        if not self.buckets[f]:
            del self.buckets[f]
            if self.min_freq == f:
                self.min_freq = f + 1
        self.freq[key] = f + 1
        self.buckets[f + 1][key] = None

    def get(self, key: bytes) -> bytes | None:
        if key not in self.values:
            return None
        self._touch(key)
        return self.values[key]

    def put(self, key: bytes, value: bytes) -> None:
        if self.capacity <= 0:
            return
        if key in self.values:
            self.values[key] = value
            self._touch(key)
            return
        if len(self.values) >= self.capacity:
            victim, _ = self.buckets[self.min_freq].popitem(last=False)
            if not self.buckets[self.min_freq]:
                del self.buckets[self.min_freq]
            del self.values[victim], self.freq[victim]
        self.values[key] = value
        self.freq[key] = 1
        self.buckets[1][key] = None
        self.min_freq = 1

    def delete(self, key: bytes) -> None:
        if key in self.values:
            f = self.freq.pop(key)
            del self.values[key], self.buckets[f][key]
            if not self.buckets[f]:
                del self.buckets[f]
            if self.buckets and self.min_freq not in self.buckets:
                self.min_freq = min(self.buckets)

    def __len__(self) -> int:
        return len(self.values)


STRATEGIES = {"FIFO": FIFOCache, "LRU": LRUCache, "LFU": LFUCache}


def make_cache(strategy: str, capacity: int) -> FIFOCache | LFUCache:
    try:
        return STRATEGIES[strategy.upper()](capacity)
    except KeyError:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}") from None
