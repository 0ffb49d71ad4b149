"""Per-run and per-configuration summaries of raw results (the `harness summary` table).

`summary_table(raw_dir, by=None, experiments=None)` returns one row per configuration.
Its columns are a stable interface (`harness summary --format json` prints them as a list
of objects): first the grouping columns, then exactly

``runs``
    number of runs pooled in the group (with ``by`` holding an ops-level column such as
    ``op``: runs that contain ops of that group). Only complete runs are pooled, one per
    experiment, configuration and repetition, unless ``include`` adds partial ones
    (`harness.analysis.data.pooling`); failed runs never are.
``ops``
    measured ops (ops flagged ``warmup`` are never counted anywhere in this table).
    Records with status ``redirect`` are attempts a server turned away inside an op
    whose own record spans the retries; they are not ops and are left out everywhere
    here (the KV study reports them as a redirect rate).
``throughput_ops_s``
    measured ops per second over the group's runs, each run counting once: the harmonic
    mean of the run rates (each run's time per op counts once), or for runs of a fixed
    duration (``loadgen_duration_s``) the arithmetic mean. For runs of equal length in
    what the spec fixes (op count, or duration) that is exactly total ops / total wall
    time; runs of unequal length no longer let the longest decide (`intervals.run_scale`).
    A run's wall time is max(begin + latency_ns) - min(begin) over its measured ops in the
    group, where begin is intended_ns in open loop (latency counts from the intended start
    there) and start_ns otherwise.
``goodput_ops_s``
    the same over the ops that got an answer (status ``ok`` or ``miss``): throughput
    less errors and timeouts.
``latency_mean_ms``
    the mean over the group's runs of each run's mean latency (each run counting once:
    total latency / total ops where the runs hold equally many ops), whatever the ops'
    status (failed ops included: a timeout is a wait the client had), in milliseconds.
``latency_p50_ms``, ``latency_p99_ms``
    percentiles (linear interpolation) of the latencies of all the group's measured ops
    pooled, failed ops included, in milliseconds; ``error_rate`` beside them says how
    many.
    Imported runs whose records are aggregated show their tool's stated percentiles
    instead, or NaN where pooled with other runs (`harness.analysis.data.stated`).
``error_rate``
    share of the group's measured ops whose status is ``error`` or ``timeout`` (0..1).

Last come ``left_out_partial``, ``left_out_failed`` and ``left_out_duplicate``: the
runs read and not pooled that would be in the row (`summary_table.with_left_out`); a group
of such runs only is a row with ``runs`` 0.

With ``intervals=True`` (``harness summary`` always asks for them) each of throughput,
mean, p50 and p99 is followed by ``<field>_ci_low`` and ``<field>_ci_high``: its 95% CI
with the run as the unit (see `harness.analysis.stats.intervals`); NaN (JSON null) with fewer
than 2 runs, or for a percentile whose runs hold too few ops beyond it.

Grouping: by the given columns, else by ``experiment`` plus every grid parameter (the keys
of the manifests' ``grid_point``). A grouping column may be any run-level column of the
runs table (``harness.analysis.data.load``: parameters, ``experiment``, ``workload``,
``status`` (the run's), ``config_id``, ``run_id`` ...) or the ops-level column ``op`` or
``client``, which splits ops by that column even inside one run. An unknown column raises
`ResultsError` naming it and listing the available ones. A group with no measured ops has
``ops`` 0 and NaN rates and latencies.

`summarise` computes the same and more (p90, p99.9, max, miss rate, wall time) for any
loaded data; `run_summary` is `summarise` per run, with the run's columns beside it.
Everything is vectorised: no Python work per op, one loop per group for percentiles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded
from harness.errors import ResultsError

#: The interface columns of `summary_table`, after the grouping columns.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "runs",
    "ops",
    "throughput_ops_s",
    "goodput_ops_s",
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p99_ms",
    "error_rate",
)

#: Everything `summarise` returns, after the grouping columns.
FULL_COLUMNS: tuple[str, ...] = (
    "runs",
    "ops",
    "wall_s",
    "throughput_ops_s",
    "goodput_ops_s",
    "latency_mean_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_p999_ms",
    "latency_max_ms",
    "error_rate",
    "miss_rate",
)

#: Columns of ops.parquet that may group ops inside a run.
OPS_LEVEL: tuple[str, ...] = ("op", "client")

#: Statuses counted as errors; a miss is a valid answer, not an error.
ERROR_STATUSES: tuple[str, ...] = ("error", "timeout")

_QUANTILES = np.array([0.5, 0.9, 0.99, 0.999])
_NS_PER_MS = 1e6


def available_columns(runs: pd.DataFrame) -> list[str]:
    """Columns `by` may name for these runs."""
    run_cols = [c for c in runs.columns if c != "run_dir"]
    return [*run_cols, *(c for c in OPS_LEVEL if c not in run_cols)]


def default_by(loaded: Loaded) -> list[str]:
    """``experiment`` plus every grid parameter."""
    return ["experiment", *(k for k in loaded.grid_keys if k != "experiment")]


def _check_by(by: Sequence[str], runs: pd.DataFrame) -> None:
    available = available_columns(runs)
    for col in by:
        if col not in available:
            raise ResultsError(
                f"unknown grouping column {col!r}; available: {', '.join(available)}"
            )


def _factorize_rows(frame: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Integer code per row of `frame` (NaN-safe) and the unique key rows, in code order."""
    if frame.shape[1] == 0:
        return np.zeros(len(frame), np.int64), pd.DataFrame(index=range(1))
    grouped = frame.groupby(list(frame.columns), dropna=False, sort=False, observed=True)
    codes = grouped.ngroup().to_numpy(np.int64)
    _, first = np.unique(codes, return_index=True)  # first row of each code, in code order
    return codes, frame.iloc[first].reset_index(drop=True)


