"""Schema versions and the steps that upgrade an older manifest to the current one.

As pyperf and asv do with their result files: every manifest carries ``schema_version``;
`upgrade` applies the registered steps one version at a time (v1 -> v2 -> ...), so a
run directory written by any earlier kit reads in every later one, unchanged on disk (raw
results are never edited in place). A version newer than this kit's is refused with
`SchemaVersionError`, which every reader turns into a named skip, never a crash.

Adding a version: bump `schema.SCHEMA_VERSION`, register the step from the previous one
here with `@step(previous)`, and keep a run directory written by the old kit under
tests/data/results/v<previous>/ (tests/results/test_migrations.py reads every one).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from harness.errors import ResultsError, SchemaVersionError
from harness.results.schema import OPS_SCHEMA, SCHEMA_VERSION

Step = Callable[[dict[str, Any]], dict[str, Any]]

#: from_version -> the step that turns a manifest of that version into one of the next.
STEPS: dict[int, Step] = {}


def step(from_version: int) -> Callable[[Step], Step]:
    """Register the upgrade from `from_version` to `from_version + 1` (once only)."""

    def register(fn: Step) -> Step:
        if from_version in STEPS:
            raise ResultsError(f"two upgrade steps from schema_version {from_version}")
        STEPS[from_version] = fn
        return fn

    return register


def known_versions(steps: Mapping[int, Step] | None = None,
                   current: int = SCHEMA_VERSION) -> frozenset[int]:
    """Versions that read: the current one and every one with a chain of steps up to it."""
    steps = STEPS if steps is None else steps
    known = {current}
    v = current - 1
    while v in steps:
        known.add(v)
        v -= 1
    return frozenset(known)


def upgrade(
    data: Mapping[str, Any],
    where: str = "manifest",
    *,
    steps: Mapping[int, Step] | None = None,
    current: int = SCHEMA_VERSION,
) -> dict[str, Any]:
    """A copy of manifest `data` at version `current` (the input is never modified)."""
    steps = STEPS if steps is None else steps
    version = data.get("schema_version")
    known = known_versions(steps, current)
    if not isinstance(version, int) or isinstance(version, bool) or version not in known:
        newer = isinstance(version, int) and version > current
        raise SchemaVersionError(
            f"{where}: schema_version {version!r} is not one this kit reads "
            f"(known: {sorted(known)}); "
            + ("it was written by a newer kit: upgrade the kit to read it" if newer
               else "the manifest is damaged or not one of ours")
        )
    out = copy.deepcopy(dict(data))
    while out["schema_version"] < current:
        v = out["schema_version"]
        out = steps[v](out)
        if out.get("schema_version") != v + 1:
            raise ResultsError(f"upgrade step from schema_version {v} did not set {v + 1}")
    return out


@step(1)
def _add_telemetry(data: dict[str, Any]) -> dict[str, Any]:
    """v2 added `telemetry`; a v1 run has none (it was not measured): an empty one."""
    data["telemetry"] = {}
    data["schema_version"] = 2
    return data


@step(2)
def _add_ops_columns(data: dict[str, Any]) -> dict[str, Any]:
    """v3 names the ops file's columns; every v2 file had exactly OPS_SCHEMA's (no keys)."""
    if isinstance(data.get("ops_file"), dict):
        data["ops_file"] = {**data["ops_file"], "columns": list(OPS_SCHEMA.names)}
    data["schema_version"] = 3
    return data


@step(3)
def _add_labels(data: dict[str, Any]) -> dict[str, Any]:
    """v4 added `labels`; a v3 run was labelled by nothing: none."""
    data["labels"] = {}
    data["schema_version"] = 4
    return data


KNOWN_SCHEMA_VERSIONS = known_versions()
