"""One read of each ops file, for the summary, its intervals and its checks: per group
of measured ops (as `harness summary` groups them) and run, the sums `queries.units_sql`
gives, the latencies sorted (`loo.RunSorted`) and, where the checks are wanted, MSER-5's
warm-up on them in the order they began (`stationarity.warmup`): the checks' per-run
facts (`runfacts.from_read`) come out of the read the figures make, not a second one.

Files are read in threads (pyarrow, numpy and the C split by key, `_opsplit`, let go of
the GIL), one at a time per thread; only the sorted latencies are kept, 8 bytes per op.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm

from harness.analysis.data.load import Loaded
from harness.analysis.data.probe import probe_clients
from harness.analysis.stats import stationarity
from harness.analysis.stats.loo import RunSorted, compact, sort_ints
from harness.results import ERROR_STATUSES, OPS_FILE
from harness.text import raw_stream

try:  # the C split of a batch by key (setup.py builds it where it can); else numpy's
    from harness.analysis.data import _opsplit
except ImportError:
    _opsplit = None

if TYPE_CHECKING:
    from harness.analysis.data.queries import Plan


#: Ops read from a file at a time.
BATCH_ROWS = 1 << 20


def _key_codes(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, list[object] | None]:
    """A column as integer codes and, for a dictionary column, the value of each code
    (its indices as stored, 1 byte each for op and status: no widened copy)."""
    col = batch.column(name)
    if pa.types.is_dictionary(col.type):
        return col.indices.to_numpy(zero_copy_only=False), col.dictionary.to_pylist()
    return col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), None


@dataclass
class _RunPart:
    """One run's ops of one group: `units_sql`'s sums, and the latencies to sort."""

    lat: list[np.ndarray]
    n: int = 0
    lat_sum: int = 0
    n_err: int = 0
    n_miss: int = 0
    begin: int | None = None  # min(b), b = intended start, else start
    end: int | None = None  # max(b + latency)
    #: The ops' b, kept until the warm-up is found (`run_ops(warmups=True)`).
    starts: list[np.ndarray] = field(default_factory=list)
    warmup: stationarity.Warmup | None = None
    mean_ns: float = float("nan")  # numpy's mean, as the checks had it from their read


def key_code(codes: Sequence[np.ndarray], n: int) -> np.ndarray:
    """One non-negative code per op for the values of several keys (`_key_codes`' codes
    of each): a mixed radix over them; zeros for no key. One key's codes stay as stored
    (int8 for op), more are combined in int64."""
    first, *others = list(codes) or [np.zeros(n, np.int8)]
    combined = first - int(first.min(initial=0))
    if others:
        combined = combined.astype(np.int64)
    for c in others:
        low = int(c.min(initial=0))
        combined = combined * (int(c.max(initial=0)) - low + 1) + (c - low)
    return combined


def _status_in(batch: pa.RecordBatch, names: tuple[str, ...]) -> np.ndarray:
    """Per op: whether its status is one of `names`, by comparing the status
    dictionary's codes (1 byte each) with those of the names, not by a lookup per op."""
    col = batch.column("status")
    if not pa.types.is_dictionary(col.type):  # the strings themselves
        return np.isin(np.asarray(col.to_pylist(), object), list(names))
    codes = col.indices.to_numpy(zero_copy_only=False)
    out = np.zeros(codes.size, bool)
    for i, value in enumerate(col.dictionary.to_pylist()):
        if value in names:
            out |= codes == i
    return out


