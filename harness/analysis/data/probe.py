"""The latency probe's ops (`clients.probe`, `harness.spec.probe`) in a summary: which
client ids of each run are the probe's (``loadgen.probe_clients`` in its manifest; runs
without, older ones included, have none), and the probe's latency per configuration,
read apart from the load's so that the load's figures never include it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.analysis.data.load import Loaded
from harness.results import OPS_FILE

if TYPE_CHECKING:
    import duckdb

    from harness.analysis.data.queries import Plan

#: The columns `harness summary` adds when any run has a probe.
PROBE_COLUMNS = ("probe_p50_ms", "probe_p99_ms")


def probe_clients(runs: pd.DataFrame) -> list[tuple[int, ...]]:
    """Per row of `runs`, the client ids of its probe (none for a run without)."""
    if "loadgen_probe_clients" not in runs.columns:
        return [()] * len(runs)
    return [tuple(int(c) for c in v) if isinstance(v, list | tuple | np.ndarray) else ()
            for v in runs["loadgen_probe_clients"]]


def probes_table(runs: pd.DataFrame) -> pd.DataFrame:
    """(run_pos, client) of every probe client, for DuckDB's anti-join."""
    rows = [(pos, c) for pos, cs in enumerate(probe_clients(runs)) for c in cs]
    return pd.DataFrame(rows, columns=["run_pos", "client"]).astype(np.int64)


def with_probe_columns(table: pd.DataFrame, loaded: Loaded, p: Plan,
                       con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """`table` (rows keyed by `p.by`) with `PROBE_COLUMNS`: the median and p99 of the
    probe's measured ops of each row's runs (NaN where none has a probe); unchanged when
    no run has one. Grouped by the run-level keys: a row split by op or client shows its
    configuration's probe."""
    probes = probes_table(loaded.runs)
    if probes.empty:
        return table
    files = pd.DataFrame({
        "filename": [str(Path(d) / OPS_FILE) for d in loaded.runs["run_dir"]],
        "run_pos": np.arange(len(loaded.runs), dtype=np.int64),
        "rgroup": p.run_codes.astype(np.int64)})
    con.register("probe_files", files)
    con.register("probes", probes)
    paths = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files["filename"]) + "]"
    found = con.execute(f"""
        SELECT f.rgroup, quantile_cont(p.latency_ns, [0.5, 0.99]) AS q
        FROM read_parquet({paths}, filename = true) p JOIN probe_files f USING (filename)
        JOIN probes q ON q.run_pos = f.run_pos AND q.client = p.client
        WHERE NOT p.warmup AND p.status::VARCHAR <> 'redirect'
        GROUP BY f.rgroup
    """).fetchall()
    by_group: dict[int, Any] = {int(g): q for g, q in found}
    keys = [tuple(r) for r in p.run_key_rows[p.run_keys].itertuples(index=False, name=None)]
    at = {k: by_group.get(code) for code, k in enumerate(keys)}
    rows = [tuple(r) for r in table[p.run_keys].itertuples(index=False, name=None)]
    qs = [at.get(r) for r in rows]
    return table.assign(**{col: [q[i] / 1e6 if q is not None else np.nan for q in qs]
                           for i, col in enumerate(PROBE_COLUMNS)})

