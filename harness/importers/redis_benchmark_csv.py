"""`redis-benchmark-csv`: the output of ``redis-benchmark --csv``.

Two layouts, both one test per line:

* redis 6.2 and later: a header, then per test
  ``"SET","39761.43","0.166","0.032","0.135","0.295","0.855","3.903"`` =
  test, rps, avg/min/p50/p95/p99/max latency in milliseconds;
* older redis: no header, ``"SET","39761.43"`` = test, rps only.

The CSV does not state how many requests each test made (``-n``), nor clients, pipeline
or value size. ``--requests N`` (or ``--count``) gives the requests; without it the
import is refused rather than guessed (redis-benchmark's default is 100000: say so with
``--requests 100000`` if that is what ran).

One run per test: ``requests`` aggregated records of the average latency each, spread
evenly over requests / rps seconds, so the summary's throughput is the rps and its mean
latency the average printed. The records have no distribution: the stated min, p50,
p95, p99 and max are kept in ``extra.stated`` as printed and in
``extra.stated_latency_ms``, which `harness summary` shows as the run's percentiles
(never the mean under a percentile's name). Old layout (no latency): the
records carry 1 / rps each, back to back: the throughput is right, but the latency
columns are then the mean time between completions, not a request latency, and the run
says so (``extra.latency_stated = false``). Params: ``op`` (the test name as a slug:
``set``, ``mset_10_keys``) and ``requests``.

A test's numbers are checked (`harness.importers.numbers`): an rps that is not a
positive finite number, latency figures that are negative, not finite or out of order
(min <= p50 <= p95 <= p99 <= max, avg within min..max) are an error naming the line.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from harness.errors import ImportFormatError
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

NAME = "redis-benchmark-csv"
DEFAULT_REQUESTS = 100_000  # redis-benchmark's default -n, named in the error
_NS_PER_MS = 1e6
_LATENCY_COLUMNS = ("avg_latency_ms", "min_latency_ms", "p50_latency_ms", "p95_latency_ms",
                    "p99_latency_ms", "max_latency_ms")


def _is_number(text: str) -> bool:
    """Anything float() reads (nan and inf too: those are then damaged numbers, not a
    line that is not a test's)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


class RedisBenchmarkCsv:
    name = NAME
    description = "redis-benchmark --csv output (old test,rps or 6.2+ with latency columns)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        count = options.requests or options.count
        if not count:
            raise ImportFormatError(
                f"{path}: redis-benchmark's CSV does not state how many requests each "
                f"test made; give --requests N (its -n; redis-benchmark's default is "
                f"{DEFAULT_REQUESTS})")
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        header: list[str] | None = None
        seen: dict[str, int] = {}
        for no, line in enumerate(read_lines(path), 1):
            try:
                row = next(csv.reader([line]), [])
            except csv.Error:
                row = []
            row = [c.strip() for c in row]
            if row and row[0].lower() == "test" and len(row) >= 2 and row[1].lower() == "rps":
                header = [c.lower() for c in row]
                continue
            if not row or not row[0] or len(row) < 2 or not _is_number(row[1]):
                noise.skip(no, line)
                continue
            if line.count('"') % 2 or (header and len(row) < len(header)):
                # An unbalanced quote or a short row is a line cut off: its numbers too.
                noise.skip(no, line)
                result.notes.append(f"line {no}: incomplete row (cut off?); not imported")
                continue
            where = numbers.at(path, no)
            rps = numbers.amount(row[1], where, f"{row[0]} rps", positive=True)
            cols = header if header and len(row) == len(header) else ["test", "rps"]
            values = dict(zip(cols, row, strict=False))
            stated: dict[str, Any] = {"test": row[0], "rps": row[1]}
            stated.update({k: values[k] for k in _LATENCY_COLUMNS if k in values})
            # Every latency column of the layout is a number, in order (avg within them).
            figures = {k.removesuffix("_latency_ms"): numbers.amount(
                           values[k], where, f"{row[0]} latencies (ms) "
                                             f"{k.removesuffix('_latency_ms')}")
                       for k in _LATENCY_COLUMNS if k in values}
            numbers.check_stated(figures, where, f"{row[0]} latencies (ms)")
            avg = figures.pop("avg", None)
            wall_ns = count / rps * 1e9
            notes: list[str] = []
            if avg is not None:
                rec = Records.aggregate(slug(row[0]), count, avg * _NS_PER_MS * count,
                                        wall_ns=wall_ns)
                notes.append("aggregated records: the summary shows redis-benchmark's "
                             "stated percentiles for this run")
            else:
                rec = Records.aggregate(slug(row[0]), count, wall_ns)
                notes.append("no latency in this CSV (old layout): records carry 1/rps, the "
                             "mean time between completions, not a request latency")
            op = slug(row[0])
            seen[op] = seen.get(op, 0) + 1
            result.runs.append(ParsedRun(
                records=[rec],
                grid_point={"op": op},
                params={"requests": count},
                repetition=seen[op],
                notes=notes,
                extra={"stated": stated, "latency_stated": avg is not None,
                       "latency_source": "aggregate",
                       "stated_latency_ms": {slug(row[0]): figures, "_all": figures}},
                line=no,
            ))
        result.skipped = noise.lines
        if not result.runs:
            raise nothing_found(path, NAME)
        result.notes.append(f"{count} requests per test (--requests); the CSV does not "
                            "state it")
        return result
