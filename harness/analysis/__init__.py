"""Everything a notebook needs to turn raw results into numbers, figures and sentences.

Submodules (import them explicitly; importing this package loads none of them, so the
CLI's `harness summary` does not pay for matplotlib):

- `load`     raw_results -> runs and ops DataFrames
- `pooling`  which runs are pooled (complete, one per repetition) and which left out, why
- `summary`  per-run and per-configuration summaries (`summarise`)
- `summary_table`  `harness summary`'s table (DuckDB, stated percentiles, intervals)
- `stats`    confidence intervals, comparisons, ratio tables
- `checks`   was each measurement sound (client saturated, target not met, not steady,
  trend, cold first run, machine busy, heavy tail), on `runfacts` (what it reads of each
  run), `stationarity` (MSER-5, Mann-Kendall, the first run's prediction interval) and
  `tails` (Hill's tail index)
- `plots`    seaborn figures, saved as PNG and SVG
- `prose`    sentences for the report from the statistics
- `tables`   HTML rendering of tables for notebooks and the report
- `provenance` what ran where: hosts, services, versions, failures, the run listing
- `explore`  the explore notebook's widgets (experiment, metric, grouping), on
  `explore_data` (its numbers: `summary_table`'s, the CDF, `series` over time) and
  `charts` (Vega-Lite figures: zoomable in JupyterLab, PNG/SVG without a browser)
- `overview`, `methodology` the report's first two notebooks; each study's own analysis is
  in `harness.studies.<name>`
"""
