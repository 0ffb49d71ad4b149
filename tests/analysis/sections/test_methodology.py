"""The methodology page: its settings name the kit's one multiplicity rule, and its
sentences are written from the simulations' tables (every number in them is the table's)."""

from __future__ import annotations

import re

import pytest

from harness.analysis.sections import methodology


def test_settings_state_the_multiplicity_rule():
    text = " ".join(methodology.settings()["how"])
    assert "Holm" not in text
    assert "Benjamini-Hochberg" in text and "1 − R·q/m" in text and "Bonferroni" in text
    assert "better / worse exactly when the printed (adjusted) interval excludes 1" in text
    assert "each run counting once" in text and "tail index" in text and "heavy_tail" in text


def test_test_choice_sentence_states_the_tables_numbers():
    """Issue 26, p.6: "have power at 3-5 runs, where the rank tests have none" beside a
    table giving Mann-Whitney 0.736 at 4 runs and 0.896 at 5."""
    t = methodology.test_choice(runs=(3, 4, 5), sims=300)
    text = methodology.test_choice_sentence(t)
    mw = t[t["test"] == "Mann-Whitney U"].set_index("runs")["power at 1.3x"]
    kit = t[t["test"] == "Welch t on log ratio (the kit)"].set_index("runs")["power at 1.3x"]
    assert "Mann-Whitney cannot reject at 3 runs (power 0" in text
    for n in (4, 5):
        assert f"{mw[n]:.3g} against {kit[n]:.3g} at {n} runs" in text
    assert mw[4] > 0.3  # the rank test has power there, and the sentence says so
    assert "where the rank tests have none" not in text


@pytest.fixture(scope="module")
def family():
    return methodology.family_simulation(sims=25)


def test_bh_finds_more_than_holm_and_no_row_disagrees_with_its_interval(family):
    by = family.set_index("procedure")
    old, kit, gate = by.index
    bad = next(c for c in family.columns if c.startswith("rows disagreeing"))
    assert by.at[old, bad] > 0  # Holm beside unadjusted 95% intervals: the rows
    assert by.at[kit, bad] == 0 and by.at[gate, bad] == 0
    assert by.at[kit, "found at 1.5x"] > by.at[old, "found at 1.5x"] + 0.15
    assert by.at[kit, "false discovery rate"] < 0.1
    assert by.at[gate, "familywise error rate"] <= by.at[kit, "familywise error rate"]
    assert 0.95 <= by.at[kit, "mean level printed"] < 1


def test_family_sentence_states_the_tables_numbers(family):
    text = methodology.family_sentence(family)
    by = family.set_index("procedure")
    for value in re.findall(r"(\d+\.\d)% of the true", text):
        assert any(f"{100 * v:.1f}" == value
                   for c in family.columns if c.startswith("found at") for v in by[c])
    kit = by.index[1]
    assert f"false discovery rate of {by.at[kit, 'false discovery rate']:.3f}" in text
    assert "0 rows disagree with their interval" in text
