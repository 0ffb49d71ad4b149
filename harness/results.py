"""Raw-results format: one directory per run holding `manifest.json` and `ops.parquet`.

Layout: ``<raw_dir>/<experiment>/<run_id>/{manifest.json, ops.parquet}``. A run directory
is built under a hidden temp name, fsynced and renamed into place, so it is whole or
absent. The manifest carries ``schema_version``; readers refuse versions they do not know.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import ResultsError, SchemaVersionError

SCHEMA_VERSION = 1
KNOWN_SCHEMA_VERSIONS = frozenset({1})
MANIFEST = "manifest.json"
OPS_FILE = "ops.parquet"
TMP_PREFIX = ".tmp-"

#: Op outcome codes as stored in memory; Parquet stores the names (dictionary-encoded).
STATUSES: tuple[str, ...] = ("ok", "miss", "error", "redirect", "timeout")
STATUS_CODE: dict[str, int] = {name: i for i, name in enumerate(STATUSES)}
OK, MISS, ERROR, REDIRECT, TIMEOUT = range(len(STATUSES))

#: The load generator packs an op's outcome into one int64 per record (`loadgen.Recorder`):
#: bits 0-6 the op code, bit 7 the warm-up flag, bits 8-15 the status, above the bytes.
OUTCOME_OP_MASK, OUTCOME_WARMUP = 0x7F, 0x80
OUTCOME_STATUS_SHIFT, OUTCOME_BYTES_SHIFT = 8, 16


def outcome(status: int, nbytes: int) -> int:
    """An op's status and payload bytes, packed as the load generator records them."""
    return nbytes << OUTCOME_BYTES_SHIFT | status << OUTCOME_STATUS_SHIFT

RUN_STATUSES = ("complete", "partial", "failed")

#: Columns of ops.parquet, in order.
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


@dataclass(frozen=True)
class OpsArrays:
    """Per-op records as parallel numpy arrays (the in-memory form of ops.parquet).

    `op` and `status` are small integer codes into `op_names` and `STATUSES`;
    `intended_ns` is -1 where the op had no intended start (closed loop).
    """

    op_names: tuple[str, ...]
    client: np.ndarray
    op: np.ndarray
    start_ns: np.ndarray
    latency_ns: np.ndarray
    intended_ns: np.ndarray
    status: np.ndarray
    nbytes: np.ndarray
    warmup: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @classmethod
    def empty(cls, op_names: Sequence[str]) -> OpsArrays:
        return cls.concat([], op_names)

    @classmethod
    def concat(cls, parts: Sequence[OpsArrays], op_names: Sequence[str]) -> OpsArrays:
        """Join parts that share `op_names`, ordered by start time."""
        names = tuple(op_names)
        for p in parts:
            if p.op_names != names:
                raise ResultsError(f"op names differ between parts: {p.op_names} vs {names}")

        def cat(attr: str, dtype: Any) -> np.ndarray:
            arrays = [getattr(p, attr) for p in parts]
            return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.empty(
                0, dtype
            )

        merged = cls(
            op_names=names,
            client=cat("client", np.int32),
            op=cat("op", np.int8),
            start_ns=cat("start_ns", np.int64),
            latency_ns=cat("latency_ns", np.int64),
            intended_ns=cat("intended_ns", np.int64),
            status=cat("status", np.int8),
            nbytes=cat("nbytes", np.int64),
            warmup=cat("warmup", np.bool_),
        )
        order = np.argsort(merged.start_ns, kind="stable")
        return merged.take(order)

    def take(self, idx: np.ndarray) -> OpsArrays:
        return OpsArrays(
            self.op_names,
            *(getattr(self, f)[idx] for f in _ARRAY_FIELDS),
        )

    def save_npz(self, path: Path) -> None:
        """The worker -> harness hand-over format (cheap, no Arrow needed)."""
        np.savez(
            path,
            op_names=np.array(self.op_names, dtype=object).astype(str),
            **{f: getattr(self, f) for f in _ARRAY_FIELDS},
        )

    @classmethod
    def load_npz(cls, path: Path) -> OpsArrays:
        with np.load(path, allow_pickle=False) as z:
            return cls(tuple(str(s) for s in z["op_names"]), *(z[f] for f in _ARRAY_FIELDS))

    def to_table(self) -> pa.Table:
        names = pa.array(list(self.op_names), pa.string())
        statuses = pa.array(list(STATUSES), pa.string())
        intended = pa.array(self.intended_ns, pa.int64(), mask=self.intended_ns < 0)
        return pa.Table.from_arrays(
            [
                pa.array(self.client, pa.int32()),
                pa.DictionaryArray.from_arrays(pa.array(self.op, pa.int8()), names),
                pa.array(self.start_ns, pa.int64()),
                pa.array(self.latency_ns, pa.int64()),
                intended,
                pa.DictionaryArray.from_arrays(pa.array(self.status, pa.int8()), statuses),
                pa.array(self.nbytes, pa.int64()),
                pa.array(self.warmup, pa.bool_()),
            ],
            schema=OPS_SCHEMA,
        )

    def counts(self) -> dict[str, int]:
        """Op counts by status over the measured (non-warm-up) ops, plus totals."""
        measured = self.status[~self.warmup]
        out = {name: int(np.count_nonzero(measured == code)) for code, name in enumerate(STATUSES)}
        out["measured"] = int(measured.shape[0])
        out["warmup"] = int(np.count_nonzero(self.warmup))
        out["total"] = len(self)
        return out


