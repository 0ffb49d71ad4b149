"""Remembered verifications: hash a run's ops file once, not on every summary.

Checking the sha256 of every ops.parquet is the slowest part of reading a big tree (an
8 GB tree takes minutes). A run that verified is remembered by the size and mtime of its
manifest and ops file, in a cache outside the run directories (raw results are never
written to): ``$XDG_CACHE_HOME/kvbench/verified.json`` (default ``~/.cache``). A run whose
files changed in size or mtime is hashed again; `harness verify` always hashes everything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness import paths
from harness.errors import HarnessError
from harness.results.io import verify_run
from harness.results.manifest import Manifest
from harness.results.schema import MANIFEST, OPS_FILE

#: 2: verifications also check the ops columns are of the format's types.
CACHE_VERSION = 2


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvbench" / "verified.json"


def _stamp(run_dir: Path) -> list[int]:
    out: list[int] = []
    for name in (MANIFEST, OPS_FILE):
        st = (run_dir / name).stat()
        out += [st.st_size, st.st_mtime_ns]
    return out


class VerifiedCache:
    """Runs known to match their checksums; `save` once after a walk."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_path()
        self.changed = False
        try:
            data = json.loads(self.path.read_text())
            ok = isinstance(data, dict) and data.get("version") == CACHE_VERSION
            self.runs: dict[str, list[int]] = dict(data.get("runs", {})) if ok else {}
        except (OSError, ValueError):
            self.runs = {}  # no cache, or an unreadable one: verify everything

    def verify(self, run_dir: Path, manifest: Manifest) -> Manifest:
        """`verify_run`, unless this run verified before with the same files."""
        key = str(Path(run_dir).resolve())
        try:
            stamp = _stamp(Path(run_dir))
        except OSError:
            stamp = None
        if stamp is not None and self.runs.get(key) == stamp:
            return manifest
        verify_run(run_dir, manifest)
        if stamp is not None:
            self.runs[key] = stamp
            self.changed = True
        return manifest

    def save(self) -> None:
        """Write the cache atomically; a cache that cannot be written is only slower."""
        if not self.changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with paths.created(self.path) as f:  # never through a planted link
                f.write(json.dumps({"version": CACHE_VERSION, "runs": self.runs},
                                   allow_nan=False))  # sizes and times: integers
            self.changed = False
        except (OSError, HarnessError):
            pass
