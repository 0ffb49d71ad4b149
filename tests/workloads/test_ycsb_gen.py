"""YCSB's generators against numbers computed from YCSB's definitions, not from our code:
FNV-1a by hand, keys YCSB itself writes, the exact probability of each value that
Gray et al.'s method gives (integrated over u), and its rank-frequency within sampling
error (chi-square over every key)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from harness.workloads.ycsb_gen import (
    SCRAMBLED_ITEM_COUNT,
    SCRAMBLED_ZETAN,
    AcknowledgedCounter,
    Hotspot,
    KeyChooser,
    ScrambledZipfian,
    SkewedLatest,
    Zipfian,
    discrete_values,
    fnvhash64,
    fnvhash64_array,
    java_string_hash,
    key_name,
    zeta,
    zeta_large,
)

MASK = (1 << 64) - 1


def fnv_by_hand(val: int) -> int:
    """The definition, written out differently: the value's 8 bytes little-endian (two's
    complement), FNV-1a 64 (xor, then multiply by the prime mod 2^64), as a signed long,
    Java's Math.abs."""
    h = 0xCBF29CE484222325
    for octet in (val & MASK).to_bytes(8, "little"):
        h = ((h ^ octet) * 1099511628211) % 2**64
    signed = h - 2**64 if h >= 2**63 else h
    return signed if signed == -(2**63) else abs(signed)


def test_fnvhash64_is_fnv1a_over_8_octets_with_javas_abs() -> None:
    # keynum 0 by hand: offset ^ 0 = offset; times the prime mod 2^64, eight times;
    # the result is above 2^63, a negative long, so Math.abs gives 2^64 - h.
    h = 0xCBF29CE484222325
    for _ in range(8):
        h = h * 1099511628211 % 2**64
    assert h == 0xA8C7F832281A39C5
    assert fnvhash64(0) == 2**64 - h == 6284781860667377211
    values = [0, 1, 2, 255, 256, 999, 10**6, 2**31 - 1, 2**40 + 7, -1, -(2**63), 2**63 - 1]
    assert [fnvhash64(v) for v in values] == [fnv_by_hand(v) for v in values]
    assert fnvhash64_array(np.array(values, np.int64)).tolist() == [
        fnv_by_hand(v) for v in values]
    rng = np.random.default_rng(5)
    many = rng.integers(-(2**63), 2**63 - 1, 2000, dtype=np.int64)
    assert fnvhash64_array(many).tolist() == [fnv_by_hand(int(v)) for v in many]


def test_keys_are_the_ones_ycsb_writes() -> None:
    # YCSB's basic DB prints its load as `INSERT usertable user6284781860667377211 ...`,
    # `user8517097267634966620`, `user1820151046732198393`: records 0, 1, 2, hashed.
    assert [key_name(k, ordered=False) for k in range(3)] == [
        "user6284781860667377211", "user8517097267634966620", "user1820151046732198393"]
    assert key_name(42, ordered=True) == "user42"


def test_java_string_hash() -> None:
    def by_definition(s: str) -> int:  # s[0]*31^(n-1) + ... + s[n-1], as a 32-bit int
        n = len(s)
        h = sum(ord(c) * 31 ** (n - 1 - i) for i, c in enumerate(s)) % 2**32
        return h - 2**32 if h >= 2**31 else h

    assert java_string_hash("") == 0 and java_string_hash("a") == 97
    assert java_string_hash("user1") == by_definition("user1")
    for key in ("user6284781860667377211", "user42", "usertable"):
        assert java_string_hash(key) == by_definition(key)
        assert -(2**31) <= java_string_hash(key) < 2**31


def test_zeta_and_ycsbs_precomputed_zeta() -> None:
    assert zeta(3, 0.99) == pytest.approx(1 + 2**-0.99 + 3**-0.99, rel=1e-15)
    assert zeta(5, 0.5, start=2, initial=1.0) == pytest.approx(
        1 + 3**-0.5 + 4**-0.5 + 5**-0.5, rel=1e-15)
    # Summed exactly for 5 M terms, and by Euler-Maclaurin past the first million.
    for theta in (0.5, 0.99):
        assert zeta_large(5_000_000, theta) == pytest.approx(zeta(5_000_000, theta), rel=1e-13)
    # YCSB's ZETAN, zeta(10^10, 0.99), summed by YCSB term by term in doubles.
    assert zeta_large(SCRAMBLED_ITEM_COUNT, 0.99) == pytest.approx(SCRAMBLED_ZETAN, rel=1e-11)


