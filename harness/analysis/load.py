"""Raw results -> tidy pandas DataFrames: one of runs, one of ops.

Runs: one row per run, manifest fields flattened (see `RUN_COLUMNS`); every key of
``params`` and ``grid_point`` becomes its own column (grid_point wins on a clash),
``loadgen`` keys are prefixed ``loadgen_``, ``counts`` keys ``count_``, ``kit`` keys
``kit_``; ``run_dir`` is where the run lives. Ops: ``run_id`` plus the ops.parquet columns
asked for, with ``run_id``, ``op`` and ``status`` as categoricals.

`load` and `load_runs_only` pool the runs as every number does (`harness.analysis.pooling`:
complete runs, one per repetition; ``include=("partial",)`` adds partial ones) and keep
the runs they left out, with why, in `Loaded.left_out`; `load_runs` and `read_manifests`
give every run.

Only the Parquet columns asked for are read, and ops are concatenated in Arrow before a
single conversion to pandas, so memory is about the size of those columns and there is
no per-op Python work.
"""

from __future__ import annotations

import difflib
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm

from harness.analysis import pooling
from harness.errors import ResultsError, SchemaVersionError
from harness.results import (
    KEY_FIELD,
    MANIFEST,
    OPS_FILE,
    OPS_SCHEMA,
    STRAY_REASON,
    Manifest,
    iter_run_dirs,
    iter_stray_dirs,
    read_manifest,
    read_ops,
)
from harness.results.manifest import COUNT_PREFIX, KIT_PREFIX, LOADGEN_PREFIX
from harness.results.verified import VerifiedCache

#: Fixed run-level columns, in order; parameter columns follow them.
RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "experiment",
    "workload",
    "config_id",
    "repetition",
    "status",
    "started_utc",
    "ended_utc",
    "source",
    "spec_file",
    "error",
)

#: Columns of ops.parquet that `load_ops` can return.
#: The key column (`run.record_keys`) is asked for like the others; a run without
#: it reads as nulls.
OPS_COLUMNS: tuple[str, ...] = (*OPS_SCHEMA.names, KEY_FIELD.name)

#: What a summary needs; the default for `load_ops`.
DEFAULT_OPS_COLUMNS: tuple[str, ...] = ("op", "start_ns", "latency_ns", "status", "warmup")

Filter = Mapping[str, Any]


class SkippedRunWarning(UserWarning):
    """A run left out of an analysis; the message names its directory and why."""


@dataclass(frozen=True)
class SkippedRun:
    """A run the analysis could not use: where it is and why (for the report's appendix)."""

    run_dir: str
    reason: str
    run_id: str | None = None
    #: Whether its ops file was checked against a manifest's checksum (and failed), or
    #: never could be (no manifest, or one this kit cannot read).
    checked: bool = False


def skip_run(run_dir: Path, exc: Exception, run_id: str | None = None, *,
             checked: bool = False) -> SkippedRun:
    """Warn (stderr, via the CLI) that `run_dir` is skipped, and say so as a record."""
    reason = str(exc)
    # The reason usually starts with the file's path; the directory is named once already.
    for name in (MANIFEST, OPS_FILE):
        reason = reason.removeprefix(f"{Path(run_dir) / name}: ")
    warnings.warn(SkippedRunWarning(f"skipping run {run_dir}: {reason}"), stacklevel=3)
    return SkippedRun(str(run_dir), reason, run_id, checked)


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
    #: come from `harness.analysis.numbers`, which reads every op from the files (the
    #: pandas functions in `summary` and `summary_ci` refuse a sample).
    sample_every: int = 1
    #: Runs read and not pooled (`harness.analysis.pooling`): the runs table's columns
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


