"""`memtier-json`: memtier_benchmark's ``--json-out-file`` output.

Layout read (memtier_benchmark's JSON, format version 2; older files lack some keys)::

    {"configuration": {"threads": 4, "clients": 50, "requests": 10000, "ratio": "1:10",
                       "data_size": 32, "pipeline": 1, "protocol": "redis", ...},
     "run information": {"Actual benchmark duration (seconds)": 2.91, ...},
     "ALL STATS": {"Runtime": {"Total duration": 2915, "Time unit": "MILLISECONDS"},
                   "Sets": {"Count": 28282, "Ops/sec": 9702.1, "Average Latency": 1.298,
                            "Min Latency": ..., "Max Latency": ...,
                            "Percentile Latencies": {"p50.00": 1.407, ...}, ...},
                   "Gets": {...}, "Waits": {...}, "Totals": {...}}}

Latencies are milliseconds. A file with several runs (``--run-count``) has no
"ALL STATS"; its "AGGREGATED AVERAGE RESULTS" are read instead, with a note.

memtier keeps aggregates, not per-op timings, so the run holds aggregated records: per
op type with a nonzero count, ``Count`` records of the average latency each, spread
evenly over the run's duration, so that per-op count, mean latency and Ops/sec
(count / duration) come out as memtier printed them. Percentiles, min and max are not
reproducible from such records: memtier's figures are kept in ``extra.stated`` and
``latency_p50_ms``/``p99`` of these runs are the mean, not a percentile. ``Count``
missing (older memtier): Ops/sec x duration, with a note. ``Totals`` is the sum of the
others and is only kept as stated.

One run per file. Params: ``op`` (the op types present, e.g. ``get+set``), ``threads``,
``connections`` (memtier's --clients, per thread), ``pipeline``, ``value_size_bytes``
(data_size), ``get_ratio`` (from the set:get ratio), ``protocol``; server and port in
``extra.target``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.errors import ImportFormatError
from harness.importers.base import (
    ImportOptions,
    ImportResult,
    ParsedRun,
    Records,
    nothing_found,
    slug,
)

NAME = "memtier-json"
_OPS = {"Sets": "set", "Gets": "get", "Waits": "wait"}
_NOT_OPS = {"Runtime", "Totals"}
_SECTIONS = ("ALL STATS", "AGGREGATED AVERAGE RESULTS")
_NS_PER_MS = 1e6


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


def _duration_ms(stats: dict, info: dict) -> float | None:
    runtime = _dict(stats.get("Runtime"))
    total = _num(runtime.get("Total duration"))
    unit = str(runtime.get("Time unit", "MILLISECONDS")).upper()
    if total and total > 0:
        return total / 1000 if unit == "MICROSECONDS" else total
    seconds = _num(info.get("Actual benchmark duration (seconds)"))
    return seconds * 1000 if seconds and seconds > 0 else None


def _params(config: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for src, dst in (("threads", "threads"), ("clients", "connections"),
                     ("pipeline", "pipeline"), ("data_size", "value_size_bytes"),
                     ("protocol", "protocol")):
        if isinstance(config.get(src), int | float | str) and not isinstance(
                config.get(src), bool):
            out[dst] = config[src]
    ratio = str(config.get("ratio", ""))
    sets, _, gets = ratio.partition(":")
    if sets.isdigit() and gets.isdigit() and int(sets) + int(gets) > 0:
        out["get_ratio"] = round(int(gets) / (int(sets) + int(gets)), 6)
    return out


def _stated(block: dict) -> dict[str, Any]:
    keep = {k: v for k, v in block.items() if not isinstance(v, dict)}
    pct = block.get("Percentile Latencies")
    if isinstance(pct, dict):
        keep["percentiles_ms"] = {k: v for k, v in pct.items() if k.startswith("p")}
    return keep


class MemtierJson:
    name = NAME
    description = "memtier_benchmark --json-out-file output (aggregates per op type)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8", errors="replace"))
        except OSError as exc:
            raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{path}: not JSON (line {exc.lineno}: {exc.msg}); "
                                    f"no {NAME} records found") from None
        if not isinstance(data, dict):
            raise nothing_found(path, NAME)
        result = ImportResult(NAME, Path(path))
        section = next((s for s in _SECTIONS if isinstance(data.get(s), dict)), None)
        if section is None:
            raise nothing_found(path, NAME)
        if section != "ALL STATS":
            result.notes.append(f"several runs in the file: their {section!r} imported")
        stats = data[section]
        config = _dict(data.get("configuration"))
        info = _dict(data.get("run information"))
        dur_ms = _duration_ms(stats, info)
        notes: list[str] = ["aggregated records: percentiles in the summary are the mean; "
                            "memtier's own percentiles are in extra.stated"]
        if dur_ms is None:
            notes.append("run duration not stated; records laid back to back, so "
                         "throughput is not memtier's")
        records: list[Records] = []
        stated: dict[str, Any] = {}
        for key, block in stats.items():
            if key in _NOT_OPS or not isinstance(block, dict):
                if key == "Totals" and isinstance(block, dict):
                    stated[key] = _stated(block)
                continue
            op = _OPS.get(key) or slug(key)
            stated[key] = _stated(block)
            mean = _num(block.get("Average Latency", block.get("Latency")))
            count = _num(block.get("Count"))
            rate = _num(block.get("Ops/sec"))
            if count is None and rate and dur_ms:
                count = round(rate * dur_ms / 1000)
                notes.append(f"{key}: no Count in the file; {count} = Ops/sec x duration")
            if not count or count < 1 or mean is None or mean < 0:
                continue
            records.append(Records.aggregate(
                op, int(count), mean * _NS_PER_MS * int(count),
                wall_ns=dur_ms * _NS_PER_MS if dur_ms else None,
            ))
        if not records:
            raise nothing_found(path, NAME)
        ops = "+".join(sorted(r.op for r in records))
        target = {k: config[k] for k in ("server", "port", "uri") if config.get(k)}
        result.runs.append(ParsedRun(
            records=records,
            grid_point={"op": ops, **_params(config)},
            notes=notes,
            extra={"stated": stated, "target": target, "run_information": info,
                   **({"duration_ms": dur_ms} if dur_ms else {})},
            line=None,
        ))
        return result
