"""`memtier-json`: memtier_benchmark's ``--json-out-file`` output.

Layout read (memtier_benchmark's JSON, format version 2; older files lack some keys)::

    {"configuration": {"threads": 4, "clients": 50, "requests": 10000, "ratio": "1:10",
                       "data_size": 32, "pipeline": 1, "protocol": "redis", ...},
     "run information": {"Actual benchmark duration (seconds)": 2.91, ...},
     "ALL STATS": {"Runtime": {"Total duration": 2915, "Time unit": "MILLISECONDS"},
                   "Sets": {"Count": 28282, "Ops/sec": 9702.1, "Average Latency": 1.298,
                            "Min Latency": ..., "Max Latency": ...,
                            "Time-Serie": {"0": {"Count": 9811, "p50.00": 1.2, ...}, ...},
                            "Percentile Latencies": {"p50.00": 1.407, ...,
                                "Histogram log format": {"Compressed Histogram": "HIST..."}}},
                   "Gets": {...}, "Waits": {...}, "Totals": {...}}}

Latencies are milliseconds in the JSON; the histogram counts microseconds. A file with
several runs (``--run-count``) has no "ALL STATS"; its "AGGREGATED AVERAGE RESULTS" are
read instead, with a note.

With a histogram (memtier 2.x): per op type, one record per counted op at histogram
precision (`harness.importers.hdr`: each op carries its bucket's highest equivalent
value, so pooled p50/p99/p99.9 match memtier's within one bucket), laid out on the
"Time-Serie" seconds (counts as memtier printed them; which op fell in which second is
matched by rank to each second's stated quantiles). The run says so:
``extra.latency_source = "histogram"`` and ``extra.histogram`` (unit, significant digits).
Without a time series, or when its counts do not add up, ops are spread evenly over the
run's duration, with a note.

Without a histogram (older memtier): aggregated records, per op type ``Count`` records
of the average latency each, spread evenly over the run's duration, so that per-op count,
mean latency and Ops/sec come out as memtier printed them; ``Count`` missing: Ops/sec x
duration, with a note. Such records have no distribution: memtier's stated percentiles
are kept in ``extra.stated_latency_ms`` (per op, and ``_all`` for Totals), which
`harness summary` shows for the run instead of percentiles of the records.

``Totals`` is the sum of the others and is only kept as stated. One run per file.

Numbers are checked as read (`harness.importers.numbers`), errors naming the keys (JSON
has no lines to speak of): a negative or fractional Count, Ops/sec or per-second count,
a zero or negative duration, latency figures that are negative, not finite or out of
order (for op types with ops: memtier prints leftovers for the others), an integer
too long to be a figure (that one by its line).
Params: ``op`` (the op types present, e.g. ``get+set``), ``threads``, ``connections``
(memtier's --clients, per thread), ``pipeline``, ``value_size_bytes`` (data_size),
``get_ratio`` (from the set:get ratio), ``protocol``; server and port in ``extra.target``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import ImportFormatError
from harness.importers import numbers
from harness.importers.base import (
    ImportOptions,
    ImportResult,
    ParsedRun,
    Records,
    nothing_found,
    slug,
)
from harness.importers.hdr import Second, decode, spread_over_seconds

NAME = "memtier-json"
_OPS = {"Sets": "set", "Gets": "get", "Waits": "wait"}
_NOT_OPS = {"Runtime", "Totals"}
_SECTIONS = ("ALL STATS", "AGGREGATED AVERAGE RESULTS")
_NS_PER_MS = 1e6
_NS_PER_US = 1e3
#: An integer longer than this is damage (memtier's longest, an unsigned 64-bit key
#: range, has 20 digits); Python's json would raise its own ValueError past 4300.
_MAX_JSON_DIGITS = 40
_MAX_NS = 2**62  # start times are int64 ns
#: Numeric configuration -> the least value memtier accepts.
_RATIO = re.compile(r"^\d+:\d+$", re.ASCII)  # sets:gets
_CONFIG_LEAST = {"threads": 1, "clients": 1, "pipeline": 1, "data_size": 0}


class _LongNumber(Exception):
    """An integer in the JSON too long to be a figure (raised while decoding)."""


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_JSON_DIGITS:
        raise _LongNumber(text)
    return int(text)


def _load(path: Path) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return json.loads(text, parse_int=_json_int)
    except _LongNumber as exc:
        digits = str(exc)
        line = text.count("\n", 0, max(text.find(digits), 0)) + 1
        raise numbers.damaged(numbers.at(path, line),
                              f"a number of {len(digits.lstrip('-'))} digits") from None
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}: not JSON (line {exc.lineno}: {exc.msg}); "
                                f"no {NAME} records found") from None
    except RecursionError:
        raise ImportFormatError(f"{path}: not JSON (nested too deeply); no {NAME} records "
                                "found") from None


def _numeric(value: Any) -> bool:
    """A number where one belongs (anything else is read as not stated, as older files
    leave keys out)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(block: dict, key: str, where: str, what: str, least: int = 0,
           most: int | None = numbers.MAX_OPS) -> int | None:
    value = block.get(key)
    if not _numeric(value):
        return None
    return numbers.count(value, where, f"{what} / {key}", least=least, most=most)


