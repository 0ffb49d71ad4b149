"""A raw-results tree: its experiments, and its runs' manifests read and checked, each
run that cannot be read left out with why (`SkippedRun`).

`harness.analysis.data.load` turns what is read here into tables; filters (`where`) match a
run's flat row (`flatten_manifest`), the columns the runs table has.
"""

from __future__ import annotations

import difflib
import json
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from harness.errors import ResultsError, SchemaVersionError
from harness.results import (
    MANIFEST,
    OPS_FILE,
    STRAY_REASON,
    Manifest,
    iter_run_dirs,
    iter_stray_dirs,
    read_manifest,
)
from harness.results.labels import COLUMN_PREFIX as LABEL_PREFIX
from harness.results.labels import labels_key
from harness.results.manifest import COUNT_PREFIX, KIT_PREFIX, LOADGEN_PREFIX
from harness.results.verified import VerifiedCache
from harness.text import raw_stream

#: Fixed run-level columns, in order; parameter columns follow them.
RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "experiment",
    "workload",
    "config_id",
    "repetition",
    "status",
    "started_utc",
    "ended_utc",
    "source",
    "spec_file",
    "error",
    "labels",
)

Filter = Mapping[str, Any]




class SkippedRunWarning(UserWarning):
    """A run left out of an analysis; the message names its directory and why."""


@dataclass(frozen=True)
class SkippedRun:
    """A run the analysis could not use: where it is and why (for the report's appendix)."""

    run_dir: str
    reason: str
    run_id: str | None = None
    #: Whether its ops file was checked against a manifest's checksum (and failed), or
    #: never could be (no manifest, or one this kit cannot read).
    checked: bool = False


def skip_run(run_dir: Path, exc: Exception, run_id: str | None = None, *,
             checked: bool = False) -> SkippedRun:
    """Warn (stderr, via the CLI) that `run_dir` is skipped, and say so as a record."""
    reason = str(exc)
    # The reason usually starts with the file's path; the directory is named once already.
    for name in (MANIFEST, OPS_FILE):
        reason = reason.removeprefix(f"{Path(run_dir) / name}: ")
    warnings.warn(SkippedRunWarning(f"skipping run {run_dir}: {reason}"), stacklevel=3)
    return SkippedRun(str(run_dir), reason, run_id, checked)


def flatten_manifest(manifest: Manifest, run_dir: Path | None = None) -> dict[str, Any]:
    """One runs-table row from a manifest (nested mappings become prefixed columns)."""
    row: dict[str, Any] = {name: getattr(manifest, name) for name in RUN_COLUMNS}
    # The labels as one hashable text (pooling's key), and each as ``label_<key>``.
    row["labels"] = labels_key(manifest.labels)
    # grid_point after params: the grid value is what the run was varied on, so it wins.
    for source in (manifest.params, manifest.grid_point):
        for key, value in source.items():
            if key in RUN_COLUMNS:
                continue  # never let a parameter shadow an identity column
            # A list or mapping (a tampered or foreign manifest, a list-valued setting) as
            # its JSON text: every value of a grid column must be hashable and printable.
            row[key] = (json.dumps(value, sort_keys=True, default=str)
                        if isinstance(value, list | dict) else value)
    for prefix, mapping in (
        (LOADGEN_PREFIX, manifest.loadgen),
        (COUNT_PREFIX, manifest.counts),
        (KIT_PREFIX, manifest.kit),
    ):
        for key, value in mapping.items():
            row[prefix + key] = value
    for key, value in manifest.labels.items():
        row[LABEL_PREFIX + key] = value
    row["run_dir"] = str(run_dir) if run_dir is not None else None
    return row


def _matches(row: Mapping[str, Any], where: Filter | None) -> bool:
    if not where:
        return True
    for key, wanted in where.items():
        if key not in row:
            return False
        value = row[key]
        if isinstance(wanted, (list, tuple, set, frozenset)):
            if value not in wanted:
                return False
        elif callable(wanted):
            if not wanted(value):
                return False
        elif value != wanted:
            return False
    return True


def experiment_dirs(raw_dir: Path) -> dict[str, list[Path]]:
    """Experiment name -> its directories under `raw_dir`: a directory holding run
    directories, at the top (``raw/<experiment>/<run>``) or one level down, as `harness
    import -o raw/imported` writes them (``raw/imported/<experiment>/<run>``). Hidden
    directories are skipped. `raw_dir` may itself be one experiment."""
    raw_dir = Path(raw_dir)
    found: dict[str, list[Path]] = {}

    def holds_runs(d: Path) -> bool:
        return any((c / MANIFEST).exists() or (c / OPS_FILE).exists()
                   for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))

    def visible(d: Path) -> list[Path]:
        return sorted(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))

    if not raw_dir.is_dir() or (raw_dir / MANIFEST).exists():
        return found
    if holds_runs(raw_dir):
        return {raw_dir.name: [raw_dir]}
    for d in visible(raw_dir):
        if holds_runs(d):
            found.setdefault(d.name, []).append(d)
            continue
        for sub in visible(d):
            if holds_runs(sub):
                found.setdefault(sub.name, []).append(sub)
    return found


