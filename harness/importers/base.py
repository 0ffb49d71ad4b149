"""The importer contract: a file in some tool's format -> parsed runs, plus the noise skipped.

An importer only reads; `harness.importers.writer` turns its `ImportResult` into run
directories. What a source does not state stays absent: a parser never fills a gap with
a guess, it says in `notes` what is missing.

Two kinds of records come out of a parser:

* measured: one latency per op, as the source printed them (`Records.measured`);
* aggregated: the source printed only a total time T for N ops (or a count and a mean),
  so the run gets N records of T/N each (`Records.aggregate`); their sum is T exactly,
  in integer nanoseconds, and the run is flagged ``aggregated`` in its manifest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.errors import ImportFormatError
from harness.importers.numbers import DEFAULT_MAX_OPS


@dataclass(frozen=True)
class Records:
    """The ops of one op name in one run.

    Either ``latencies_ns`` (measured, in the order they ran) or ``count`` ops taking
    ``total_ns`` together (aggregated). ``wall_ns``: the wall time the ops spanned when
    they ran concurrently (so throughput = count / wall); None means one after another.
    ``start_ns``: measured ops' start times where the source gives a time axis (the
    writer then uses them as they are).
    """

    op: str
    latencies_ns: np.ndarray | None = None
    count: int = 0
    total_ns: float = 0.0
    wall_ns: float | None = None
    status: str = "ok"
    nbytes: int = 0
    start_ns: np.ndarray | None = None

    @classmethod
    def measured(cls, op: str, latencies_ns: Sequence[float], **kw: Any) -> Records:
        return cls(op, latencies_ns=np.asarray(latencies_ns, dtype=np.float64), **kw)

    @classmethod
    def aggregate(cls, op: str, count: int, total_ns: float, **kw: Any) -> Records:
        if count <= 0:
            raise ValueError(f"aggregate of {op!r} needs a positive op count, not {count}")
        return cls(op, count=int(count), total_ns=float(total_ns), **kw)

    @property
    def aggregated(self) -> bool:
        return self.latencies_ns is None

    def latencies(self) -> np.ndarray:
        """Integer nanoseconds per op; an aggregate's ops share the total exactly."""
        if self.latencies_ns is not None:
            return np.rint(self.latencies_ns).astype(np.int64)
        total = round(self.total_ns)
        base, rem = divmod(total, self.count)
        lat = np.full(self.count, base, np.int64)
        lat[:rem] += 1  # spread the remainder: sum == total, mean == T/N to the ns
        return lat


@dataclass
class ParsedRun:
    """One run as the source describes it.

    ``grid_point``: the parameters that identify its configuration (``op`` always, under
    the built-in studies' names); ``params``: other stated parameters; ``repetition``:
    the source's own numbering of repeated measurements (None: numbered by the writer);
    ``extra``: stated figures and context kept verbatim (rounded values the source
    printed, node lists, settings); ``line``: where its data starts in the file.
    """

    records: list[Records]
    grid_point: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    repetition: int | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None

    @property
    def aggregated(self) -> bool:
        return any(r.aggregated for r in self.records)

    @property
    def op_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.op for r in self.records))


@dataclass
class ImportResult:
    """Everything parsed from one file: runs, noise lines skipped, file-level notes."""

    format: str
    path: Path
    runs: list[ParsedRun] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImportOptions:
    """What some formats cannot know from the file (e.g. gae-bench's ops per set,
    redis-benchmark's requests per test in its CSV)."""

    count: int | None = None
    size: int | None = None
    requests: int | None = None
    #: Ops (records) the import may rebuild in all (`numbers.DEFAULT_MAX_OPS`).
    max_ops: int = DEFAULT_MAX_OPS


class Importer(Protocol):
    """A format: `name` as typed on the command line, `parse` a file of it."""

    name: str
    description: str

    def parse(self, path: Path, options: ImportOptions) -> ImportResult: ...


def read_lines(path: Path) -> list[str]:
    """The file's lines, with non-breaking spaces (from pasted documents) made plain."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    text = raw.decode("utf-8", errors="replace").replace("\u00a0", " ")
    return text.splitlines()


def ends_cut(path: Path) -> bool:
    """True when the file's last line has no line break: it may have been cut short."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            if f.tell() == 0:
                return False
            f.seek(-1, 2)
            return f.read(1) not in (b"\n", b"\r")
    except OSError:
        return False


class Noise:
    """Collects the lines a parser could not use (blank lines are not noise)."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def skip(self, line_no: int, text: str) -> None:
        if text.strip():
            self.lines.append((line_no, text.rstrip()))


def nothing_found(path: Path, fmt: str) -> ImportFormatError:
    return ImportFormatError(f"{path}: no {fmt} records found")


def slug(text: str) -> str:
    """An op name from a free-text test name: ``'MSET (10 keys)'`` -> ``'mset_10_keys'``
    (``'unnamed'`` when nothing of it is a letter or digit)."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "unnamed"
