"""What the get/set-mix workloads share (memcache_mix, redis_mix): parameters and their
checks, key naming, and the precomputed op pattern and key picks of a client.

Everything random is drawn once per client (seeded, distinct per client) into plain
lists indexed by the op's sequence number, so the hot path is a list lookup or two and
one request: one Python process can keep up with C load generators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.errors import WorkloadError
from harness.settings import Setting
from harness.workloads.base import Workload

OPS = ("get", "set")
GET, SET = 0, 1
#: Length of the precomputed op pattern and key sequence; they repeat after this many ops.
#: Different lengths (the key one odd) so the (op, key) pairs repeat far less often.
OP_PATTERN_LEN = 1 << 16
KEY_SEQ_LEN = (1 << 17) + 1


def key_of(prefix: bytes, i: int, key_size: int) -> bytes:
    """Key number `i`, zero-padded after `prefix` to exactly `key_size` bytes."""
    return prefix + b"%0*d" % (key_size - len(prefix), i)


def op_pattern(get_ratio: float, rng: np.random.Generator) -> list[int]:
    """Exactly round(ratio * length) gets per pattern period, in random order."""
    n_gets = round(float(get_ratio) * OP_PATTERN_LEN)
    pattern = np.full(OP_PATTERN_LEN, SET, np.int8)
    pattern[:n_gets] = GET
    rng.shuffle(pattern)
    return pattern.tolist()


def key_picks(key_space: int, rng: np.random.Generator) -> list[int]:
    """Uniform key numbers, one per op of a key-sequence period (plain ints: a list
    lookup is the cheapest index in the hot path)."""
    return rng.integers(0, key_space, KEY_SEQ_LEN).tolist()


class KeyValueMix(Workload):
    """A get/set mix over a key space that `prepare` loads; subclasses add the protocol."""

    ops = OPS
    #: Set by subclasses: what keys start with, the server's limits, its name in messages.
    key_prefix: bytes
    max_key_bytes: int
    max_value_bytes: int
    server: str

    @staticmethod
    def mix_params(get_help: str, key_help: str) -> dict[str, Setting]:
        return {
            "get_ratio": Setting((float,), 0.9, get_help),
            "key_space": Setting((int,), 10000, "number of distinct keys, all loaded by prepare"),
            "key_size_bytes": Setting((int,), 16, key_help),
            "value_size_bytes": Setting((int,), 100, "length of every value"),
        }

    def key(self, i: int, key_size: int) -> bytes:
        return key_of(self.key_prefix, i, key_size)

    def _min_key_size(self, key_space: int) -> int:
        return len(self.key_prefix) + len(str(max(key_space - 1, 0)))

    def validate(self, params: Mapping[str, Any], grid: Mapping[str, Any]) -> list[str]:
        def values(name: str) -> list[Any]:
            return [v for v in grid.get(name, [params[name]]) if isinstance(v, (int, float))]

        problems = []
        if any(not 0.0 <= r <= 1.0 for r in values("get_ratio")):
            problems.append("get_ratio must be between 0 and 1")
        spaces = values("key_space")
        if any(n < 1 for n in spaces):
            problems.append("key_space must be at least 1")
        sizes = values("key_size_bytes")
        if any(s > self.max_key_bytes for s in sizes):
            problems.append(f"key_size_bytes must be at most {self.max_key_bytes} "
                            f"({self.server}'s limit)")
        if spaces and sizes and min(sizes) < self._min_key_size(max(spaces)):
            problems.append(f"key_size_bytes must be at least "
                            f"{self._min_key_size(max(spaces))} to number {max(spaces)} keys")
        if any(not 1 <= s <= self.max_value_bytes for s in values("value_size_bytes")):
            problems.append(f"value_size_bytes must be between 1 and {self.max_value_bytes}")
        return problems

    def check(self, params: Mapping[str, Any]) -> None:
        """`validate` for the resolved params of one run (prepare/client call it)."""
        problems = self.validate(params, {})
        if problems:
            raise WorkloadError(f"{self.name}: {'; '.join(problems)}")
