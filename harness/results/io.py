"""Reading, writing and verifying run directories.

Layout: ``<raw_dir>/<experiment>/<run_id>/{manifest.json, ops.parquet}``. A run directory
is built under a hidden temp name, fsynced and renamed into place, so it is whole or
absent. Manifests are upgraded to the current schema on read (`migrations`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import ResultsError
from harness.results.arrays import OpsArrays
from harness.results.manifest import Manifest
from harness.results.schema import KEY_FIELD, MANIFEST, OPS_FILE, OPS_SCHEMA, TMP_PREFIX
from harness.results.stream import OpsParts, sorted_parts, tally
from harness.text import finite_data, redact_data


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename into it) durable."""
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


#: Rows per Parquet row group when a run is written in parts.
ROW_GROUP_ROWS = 1 << 20

#: The int64 time columns, stored DELTA_BINARY_PACKED and not compressed: start times
#: rise and latencies need ~20 bits, so the packed deltas are smaller than zstd's
#: dictionary-or-plain pages (1.47 -> 1.02 MB of starts in a run of 500,000 ops) and
#: decode 3-5x as fast; every reader of Parquet 2 (pyarrow, DuckDB, Spark) reads them.
DELTA_COLUMNS = ("start_ns", "latency_ns", "intended_ns")


def parquet_options(schema: pa.Schema) -> dict[str, object]:
    """How ops.parquet is written: `DELTA_COLUMNS` delta-packed, the rest zstd (and
    dictionary-encoded where pyarrow finds it pays)."""
    delta = [n for n in schema.names if n in DELTA_COLUMNS]
    return {
        "compression": {n: "none" if n in delta else "zstd" for n in schema.names},
        "use_dictionary": [n for n in schema.names if n not in delta],
        "column_encoding": dict.fromkeys(delta, "DELTA_BINARY_PACKED"),
    }


def _write_ops(ops: OpsArrays | pa.Table | OpsParts, path: Path) -> tuple[int, list[str]]:
    """ops.parquet from `ops`; (rows, column names). Parts are written one after the
    other, row groups of at most `ROW_GROUP_ROWS`, never all in memory."""
    if not isinstance(ops, OpsParts):
        table = ops.to_table() if isinstance(ops, OpsArrays) else ops
        pq.write_table(table, path, **parquet_options(table.schema))
        return table.num_rows, list(table.schema.names)
    writer: pq.ParquetWriter | None = None
    rows = 0
    try:
        for part in sorted_parts(ops):
            table = part.to_table()
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, **parquet_options(table.schema))
            if table.num_rows:
                writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
            rows += table.num_rows
            del table, part
        if writer is None:  # no part at all
            table = OpsArrays.empty(ops.op_names).to_table()
            writer = pq.ParquetWriter(path, table.schema, **parquet_options(table.schema))
        names = list(writer.schema.names)
    finally:
        if writer is not None:
            writer.close()
    return rows, names


def write_run(raw_dir: Path, manifest: Manifest, ops: OpsArrays | pa.Table | OpsParts) -> Path:
    """Write one run atomically and return its final directory.

    The manifest's `ops_file` and `counts` are filled in here from what was written.
    Records in parts (`results.stream`) are written a part at a time.
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
        ops_path = tmp / OPS_FILE
        rows, names = _write_ops(ops, ops_path)
        _fsync_file(ops_path)
        # No password, whatever a field holds; and strict JSON: a value that is not a
        # finite number (a rate of 0 ops over 0 s, a server's counter read as NaN) is
        # written as null, which every typed field reads as "unknown".
        data = finite_data(redact_data(manifest.to_dict()))
        data["ops_file"] = {
            "name": OPS_FILE, "sha256": sha256_file(ops_path), "rows": rows, "columns": names,
        }
        if isinstance(ops, OpsArrays | OpsParts) and not data.get("counts"):
            data["counts"] = tally(ops).counts
        man_path = tmp / MANIFEST
        man_path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str,
                                       allow_nan=False) + "\n")
        _fsync_file(man_path)
        fsync_dir(tmp)
        os.rename(tmp, final)
        fsync_dir(exp_dir)
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
        meta = pq.read_metadata(ops_path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise ResultsError(f"{ops_path}: cannot read ops ({exc})") from None
    expected = manifest.ops_file.get("rows")
    if expected is not None and meta.num_rows != expected:
        raise ResultsError(f"{ops_path}: {meta.num_rows} rows, the manifest says {expected}")
    columns = manifest.ops_file.get("columns")
    if columns is not None and list(meta.schema.names) != list(columns):
        raise ResultsError(f"{ops_path}: columns {list(meta.schema.names)}, the manifest "
                           f"says {list(columns)}")
    # Of the format's types too: a file from elsewhere with a checksum to match could
    # hold text where every reader does arithmetic.
    arrow = meta.schema.to_arrow_schema()
    for want in (*OPS_SCHEMA, KEY_FIELD):
        if want.name in arrow.names and not _same_kind(arrow.field(want.name).type,
                                                       want.type):
            raise ResultsError(f"{ops_path}: column {want.name} is "
                               f"{arrow.field(want.name).type}, not {want.type}")


def _same_kind(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a stored column's type reads as the format's (integers of any width;
    text dictionary-encoded or not)."""
    if pa.types.is_dictionary(want):
        have = have.value_type if pa.types.is_dictionary(have) else have
        return pa.types.is_string(have) or pa.types.is_large_string(have)
    if pa.types.is_integer(want):
        return pa.types.is_integer(have)
    return have == want


def read_ops(run_dir: Path, columns: Sequence[str] | None = None) -> pa.Table:
    path = Path(run_dir) / OPS_FILE
    try:
        return pq.read_table(path, columns=list(columns) if columns else None)
    except (OSError, pa.ArrowInvalid) as exc:
        raise ResultsError(f"{path}: cannot read ops ({exc})") from None


def _hidden(path: Path, raw_dir: Path) -> bool:
    """Below a hidden directory of `raw_dir`: a run being written (``.tmp-*``), the
    runner's lock and state (``<experiment>/.harness/``). Not runs."""
    return any(part.startswith(".") for part in path.relative_to(raw_dir).parts)


def iter_run_dirs(raw_dir: Path) -> Iterator[Path]:
    """Run directories under `raw_dir` (which may itself be one experiment, or one run);
    hidden directories (`_hidden`) are not runs."""
    raw_dir = Path(raw_dir)
    if (raw_dir / MANIFEST).exists():
        yield raw_dir
        return
    if not raw_dir.is_dir():
        raise ResultsError(f"{raw_dir}: no such raw-results directory")
    for manifest in sorted(raw_dir.rglob(MANIFEST)):
        run_dir = manifest.parent
        if not _hidden(run_dir, raw_dir):
            yield run_dir


#: Why a directory in `iter_stray_dirs` is no run.
STRAY_REASON = (f"{OPS_FILE} but no {MANIFEST}, so nothing can read it as a run (a copy "
                "cut short, or moved by hand?)")


def iter_stray_dirs(raw_dir: Path) -> Iterator[Path]:
    """Directories under `raw_dir` (itself included) that hold a run's ops file but no
    manifest: no summary or verify would see them otherwise, and records would be lost
    unsaid (`STRAY_REASON`). Hidden directories are not runs and are not listed."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        return
    for ops in sorted(raw_dir.rglob(OPS_FILE)):
        run_dir = ops.parent
        if not (run_dir / MANIFEST).exists() and not _hidden(run_dir, raw_dir):
            yield run_dir
