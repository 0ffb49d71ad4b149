"""`ycsb-raw`: YCSB's ``measurementtype=raw`` output: one line per op, exact.

As `site.ycsb.measurements.OneMeasurementRaw` writes it (to stdout, or to
``measurement.raw.output_file``), per measurement a header then one line per op::

    READ latency raw data: op, timestamp(ms), latency(us)
    READ,1538020335435,285
    READ,1538020335436,190

``timestamp`` is ``System.currentTimeMillis()`` when the op was measured, i.e. when it
ended; the op's start is taken as timestamp - latency (so it is good to about a
millisecond), counted from the earliest start in the file. The summary the exporter
prints after the raw lines (``[READ], Total Operations, N``, ``[READ], p99, ...``,
``[OVERALL], RunTime(ms), ...``, ``[READ], Return=OK, N``) is read as stated figures.

One run per file with every op's exact latency (measured records, no aggregation):
``<OP>-FAILED`` lines get status ``error``; ``Intended-<OP>`` lines (the same ops timed
from their intended start, ``measurement.interval=both``) are not imported twice: they
are counted in a note. YCSB does not print which op got which ``Return=`` code; where
codes other than OK were returned, the note says how many. Params as for ``ycsb``.
The summary of each op with records is checked as ``ycsb`` checks it, and a timestamp
too far from the others to lay out in int64 ns is an error naming its line.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from harness.importers import numbers
from harness.importers.base import (
    ImportOptions,
    ImportResult,
    Noise,
    ParsedRun,
    Records,
    nothing_found,
    read_lines,
)
from harness.importers.ycsb_text import (
    CHATTER,
    Fields,
    command_params,
    finite_figures,
    latency_us,
    op_name,
    return_counts,
    runtime_ns,
    stated_ms,
)

NAME = "ycsb-raw"
_HEADER = re.compile(r"^\s*(\S+) latency raw data: op, timestamp\(ms\), latency\(us\)\s*$")
_POINT = re.compile(r"^\s*([A-Za-z][\w-]*),(\d{1,15}),(\d{1,12})\s*$")
_SUMMARY = re.compile(r"^\s*\[([^\]]+)\],\s*([^,]+?),\s*(-?[\d.]+(?:E-?\d+)?)\s*$")
_NS_PER_US = 1e3
#: Start times are int64 ns from the earliest: a wider span is a damaged timestamp.
_MAX_SPAN_US = 2**62 // 1000
_US_PER_YEAR = 365.25 * 86400e6


class YcsbRaw:
    name = NAME
    description = "YCSB measurementtype=raw output (one line per op: exact latencies)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        # (op, status) -> (end timestamps ms, latencies us, line numbers)
        points: dict[tuple[str, str], tuple[list[int], list[int], list[int]]] = {}
        intended = 0
        blocks: Fields = {}
        params: dict = {}
        first: int | None = None
        for no, line in enumerate(read_lines(path), 1):
            if m := _POINT.match(line):
                name = m.group(1)
                if name.upper().startswith("INTENDED-"):
                    intended += 1
                    continue
                parsed = op_name(name)
                if parsed is None:
                    noise.skip(no, line)
                    continue
                first = first or no
                ts, lat, lines = points.setdefault(parsed, ([], [], []))
                ts.append(int(m.group(2)))  # at most 15 digits: the pattern says so
                lat.append(int(m.group(3)))
                lines.append(no)
            elif m := _SUMMARY.match(line):
                blocks.setdefault(m.group(1).strip(), {})[m.group(2).strip()] = (m.group(3), no)
            elif "Command line:" in line:
                params.update(command_params(line, numbers.at(path, no)))
            elif not (_HEADER.match(line) or CHATTER.match(line)):
                noise.skip(no, line)
        result.skipped = noise.lines
        if not points:
            raise nothing_found(path, NAME)
        runtime_ns(blocks, path)  # stated only here, but a zero run time is damage
        # Starts in µs since the epoch (end - latency; 15-digit ms * 1000 fits int64),
        # then ns from the earliest.
        begins = {key: np.asarray(ts, np.int64) * 1000 - np.asarray(lat, np.int64)
                  for key, (ts, lat, _) in points.items()}
        _check_span(begins, points, path)
        t0 = min(int(b.min()) for b in begins.values())
        notes: list[str] = ["exact per-op latencies (YCSB raw); start = end timestamp "
                            "(ms) - latency"]
        if intended:
            notes.append(f"{intended} Intended-* lines (the same ops timed from their "
                         "intended start) not imported")
        records: list[Records] = []
        for (op, status), (_ts, lat, _) in points.items():
            records.append(Records.measured(op, np.asarray(lat, np.float64) * _NS_PER_US,
                                            start_ns=(begins[(op, status)] - t0) * 1000,
                                            status=status))
        stated: dict[str, dict[str, float]] = {}
        for name, fields in blocks.items():
            parsed = op_name(name)
            if parsed not in points:
                continue  # no records of it (YCSB prints NaN for such): kept as stated only
            figures = latency_us(name, fields, path)
            returns = {code: n for code, n in return_counts(name, fields, path).items()
                       if n and code not in ("OK", "BATCHED_OK")}
            if parsed[1] != "ok":
                continue
            stated[parsed[0]] = stated_ms(figures)
            if returns:
                notes.append(f"{name}: {sum(returns.values())} ops returned "
                             f"{', '.join(returns)}; which ones is not recorded, so all "
                             "are status ok")
        result.runs.append(ParsedRun(
            records=records,
            grid_point={"op": "+".join(sorted({r.op for r in records}))},
            params=params,
            notes=notes,
            extra={"stated": finite_figures(blocks), "stated_latency_ms": stated,
                   "latency_source": "per-op"},
            line=first,
        ))
        return result


def _check_span(begins: dict[tuple[str, str], np.ndarray],
                points: dict[tuple[str, str], tuple[list[int], list[int], list[int]]],
                path: Path) -> None:
    """All starts within int64 ns of each other; else name the line farthest out."""
    every = np.concatenate(list(begins.values()))
    if int(every.max()) - int(every.min()) < _MAX_SPAN_US:
        return
    lines = np.concatenate([np.asarray(p[2]) for p in points.values()])
    ends = np.concatenate([np.asarray(p[0]) for p in points.values()])
    names = [op.upper() for (op, _), p in points.items() for _ in p[2]]
    median = float(np.median(every))
    i = int(np.argmax(np.abs(every.astype(np.float64) - median)))
    years = abs(float(every[i]) - median) / _US_PER_YEAR
    raise numbers.damaged(numbers.at(path, int(lines[i])),
                          f"{names[i]} timestamp {int(ends[i])} (ms) is {years:,.0f} years "
                          "from the others")