def trees(raw_dir: Path | Sequence[Path]) -> list[Path]:
    """One raw-results tree or several, as a list (`harness summary A B` pools several
    as one tree would: a run found twice counts once, the other copy a duplicate)."""
    if isinstance(raw_dir, str | Path):
        return [Path(raw_dir)]
    return [Path(d) for d in raw_dir]


def check_experiments(raw_dir: Path | Sequence[Path],
                      experiments: Sequence[str] | None) -> None:
    """Raise ResultsError, exit 2 at the CLI, for a tree without runs or an experiment
    name no tree holds (a typo would otherwise give an empty table, exit 0). Several
    trees: each must hold runs, and each name must be in one of them."""
    known: dict[str, list[Path]] = {}
    one_run = False  # a run's own directory: its experiment is whatever it says
    for tree in trees(raw_dir):
        if not tree.exists():
            raise ResultsError(f"{tree}: no such raw-results directory")
        if (tree / MANIFEST).exists():
            one_run = True
            continue
        found = experiment_dirs(tree)
        if not found:
            raise ResultsError(f"{tree}: no runs in it (no run directory with a "
                               "manifest.json); give the raw-results directory `harness "
                               "run` or `harness import` wrote")
        for name, dirs in found.items():
            known.setdefault(name, []).extend(dirs)
    where = ", ".join(str(t) for t in trees(raw_dir))
    for name in () if one_run else experiments or ():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ResultsError(f"{where}: no experiment {name!r}{hint}; experiments "
                               f"there: {', '.join(sorted(known))}")


def _experiment_dirs(raw_dir: Path, experiments: Sequence[str] | None) -> list[Path]:
    raw_dir = Path(raw_dir)
    if experiments is None:
        return [raw_dir]
    # Only the requested experiments' directories are walked: cheap on big trees.
    known = experiment_dirs(raw_dir)
    return [d for name in experiments for d in known.get(name, [])]


def read_manifests(
    raw_dir: Path,
    *,
    experiments: Sequence[str] | None = None,
    where: Filter | None = None,
    verify: bool = True,
    skip_unknown_schema: bool = True,
    skipped: list[SkippedRun] | None = None,
) -> list[tuple[Path, Manifest]]:
    """(run_dir, manifest) for every readable run, filtered.

    A run this kit cannot read (a newer schema_version, a corrupt manifest, an ops file
    that fails its checksum, an ops file without a manifest) is skipped with a
    `SkippedRunWarning` naming its directory and why, and appended to `skipped` if given:
    one foreign run never stops the analysis of the others. With
    ``skip_unknown_schema=False`` a newer schema raises `SchemaVersionError` instead.
    """
    pairs, left = read_tree(raw_dir, experiments=experiments, where=where,
                                  verify=verify, skip_unknown_schema=skip_unknown_schema)
    if skipped is not None:
        skipped.extend(left)
    return pairs


def read_tree(
    raw_dir: Path,
    *,
    experiments: Sequence[str] | None,
    where: Filter | None,
    verify: bool,
    skip_unknown_schema: bool,
    progress: bool = False,
) -> tuple[list[tuple[Path, Manifest]], list[SkippedRun]]:
    raw_dir = Path(raw_dir)
    if not raw_dir.exists():
        raise ResultsError(f"{raw_dir}: no such raw-results directory")
    out: list[tuple[Path, Manifest]] = []
    skipped: list[SkippedRun] = []
    bases = _experiment_dirs(raw_dir, experiments)
    run_dirs = [d for base in bases for d in iter_run_dirs(base)]
    # An ops file without its manifest is no run, but its records are not dropped unsaid.
    for base in bases:
        for stray in iter_stray_dirs(base):
            skipped.append(skip_run(stray, ResultsError(STRAY_REASON)))
    cache = VerifiedCache() if verify else None
    # A bar only on a terminal: a CI log or captured stderr gets none of its frames.
    with tqdm(total=len(run_dirs), unit="run", desc="reading runs",
              file=raw_stream(sys.stderr),
              disable=not (progress and sys.stderr.isatty()), leave=False) as bar:
        for run_dir in run_dirs:
            bar.update(1)
            try:
                manifest = read_manifest(run_dir)
                if experiments is not None and manifest.experiment not in experiments:
                    continue
                if where and not _matches(flatten_manifest(manifest, run_dir), where):
                    continue
            except SchemaVersionError as exc:
                if not skip_unknown_schema:
                    raise
                skipped.append(skip_run(run_dir, exc))
                continue
            except ResultsError as exc:
                skipped.append(skip_run(run_dir, exc))
                continue
            try:
                if cache is not None:
                    cache.verify(run_dir, manifest)
            except ResultsError as exc:
                skipped.append(skip_run(run_dir, exc, manifest.run_id, checked=True))
                continue
            out.append((run_dir, manifest))
    if cache is not None:
        cache.save()
    return out, skipped


def grid_keys(manifests: Iterable[Manifest]) -> tuple[str, ...]:
    """Union of the grid_point keys of `manifests`, in first-seen order."""
    keys: dict[str, None] = {}
    for manifest in manifests:
        keys.update(dict.fromkeys(manifest.grid_point))
    return tuple(keys)


def available_experiments(raw_dir: Path) -> list[str]:
    """Experiment names under `raw_dir` (`experiment_dirs`; empty if it does not exist)."""
    return sorted(experiment_dirs(raw_dir))