def flatten_manifest(manifest: Manifest, run_dir: Path | None = None) -> dict[str, Any]:
    """One runs-table row from a manifest (nested mappings become prefixed columns)."""
    row: dict[str, Any] = {name: getattr(manifest, name) for name in RUN_COLUMNS}
    # grid_point after params: the grid value is what the run was varied on, so it wins.
    for source in (manifest.params, manifest.grid_point):
        for key, value in source.items():
            if key in RUN_COLUMNS:
                continue  # never let a parameter shadow an identity column
            row[key] = value
    for prefix, mapping in (
        (LOADGEN_PREFIX, manifest.loadgen),
        (COUNT_PREFIX, manifest.counts),
        (KIT_PREFIX, manifest.kit),
    ):
        for key, value in mapping.items():
            row[prefix + key] = value
    row["run_dir"] = str(run_dir) if run_dir is not None else None
    return row


def _matches(row: Mapping[str, Any], where: Filter | None) -> bool:
    if not where:
        return True
    for key, wanted in where.items():
        if key not in row:
            return False
        value = row[key]
        if isinstance(wanted, (list, tuple, set, frozenset)):
            if value not in wanted:
                return False
        elif callable(wanted):
            if not wanted(value):
                return False
        elif value != wanted:
            return False
    return True


def experiment_dirs(raw_dir: Path) -> dict[str, list[Path]]:
    """Experiment name -> its directories under `raw_dir`: a directory holding run
    directories, at the top (``raw/<experiment>/<run>``) or one level down, as `harness
    import -o raw/imported` writes them (``raw/imported/<experiment>/<run>``). Hidden
    directories are skipped. `raw_dir` may itself be one experiment."""
    raw_dir = Path(raw_dir)
    found: dict[str, list[Path]] = {}

    def holds_runs(d: Path) -> bool:
        return any((c / MANIFEST).exists() or (c / OPS_FILE).exists()
                   for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))

    def visible(d: Path) -> list[Path]:
        return sorted(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))

    if not raw_dir.is_dir() or (raw_dir / MANIFEST).exists():
        return found
    if holds_runs(raw_dir):
        return {raw_dir.name: [raw_dir]}
    for d in visible(raw_dir):
        if holds_runs(d):
            found.setdefault(d.name, []).append(d)
            continue
        for sub in visible(d):
            if holds_runs(sub):
                found.setdefault(sub.name, []).append(sub)
    return found


def check_experiments(raw_dir: Path, experiments: Sequence[str] | None) -> None:
    """Raise ResultsError, exit 2 at the CLI, for a tree without runs or an experiment
    name it does not hold (a typo would otherwise give an empty table, exit 0)."""
    raw_dir = Path(raw_dir)
    if not raw_dir.exists():
        raise ResultsError(f"{raw_dir}: no such raw-results directory")
    if (raw_dir / MANIFEST).exists():
        return
    known = experiment_dirs(raw_dir)
    if not known:
        raise ResultsError(f"{raw_dir}: no runs in it (no run directory with a "
                           "manifest.json); give the raw-results directory `harness run` "
                           "or `harness import` wrote")
    for name in experiments or ():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ResultsError(f"{raw_dir}: no experiment {name!r}{hint}; experiments "
                               f"there: {', '.join(sorted(known))}")


def _experiment_dirs(raw_dir: Path, experiments: Sequence[str] | None) -> list[Path]:
    raw_dir = Path(raw_dir)
    if experiments is None:
        return [raw_dir]
    # Only the requested experiments' directories are walked: cheap on big trees.
    known = experiment_dirs(raw_dir)
    return [d for name in experiments for d in known.get(name, [])]


def read_manifests(
    raw_dir: Path,
    *,
    experiments: Sequence[str] | None = None,
    where: Filter | None = None,
    verify: bool = True,
    skip_unknown_schema: bool = True,
    skipped: list[SkippedRun] | None = None,
) -> list[tuple[Path, Manifest]]:
    """(run_dir, manifest) for every readable run, filtered.

    A run this kit cannot read (a newer schema_version, a corrupt manifest, an ops file
    that fails its checksum, an ops file without a manifest) is skipped with a
    `SkippedRunWarning` naming its directory and why, and appended to `skipped` if given:
    one foreign run never stops the analysis of the others. With
    ``skip_unknown_schema=False`` a newer schema raises `SchemaVersionError` instead.
    """
    pairs, left = _read_manifests(raw_dir, experiments=experiments, where=where,
                                  verify=verify, skip_unknown_schema=skip_unknown_schema)
    if skipped is not None:
        skipped.extend(left)
    return pairs


