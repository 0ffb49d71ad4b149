"""Key and value-size distributions of the get/set mixes (memcache_mix, redis_mix).

The key distributions are memtier_benchmark's and YCSB's: `uniform`; `zipfian`, key number
r drawn with probability proportional to 1 / (r + 1)^zipf_s (key 0 the most popular, as
memtier's `--key-pattern Z`); `hotspot`, YCSB's HotspotIntegerGenerator (the first
`hotspot_keys` of the key space take `hotspot_ops` of the draws, uniform within each
set); `sequential`, every client process walking the keys in order from key 0; and
`gaussian`, memtier's `G` (a normal around the middle of the key space with standard
deviation `gaussian_sd` times the key space, redrawn until it falls inside).

Value sizes: `fixed` (`value_size_bytes`), `uniform` (every size from
`value_size_min_bytes` to `value_size_max_bytes` equally likely) or `list`, memtier's
`--data-size-list` ("size:weight,size:weight", weights relative).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.settings import Setting
from harness.workloads.ycsb_gen import Hotspot

KEY_DISTS = ("uniform", "zipfian", "hotspot", "sequential", "gaussian")
VALUE_DISTS = ("fixed", "uniform", "list")
#: Distinct sizes a `list` may name (each is encoded once per client).
MAX_LIST_SIZES = 64


def dist_params(max_value_bytes: int, server: str) -> dict[str, Setting]:
    """The settings of both distributions (added to the mixes' own)."""
    limit = f"{server}'s limit"
    return {
        "key_dist": Setting((str,), "uniform", "how keys are drawn", choices=KEY_DISTS),
        "zipf_s": Setting((float,), 0.99, "zipfian: exponent (key r drawn ~ 1/(r+1)^s)",
                          low=0, low_open=True, high=10),
        "hotspot_keys": Setting((float,), 0.2, "hotspot: share of the key space that is hot",
                                low=0, low_open=True, high=1),
        "hotspot_ops": Setting((float,), 0.8, "hotspot: share of ops on the hot keys",
                               low=0, high=1),
        "gaussian_sd": Setting((float,), 1 / 6, "gaussian: standard deviation as a share of "
                               "the key space (memtier's default 1/6)", low=0, low_open=True,
                               high=10),
        "value_dist": Setting((str,), "fixed", "how value sizes are drawn", choices=VALUE_DISTS),
        "value_size_min_bytes": Setting((int,), 1, "uniform value sizes: the smallest",
                                        low=1, high=max_value_bytes, why=limit),
        "value_size_max_bytes": Setting((int,), 1000, "uniform value sizes: the largest",
                                        low=1, high=max_value_bytes, why=limit),
        "value_sizes": Setting((str,), "", "list value sizes: 'size:weight,...' as memtier's "
                               "--data-size-list, e.g. '100:9,10000:1'"),
    }


def parse_size_list(text: str, max_value_bytes: int) -> list[tuple[int, float]]:
    """'100:9,1000:1' -> [(100, 9.0), (1000, 1.0)]; ValueError says what is wrong."""
    out: list[tuple[int, float]] = []
    for i, item in enumerate(text.split(","), 1):
        size_text, sep, weight_text = item.strip().partition(":")
        try:
            size, weight = int(size_text), float(weight_text) if sep else float("nan")
        except ValueError:
            raise ValueError(f"entry {i} {item.strip()!r} is not size:weight") from None
        if not sep or not np.isfinite(weight) or weight < 0:
            raise ValueError(f"entry {i} {item.strip()!r}: the weight must be a number >= 0")
        if not 1 <= size <= max_value_bytes:
            raise ValueError(f"entry {i}: size {size} is not between 1 and {max_value_bytes}")
        out.append((size, weight))
    if not out or sum(w for _, w in out) <= 0:
        raise ValueError("no size with a weight above 0")
    if len(out) > MAX_LIST_SIZES:
        raise ValueError(f"{len(out)} sizes; at most {MAX_LIST_SIZES}")
    return out


def problems(params: Mapping[str, Any], max_value_bytes: int) -> list[str]:
    """What is wrong with the distributions' settings together (each alone is checked by
    its Setting)."""
    out: list[str] = []
    if params.get("value_dist") == "uniform":
        lo, hi = params.get("value_size_min_bytes"), params.get("value_size_max_bytes")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            out.append(f"value_size_min_bytes {lo} is above value_size_max_bytes {hi}")
    if params.get("value_dist") == "list":
        text = params.get("value_sizes")
        if not isinstance(text, str) or not text.strip():
            out.append("value_sizes: value_dist 'list' needs sizes, e.g. '100:9,10000:1'")
        else:
            try:
                parse_size_list(text, max_value_bytes)
            except ValueError as exc:
                out.append(f"value_sizes: {exc}")
    return out


def zipf_cdf(key_space: int, s: float) -> np.ndarray:
    """Cumulative probabilities of key numbers 0 .. key_space-1 under the zipfian."""
    weights = 1.0 / np.arange(1, key_space + 1, dtype=np.float64) ** s
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def key_picks(params: Mapping[str, Any], key_space: int, rng: np.random.Generator,
              n: int) -> np.ndarray:
    """`n` key numbers (int64) drawn from the params' key distribution."""
    dist = params.get("key_dist", "uniform")
    if dist == "uniform":
        return rng.integers(0, key_space, n)
    if dist == "sequential":
        return np.arange(n, dtype=np.int64) % key_space
    if dist == "zipfian":
        cdf = zipf_cdf(key_space, float(params["zipf_s"]))
        return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), key_space - 1)
    if dist == "hotspot":
        return Hotspot(0, key_space - 1, float(params["hotspot_keys"]),
                       float(params["hotspot_ops"])).values(rng, n).astype(np.int64)
    if dist == "gaussian":
        return gaussian_picks(key_space, float(params["gaussian_sd"]), rng, n)
    raise ValueError(f"key_dist {dist!r} is not one of {list(KEY_DISTS)}")


