"""The `ycsb` workload's properties: YCSB's core workload presets (`workloads/workload{a..f}`),
every CoreWorkload property as a param, a run's properties with the preset filled in
(`Props`), and what a run's properties cannot do together or on its server
(`problems`, checked for every run before anything starts)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.settings import Setting
from harness.workloads.ycsb_gen import DISTRIBUTIONS
from harness.workloads.ycsb_stores import MemcachedStore

OPS = ("read", "update", "insert", "scan", "read_modify_write")
READ, UPDATE, INSERT, SCAN, READ_MODIFY_WRITE = range(len(OPS))
KINDS = ("redis", "memcached", "postgres")
#: YCSB's workload files (`workloads/workloada` ...): what each sets.
PRESETS: dict[str, dict[str, Any]] = {
    "a": {"read_proportion": 0.5, "update_proportion": 0.5, "request_distribution": "zipfian"},
    "b": {"read_proportion": 0.95, "update_proportion": 0.05,
          "request_distribution": "zipfian"},
    "c": {"read_proportion": 1.0, "request_distribution": "zipfian"},
    "d": {"read_proportion": 0.95, "insert_proportion": 0.05,
          "request_distribution": "latest"},
    "e": {"scan_proportion": 0.95, "insert_proportion": 0.05,
          "request_distribution": "zipfian", "max_scan_length": 100,
          "scan_length_distribution": "uniform"},
    "f": {"read_proportion": 0.5, "read_modify_write_proportion": 0.5,
          "request_distribution": "zipfian"},
}
#: What a preset leaves unset: proportions 0 (the files set each one), the rest
#: CoreWorkload's defaults.
PRESET_BASE: dict[str, Any] = {
    "read_proportion": 0.0, "update_proportion": 0.0, "insert_proportion": 0.0,
    "scan_proportion": 0.0, "read_modify_write_proportion": 0.0,
    "request_distribution": "uniform", "max_scan_length": 1000,
    "scan_length_distribution": "uniform",
}
PROPORTIONS = ("read_proportion", "update_proportion", "insert_proportion",
               "scan_proportion", "read_modify_write_proportion")
#: Records a load writes: prepare must finish within the runner's 300 s.
MAX_RECORDS = 5_000_000
#: memcached's default item limit (-I 1m), less its item header.
MEMCACHED_ITEM_BYTES = 1_000_000


def _preset_setting(types: tuple[type, ...], help_: str, **kw: Any) -> Setting:
    return Setting((*types, type(None)), None, f"{help_} (null: the preset's)", **kw)


PARAMS: dict[str, Setting] = {
    "workload": Setting((str,), "a", "YCSB core workload whose proportions and "
                        "distributions are the defaults", choices=tuple(PRESETS)),
    "record_count": Setting((int,), 1000, "recordcount: records the load writes",
                            low=1, high=MAX_RECORDS, why="prepare loads them within 300 s"),
    "operation_count": Setting((int,), 1000, "operationcount of one client process: only "
                               "sizes the zipfian key chooser's room for inserts "
                               "(run.ops or run.duration_s ends the run)", low=0,
                               high=2**31 - 1, why="a Java int in YCSB"),
    "field_count": Setting((int,), 10, "fieldcount", low=1, high=1000,
                           why="PostgreSQL's column limit is 1,600"),
    "field_length": Setting((int,), 100, "fieldlength: bytes of a field (the most, when "
                            "not constant)", low=1, high=1_000_000,
                            why="a field is one string per op"),
    "field_length_distribution": Setting((str,), "constant", "fieldlengthdistribution",
                                         choices=("constant", "uniform", "zipfian")),
    "read_proportion": _preset_setting((float,), "readproportion", low=0, high=1),
    "update_proportion": _preset_setting((float,), "updateproportion", low=0, high=1),
    "insert_proportion": _preset_setting((float,), "insertproportion", low=0, high=1),
    "scan_proportion": _preset_setting((float,), "scanproportion", low=0, high=1),
    "read_modify_write_proportion": _preset_setting((float,), "readmodifywriteproportion",
                                                    low=0, high=1),
    "request_distribution": _preset_setting((str,), "requestdistribution",
                                            choices=(*DISTRIBUTIONS, None)),
    "max_scan_length": _preset_setting((int,), "maxscanlength", low=1, high=1_000_000,
                                       why="a scan's records are held in memory"),
    "scan_length_distribution": _preset_setting((str,), "scanlengthdistribution",
                                                choices=("uniform", "zipfian", None)),
    "insert_order": Setting((str,), "hashed", "insertorder: keys user<fnvhash64(n)> "
                            "(hashed) or user<n> (ordered)", choices=("hashed", "ordered")),
    "zipfian_constant": Setting((float,), 0.99, "the zipfian and latest key choosers' "
                                "theta (YCSB fixes 0.99)", low=0, low_open=True, high=1),
    "hotspot_data_fraction": Setting((float,), 0.2, "hotspotdatafraction", low=0, high=1),
    "hotspot_opn_fraction": Setting((float,), 0.8, "hotspotopnfraction", low=0, high=1),
    "read_all_fields": Setting((bool,), True, "readallfields: read every field, else one"),
    "write_all_fields": Setting((bool,), False, "writeallfields: update every field, "
                                "else one"),
    "seed": Setting((int,), 0, "with the client id, seeds every random choice",
                    low=0, high=2**32 - 1),
}


@dataclass(frozen=True)
class Props:
    """The properties of one run: the params with the preset's values filled in."""

    workload: str
    record_count: int
    operation_count: int
    field_count: int
    field_length: int
    field_length_distribution: str
    proportions: tuple[float, ...]  # by OPS
    request_distribution: str
    max_scan_length: int
    scan_length_distribution: str
    ordered: bool
    zipfian_constant: float
    hotspot_data_fraction: float
    hotspot_opn_fraction: float
    read_all_fields: bool
    write_all_fields: bool
    seed: int

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Props:
        preset = {**PRESET_BASE, **PRESETS[params.get("workload", "a")]}

        def get(name: str) -> Any:
            value = params.get(name, PARAMS[name].default)
            return preset[name] if value is None and name in preset else value

        return cls(
            workload=get("workload"), record_count=get("record_count"),
            operation_count=get("operation_count"), field_count=get("field_count"),
            field_length=get("field_length"),
            field_length_distribution=get("field_length_distribution"),
            proportions=tuple(float(get(p)) for p in PROPORTIONS),
            request_distribution=get("request_distribution"),
            max_scan_length=get("max_scan_length"),
            scan_length_distribution=get("scan_length_distribution"),
            ordered=get("insert_order") == "ordered", zipfian_constant=get("zipfian_constant"),
            hotspot_data_fraction=get("hotspot_data_fraction"),
            hotspot_opn_fraction=get("hotspot_opn_fraction"),
            read_all_fields=get("read_all_fields"), write_all_fields=get("write_all_fields"),
            seed=get("seed"))

    @property
    def expected_new_keys(self) -> int:
        """CoreWorkload's room for inserts in the zipfian chooser ("2 is fudge factor")."""
        return int(self.operation_count * self.proportions[INSERT] * 2.0)


