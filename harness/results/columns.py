"""A recorder's raw columns (`RecordColumns`) and the worker -> harness files that hold
records in either form (`load_records`, `records_len`, `records_columns`).

A client process records three int64 clock/outcome columns per op (four in open loop).
Turning them into records (`OpsArrays`: latency, relative start, status, bytes, warm-up
flag) takes numpy several passes and ~40 bytes an op; on a client machine at full speed
that work, and writing its larger output, competes with the load generator for the
core. So a worker's part files (`harness.loadgen.spill`) hold the raw columns and the
few numbers needed to derive the records, and the harness derives them when it reads
the part (`load_records`). Files of derived records (`OpsArrays.save_npz`: a worker's
last records, parts written before this format) read as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from harness.results.arrays import OpsArrays
from harness.results.schema import unpack_outcomes

#: The marker member of a raw-columns file (its version: a change of meaning bumps it).
FORMAT = "kvbench-columns-1"
_SCALARS = ("client_id", "base_ns", "warmup_end_ns", "offset_ns")


@dataclass(frozen=True)
class RecordColumns:
    """Raw records: clock readings (ns, the recorder's clock) and packed outcomes.

    `intended` is the open loop's intended start per op (None: closed loop). `base_ns`
    is the run's start and `warmup_end_ns` its time-based warm-up's end on that clock
    (0: none); `offset_ns` moves starts onto the run's common time line. `key`: each
    op's key number (`run.record_keys`), else None.
    """

    op_names: tuple[str, ...]
    client_id: int
    start: np.ndarray
    end: np.ndarray
    outcome: np.ndarray
    intended: np.ndarray | None
    base_ns: int
    warmup_end_ns: int
    offset_ns: int
    key: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def to_arrays(self) -> OpsArrays:
        """The records, everything derived (none of the arrays aliases a column)."""
        n = len(self)
        start, end = self.start, self.end
        if self.intended is not None:
            intended = self.intended
            latency, timed_warm = end - intended, intended < self.warmup_end_ns
            intended_ns = intended - self.base_ns + self.offset_ns
        else:
            latency, timed_warm = end - start, start < self.warmup_end_ns
            intended_ns = np.full(n, -1, np.int64)
        op, status, nbytes, counted_warm = unpack_outcomes(self.outcome)
        arrays = OpsArrays(
            op_names=self.op_names,
            client=np.full(n, self.client_id, np.int32),
            op=op,
            start_ns=start - self.base_ns + self.offset_ns,
            latency_ns=latency,
            intended_ns=intended_ns,
            status=status,
            nbytes=nbytes,
            warmup=counted_warm | timed_warm,
        )
        return arrays if self.key is None else arrays.with_keys(self.key)

    def save_npz(self, f: BinaryIO) -> None:
        """An npz of the columns as they are (no derived array is built): 24 bytes an
        op in closed loop, against ~40 for `OpsArrays.save_npz`."""
        optional = {"intended": self.intended, "key": self.key}
        np.savez(
            f,
            format=np.array(FORMAT),
            op_names=np.array(self.op_names, dtype=object).astype(str),
            **{s: np.array(getattr(self, s), np.int64) for s in _SCALARS},
            start=self.start, end=self.end, outcome=self.outcome,
            **{k: v for k, v in optional.items() if v is not None},
        )

    @classmethod
    def from_npz(cls, z: Any) -> RecordColumns:
        """From an open npz (`np.load`) that `is_columns`."""
        if str(z["format"]) != FORMAT:
            raise ValueError(f"records format {z['format']!s}, this kit reads {FORMAT}")
        return cls(tuple(str(s) for s in z["op_names"]),
                   **{s: int(z[s]) for s in _SCALARS},
                   start=z["start"], end=z["end"], outcome=z["outcome"],
                   intended=z["intended"] if "intended" in z.files else None,
                   key=z["key"] if "key" in z.files else None)


def is_columns(files: Sequence[str]) -> bool:
    """Whether an npz with these members holds raw columns (else derived records)."""
    return "format" in files


def load_records(path: Path) -> OpsArrays:
    """The records of a worker's file: raw columns (derived here) or derived records."""
    with np.load(path, allow_pickle=False) as z:
        if is_columns(z.files):
            return RecordColumns.from_npz(z).to_arrays()
    return OpsArrays.load_npz(path)


def records_len(path: Path) -> int:
    """How many records the file holds (one member read)."""
    with np.load(path, allow_pickle=False) as z:
        return int(z["start" if is_columns(z.files) else "start_ns"].shape[0])


def records_columns(path: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The named `OpsArrays` fields of the file's records: derived records' members are
    read alone; raw columns are derived whole first."""
    with np.load(path, allow_pickle=False) as z:
        if not is_columns(z.files):
            return {n: z[n] for n in names}
    arrays = load_records(path)
    return {n: getattr(arrays, n) for n in names}
