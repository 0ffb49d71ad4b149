"""`ycsb-hdr`: HdrHistogram interval logs, as YCSB writes them (``<OP>.hdr``).

With ``measurementtype=hdrhistogram`` and ``hdrhistogram.fileoutput=true`` YCSB's
`site.ycsb.measurements.OneMeasurementHdrHistogram` writes one log per measurement
through HdrHistogram's ``HistogramLogWriter``: a comment ``#[Logging for: READ]``, the
format version, ``#[StartTime: ...]``, a legend, then one line per status interval
(``-s`` every 10 s by default) and one for the rest at the end::

    #[Logging for: READ]
    #[Histogram log format version 1.3]
    #[StartTime: 1538020335.435 (seconds since epoch), Thu Sep 27 ...]
    "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
    0.127,1.007,2.769,HISTFAAAAEV42pNpmSz...

Timestamps are seconds from the base time (YCSB sets it to the start time); latencies
are microseconds. Any tool's interval log reads the same way (a ``Tag=...,`` prefix is
kept as param ``tag``).

One run per file, op from the ``Logging for`` comment (else the file name): per
interval, one record per counted op at histogram precision (`harness.importers.hdr`:
the bucket's highest equivalent value, so percentiles match HdrHistogram's within one
bucket), started evenly over the interval in rank order (which op ran when inside an
interval is not recorded). ``extra.latency_source = "histogram"``. A start time or
interval length that is negative, not finite or beyond int64 ns is an error naming the
line.
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
    slug,
)
from harness.importers.hdr import decode

NAME = "ycsb-hdr"
_NUM = r"(\d+(?:\.\d*)?)"
_INTERVAL = re.compile(rf"^(?:Tag=([^,]*),)?{_NUM},{_NUM},{_NUM},(HIST\S+)\s*$")
_LOGGING_FOR = re.compile(r"^#\[Logging for: (.+)\]\s*$")
_START = re.compile(rf"^#\[StartTime: {_NUM} ")
_LEGEND = re.compile(r'^"StartTimestamp",')
_NS_PER_US = 1e3
_MAX_NS = 2**62  # start times are int64 ns, as every record's


def _interval(begin: str, length: str, where: str) -> tuple[float, float]:
    """An interval's start and length (s), checked: its ops' start times must fit in
    int64 ns."""
    begin_s = numbers.amount(begin, where, "StartTimestamp")
    length_s = numbers.amount(length, where, "Interval_Length")
    if (begin_s + length_s) * 1e9 >= _MAX_NS:
        raise numbers.damaged(where, f"interval ends {begin_s + length_s:g} s past the "
                                     "log's base time, more than int64 ns hold")
    return begin_s, length_s


class YcsbHdr:
    name = NAME
    description = "HdrHistogram interval log (YCSB's <OP>.hdr files; one op per file)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        name = Path(path).stem
        start_epoch_s: float | None = None
        tags: set[str] = set()
        lat_parts: list[np.ndarray] = []
        start_parts: list[np.ndarray] = []
        digits: set[int] = set()
        first: int | None = None
        held = 0  # ops decoded so far: each interval may add what --max-ops leaves
        for no, line in enumerate(read_lines(path), 1):
            if m := _LOGGING_FOR.match(line):
                name = m.group(1).strip()
            elif m := _START.match(line):
                start_epoch_s = numbers.amount(m.group(1), numbers.at(path, no), "StartTime")
            elif m := _INTERVAL.match(line.strip()):
                first = first or no
                hist = decode(m.group(5), f"{path}:{no}", options.max_ops - held)
                if not hist.total:
                    continue
                held += hist.total
                digits.add(hist.significant_digits)
                if m.group(1):
                    tags.add(m.group(1))
                begin_s, length_s = _interval(m.group(2), m.group(3), numbers.at(path, no))
                lat = hist.latencies(_NS_PER_US)
                step = length_s / len(lat) if length_s > 0 else 0.0
                lat_parts.append(lat)
                start_parts.append(np.rint((begin_s + np.arange(len(lat)) * step) * 1e9))
            elif not (line.startswith("#") or _LEGEND.match(line) or not line.strip()):
                noise.skip(no, line)
        result.skipped = noise.lines
        if not lat_parts:
            raise nothing_found(path, NAME)
        starts = np.concatenate(start_parts)
        starts -= starts.min()  # the run's time axis starts at its first interval
        op = slug(name)
        status = "error" if name.upper().endswith("-FAILED") else "ok"
        if status == "error":
            op = slug(name[: -len("-FAILED")])
        result.runs.append(ParsedRun(
            records=[Records.measured(op, np.concatenate(lat_parts),
                                      start_ns=starts.astype(np.int64), status=status)],
            grid_point={"op": op, **({"tag": sorted(tags)[0]} if len(tags) == 1 else {})},
            notes=[f"latencies at histogram precision ({sorted(digits)} significant "
                   "digits); ops spread evenly over each interval"],
            extra={"latency_source": "histogram",
                   "histogram": {"unit": "us", "significant_digits": sorted(digits),
                                 "value": "highest equivalent value of its bucket"},
                   "logging_for": name, "intervals": len(lat_parts),
                   **({"start_epoch_s": start_epoch_s} if start_epoch_s else {})},
            line=first,
        ))
        return result
