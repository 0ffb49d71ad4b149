"""Throughput and p99 over time per configuration, by DuckDB over the ops files.

`over_time(loaded, by, bin_s)` cuts each run's measured ops into bins of `bin_s` by when
they began (``intended_ns`` in open loop, else ``start_ns``: seconds since the run's
start, as in the summary's wall time) and gives, per group of `by` and bin, the ops per
second and the p99 latency of the ops begun in it. Groups are formed as `harness summary`
forms them (`queries.plan`: grid keys run-level, op or client ops-level), and nothing is
held per op in Python: the files are scanned in place, so a long run costs its bins.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded
from harness.analysis.data.queries import _ops_view, connect, plan

#: A bin the group's runs measured for less than this share of its length (a run's first
#: and last, cut by its start and end) is left out: its rate would be a sliver's noise.
MIN_COVERED = 0.5
#: Bin lengths `nice_bin` picks from, in seconds.
_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
          60.0)


def nice_bin(longest_s: float, bins: int = 40) -> float:
    """A round bin length (1-2-5 steps) giving about `bins` bins over `longest_s`:
    1 s bins for a 40 s run, 20 ms for a 1 s one."""
    want = longest_s / bins if longest_s > 0 else 1.0
    return next((s for s in _STEPS if s >= want), _STEPS[-1])


def run_span_s(loaded: Loaded) -> float:
    """The longest measured span of a run (first measured begin to last end), seconds."""
    if not len(loaded.runs):
        return 0.0
    con = connect()
    _ops_view(con, loaded, plan(loaded, []))
    (span,) = con.execute(
        "SELECT max(s) FROM (SELECT max(b + lat) - min(b) AS s FROM o GROUP BY run_pos)"
    ).fetchone()
    return float(span or 0) / 1e9


def over_time(loaded: Loaded, by: Sequence[str], bin_s: float) -> pd.DataFrame:
    """Per group of `by` and bin: ``t_s`` (the bin's start, s since run start),
    ``runs`` (runs with ops begun in it), ``ops``, ``throughput_ops_s`` (the bin's ops
    over the time the group's runs measured within it, so a run that ends early does
    not pull the rate down) and ``latency_p99_ms`` (of the ops begun in it, failed ones
    included, as in the summary; under 100 ops it is nearly their maximum)."""
    columns = [*by, "t_s", "runs", "ops", "throughput_ops_s", "latency_p99_ms"]
    if not len(loaded.runs):
        return pd.DataFrame(columns=columns)
    p = plan(loaded, by)
    con = connect()
    _ops_view(con, loaded, p)
    keys = "".join(f", {k}" for k in p.ops_keys)
    width = round(bin_s * 1e9)
    cells = con.execute(f"""
        SELECT rgroup{keys}, (b // {width})::BIGINT AS k, count(*) AS ops,
               count(DISTINCT run_pos) AS runs, quantile_cont(lat, 0.99) / 1e6 AS p99
        FROM o GROUP BY ALL ORDER BY ALL
    """).df()
    spans = con.execute(f"""
        SELECT rgroup{keys}, run_pos, min(b)::DOUBLE AS b0, max(b + lat)::DOUBLE AS b1
        FROM o GROUP BY ALL
    """).df()
    gkeys = ["rgroup", *p.ops_keys]
    rows = []
    span_groups = dict(iter(spans.groupby(gkeys, sort=False, dropna=False)))
    for g, cell in cells.groupby(gkeys, sort=False, dropna=False):
        span = span_groups[g]
        k = cell["k"].to_numpy(np.float64)[:, None]
        b0, b1 = span["b0"].to_numpy()[None, :], span["b1"].to_numpy()[None, :]
        # Time each run measured inside each bin: the overlap of [k w, (k+1) w) and
        # [first begin, last end] of its ops in the group.
        covered = np.clip(np.minimum((k + 1) * width, b1) - np.maximum(k * width, b0),
                          0, None).sum(axis=1)
        keep = covered >= MIN_COVERED * width * cell["runs"].to_numpy()
        key = g if isinstance(g, tuple) else (g,)
        values = p.key_values(key)
        for kk, n, runs, p99, cov in zip(cell["k"][keep], cell["ops"][keep],
                                         cell["runs"][keep], cell["p99"][keep],
                                         covered[keep], strict=True):
            rows.append([*values, kk * bin_s, int(runs), int(n), n / (cov / 1e9), p99])
    return pd.DataFrame(rows, columns=columns)