def gaussian_picks(key_space: int, sd_share: float, rng: np.random.Generator,
                   n: int) -> np.ndarray:
    """memtier's gaussian key pattern: normal around the middle, redrawn outside."""
    mid, sd = (key_space - 1) / 2, sd_share * key_space
    out = np.empty(n, np.int64)
    filled = 0
    while filled < n:
        draws = np.rint(rng.normal(mid, sd, n - filled))
        inside = draws[(draws >= 0) & (draws < key_space)].astype(np.int64)
        out[filled:filled + len(inside)] = inside
        filled += len(inside)
    return out


def pick_period(params: Mapping[str, Any], key_space: int, default: int) -> int:
    """How many picks a client draws before they repeat: `default`, except that a
    sequential walk repeats after whole passes over the key space (every key visited)."""
    if params.get("key_dist") != "sequential":
        return default
    return key_space * max(default // key_space, 1)


def value_sizes(params: Mapping[str, Any], rng: np.random.Generator, n: int,
                max_value_bytes: int) -> np.ndarray:
    """`n` value sizes (int64) drawn from the params' value-size distribution."""
    dist = params.get("value_dist", "fixed")
    if dist == "fixed":
        return np.full(n, int(params["value_size_bytes"]), np.int64)
    if dist == "uniform":
        return rng.integers(int(params["value_size_min_bytes"]),
                            int(params["value_size_max_bytes"]) + 1, n)
    if dist == "list":
        pairs = parse_size_list(params["value_sizes"], max_value_bytes)
        sizes = np.array([s for s, _ in pairs], np.int64)
        weights = np.array([w for _, w in pairs], np.float64)
        return sizes[rng.choice(len(sizes), n, p=weights / weights.sum())]
    raise ValueError(f"value_dist {dist!r} is not one of {list(VALUE_DISTS)}")