def gray_pmf(z: Zipfian, upto: int) -> np.ndarray:
    """P(value = base + k), k < upto, from the definition: u < 1/zetan gives k = 0,
    u < (1 + 0.5^theta)/zetan gives 1, larger u gives int(n (eta u - eta + 1)^alpha),
    which is k for u in [ginv(k), ginv(k + 1)): the measure of each interval."""
    theta, n, eta = z.theta, z.items, z.eta
    u1, u2 = 1 / z.zetan, (1 + 0.5**theta) / z.zetan

    def ginv(y: np.ndarray) -> np.ndarray:
        return ((y / n) ** (1 - theta) - 1 + eta) / eta

    k = np.arange(upto, dtype=np.float64)
    lo, hi = np.maximum(ginv(k), u2), np.minimum(ginv(k + 1), 1.0)
    pmf = np.clip(hi - lo, 0, None)
    pmf[0] += u1
    pmf[1] += u2 - u1
    return pmf


def chi_square_p(counts: np.ndarray, expected_p: np.ndarray) -> float:
    """Goodness of fit of counts to probabilities, cells of < 5 expected pooled."""
    expected = expected_p / expected_p.sum() * counts.sum()
    small = expected < 5
    obs, exp = counts[~small], expected[~small]
    if small.any():
        obs, exp = np.append(obs, counts[small].sum()), np.append(exp, expected[small].sum())
    return float(stats.chisquare(obs, exp).pvalue)


def top_share(p: np.ndarray, top: int = 100) -> float:
    return float(np.sort(p)[::-1][:top].sum() / p.sum())


N_DRAWS = 400_000


def test_plain_zipfian_rank_frequency_as_defined() -> None:
    z = Zipfian.between(0, 9999)
    pmf = gray_pmf(z, 10_000)
    assert pmf.sum() == pytest.approx(1, abs=1e-12)
    # The first two items exactly as zipf's (1 and 1/2^theta over zetan); the rest by
    # Gray's approximation (item 2 gets 0.40 / zetan, not 1/3^theta = 0.34).
    assert pmf[:2] * z.zetan == pytest.approx([1, 2**-0.99], rel=1e-12)
    counts = np.bincount(z.values(np.random.default_rng(1).random(N_DRAWS)), minlength=10_000)
    assert len(counts) == 10_000
    assert chi_square_p(counts, pmf) > 1e-3
    # The top 100 of 10,000 keys take ~52 %.
    assert top_share(pmf) == pytest.approx(0.53, abs=0.01)
    assert top_share(counts) == pytest.approx(top_share(pmf), abs=0.005)


def scrambled_pmf(s: ScrambledZipfian, exact: int = 2_000_000) -> np.ndarray:
    """P(key) of the scrambled zipfian over s.items keys: the underlying zipfian's first
    `exact` values exactly, hashed to their keys; the rest of its mass (spread over
    10^10 values that the hash scatters) evenly."""
    head = gray_pmf(s.zipfian, exact)
    keys = np.fmod(fnvhash64_array(np.arange(exact)), s.items)
    pmf = np.bincount(keys, weights=head, minlength=s.items)
    return pmf + (1 - head.sum()) / s.items


def test_scrambled_zipfian_rank_frequency_as_defined() -> None:
    s = ScrambledZipfian(0, 9999)
    pmf = scrambled_pmf(s)
    counts = np.bincount(s.values(np.random.default_rng(2).random(N_DRAWS)), minlength=10_000)
    assert len(counts) == 10_000
    assert chi_square_p(counts, pmf) > 1e-3
    # Flatter than a zipfian over 10,000: the top 100 take ~21 %, not ~52 %.
    assert top_share(pmf) == pytest.approx(0.21, abs=0.01)
    assert top_share(counts) == pytest.approx(top_share(pmf), abs=0.005)
    # Its most popular key is the hash of item 0 (the zipfian's first), mod the count.
    assert int(np.argmax(pmf)) == fnvhash64(0) % 10_000
    # One draw at a time (the redraws) as the arrays.
    u = np.random.default_rng(9).random(300)
    assert [s.value(float(x)) for x in u] == s.values(u).tolist()
    # min is an offset: the same draws over 100 .. 10,099.
    u = np.random.default_rng(3).random(1000)
    assert (ScrambledZipfian(100, 10_099).values(u) == s.values(u) + 100).all()


