"""Test files for the file-store study (the seed's filegenerator.py, with distributions).

Sizes are fixed, uniform on [min_bytes, max_bytes], or log-normal with a median and a
sigma (clipped to [min_bytes, max_bytes]); real file sizes are roughly log-normal, so
that is the default. Everything is a function of the seed: sizes come from Python's
`random.Random(seed).random()`, whose sequence Python keeps stable across versions, and
turned into sizes by code here (not by library samplers that may change). Contents are
slices of one seeded random block, so a file set costs the memory of its largest file.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

DISTRIBUTIONS = ("fixed", "uniform", "lognormal")
DEFAULTS: dict[str, int | float] = {
    "size_bytes": 10_000, "min_bytes": 0, "max_bytes": 1_000_000,
    "median_bytes": 20_000, "sigma": 1.0,
}


@dataclass(frozen=True)
class FileSpec:
    name: str
    size_bytes: int


def check_params(distribution: str, **params: Any) -> list[str]:
    """Problems with a distribution and its parameters (empty when fine)."""
    if distribution not in DISTRIBUTIONS:
        return [f"size_dist must be one of {', '.join(DISTRIBUTIONS)}, not {distribution!r}"]
    p = {**DEFAULTS, **params}
    problems = []
    if distribution == "fixed" and p["size_bytes"] < 0:
        problems.append("size_bytes must be >= 0")
    if distribution != "fixed" and not 0 <= p["min_bytes"] <= p["max_bytes"]:
        problems.append("need 0 <= min_bytes <= max_bytes")
    if distribution == "lognormal" and (p["median_bytes"] <= 0 or p["sigma"] < 0):
        problems.append("lognormal needs median_bytes > 0 and sigma >= 0")
    return problems


def file_sizes(n: int, distribution: str, seed: int, **params: Any) -> list[int]:
    """`n` sizes in bytes drawn from `distribution`, the same for the same arguments."""
    problems = check_params(distribution, **params)
    if problems:
        raise ValueError("; ".join(problems))
    p = {**DEFAULTS, **params}
    if distribution == "fixed":
        return [int(p["size_bytes"])] * n
    rng = random.Random(seed)
    lo, hi = int(p["min_bytes"]), int(p["max_bytes"])
    if distribution == "uniform":
        return [lo + min(int(rng.random() * (hi - lo + 1)), hi - lo) for _ in range(n)]
    normal = NormalDist()
    median, sigma = float(p["median_bytes"]), float(p["sigma"])
    sizes = []
    for _ in range(n):
        u = min(max(rng.random(), 1e-12), 1 - 1e-12)  # inv_cdf needs 0 < u < 1
        sizes.append(min(max(round(median * math.exp(sigma * normal.inv_cdf(u))), lo), hi))
    return sizes


def file_specs(n: int, distribution: str, seed: int, *, prefix: str = "",
               suffix: str = ".txt", **params: Any) -> list[FileSpec]:
    """Names `{prefix}{i}{suffix}` (the seed's 0.txt, 1.txt, ...) with their sizes."""
    sizes = file_sizes(n, distribution, seed, **params)
    return [FileSpec(f"{prefix}{i}{suffix}", s) for i, s in enumerate(sizes)]


class FileContents:
    """Contents of a file set: file i is a slice of one random block seeded by `seed`."""

    def __init__(self, specs: list[FileSpec], seed: int) -> None:
        self.specs = specs
        largest = max((s.size_bytes for s in specs), default=0)
        self.block = random.Random(seed ^ 0x5EED).randbytes(largest + len(specs))

    def content(self, i: int) -> memoryview:
        """File i's bytes (a view: no copy). Files of equal size still differ."""
        size = self.specs[i].size_bytes
        offset = i % (len(self.block) - size + 1)
        return memoryview(self.block)[offset:offset + size]


def generate_files(directory: Path | str, n: int, distribution: str, seed: int,
                   **params: Any) -> list[FileSpec]:
    """Write `n` files into `directory` (created if needed); return what was written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    specs = file_specs(n, distribution, seed, **params)
    contents = FileContents(specs, seed)
    for i, spec in enumerate(specs):
        (out / spec.name).write_bytes(contents.content(i))
    return specs
