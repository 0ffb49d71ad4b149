"""The typed manifest of a run, its one builder, and the flattened column names.

A manifest says everything needed to interpret and reproduce one run. Producers (the
runner, importers, test fixtures, benchmarks) build it with `new_manifest`, which fills
what can be derived (config_id, schema_version) and checks the shape; readers get it from
`io.read_manifest`, upgraded to the current version (`migrations`).

The nested sections have typed views (`Loadgen`, `Counts`, `Kit`, `Extras`: the
`typed_*` properties of a manifest) that producers may also pass to `new_manifest`; on
disk they stay the plain JSON mappings of schema version 1, so nothing is migrated.

The runs table of `harness.analysis.data.load` flattens the nested mappings into prefixed
columns (``loadgen_connections``, ``count_measured``, ``kit_git_commit``); the names
code reads by string are constants here, so a rename is one edit.
"""

from __future__ import annotations

import functools
import re
from collections import abc
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from harness.errors import ResultsError
from harness.paths import name_problem
from harness.results.damage import DAMAGED, count_problem, damage_problem
from harness.results.ids import config_id as config_id_of
from harness.results.labels import labels_problems
from harness.results.migrations import upgrade
from harness.results.schema import RUN_STATUSES, SCHEMA_VERSION
from harness.text import printable

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

_S = TypeVar("_S", bound="_Section")

#: A run id names a directory: one plain name, as the runner and the importers make them.
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.,=+-]{0,254}$")
_MAP, _TEXT, _OPT_TEXT, _INT = (Mapping,), (str,), (str, type(None)), (int,)
#: The type of each top-level field, as every writer stores it.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": _TEXT, "experiment": _TEXT, "workload": _TEXT, "config_id": _TEXT,
    "repetition": _INT, "params": _MAP, "grid_point": _MAP, "status": _TEXT,
    "started_utc": _TEXT, "ended_utc": _TEXT, "error": _OPT_TEXT, "hosts": _MAP,
    "services": _MAP, "loadgen": _MAP, "kit": _MAP, "counts": _MAP, "ops_file": _MAP,
    "spec_file": _OPT_TEXT, "source": _TEXT, "extra": _MAP, "telemetry": _MAP,
    "labels": _MAP, "schema_version": _INT,
}
_TYPE_NAMES = {str: "text", int: "an integer", type(None): "null", Mapping: "an object"}
def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value is of a field's type (bool is no number here)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType):
        return any(_fits(value, a) for a in args)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint in (int, float):
        return isinstance(value, int | float if hint is float else int) and not isinstance(
            value, bool)
    if hint in (str, bool):
        return isinstance(value, hint)
    if origin in (Mapping, abc.Mapping, dict):
        return isinstance(value, Mapping) and (len(args) < 2 or all(
            _fits(v, args[1]) for v in value.values()))
    if origin in (Sequence, abc.Sequence, list, tuple):
        return isinstance(value, list | tuple) and (not args or all(
            _fits(v, args[0]) for v in value))
    return True


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


_SECTION_NAMES = {"Loadgen": "loadgen", "Counts": "counts", "Kit": "kit", "Extras": "extra"}
_SECTION_FIELDS = _SECTION_NAMES


