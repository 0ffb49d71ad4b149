"""Exporters: raw results -> formats other tools read (HdrHistogram logs, CSV tables).

`EXPORTERS` maps a format name (as typed after ``harness export``) to its function
``export(raw_dir, out, by=..., experiments=...) -> list[Path]`` (the files written).
An exporter only reads the raw results; its output must lie outside them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import ExportError
from harness.exporters.csv_tables import export_csv
from harness.exporters.hdr_log import export_hdr
from harness.registry import Registry

Exporter = Callable[..., list[Path]]
EXPORTERS: Registry[Exporter] = Registry("export format")
EXPORTERS.add("hdr", export_hdr)
EXPORTERS.add("csv", export_csv)


def check_outside(raw_dir: Path, out: Path) -> None:
    """Refuse an output inside the raw results (they are never edited)."""
    raw, target = Path(raw_dir).resolve(), Path(out).resolve()
    if target == raw or raw in target.parents:
        raise ExportError(f"{out}: inside the raw results {raw_dir}, which are never "
                          "edited; write the export elsewhere (e.g. -o exports/)")


__all__ = ["EXPORTERS", "check_outside", "export_csv", "export_hdr"]
