"""`redis-benchmark`: redis-benchmark's default (text) output, and its ``-q`` output.

Per test, redis 6.2 and later print::

    ====== SET ======
      2000 requests completed in 0.05 seconds
      10 parallel clients
      100 bytes payload
      keep alive: 1
      multi-thread: no

    Latency by percentile distribution:
    0.000% <= 0.055 milliseconds (cumulative count 1)
    50.000% <= 0.191 milliseconds (cumulative count 1043)
    ...
    Summary:
      throughput summary: 40816.33 requests per second
      latency summary (msec):
              avg       min       p50       p95       p99       max
            0.218     0.040     0.183     0.463     0.935     3.055

Older redis print the header, the requests line, ``99.82% <= 1 milliseconds`` lines and
``81300.81 requests per second``; ``-q`` prints one line per test,
``SET: 40816.33 requests per second, p50=0.183 msec`` (the requests are then not
stated: ``--requests``). Progress lines (``SET: rps=... (overall: ...)``, written over
with carriage returns) are the tool's, not noise, and are passed over.

One run per test: ``requests`` aggregated records of the average latency each, spread
over requests / rps seconds, so the summary's throughput is the rps and its mean the
average printed. The records have no distribution: the stated avg/min/p50/p95/p99/max
go to ``extra.stated_latency_ms``, which `harness summary` shows as the run's
percentiles (never the mean under a percentile's name); the printed percentile
distribution is kept in ``extra.stated["distribution"]`` as (percent, ms, cumulative
count). No average printed (older redis, ``-q``): the records carry 1 / rps each, the
mean time between completions, and the run says so (``extra.latency_stated = false``).
Params: ``op`` (the test name as a slug), ``requests``, and where printed ``clients``,
``value_size_bytes``, ``keep_alive``.

Numbers are checked as read (`harness.importers.numbers`), each an error naming its
line: 0 requests, an rps that is not a positive finite number, a latency summary that
is negative, not finite or out of order, a printed distribution that decreases, counts
longer than any measurement.
"""

from __future__ import annotations

import re
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

NAME = "redis-benchmark"
_NS_PER_MS = 1e6
_NUM = r"(\d+(?:\.\d+)?)"
_HEADER = re.compile(r"^\s*={3,}\s*(.+?)\s*={3,}\s*$")
_REQUESTS = re.compile(rf"^\s*(\d+) requests completed in {_NUM} seconds\s*$")
_PARAMS = (
    (re.compile(r"^\s*(\d+) parallel clients\s*$"), "clients"),
    (re.compile(r"^\s*(\d+) bytes payload\s*$"), "value_size_bytes"),
    (re.compile(r"^\s*keep alive: (\d+)\s*$"), "keep_alive"),
)
_SETTING = re.compile(r"^\s*(multi-thread|threads|host configuration \"[^\"]*\"):\s*(.*)$")
_DIST = re.compile(rf"^\s*{_NUM}% <= {_NUM} milliseconds(?: \(cumulative count (\d+)\))?\s*$")
_RPS = re.compile(rf"^\s*(?:throughput summary: )?{_NUM} requests per second\s*$")
_QUIET = re.compile(rf"^\s*(.+?): {_NUM} requests per second(?:, p50={_NUM} msec)?\s*$")
_PROGRESS = re.compile(r"^\s*.+: rps=\S+ \(overall: \S+\) avg_msec=\S+ \(overall: \S+\)\s*$")
_KNOWN = re.compile(r"^\s*(Summary:|latency summary \(msec\):|Latency by percentile "
                    r"distribution:|Cumulative distribution of latencies:)\s*$")
_LATENCY_NAMES = ("avg", "min", "p50", "p95", "p99", "max")
_PARAM_LEAST = {"clients": 1, "value_size_bytes": 0, "keep_alive": 0}


def _rps(text: str, where: str, test: str) -> float:
    """Requests per second as printed: a positive finite number (the test's requests
    took some time), else an error naming the line."""
    return numbers.amount(text, where, f"{test} requests per second", positive=True)


class _Test:
    """What has been read of one test so far."""

    def __init__(self, name: str, line: int) -> None:
        self.name, self.line = name, line
        self.requests: int | None = None
        self.seconds: float | None = None
        self.rps: float | None = None
        self.params: dict[str, Any] = {}
        self.settings: dict[str, str] = {}
        self.latency_ms: dict[str, float] = {}
        self.distribution: list[tuple[float, float, int | None]] = []
        self.last_point: tuple[float, float, int | None] | None = None  # of this section

    def add_point(self, m: re.Match, where: str) -> None:
        """A line of a printed distribution, checked: numbers as `harness.importers.numbers`
        reads them, and not below the section's previous line (it is cumulative)."""
        pct = numbers.amount(m.group(1), where, f"{self.name} percent")
        ms = numbers.amount(m.group(2), where, f"{self.name} milliseconds")
        cum = (numbers.count(m.group(3), where, f"{self.name} cumulative count", least=0)
               if m.group(3) else None)
        prev = self.last_point
        if prev is not None and (pct < prev[0] or ms < prev[1]
                                 or (cum is not None and prev[2] is not None
                                     and cum < prev[2])):
            raise numbers.damaged(where, f"{self.name}: {m.group(1)}% <= {m.group(2)} ms is "
                                         f"below {prev[0]:.3f}% <= {prev[1]:g} ms before it "
                                         "(a cumulative distribution never decreases)")
        self.last_point = (pct, ms, cum)
        self.distribution.append(self.last_point)


