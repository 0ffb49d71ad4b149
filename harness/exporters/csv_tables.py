"""`harness export csv`: raw results -> CSV tables for spreadsheets and other tools.

``--per run`` (default): one row per run and op: the run's columns (identity, every
parameter, status, source) and `harness.analysis.data.summary.FULL_COLUMNS` (ops, wall
time, throughput, mean, p50/p90/p99/p99.9/max latency in ms, error and miss rates), the
same figures `harness summary` prints, stated percentiles included for imported runs
without a distribution. ``--by`` replaces run and op by other grouping columns.

``--per op``: one row per measured op (warm-up excluded), every column of ops.parquet
(``client, op, start_ns, latency_ns, intended_ns, status, bytes``) after the run's
``experiment``, ``run_id``, ``config_id`` and ``repetition``; written run by run, so
memory holds one run at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness import paths
from harness.errors import ExportError

PER = ("run", "op")
RUN_ID_COLUMNS = ("experiment", "run_id", "config_id", "repetition")


def _per_run(raw_dir: Path, out: Path, by: Sequence[str] | None,
             experiments: Sequence[str] | None) -> None:
    from harness.analysis.data import stated
    from harness.analysis.data.load import load
    from harness.analysis.data.summary import FULL_COLUMNS, available_columns, summarise

    # Every run as recorded, as before pooling came to summary/compare/report: an export
    # is the raw runs, each row with its status (pooling them is the reader's choice).
    loaded = load(raw_dir, experiments=experiments, pool=False,
                  columns=["op", "client", "start_ns", "latency_ns", "intended_ns", "status"])
    keys = list(by) if by else ["run_id", "op"]
    unknown = [k for k in keys if k not in available_columns(loaded.runs)]
    if unknown:
        raise ExportError(f"unknown grouping column {unknown[0]!r}; available: "
                          f"{', '.join(available_columns(loaded.runs))}")
    table = stated.overlay(summarise(loaded, keys), loaded, keys)
    if not by:  # the runs' own columns beside their figures
        run_cols = [c for c in loaded.runs.columns if c not in ("run_dir", "op")]
        table = loaded.runs[run_cols].merge(table, on="run_id", how="right")
        table = table[[*run_cols, "op", *FULL_COLUMNS]]
    with paths.created(out, "w", newline="") as f:
        table.to_csv(f, index=False)


def _per_op(raw_dir: Path, out: Path, experiments: Sequence[str] | None) -> None:
    import pyarrow.parquet as pq

    from harness.analysis.data.load import load_ops, load_runs
    from harness.results import KEY_FIELD, OPS_FILE, OPS_SCHEMA

    runs = load_runs(raw_dir, experiments=experiments)
    columns = [c for c in OPS_SCHEMA.names if c != "warmup"]
    # Runs with `run.record_keys` carry each op's key: so does the export (empty elsewhere).
    if any(KEY_FIELD.name in pq.read_schema(Path(d) / OPS_FILE).names for d in runs["run_dir"]):
        columns.append(KEY_FIELD.name)
    with paths.created(out, "w", newline="") as f:
        f.write(",".join([*RUN_ID_COLUMNS, *columns]) + "\n")
        for i in range(len(runs)):
            ops = load_ops(runs.iloc[[i]], columns)
            if ops.empty:
                continue
            ops = ops.drop(columns=["run_id"])
            for col in reversed(RUN_ID_COLUMNS):
                ops.insert(0, col, runs[col].iat[i])
            ops.to_csv(f, index=False, header=False)


def export_csv(raw_dir: Path, out: Path, *, by: Sequence[str] | None = None,
               experiments: Sequence[str] | None = None, per: str = "run",
               **_: object) -> list[Path]:
    """Write the table to `out` (a .csv file); returns [out]."""
    if per not in PER:
        raise ExportError(f"--per {per!r}: choose one of {', '.join(PER)}")
    if per == "op" and by:
        raise ExportError("--by groups the per-run table; --per op writes every op")
    out = Path(out)
    if out.is_dir():
        out = out / f"{'runs' if per == 'run' else 'ops'}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    exps = list(experiments) if experiments else None
    if per == "run":
        _per_run(Path(raw_dir), out, by, exps)
    else:
        _per_op(Path(raw_dir), out, exps)
    return [out]