class _Section:
    """A typed view of one of the manifest's mappings: the keys the kit gives a meaning
    are fields; any other key (a producer's own) is kept in `more`, so a manifest reads
    and writes back unchanged."""

    more: Mapping[str, Any]

    def __post_init__(self) -> None:
        # Read back from anywhere: each field of the type the kit writes, or refused.
        hints = _hints(type(self))
        for f in fields(self):  # type: ignore[arg-type]
            if f.name not in ("more", "stored") and not _fits(getattr(self, f.name),
                                                              hints[f.name]):
                raise ResultsError(f"manifest {_SECTION_NAMES[type(self).__name__]}."
                                   f"{f.name} is not {hints[f.name]}".replace("typing.", ""))

    @classmethod
    def from_dict(cls: type[_S], data: Mapping[str, Any] | None) -> _S:
        data = dict(data or {})
        known = {f.name for f in fields(cls)} - {"more", "stored"}  # type: ignore[arg-type]
        mine = {k: data.pop(k) for k in list(data) if k in known}
        return cls(**mine, more=data, stored=frozenset(mine))  # type: ignore[call-arg]

    def to_dict(self) -> dict[str, Any]:
        """The mapping as stored: the fields read from it or set (not at their
        default), then `more`."""
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.name in ("more", "stored"):
                continue
            value = getattr(self, f.name)
            default = f.default_factory() if callable(f.default_factory) else f.default
            if value != default or f.name in getattr(self, "stored", ()):
                out[f.name] = value
        return {**out, **self.more}


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
    #: Who used the CPUs during the run, on which machine, and the servers' counters
    #: (`harness.run.telemetry` writes it; empty where nothing was measured, e.g. imports).
    telemetry: Mapping[str, Any] = field(default_factory=dict)
    #: What was measured beyond the spec (`harness.results.labels`: commit, version).
    labels: Mapping[str, str] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        # A manifest read back may come from anywhere (a shared tree, an import): its
        # names become paths and its fields are read by type all over the kit.
        for name, types in _FIELD_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ResultsError(f"manifest field {name!r} must be "
                                   f"{' or '.join(_TYPE_NAMES[t] for t in types)}, "
                                   f"not {type(value).__name__}")
        if self.status not in RUN_STATUSES:
            raise ResultsError(f"run status must be one of {RUN_STATUSES}, not {self.status!r}")
        if problem := name_problem(self.experiment):
            raise ResultsError(f"manifest experiment {printable(self.experiment)!r}: {problem}")
        if not RUN_ID_RE.match(self.run_id):
            raise ResultsError(f"manifest run_id {printable(self.run_id)!r} is not a run id "
                               "(letters, digits and _.,=+- only: it names a directory)")
        if problems := labels_problems(self.labels):
            raise ResultsError(f"manifest {problems[0]}")
        for view in (Loadgen, Counts, Kit, Extras):  # each nested section of its types
            view.from_dict(getattr(self, _SECTION_FIELDS[view.__name__]))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def typed_loadgen(self) -> Loadgen:
        return Loadgen.from_dict(self.loadgen)

    @property
    def typed_counts(self) -> Counts:
        return Counts.from_dict(self.counts)

    @property
    def typed_kit(self) -> Kit:
        return Kit.from_dict(self.kit)

    @property
    def typed_extra(self) -> Extras:
        return Extras.from_dict(self.extra)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "manifest") -> Manifest:
        data = upgrade(data, where)  # older versions are upgraded, newer ones refused
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ResultsError(f"{where}: unknown manifest fields {unknown}")
        try:
            manifest = cls(**data)
        except (TypeError, ResultsError) as exc:  # named with the file it came from
            raise ResultsError(f"{where}: {exc}") from None
        if problem := damage_problem(manifest):
            raise ResultsError(f"{where}: manifest {problem}: {DAMAGED}")
        return manifest


@dataclass(frozen=True)
class Loadgen(_Section):
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
    engine: str | None = None  # "native", "python" or "mixed" (harness.loadgen.native)
    more: Mapping[str, Any] = field(default_factory=dict)
    stored: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Every field, None or not: the runs table has a column for each."""
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("more", "stored")}
        if self.engine is None and "engine" not in self.more:
            del out["engine"]  # runs written before issue 18 have none: keep them as they are
        return {**out, **self.more}


@dataclass(frozen=True)
class Counts(_Section):
    """``manifest.counts``: ops by status over the measured ops (`by_status`, stored as
    one key per status), measured and warm-up ops, and all records.

    Open loop: `unsent` ops were intended in the measured window and never sent by its
    end (the clients could not keep up); `unsent_warmup` warm-up ops were dropped at the
    warm-up's end or never sent. A run written before them reads 0 (none counted)."""

    measured: int = 0
    warmup: int = 0
    total: int = 0
    by_status: Mapping[str, int] = field(default_factory=dict)
    unsent: int = 0
    unsent_warmup: int = 0
    more: Mapping[str, Any] = field(default_factory=dict)
    #: Which of the optional counts `from_dict` read (written back even at 0).
    stored: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Counts:
        from harness.results.schema import STATUSES

        data = dict(data or {})

        def count(key: str, default: int = 0) -> int:
            value = data.pop(key, default)
            if problem := count_problem(value):
                raise ResultsError(f"manifest counts.{key} is {problem}: {DAMAGED}")
            return int(value)

        by_status = {k: count(k) for k in list(data) if k in STATUSES}
        optional = {k: count(k) for k in ("unsent", "unsent_warmup") if k in data}
        return cls(measured=count("measured"), warmup=count("warmup"),
                   total=count("total"), by_status=by_status, **optional,
                   more=data, stored=frozenset(optional))

    def to_dict(self) -> dict[str, Any]:
        # Closed-loop and older runs have no unsent counts: none are written for them.
        optional = {k: getattr(self, k) for k in ("unsent", "unsent_warmup")
                    if getattr(self, k) or k in self.stored}
        return {**self.by_status, "measured": self.measured, "warmup": self.warmup,
                "total": self.total, **optional, **self.more}


