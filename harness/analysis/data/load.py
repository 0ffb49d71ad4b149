"""Raw results -> tidy pandas DataFrames: one of runs, one of ops.

Runs: one row per run, manifest fields flattened (see `RUN_COLUMNS`); every key of
``params`` and ``grid_point`` becomes its own column (grid_point wins on a clash),
``loadgen`` keys are prefixed ``loadgen_``, ``counts`` keys ``count_``, ``kit`` keys
``kit_``; ``run_dir`` is where the run lives. Ops: ``run_id`` plus the ops.parquet columns
asked for, with ``run_id``, ``op`` and ``status`` as categoricals.

`load` and `load_runs_only` pool the runs as every number does (`harness.analysis.data.pooling`:
complete runs, one per repetition; ``include=("partial",)`` adds partial ones) and keep
the runs they left out, with why, in `Loaded.left_out`; `load_runs` and `read_manifests`
give every run.

Only the Parquet columns asked for are read, and ops are concatenated in Arrow before a
single conversion to pandas, so memory is about the size of those columns and there is
no per-op Python work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.analysis.data import pooling
from harness.analysis.data.tree import (
    RUN_COLUMNS,
    Filter,
    SkippedRun,
    SkippedRunWarning,
    available_experiments,
    check_experiments,
    experiment_dirs,
    flatten_manifest,
    grid_keys,
    read_manifests,
    read_tree,
    skip_run,
    trees,
)
from harness.errors import ResultsError
from harness.results import (
    KEY_FIELD,
    OPS_FILE,
    OPS_SCHEMA,
    Manifest,
    read_ops,
)

#: What callers import from here: the tables, and the tree's names they always found here.
__all__ = ["DEFAULT_OPS_COLUMNS", "OPS_COLUMNS", "RUN_COLUMNS", "Filter", "Loaded",
           "SkippedRun", "SkippedRunWarning", "available_experiments", "check_experiments",
           "experiment_dirs", "flatten_manifest", "grid_keys", "load", "load_ops",
           "load_runs", "load_runs_only", "read_manifests", "read_ops_table", "runs_frame"]

#: Columns of ops.parquet that `load_ops` can return.
#: The key column (`run.record_keys`) is asked for like the others; a run without
#: it reads as nulls.
OPS_COLUMNS: tuple[str, ...] = (*OPS_SCHEMA.names, KEY_FIELD.name)

#: What a summary needs; the default for `load_ops`.
DEFAULT_OPS_COLUMNS: tuple[str, ...] = ("op", "start_ns", "latency_ns", "status", "warmup")


@dataclass(frozen=True)
class Loaded:
    """Result of `load`: the runs table and the ops table (ops may be empty)."""

    runs: pd.DataFrame
    ops: pd.DataFrame
    #: Union of the manifests' grid_point keys, in first-seen order.
    grid_keys: tuple[str, ...] = ()
    #: Runs left out (newer schema, damaged manifest or ops file), each named with why.
    skipped: tuple[SkippedRun, ...] = ()
    #: `ops` holds every k-th measured op of each run (k > 1 only when `load(max_ops=)`
    #: thinned a large experiment): enough to draw it, never to count it. Its numbers
    #: come from `harness.analysis.data.numbers`, which reads every op from the files (the
    #: pandas functions in `summary` and `summary_ci` refuse a sample).
    sample_every: int = 1
    #: Runs read and not pooled (`harness.analysis.data.pooling`): the runs table's columns
    #: plus ``left_out`` (partial, failed or duplicate). Outputs say how many.
    left_out: pd.DataFrame = field(default_factory=lambda: _empty_left_out())

    @property
    def sampled(self) -> bool:
        return self.sample_every > 1

    def runs_where(self, mask: Any) -> Loaded:
        """The same, with only the runs `mask` (a boolean Series over `runs`) keeps,
        and their ops."""
        runs = self.runs[mask]
        ids = set(runs["run_id"].astype(str))
        ops = self.ops[self.ops["run_id"].astype(str).isin(ids)] if len(self.ops) else self.ops
        return replace(self, runs=runs, ops=ops)

    @property
    def experiments(self) -> list[str]:
        return sorted(self.runs["experiment"].unique()) if len(self.runs) else []


def runs_frame(pairs: Iterable[tuple[Path, Manifest]]) -> pd.DataFrame:
    """The runs table for already-read manifests."""
    rows = [flatten_manifest(m, d) for d, m in pairs]
    if not rows:
        return pd.DataFrame(columns=[*RUN_COLUMNS, "run_dir"])
    df = pd.DataFrame(rows)
    fixed = [*RUN_COLUMNS]
    rest = [c for c in df.columns if c not in fixed and c != "run_dir"]
    df = df[[*fixed, *rest, "run_dir"]]
    return df.sort_values(["experiment", "config_id", "repetition", "run_id"]).reset_index(
        drop=True
    )


def _empty_left_out() -> pd.DataFrame:
    return pd.DataFrame(columns=[*RUN_COLUMNS, "run_dir", pooling.LEFT_OUT])


def _pooled(runs: pd.DataFrame, pool: bool, include: Sequence[str]
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs to read, runs left out); with `pool` False every run, as recorded."""
    if not pool:
        pooling.check_include(include)
        return runs, _empty_left_out()
    return pooling.pool(runs, include)


