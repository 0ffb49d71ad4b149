"""The typed manifest of a run, its one builder, and the flattened column names.

A manifest says everything needed to interpret and reproduce one run. Producers (the
runner, importers, test fixtures, benchmarks) build it with `new_manifest`, which fills
what can be derived (config_id, schema_version) and checks the shape; readers get it from
`io.read_manifest`, upgraded to the current version (`migrations`).

The runs table of `harness.analysis.load` flattens the nested mappings into prefixed
columns (``loadgen_connections``, ``count_measured``, ``kit_git_commit``); the names
code reads by string are constants here, so a rename is one edit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.errors import ResultsError
from harness.results.ids import config_id as config_id_of
from harness.results.migrations import upgrade
from harness.results.schema import RUN_STATUSES, SCHEMA_VERSION

#: Prefixes of the flattened nested mappings in the runs table.
LOADGEN_PREFIX, COUNT_PREFIX, KIT_PREFIX = "loadgen_", "count_", "kit_"
#: Flattened columns read by name across the kit.
COL_COUNT_MEASURED = "count_measured"
COL_COUNT_WARMUP = "count_warmup"
COL_COUNT_ERROR = "count_error"
COL_COUNT_TIMEOUT = "count_timeout"
COL_LOADGEN_CONNECTIONS = "loadgen_connections"
COL_LOADGEN_INFLIGHT = "loadgen_inflight"
COL_LOADGEN_PROCESSES = "loadgen_processes"
COL_LOADGEN_MODE = "loadgen_mode"
COL_KIT_GIT_COMMIT = "kit_git_commit"
#: Keys of ``extra`` with a meaning the kit relies on.
EXTRA_BASELINE = "baseline"
EXTRA_TIMELINE = "timeline"
EXTRA_AGGREGATED = "aggregated"
EXTRA_STATED_LATENCY_MS = "stated_latency_ms"
EXTRA_IMPORTED_FROM = "imported_from"


@dataclass(frozen=True)
class Manifest:
    """Everything needed to interpret and reproduce one run. Times are UTC ISO-8601."""

    run_id: str
    experiment: str
    workload: str
    config_id: str
    repetition: int
    params: Mapping[str, Any]
    grid_point: Mapping[str, Any]
    status: str
    started_utc: str
    ended_utc: str
    error: str | None = None
    hosts: Mapping[str, Any] = field(default_factory=dict)
    services: Mapping[str, Any] = field(default_factory=dict)
    loadgen: Mapping[str, Any] = field(default_factory=dict)
    kit: Mapping[str, Any] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    ops_file: Mapping[str, Any] = field(default_factory=dict)
    spec_file: str | None = None
    source: str = "harness"
    extra: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ResultsError(f"run status must be one of {RUN_STATUSES}, not {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "manifest") -> Manifest:
        data = upgrade(data, where)  # older versions are upgraded, newer ones refused
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ResultsError(f"{where}: unknown manifest fields {unknown}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ResultsError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Loadgen:
    """How the load was generated (``manifest.loadgen``); None: not applicable or unknown.

    Extra keys a producer knows (the runner's per-worker details) go into `more`."""

    processes: int | None = None
    connections: int | None = None
    inflight: int | None = None
    mode: str | None = None  # "closed" or "open"
    ops: int | None = None
    warmup_ops: int | None = None
    duration_s: float | None = None
    warmup_s: float | None = None
    timeout_s: float | None = None
    target_rate_ops_s: float | None = None
    more: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "more"}
        return {**out, **self.more}


def new_manifest(
    *,
    run_id: str,
    experiment: str,
    workload: str,
    repetition: int,
    grid_point: Mapping[str, Any],
    params: Mapping[str, Any] | None = None,
    config_id: str | None = None,
    status: str = "complete",
    started_utc: str = "",
    ended_utc: str = "",
    loadgen: Loadgen | Mapping[str, Any] | None = None,
    **rest: Any,
) -> Manifest:
    """The one way producers build a manifest (runner, importers, fixtures, benchmarks).

    `params` default to the grid point (which always wins over a parameter of the same
    name); `config_id` defaults to the spec's ``k=v,...`` form of the grid point;
    `loadgen` may be typed (`Loadgen`) or a mapping; every other `Manifest` field is
    passed through `rest` (hosts, services, kit, error, extra, source, spec_file).
    """
    unknown = sorted(set(rest) - {f.name for f in fields(Manifest)})
    if unknown:
        raise ResultsError(f"new_manifest: unknown manifest fields {unknown}")
    if "schema_version" in rest:
        raise ResultsError("new_manifest: schema_version is the kit's, not the producer's")
    lg = loadgen.to_dict() if isinstance(loadgen, Loadgen) else dict(loadgen or {})
    return Manifest(
        run_id=run_id,
        experiment=experiment,
        workload=workload,
        config_id=config_id if config_id is not None else config_id_of(dict(grid_point)),
        repetition=repetition,
        params={**(params or {}), **grid_point},
        grid_point=dict(grid_point),
        status=status,
        started_utc=started_utc,
        ended_utc=ended_utc,
        loadgen=lg,
        **rest,
    )