def problems(params: Mapping[str, Any], kind: str | None, inflight: int = 1) -> list[str]:
    """What one run's params cannot do, together and on server `kind`, as
    `params.<field>: message` (each value's own range is its Setting's)."""
    p = Props.of(params)
    out = []

    def named(name: str) -> str:  # the field that set it: the param, or the preset
        return f"params.{name}" if params.get(name) is not None else "params.workload"

    if sum(p.proportions) <= 0:
        out.append("params: every op's proportion is 0: nothing to draw")
    if kind == "memcached" and p.proportions[SCAN] > 0:
        out.append(f"{named('scan_proportion')}: memcached has no scans (YCSB's memcached "
                   f"binding answers NOT_IMPLEMENTED), and this run's scan_proportion is "
                   f"{p.proportions[SCAN]:g} (workload {p.workload!r}); run scans against "
                   "redis or postgres")
    if not p.zipfian_constant < 1:
        out.append("params.zipfian_constant: must be below 1 (Gray's method divides by "
                   "1 - theta)")
    if p.request_distribution == "latest" and p.record_count < 2:
        out.append(f"{named('request_distribution')}: latest needs record_count of at least "
                   "2 (its zipfian is over the last keynum)")
    if p.request_distribution == "hotspot":
        hot = int(p.record_count * p.hotspot_data_fraction)
        if hot < 1 and p.hotspot_opn_fraction > 0:
            out.append("params.hotspot_data_fraction: the hot set has no record "
                       f"({p.record_count} x {p.hotspot_data_fraction:g} < 1)")
        if p.record_count - hot < 1 and p.hotspot_opn_fraction < 1:
            out.append("params.hotspot_data_fraction: the cold set has no record")
    if kind == "memcached":
        size = len(MemcachedStore(p.field_count).document(["x" * p.field_length]
                                                           * p.field_count))
        if size > MEMCACHED_ITEM_BYTES:
            out.append(f"params.field_length: a record is {size:,} bytes as memcached's "
                       f"JSON value, above its {MEMCACHED_ITEM_BYTES:,}-byte item limit")
    if kind == "postgres" and inflight > 1:
        out.append("clients.inflight: PostgreSQL runs one query at a time per connection "
                   "(asyncpg); use clients.connections for more in flight")
    return out