def _amount(block: dict, key: str, where: str, what: str,
            positive: bool = False) -> float | None:
    value = block.get(key)
    if not _numeric(value):
        return None
    return numbers.amount(value, where, f"{what} / {key}", positive=positive)


def _num(value: Any) -> float | None:
    """A finite number, or None (a damaged file may hold anything where one belongs)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return number if math.isfinite(number) else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _duration_ms(stats: dict, info: dict, where: str, section: str) -> float | None:
    """The run's duration (ms); a stated zero or negative one is an error (ops over no
    time give no rate), a missing one None."""
    runtime = _dict(stats.get("Runtime"))
    total = _amount(runtime, "Total duration", where, f"{section} / Runtime", positive=True)
    unit = str(runtime.get("Time unit", "MILLISECONDS")).upper()
    if total is not None:
        return total / 1000 if unit == "MICROSECONDS" else total
    seconds = _amount(info, "Actual benchmark duration (seconds)", where, "run information",
                      positive=True)
    return seconds * 1000 if seconds is not None else None


def _params(config: dict, where: str) -> dict[str, Any]:
    for key, least in _CONFIG_LEAST.items():  # checked: they become the grid point
        _count(config, key, where, "configuration", least=least, most=None)
    out: dict[str, Any] = {}
    for src, dst in (("threads", "threads"), ("clients", "connections"),
                     ("pipeline", "pipeline"), ("data_size", "value_size_bytes"),
                     ("protocol", "protocol")):
        if isinstance(config.get(src), int | float | str) and not isinstance(
                config.get(src), bool):
            out[dst] = config[src]
    ratio = str(config.get("ratio", ""))
    if _RATIO.match(ratio):
        sets, gets = (numbers.whole(n, where, f"configuration / ratio {what}")
                      for n, what in zip(ratio.split(":"), ("sets", "gets"), strict=True))
        if sets + gets > 0:
            out["get_ratio"] = round(gets / (sets + gets), 6)
    return out


def _pct_key(key: str) -> str | None:
    """memtier's ``p99.90`` / ``p99.900`` -> ``p99.9``; None for other keys."""
    if not key.startswith("p"):
        return None
    try:
        return f"p{float(key[1:]):g}"
    except ValueError:
        return None


def _stated(block: dict) -> dict[str, Any]:
    keep = {k: v for k, v in block.items() if not isinstance(v, dict)}
    pct = block.get("Percentile Latencies")
    if isinstance(pct, dict):
        keep["percentiles_ms"] = {k: v for k, v in pct.items()
                                  if k.startswith("p") and not isinstance(v, dict)}
    if isinstance(block.get("Time-Serie"), dict):  # memtier's per-second figures, verbatim
        keep["time_series"] = block["Time-Serie"]
    return keep