_ARRAY_FIELDS = (
    "client", "op", "start_ns", "latency_ns", "intended_ns", "status", "nbytes", "warmup",
)


@dataclass(frozen=True)
class Manifest:
    """Everything needed to interpret and reproduce one run. Times are UTC ISO-8601."""

    run_id: str
    experiment: str
    workload: str
    config_id: str
    repetition: int
    params: Mapping[str, Any]
    grid_point: Mapping[str, Any]
    status: str
    started_utc: str
    ended_utc: str
    error: str | None = None
    hosts: Mapping[str, Any] = field(default_factory=dict)
    services: Mapping[str, Any] = field(default_factory=dict)
    loadgen: Mapping[str, Any] = field(default_factory=dict)
    kit: Mapping[str, Any] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    ops_file: Mapping[str, Any] = field(default_factory=dict)
    spec_file: str | None = None
    source: str = "harness"
    extra: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ResultsError(f"run status must be one of {RUN_STATUSES}, not {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "manifest") -> Manifest:
        version = data.get("schema_version")
        if version not in KNOWN_SCHEMA_VERSIONS:
            raise SchemaVersionError(
                f"{where}: schema_version {version!r} is not one this kit reads "
                f"(known: {sorted(KNOWN_SCHEMA_VERSIONS)}); upgrade the kit to read it"
            )
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ResultsError(f"{where}: unknown manifest fields {unknown}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ResultsError(f"{where}: {exc}") from None


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_run(raw_dir: Path, manifest: Manifest, ops: OpsArrays | pa.Table) -> Path:
    """Write one run atomically and return its final directory.

    The manifest's `ops_file` and `counts` are filled in here from what was written.
    """
    exp_dir = Path(raw_dir) / manifest.experiment
    final = exp_dir / manifest.run_id
    if final.exists():
        raise ResultsError(f"{final}: run directory exists already; runs are never overwritten")
    exp_dir.mkdir(parents=True, exist_ok=True)
    tmp = exp_dir / f"{TMP_PREFIX}{manifest.run_id}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        table = ops.to_table() if isinstance(ops, OpsArrays) else ops
        ops_path = tmp / OPS_FILE
        pq.write_table(table, ops_path, compression="zstd")
        _fsync_file(ops_path)
        data = manifest.to_dict()
        data["ops_file"] = {
            "name": OPS_FILE, "sha256": sha256_file(ops_path), "rows": table.num_rows,
        }
        if isinstance(ops, OpsArrays) and not data.get("counts"):
            data["counts"] = ops.counts()
        man_path = tmp / MANIFEST
        man_path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        _fsync_file(man_path)
        _fsync_dir(tmp)
        os.rename(tmp, final)
        _fsync_dir(exp_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def read_manifest(run_dir: Path) -> Manifest:
    path = Path(run_dir) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing manifest") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: manifest must be a JSON object")
    return Manifest.from_dict(data, where=str(path))


def verify_run(run_dir: Path, manifest: Manifest | None = None) -> Manifest:
    """Check the ops file against the manifest's checksum and row count."""
    manifest = manifest or read_manifest(run_dir)
    ops_path = Path(run_dir) / OPS_FILE
    expected = manifest.ops_file.get("sha256")
    if not ops_path.exists():
        raise ResultsError(f"{ops_path}: missing ops file")
    actual = sha256_file(ops_path)
    if expected != actual:
        raise ResultsError(
            f"{ops_path}: checksum mismatch (manifest {expected}, file {actual}); "
            "the file was changed or truncated after the run"
        )
    _check_footer(ops_path, manifest)
    return manifest


def _check_footer(ops_path: Path, manifest: Manifest) -> None:
    """The Parquet footer parses and holds the manifest's row count (cheap: footer only).

    Catches a file whose checksum was rewritten by hand but which no engine can read."""
    try:
        rows = pq.read_metadata(ops_path).num_rows
    except (OSError, pa.ArrowInvalid) as exc:
        raise ResultsError(f"{ops_path}: cannot read ops ({exc})") from None
    expected = manifest.ops_file.get("rows")
    if expected is not None and rows != expected:
        raise ResultsError(f"{ops_path}: {rows} rows, the manifest says {expected}")


def read_ops(run_dir: Path, columns: Sequence[str] | None = None) -> pa.Table:
    path = Path(run_dir) / OPS_FILE
    try:
        return pq.read_table(path, columns=list(columns) if columns else None)
    except (OSError, pa.ArrowInvalid) as exc:
        raise ResultsError(f"{path}: cannot read ops ({exc})") from None


def iter_run_dirs(raw_dir: Path) -> Iterator[Path]:
    """Run directories under `raw_dir` (which may itself be one experiment, or one run)."""
    raw_dir = Path(raw_dir)
    if (raw_dir / MANIFEST).exists():
        yield raw_dir
        return
    if not raw_dir.is_dir():
        raise ResultsError(f"{raw_dir}: no such raw-results directory")
    for manifest in sorted(raw_dir.rglob(MANIFEST)):
        run_dir = manifest.parent
        if any(part.startswith(TMP_PREFIX) for part in run_dir.relative_to(raw_dir).parts):
            continue
        yield run_dir
