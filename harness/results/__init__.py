"""The raw-results format, end to end: one directory per run holding `manifest.json` and
`ops.parquet`.

- `schema`: ops columns, statuses, the load generator's packed outcome
- `arrays`: `OpsArrays`, the in-memory form of ops.parquet
- `manifest`: the typed `Manifest`, its builder `new_manifest`, flattened column names
- `migrations`: schema versions; older manifests are upgraded on read, newer ones refused
- `io`: write (atomic), read, verify, walk a tree

Everything is re-exported here: ``from harness.results import X`` is the public way in.
"""

from harness.results.arrays import OpsArrays
from harness.results.io import (
    STRAY_REASON,
    iter_run_dirs,
    iter_stray_dirs,
    read_manifest,
    read_ops,
    sha256_file,
    verify_run,
    write_run,
)
from harness.results.manifest import Counts, Extras, Kit, Loadgen, Manifest, new_manifest
from harness.results.migrations import KNOWN_SCHEMA_VERSIONS, upgrade
from harness.results.schema import (
    ERROR,
    ERROR_SHARE_BAR,
    ERROR_STATUSES,
    KEY_FIELD,
    MANIFEST,
    MISS,
    OK,
    OPS_FILE,
    OPS_SCHEMA,
    OUTCOME_BYTES_SHIFT,
    OUTCOME_OP_MASK,
    OUTCOME_STATUS_SHIFT,
    OUTCOME_WARMUP,
    REDIRECT,
    RUN_STATUSES,
    SCHEMA_VERSION,
    STATUS_CODE,
    STATUSES,
    TIMEOUT,
    TMP_PREFIX,
    outcome,
    unpack_outcomes,
)
from harness.results.stream import OpsParts, RunTally, tally

__all__ = [
    "ERROR", "ERROR_SHARE_BAR", "ERROR_STATUSES", "KEY_FIELD", "KNOWN_SCHEMA_VERSIONS",
    "MANIFEST", "MISS", "OK", "OPS_FILE", "OPS_SCHEMA", "OUTCOME_BYTES_SHIFT", "OUTCOME_OP_MASK",
    "OUTCOME_STATUS_SHIFT",
    "OUTCOME_WARMUP", "REDIRECT", "RUN_STATUSES", "SCHEMA_VERSION", "STATUSES", "STATUS_CODE",
    "STRAY_REASON", "TIMEOUT", "TMP_PREFIX", "Counts", "Extras", "Kit", "Loadgen", "Manifest",
    "OpsArrays", "OpsParts", "RunTally", "iter_run_dirs", "iter_stray_dirs", "new_manifest",
    "outcome", "read_manifest", "read_ops", "sha256_file", "tally", "unpack_outcomes", "upgrade",
    "verify_run", "write_run",
]