def _run_positions(runs: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """Each op's row number in `runs`, mapped through the run_id categories (cheap)."""
    if not len(ops):
        return np.zeros(0, np.int64)
    run_pos = pd.Index(runs["run_id"].astype(str))
    rid = ops["run_id"]
    if isinstance(rid.dtype, pd.CategoricalDtype):
        lookup = run_pos.get_indexer(rid.cat.categories.astype(str))
        pos = lookup[rid.cat.codes.to_numpy()]
    else:
        pos = run_pos.get_indexer(rid.astype(str).to_numpy())
    if (pos < 0).any():
        raise ResultsError("ops reference runs that are not in the runs table")
    return pos.astype(np.int64)


def _codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and the values they stand for (categoricals: without a copy)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy().astype(np.int64), np.asarray(col.cat.categories,
                                                                     dtype=object)
    codes, uniques = pd.factorize(col, use_na_sentinel=False)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _factorize_ints(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense codes 0..k-1 for integer keys (first-seen order) and each code's first row."""
    codes, _ = pd.factorize(keys, sort=False)
    # factorize numbers keys in first-seen order, so first occurrences come out in code order
    first = pd.Series(codes).drop_duplicates().index.to_numpy(np.int64)
    return codes.astype(np.int64), first


def group_codes(
    runs: pd.DataFrame, ops: pd.DataFrame, run_keys: Sequence[str], ops_keys: Sequence[str],
) -> tuple[np.ndarray, pd.DataFrame, np.ndarray, np.ndarray, np.ndarray, list]:
    """Each op's group as integer codes: (run codes, their key rows, each op's run
    position, each op's group, the first op of each group, per op-level key its
    (column, codes, uniques)). Shared by `summarise` and the interval code, so both
    form groups the same way."""
    run_codes, run_key_rows = _factorize_rows(runs[list(run_keys)].reset_index(drop=True))
    op_run = _run_positions(runs, ops)
    combined = run_codes[op_run]
    extra = []
    for col in ops_keys:
        codes, uniques = _codes(ops[col])
        combined = combined * (len(uniques) + 1) + codes
        extra.append((col, codes, uniques))
    group, first = _factorize_ints(combined)
    return run_codes, run_key_rows, op_run, group, first, extra


def fixed_duration_runs(runs: pd.DataFrame) -> np.ndarray:
    """Per run: whether it ran for a fixed duration (``loadgen_duration_s`` set), which
    makes its rate, not its time per op, what counts once in a throughput."""
    col = runs.get("loadgen_duration_s")
    if col is None:
        return np.zeros(len(runs), bool)
    d = pd.to_numeric(col, errors="coerce").to_numpy(np.float64)
    return ~np.isnan(d) & (d > 0)


def run_weighted(unit_group: np.ndarray, n_groups: int, ops: np.ndarray, wall_s: np.ndarray,
                 lat_sum: np.ndarray, n_err: np.ndarray, fixed_duration: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group, from its (group, run) units: throughput and goodput (ops/s) and mean
    latency (`lat_sum`'s unit), each run counting once (`intervals.run_scale`; a group is
    of fixed duration if all its runs are): the estimates whose intervals `summary_ci`
    and `queries` give."""
    from harness.analysis.stats.intervals import run_scale

    not_fixed = np.bincount(unit_group, weights=~fixed_duration, minlength=n_groups)
    scale = run_scale(ops, wall_s, (not_fixed == 0)[unit_group])
    num = np.bincount(unit_group, weights=scale * ops, minlength=n_groups)
    good = np.bincount(unit_group, weights=scale * (ops - n_err), minlength=n_groups)
    den = np.bincount(unit_group, weights=scale * wall_s, minlength=n_groups)
    has = ops > 0
    runs = np.bincount(unit_group[has], minlength=n_groups)
    means = np.bincount(unit_group[has], weights=lat_sum[has] / ops[has], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(den > 0, num / den, np.nan), np.where(den > 0, good / den, np.nan),
                np.where(runs > 0, means / runs, np.nan))


def op_begin_ns(ops: pd.DataFrame) -> np.ndarray:
    """When each op began for the user: its intended start in open loop (where
    `latency_ns` counts from), else its actual start; so end = begin + latency_ns."""
    start = ops["start_ns"].to_numpy(np.int64)
    if "intended_ns" not in ops.columns:
        return start
    intended = pd.to_numeric(ops["intended_ns"]).to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(np.isnan(intended), start, np.nan_to_num(intended).astype(np.int64))


def measured_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """The ops a summary counts: no warm-up, no redirect records (see the module doc)."""
    if "warmup" in ops.columns and ops["warmup"].any():
        ops = ops[~ops["warmup"].to_numpy(bool)]  # copies: only when there is warm-up
    redirect = (ops["status"] == "redirect").to_numpy(bool)
    if redirect.any():
        ops = ops[~redirect]  # attempts inside an op, not ops
    return ops


def summarise(loaded: Loaded, by: Sequence[str] | None = None) -> pd.DataFrame:
    """Summary statistics per group of `by` (default: experiment + grid parameters).

    Columns: the grouping columns, then `FULL_COLUMNS`. `loaded.ops` must hold the
    measured ops with ``op`` (if grouped on), ``start_ns``, ``latency_ns`` and ``status``.
    A named ``op`` or ``client`` groups ops-level; in the default grouping a grid
    parameter called ``op`` is the run's grid value (so runs without ops still count).
    A `Loaded` whose ops are a sample is refused (`numbers.summarise` reads its files).
    """
    _refuse_sample(loaded)
    runs, ops = loaded.runs, loaded.ops
    if by is None:
        by, ops_keys = default_by(loaded), []
    else:
        by = list(by)
        ops_keys = [c for c in by if c in OPS_LEVEL]
    _check_by(by, runs)
    ops = measured_ops(ops)
    run_keys = [c for c in by if c not in ops_keys]

    # Run-level group of every run, then carried to each op through its run's position.
    # Everything per op is integer codes: no strings are materialised per op.
    run_codes, run_key_rows, op_run, op_group, first, extra_codes = group_codes(
        runs, ops, run_keys, ops_keys)
    n_groups = len(first)
    group_rows = pd.DataFrame({"_run_group": run_codes[op_run[first]]})
    for col, codes, uniques in extra_codes:
        group_rows[col] = uniques[codes[first]]

    lat = ops["latency_ns"].to_numpy(np.int64)
    start = op_begin_ns(ops)
    status_codes, status_names = _codes(ops["status"])
    is_error = np.isin(status_codes, np.flatnonzero(np.isin(status_names, ERROR_STATUSES)))
    is_miss = np.isin(status_codes, np.flatnonzero(status_names == "miss"))

    # Wall time per unit = (run, group): ops of one group inside one run.
    unit, unit_first = _factorize_ints(op_group.astype(np.int64) * len(runs) + op_run)
    unit_start = pd.Series(start).groupby(unit).min().to_numpy()
    unit_end = pd.Series(start + lat).groupby(unit).max().to_numpy()
    unit_group = op_group[unit_first]
    unit_wall_ns = (unit_end - unit_start).astype(np.float64)

    n_ops = np.bincount(op_group, minlength=n_groups).astype(np.int64)
    wall_ns = np.bincount(unit_group, weights=unit_wall_ns, minlength=n_groups)
    n_units = np.bincount(unit_group, minlength=n_groups)
    n_err = np.bincount(op_group, weights=is_error, minlength=n_groups)
    n_miss = np.bincount(op_group, weights=is_miss, minlength=n_groups)
    # Each run counts once in the throughput and the mean (`run_weighted`).
    unit_ops = np.bincount(unit).astype(np.float64)
    unit_lat = np.bincount(unit, weights=lat.astype(np.float64))
    unit_err = np.bincount(unit, weights=is_error)
    tput, good, lat_mean = run_weighted(
        unit_group, n_groups, unit_ops, unit_wall_ns / 1e9, unit_lat, unit_err,
        fixed_duration_runs(runs)[op_run[unit_first]])

    # Percentiles: one stable radix sort by group, then one partition per group slice.
    quant = np.full((n_groups, len(_QUANTILES)), np.nan)
    lat_max = np.full(n_groups, np.nan)
    order = np.argsort(op_group, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(n_ops)])
    sorted_lat = lat[order]
    for g in range(n_groups):
        chunk = sorted_lat[bounds[g] : bounds[g + 1]]
        if chunk.size:
            quant[g] = np.quantile(chunk, _QUANTILES)
            lat_max[g] = chunk.max()

    with np.errstate(invalid="ignore", divide="ignore"):
        table = pd.DataFrame(
            {
                "ops": n_ops,
                "wall_s": wall_ns / 1e9,
                "throughput_ops_s": tput,
                "goodput_ops_s": good,
                "latency_mean_ms": lat_mean / _NS_PER_MS,
                "latency_p50_ms": quant[:, 0] / _NS_PER_MS,
                "latency_p90_ms": quant[:, 1] / _NS_PER_MS,
                "latency_p99_ms": quant[:, 2] / _NS_PER_MS,
                "latency_p999_ms": quant[:, 3] / _NS_PER_MS,
                "latency_max_ms": lat_max / _NS_PER_MS,
                "error_rate": n_err / n_ops,
                "miss_rate": n_miss / n_ops,
            }
        )
    keys = group_rows.reset_index(drop=True)
    run_group = keys.pop("_run_group").to_numpy(np.int64) if n_groups else np.zeros(0, np.int64)
    for col in run_keys:
        keys[col] = run_key_rows[col].to_numpy()[run_group]
    table.insert(0, "runs", n_units)

    if not ops_keys:
        # Re-index on every run-level group, so groups whose runs have no measured ops
        # (failed early) still appear, with their runs counted.
        full = pd.DataFrame(np.nan, index=range(len(run_key_rows)), columns=table.columns)
        full.iloc[run_group] = table.to_numpy()
        full["ops"] = full["ops"].fillna(0).astype(np.int64)
        full["runs"] = np.bincount(run_codes, minlength=len(full)).astype(np.int64)
        keys = run_key_rows[run_keys].reset_index(drop=True)
        table = full
    table = pd.concat([keys, table.reset_index(drop=True)], axis=1)
    table = table[[*by, *FULL_COLUMNS]]
    return _sorted(table, by)


def _sorted(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    if not by or table.empty:
        return table.reset_index(drop=True)
    try:
        return table.sort_values(by, kind="stable", na_position="last").reset_index(drop=True)
    except TypeError:
        # Mixed types in one column (e.g. int and str across experiments): sort as text.
        return (
            table.sort_values(by, key=lambda s: s.astype(str), kind="stable")
            .reset_index(drop=True)
        )


def _refuse_sample(loaded: Loaded) -> None:
    """Counting a sample's ops would understate every count and rate: say where to go."""
    if loaded.sampled:
        raise ResultsError(
            f"the ops held are one in {loaded.sample_every} of each run (load(max_ops=)); "
            "summarise them with harness.analysis.data.numbers, which reads every op from the "
            "files")


def run_summary(loaded: Loaded, *, by_op: bool = False) -> pd.DataFrame:
    """Per-run statistics (one row per run, or per run and op) with the run's columns."""
    by = ["run_id", "op"] if by_op else ["run_id"]
    return with_run_columns(loaded, summarise(loaded, by), by_op=by_op)


def with_run_columns(loaded: Loaded, stats: pd.DataFrame, *, by_op: bool) -> pd.DataFrame:
    """`stats` per run (``run_id``, and ``op`` if `by_op`) with the run's columns."""
    run_cols = [c for c in loaded.runs.columns if c != "run_dir"]
    merged = loaded.runs[run_cols].merge(stats, on="run_id", how="left", suffixes=("", "_ops"))
    if by_op and "op_ops" in merged.columns:
        # The ops-level op is what the row is about; the grid op (if any) equals it.
        merged["op"] = merged.pop("op_ops")
    return merged