@dataclass(frozen=True)
class Kit(_Section):
    """``manifest.kit``: the kit that measured (`harness.hosts.inventory.kit_info`)."""

    version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    more: Mapping[str, Any] = field(default_factory=dict)
    #: The keys `from_dict` read (written back even at their default).
    stored: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


@dataclass(frozen=True)
class Extras(_Section):
    """``manifest.extra``, the keys the kit gives a meaning (any other stays in `more`):

    - baseline: a measurement before the run (`Workload.baseline`, e.g. the RTT);
    - timeline: the scale events of the run (`harness.run.timeline`);
    - pending_records: records still on client machines (`harness collect`);
    - collected_later: what `harness collect` fetched afterwards;
    - aggregated: an imported run whose records are per-op-kind means, not ops;
    - stated / stated_latency_ms: what an imported tool printed itself;
    - imported_from, skipped_lines, latency_source: an import's provenance;
    - spec: the spec the run was made from, as validated (overrides applied);
    - order: the run order and server mode of the grid (`spec.ordered`);
    - prepare: whether the workload's prepare ran (``{"ran": true, "s": ...}``) or the
      server kept an earlier run's data (``{"ran": false, "kept_from_run": ...}``).
    """

    baseline: Mapping[str, Any] | None = None
    timeline: Sequence[Mapping[str, Any]] = ()
    pending_records: Sequence[Mapping[str, Any]] = ()
    collected_later: Sequence[Mapping[str, Any]] = ()
    aggregated: bool = False
    stated: Mapping[str, Any] | None = None
    stated_latency_ms: Mapping[str, Any] | None = None
    imported_from: Mapping[str, Any] = field(default_factory=dict)
    skipped_lines: int = 0
    latency_source: str | None = None
    spec: Mapping[str, Any] | None = None
    more: Mapping[str, Any] = field(default_factory=dict)
    #: The keys `from_dict` read (written back even at their default).
    stored: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


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
    `loadgen` may be typed (`Loadgen`) or a mapping, and so may `counts` (`Counts`), `kit`
    (`Kit`) and `extra` (`Extras`); every other `Manifest` field is passed through `rest`
    (hosts, services, error, source, spec_file, telemetry, labels).
    """
    unknown = sorted(set(rest) - {f.name for f in fields(Manifest)})
    if unknown:
        raise ResultsError(f"new_manifest: unknown manifest fields {unknown}")
    if "schema_version" in rest:
        raise ResultsError("new_manifest: schema_version is the kit's, not the producer's")
    lg = loadgen.to_dict() if isinstance(loadgen, Loadgen) else dict(loadgen or {})
    for name in ("counts", "kit", "extra"):  # typed sections are stored as mappings
        if isinstance(rest.get(name), _Section):
            rest[name] = rest[name].to_dict()
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


def utc_seconds(stamp: object) -> float | None:
    """A manifest's ``started_utc``/``ended_utc`` as seconds since the epoch (a time
    without a zone read as UTC), or None where it is missing or no time (an import's)."""
    from datetime import UTC, datetime

    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        t = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
