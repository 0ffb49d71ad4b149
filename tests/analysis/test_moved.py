"""The flat names of `harness.analysis` from before its grouping (issue 42) still import,
as a user's notebook wrote them: each old module name is its new module, and the five
that became packages (checks, stats, history, explore, explain) give their old
module's names."""

from __future__ import annotations

import importlib

import pytest

import harness.analysis as analysis


def test_every_old_module_name_is_its_new_module() -> None:
    for old, new in analysis.MOVED.items():
        assert getattr(analysis, old) is importlib.import_module(f"harness.analysis.{new}")
    from harness.analysis import history_report, overview

    assert overview.analyse and history_report.section


def test_the_names_that_became_packages_keep_their_modules_names() -> None:
    from harness.analysis import checks, explain, explore, history, stats
    from harness.analysis.checks import registry
    from harness.analysis.explain import analysis as explain_analysis
    from harness.analysis.explore import widgets
    from harness.analysis.history import changes
    from harness.analysis.stats import comparisons

    assert checks.CHECKS is registry.CHECKS and stats.compare_two is comparisons.compare_two
    # The gate grew into a module of its own (issue 49): `history.gate` names it.
    assert history.history is changes.history and explore.explorer is widgets.explorer
    assert explain.explain is explain_analysis.explain
    assert stats.intervals.__name__ == "harness.analysis.stats.intervals"  # a submodule
    with pytest.raises(AttributeError):
        analysis.nothing_here  # noqa: B018
    with pytest.raises(AttributeError):
        checks.nothing_here  # noqa: B018