def load_runs(
    raw_dir: Path,
    *,
    experiments: Sequence[str] | None = None,
    where: Filter | None = None,
    verify: bool = True,
    skip_unknown_schema: bool = True,
) -> pd.DataFrame:
    """The runs table of `raw_dir` (one or many experiments, filtered on any run column).

    `where` maps a column to a value, a list of accepted values, or a predicate.
    """
    return runs_frame(
        read_manifests(
            raw_dir,
            experiments=experiments,
            where=where,
            verify=verify,
            skip_unknown_schema=skip_unknown_schema,
        )
    )


def _empty_ops(columns: Sequence[str]) -> pd.DataFrame:
    table = pa.Table.from_arrays(
        [pa.array([], pa.string())] + [pa.array([], OPS_SCHEMA.field(c).type) for c in columns],
        names=["run_id", *columns],
    )
    return _to_pandas(table)


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    df = table.to_pandas(split_blocks=True, self_destruct=True)
    for name in ("run_id", "op", "status"):
        if name in df.columns and not isinstance(df[name].dtype, pd.CategoricalDtype):
            df[name] = df[name].astype("category")
    return df


def _read_ops_with_keys(run_dir: Path, columns: list[str]) -> pa.Table:
    """`read_ops`, with a null `key` column for a run that recorded no keys."""
    if KEY_FIELD.name not in columns:
        return read_ops(run_dir, columns)
    path = Path(run_dir) / OPS_FILE
    try:
        keyed = KEY_FIELD.name in pq.read_schema(path).names
    except (OSError, pa.ArrowInvalid) as exc:
        raise ResultsError(f"{path}: cannot read ops ({exc})") from None
    if keyed:
        return read_ops(run_dir, columns)
    rest = [c for c in columns if c != KEY_FIELD.name]
    table = read_ops(run_dir, rest or ["warmup"])  # [] would read every column
    if not rest:
        table = table.drop_columns(["warmup"])
    return table.add_column(columns.index(KEY_FIELD.name), KEY_FIELD,
                            pa.nulls(table.num_rows, pa.int64()))


def read_ops_table(
    run_dirs: Sequence[tuple[str, Path]],
    columns: Sequence[str] = DEFAULT_OPS_COLUMNS,
    *,
    measured_only: bool = True,
    skipped: list[SkippedRun] | None = None,
    every: int = 1,
) -> pa.Table:
    """Ops of the given (run_id, run_dir) pairs as one Arrow table (run_id first);
    `every` > 1 keeps each run's 1st, (k+1)-th, ... op (after the warm-up filter).

    Dictionary columns are unified so runs with different op names concatenate. A run
    whose ops file cannot be read raises `ResultsError`, or, given a `skipped` list, is
    left out with a `SkippedRunWarning` and appended to it.
    """
    columns = list(columns)
    unknown = [c for c in columns if c not in OPS_COLUMNS]
    if unknown:
        raise ResultsError(f"unknown ops columns {unknown}; available: {list(OPS_COLUMNS)}")
    read_cols = list(columns)
    if measured_only and "warmup" not in read_cols:
        read_cols.append("warmup")
    parts: list[pa.Table] = []
    for run_id, run_dir in run_dirs:
        try:
            table = _read_ops_with_keys(run_dir, read_cols)
        except ResultsError as exc:
            if skipped is None:
                raise
            skipped.append(skip_run(run_dir, exc, run_id))
            continue
        if measured_only:
            table = table.filter(pc.invert(table.column("warmup")))
            if "warmup" not in columns:
                table = table.drop_columns(["warmup"])
        if every > 1:
            table = table.take(pa.array(np.arange(0, table.num_rows, every)))
        # A dictionary-typed run_id costs 1 byte/op instead of a string per op.
        rid = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(table.num_rows, dtype=np.int32)), pa.array([run_id])
        )
        parts.append(table.add_column(0, "run_id", rid))
    if not parts:
        return pa.Table.from_arrays(
            [pa.array([], pa.dictionary(pa.int32(), pa.string()))]
            + [pa.array([], OPS_SCHEMA.field(c).type) for c in columns],
            names=["run_id", *columns],
        )
    return pa.concat_tables(parts, promote_options="permissive").unify_dictionaries()


