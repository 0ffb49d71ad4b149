"""What the measurement checks read of each run (`harness.analysis.checks.registry`): its manifest
and, per group of its measured ops (as `harness summary` groups them), their count,
mean latency, wall time, MSER-5's warm-up (`stationarity.warmup`) and the largest
latencies the group's tail index needs (`tails`).

Each ops file is read once, in threads, one at a time per thread: only the small facts
are kept, so the checks of an experiment of any size need about one run's columns of
memory per thread (the warm-up needs the ops in the order they began). Where the
summary reads the ops anyway (`queries.one_pass`), `from_read` takes the same facts
from that read: one pass over the ops, not two.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.analysis.checks import tails
from harness.analysis.data.load import Loaded
from harness.analysis.data.opsread import split_batch
from harness.analysis.data.queries import Plan, plan
from harness.analysis.data.summary_ci import _key
from harness.analysis.stats import stationarity
from harness.analysis.stats.loo import RunSorted
from harness.results import OPS_FILE, Manifest, read_manifest

#: A group's key: the values of `by`, as `summary_ci._key` forms them.
GroupKey = tuple[object, ...]


@dataclass(frozen=True)
class RunOps:
    """One run's measured ops of one group."""

    n: int
    mean_ms: float
    wall_s: float
    #: MSER-5 on them; None with fewer than `stationarity.MIN_OPS`.
    warmup: stationarity.Warmup | None
    #: Their largest latencies (ns, any order): as many as the group's pooled Hill
    #: estimate could need from one run (`tails.tail_k` of every record of the group's
    #: runs, plus one), so `checks.heavy_tail` is exact without holding every latency.
    top_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass(frozen=True)
class RunData:
    """One run of a group: its manifest and its ops in the group (None: it has none)."""

    run_id: str
    manifest: Manifest
    ops: RunOps | None

    @property
    def started_s(self) -> float:
        """Its start as seconds since the epoch (NaN if unrecorded)."""
        try:
            return datetime.fromisoformat(self.manifest.started_utc).timestamp()
        except (TypeError, ValueError):
            return float("nan")

    @property
    def telemetry(self) -> dict:
        return dict(self.manifest.telemetry or {})


def _facts(lat: np.ndarray, begin: np.ndarray, top: int) -> RunOps:
    wall = float((begin + lat).max() - begin.min()) / 1e9
    largest = lat if lat.size <= top else np.partition(lat, lat.size - top)[-top:]
    return RunOps(int(lat.size), float(lat.mean()) / 1e6, wall,
                  stationarity.warmup(begin, lat), largest.copy())


def read_run(path: str, ops_keys: Sequence[str], top: int = 0
             ) -> dict[tuple[object, ...], RunOps]:
    """One ops file's measured ops (no warm-up, no redirect), per value of the ops-level
    keys (op by name, client as int: as `opsread.run_ops` keys them); each part keeps
    its `top` largest latencies."""
    columns = ["latency_ns", "start_ns", "intended_ns", "warmup", "status", *ops_keys]
    table = pq.read_table(path, columns=columns).combine_chunks()
    batch = table.to_batches()[0] if table.num_rows else None
    if batch is None:
        return {}
    lat = batch.column("latency_ns").to_numpy(zero_copy_only=False)
    begin = pc.coalesce(batch.column("intended_ns"), batch.column("start_ns")).to_numpy(
        zero_copy_only=False)
    # Split as `opsread.run_ops` splits its batches (the same keys, in C where built).
    return {key: _facts(lat_k, begin_k, top)
            for key, _, lat_k, begin_k in split_batch(batch, ops_keys, lat, begin)}