def run_ops(path: str, ops_keys: Sequence[str], *, warmups: bool = False,
            drop_clients: Sequence[int] = ()) -> dict[tuple[object, ...], _RunPart]:
    """One ops file's measured ops (no warm-up, no redirect) per value of the ops-level
    keys (op as its name, as DuckDB's VARCHAR gives it; client as int): the sums of
    `units_sql` and the latencies, sorted; with `warmups`, MSER-5's warm-up of each.
    `drop_clients`: ops of these client ids are left out (a probe's, `clients.probe`)."""
    parts: dict[tuple[object, ...], _RunPart] = {}
    columns = ["latency_ns", "start_ns", "intended_ns", "warmup", "status", *ops_keys]
    if drop_clients and "client" not in columns:
        columns.append("client")
    for batch in pq.ParquetFile(path).iter_batches(columns=columns, batch_size=BATCH_ROWS):
        if drop_clients:
            client = batch.column("client").to_numpy(zero_copy_only=False)
            batch = batch.filter(pa.array(~np.isin(client, list(drop_clients))))
        lat = batch.column("latency_ns").to_numpy(zero_copy_only=False)
        b = pc.coalesce(batch.column("intended_ns"), batch.column("start_ns")).to_numpy(
            zero_copy_only=False)
        for key, stats, lat_k, b_k in split_batch(batch, ops_keys, lat, b):
            part = parts.setdefault(key, _RunPart([]))
            part.lat.append(lat_k)
            if warmups:
                part.starts.append(b_k)
            n, lat_sum, n_err, n_miss, lo, hi = stats
            part.n += n
            part.lat_sum += lat_sum
            part.n_err += n_err
            part.n_miss += n_miss
            part.begin = lo if part.begin is None else min(part.begin, lo)
            part.end = hi if part.end is None else max(part.end, hi)
    for part in parts.values():
        lat = _joined(part.lat)
        if warmups:
            part.warmup = stationarity.warmup(_joined(part.starts), lat)
            part.starts, part.mean_ns = [], float(lat.mean())
        part.lat = [sort_ints(compact(lat))]
    return parts


def split_batch(batch: pa.RecordBatch, ops_keys: Sequence[str], lat: np.ndarray,
                b: np.ndarray
                ) -> list[tuple[tuple[object, ...], tuple[int, ...], np.ndarray, np.ndarray]]:
    """A batch's measured ops (no warm-up, no redirect) per value of the ops-level keys
    (op as its name, client as int), in the keys' code order: the value, (count, latency
    sum, errors, misses, least b, greatest b + latency), and the ops' latencies and `b`
    (their begins) in their order. In C where `_opsplit` is built, else numpy."""
    codes = [_key_codes(batch, k) for k in ops_keys]
    combined = key_code([c for c, _ in codes], lat.size)
    groups = _split_c(batch, combined, lat, b) if _opsplit is not None else None
    if groups is None:
        groups = _split_numpy(batch, combined, lat, b)
    return [(tuple(vals[int(c[first])] if vals is not None else int(c[first])
                   for c, vals in codes), stats, lat_k, b_k)
            for first, stats, lat_k, b_k in groups]


#: One group (key code) of a batch's measured ops: its first op's index, (count, latency
#: sum, errors, misses, least b, greatest b + latency), and its latencies and b.
_Group = tuple[int, tuple[int, int, int, int, int, int], np.ndarray, np.ndarray]
#: The most key codes the C split takes (a stats row of 56 bytes each).
_MAX_C_CODES = 1 << 16


def _status_kinds(batch: pa.RecordBatch) -> bytes | None:
    """Per status dictionary code, the bits `_opsplit.split` reads: 1 redirect (not
    measured), 2 an error, 4 a miss; None for a status column not dictionary-encoded."""
    col = batch.column("status")
    if not pa.types.is_dictionary(col.type):
        return None
    return bytes(1 * (v == "redirect") | 2 * (v in ERROR_STATUSES) | 4 * (v == "miss")
                 for v in col.dictionary.to_pylist())


def _split_c(batch: pa.RecordBatch, combined: np.ndarray, lat: np.ndarray, b: np.ndarray
             ) -> list[_Group] | None:
    """`_split_numpy`'s groups from the C split (`_opsplit`), in two reads of the batch;
    None where it does not apply (a status column of strings, codes not integers or too
    many, a time column not int64), for numpy's path."""
    kinds = _status_kinds(batch)
    size = int(combined.max(initial=-1)) + 1
    if (kinds is None or combined.dtype.kind != "i" or size > _MAX_C_CODES
            or lat.dtype != np.int64 or b.dtype != np.int64):
        return None
    status = batch.column("status").indices.to_numpy(zero_copy_only=False)
    if status.dtype != np.int8:
        return None
    if combined.dtype.itemsize not in (1, 4, 8):  # int16 codes of a larger dictionary
        combined = combined.astype(np.int64)
    warmup = batch.column("warmup").to_numpy(zero_copy_only=False)
    lat_out, b_out = np.empty_like(lat), np.empty_like(b)
    stats = np.empty((size, 7), np.int64)
    assert _opsplit is not None
    _opsplit.split(np.ascontiguousarray(combined), np.ascontiguousarray(warmup, np.bool_),
                   status, kinds, np.ascontiguousarray(lat), np.ascontiguousarray(b),
                   lat_out, b_out, stats)
    ends = np.cumsum(stats[:, 0])
    groups = []
    for code in np.flatnonzero(stats[:, 0]):
        n, lat_sum, n_err, n_miss, lo, hi, first = (int(x) for x in stats[code])
        at = int(ends[code]) - n
        groups.append((first, (n, lat_sum, n_err, n_miss, lo, hi), lat_out[at:at + n],
                       b_out[at:at + n]))
    return groups


