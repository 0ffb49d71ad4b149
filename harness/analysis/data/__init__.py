"""The data: a raw-results tree read once into runs, ops and per-run figures.

- `tree`       the tree's experiments and runs, read and checked; runs left out with why
- `pooling`    which runs a number pools (complete, one per repetition), the rest with why
- `load`       the runs and ops tables
- `opsread`    every run's ops read in one DuckDB pass (latencies, warm-up facts)
- `queries`    DuckDB queries over the Parquet files: per-configuration summaries
- `summary`    per-run and per-configuration summaries (`summarise`)
- `summary_ci` the summaries' intervals over runs
- `numbers`    a group's intervals, as the studies' tables use them
- `series`     throughput and latency per second
- `stated`     percentiles an imported file stated rather than measured
"""
