"""What ran, where, with what: hosts, services, versions, failures and the run listing,
all read from the manifests (the overview notebook and the report's appendix)."""

from __future__ import annotations

import re
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
    table["os"] = [_platform_words(o, k) for o, k in zip(table["os"], table["kernel"],
                                                         strict=True)]
    return table.sort_values(["host", "hostname"]).reset_index(drop=True)


def _platform_words(platform: object, kernel: object) -> object:
    """Python's platform string as words: ``Linux 6.18.44-fc-v782 x86_64 with
    glibc2.36`` for ``Linux-6.18.44-fc-v782-x86_64-with-glibc2.36``. It joins its parts
    with the hyphens its kernel release has too, so a narrow column cut it at any of
    them, the release among them; the release (the kernel column) finds the parts."""
    if not isinstance(platform, str) or not isinstance(kernel, str) or not kernel:
        return platform
    head, sep, rest = platform.partition(f"-{kernel}-")
    if not sep:
        return platform
    return f"{head} {kernel} {rest.replace('-with-', ' with ')}"


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
    """``2024-03-01 10:00 – 10:04`` (the date once when both ends share it); ``–`` when
    the runs have no times (imported ones)."""
    if not (isinstance(first, str) and first.strip()):
        return "–"
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


#: The end of a run id that names its run among its configuration's (its directory
#: ``<experiment>/<run id>`` ends with it): the kit's ids end ``-r001-<6 hex digits>``.
_ID_TAIL = re.compile(r"-([0-9a-f]{6,})$")


def short_id(run_id: str) -> str:
    """``784d07`` for ``20261128T233307Z-op=...-r001-784d07``; an id without such an end
    (one written by hand, an old import) whole."""
    m = _ID_TAIL.search(str(run_id))
    return m.group(1) if m else str(run_id)


def run_index(runs: pd.DataFrame) -> pd.DataFrame:
    """The report's appendix: one row per experiment and configuration, with how many
    runs it has, their measured ops and errors, when they ran, and every run by the end
    of its id (`short_id`), in repetition order, a run that did not complete marked with
    its status. A run per line took 25 pages of run ids, each cut
    over several lines (issue 51); the configuration and the repetition they spelled out
    are columns here, and the id's end finds the run's directory."""
    cols = ["experiment", "configuration", "runs", "measured ops", "errors", "when (UTC)",
            "run ids"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    r = runs.assign(_measured=_count(runs, "count_measured"),
                    _errors=_count(runs, "count_error") + _count(runs, "count_timeout"))
    rows = []
    for (exp, config), g in r.groupby(["experiment", "config_id"], sort=True):
        g = g.sort_values(["repetition", "started_utc", "run_id"])
        ids = [short_id(rid) + ("" if st == "complete" else f" ({st})")
               for rid, st in zip(g["run_id"], g["status"].astype(str), strict=True)]
        label = g["configuration"].iloc[0] if "configuration" in g else str(config)
        rows.append({
            "experiment": exp,
            "configuration": label or "all runs",  # an experiment without a grid
            "runs": len(g),
            "measured ops": int(g["_measured"].sum()),
            "errors": int(g["_errors"].sum()),
            "when (UTC)": _span(g["started_utc"].min(), g["ended_utc"].max()),
            "run ids": " ".join(ids),
        })
    return pd.DataFrame(rows, columns=cols).sort_values(
        ["experiment", "configuration"], kind="stable").reset_index(drop=True)


def load_all_runs(raw_dir: Path, experiments: Sequence[str] | None = None,
                  skipped: list[SkippedRun] | None = None) -> pd.DataFrame:
    """The runs table (every run, not pooled), or an empty one when `raw_dir` does not
    exist (nothing ran yet); the runs skipped are appended to `skipped` if given. Its
    ``configuration`` column is each run's grid point, ``k=v, k=v``."""
    pairs = _pairs(raw_dir, experiments, skipped)
    runs = runs_frame(pairs)
    labels = {m.run_id: ", ".join(f"{k}={v}" for k, v in m.grid_point.items())
              for _, m in pairs}
    return runs.assign(configuration=runs["run_id"].map(labels).fillna("")) \
        if len(runs) else runs.assign(configuration=pd.Series(dtype=object))