def _split_numpy(batch: pa.RecordBatch, combined: np.ndarray, lat: np.ndarray, b: np.ndarray
                 ) -> list[_Group]:
    """A batch's measured ops (no warm-up, no redirect) by code of `combined`, in code
    order, each group's ops in their order."""
    keep = ~(batch.column("warmup").to_numpy(zero_copy_only=False)
             | _status_in(batch, ("redirect",)))
    kept = combined[keep]
    if not kept.size:
        return []
    size = int(kept.max()) + 1
    present = np.flatnonzero(np.bincount(kept, minlength=size))
    # Errors and misses of each code, counted over those ops alone.
    n_err = np.bincount(combined[keep & _status_in(batch, ERROR_STATUSES)], minlength=size)
    n_miss = np.bincount(combined[keep & _status_in(batch, ("miss",))], minlength=size)
    groups = []
    for code in present:
        mine = keep if present.size == 1 else keep & (combined == code)
        lat_k, b_k = lat[mine], b[mine]
        stats = (int(lat_k.size), int(lat_k.sum()), int(n_err[code]), int(n_miss[code]),
                 int(b_k.min()), int((b_k + lat_k).max()))
        groups.append((int(np.argmax(mine)), stats, lat_k, b_k))
    return groups


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """The parts of one batch or more as one array (one batch: no copy)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def group_runs(loaded: Loaded, p: Plan, *, progress: bool = False, threads: int | None = None,
               warmups: bool = False
               ) -> tuple[pd.DataFrame, dict[tuple[object, ...], RunSorted]]:
    """`units_sql`'s table, and per group (rgroup, then the ops-level values) each run's
    sorted latencies, from one read of each ops file. With `warmups`, the table has
    ``warmup`` (`stationarity.warmup` of the run's ops in the group) and ``mean_ns``."""
    paths = [str(Path(d) / OPS_FILE) for d in loaded.runs["run_dir"]]
    found: dict[tuple[object, ...], tuple[list[np.ndarray], list[int]]] = {}
    rows = []
    # A bar only on a terminal: a CI log or captured stderr gets none of its frames.
    bar = tqdm(total=len(paths), unit="run", desc="runs read", file=raw_stream(sys.stderr),
               disable=not (progress and sys.stderr.isatty()), leave=False)
    workers = threads or min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        drops = probe_clients(loaded.runs)  # the load's figures leave a probe's ops out
        for pos, per_key in enumerate(pool.map(
                lambda f, d: run_ops(f, p.ops_keys, warmups=warmups, drop_clients=d),
                paths, drops)):
            bar.update(1)
            rgroup = int(p.run_codes[pos])
            for key, part in per_key.items():
                arrays, labels = found.setdefault((rgroup, *key), ([], []))
                arrays.append(part.lat[0])
                labels.append(pos)
                assert part.begin is not None and part.end is not None
                rows.append((rgroup, *key, pos, part.n, float(part.end - part.begin),
                             float(part.lat_sum), part.n_err, part.n_miss, part.warmup,
                             part.mean_ns))
    bar.close()
    units = pd.DataFrame(rows, columns=["rgroup", *p.ops_keys, "run_pos", "n", "wall_ns",
                                        "lat_sum_ns", "n_err", "n_miss", "warmup",
                                        "mean_ns"])
    if not warmups:
        units = units.drop(columns=["warmup", "mean_ns"])
    units = units.sort_values(["rgroup", *p.ops_keys, "run_pos"], kind="stable",
                              ignore_index=True)
    return units, {g: RunSorted(a, np.asarray(labels)) for g, (a, labels) in found.items()}
