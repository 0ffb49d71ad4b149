"""Every manifest the kit writes is strict JSON (issue 48 #3): a value that is not a
finite number, wherever in the manifest it is (a grid point, a typed loadgen float, a
server's configuration or counters, a machine's figures, an import's extra), is written
as null, never as the NaN or Infinity that Python's json writes by default and no strict
parser (JavaScript's JSON.parse, DuckDB's read_json, Go, Rust's serde) reads."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.results import MANIFEST, Loadgen, OpsArrays, new_manifest, read_manifest, write_run

NAN, INF = float("nan"), float("inf")


def strict(text: str) -> Any:
    """`text` read by a parser that refuses NaN, Infinity and -Infinity."""
    def refuse(constant: str) -> Any:
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def _write(tmp_path: Path, run_id: str = "r1", **fields: Any) -> Path:
    man = new_manifest(run_id=run_id, experiment="exp", workload="w", repetition=1,
                       grid_point=fields.pop("grid_point", {"op": "get"}),
                       started_utc="2026-01-01T00:00:00Z", ended_utc="2026-01-01T00:00:01Z",
                       **fields)
    return write_run(tmp_path, man, OpsArrays.empty(("get",))) / MANIFEST


def test_every_field_kind_with_numbers_that_are_not_finite_is_strict_json(
        tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        grid_point={"op": "get", "rate": NAN, "size": INF},
        params={"zipf_s": -INF, "ratio": np.float64("nan"), "k": 3},
        loadgen=Loadgen(processes=1, connections=2, mode="open", duration_s=NAN,
                        warmup_s=INF, timeout_s=1.5, target_rate_ops_s=-INF,
                        more={"per_worker": [{"rate": NAN}, {"rate": 2.0}]}),
        error="a message: nan and inf in words stay text",
        hosts={"client": {"load_1m": NAN, "cpu_count": 2, "mhz": [INF, 2400.5]}},
        services={"kv": {"kind": "redis", "version": "7.0.15",
                         "config": {"keyspace_misses": "nan", "ratio": NAN}}},
        kit={"version": "0.1", "git_dirty": False, "build_s": INF},
        counts={"ok": 0, "measured": 0, "warmup": 0, "total": 0},
        spec_file="spec.yaml", source="harness",
        extra={"baseline": {"rtt_ms": NAN}, "stated": {"p99": -INF},
               "nested": [[NAN, [INF, {"x": -INF}]], (1.0, NAN)],
               "numpy": np.float32("nan"), "big": 10**30},
        telemetry={"window_s": NAN, "counters": {"kv": {"kind": "redis",
                                                        "delta": {"keyspace_hits": INF}}},
                   "notes": ["counters: INFO: not finite numbers, left out"]},
        labels={"commit": "abc"},
    )
    text = path.read_text()
    data = strict(text)  # the point: no NaN or Infinity token anywhere
    assert "NaN" not in text and "Infinity" not in text
    assert data["grid_point"]["rate"] is None and data["grid_point"]["size"] is None
    assert data["params"]["ratio"] is None and data["params"]["k"] == 3
    assert data["loadgen"]["duration_s"] is None and data["loadgen"]["timeout_s"] == 1.5
    assert data["extra"]["nested"] == [[None, [None, {"x": None}]], [1.0, None]]
    assert data["extra"]["big"] == 10**30
    assert data["services"]["kv"]["config"] == {"keyspace_misses": "nan", "ratio": None}
    assert data["error"] == "a message: nan and inf in words stay text"
    # ... and the kit reads it back: the typed floats are "unknown", not an error.
    back = read_manifest(path.parent)
    assert back.typed_loadgen.duration_s is None and back.typed_loadgen.timeout_s == 1.5


#: JSON-like values as producers hand them over, every float Python has included.
_LEAF = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
         | st.floats(allow_nan=True, allow_infinity=True)
         | st.text(max_size=12))
_TREE = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=25)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(st.text(min_size=1, max_size=8), _TREE, max_size=5),
       telemetry=st.dictionaries(st.text(min_size=1, max_size=8), _TREE, max_size=5),
       config=st.dictionaries(st.text(min_size=1, max_size=8), _TREE, max_size=5),
       rate=st.floats(0, 1e6) | st.sampled_from([NAN, INF, -INF]))
def test_any_json_like_value_is_written_as_strict_json(
        tmp_path_factory: Any, extra: dict[str, Any], telemetry: dict[str, Any],
        config: dict[str, Any], rate: float) -> None:
    tmp = tmp_path_factory.mktemp("m")
    path = _write(tmp, extra={"any": extra}, telemetry=telemetry,
                  services={"kv": {"kind": "redis", "config": config}},
                  loadgen={"target_rate_ops_s": rate})
    data = strict(path.read_text())
    stored = data["loadgen"]["target_rate_ops_s"]
    assert stored == (rate if math.isfinite(rate) else None)
    read_manifest(path.parent)
