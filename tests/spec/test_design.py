"""Fractional factorial designs: the sizes and resolutions of the standard tables, the
aliases they imply, and a spec's `design:` from validation to the runs it makes."""

from __future__ import annotations

import itertools
import math
import textwrap
from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.spec import expand, load_spec, ordered
from harness.spec.design import fractional

# (factors, resolution) -> runs, as Box, Hunter & Hunter's table of 2^(k-p) designs has them.
STANDARD = {(3, 3): 4, (4, 4): 8, (5, 5): 16, (5, 3): 8, (6, 4): 16, (7, 4): 16,
            (7, 3): 8, (8, 4): 16, (8, 5): 64, (9, 4): 32, (10, 5): 128, (11, 5): 128,
            (12, 5): 256, (12, 6): 256, (12, 4): 32}


@pytest.mark.parametrize(("k", "res"), sorted(STANDARD))
def test_the_smallest_design_of_each_resolution(k: int, res: int) -> None:
    d = fractional([f"f{i}" for i in range(k)], [(0, 1)] * k, res)
    rows = d.rows()
    assert len(rows) == STANDARD[(k, res)] and d.resolution >= res
    assert len(set(rows)) == len(rows)  # distinct combinations
    for i in range(k):  # every factor balanced: half its runs at each level
        assert sum(r[i] for r in rows) == 0
    # Resolution: no product of fewer than `res` columns is constant over the runs.
    for r in range(1, res):
        for combo in itertools.combinations(range(k), r):
            prods = {math.prod(row[i] for i in combo) for row in rows}
            assert prods == {-1, 1}


def test_a_half_of_four_factors_aliases_two_factor_interactions_in_pairs() -> None:
    d = fractional(list("ABCD"), [(0, 1)] * 4, 4)
    assert [d.name(w) for w in d.defining_relation] == ["A:B:C:D"]
    assert [d.name(a) for a in d.aliases(frozenset({0, 1}))] == ["C:D"]
    assert d.aliases(frozenset({0})) == []  # main effects clear of 2fi
    assert sum("aliased" in line for line in d.describe()) == 3


SPEC = """\
name: d1
workload: memcache_mix
services: {{cache: {{kind: memcached}}}}
grid:
  services.cache.threads: [1, 2]
  clients.connections: [2, 16]
  value_size_bytes: [100, 4096]
  key_dist: {dist}
design: {design}
repetitions: 3
run: {{ops: 100}}
"""


def _spec(tmp_path: Path, design: str, dist: str = "[uniform, zipfian]") -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(SPEC.format(design=design, dist=dist)))
    return path


def test_a_spec_runs_its_design_in_rounds(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "{kind: fractional, resolution: 4}"))
    plans = ordered(spec, expand(spec))
    assert spec.order == "rounds" and len(plans) == 8 * 3
    for rep in (1, 2, 3):  # every configuration once per round
        assert len({p.config_id for p in plans if p.repetition == rep}) == 8
    rounds = [[p.config_id for p in plans if p.repetition == rep] for rep in (1, 2, 3)]
    assert len({tuple(r) for r in rounds}) > 1  # each round in its own order
    assert len({p.config_id for p in plans}) == 8
    full = load_spec(_spec(tmp_path, "{kind: full}"))
    assert len(expand(full)) == 16 * 3 and full.design is None


@pytest.mark.parametrize(("design", "dist", "said"), [
    ("{kind: fractional, resolution: 4}", "[uniform, zipfian, hotspot]",
     "exactly two values"),
    ("{kind: fractional, resolution: 6}", "[uniform, zipfian]", "more than 4 factors"),
    ("{kind: fractional}", "[uniform, zipfian]", "an integer of 3 or more"),
    ("{kind: half}", "[uniform, zipfian]", "must be full or fractional"),
])
def test_a_design_the_grid_cannot_have_is_named(tmp_path: Path, design: str, dist: str,
                                                said: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(_spec(tmp_path, design, dist))
    assert any(said in p for p in info.value.problems), info.value.problems


TWELVE = """\
name: d12
workload: memcache_mix
services: {{cache: {{kind: memcached}}}}
grid:
  get_ratio: [0.5, 0.9]
  key_space: [1000, 2000]
  key_size_bytes: [16, 32]
  value_size_bytes: [100, 4096]
  key_dist: [uniform, zipfian]
  zipf_s: [0.9, 1.1]
  hotspot_keys: [0.1, 0.2]
  hotspot_ops: [0.8, 0.9]
  gaussian_sd: [0.1, 0.2]
  services.cache.memory_mb: [64, 128]
  services.cache.threads: [1, 2]
  clients.connections: [2, 4]
design: {{kind: fractional, resolution: 3}}
repetitions: {reps}
run: {{ops: 100}}
"""


def test_the_runs_of_a_design_are_its_own_not_the_full_grids(tmp_path: Path) -> None:
    """Twelve keys: the design runs 16 of the 4,096 points, so 25 repetitions are 400
    runs (the full grid's 102,400 would pass the limit); 7,000 are 112,000, refused as
    the design's."""
    path = tmp_path / "d12.yaml"
    path.write_text(TWELVE.format(reps=25))
    assert len(expand(load_spec(path))) == 16 * 25
    path.write_text(TWELVE.format(reps=7000))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "a 2^(12-8) design's 16 configurations x 7000 repetitions = 112,000 runs" in str(
        info.value)
