"""Importers: results other tools or scripts already produced -> the raw-results format.

`IMPORTERS` maps a format name (as typed after ``harness import``) to its parser;
`import_file` parses one file, `write_import` writes the parsed runs.
"""

from __future__ import annotations

from pathlib import Path

from harness.importers.base import Importer, ImportOptions, ImportResult, ParsedRun, Records
from harness.importers.cluster_perf import ClusterPerf
from harness.importers.gae_bench import GaeBench
from harness.importers.kv_report import KvReport
from harness.importers.memtier_json import MemtierJson
from harness.importers.perfctest import PerfcTest
from harness.importers.redis_benchmark_csv import RedisBenchmarkCsv
from harness.importers.writer import check_new, default_experiment, write_import
from harness.registry import Registry

IMPORTERS: Registry[Importer] = Registry("import format")
for _importer in (PerfcTest(), GaeBench(), ClusterPerf(), KvReport(), MemtierJson(),
                  RedisBenchmarkCsv()):
    IMPORTERS.add(_importer.name, _importer)


def import_file(fmt: str, path: Path, options: ImportOptions | None = None) -> ImportResult:
    """Parse `path` as `fmt`; raises ImportFormatError if nothing in it is recognisable."""
    return IMPORTERS.get(fmt).parse(Path(path), options or ImportOptions())


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
