"""Experiment specs: YAML -> validated `Spec` (`load`, with one section's checks in
`sections`) -> a deterministic list of `RunPlan`s (`plans`). The fields and records are
in `model`; the bounds a spec is held to in `limits`; reading its files and `--set`
values in `files`; an SLO and the capacity search's settings in `slo`. The names below
are the package's public face."""

from harness.results.ids import config_id
from harness.spec.load import DOTTED_KEY_FIELDS, load_spec
from harness.spec.model import (
    CLIENT_FIELDS,
    GRID_CLIENT_FIELDS,
    GRID_RUN_FIELDS,
    HOST_FIELDS,
    MAX_RUNS,
    MAX_SWEEP_VALUES,
    ORDERS,
    RUN_FIELDS,
    SERVER_MODES,
    TIMELINE_FIELDS,
    TOP_LEVEL,
    UNTIL_FIELDS,
    ClientSpec,
    DecideRule,
    RunPlan,
    RunSize,
    ServiceSpec,
    Spec,
    TimelineEvent,
    UntilRule,
    recorded_spec,
)
from harness.spec.plans import (
    MAX_CLOSED_OPS_S_PER_PROCESS,
    check_grid,
    check_plans,
    expand,
    ordered,
    records_per_run,
)
from harness.spec.sections import sweep_values

__all__ = [
    "CLIENT_FIELDS", "DOTTED_KEY_FIELDS", "GRID_CLIENT_FIELDS", "GRID_RUN_FIELDS",
    "HOST_FIELDS", "MAX_CLOSED_OPS_S_PER_PROCESS", "MAX_RUNS", "MAX_SWEEP_VALUES", "ORDERS",
    "RUN_FIELDS", "SERVER_MODES", "TIMELINE_FIELDS", "TOP_LEVEL", "UNTIL_FIELDS",
    "ClientSpec", "DecideRule", "RunPlan", "RunSize", "ServiceSpec", "Spec", "TimelineEvent",
    "UntilRule",
    "check_grid", "check_plans", "config_id", "expand", "load_spec", "ordered",
    "recorded_spec", "records_per_run", "sweep_values",
]
