"""Imported results: intervals over runs only; a single run gets none and says so."""

from __future__ import annotations

from pathlib import Path

from harness.analysis.sections import imported
from harness.analysis.stats import multiplicity
from harness.cli import main
from tests.importers.conftest import LEGACY, LEGACY_FILES


def _seed(number: str) -> Path:
    """The seed report's figures as they travel with the repository (examples/legacy)."""
    return LEGACY / LEGACY_FILES[number]


def test_one_perfctest_run_gets_no_interval_over_its_ops(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    assert main(["import", "perfctest", str(_seed("000")), "-o", str(raw),
                 "--experiment", "seed000"]) == 0
    capsys.readouterr()
    page = imported.analyse(raw).perfctest().data
    assert "One run each, so no interval" in page
    assert "95% CI" not in page and "CI over operations" not in page


def test_gae_bench_sets_are_the_runs_of_its_intervals(tmp_path: Path, capsys) -> None:
    raw = tmp_path / "raw"
    assert main(["import", "gae-bench", str(_seed("001")), "-o", str(raw), "--count", "50",
                 "--size", "100"]) == 0
    capsys.readouterr()
    study = imported.analyse(raw)
    per = study.per_run
    assert per.groupby("op")["run_id"].nunique().min() >= 2  # one run per set
    page = study.gae_bench().data
    assert "95% CI over sets" in page


def test_the_seeds_factors_are_claims_of_the_one_family(tmp_path: Path, capsys) -> None:
    """Issue 26, p.36: "p = 0.04, so the data reject exactly 3x" was an unadjusted p
    beside a section whose other claims were adjusted (Holm over its four tests: 0.08).
    Now the seed's factors are claims of the file's one family: each sentence gives the
    raw and the adjusted p, says "reject" only where the adjusted p is below q, and says
    whether the ratio's printed interval, at the family's level, contains the factor."""
    import html
    import re

    from tests.fixtures.claims import assert_prose_matches, assert_wording_rule

    raw = tmp_path / "raw"
    assert main(["import", "gae-bench", str(_seed("001")), "-o", str(raw)]) == 0
    capsys.readouterr()
    study = imported.analyse(raw)
    text = html.unescape(study.gae_bench().data)
    per = study.per_run.assign(op=lambda f: f["op"].astype(str))
    _, judged = study._family(per, [o for o in imported.OPS if o in set(per["op"])])
    level = multiplicity.fmt_level(judged.family.level)
    factors = re.findall(
        r"about (\d+)× faster\" for [^:]+: the ratio's ([\d.]+%) CI ([\d.]+)–([\d.]+)× "
        r"(contains|excludes) \1; .*? gives p (?:=|<) ([\d.]+), BH-adjusted p (?:=|<) "
        r"([\d.]+), so the data (reject|do not reject)", text)
    assert len(factors) == 2, text
    for k, lvl, lo, hi, inside, _p, p_adj, verdict in factors:
        assert lvl == level
        assert (inside == "contains") == (float(lo) <= int(k) <= float(hi))
        assert (verdict == "reject") == (float(p_adj) < 0.05) == (inside == "excludes")
    m = len(judged)
    assert f"These {m} claims (every pair of operations and the seed's 2 stated factors) " \
           f"are one family: {judged.sentence('claims')}" in text
    findings = text[text.index("<ul>"):]  # the sentences, not the ratio table above
    assert_prose_matches(findings, judged, at_least=2)
    assert_wording_rule(findings, at_least=4)
