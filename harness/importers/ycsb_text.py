"""`ycsb`: YCSB's text output (its ``TextMeasurementsExporter``, the default exporter).

Lines, as `site.ycsb.measurements.exporter.TextMeasurementsExporter` writes them
(``"[" + metric + "], " + measurement + ", " + value``)::

    [OVERALL], RunTime(ms), 10110
    [OVERALL], Throughput(ops/sec), 989.1196834817012
    [READ], Operations, 5012
    [READ], AverageLatency(us), 350.2
    [READ], MinLatency(us), 102
    [READ], MaxLatency(us), 12031
    [READ], 95thPercentileLatency(us), 620          (histogram, hdrhistogram)
    [READ], 99.9PercentileLatency(us), 3011         (hdrhistogram.percentiles)
    [READ], Return=OK, 4990
    [READ], Return=NOT_FOUND, 22
    [READ], Total Operations, 5012                  (measurementtype=raw)
    [READ], p99, 2900                               (raw: Average, Min, Max, p1..p99.99)

Measurement names: READ, UPDATE, INSERT, SCAN, READ-MODIFY-WRITE, DELETE, CLEANUP (the
DB's cleanup, not a workload op: kept as stated only), ``<OP>-FAILED`` (failed ops,
with ``reportlatencyforeacherror``) and ``Intended-<OP>`` (latency from the intended
start, with ``measurement.interval=both``: kept as stated only, the same ops again).
Status lines printed during the run (``... sec: N operations; ...``), the command line
and other client chatter are skipped as noise. Latencies are microseconds.

One run per file: per op, ``Operations`` aggregated records of the average latency,
split by ``Return=`` code (OK, BATCHED_OK -> ok, NOT_FOUND -> miss, any other -> error;
the same mean for all, since YCSB does not state it per code), spread over RunTime so the
throughput is YCSB's. The records have no distribution: the stated min/percentiles/max
go to ``extra.stated_latency_ms`` (ms), which `harness summary` shows for the run.
Params: ``op`` (the ops present, e.g. ``read+update``), and ``threads``, ``target``,
``workload`` where a ``Command line:`` is in the file.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from harness.importers.base import (
    ImportOptions,
    ImportResult,
    Noise,
    ParsedRun,
    Records,
    nothing_found,
    read_lines,
    slug,
)

NAME = "ycsb"
_NS_PER_US = 1e3
_LINE = re.compile(r"^\s*\[([^\]]+)\],\s*([^,]+?),\s*(\S+)\s*$")
#: Lines YCSB prints that carry nothing for the import (status lines, start-up chatter).
CHATTER = re.compile(r"^\s*(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d+ \d+ sec: |YCSB Client |"
                      r"Loading workload|Starting test|DBWrapper: |Command line: |"
                      r"\*\*\*|Raw data measurement: )")
_PERCENTILE = re.compile(r"^(\d+(?:\.\d+)?)(?:st|nd|rd|th)?PercentileLatency\(us\)$")
_RAW_PERCENTILE = re.compile(r"^p(\d+(?:\.\d+)?)$")
STATUS_OF_RETURN = {"OK": "ok", "BATCHED_OK": "ok", "NOT_FOUND": "miss"}
NOT_OPS = ("OVERALL", "CLEANUP")


def op_name(measurement: str) -> tuple[str, str] | None:
    """YCSB measurement name -> (op, status); None for names that are not ops."""
    if measurement.upper() in NOT_OPS or measurement.upper().startswith(
            ("TOTAL_GC", "INTENDED-")):
        return None
    if measurement.upper().endswith("-FAILED"):
        return slug(measurement[: -len("-FAILED")]), "error"
    return slug(measurement), "ok"


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def command_params(line: str) -> dict[str, Any]:
    """threads / target / workload from YCSB's ``Command line: ...`` echo."""
    try:
        words = shlex.split(line.split("Command line:", 1)[1])
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    for flag, key in (("-threads", "threads"), ("-target", "target"), ("-P", "workload")):
        if flag in words[:-1]:
            value = words[words.index(flag) + 1]
            out[key] = int(value) if value.isdigit() else Path(value).name
    return out