def _stated_latency_ms(block: dict, where: str, what: str,
                       with_mean: bool = True) -> dict[str, float]:
    """The block's stated percentiles, min and max in ms, under normalised keys; checked
    (finite, not negative, in order, the average within min..max where `with_mean`)."""
    out: dict[str, float] = {}
    for key, value in _dict(block.get("Percentile Latencies")).items():
        name = _pct_key(key)
        if name and _numeric(value):
            out[name] = value
    for key, name in (("Min Latency", "min"), ("Max Latency", "max"),
                      ("Average Latency", "mean")):
        if _numeric(block.get(key)) and (with_mean or name != "mean"):
            out[name] = block[key]
    numbers.check_stated(out, where, f"{what} latencies (ms)")
    out.pop("mean", None)  # the records' own mean is the figure shown
    return out


def _histogram(block: dict) -> str | None:
    log = _dict(_dict(block.get("Percentile Latencies")).get("Histogram log format"))
    payload = log.get("Compressed Histogram")
    return payload if isinstance(payload, str) and payload.strip() else None


def _seconds(block: dict, where: str, what: str) -> list[Second] | None:
    """memtier's per-second series of one op type (None when absent or unreadable);
    a negative or fractional count or a second beyond int64 ns is an error."""
    series = block.get("Time-Serie")
    if not isinstance(series, dict) or not series:
        return None
    out = []
    for key, sec in series.items():
        sec = _dict(sec)
        try:
            offset = float(key)
        except ValueError:
            return None
        count = _count(sec, "Count", where, f"{what} / Time-Serie / {key}")
        if count is None:
            return None
        if not (math.isfinite(offset) and offset >= 0 and (offset + 1) * 1e9 < _MAX_NS):
            raise numbers.damaged(where, f"{what} / Time-Serie: second {key!r} is not a "
                                         "time in the run")
        quantiles = {_pct_key(k): _num(v) for k, v in sec.items()
                     if _pct_key(k) and _num(v) is not None}
        for k, name in (("Min Latency", "min"), ("Max Latency", "max"),
                        ("Average Latency", "mean")):
            if _num(sec.get(k)) is not None:
                quantiles[name] = _num(sec.get(k))
        out.append(Second(offset, count, quantiles))
    return sorted(out, key=lambda s: s.offset_s)


def _from_histogram(op: str, key: str, block: dict, payload: str, dur_ms: float | None,
                    where: str, what: str, count: int | None,
                    notes: list[str], max_ops: int) -> tuple[Records, int]:
    hist = decode(payload, f"{where}: {key}", max_ops)
    lat_ns = hist.latencies(_NS_PER_US)
    if count is not None and count != hist.total:
        notes.append(f"{key}: histogram counts {hist.total} ops, Count says {count}; "
                     "the histogram's ops are imported")
    seconds = _seconds(block, where, what)
    dur_s = dur_ms / 1000 if dur_ms else None
    if seconds is not None and sum(s.count for s in seconds) == hist.total:
        # memtier's Time-Serie is in ms; the histogram in µs: targets in µs*1000 = ns.
        scaled = [Second(s.offset_s, s.count, {k: v * _NS_PER_MS for k, v in
                                               s.quantiles.items()}) for s in seconds]
        start, lat = spread_over_seconds(lat_ns, scaled, dur_s)
        return Records.measured(op, lat, start_ns=start), hist.significant_digits
    why = "no Time-Serie" if seconds is None else "Time-Serie counts differ from the histogram"
    notes.append(f"{key}: {why}; ops spread evenly over the run")
    wall_ns = dur_ms * _NS_PER_MS if dur_ms else None
    rng = np.random.default_rng(0)  # no order is known: a fixed shuffle, not sorted
    return (Records.measured(op, rng.permutation(lat_ns), wall_ns=wall_ns),
            hist.significant_digits)


