"""A benchmark's `ClientRun` recording as a worker under `harness run` does: its records
sealed every `CHUNK_RECORDS` and written to part files by the spill thread, on the
client's core, while it runs (`harness.loadgen.spill`). Without this a run kept whole in
memory pays instead for pages it has never touched (at ~1.7 M ops/s, a fifth of the
core zeroing them), which `harness run` does not: the kit measured as users run it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from harness.loadgen import ClientRun
from harness.loadgen.recorder import CHUNK_RECORDS
from harness.loadgen.spill import Spiller
from harness.results import OpsArrays, OpsParts

__all__ = ["CHUNK_RECORDS", "Spilled"]


class Spilled:
    """Attach to a run built with ``chunk_records=CHUNK_RECORDS`` before it runs;
    `close` after it (the chunk being written is part of the run's cost), then
    `records` (read back after the timed window) and `remove`."""

    def __init__(self, run: ClientRun, op_names: tuple[str, ...]) -> None:
        if run.rec.chunk_records is None:
            raise ValueError("build the ClientRun with chunk_records=CHUNK_RECORDS")
        self.run, self.op_names = run, op_names
        self.dir = Path(tempfile.mkdtemp(prefix="kvbench-bench-"))
        self.spiller = Spiller(run, self.dir / "c0.npz", op_names)
        run.rec.sink = self.spiller.sink
        self.parts: list[Path] = []

    def close(self) -> None:
        self.parts = [Path(p["file"]) for p in self.spiller.close()]
        if self.spiller.errors:
            raise RuntimeError("; ".join(self.spiller.errors))

    def records(self) -> OpsArrays:
        """Every record of the run, the parts and the last columns, joined."""
        return OpsParts(self.op_names,
                        [*self.parts, self.run.arrays(self.op_names)]).joined()

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