def group_runs(loaded: Loaded, by: Sequence[str] | None = None, *,
               threads: int | None = None) -> dict[GroupKey, list[RunData]]:
    """Per group of `by` (`harness summary`'s grouping; default experiment and grid
    keys), its pooled runs in the order they started (then by repetition). With
    run-level keys only, a run without measured ops is in its group with ``ops`` None;
    with op or client, a run is in each group whose ops it holds."""
    out: dict[GroupKey, list[RunData]] = {}
    runs = loaded.runs
    if not len(runs):
        return out
    p = plan(loaded, by)
    dirs = [Path(d) for d in runs["run_dir"]]
    workers = threads or min(4, os.cpu_count() or 1)
    # Records per run from the Parquet footers (no op read): a bound on any group's
    # ops, so each run keeps as many of its largest latencies as its group's Hill
    # estimate could take from it.
    rows = np.array([_records(d / OPS_FILE) for d in dirs], np.int64)
    group_rows = np.bincount(p.run_codes, weights=rows, minlength=int(p.run_codes.max()) + 1)
    tops = [tails.tail_k(int(group_rows[c])) + 1 for c in p.run_codes]

    def one(pos: int) -> tuple[Manifest, dict[tuple[object, ...], RunOps]]:
        path = dirs[pos] / OPS_FILE
        return read_manifest(dirs[pos]), (read_run(str(path), p.ops_keys, tops[pos])
                                          if path.exists() else {})

    with ThreadPoolExecutor(workers) as pool:
        for pos, (manifest, per_key) in enumerate(pool.map(one, range(len(dirs)))):
            rgroup = int(p.run_codes[pos])
            if not p.ops_keys:
                key = _key(p.key_values((rgroup,)))
                out.setdefault(key, []).append(RunData(manifest.run_id, manifest,
                                                       per_key.get(())))
                continue
            for okey, facts in per_key.items():
                key = _key(p.key_values((rgroup, *okey)))
                out.setdefault(key, []).append(RunData(manifest.run_id, manifest, facts))
    for group in out.values():
        group.sort(key=lambda r: (np.nan_to_num(r.started_s, nan=np.inf),
                                  r.manifest.repetition, r.run_id))
    return out


def _records(path: Path) -> int:
    """Records in an ops file, from its footer (0 if there is none to read)."""
    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except (OSError, ValueError):
        return 0


def from_read(loaded: Loaded, read: tuple[Plan, pd.DataFrame, dict[GroupKey, RunSorted]]
              ) -> dict[GroupKey, list[RunData]]:
    """`group_runs`'s answer from `queries.one_pass(warmups=True)`'s read: the same facts
    (counts, numpy's mean, wall time, MSER-5, each run's largest latencies as its group
    may need them), keyed and ordered alike."""
    p, units, sorted_runs = read
    dirs = [Path(d) for d in loaded.runs["run_dir"]]
    manifests = [read_manifest(d) for d in dirs]
    gkeys = ["rgroup", *p.ops_keys]
    out: dict[GroupKey, list[RunData]] = {}
    for g, rows in units.groupby(gkeys, sort=False, dropna=False):
        g = g if isinstance(g, tuple) else (g,)
        ops = sorted_runs[g]
        top = tails.tail_k(int(rows["n"].sum())) + 1
        by_pos = dict(zip(ops.labels.tolist(), ops.runs, strict=True))
        group = out.setdefault(_key(p.key_values(g)), [])
        for r in rows.itertuples(index=False):
            lat = by_pos[r.run_pos]
            group.append(RunData(manifests[r.run_pos].run_id, manifests[r.run_pos], RunOps(
                int(r.n), r.mean_ns / 1e6, r.wall_ns / 1e9, r.warmup,
                lat[-top:].astype(np.int64))))
    if not p.ops_keys:  # runs without measured ops are in their group too
        seen = {int(x) for x in units["run_pos"]}
        for pos in range(len(dirs)):
            if pos not in seen:
                out.setdefault(_key(p.key_values((int(p.run_codes[pos]),))), []).append(
                    RunData(manifests[pos].run_id, manifests[pos], None))
    for group in out.values():
        group.sort(key=lambda r: (np.nan_to_num(r.started_s, nan=np.inf),
                                  r.manifest.repetition, r.run_id))
    return out
