"""The typed sections of a manifest (Loadgen, Counts, Kit, Extras) on manifests the kit
wrote earlier (tests/data/results/v1: a runner's run and imported runs): each reads the
stored mapping and writes it back unchanged, and producers may pass them typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.results import (
    Counts,
    Extras,
    Kit,
    Loadgen,
    Manifest,
    iter_run_dirs,
    new_manifest,
    read_manifest,
)

V1 = Path(__file__).resolve().parent.parent / "data" / "results" / "v1"
MANIFESTS = [read_manifest(d) for exp in sorted(V1.iterdir()) for d in iter_run_dirs(exp)]


def test_there_are_runner_and_imported_manifests() -> None:
    assert {m.source for m in MANIFESTS} == {"harness", "imported"}


@pytest.mark.parametrize("m", MANIFESTS, ids=lambda m: m.run_id)
def test_sections_read_and_write_back_unchanged(m: Manifest) -> None:
    assert Counts.from_dict(m.counts).to_dict() == dict(m.counts)
    assert Kit.from_dict(m.kit).to_dict() == dict(m.kit)
    assert Extras.from_dict(m.extra).to_dict() == dict(m.extra)
    lg = m.typed_loadgen.to_dict()
    assert {k: v for k, v in lg.items() if k in m.loadgen} == dict(m.loadgen)


def test_typed_fields_carry_the_stored_values() -> None:
    ran = next(m for m in MANIFESTS if m.source == "harness")
    counts = ran.typed_counts
    assert counts.measured == ran.counts["measured"] > 0
    assert counts.by_status["ok"] == ran.counts["ok"]
    assert sum(counts.by_status.values()) == counts.measured
    assert ran.typed_kit.git_commit == ran.kit["git_commit"]
    assert ran.typed_loadgen.connections == ran.loadgen["connections"]
    imported = next(m for m in MANIFESTS if m.source == "imported")
    x = imported.typed_extra
    assert x.imported_from == imported.extra["imported_from"] and x.imported_from["format"]
    assert x.aggregated == bool(imported.extra.get("aggregated"))


def test_producers_may_pass_typed_sections() -> None:
    common = dict(run_id="r", experiment="e", workload="w", repetition=1,
                  grid_point={"clients": 2})
    typed = new_manifest(**common, loadgen=Loadgen(connections=4, engine="native"),
                         counts=Counts(measured=10, by_status={"ok": 9, "error": 1}),
                         kit=Kit(version="1.0", git_commit="abc"),
                         extra=Extras(baseline={"rtt_ms": 0.1}, more={"note": "x"}))
    plain = new_manifest(**common, loadgen={**Loadgen(connections=4).to_dict(),
                                            "engine": "native"},
                         counts={"ok": 9, "error": 1, "measured": 10, "warmup": 0, "total": 0},
                         kit={"version": "1.0", "git_commit": "abc"},
                         extra={"baseline": {"rtt_ms": 0.1}, "note": "x"})
    assert typed.to_dict() == plain.to_dict()
    assert typed.typed_extra.baseline == {"rtt_ms": 0.1} and typed.typed_extra.more == {"note": "x"}
    assert typed.typed_loadgen.engine == "native"


def test_counts_of_open_loop_ops_never_sent() -> None:
    """`unsent` and `unsent_warmup` (issue 25): typed, 0 on manifests written before
    them, and written back only where they were stored or are not 0."""
    for m in MANIFESTS:
        assert m.typed_counts.unsent == 0 and m.typed_counts.unsent_warmup == 0
        assert "unsent" not in Counts.from_dict(m.counts).to_dict()
    stored = {"ok": 5, "measured": 5, "warmup": 2, "total": 7, "unsent": 0,
              "unsent_warmup": 0}
    assert Counts.from_dict(stored).to_dict() == stored
    counts = Counts.from_dict({"measured": 5, "unsent": 12, "unsent_warmup": 3})
    assert (counts.unsent, counts.unsent_warmup, counts.more) == (12, 3, {})
    assert Counts(measured=1, unsent=4).to_dict()["unsent"] == 4
