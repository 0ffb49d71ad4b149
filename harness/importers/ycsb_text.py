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

The numbers of every op that ran are checked (`harness.importers.numbers`): a negative
or fractional count, a zero or negative RunTime, latency figures that are negative, not
finite or out of order are an error naming the line. An op with no operations is
nothing measured (YCSB prints NaN figures for it) and is passed over.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Any

from harness.importers import numbers
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
_DIGITS = re.compile(r"^\d+$", re.ASCII)  # str.isdigit() takes '²', which int() refuses
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
    """The value as a float (NaN and inf too: YCSB prints NaN for an op that never ran);
    None when it is not a number at all."""
    try:
        return float(text)
    except ValueError:
        return None


def command_params(line: str, where: str) -> dict[str, Any]:
    """threads / target / workload from YCSB's ``Command line: ...`` echo; a number
    there is checked (at least one thread; target 0 is YCSB's "no target")."""
    try:
        words = shlex.split(line.split("Command line:", 1)[1])
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    for flag, key, least in (("-threads", "threads", 1), ("-target", "target", 0),
                             ("-P", "workload", None)):
        if flag in words[:-1]:
            value = words[words.index(flag) + 1]
            if least is not None and _DIGITS.match(value):
                out[key] = numbers.count(value, where, flag, least=least, most=None)
            else:
                out[key] = Path(value).name
    return out


#: measurement -> field -> (the value as written, its line)
Fields = dict[str, dict[str, tuple[str, int]]]


def _latency_key(key: str) -> str | None:
    """A latency figure's name (``min``, ``max``, ``mean``, ``p<q>``); None for others."""
    if key in ("MinLatency(us)", "Min"):
        return "min"
    if key in ("MaxLatency(us)", "Max"):
        return "max"
    if key in ("AverageLatency(us)", "Average"):
        return "mean"
    if m := (_PERCENTILE.match(key) or _RAW_PERCENTILE.match(key)):
        return f"p{float(m.group(1)):g}"
    return None


def latency_us(name: str, fields: dict[str, tuple[str, int]], path: Path) -> dict[str, float]:
    """A measured op's latency figures (µs, under `_latency_key` names), checked: finite,
    not negative, min <= percentiles <= max, mean within them; else an error naming the
    line."""
    figures: dict[str, float] = {}
    places: dict[str, str] = {}
    for key, (text, line) in fields.items():
        if short := _latency_key(key):
            places[short] = numbers.at(path, line)
            figures[short] = numbers.amount(text, places[short], f"[{name}] latency (us) "
                                                                 f"{short}")
    numbers.check_stated(figures, str(path), f"[{name}] latency (us)", places)
    return figures


def stated_ms(figures_us: dict[str, float]) -> dict[str, float]:
    """Checked latency figures (µs) -> ms under summary keys (the mean is not stated:
    it is the records' own)."""
    return {k: v / 1000 for k, v in figures_us.items() if k != "mean"}


def op_count(name: str, fields: dict[str, tuple[str, int]], path: Path) -> int | None:
    """The measurement's ``Operations`` (``Total Operations`` in raw output), checked;
    None when it has no such line."""
    key = "Operations" if "Operations" in fields else "Total Operations"
    if key not in fields:
        return None
    text, line = fields[key]
    return numbers.count(text, numbers.at(path, line), f"[{name}] {key}", least=0)


def return_counts(name: str, fields: dict[str, tuple[str, int]], path: Path) -> dict[str, int]:
    """``Return=<code>`` counts, checked."""
    return {k.split("=", 1)[1]: numbers.count(text, numbers.at(path, line), f"[{name}] {k}",
                                              least=0)
            for k, (text, line) in fields.items() if k.startswith("Return=")}


