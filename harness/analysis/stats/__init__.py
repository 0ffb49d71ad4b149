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

from harness.analysis import forward_to

#: The names of `comparisons`, which this package grew from (`harness.analysis.MOVED`).
__getattr__ = forward_to(__name__, "comparisons")
