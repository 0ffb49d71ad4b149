"""The ops format: columns of ops.parquet, op statuses, and the packed outcome.

The packed outcome is the load generator's in-memory record of an op (one int64; the
native core in harness/loadgen/_native.c writes the same bits): bits 0-6 the op code,
bit 7 the warm-up flag, bits 8-15 the status, the payload bytes above. Changing it means
changing the C core in the same commit; the Parquet file never stores it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: The version this kit writes; older ones are upgraded on read (`migrations`).
#: 2: the manifest's `telemetry` (CPU of every client and server process, each
#: machine's load, the servers' counters; `harness.run.telemetry`).
#: 3: `ops_file.columns`, the columns ops.parquet holds: `OPS_SCHEMA`'s, and `key` after
#: them where the run recorded keys (`run.record_keys`).
#: 4: `labels`, string key/value pairs from `harness run --label` or the spec's `labels:`
#: (`harness.results.labels`); older runs have none.
SCHEMA_VERSION = 4
MANIFEST = "manifest.json"
OPS_FILE = "ops.parquet"
TMP_PREFIX = ".tmp-"

#: Op outcome codes as stored in memory; Parquet stores the names (dictionary-encoded).
STATUSES: tuple[str, ...] = ("ok", "miss", "error", "redirect", "timeout")
STATUS_CODE: dict[str, int] = {name: i for i, name in enumerate(STATUSES)}
OK, MISS, ERROR, REDIRECT, TIMEOUT = range(len(STATUSES))
#: Statuses a summary counts as errors (a miss is a valid answer).
ERROR_STATUSES: tuple[str, ...] = ("error", "timeout")
#: A run whose failed ops (ERROR_STATUSES) exceed this share of its measured ops is a
#: finding: the `errors` check fails it and `harness run` says so (exit 1).
ERROR_SHARE_BAR = 0.001

OUTCOME_OP_MASK, OUTCOME_WARMUP = 0x7F, 0x80
OUTCOME_STATUS_SHIFT, OUTCOME_BYTES_SHIFT = 8, 16

RUN_STATUSES = ("complete", "partial", "failed")

#: Columns of ops.parquet, in order. The types are stable across versions: engines that
#: read the tree directly (DuckDB, Spark, Trino) rely on them.
OPS_SCHEMA = pa.schema(
    [
        pa.field("client", pa.int32(), nullable=False),
        pa.field("op", pa.dictionary(pa.int8(), pa.string()), nullable=False),
        pa.field("start_ns", pa.int64(), nullable=False),
        pa.field("latency_ns", pa.int64(), nullable=False),
        pa.field("intended_ns", pa.int64(), nullable=True),
        pa.field("status", pa.dictionary(pa.int8(), pa.string()), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("warmup", pa.bool_(), nullable=False),
    ]
)


#: The optional last column: the key number each op touched (null: unknown), written
#: only by runs with `run.record_keys`. Older runs and runs without it have none.
KEY_FIELD = pa.field("key", pa.int64(), nullable=True)


def outcome(status: int, nbytes: int) -> int:
    """An op's status and payload bytes, packed as the load generator records them."""
    return nbytes << OUTCOME_BYTES_SHIFT | status << OUTCOME_STATUS_SHIFT


def unpack_outcomes(
    packed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Packed outcomes (int64) -> op codes (int8), statuses (int8), bytes (int64) and the
    count-based warm-up flag (bool), per column: the inverse of `outcome` | op | flag."""
    packed = np.asarray(packed, np.int64)
    return (
        (packed & OUTCOME_OP_MASK).astype(np.int8),
        ((packed >> OUTCOME_STATUS_SHIFT) & 0xFF).astype(np.int8),
        packed >> OUTCOME_BYTES_SHIFT,
        (packed & OUTCOME_WARMUP) != 0,
    )
