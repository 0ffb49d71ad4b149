"""Writing a client process's records to disk in chunks while it runs (`Spiller`).

A worker's `Recorder` seals its columns every `CHUNK_RECORDS` records (`Recorder.seal`)
and hands the `Chunk` to `Spiller.sink`; a thread of its own turns it into records
(`ClientRun.arrays`) and writes it beside the run's records file (`part_path`), with
its sha256, then frees the columns for later records. The last, partly filled columns
go to the records file itself at the end (`harness.worker`), so a run short enough for
one chunk has no part files and nothing changes for it. The status file lists the parts
in order (`parts`): the harness copies each, checks it and writes them into ops.parquet
one after the other (`harness.transfer`, `harness.results.stream`).

The thread holds the GIL only to convert a chunk (numpy, a few ms per million records)
and releases it to write: the native core runs without the GIL, and the Python paths
lose a few ms once per chunk.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.loadgen.recorder import Chunk
from harness.workerctl import sha256_of

if TYPE_CHECKING:
    from harness.loadgen.run import ClientRun


def part_path(out: str | Path, k: int) -> Path:
    """The file of chunk `k` of the records file `out` (``c3.npz`` -> ``c3.part00000.npz``)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.part{k:05d}.npz")


class Spiller:
    """The sink of a spilling `Recorder`: writes each sealed chunk in a thread."""

    def __init__(self, run: ClientRun, out: str | Path, op_names: tuple[str, ...],
                 index: str | None = None) -> None:
        """`index`: a JSON file rewritten after each part with the parts so far, so the
        parts of a process that dies (no status file) are still found and kept."""
        self.run = run
        self.out = Path(out)
        self.index = index
        self.op_names = op_names
        #: The process's start lag (`harness.worker`): set before the first op.
        self.offset_ns = 0
        #: The parts written: {"file", "sha256", "bytes", "records"}.
        self.parts: list[dict[str, Any]] = []
        #: Why a chunk could not be written (it stays in memory, written at `close`).
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="spill")
        self._pending: list[Future] = []

    def sink(self, chunk: Chunk) -> None:
        """`Recorder.sink`: called on the run's thread as a chunk is sealed."""
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(self._write, chunk))

    def _write(self, chunk: Chunk) -> None:
        path = part_path(self.out, chunk.k)
        try:
            arrays = self.run.arrays(self.op_names, self.offset_ns, chunk)
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as f:
                arrays.save_npz(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            digest = sha256_of(str(path))
            if digest is None:
                raise OSError(f"{path}: written, then not readable")
            entry = {"file": str(path), **digest, "records": len(arrays)}
        except Exception as exc:  # noqa: BLE001 - kept in memory, tried again at close
            with self._lock:
                self.errors.append(f"chunk {chunk.k} ({path}): {type(exc).__name__}: {exc}")
            return
        with self._lock:
            self.parts.append(entry)
            listed = sorted(self.parts, key=lambda p: p["file"])
        if self.index:
            try:
                tmp = f"{self.index}.tmp"
                Path(tmp).write_text(json.dumps(listed))
                os.replace(tmp, self.index)
            except OSError:
                pass  # the status file lists the parts too; this is for a crash only
        self.run.rec.written(chunk)

    def close(self) -> list[dict[str, Any]]:
        """Wait for the chunks being written and try once more any that failed (one that
        fails again stays in memory: `unwritten`, which `harness.worker` saves to the
        records file with the rest). The parts written, in record order."""
        for f in self._pending:
            f.result()
        self._pool.shutdown(wait=True)
        for chunk in self.unwritten():
            self._write(chunk)
        self.parts.sort(key=lambda p: p["file"])
        return list(self.parts)

    def unwritten(self) -> list[Chunk]:
        """Sealed chunks no part file holds (their writes failed)."""
        return [c for c in self.run.rec.sealed if not c.written]
