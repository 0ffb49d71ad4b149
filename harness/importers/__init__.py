"""Importers: results other tools or scripts already produced -> the raw-results format.

`IMPORTERS` maps a format name (as typed after ``harness import``) to its parser;
`import_file` parses one file, `write_import` writes the parsed runs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from harness.errors import ImportFormatError
from harness.importers.base import Importer, ImportOptions, ImportResult, ParsedRun, Records
from harness.importers.cluster_perf import ClusterPerf
from harness.importers.gae_bench import GaeBench
from harness.importers.kv_report import KvReport
from harness.importers.memtier_json import MemtierJson
from harness.importers.numbers import MAX_OPS, too_many
from harness.importers.perfctest import PerfcTest
from harness.importers.redis_benchmark_csv import RedisBenchmarkCsv
from harness.importers.redis_benchmark_text import RedisBenchmarkText
from harness.importers.writer import check_new, default_experiment, write_import
from harness.importers.ycsb_hdr import YcsbHdr
from harness.importers.ycsb_raw import YcsbRaw
from harness.importers.ycsb_text import YcsbText
from harness.registry import Registry

IMPORTERS: Registry[Importer] = Registry("import format")
for _importer in (PerfcTest(), GaeBench(), ClusterPerf(), KvReport(), MemtierJson(),
                  RedisBenchmarkCsv(), RedisBenchmarkText(), YcsbText(), YcsbRaw(), YcsbHdr()):
    IMPORTERS.add(_importer.name, _importer)


#: Aggregated records are expanded to one record per op: a larger count in one run is
#: a damaged file, not a measurement (the bound every importer's counts are read with).
MAX_RECORDS_PER_OP = MAX_OPS


def import_file(fmt: str, path: Path, options: ImportOptions | None = None) -> ImportResult:
    """Parse `path` as `fmt`; raises ImportFormatError if nothing in it is recognisable,
    or if what was parsed cannot be stored (absurd counts or times: a damaged file)."""
    options = options or ImportOptions()
    result = IMPORTERS.get(fmt).parse(Path(path), options)
    # Aggregates are counts until written: bounded before any record is made of them.
    total = sum(len(r.latencies_ns) if r.latencies_ns is not None else r.count
                for run in result.runs for r in run.records)
    if total > options.max_ops:
        raise too_many(str(path), total, options.max_ops)
    for run in result.runs:
        where = f"{path}:{run.line}" if run.line else str(path)
        for rec in run.records:
            problem = _implausible(rec)
            if problem:
                raise ImportFormatError(f"{where}: {rec.op}: {problem}; is the file damaged?")
    return result


def _implausible(rec: Records) -> str | None:
    if rec.latencies_ns is not None:
        lat = rec.latencies_ns
        if len(lat) > MAX_RECORDS_PER_OP:
            return f"{len(lat):,} latencies, more than {MAX_RECORDS_PER_OP:,}"
        if not (np.isfinite(lat).all() and (lat >= 0).all() and (lat < 2**62).all()):
            return "a latency that is negative, not finite or too large"
        if rec.start_ns is not None and len(rec.start_ns) != len(lat):
            return f"{len(rec.start_ns):,} start times for {len(lat):,} latencies"
    else:
        if rec.count > MAX_RECORDS_PER_OP:
            return f"{rec.count:,} ops, more than {MAX_RECORDS_PER_OP:,} records can hold"
        if not (math.isfinite(rec.total_ns) and 0 <= rec.total_ns < 2**62):
            return f"total time {rec.total_ns} ns is negative, not finite or too large"
    if rec.wall_ns is not None and not (math.isfinite(rec.wall_ns)
                                        and 0 < rec.wall_ns < 2**62):
        return f"wall time {rec.wall_ns} ns is not a positive finite time"
    return None


__all__ = [
    "IMPORTERS",
    "ImportOptions",
    "ImportResult",
    "Importer",
    "ParsedRun",
    "Records",
    "check_new",
    "default_experiment",
    "import_file",
    "write_import",
]