def _read_manifests(
    raw_dir: Path,
    *,
    experiments: Sequence[str] | None,
    where: Filter | None,
    verify: bool,
    skip_unknown_schema: bool,
    progress: bool = False,
) -> tuple[list[tuple[Path, Manifest]], list[SkippedRun]]:
    raw_dir = Path(raw_dir)
    if not raw_dir.exists():
        raise ResultsError(f"{raw_dir}: no such raw-results directory")
    out: list[tuple[Path, Manifest]] = []
    skipped: list[SkippedRun] = []
    bases = _experiment_dirs(raw_dir, experiments)
    run_dirs = [d for base in bases for d in iter_run_dirs(base)]
    # An ops file without its manifest is no run, but its records are not dropped unsaid.
    for base in bases:
        for stray in iter_stray_dirs(base):
            skipped.append(skip_run(stray, ResultsError(STRAY_REASON)))
    cache = VerifiedCache() if verify else None
    with tqdm(total=len(run_dirs), unit="run", desc="reading runs", file=sys.stderr,
              disable=not progress, leave=False) as bar:
        for run_dir in run_dirs:
            bar.update(1)
            try:
                manifest = read_manifest(run_dir)
                if experiments is not None and manifest.experiment not in experiments:
                    continue
                if where and not _matches(flatten_manifest(manifest, run_dir), where):
                    continue
            except SchemaVersionError as exc:
                if not skip_unknown_schema:
                    raise
                skipped.append(skip_run(run_dir, exc))
                continue
            except ResultsError as exc:
                skipped.append(skip_run(run_dir, exc))
                continue
            try:
                if cache is not None:
                    cache.verify(run_dir, manifest)
            except ResultsError as exc:
                skipped.append(skip_run(run_dir, exc, manifest.run_id, checked=True))
                continue
            out.append((run_dir, manifest))
    if cache is not None:
        cache.save()
    return out, skipped


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
    (see `read_manifests`). Runs read are pooled (`harness.analysis.pooling`: complete
    ones, one per repetition, `include` adding partial ones); those left out are in
    `Loaded.left_out`, their ops not read. `pool=False`: every run as recorded (exports).
    `max_ops`: when the runs' ops files hold more records than this, `ops` keeps every
    k-th op of each run (`Loaded.sample_every`), so a study of any size is drawn in
    bounded memory while its numbers come from every op."""
    pairs, skipped = _read_manifests(
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
    raw_dir: Path,
    *,
    experiments: Sequence[str] | None = None,
    verify: bool = True,
    progress: bool = False,
    include: Sequence[str] = (),
) -> Loaded:
    """The pooled runs of `raw_dir` (as `load` pools them) as a `Loaded` whose ops table
    is empty: for the DuckDB queries (`harness.analysis.queries`), which read the ops
    files themselves. `progress`: runs read / total on stderr."""
    pairs, skipped = _read_manifests(raw_dir, experiments=experiments, where=None,
                                     verify=verify, skip_unknown_schema=True,
                                     progress=progress)
    runs, left_out = _pooled(runs_frame(pairs), True, include)
    return Loaded(runs, _empty_ops(DEFAULT_OPS_COLUMNS), grid_keys(m for _, m in pairs),
                  tuple(skipped), left_out=left_out)


def grid_keys(manifests: Iterable[Manifest]) -> tuple[str, ...]:
    """Union of the grid_point keys of `manifests`, in first-seen order."""
    keys: dict[str, None] = {}
    for manifest in manifests:
        keys.update(dict.fromkeys(manifest.grid_point))
    return tuple(keys)


def available_experiments(raw_dir: Path) -> list[str]:
    """Experiment names under `raw_dir` (`experiment_dirs`; empty if it does not exist)."""
    return sorted(experiment_dirs(raw_dir))
