"""What notebook 30-cluster shows: `analyse(raw_dir)` returns a `Study` whose methods
return displayable tables, figures and sentences (None, or a "not run" note, without
data). The numbers come from `analysis`, the figures from `plots`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.checks import tails
from harness.analysis.data.load import Loaded
from harness.analysis.sections import prose, tables
from harness.analysis.sections.answers import Answer, from_claim
from harness.analysis.sections.display import html as _html
from harness.analysis.sections.display import markdown as _markdown
from harness.analysis.stats import multiplicity
from harness.studies.base import StudyBase, as_path
from harness.studies.cluster import analysis as cluster
from harness.studies.cluster import plots as cluster_plots

WRITE_OPS = ("insert", "search_delete")


def _added(row) -> str:
    """``+1,266 µs per object, 97.5% CI 903 to 1,700``: the step's added time with the
    same adjusted interval as its ratio."""
    f = tables.num(3)
    return (f"{'+' if row.added_us >= 0 else '−'}{f(abs(row.added_us))} µs per object, "
            f"{multiplicity.fmt_level(row.level)} CI {f(row.added_low)} to "
            f"{f(row.added_high)}")


def _step_sentence(row, claim: multiplicity.Claim) -> str:
    """One step of the decomposition, worded by its claim's verdict: an effect is stated
    ("adds", "saves") only where the adjusted interval excludes none (1 for the ratio,
    0 for the µs, the same interval)."""
    what = "replication" if row.step == "replication" else "the network"
    head = f"{cluster.LABELS.get(row.op, row.op)}, {row.src} → {row.dst}: {what}"
    ratio = (f"{prose.fmt_ratio(row.ratio)} the time, "
             f"{prose.ci_text(row.level, row.ratio_low, row.ratio_high)}")
    evidence = prose.evidence_text(claim, int(row.n_from), int(row.n_to))
    if claim.significant:
        verb = "adds" if row.ratio > 1 else "saves"
        f = tables.num(3)
        # Magnitudes, smaller first: a saving of 50 (CI -80 to -20) reads "20 to 80".
        low, high = sorted((abs(row.added_low), abs(row.added_high)))
        return (f"{head} {verb} {f(abs(row.added_us))} µs per object "
                f"({multiplicity.fmt_level(row.level)} CI {f(low)} to {f(high)}; "
                f"{ratio}); {evidence}.")
    outcome = prose.outcome_text(claim)
    return f"{head} is {outcome} ({ratio}; {_added(row)}); {evidence}."


def _slope(row, what: str, unit: str) -> str:
    """A fitted slope in words: "adds" only where its 95% CI excludes 0."""
    f = tables.num(3)
    ci = f"95% CI {f(row['low'])} to {f(row['high'])}"
    if row["low"] > 0 or row["high"] < 0:
        verb = "adds" if row["estimate"] > 0 else "removes"
        return f"{what} {verb} {f(abs(row['estimate']))} {unit} ({ci})"
    return (f"{what}: {f(row['estimate'])} {unit} ({ci}, which includes 0: no effect "
            "shown)")


def _ci(v: float, low: float, high: float, digits: int = 3, unit: str = "") -> str:
    f = tables.num(digits)
    if math.isnan(low):
        return f"{f(v)}{unit}"
    return f"{f(v)}{unit} ({f(low)}–{f(high)})"


@dataclass
class Study(StudyBase):
    experiment: str = cluster.EXPERIMENT
    loaded: Loaded | None = None
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)

    name = "cluster"

    @property
    def experiments(self) -> tuple[str, ...]:
        return (self.experiment,)

    @property
    def ran(self) -> bool:
        return self.loaded is not None and not self.runs.empty

    @property
    def ops(self) -> list[str]:
        return cluster.op_order(self.runs)

    @property
    def setups(self) -> list[str]:
        return cluster.setup_order(self.runs)

    def table(self) -> pd.DataFrame:
        return cluster.seed_table(self.runs)

    def decomposition(self) -> pd.DataFrame:
        return cluster.decomposition(self.runs, self.alpha)

    def tail_checks(self) -> list[tuple[tails.GroupChecks, tails.Label]]:
        checks = tails.group_checks(Loaded(self.runs[["run_id", "setup"]], self.loaded.ops),
                                    ["op", "setup"])
        return [(checks, lambda k: f"{cluster.LABELS.get(k[0], k[0])}, {k[1]}")]

    # --- text ------------------------------------------------------------------------
    def describe(self):
        r = self.runs
        reps = r.groupby(["setup", "op"]).size()
        n = f"{reps.min()}" if reps.min() == reps.max() else f"{reps.min()}–{reps.max()}"
        text = (f"Data: experiment `{self.experiment}`, {len(r)} runs: {len(self.setups)} "
                f"setups × {len(self.ops)} operations, {n} runs each, "
                f"{int(r['objects'].median()):,} objects per run.")
        net = r[r["mode"] == "network-cluster"]
        if len(net):
            emus = sorted(set(net["emulation"]))
            how = {"netem": "the kernel's netem qdisc", "relay": "the userspace relay "
                   "(this kernel has no netem)", "none": "nothing (real network)"}
            text += (" Network links emulated by " + " and ".join(how.get(e, e) for e in emus)
                     + "; round trips " + ", ".join(f"{x:g} ms" for x in
                                                    sorted(set(net["rtt_ms"]))) + ".")
            if "relay" in emus:
                text += " The relay cannot drop packets: profile loss was not applied."
        return _markdown(text + self.left_out_note())

    def answer_list(self) -> list[Answer]:
        """Each step of the decomposition (a setup against the one before it), writes
        first: the section's family."""
        d = self.decomposition()
        if not len(d):
            return []
        judged = d.attrs["judged"]
        order = sorted(range(len(d)), key=lambda i: d["op"].iloc[i] not in WRITE_OPS)
        return [from_claim(f"{d['dst'].iloc[i]} against {d['src'].iloc[i]}: "
                           f"{cluster.LABELS.get(d['op'].iloc[i], d['op'].iloc[i])}, "
                           "µs per object", judged[i], experiment=self.experiment,
                           heading="Where the time goes") for i in order]

    def findings(self):
        """The decomposition and the fit in sentences, from the tests."""
        if not self.ran:
            return None
        d = self.decomposition()
        lines = []
        if len(d):
            judged = d.attrs["judged"]
            for op in WRITE_OPS:
                for i in np.flatnonzero((d["op"] == op).to_numpy()):
                    lines.append(f"- {_step_sentence(d.iloc[i], judged[i])}")
            reads = d[~d["op"].isin(WRITE_OPS)]
            if len(reads):
                counts = reads["verdict"].value_counts()
                tally = ", ".join(f"{n} {v}" for v, n in counts.items())
                sig = reads[reads["significant"]]
                # Counted by verdict, with each step's adjusted CI in the table above: a
                # step that is merely not significant supports nothing.
                lines.append(
                    f"- Searches and the sequential scan run on the primary alone; of their "
                    f"{len(reads)} steps: {tally} (each with its adjusted CI in the "
                    "decomposition table)"
                    + ("." if sig.empty else "; the significant ones: " + ", ".join(
                        f"{cluster.LABELS.get(r.op, r.op)} {r.src} → {r.dst} "
                        f"({_added(r)})" for r in sig.itertuples()) + "."))
            lines.append(f"- The {len(d)} steps of all operations are one family: "
                         f"{judged.sentence('steps')}.")
        fit = cluster.rtt_fit(self.runs)
        if len(fit):
            c = fit.set_index("term")
            b = c.loc["per µs of RTT"]
            text = (f"- Least squares over {int(b['n'])} cluster insert runs (R² = "
                    f"{b['r2']:.2f}; 95% CIs, a fit beside the tests above, not one of them): "
                    f"{_slope(b, 'each µs of round trip', 'µs per insert')}; 1 would be "
                    "exactly one round trip per commit, as synchronous replication implies")
            if "per extra standby [µs]" in c.index:
                s = c.loc["per extra standby [µs]"]
                text += "; " + _slope(s, "each extra standby", "µs")
            lines.append(text + ".")
        return _markdown("\n".join(lines))

    # --- tables ----------------------------------------------------------------------
    def _per_setup(self, t: pd.DataFrame,
                   cells: Callable[[pd.DataFrame], list[str]]) -> pd.DataFrame:
        """One row per operation, one column per setup: `cells` of that setup's rows."""
        wide = pd.DataFrame({"operation": [cluster.LABELS.get(o, o) for o in self.ops]})
        for setup in self.setups:
            wide[setup] = cells(t[t["setup"] == setup].set_index("op").reindex(self.ops))
        return wide

    def seed_table_html(self):
        """The seed's table: per operation, total ms for N objects and µs per object."""
        if not self.ran:
            return None
        t = self.table()
        wide = self._per_setup(t, lambda s: [
            f"{tot:,.0f} ms ({tables.num(3)(us)} µs)" if not math.isnan(us) else "–"
            for tot, us in zip(s["total_ms"], s["us"], strict=True)])
        for mode, label in (("local-cluster", "seed local"),
                            ("network-cluster", "seed Wi-Fi")):
            wide[label] = [f"{cluster.SEED_US[mode].get(o, float('nan')):.3g} µs"
                           for o in self.ops]
        n = int(t["objects"].median())
        return _html(tables.to_html(
            wide, numeric=list(wide.columns[1:]),
            caption=f"Per operation and setup: total time for {n:,} objects and time per "
                    "object (means over runs), as cluster_perf printed them; the seed's "
                    "own µs per object (eXtremeDB, 2 nodes, 100,000 objects) for scale."))

    def us_table_html(self):
        if not self.ran:
            return None
        wide = self._per_setup(self.table(), lambda s: [
            _ci(v, lo, hi) for v, lo, hi in zip(s["us"], s["us_low"], s["us_high"], strict=True)])
        return _html(tables.to_html(
            wide, numeric=list(wide.columns[1:]),
            caption="Time per object [µs]: mean over runs (95% CI)."))

    def decomposition_html(self):
        if not self.ran:
            return None
        d = self.decomposition()
        if d.empty:
            return _markdown("No pair of setups to compare.")
        judged = d.attrs["judged"]
        level = multiplicity.fmt_level(judged.family.level)
        shown = pd.DataFrame({
            "operation": [cluster.LABELS.get(o, o) for o in d["op"]],
            "step": [f"{s}: {a} → {b}" for s, a, b in zip(d["step"], d["src"], d["dst"],
                                                          strict=True)],
            "from [µs]": d["from_us"], "to [µs]": d["to_us"],
            f"added [µs] ({level} CI)": [_ci(v, lo, hi) for v, lo, hi in
                                         zip(d["added_us"], d["added_low"], d["added_high"],
                                             strict=True)],
            f"ratio ({level} CI)": [_ci(v, lo, hi, unit="×") for v, lo, hi in
                                    zip(d["ratio"], d["ratio_low"], d["ratio_high"],
                                        strict=True)],
            "test": d["test"], "p": [prose.p_cell(p) for p in d["p"]],
            "p (BH)": [prose.p_cell(p) for p in d["p_adjusted"]],
            "verdict": list(d["verdict"]),
        })
        return _html(tables.to_html(
            shown, numeric=["from [µs]", "to [µs]", f"added [µs] ({level} CI)",
                            f"ratio ({level} CI)"],
            caption="Overhead decomposition per operation: single → local cluster is the "
                    "cost of replication, local → network cluster (same nodes) the cost of "
                    f"the network. The steps of all operations are one family: "
                    f"{judged.sentence('steps')}. The added µs per object are the ratio's "
                    "interval at the from-setup's mean (to − from = from × (ratio − 1)): "
                    "one interval per step, which excludes 0 exactly when the ratio's "
                    "excludes 1."))

    def fit_html(self):
        if not self.ran:
            return None
        rows = []
        for op in WRITE_OPS:
            fit = cluster.rtt_fit(self.runs, op)
            for r in fit.itertuples():
                rows.append({"operation": cluster.LABELS.get(op, op), "term": r.term,
                             "estimate (95% CI)": _ci(r.estimate, r.low, r.high),
                             "runs": r.n, "R²": r.r2})
        if not rows:
            return _markdown("Too few round trips or node counts to fit.")
        return _html(tables.to_html(
            pd.DataFrame(rows), numeric=["estimate (95% CI)", "runs", "R²"],
            caption="µs per object = intercept + b · RTT [µs] + c · (standbys − 1), "
                    "least squares over the cluster runs."))

    # --- figures ---------------------------------------------------------------------
    def us_figure(self):
        if not self.ran:
            return None
        fig = cluster_plots.us_bars(self.table(), self.ops, self.setups, cluster.LABELS)
        return self.publish(fig, "us-per-object")

    def decomposition_figure(self):
        if not self.ran:
            return None
        ops = [o for o in WRITE_OPS if o in self.ops]
        # Grouped by node count: local n=2, its network clusters, local n=4, ...
        rows = self.runs.drop_duplicates("setup")
        rows = rows[rows["mode"] != "single"].assign(
            local=lambda f: f["mode"] != "local-cluster").sort_values(
            ["nodes", "local", "rtt_ms"])
        fig = cluster_plots.decomposition_bars(self.table(), self.decomposition(), ops,
                                               cluster.LABELS, list(rows["setup"]))
        return self.publish(fig, "decomposition")

    def growth_figure(self, op: str = "insert"):
        if not self.ran or op not in self.ops:
            return None
        fig = cluster_plots.growth(cluster.point_table(self.runs, op),
                                   cluster.rtt_fit(self.runs, op), cluster.LABELS[op])
        return self.publish(fig, f"{op}-growth")


def analyse(raw_dir: Path | str, experiment: str = cluster.EXPERIMENT, *,
            alpha: float = 0.05, figures_dir: Path | str | None = None,
            include: Sequence[str] = ()) -> Study:
    """Load the study's runs (pooled: `include` adds partial ones); without them the
    Study reports "not run"."""
    study = Study(Path(raw_dir), alpha, as_path(figures_dir), experiment,
                  include=tuple(include))
    study.loaded, study.runs = cluster.load_study(study)
    return study