def test_skewed_latest_favours_the_last_keynum_and_grows_its_zeta() -> None:
    gen = SkewedLatest(999)
    u = np.random.default_rng(4).random(50_000)
    values = np.array([gen.value(999, float(x)) for x in u])
    assert values.max() == 999 and values.min() >= 0
    offsets = 999 - values
    # offset k has the plain zipfian's probability over 999 items (as YCSB builds it).
    pmf = gray_pmf(Zipfian.between(0, 998), 999)
    assert chi_square_p(np.bincount(offsets, minlength=999), pmf) > 1e-3
    # As the counter grows, zeta is extended term by term, and eta keeps the item count
    # of construction (YCSB's ZipfianGenerator.nextLong).
    gen.value(1500, 0.5)
    assert gen.zetan == pytest.approx(zeta(1500, 0.99), rel=1e-13)
    grown = Zipfian(0, 999, 0.99, zeta(1500, 0.99))  # eta from the first 999 items
    assert gen.eta == pytest.approx(grown.eta, rel=1e-15)
    assert gen.value(1500, 0.9) == 1500 - int(1500 * (grown.eta * 0.9 - grown.eta + 1) ** 100)


def test_hotspot_uniform_sequential_and_the_op_chooser() -> None:
    rng = np.random.default_rng(6)
    h = Hotspot(0, 999, 0.2, 0.8).values(rng, 100_000)
    assert h.min() == 0 and h.max() == 999
    assert (h < 200).mean() == pytest.approx(0.8, abs=0.01)
    # Within each set, uniform.
    assert np.bincount(h[h < 200]).std() < 0.2 * np.bincount(h[h < 200]).mean()
    seq = KeyChooser("sequential", 5)
    assert [seq.keynum(0, 4) for _ in range(7)] == [0, 1, 2, 3, 4, 0, 1]
    uni = KeyChooser("uniform", 50).draws(rng, 50_000)
    assert set(uni.tolist()) == set(range(50))
    picks = discrete_values(np.array([0.5, 0.0, 0.3, 0.2]), rng.random(100_000))
    assert 1 not in picks
    assert np.bincount(picks, minlength=4) / 100_000 == pytest.approx(
        [0.5, 0, 0.3, 0.2], abs=0.006)
    # Weights are normalised (YCSB's DiscreteGenerator): 2:2 is 1:1.
    assert discrete_values(np.array([2.0, 2.0]), np.array([0.49, 0.51])).tolist() == [0, 1]


def test_zipfian_chooser_redraws_keys_not_inserted_yet() -> None:
    # 1,000 records and room for 1,000 inserts: draws above the last inserted keynum are
    # drawn again until one is there (CoreWorkload.nextKeynum).
    chooser = KeyChooser("zipfian", 1000, expected_new_keys=1000,
                         redraw_rng=np.random.default_rng(7))
    draws = chooser.draws(np.random.default_rng(8), 5000)
    assert draws.max() > 1500 and draws.min() >= 0
    keys = [chooser.keynum(d, 999) for d in draws]
    assert max(keys) <= 999
    assert {k for k in draws.tolist() if k <= 999} <= set(keys)
    # After 201 inserts the first of the room's keys drawn are taken as they are.
    later = [chooser.keynum(d, 1200) for d in draws]
    assert max(later) <= 1200 and any(k > 999 for k in later)


def test_acknowledged_counter_moves_only_over_completed_values() -> None:
    c = AcknowledgedCounter(10)
    assert c.last == 9
    a, b, d = c.next(), c.next(), c.next()
    assert (a, b, d) == (10, 11, 12)
    c.acknowledge(b)
    assert c.last == 9  # 10 is still in flight
    c.acknowledge(a)
    assert c.last == 11
    c.acknowledge(d)
    assert c.last == 12
