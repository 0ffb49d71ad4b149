"""Writing a client process's records to disk in chunks while it runs (`Spiller`).

A worker's `Recorder` seals its columns every `CHUNK_RECORDS` records (`Recorder.seal`)
and hands the `Chunk` to `Spiller.sink`; a thread of its own writes its raw columns
(`results.columns.RecordColumns`: 24 bytes an op in closed loop) beside the run's
records file (`part_path`), hashing them as they are written, then frees the columns
for later records. The records are derived from the columns where they are read, on
the harness's machine, not on the client's core the load generator needs. The last,
partly filled columns go to the records file itself at the end (`harness.run.worker`), so
a run short enough for one chunk has no part files and nothing changes for it. The
status file lists the parts in order (`parts`): the harness copies each, checks it and
writes them into ops.parquet one after the other (`harness.run.transfer`,
`harness.results.stream`).

The thread holds the GIL only briefly (zipfile's calls per member; numpy, hashlib and
the writes release it): the native core runs without the GIL, and the Python paths
lose a few ms once per chunk.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from harness.loadgen.recorder import Chunk

if TYPE_CHECKING:
    from harness.loadgen.run import ClientRun


def part_path(out: str | Path, k: int) -> Path:
    """The file of chunk `k` of the records file `out` (``c3.npz`` -> ``c3.part00000.npz``)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.part{k:05d}.npz")


class _HashingWriter:
    """A file written front to back, hashed as it goes: the part's sha256 without
    reading it back. It has no `seek`, so zipfile (numpy's npz) writes each member's
    sizes after its data instead of going back to its header, and the bytes hashed are
    the file's."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.bytes += memoryview(data).nbytes
        return self.f.write(data)

    def tell(self) -> int:
        return self.bytes

    def read(self, size: int = -1) -> bytes:
        # numpy takes an object with `read` for a file rather than a path
        raise io.UnsupportedOperation("written only")

    def flush(self) -> None:
        self.f.flush()


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
        #: The process's start lag (`harness.run.worker`): set before the first op.
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
            cols = self.run.columns(self.op_names, self.offset_ns, chunk)
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as f:
                hashed = _HashingWriter(f)
                cols.save_npz(hashed)  # type: ignore[arg-type]
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            entry = {"file": str(path), "sha256": hashed.sha256.hexdigest(),
                     "bytes": hashed.bytes, "records": len(cols)}
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
                Path(tmp).write_text(json.dumps(listed, allow_nan=False))  # names, counts
                os.replace(tmp, self.index)
            except OSError:
                pass  # the status file lists the parts too; this is for a crash only
        self.run.rec.written(chunk)

    def close(self) -> list[dict[str, Any]]:
        """Wait for the chunks being written and try once more any that failed (one that
        fails again stays in memory: `unwritten`, which `harness.run.worker` saves to the
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
