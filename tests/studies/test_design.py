"""Notebook prose that states a spec's facts takes them from the spec."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from harness import paths
from harness.studies import STUDIES
from harness.studies.design import spec_design


def test_facts_are_the_specs():
    spec = STUDIES.get("filestore").specs[0].path()
    raw = yaml.safe_load(spec.read_text())
    d = spec_design(spec)
    assert d.configurations == math.prod(len(v) for v in raw["grid"].values())
    assert (d.repetitions, d.ops_per_run) == (raw["repetitions"], raw["run"]["ops"])
    text = d.sentence()
    assert f"{d.configurations} configurations" in text
    assert f"{raw['run']['ops']} measured ops" in text


def test_an_edited_spec_changes_the_sentence(tmp_path: Path):
    src = paths.experiments_dir() / "kv_cache.yaml"
    raw = yaml.safe_load(src.read_text())
    raw["repetitions"] = 7
    raw["grid"]["services.kv.strategy"] = ["LRU", "LFU"]
    edited = tmp_path / "kv_cache.yaml"
    edited.write_text(yaml.safe_dump(raw))
    text = spec_design(edited).sentence()
    assert "6 configurations" in text and "7 repetitions each" in text
    assert "(LRU, LFU)" in text