def stated_ms(figures: dict[str, float]) -> dict[str, float]:
    """A measurement's latency figures (µs, YCSB's names) -> ms under summary keys."""
    out: dict[str, float] = {}
    for key, value in figures.items():
        if key in ("MinLatency(us)", "Min"):
            out["min"] = value / 1000
        elif key in ("MaxLatency(us)", "Max"):
            out["max"] = value / 1000
        elif m := (_PERCENTILE.match(key) or _RAW_PERCENTILE.match(key)):
            out[f"p{float(m.group(1)):g}"] = value / 1000
    return out


def read_measurements(path: Path, noise: Noise) -> tuple[dict[str, dict[str, float]],
                                                          dict[str, Any], int | None]:
    """{measurement: {field: value}}, params from a command line, first data line."""
    blocks: dict[str, dict[str, float]] = {}
    params: dict[str, Any] = {}
    first: int | None = None
    for no, line in enumerate(read_lines(path), 1):
        if "Command line:" in line:
            params.update(command_params(line))
        m = _LINE.match(line)
        value = _number(m.group(3)) if m else None
        if m is None or value is None:
            if not CHATTER.match(line):
                noise.skip(no, line)
            continue
        first = first or no
        blocks.setdefault(m.group(1).strip(), {})[m.group(2).strip()] = value
    return blocks, params, first


def _records(name: str, fig: dict[str, float], wall_ns: float | None,
             notes: list[str]) -> list[Records]:
    parsed = op_name(name)
    count = fig.get("Operations", fig.get("Total Operations"))
    mean_us = fig.get("AverageLatency(us)", fig.get("Average"))
    if parsed is None or not count or count < 1 or count != int(count):
        return []
    op, status = parsed
    if mean_us is None or mean_us < 0:
        notes.append(f"{name}: {int(count)} ops without an average latency; not imported")
        return []
    returns = {k.split("=", 1)[1]: int(v) for k, v in fig.items()
               if k.startswith("Return=") and v >= 1 and v == int(v)}
    parts = {status: int(count)}
    if returns and sum(returns.values()) == int(count):
        parts = {}
        for code, n in returns.items():
            st = "error" if status == "error" else STATUS_OF_RETURN.get(code, "error")
            parts[st] = parts.get(st, 0) + n
    elif returns:
        notes.append(f"{name}: Return= counts ({sum(returns.values())}) differ from "
                     f"Operations ({int(count)}); statuses not split")
    return [Records.aggregate(op, n, mean_us * _NS_PER_US * n, wall_ns=wall_ns, status=st)
            for st, n in parts.items()]


class YcsbText:
    name = NAME
    description = "YCSB's text output ([OVERALL], [READ], ... lines; aggregates per op)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        blocks, params, first = read_measurements(path, noise)
        result.skipped = noise.lines
        overall = blocks.get("OVERALL", {})
        runtime_ms = overall.get("RunTime(ms)")
        wall_ns = runtime_ms * 1e6 if runtime_ms and runtime_ms > 0 else None
        notes = ["aggregated records: the summary shows YCSB's stated percentiles for this "
                 "run (per op)"]
        if wall_ns is None:
            notes.append("no [OVERALL] RunTime(ms): records laid back to back, so the "
                         "throughput is not YCSB's")
        records: list[Records] = []
        stated: dict[str, dict[str, float]] = {}
        for name, fig in blocks.items():
            recs = _records(name, fig, wall_ns, notes)
            records += recs
            if recs and recs[0].status != "error":
                stated[recs[0].op] = stated_ms(fig)
        if not records:
            raise nothing_found(path, NAME)
        intended = sorted(n for n in blocks if n.upper().startswith("INTENDED-"))
        if intended:
            notes.append(f"{', '.join(intended)}: the same ops timed from their intended "
                         "start (measurement.interval=both); kept as stated only")
        ops = "+".join(sorted({r.op for r in records}))
        result.runs.append(ParsedRun(
            records=records,
            grid_point={"op": ops},
            params=params,
            notes=notes,
            extra={"stated": blocks, "stated_latency_ms": stated,
                   "latency_source": "aggregate"},
            line=first,
        ))
        return result