def runtime_ns(fields: Fields, path: Path) -> float | None:
    """``[OVERALL], RunTime(ms)`` in ns; a zero or negative run time is an error naming
    the line (ops over no time cannot give a rate), a missing one None."""
    if "RunTime(ms)" not in fields.get("OVERALL", {}):
        return None
    text, line = fields["OVERALL"]["RunTime(ms)"]
    return numbers.amount(text, numbers.at(path, line), "[OVERALL] RunTime(ms)",
                          positive=True) * 1e6


def finite_figures(fields: Fields) -> dict[str, dict[str, float]]:
    """The figures as stated, for the manifest: only the finite ones (NaN is YCSB's "no
    ops", and JSON has no place for it)."""
    out: dict[str, dict[str, float]] = {}
    for name, block in fields.items():
        for key, (text, _) in block.items():
            value = _number(text)
            if value is not None and math.isfinite(value):
                out.setdefault(name, {})[key] = value
    return out


def read_measurements(path: Path, noise: Noise) -> tuple[Fields, dict[str, Any], int | None]:
    """{measurement: {field: (value text, line)}}, params from a command line, first data
    line."""
    blocks: Fields = {}
    params: dict[str, Any] = {}
    first: int | None = None
    for no, line in enumerate(read_lines(path), 1):
        if "Command line:" in line:
            params.update(command_params(line, numbers.at(path, no)))
        m = _LINE.match(line)
        if m is None or _number(m.group(3)) is None:
            if not CHATTER.match(line):
                noise.skip(no, line)
            continue
        first = first or no
        blocks.setdefault(m.group(1).strip(), {})[m.group(2).strip()] = (m.group(3), no)
    return blocks, params, first


def _records(name: str, fields: dict[str, tuple[str, int]], path: Path,
             wall_ns: float | None, notes: list[str]) -> tuple[list[Records], dict]:
    """The op's records and its stated latency figures (ms)."""
    parsed = op_name(name)
    if parsed is None:
        return [], {}
    count = op_count(name, fields, path)
    if count is None:
        notes.append(f"{name}: no Operations line (cut off?); not imported")
        return [], {}
    if count == 0:  # nothing measured: YCSB prints NaN and sentinel figures for it
        return [], {}
    op, status = parsed
    figures = latency_us(name, fields, path)
    mean_us = figures.get("mean")
    if mean_us is None:
        notes.append(f"{name}: {count} ops without an average latency; not imported")
        return [], {}
    returns = {code: n for code, n in return_counts(name, fields, path).items() if n}
    parts = {status: count}
    if returns and sum(returns.values()) == count:
        parts = {}
        for code, n in returns.items():
            st = "error" if status == "error" else STATUS_OF_RETURN.get(code, "error")
            parts[st] = parts.get(st, 0) + n
    elif returns:
        notes.append(f"{name}: Return= counts ({sum(returns.values())}) differ from "
                     f"Operations ({count}); statuses not split")
    return ([Records.aggregate(op, n, mean_us * _NS_PER_US * n, wall_ns=wall_ns, status=st)
             for st, n in parts.items()], stated_ms(figures))


class YcsbText:
    name = NAME
    description = "YCSB's text output ([OVERALL], [READ], ... lines; aggregates per op)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        blocks, params, first = read_measurements(path, noise)
        result.skipped = noise.lines
        wall_ns = runtime_ns(blocks, path)
        notes = ["aggregated records: the summary shows YCSB's stated percentiles for this "
                 "run (per op)"]
        if wall_ns is None:
            notes.append("no [OVERALL] RunTime(ms): records laid back to back, so the "
                         "throughput is not YCSB's")
        records: list[Records] = []
        stated: dict[str, dict[str, float]] = {}
        for name, fields in blocks.items():
            recs, figures_ms = _records(name, fields, path, wall_ns, notes)
            records += recs
            if recs and recs[0].status != "error":
                stated[recs[0].op] = figures_ms
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
            extra={"stated": finite_figures(blocks), "stated_latency_ms": stated,
                   "latency_source": "aggregate"},
            line=first,
        ))
        return result