def _run(test: _Test, options: ImportOptions) -> tuple[ParsedRun | None, str | None]:
    """The test as a run, or None and why it cannot be imported."""
    requests = test.requests or options.requests
    if test.rps is None or test.rps <= 0:
        return None, f"{test.name}: no requests per second (cut off?); not imported"
    if not requests:
        return None, (f"{test.name}: requests not stated (-q output); give --requests N "
                      "(the -n of the run)")
    op = slug(test.name)
    wall_ns = requests / test.rps * 1e9
    notes: list[str] = []
    avg = test.latency_ms.get("avg")
    if avg is not None:
        rec = Records.aggregate(op, requests, avg * _NS_PER_MS * requests, wall_ns=wall_ns)
        notes.append("aggregated records: the summary shows redis-benchmark's stated "
                     "percentiles for this run")
    else:
        rec = Records.aggregate(op, requests, wall_ns)
        notes.append("no average latency printed: records carry 1/rps, the mean time "
                     "between completions, not a request latency")
    if test.requests is None:
        notes.append(f"{requests} requests (--requests); the output does not state it")
    stated: dict[str, Any] = {"test": test.name, "rps": test.rps, **test.settings}
    if test.seconds is not None:
        stated["seconds"] = test.seconds
    if test.distribution:
        stated["distribution"] = test.distribution
    figures = {k: v for k, v in test.latency_ms.items() if k != "avg"}
    return ParsedRun(
        records=[rec],
        grid_point={"op": op},
        params={"requests": requests, **test.params},
        notes=notes,
        extra={"stated": stated, "latency_stated": avg is not None,
               "latency_source": "aggregate",
               "stated_latency_ms": {op: figures, "_all": figures}},
        line=test.line,
    ), None


class RedisBenchmarkText:
    name = NAME
    description = "redis-benchmark's default text output (or -q), redis 6.2+ or older"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        lines = read_lines(path)
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        tests: list[_Test] = []
        current: _Test | None = None
        expect_latency = False
        for no, line in enumerate(lines, 1):
            text = line.strip()
            if not text or _PROGRESS.match(line) or _KNOWN.match(line):
                expect_latency = expect_latency or text == "latency summary (msec):"
                if current is not None and _KNOWN.match(line):
                    current.last_point = None  # a new distribution starts
                continue
            if m := _HEADER.match(line):
                current = _Test(m.group(1), no)
                tests.append(current)
                continue
            where = numbers.at(path, no)
            if current is not None and (m := _RPS.match(line)):
                current.rps = _rps(m.group(1), where, current.name)
                continue
            if m := _QUIET.match(line):
                current = _Test(m.group(1), no)
                current.rps = _rps(m.group(2), where, current.name)
                if m.group(3):
                    current.latency_ms["p50"] = numbers.amount(m.group(3), where,
                                                               f"{current.name} p50")
                tests.append(current)
                current = None  # one line is the whole test
                continue
            if current is None:
                noise.skip(no, line)
                continue
            if m := _REQUESTS.match(line):
                current.requests = numbers.count(m.group(1), where, f"{current.name} requests")
                current.seconds = numbers.amount(m.group(2), where, f"{current.name} seconds")
            elif m := _DIST.match(line):
                current.add_point(m, where)
            elif m := _SETTING.match(line):
                current.settings[m.group(1)] = m.group(2).strip()
            elif expect_latency and text.split() == list(_LATENCY_NAMES):
                continue
            elif expect_latency and len(text.split()) == len(_LATENCY_NAMES):
                try:
                    values = [float(v) for v in text.split()]
                except ValueError:
                    noise.skip(no, line)
                    continue
                figures = dict(zip(_LATENCY_NAMES, values, strict=True))
                numbers.check_stated(figures, where, f"{current.name} latencies (ms)")
                current.latency_ms.update(figures)
                expect_latency = False
            elif any((m := pattern.match(line)) for pattern, _ in _PARAMS):
                for pattern, key in _PARAMS:
                    if m := pattern.match(line):
                        current.params[key] = numbers.count(
                            m.group(1), where, f"{current.name} {key}",
                            least=_PARAM_LEAST[key], most=None)
            else:
                noise.skip(no, line)
        for test in tests:
            run, problem = _run(test, options)
            if run is not None:
                result.runs.append(run)
            elif problem:
                result.notes.append(f"line {test.line}: {problem}")
        result.skipped = noise.lines
        if not result.runs:
            if tests and any("give --requests" in n for n in result.notes):
                raise ImportFormatError(f"{path}: {result.notes[0].split(': ', 1)[1]}")
            raise nothing_found(path, NAME)
        seen: dict[str, int] = {}
        for run in result.runs:
            op = run.grid_point["op"]
            seen[op] = seen.get(op, 0) + 1
            run.repetition = seen[op]
        return result