def load_ops(
    runs: pd.DataFrame,
    columns: Sequence[str] = DEFAULT_OPS_COLUMNS,
    *,
    measured_only: bool = True,
) -> pd.DataFrame:
    """The ops table for the runs in `runs` (a runs table from `load_runs`).

    By default only measured ops (``warmup == False``) are returned.
    """
    pairs = [(str(r), Path(d)) for r, d in zip(runs["run_id"], runs["run_dir"], strict=True)]
    if not pairs:
        return _empty_ops(columns)
    return _to_pandas(read_ops_table(pairs, columns, measured_only=measured_only))


def load(
    raw_dir: Path,
    *,
    experiments: Sequence[str] | None = None,
    where: Filter | None = None,
    columns: Sequence[str] = DEFAULT_OPS_COLUMNS,
    measured_only: bool = True,
    verify: bool = True,
    skip_unknown_schema: bool = True,
    max_ops: int | None = None,
    include: Sequence[str] = (),
    pool: bool = True,
) -> Loaded:
    """Runs and ops of `raw_dir`, filtered by experiment and any run-level column.

    Runs that cannot be read are left out of both tables and listed in `Loaded.skipped`
    (see `read_manifests`). Runs read are pooled (`harness.analysis.data.pooling`: complete
    ones, one per repetition, `include` adding partial ones); those left out are in
    `Loaded.left_out`, their ops not read. `pool=False`: every run as recorded (exports).
    `max_ops`: when the runs' ops files hold more records than this, `ops` keeps every
    k-th op of each run (`Loaded.sample_every`), so a study of any size is drawn in
    bounded memory while its numbers come from every op."""
    pairs, skipped = read_tree(
        raw_dir,
        experiments=experiments,
        where=where,
        verify=verify,
        skip_unknown_schema=skip_unknown_schema,
    )
    # Grid keys and columns from every run read: a parameter only a left-out run has
    # still names the rows that count it.
    runs, left_out = _pooled(runs_frame(pairs), pool, include)
    if not len(runs):
        return Loaded(runs, _empty_ops(columns), grid_keys(m for _, m in pairs),
                      tuple(skipped), left_out=left_out)
    pairs_ops = [(str(r), Path(d)) for r, d in zip(runs["run_id"], runs["run_dir"],
                                                    strict=True)]
    before = len(skipped)
    every = _sample_every([d for _, d in pairs_ops], max_ops)
    table = read_ops_table(pairs_ops, columns, measured_only=measured_only, skipped=skipped,
                           every=every)
    if len(skipped) > before:  # an ops file that passed no checksum and does not parse
        gone = {s.run_id for s in skipped[before:]}
        runs = runs[~runs["run_id"].astype(str).isin(gone)].reset_index(drop=True)
        pairs = [(d, m) for d, m in pairs if m.run_id not in gone]
    return Loaded(
        runs=runs,
        ops=_to_pandas(table),
        grid_keys=grid_keys(m for _, m in pairs),
        skipped=tuple(skipped),
        sample_every=every,
        left_out=left_out,
    )


def _sample_every(run_dirs: Sequence[Path], max_ops: int | None) -> int:
    """1, or the k that brings the records of `run_dirs` (from the Parquet footers, warm-up
    included: no op is read for it) to at most `max_ops`."""
    if max_ops is None:
        return 1
    total = 0
    for run_dir in run_dirs:
        try:
            total += pq.ParquetFile(Path(run_dir) / OPS_FILE).metadata.num_rows
        except (OSError, pa.ArrowInvalid):
            continue  # read_ops_table names it and skips the run
    return max(1, -(-total // max(1, max_ops)))


def load_runs_only(
    raw_dir: Path | Sequence[Path],
    *,
    experiments: Sequence[str] | None = None,
    verify: bool = True,
    progress: bool = False,
    include: Sequence[str] = (),
) -> Loaded:
    """The pooled runs of `raw_dir` (as `load` pools them) as a `Loaded` whose ops table
    is empty: for the DuckDB queries (`harness.analysis.data.queries`), which read the ops
    files themselves. `progress`: runs read / total on stderr.

    `raw_dir` may be several trees (`harness summary A B`): their runs are pooled as one
    tree's would be, so a run found in two of them (a copy) counts once and the other
    copy is a duplicate, left out and said."""
    pairs: list[tuple[Path, Manifest]] = []
    skipped: list[SkippedRun] = []
    for tree in trees(raw_dir):
        got, left = read_tree(tree, experiments=experiments, where=None, verify=verify,
                              skip_unknown_schema=True, progress=progress)
        pairs += got
        skipped += left
    runs, left_out = _pooled(runs_frame(pairs), True, include)
    return Loaded(runs, _empty_ops(DEFAULT_OPS_COLUMNS), grid_keys(m for _, m in pairs),
                  tuple(skipped), left_out=left_out)
