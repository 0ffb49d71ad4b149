"""The overview notebook: what ran, on which hosts and servers, and what failed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pandas as pd

from harness.analysis.data import pooling
from harness.analysis.data.load import SkippedRun
from harness.analysis.sections import provenance, tables
from harness.analysis.sections.display import failed_part
from harness.analysis.sections.display import html as _html
from harness.analysis.sections.display import markdown as _markdown
from harness.analysis.stats import stationarity


@dataclass
class Overview:
    raw_dir: Path
    experiments: Sequence[str] | None
    #: Every run read (the tables below list them all).
    runs: pd.DataFrame
    #: Run statuses the report's numbers pool besides complete (`pooling`).
    include: tuple[str, ...] = ()
    #: What could not be read as a run, with why (`load.read_manifests`).
    skipped: tuple[SkippedRun, ...] = ()

    def checksums(self) -> str:
        """How many ops files were checked against their manifests' checksums, how many
        matched, and what was skipped and why: true whatever happened (it claimed every
        file matched even when one was skipped)."""
        ok = len(self.runs)
        failed = sorted((s for s in self.skipped if s.checked), key=lambda s: s.run_dir)
        unchecked = sorted((s for s in self.skipped if not s.checked),
                           key=lambda s: s.run_dir)
        if not self.skipped:
            return (f"all {ok} ops files matched their manifests' checksums" if ok != 1
                    else "its ops file matched its manifest's checksum")
        text = (f"{ok + len(failed)} ops files checked against their manifests' checksums: "
                f"{ok} matched, {len(failed)} did not")
        if failed:
            text += f" ({self._items(failed)})"
        if unchecked:
            text += f"; {len(unchecked)} not checked ({self._items(unchecked)})"
        n = len(self.skipped)
        return (text + f". The {n} skipped {'are' if n != 1 else 'is'} in no table or "
                "figure; the appendix lists them with why")

    def _items(self, skipped: list[SkippedRun]) -> str:
        return "; ".join(f"`{_relative(s.run_dir, self.raw_dir)}`: {_short(s.reason)}"
                         for s in skipped)

    def status(self):
        if self.runs.empty and self.skipped:
            return _markdown(f"**No readable runs** under `{self.raw_dir}`: "
                             f"{self.checksums()}.")
        if self.runs.empty:
            return _markdown(f"**No runs found** under `{self.raw_dir}`: every study below "
                             "is reported as not run.")
        exps = sorted(self.runs["experiment"].unique())
        bad = int((self.runs["status"] != "complete").sum())
        text = (f"{len(self.runs)} runs in {len(exps)} experiment"
                f"{'s' if len(exps) != 1 else ''} ({', '.join(f'`{e}`' for e in exps)}), "
                f"read from `{self.raw_dir}`; {self.checksums()}.")
        text += (f" {bad} runs did not complete (see Failures)." if bad
                 else " All runs completed.")
        # The studies pool with the same rule (pooling.pool), so these are their counts.
        text += " " + pooling.overview_sentence(pooling.pool(self.runs, self.include)[1],
                                                self.include)
        if who := provenance.measured_by(self.runs):
            text += " " + who
        return _markdown(text)

    def experiments_table(self):
        # "configs": the header's one long word made the table wider than the page.
        return _html(tables.to_html(provenance.experiments_table(self.runs),
                                    caption="Experiments: runs by status and measured ops.",
                                    headers={"configurations": "configs"}))

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


    def checks_tables(self) -> None:
        """Display `checks_parts`: the overview's "Measurement checks"."""
        from IPython.display import display

        for part in self.checks_parts():
            display(part)

    def checks_parts(self) -> list[object]:
        """The measurement checks (`harness.analysis.checks.registry`) of every experiment's
        configurations, as `harness summary` groups and pools them: what each check asks;
        one table of counts (experiment x check: configurations where it failed, of
        those judged) and each check's worst case; the failed checks per experiment for
        the report's summary of findings (`answers.publish_checks`); and the rows per
        configuration, which the report moves to its appendix."""
        from harness.analysis.checks import registry as checks
        from harness.analysis.checks import words as checkwords
        from harness.analysis.checks.runfacts import group_runs
        from harness.analysis.data.load import load_runs_only
        from harness.analysis.data.summary import default_by
        from harness.analysis.sections import answers

        items = "".join(f"<li><code>{c.name}</code>: {escape(c.description)} "
                        f"({escape(c.threshold)})</li>" for c in checks.CHECKS.values())
        intro = (f"<p>Each configuration's runs are checked before their numbers are "
                 f"believed; a check fails in a configuration when it fails in enough of "
                 f"its runs (its false alarms on steady runs stay at or below 5% per "
                 f"configuration, by simulation). A run without what a check needs "
                 f"(telemetry, {stationarity.MIN_OPS} ops, a start time) is not judged by "
                 f"it.</p><ul>{items}</ul>")
        out: list[object] = []
        clean, bare, details = [], [], []
        counts: dict[str, dict[str, int]] = {}
        configs: dict[str, int] = {}
        worst: dict[str, tuple[float, str, str, str, str]] = {}
        exps = sorted(self.runs["experiment"].unique()) if len(self.runs) else []
        for exp in exps:
            try:
                loaded = load_runs_only(self.raw_dir, experiments=[exp],
                                        include=self.include)
                if not len(loaded.runs):
                    continue
                by = default_by(loaded)
                groups = group_runs(loaded, by)
                found = {k: checks.check_group(runs) for k, runs in groups.items()}
                label = [k for k in by if k != "experiment"]
                frame = checkwords.report_frame(found, by, label)
            except Exception as exc:  # noqa: BLE001 - one experiment, not the whole table
                out.append(failed_part(f"the measurement checks of `{exp}`", exc))
                continue
            configs[exp] = len(groups)
            counts[exp] = {}
            for key, fs in found.items():
                config = checkwords.configuration_label(key, by, label)
                for f in fs:
                    counts[exp][f.check] = counts[exp].get(f.check, 0) + 1
                    share = len(f.runs) / max(f.judged, 1)
                    case = (share, exp, config, f"{len(f.runs)} of {f.judged}", f.detail)
                    if f.check not in worst or case[0] > worst[f.check][0]:
                        worst[f.check] = case
            if not any(r.telemetry for runs in groups.values() for r in runs):
                bare.append(exp)
            if frame.empty:
                clean.append(exp)
                continue
            details.append(tables.to_html(frame, caption=f"{exp}: measurement checks that "
                                                         "failed, per configuration"))
        fired = [c for c in checks.CHECKS if any(c in cs for cs in counts.values())]
        fired += sorted({c for cs in counts.values() for c in cs} - set(fired))
        parts = [intro]
        if fired:
            table = pd.DataFrame(
                [[exp, *(f"{counts[exp][c]} of {configs[exp]}" if c in counts[exp]
                         else "" for c in fired)]
                 for exp in counts if counts[exp]],
                columns=["experiment", *fired])
            parts.append(tables.to_html(
                table, caption="Configurations in which each check failed, of those in "
                               "the experiment (the rows per configuration are in the "
                               "appendix, and beside the verdicts they qualify)"))
            cases = pd.DataFrame([[c, *worst[c][1:]] for c in fired],
                                 columns=["check", "experiment", "configuration", "runs",
                                          "detail"])
            parts.append(tables.to_html(
                cases, caption="The worst case of each check: the configuration where it "
                               "failed in the largest share of runs"))
        if clean:
            parts.append(f"<p>No check failed in {_names(clean)}.</p>")
        if bare:
            parts.append(f"<p>The runs of {_names(bare)} carry no telemetry (imported, or "
                         "measured before it was recorded): client_saturated and "
                         "machine_busy could not judge them.</p>")
        out.append(_html("".join(parts)))
        out.append(answers.publish_checks(counts))
        if details:
            out.append(_html("<h3>Measurement checks per configuration</h3>"
                             + "".join(details), appendix=True))
        return out


def _names(exps: Sequence[str]) -> str:
    return ", ".join(f"<code>{escape(e)}</code>" for e in exps)


def _relative(run_dir: str, raw_dir: Path) -> str:
    try:
        return str(Path(run_dir).relative_to(raw_dir))
    except ValueError:
        return str(run_dir)


def _short(reason: str) -> str:
    """A skip reason's first clause (``checksum mismatch``); the appendix has it all."""
    cuts = [i for i in (reason.find(" ("), reason.find(", "), reason.find("; ")) if i > 0]
    return reason[:min(cuts)] if cuts else reason


def analyse(raw_dir: Path | str, experiments: Sequence[str] | None = None,
            include: Sequence[str] = ()) -> Overview:
    """The overview of `raw_dir`; `include`: what the report's numbers pool besides
    complete runs (the report's parameter), for the sentence on what they left out."""
    raw_dir = Path(raw_dir)
    skipped: list[SkippedRun] = []
    runs = provenance.load_all_runs(raw_dir, experiments, skipped)
    return Overview(raw_dir, experiments, runs, pooling.check_include(include),
                    tuple(skipped))
