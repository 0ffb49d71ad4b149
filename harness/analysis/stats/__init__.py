"""Statistics: numbers in, estimates, intervals and tests out; no raw results read here.

- `intervals`  run-level intervals (jackknife over runs, t), percentiles' tail rule
- `loo`        leave-one-run-out percentiles from one sort (DuckDB), for those intervals
- `estimates`  one configuration's estimates with their methods
- `comparisons` two groups compared (`compare_two`, pairwise families, ratio tables)
- `verdict`    the one verdict rule: better, worse, no significant difference, inconclusive
- `multiplicity` a family of claims: Benjamini-Hochberg (FCR intervals) or Bonferroni
- `stationarity` MSER-5 warm-up, Mann-Kendall trend, the first run's prediction interval
- `changepoints` binary segmentation with a permutation test (`harness history`)
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """`harness.analysis.stats.X` for the names of `comparisons` (where they lived before the
    package was grouped: `from harness.analysis import stats` in a notebook still works).
    A submodule's name is left to the import system."""
    import importlib
    import importlib.util

    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(f"{__name__}.comparisons"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
