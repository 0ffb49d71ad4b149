"""The overview notebook: what ran, on which hosts and servers, and what failed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.analysis import pooling, provenance, tables
from harness.analysis.display import html as _html
from harness.analysis.display import markdown as _markdown


@dataclass
class Overview:
    raw_dir: Path
    experiments: Sequence[str] | None
    #: Every run read (the tables below list them all).
    runs: pd.DataFrame
    #: Run statuses the report's numbers pool besides complete (`pooling`).
    include: tuple[str, ...] = ()

    def status(self):
        if self.runs.empty:
            return _markdown(f"**No runs found** under `{self.raw_dir}`: every study below "
                             "is reported as not run.")
        exps = sorted(self.runs["experiment"].unique())
        bad = int((self.runs["status"] != "complete").sum())
        text = (f"{len(self.runs)} runs in {len(exps)} experiment"
                f"{'s' if len(exps) != 1 else ''} ({', '.join(f'`{e}`' for e in exps)}), "
                f"read from `{self.raw_dir}`; every ops file matched its manifest checksum.")
        text += (f" {bad} runs did not complete (see Failures)." if bad
                 else " All runs completed.")
        # The studies pool with the same rule (pooling.pool), so these are their counts.
        text += " " + pooling.overview_sentence(pooling.pool(self.runs, self.include)[1],
                                                self.include)
        kits = provenance.kit_versions(self.runs)
        text += f" Measured with kit {', '.join(kits)}."
        return _markdown(text)

    def experiments_table(self):
        return _html(tables.to_html(provenance.experiments_table(self.runs),
                                    caption="Experiments: runs by status and measured ops."))

    def hosts_table(self):
        return _html(tables.to_html(
            provenance.hosts_table(self.raw_dir, self.experiments),
            caption="Hosts, as recorded in the run manifests.",
            headers={"cpu_model": "CPU", "cpu_count": "CPUs", "os": "OS"},
        ))

    def services_table(self):
        return _html(tables.to_html(provenance.services_table(self.raw_dir, self.experiments),
                                    caption="Servers under test and their versions."))

    def failures_table(self):
        return _html(tables.to_html(
            provenance.failures_table(self.runs),
            caption="Runs that did not complete or recorded errors/timeouts. Failed runs "
                    "are in no number of this report, partial ones only when included "
                    "(see above); the error and timeout ops of the runs that count are.",
        ))


def analyse(raw_dir: Path | str, experiments: Sequence[str] | None = None,
            include: Sequence[str] = ()) -> Overview:
    """The overview of `raw_dir`; `include`: what the report's numbers pool besides
    complete runs (the report's parameter), for the sentence on what they left out."""
    raw_dir = Path(raw_dir)
    return Overview(raw_dir, experiments, provenance.load_all_runs(raw_dir, experiments),
                    pooling.check_include(include))
