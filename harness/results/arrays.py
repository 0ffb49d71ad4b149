"""`OpsArrays`: per-op records as parallel numpy arrays, the in-memory form of ops.parquet."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from harness.errors import ResultsError
from harness.results.schema import KEY_FIELD, OPS_SCHEMA, STATUSES


@dataclass(frozen=True)
class OpsArrays:
    """Per-op records as parallel numpy arrays (the in-memory form of ops.parquet).

    `op` and `status` are small integer codes into `op_names` and `STATUSES`;
    `intended_ns` is -1 where the op had no intended start (closed loop). `key` is the
    key number of each op (-1: unknown) where the run recorded keys (`run.record_keys`),
    else None: ops.parquet then has no `key` column.
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
    key: np.ndarray | None = None

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

        keyed = {p.key is not None for p in parts}
        if len(keyed) > 1:
            raise ResultsError("some parts recorded keys and some did not")

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
            key=cat("key", np.int64) if keyed == {True} else None,
        )
        order = np.argsort(merged.start_ns, kind="stable")
        return merged.take(order)

    def take(self, idx: np.ndarray) -> OpsArrays:
        return OpsArrays(
            self.op_names,
            *(getattr(self, f)[idx] for f in _ARRAY_FIELDS),
            key=self.key[idx] if self.key is not None else None,
        )

    def with_keys(self, key: np.ndarray) -> OpsArrays:
        """These records with each op's key number (-1: unknown)."""
        key = np.asarray(key, np.int64)
        if key.shape != self.start_ns.shape:
            raise ResultsError(f"{key.shape[0]} keys for {len(self)} records")
        return OpsArrays(self.op_names, *(getattr(self, f) for f in _ARRAY_FIELDS), key=key)

    def save_npz(self, path: Path | BinaryIO) -> None:
        """The worker -> harness hand-over format (cheap, no Arrow needed); a path or
        an open file."""
        np.savez(
            path,
            op_names=np.array(self.op_names, dtype=object).astype(str),
            **{f: getattr(self, f) for f in _ARRAY_FIELDS},
            **({"key": self.key} if self.key is not None else {}),
        )

    @classmethod
    def load_npz(cls, path: Path) -> OpsArrays:
        with np.load(path, allow_pickle=False) as z:
            return cls(tuple(str(s) for s in z["op_names"]), *(z[f] for f in _ARRAY_FIELDS),
                       key=z["key"] if "key" in z.files else None)

    def to_table(self) -> pa.Table:
        names = pa.array(list(self.op_names), pa.string())
        statuses = pa.array(list(STATUSES), pa.string())
        intended = pa.array(self.intended_ns, pa.int64(), mask=self.intended_ns < 0)
        keyed = self.key is not None
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
                *([pa.array(self.key, pa.int64(), mask=self.key < 0)] if keyed else []),
            ],
            schema=OPS_SCHEMA.append(KEY_FIELD) if keyed else OPS_SCHEMA,
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


