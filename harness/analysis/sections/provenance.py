"""What ran, where, with what: hosts, services, versions, failures and the run listing,
all read from the manifests (the overview notebook and the report's appendix)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.analysis.data.load import SkippedRun, read_manifests, runs_frame
from harness.results import Manifest

HOST_FIELDS = ("hostname", "cpu_model", "cpu_count", "kernel", "python", "os")


def _pairs(raw_dir: Path, experiments: Sequence[str] | None,
           skipped: list[SkippedRun] | None = None) -> list[tuple[Path, Manifest]]:
    if not Path(raw_dir).exists():
        return []
    return read_manifests(Path(raw_dir), experiments=experiments, skipped=skipped)


def hosts_table(raw_dir: Path, experiments: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per machine, with the spec's names for it and the experiments that used
    it. A machine is its address and description (`HOST_FIELDS`): a spec whose ``client``
    and ``server`` are both this machine names one machine, not two."""
    rows: dict[tuple, dict] = {}
    for _, m in _pairs(raw_dir, experiments):
        for name, info in m.hosts.items():
            info = info if isinstance(info, dict) else {"hostname": str(info)}
            key = (str(info.get("address", "")), *(str(info.get(f, "")) for f in HOST_FIELDS))
            row = rows.setdefault(key, {"host": set(), "address": info.get("address"),
                                        **{f: info.get(f) for f in HOST_FIELDS},
                                        "experiments": set()})
            row["host"].add(str(name))
            row["experiments"].add(m.experiment)
    table = pd.DataFrame(list(rows.values()),
                         columns=["host", "address", *HOST_FIELDS, "experiments"])
    for col in ("host", "experiments"):
        table[col] = table[col].map(lambda s: ", ".join(sorted(s)))
    return table.sort_values(["host", "hostname"]).reset_index(drop=True)


def services_table(raw_dir: Path, experiments: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (service, kind, version, host), with the experiments that used it."""
    rows: dict[tuple, dict] = {}
    for _, m in _pairs(raw_dir, experiments):
        for name, info in m.services.items():
            info = info if isinstance(info, dict) else {}
            key = (name, str(info.get("kind")), str(info.get("version")), str(info.get("host")))
            row = rows.setdefault(key, {"service": name, "kind": info.get("kind"),
                                        "version": info.get("version"),
                                        "host": info.get("host"), "experiments": set()})
            row["experiments"].add(m.experiment)
    table = pd.DataFrame(list(rows.values()),
                         columns=["service", "kind", "version", "host", "experiments"])
    table["experiments"] = table["experiments"].map(lambda s: ", ".join(sorted(s)))
    return table.sort_values(["service", "version"]).reset_index(drop=True)


def _count(runs: pd.DataFrame, col: str) -> pd.Series:
    return runs[col].fillna(0) if col in runs.columns else pd.Series(0, index=runs.index)


def experiments_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per experiment: workload, configurations, runs by status, measured ops, time span."""
    if runs.empty:
        return pd.DataFrame(columns=["experiment", "workload", "configurations", "runs",
                                     "complete", "partial", "failed", "measured ops",
                                     "error ops", "first start (UTC)", "last end (UTC)",
                                     "kit"])
    r = runs.assign(
        _measured=_count(runs, "count_measured"),
        _errors=_count(runs, "count_error") + _count(runs, "count_timeout"),
    )
    rows = []
    for exp, g in r.groupby("experiment", sort=True):
        status = g["status"].value_counts()
        rows.append({
            "experiment": exp,
            "workload": ", ".join(sorted(g["workload"].astype(str).unique())),
            "configurations": g["config_id"].nunique(),
            "runs": len(g),
            "complete / partial / failed": " / ".join(
                str(int(status.get(k, 0))) for k in ("complete", "partial", "failed")
            ),
            "measured ops": int(g["_measured"].sum()),
            "error ops": int(g["_errors"].sum()),
            "when (UTC)": _span(g["started_utc"].min(), g["ended_utc"].max()),
        })
    return pd.DataFrame(rows)


def _span(first: str, last: str) -> str:
    """``2024-03-01 10:00 – 10:04`` (the date once when both ends share it)."""
    a = str(first).replace("T", " ")[:16]
    b = str(last).replace("T", " ")[:16]
    return f"{a} – {b[11:]}" if a[:10] == b[:10] else f"{a} – {b}"


def failures_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that did not complete, or whose ops include errors or timeouts."""
    cols = ["experiment", "run_id", "config_id", "repetition", "status", "error ops", "error"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    errors = (_count(runs, "count_error") + _count(runs, "count_timeout")).astype(int)
    # Assign before filtering: assigning a Series to an empty frame would adopt its index.
    flagged = runs.assign(**{"error ops": errors})
    bad = flagged[(flagged["status"] != "complete") | (errors > 0)]
    return bad[cols].reset_index(drop=True)


def imported(runs: pd.DataFrame) -> pd.Series:
    """Per run: whether it was imported from another tool's output (``source``
    ``imported``), so no version of this kit measured it."""
    return runs.get("source", pd.Series("harness", index=runs.index)).eq("imported")


def kit_versions(runs: pd.DataFrame) -> list[str]:
    """Distinct ``version (commit)`` of the kit that measured the runs. Imported runs are
    left out: no kit measured them, and a ``? (?)`` for them read as a kit nobody knew
    (`measured_by` says what did)."""
    runs = runs[~imported(runs)] if not runs.empty else runs
    if runs.empty:
        return []
    version = runs.get("kit_version", pd.Series("?", index=runs.index)).fillna("?")
    commit = runs.get("kit_git_commit", pd.Series("?", index=runs.index)).fillna("?")
    return sorted({f"{v} ({c})" for v, c in zip(version, commit, strict=True)})


def measured_by(runs: pd.DataFrame) -> str:
    """Who measured the runs, for the overview: ``Measured with kit 0.1.0 (abc).``, and
    for imported runs how many, of which experiments, measured by the tools of the
    reports they were imported from."""
    parts = []
    if kits := kit_versions(runs):
        parts.append(f"Measured with kit {', '.join(kits)}.")
    if not runs.empty and (mask := imported(runs)).any():
        exps = sorted(runs.loc[mask, "experiment"].astype(str).unique())
        n = int(mask.sum())
        parts.append(f"{n} imported run{'s' if n != 1 else ''} "
                     f"({', '.join(f'`{e}`' for e in exps)}) "
                     f"{'were' if n != 1 else 'was'} measured by the tools of the reports "
                     "they were imported from, not by this kit; the report shows their "
                     "stated figures.")
    return " ".join(parts)


def run_listing(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run, for the report's appendix."""
    cols = ["experiment", "run_id", "config_id", "repetition", "status", "started_utc",
            "measured ops", "errors"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    listing = runs.assign(
        started_utc=runs["started_utc"].astype(str).str.replace("T", " ").str[:19],
        **{"measured ops": _count(runs, "count_measured").astype(int),
           "errors": (_count(runs, "count_error") + _count(runs, "count_timeout")).astype(int)}
    )
    return listing[cols].sort_values(["experiment", "config_id", "repetition"]).reset_index(
        drop=True
    )


def load_all_runs(raw_dir: Path, experiments: Sequence[str] | None = None,
                  skipped: list[SkippedRun] | None = None) -> pd.DataFrame:
    """The runs table (every run, not pooled), or an empty one when `raw_dir` does not
    exist (nothing ran yet); the runs skipped are appended to `skipped` if given."""
    return runs_frame(_pairs(raw_dir, experiments, skipped))
