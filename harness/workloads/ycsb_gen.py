"""YCSB's generators (`site.ycsb.generator`) and CoreWorkload's key rules, written from
their definitions, not translated from YCSB's code.

Every generator takes its randomness from the caller (uniform draws in [0, 1), or a
numpy Generator), so a client's choices are reproducible per seed and client, and a draw
maps to a value by YCSB's arithmetic: the same u gives the value YCSB's code gives.
Arrays are drawn a chunk of ops at a time (numpy); what depends on the inserts that have
completed (the `latest` distribution, zipfian keys not inserted yet) is resolved per op
from a draw made up front (`KeyChooser.keynum`).

- Zipfian (`Zipfian`): Gray et al., "Quickly Generating Billion-Record Synthetic
  Databases" (SIGMOD 1994), as YCSB's ZipfianGenerator: theta, zeta(2, theta),
  alpha = 1 / (1 - theta), zeta(n), eta; u * zetan < 1 gives the first item,
  < 1 + 0.5^theta the second, else base + int(items * (eta * u - eta + 1) ** alpha).
- Scrambled zipfian (`ScrambledZipfian`): a zipfian over 10^10 items (zeta precomputed
  by YCSB for 0.99), hashed with `fnvhash64` and taken modulo the item count, so the
  popular items are scattered over the key space and the popularity of the top items is
  flatter than a zipfian over the record count (the top 100 of 10,000 keys get ~21 % of
  the draws, not ~52 %).
- Skewed latest (`SkewedLatest`): the last inserted keynum minus a zipfian draw over it.
- Hotspot, uniform, sequential, and the op chooser (YCSB's DiscreteGenerator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
FNV_PRIME_64 = 1099511628211
_MASK64 = (1 << 64) - 1
_LONG_MIN = -(1 << 63)
#: ZipfianGenerator.ZIPFIAN_CONSTANT.
ZIPFIAN_CONSTANT = 0.99
#: ScrambledZipfianGenerator's underlying zipfian: over ITEM_COUNT (+1, as its
#: constructor counts both ends) items, with zeta(ITEM_COUNT, 0.99) precomputed by YCSB.
SCRAMBLED_ITEM_COUNT = 10_000_000_000
SCRAMBLED_ZETAN = 26.46902820178302
KEY_PREFIX = "user"
#: Terms summed exactly before the Euler-Maclaurin tail (`zeta_large`).
_EXACT_TERMS = 1_000_000
_CHUNK = 1 << 20

DISTRIBUTIONS = ("uniform", "zipfian", "latest", "hotspot", "sequential")


def _signed64(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >> 63 else x


def fnvhash64(val: int) -> int:
    """YCSB's Utils.fnvhash64: FNV-1a over the 8 low-to-high octets of a signed 64-bit
    value, in Java's wrapping long arithmetic, then Math.abs (which leaves Long.MIN_VALUE
    negative: the one hash that stays negative)."""
    h = FNV_OFFSET_BASIS_64
    val = _signed64(val)
    for _ in range(8):
        h = ((h ^ (val & 0xFF)) * FNV_PRIME_64) & _MASK64
        val >>= 8  # arithmetic, as Java's >> on a long
    s = _signed64(h)
    return s if s == _LONG_MIN else abs(s)


def fnvhash64_array(vals: np.ndarray) -> np.ndarray:
    """`fnvhash64` of each value (int64 in, int64 out)."""
    v = np.asarray(vals, np.int64)
    h = np.full(v.shape, FNV_OFFSET_BASIS_64, np.uint64)
    prime = np.uint64(FNV_PRIME_64)
    for i in range(8):
        # numpy's >> on int64 is arithmetic, as Java's; uint64 products wrap as longs do.
        h = (h ^ ((v >> (8 * i)) & 0xFF).astype(np.uint64)) * prime
    # abs of int64's minimum wraps to itself in numpy, as Math.abs does in Java.
    return np.abs(h.view(np.int64))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (s[0]*31^(n-1) + ... + s[n-1], 32-bit signed): the score
    YCSB's Redis binding gives a key in its `_indices` sorted set."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >> 31 else h


def java_string_hashes(texts: list[str]) -> list[int]:
    """`java_string_hash` of many ASCII strings at once (the load's index scores):
    right-aligned in rows, a leading zero adds nothing to the polynomial, and uint64
    products wrap mod 2^64, which keeps the value mod 2^32."""
    if not texts:
        return []
    width = max(map(len, texts))
    rows = np.zeros((len(texts), width), np.uint64)
    for r, text in enumerate(texts):
        rows[r, width - len(text):] = np.frombuffer(text.encode("ascii"), np.uint8)
    powers = np.array([pow(31, width - 1 - i, 1 << 64) for i in range(width)], np.uint64)
    h = (rows @ powers) & np.uint64(0xFFFFFFFF)
    return (h.astype(np.int64) - ((h >> np.uint64(31)).astype(np.int64) << 32)).tolist()


def key_name(keynum: int, ordered: bool) -> str:
    """CoreWorkload.buildKeyName with zeropadding 1 (YCSB's default): "user" and the
    keynum (insertorder=ordered) or its fnvhash64 (hashed)."""
    return f"{KEY_PREFIX}{keynum if ordered else fnvhash64(keynum)}"


def zeta(n: int, theta: float, start: int = 0, initial: float = 0.0) -> float:
    """YCSB's zetastatic(st, n, theta, initialsum): initial + sum over i in [start, n) of
    1 / (i + 1)^theta."""
    if n - start <= 64:  # the per-insert growth of `latest`: cheaper without numpy
        return initial + sum(1 / (i + 1) ** theta for i in range(start, n))
    total = initial
    for lo in range(start, n, _CHUNK):
        i = np.arange(lo + 1, min(n, lo + _CHUNK) + 1, dtype=np.float64)
        total += float(np.sum(1.0 / i ** theta))
    return total


def zeta_large(n: int, theta: float) -> float:
    """zeta(n, theta) for n too large to sum (10^10 terms): the first million terms
    summed, the rest by Euler-Maclaurin (integral, end corrections, first derivative
    term; the next term is below 1e-20 here). Needs 0 < theta < 1."""
    if n <= _EXACT_TERMS:
        return zeta(n, theta)
    a, b = float(_EXACT_TERMS), float(n)
    integral = (b ** (1 - theta) - a ** (1 - theta)) / (1 - theta)
    ends = (b ** -theta - a ** -theta) / 2
    first = -theta * (b ** (-theta - 1) - a ** (-theta - 1)) / 12
    return zeta(_EXACT_TERMS, theta) + integral + ends + first


def gray_values(u: np.ndarray, base: int, items: np.ndarray | int, theta: float,
                zetan: np.ndarray | float, eta: np.ndarray | float) -> np.ndarray:
    """ZipfianGenerator.nextLong's arithmetic for uniform draws `u` (item counts, zeta
    and eta may vary per draw, as they do for `latest`)."""
    u = np.asarray(u, np.float64)
    body = base + (items * np.power(eta * u - eta + 1, 1.0 / (1.0 - theta))).astype(np.int64)
    uz = u * zetan
    return np.where(uz < 1.0, base, np.where(uz < 1.0 + 0.5 ** theta, base + 1, body))


def gray_value(u: float, base: int, items: int, theta: float, zetan: float,
               eta: float) -> int:
    """One draw of `gray_values`, without numpy's per-call cost."""
    uz = u * zetan
    if uz < 1.0:
        return base
    if uz < 1.0 + 0.5 ** theta:
        return base + 1
    return base + int(items * math.pow(eta * u - eta + 1, 1.0 / (1.0 - theta)))


def gray_eta(items: int, theta: float, zetan: float) -> float:
    return (1 - (2.0 / items) ** (1 - theta)) / (1 - zeta(2, theta) / zetan)


@dataclass(frozen=True)
class Zipfian:
    """YCSB's ZipfianGenerator over base .. base + items - 1: the first the most popular."""

    base: int
    items: int
    theta: float
    zetan: float

    @classmethod
    def between(cls, lo: int, hi: int, theta: float = ZIPFIAN_CONSTANT,
                zetan: float | None = None) -> Zipfian:
        """Over lo .. hi inclusive, as YCSB's (min, max) constructors."""
        items = hi - lo + 1
        return cls(lo, items, theta, zeta(items, theta) if zetan is None else zetan)

    @cached_property
    def eta(self) -> float:
        return gray_eta(self.items, self.theta, self.zetan)

    def values(self, u: np.ndarray) -> np.ndarray:
        return gray_values(u, self.base, self.items, self.theta, self.zetan, self.eta)


@dataclass(frozen=True)
class ScrambledZipfian:
    """YCSB's ScrambledZipfianGenerator over lo .. hi inclusive: a zipfian draw over
    10^10 items, then lo + fnvhash64(draw) % (hi - lo + 1). With a constant other than
    0.99 YCSB sums zeta over 10^10 terms; `zeta_large` gets the same number in ms."""

    lo: int
    hi: int
    theta: float = ZIPFIAN_CONSTANT

    @cached_property
    def zipfian(self) -> Zipfian:
        items = SCRAMBLED_ITEM_COUNT + 1
        zetan = (SCRAMBLED_ZETAN if self.theta == ZIPFIAN_CONSTANT
                 else zeta_large(items, self.theta))
        return Zipfian(0, items, self.theta, zetan)

    @property
    def items(self) -> int:
        return self.hi - self.lo + 1

    def values(self, u: np.ndarray) -> np.ndarray:
        # Java's % keeps the dividend's sign (np.fmod), for the one negative hash.
        return self.lo + np.fmod(fnvhash64_array(self.zipfian.values(u)), self.items)

    def value(self, u: float) -> int:
        """One draw of `values`, without numpy's per-call cost."""
        z = self.zipfian
        h = fnvhash64(gray_value(u, 0, z.items, z.theta, z.zetan, z.eta))
        # Java's % keeps the dividend's sign, for the one negative hash.
        return self.lo + (h % self.items if h >= 0 else -(-h % self.items))


class SkewedLatest:
    """YCSB's SkewedLatestGenerator: last - zipfian(last), where `last` is the insert
    counter's last acknowledged keynum; the most recent inserts are the most popular.

    Its zipfian is built over the counter's first `last` and grows its zeta term by term
    as `last` grows (ZipfianGenerator.nextLong's incremental recomputation); as YCSB's,
    eta keeps the item count of construction, and only zeta(n) moves."""

    def __init__(self, last: int, theta: float = ZIPFIAN_CONSTANT) -> None:
        if last < 1:
            raise ValueError("the latest distribution needs at least 2 records")
        self.items, self.theta = last, theta
        self.count = last
        self.zetan = zeta(last, theta)
        self.eta = gray_eta(self.items, theta, self.zetan)

    def _grow(self, last: int) -> None:
        if last > self.count:
            self.zetan = zeta(last, self.theta, self.count, self.zetan)
            self.count = last
            self.eta = gray_eta(self.items, self.theta, self.zetan)

    def value(self, last: int, u: float) -> int:
        self._grow(last)
        return last - gray_value(u, 0, last, self.theta, self.zetan, self.eta)


@dataclass(frozen=True)
class Hotspot:
    """YCSB's HotspotIntegerGenerator over lo .. hi: the first int(n * hot_set) values are
    the hot set, drawn (uniformly) with probability hot_opn; the rest the cold set."""

    lo: int
    hi: int
    hot_set: float = 0.2
    hot_opn: float = 0.8

    @property
    def hot_items(self) -> int:
        return int((self.hi - self.lo + 1) * self.hot_set)

    def values(self, rng: np.random.Generator, n: int) -> np.ndarray:
        hot_n = self.hot_items
        cold_n = self.hi - self.lo + 1 - hot_n
        hot = rng.random(n) < self.hot_opn
        r = rng.integers(0, 1 << 62, n)  # abs(nextLong) % interval, without modulo bias
        return np.where(hot, self.lo + r % max(hot_n, 1), self.lo + hot_n + r % max(cold_n, 1))


def discrete_values(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """YCSB's DiscreteGenerator: index i for u in [cum[i-1], cum[i]) of the normalised
    cumulative weights; an index of weight 0 is never drawn."""
    w = np.asarray(weights, np.float64)
    cum = np.cumsum(w / w.sum())
    last = int(np.flatnonzero(w > 0)[-1])  # the float sum may end a hair below 1
    return np.minimum(np.searchsorted(cum, u, side="right"), last)


class AcknowledgedCounter:
    """YCSB's AcknowledgedCounterGenerator: `next` hands out values in order; `last` is
    the highest value up to which every value handed out has been acknowledged (an
    insert that completed), so readers never pick a record still being written."""

    def __init__(self, start: int) -> None:
        self._next = start
        self._last = start - 1
        self._done: set[int] = set()

    def next(self) -> int:
        value = self._next
        self._next += 1
        return value

    def acknowledge(self, value: int) -> None:
        self._done.add(value)
        while self._last + 1 in self._done:
            self._done.remove(self._last + 1)
            self._last += 1

    @property
    def last(self) -> int:
        return self._last


class KeyChooser:
    """CoreWorkload's key chooser and nextKeynum for reads, updates, scans and
    read-modify-writes: uniform, hotspot and sequential over the loaded records; zipfian
    (scrambled) over the loaded records plus `expected_new_keys` (operationcount x
    insertproportion x 2), a draw of a key not inserted yet redrawn; latest over the
    insert counter. `draws` makes a chunk's randomness up front; `keynum` turns one
    draw into a keynum, given the counter's last acknowledged value."""

    def __init__(self, distribution: str, record_count: int, expected_new_keys: int = 0,
                 theta: float = ZIPFIAN_CONSTANT, hot_set: float = 0.2,
                 hot_opn: float = 0.8, redraw_rng: np.random.Generator | None = None) -> None:
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"unknown request distribution {distribution!r}")
        self.distribution = distribution
        self.record_count = record_count
        hi = record_count - 1
        self.scrambled = ScrambledZipfian(0, record_count + expected_new_keys, theta)
        self.hotspot = Hotspot(0, hi, hot_set, hot_opn)
        self.latest = SkewedLatest(hi, theta) if distribution == "latest" else None
        self._sequential = 0
        self._redraw = redraw_rng or np.random.default_rng()

    def draws(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """One chunk's draws: keynums (uniform, hotspot, zipfian before rejection) or
        uniform u (latest); sequential needs none (its counter runs per op)."""
        d = self.distribution
        if d == "uniform":
            return rng.integers(0, self.record_count, n)
        if d == "hotspot":
            return self.hotspot.values(rng, n)
        if d == "zipfian":
            return self.scrambled.values(rng.random(n))
        if d == "latest":
            return rng.random(n)
        return np.zeros(n, np.int64)

    def keynum(self, draw: float, last: int) -> int:
        """The keynum of one op from its draw; `last`: the insert counter's last
        acknowledged value (record_count - 1 before any insert)."""
        d = self.distribution
        if d == "latest":
            assert self.latest is not None
            return self.latest.value(last, float(draw))
        if d == "sequential":
            value = self._sequential % self.record_count
            self._sequential += 1
            return value
        keynum = int(draw)
        while keynum > last:  # not inserted (yet): YCSB draws again
            keynum = self.scrambled.value(self._redraw.random())
        return keynum
