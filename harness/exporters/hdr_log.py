"""`harness export hdr`: raw results -> HdrHistogram interval logs, one per group.

The log is HdrHistogram's own interchange format (``HistogramLogWriter``, format
version 1.3), which its readers in Java, C, Go, Python and JavaScript, HdrHistogram's
``HistogramLogProcessor`` and plotters read::

    #[Histogram log format version 1.3]
    #[StartTime: 1700000000.000 (seconds since epoch), 2023-11-14T22:13:20+00:00]
    #[BaseTime: 1700000000.000 (seconds since epoch)]
    "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
    0.000,1.000,3.263,HISTFAAAA...

Values are latencies in **nanoseconds** (so ``HistogramLogProcessor``'s default output
unit ratio, 1e6, prints milliseconds), 3 significant digits. An op goes into the interval
in which it ended (begin + latency; begin is the intended start in open loop, as in
`harness summary`); measured ops only (no warm-up), every status except ``redirect``
(attempts inside an op, not ops). Runs of a group follow each other on the time axis:
at their UTC start where the manifest states it, else (imported runs) each right
after the previous one. Timestamps are seconds from the first run's start (BaseTime).

Groups: ``--by`` run-level columns (parameters, ``experiment``, ``run_id``, ...) or
``op`` / ``client`` as in `harness summary`; default ``experiment`` plus every grid
parameter. Each group's log is ``<out>/<key=value_...>.hlog``; ``<out>/index.csv`` lists
the groups with their file, runs and ops.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from harness import paths
from harness.errors import ExportError
from harness.results.manifest import utc_seconds

SIGNIFICANT_DIGITS = 3
#: log2 of half the sub-bucket count for 3 digits: 2048 sub-buckets (HdrHistogram's layout).
_HALF_MAGNITUDE = int(np.ceil(np.log2(2 * 10**SIGNIFICANT_DIGITS))) - 1
_NS_PER_MS = 1e6
LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'


def bucket_floor(values_ns: np.ndarray) -> np.ndarray:
    """Each value's bucket's lowest equivalent value (HdrHistogram, 3 digits, unit 1):
    recording it records the same bucket as the value, but there are few distinct ones."""
    v = np.asarray(values_ns, np.int64)
    _, exp = np.frexp(np.maximum(v, 1).astype(np.float64))  # v = m * 2**exp, m in [0.5, 1)
    shift = np.maximum(exp.astype(np.int64) - 1 - _HALF_MAGNITUDE, 0)
    return (v >> shift) << shift


def _file_name(keys: dict[str, object]) -> str:
    text = "_".join(f"{k}={v}" for k, v in keys.items()) or "all"
    name = re.sub(r"[^A-Za-z0-9_.=+-]+", "-", text).strip("-.")
    if len(name) > 120:  # long grids: keep it readable, and unique by a digest
        name = f"{name[:100]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return f"{name}.hlog"


def interval_lines(ends_ns: np.ndarray, latency_ns: np.ndarray, interval_s: float) -> list[str]:
    """The interval lines of ops ending at `ends_ns` (ns from the log's base time)."""
    from hdrh.histogram import HdrHistogram  # imported here: only exports need it

    if not len(latency_ns):
        return []
    step_ns = interval_s * 1e9
    idx = np.floor_divide(ends_ns, step_ns).astype(np.int64)
    values = bucket_floor(latency_ns)
    highest = max(int(latency_ns.max()), 2_000)
    pairs, counts = np.unique(np.stack([idx, values]), axis=1, return_counts=True)
    lines = []
    for i in np.unique(pairs[0]):
        hist = HdrHistogram(1, highest, SIGNIFICANT_DIGITS)
        mine = pairs[0] == i
        for value, count in zip(pairs[1][mine], counts[mine], strict=True):
            hist.record_value(int(value), int(count))
        peak = float(latency_ns[idx == i].max()) / _NS_PER_MS
        lines.append(f"{i * interval_s:.3f},{interval_s:.3f},{peak:.3f},"
                     f"{hist.encode().decode('ascii')}")
    return lines


def _group_log(runs: pd.DataFrame, ops: pd.DataFrame, interval_s: float) -> list[str]:
    """Header and interval lines of one group's log (its runs one after another)."""
    from harness.analysis.data.summary import op_begin_ns

    begin = op_begin_ns(ops)
    end = begin + ops["latency_ns"].to_numpy(np.int64)
    run_ids = ops["run_id"].astype(str).to_numpy()
    starts = {str(r): utc_seconds(s) for r, s in zip(runs["run_id"], runs["started_utc"],
                                                     strict=True)}
    order = sorted(set(run_ids), key=lambda r: (starts[r] is None, starts[r] or 0, r))
    known = [starts[r] for r in order if starts[r] is not None]
    base_s = min(known) if known else None
    offset_ns = np.zeros(len(ops), np.int64)
    cursor_ns = 0
    for run in order:
        mine = run_ids == run
        first = int(begin[mine].min())
        if starts[run] is not None:
            shift = round((starts[run] - base_s) * 1e9) - min(first, 0)
        else:  # no stated start: right after the previous run
            shift = cursor_ns - first
        offset_ns[mine] = shift
        cursor_ns = max(cursor_ns, int(end[mine].max()) + shift)
    lines = ["#[Histogram log format version 1.3]"]
    if base_s is not None:
        iso = datetime.fromtimestamp(base_s, UTC).isoformat()
        lines += [f"#[StartTime: {base_s:.3f} (seconds since epoch), {iso}]",
                  f"#[BaseTime: {base_s:.3f} (seconds since epoch)]"]
    lines.append(LEGEND)
    return lines + interval_lines(end + offset_ns, ops["latency_ns"].to_numpy(np.int64),
                                  interval_s)


def export_hdr(raw_dir: Path, out: Path, *, by: Sequence[str] | None = None,
               experiments: Sequence[str] | None = None, interval_s: float = 1.0,
               **_: object) -> list[Path]:
    """Write one interval log per group of `by` under `out`, and `out/index.csv`."""
    from harness.analysis.data.load import load
    from harness.analysis.data.summary import OPS_LEVEL, available_columns, default_by

    if not interval_s > 0:
        raise ExportError(f"--interval {interval_s}: must be a positive number of seconds")
    # Every run as recorded (not pooled, as summary and compare are): unchanged here.
    loaded = load(Path(raw_dir), experiments=list(experiments) if experiments else None,
                  pool=False,
                  columns=["op", "client", "start_ns", "latency_ns", "intended_ns", "status"])
    runs, ops = loaded.runs, loaded.ops
    if runs.empty:
        raise ExportError(f"{raw_dir}: no runs to export")
    keys = list(by) if by else default_by(loaded)
    unknown = [k for k in keys if k not in available_columns(runs)]
    if unknown:
        raise ExportError(f"unknown grouping column {unknown[0]!r}; available: "
                          f"{', '.join(available_columns(runs))}")
    ops = ops[(ops["status"] != "redirect").to_numpy(bool)]
    run_keys = [k for k in keys if k not in OPS_LEVEL or (by is None and k in runs.columns)]
    frame = ops.reset_index(drop=True)
    pos = pd.Index(runs["run_id"].astype(str)).get_indexer(frame["run_id"].astype(str))
    for k in run_keys:  # the run's value, carried to each of its ops
        frame[f"_run_{k}"] = runs[k].to_numpy()[pos]
    group_cols = [f"_run_{k}" if k in run_keys else k for k in keys]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written, index = [], []
    for values, group in frame.groupby(group_cols, dropna=False, sort=True, observed=True):
        values = values if isinstance(values, tuple) else (values,)
        label = dict(zip(keys, values, strict=True))
        path = out / _file_name(label)
        mine = runs[runs["run_id"].astype(str).isin(set(group["run_id"].astype(str)))]
        paths.write_new(path, "\n".join(_group_log(mine, group, interval_s)) + "\n")
        written.append(path)
        index.append({**label, "file": path.name, "runs": len(mine), "ops": len(group)})
    with paths.created(out / "index.csv", "w", newline="") as f:
        pd.DataFrame(index).to_csv(f, index=False)
    return [*written, out / "index.csv"]
