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
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from harness.importers.base import (
    ImportOptions,
    ImportResult,
    Noise,
    ParsedRun,
    Records,
    nothing_found,
    read_lines,
)
from harness.importers.ycsb_text import CHATTER, command_params, op_name, stated_ms

NAME = "ycsb-raw"
_HEADER = re.compile(r"^\s*(\S+) latency raw data: op, timestamp\(ms\), latency\(us\)\s*$")
_POINT = re.compile(r"^\s*([A-Za-z][\w-]*),(\d{1,15}),(\d{1,12})\s*$")
_SUMMARY = re.compile(r"^\s*\[([^\]]+)\],\s*([^,]+?),\s*(-?[\d.]+(?:E-?\d+)?)\s*$")
_NS_PER_US = 1e3


class YcsbRaw:
    name = NAME
    description = "YCSB measurementtype=raw output (one line per op: exact latencies)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        points: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
        intended = 0
        blocks: dict[str, dict[str, float]] = {}
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
                ts, lat = points.setdefault(parsed, ([], []))
                ts.append(int(m.group(2)))
                lat.append(int(m.group(3)))
            elif m := _SUMMARY.match(line):
                try:
                    blocks.setdefault(m.group(1).strip(), {})[m.group(2).strip()] = float(
                        m.group(3))
                except ValueError:
                    noise.skip(no, line)
            elif "Command line:" in line:
                params.update(command_params(line))
            elif not (_HEADER.match(line) or CHATTER.match(line)):
                noise.skip(no, line)
        result.skipped = noise.lines
        if not points:
            raise nothing_found(path, NAME)
        # Starts in ns since the epoch (end - latency); the earliest is the run's zero.
        begins = {key: np.asarray(ts, np.int64) * 1_000_000 - np.asarray(lat, np.int64) * 1000
                  for key, (ts, lat) in points.items()}
        t0 = min(int(b.min()) for b in begins.values())
        notes: list[str] = ["exact per-op latencies (YCSB raw); start = end timestamp "
                            "(ms) - latency"]
        if intended:
            notes.append(f"{intended} Intended-* lines (the same ops timed from their "
                         "intended start) not imported")
        records: list[Records] = []
        for (op, status), (_ts, lat) in points.items():
            records.append(Records.measured(op, np.asarray(lat, np.float64) * _NS_PER_US,
                                            start_ns=begins[(op, status)] - t0,
                                            status=status))
        for name, fig in blocks.items():
            returns = {k: v for k, v in fig.items()
                       if k.startswith("Return=") and k not in ("Return=OK",
                                                                "Return=BATCHED_OK")}
            if returns and op_name(name) and op_name(name)[1] == "ok":
                notes.append(f"{name}: {int(sum(returns.values()))} ops returned "
                             f"{', '.join(k[7:] for k in returns)}; which ones is not "
                             "recorded, so all are status ok")
        stated = {op_name(n)[0]: stated_ms(f) for n, f in blocks.items()
                  if op_name(n) and op_name(n)[1] == "ok"}
        result.runs.append(ParsedRun(
            records=records,
            grid_point={"op": "+".join(sorted({r.op for r in records}))},
            params=params,
            notes=notes,
            extra={"stated": blocks, "stated_latency_ms": stated,
                   "latency_source": "per-op"},
            line=first,
        ))
        return result