class MemtierJson:
    name = NAME
    description = ("memtier_benchmark --json-out-file output (per-op latencies from its "
                   "HdrHistogram, else aggregates)")

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        data = _load(path)
        if not isinstance(data, dict):
            raise nothing_found(path, NAME)
        result = ImportResult(NAME, Path(path))
        section = next((s for s in _SECTIONS if isinstance(data.get(s), dict)), None)
        if section is None:
            raise nothing_found(path, NAME)
        if section != "ALL STATS":
            result.notes.append(f"several runs in the file: their {section!r} imported")
        where = str(path)
        stats = data[section]
        config = _dict(data.get("configuration"))
        info = _dict(data.get("run information"))
        dur_ms = _duration_ms(stats, info, where, section)
        blocks = {k: b for k, b in stats.items()
                  if k not in _NOT_OPS and isinstance(b, dict)}
        # Per op type: its Count and Ops/sec, checked (None: not stated).
        counts = {k: _count(b, "Count", where, f"{section} / {k}") for k, b in blocks.items()}
        rates = {k: _amount(b, "Ops/sec", where, f"{section} / {k}") for k, b in blocks.items()}
        with_ops = {k: b for k, b in blocks.items()
                    if (counts[k] if counts[k] is not None else rates[k] or 0) > 0}
        use_hist = bool(with_ops) and all(_histogram(b) for b in with_ops.values())
        notes: list[str] = []
        if not use_hist:
            notes.append("aggregated records (no latency histogram in the file): the "
                         "summary shows memtier's stated percentiles for this run")
        if dur_ms is None:
            notes.append("run duration not stated; records laid back to back, so "
                         "throughput is not memtier's")
        records: list[Records] = []
        stated: dict[str, Any] = {}
        stated_ms: dict[str, dict[str, float]] = {}
        digits: set[int] = set()
        for key, block in blocks.items():
            op = _OPS.get(key) or slug(key)
            what = f"{section} / {key}"
            stated[key] = _stated(block)
            if key not in with_ops:
                continue  # no ops (memtier's figures for them are zeros and leftovers)
            stated_ms[op] = _stated_latency_ms(block, where, what)
            if use_hist:
                budget = options.max_ops - sum(len(r.latencies_ns) for r in records
                                               if r.latencies_ns is not None)
                rec, sig = _from_histogram(op, key, block, _histogram(block), dur_ms,
                                           where, what, counts[key], notes, budget)
                digits.add(sig)
                if rec.latencies_ns is not None and len(rec.latencies_ns):
                    records.append(rec)
                continue
            mean = _amount(block, "Average Latency", where, what)
            if mean is None:
                mean = _amount(block, "Latency", where, what)
            count = counts[key]
            if count is None and rates[key] and dur_ms:
                count = numbers.count(round(rates[key] * dur_ms / 1000), where,
                                      f"{what}: Ops/sec x duration")
                notes.append(f"{key}: no Count in the file; {count} = Ops/sec x duration")
            if not count or mean is None:
                notes.append(f"{key}: {'no Count' if not count else 'no average latency'}"
                             " that can be imported; no records")
                continue
            records.append(Records.aggregate(
                op, count, mean * _NS_PER_MS * count,
                wall_ns=dur_ms * _NS_PER_MS if dur_ms else None,
            ))
        if not records:
            raise nothing_found(path, NAME)
        if isinstance(stats.get("Totals"), dict):
            stated["Totals"] = _stated(stats["Totals"])
            # memtier 2.x writes Totals' Average Latency as 0.0: not checked.
            stated_ms["_all"] = _stated_latency_ms(stats["Totals"], where,
                                                   f"{section} / Totals", with_mean=False)
        ops = "+".join(sorted(r.op for r in records))
        target = {k: config[k] for k in ("server", "port", "uri") if config.get(k)}
        source: dict[str, Any] = {"latency_source": "aggregate"}
        if use_hist:
            source = {"latency_source": "histogram",
                      "histogram": {"unit": "us", "significant_digits": sorted(digits),
                                    "value": "highest equivalent value of its bucket"}}
        result.runs.append(ParsedRun(
            records=records,
            grid_point={"op": ops, **_params(config, where)},
            notes=notes,
            extra={"stated": stated, "stated_latency_ms": stated_ms, **source,
                   "target": target, "run_information": info,
                   **({"duration_ms": dur_ms} if dur_ms else {})},
            line=None,
        ))
        return result
