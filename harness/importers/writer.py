"""ImportResult -> run directories in the normal raw-results layout (via `write_run`).

Every imported run: status ``complete``, ``source: imported``, a fresh run_id, the
config_id of its grid point, and ``extra`` holding where it came from (file name, sha256,
format), whether its records are aggregated, how many noise lines the parser skipped and
its notes. Hosts, services, kit and the UTC times stay empty: the source does not state
them, and the importing machine is not the one that measured.

Repetitions continue after the ones already in the experiment for the same
configuration, so importing a second file of the same study adds to it. Importing the
same file (same sha256) into the same experiment twice is refused: it would count the
same measurements twice.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from harness.errors import ResultsError
from harness.importers.base import ImportResult, ParsedRun, Records
from harness.paths import MAX_NAME_CHARS
from harness.results import (
    MANIFEST,
    STATUS_CODE,
    Manifest,
    OpsArrays,
    new_manifest,
    sha256_file,
    write_run,
)
from harness.spec import config_id


def default_experiment(fmt: str, path: Path) -> str:
    """``<format>-<file stem>``, made safe as a directory name (cut to the length
    `harness.paths.name_problem` allows: a file's own name may be longer)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(path).stem).strip("._") or "file"
    return f"{fmt}-{stem}"[:MAX_NAME_CHARS]


def _layout(rec: Records, lat: np.ndarray, offset: int) -> np.ndarray:
    """Start times: back to back from `offset`, or spread so the ops span `wall_ns`."""
    n = lat.shape[0]
    if rec.start_ns is not None:
        return np.asarray(rec.start_ns, np.int64)
    if rec.wall_ns is None:
        return offset + np.concatenate([[0], np.cumsum(lat[:-1])]).astype(np.int64)
    if n == 1:
        return np.zeros(1, np.int64)
    # Evenly spaced starts, the last op ending exactly at wall_ns: ops / wall == rate.
    span = max(float(rec.wall_ns) - float(lat[-1]), 0.0)
    return np.rint(np.arange(n) * (span / (n - 1))).astype(np.int64)


def build_ops(records: Sequence[Records]) -> OpsArrays:
    """The OpsArrays of one run (client 0, no warm-up, no intended start)."""
    names = tuple(dict.fromkeys(r.op for r in records))
    parts: list[OpsArrays] = []
    offset = 0
    for rec in records:
        lat = rec.latencies()
        n = lat.shape[0]
        if n == 0:
            continue
        start = _layout(rec, lat, offset)
        if rec.wall_ns is None and rec.start_ns is None:
            offset = int(start[-1] + lat[-1])
        parts.append(OpsArrays(
            op_names=names,
            client=np.zeros(n, np.int32),
            op=np.full(n, names.index(rec.op), np.int8),
            start_ns=start,
            latency_ns=lat,
            intended_ns=np.full(n, -1, np.int64),
            status=np.full(n, STATUS_CODE[rec.status], np.int8),
            nbytes=np.full(n, rec.nbytes, np.int64),
            warmup=np.zeros(n, bool),
        ))
    return OpsArrays.concat(parts, names)


def _existing(exp_dir: Path) -> tuple[dict[str, int], dict[str, str]]:
    """Highest repetition per config_id, and sha256 -> file name of imported files."""
    reps: dict[str, int] = defaultdict(int)
    files: dict[str, str] = {}
    if not exp_dir.is_dir():
        return reps, files
    for man in exp_dir.glob(f"*/{MANIFEST}"):
        try:
            data = json.loads(man.read_text())
        except (OSError, ValueError):
            continue
        cfg, rep = data.get("config_id"), data.get("repetition")
        if isinstance(cfg, str) and isinstance(rep, int):
            reps[cfg] = max(reps[cfg], rep)
        src = (data.get("extra") or {}).get("imported_from") or {}
        if src.get("sha256"):
            files[src["sha256"]] = src.get("file", "?")
    return reps, files


def _manifest(run: ParsedRun, result: ImportResult, experiment: str, cfg: str, rep: int,
              source: dict[str, str]) -> Manifest:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    extra = {
        "imported_from": {**source, **({"line": run.line} if run.line else {})},
        "aggregated": run.aggregated,
        "skipped_lines": len(result.skipped),
        "notes": [*result.notes, *run.notes],
        **run.extra,
    }
    return new_manifest(
        run_id=f"imported-{stamp}-{cfg[:50]}-r{rep:03d}-{secrets.token_hex(3)}",
        experiment=experiment,
        workload=result.format,
        config_id=cfg,
        repetition=rep,
        params=run.params,
        grid_point=run.grid_point,
        status="complete",
        started_utc="",
        ended_utc="",
        source="imported",
        extra=extra,
    )


def check_new(result: ImportResult, raw_dir: Path, experiment: str) -> str:
    """The file's sha256; raises if the experiment holds runs imported from it already."""
    exp_dir = Path(raw_dir) / experiment
    digest = sha256_file(result.path)
    done = _existing(exp_dir)[1]
    if digest in done:
        raise ResultsError(
            f"{result.path}: already imported into {exp_dir} (as {done[digest]}); "
            "importing it again would count its measurements twice. Use another "
            "--experiment to keep a second copy."
        )
    return digest


def write_import(result: ImportResult, raw_dir: Path, experiment: str) -> list[Path]:
    """Write every run of `result` under `raw_dir/experiment`; return their directories."""
    digest = check_new(result, raw_dir, experiment)
    done_reps = _existing(Path(raw_dir) / experiment)[0]
    source = {"file": Path(result.path).name, "sha256": digest, "format": result.format}
    counters: dict[str, int] = defaultdict(int)
    written: list[Path] = []
    for run in result.runs:
        cfg = config_id(run.grid_point)
        counters[cfg] += 1
        rep = done_reps[cfg] + (run.repetition if run.repetition is not None else counters[cfg])
        manifest = _manifest(run, result, experiment, cfg, rep, source)
        written.append(write_run(Path(raw_dir), manifest, build_ops(run.records)))
    return written
