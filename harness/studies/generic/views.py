"""What the generic study shows for one experiment: a section a notebook cell displays.

The section is built from the experiment's runs and spec alone, so it serves any
experiment of the user's: what was measured (from the manifests: workload, clients,
connections, pipelining, open or closed loop, servers and their settings), a table per
configuration with intervals, the measurement checks that failed, the effect of each grid
key's values with verdicts (each naming the failed checks it rests on), latency CDFs per
configuration, throughput and p99 over time, and the spec with its provenance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.checks import registry as checks
from harness.analysis.checks import replicas, tails
from harness.analysis.checks import words as checkwords
from harness.analysis.checks.registry import Finding
from harness.analysis.data import pooling
from harness.analysis.data.load import Loaded
from harness.analysis.figures import plots, sweeps
from harness.analysis.sections import answers, prose, tables
from harness.analysis.sections.display import html, markdown
from harness.analysis.sections.tables import ci_column, human
from harness.analysis.stats import planning, verdict
from harness.results import read_manifest
from harness.studies.generic import analysis, drivers

#: The over-time figure needs runs at least this many seconds long.
MIN_SECONDS = 3
METRIC_TEXT = {"throughput": "throughput", "latency_mean": "mean latency",
               "latency_p99": "p99 latency"}


def _n(n: int, noun: str) -> str:
    plural = noun + ("es" if noun.endswith("s") else "s")
    return f"{n:,} {noun if n == 1 else plural}"


@dataclass
class ExperimentSection:
    """One experiment of the user's, analysed (`analyse` makes it)."""

    name: str
    loaded: Loaded
    left_out: pd.DataFrame
    include: tuple[str, ...]
    alpha: float
    threshold: float
    figures_dir: Path | None
    _manifest: Any = field(default=None, repr=False)
    _effects: Any = field(default=None, repr=False)
    _found: dict[tuple[object, ...], list[Finding]] | None = field(default=None, repr=False)

    @property
    def keys(self) -> list[str]:
        return list(self.loaded.grid_keys)

    @property
    def manifest(self) -> Any:
        if self._manifest is None:
            self._manifest = read_manifest(Path(self.loaded.runs["run_dir"].iloc[0]))
        return self._manifest

    # -- what was measured -------------------------------------------------------------
    def measured(self) -> str:
        """A sentence of what was measured, from the manifests (never typed in)."""
        runs = self.loaded.runs

        def one(col: str) -> Any:
            vals = runs[col].dropna().unique() if col in runs else []
            return vals[0] if len(vals) == 1 else None

        procs, conns, inflight = (one(f"loadgen_{k}") for k in
                                  ("processes", "connections", "inflight"))
        clients = " × ".join(t for t in (
            _n(int(procs), "client process") if procs else "client processes varied",
            _n(int(conns), "connection") if conns else "connections varied",
            (f"{int(inflight)} requests in flight per connection (pipelined)"
             if inflight and inflight > 1 else
             "one request at a time per connection" if inflight else "in flight varied"),
            _pause(runs))
            if t)
        mode = one("loadgen_mode")
        target = one("loadgen_target_rate_ops_s")
        loop = ("open loop (a schedule of intended starts; latency counts from them)"
                + (f" at {human(float(target))} ops/s offered" if target else "")
                if mode == "open" else "closed loop (each request waits for the one before)"
                if mode == "closed" else "open and closed loop")
        ops, dur = one("loadgen_ops"), one("loadgen_duration_s")
        size = (f"{human(int(ops))} measured ops per run" if ops is not None and not
                _nan(ops) else f"{float(dur):g} s per run" if dur is not None and not
                _nan(dur) else "run length varied")
        services = "; ".join(server_words(name, s)
                             for name, s in self.manifest.services.items())
        unobserved = sorted({u.get("service") for u in (self.manifest.telemetry or {}).get(
            "unobserved", ()) if isinstance(u, dict)} - {None})
        blind = (f" The machine of {', '.join(f'`{u}`' for u in unobserved)} was not "
                 "observed (a server at an address on no spec host): its CPU is in no "
                 "figure, and `machine_busy` judged the other machines only."
                 if unobserved else "")
        return (f"Workload `{one('workload')}`, {clients}, {loop}, {size}. "
                f"Servers: {services or 'none recorded'}.{blind}")

    def header(self) -> Any:
        runs = self.loaded.runs
        configs = runs.groupby(self.keys, dropna=False).ngroups if self.keys else 1
        note = pooling.study_note(self.left_out, runs, self.include)
        grid = ", ".join(f"`{k}`" for k in self.keys) or "none"
        text = (f"## Experiment `{self.name}`\n\n{self.measured()}\n\n"
                f"{_n(len(runs), 'run')} pooled over {_n(configs, 'configuration')} "
                f"(grid keys: {grid}); every number below comes from these runs, every "
                "interval from the spread between them (95% for an estimate; the effects' "
                "ratios at their family's adjusted level, stated beside them)."
                + (f" {note[0].upper()}{note[1:]}." if note else ""))
        return markdown(text)

    def heavy_tails(self) -> Any:
        """Where `tails.heavy_tail` fires for a configuration (and op), the note that
        leads with its percentiles and says its mean's interval is unreliable; None
        where it fires for none."""
        keys = list(dict.fromkeys([*self.keys, "op"]))  # a grid key `op` is the op
        note = tails.section_note(
            tails.group_checks(self.loaded, keys),
            lambda k: analysis.config_label(dict(zip(keys, k, strict=True)), keys))
        return markdown(note) if note else None

    def tail_drivers(self) -> list[Any] | None:
        """What drives p50 and p99 (`harness explain`), with two or more keys varied."""
        return drivers.tail_drivers(self.name, self.loaded.runs, self.keys,
                                    alpha=self.alpha, include=self.include,
                                    figures_dir=self.figures_dir)

    # -- tables --------------------------------------------------------------------------
    def configuration_table(self) -> Any:
        t = analysis.configurations(self.loaded)
        out = t[[*self.keys, "runs", "ops"]].copy()
        out["throughput ops/s"] = ci_column(t, "throughput_ops_s", "throughput_ops_s_ci_low",
                                            "throughput_ops_s_ci_high", digits=4)
        out["goodput ops/s"] = t["goodput_ops_s"].map(human)
        for field_, head in (("latency_mean_ms", "mean ms"), ("latency_p50_ms", "p50 ms"),
                             ("latency_p99_ms", "p99 ms"), ("latency_p999_ms", "p99.9 ms")):
            out[head] = ci_column(t, field_, f"{field_}_ci_low", f"{field_}_ci_high",
                                  digits=3)
        return html(tables.to_html(
            out, numeric=["runs", "ops"], formats={"ops": human},
            caption=f"{self.name}: per configuration, pooled over its runs, 95% CI over "
                    "runs in parentheses (p99.9 only where every run has 10,000 ops)",
            # Nine columns of intervals: the small type of the run tables fits the page.
            css_class="kv-table runs"))

    @property
    def found(self) -> dict[tuple[object, ...], list[Finding]]:
        """The failed measurement checks per configuration (grid keys), once."""
        if self._found is None:
            self._found = checks.group_checks(self.loaded, self.keys)
        return self._found

    def checks_table(self) -> Any:
        """The measurement checks that failed, per configuration (`harness.analysis.
        checks`), or a sentence that none did."""
        frame = checkwords.report_frame(self.found, self.keys)
        if frame.empty:
            return markdown(f"No measurement check failed in {self.name}'s "
                            f"{_n(len(self.loaded.runs), 'run')} ("
                            + ", ".join(c.replace("_", " ") for c in checks.CHECKS) + ").")
        return html(tables.to_html(
            frame, caption=f"{self.name}: measurement checks that failed, per "
                           "configuration; a verdict below resting on one says so"))

    def replication_table(self) -> Any:
        """Where the runs had replicas (`telemetry.replication`), their replication
        beside the latency, per configuration (`replicas.run_figures`); None elsewhere."""
        runs = self.loaded.runs
        got = pd.DataFrame([replicas.run_figures(read_manifest(Path(d)).telemetry or {})
                            or {} for d in runs["run_dir"]], index=runs.index)
        if "replicas" not in got:
            return None
        keys = self.keys or ["experiment"]
        t = runs[keys].join(got).dropna(subset=["replicas"]).groupby(
            keys, dropna=False, sort=False).agg(
            runs=("replicas", "size"), stream=("stream_bytes_s", "mean"),
            behind=("behind_bytes", "max"), lag=("lag_s", "max"), up=("up", "sum"),
            n=("replicas", "sum")).reset_index()
        out = t[[*keys, "runs"]].copy()
        out["replication KB/s"] = (t["stream"] / 1000).map(human)
        out["behind at end, bytes (max)"] = t["behind"].map(lambda v: f"{int(v):,}")
        out["lag at end, s (max)"] = t["lag"].map(lambda v: f"{int(v)}")
        out["links up at end"] = [f"{int(u)} of {int(n)}" for u, n in zip(t["up"], t["n"],
                                                                        strict=True)]
        return html(tables.to_html(
            out, numeric=["runs"], caption=f"{self.name}: replication beside the latency, "
            "per configuration: the primary's replication stream over a run (mean), and at "
            "each run's end, read as its clients left, how far a replica was behind, its lag "
            "(seconds since its last acknowledgement) and the links up (the check replica_lag "
            "judges them)"))

    def effects(self) -> analysis.Effects:
        if self._effects is None:  # the findings, the figure and the answers share it
            grid = analysis.spec_grid_of(self.manifest.typed_extra.spec)
            self._effects = analysis.effects(self.loaded, grid, alpha=self.alpha,
                                             threshold=self.threshold, found=self.found)
        return self._effects

    def question(self) -> answers.Question:
        """What the experiment asked (its spec's `description`) and what answers it
        without a verdict: one configuration's headline figures with their intervals and
        the checks that qualify them; a grid's line of what deciding would take."""
        spec = self.manifest.typed_extra.spec or {}
        asked = spec.get("description") if isinstance(spec, dict) else None
        heading = f"Experiment `{self.name}`"
        if self.keys:
            t = self.effects().table
            return answers.Question(self.name, str(asked or ""), heading=heading,
                                    would_take=planning.would_take_text(t, self.threshold)
                                    if not t.empty else "")
        row = analysis.configurations(self.loaded).iloc[0]
        figures = [answers.Estimate(name, float(row[f]), float(row[f"{f}_ci_low"]),
                                    float(row[f"{f}_ci_high"]), unit, int(row["runs"]))
                   for name, f, unit in (("throughput", "throughput_ops_s", "ops/s"),
                                         ("p50 latency", "latency_p50_ms", "ms"),
                                         ("p99 latency", "latency_p99_ms", "ms"))]
        errors = float(row.get("error_rate", math.nan))
        figures.append(answers.Estimate("failed ops", errors, math.nan, math.nan, "%",
                                        int(row["runs"])))
        failed = sorted({f.check for fs in self.found.values() for f in fs})
        return answers.Question(
            self.name, str(asked or ""), tuple(figures),
            ("the measurement checks " + ", ".join(failed) + " failed (see its section)"
             if failed else ""), heading=heading)

    def answers(self) -> Any:
        """Every effect's verdict, for the report's summary of findings: each names the
        failed checks of either side it rests on, or says none failed; and the question
        the experiment asked, with what answers it without a verdict."""
        if not self.keys or self.effects().table.empty:
            return answers.publish([], [self.question()])
        out = []
        for r in self.effects().table.itertuples(index=False):
            at = f" (at {r.at})" if r.at else ""
            out.append(answers.Answer(
                f"{r.key}={r.value} against {r.key}={r.reference}{at}: "
                f"{METRIC_TEXT[r.metric]}", r.verdict, r.ratio, r.ratio_ci_low,
                r.ratio_ci_high, r.ratio_ci_level, self.name,
                r.caveat or "none failed in either configuration",
                f"Experiment `{self.name}`"))
        return answers.publish(out, [self.question()])

    def effect_findings(self) -> Any:
        """Per grid key, each value against the first, in words; then the table."""
        if not self.keys:
            return markdown("One configuration: nothing to compare within this experiment "
                            "(`harness compare` compares it with another tree).")
        eff = self.effects()
        t = eff.table
        if t.empty:
            return markdown("No grid key has two values measured at the same values of the "
                            "other keys: no effect to estimate.")
        lines = []
        for key, rows in t.groupby("key", sort=False):
            ref = rows["reference"].iloc[0]
            lines.append(f"- **`{key}`** against `{key}={ref}`:")
            for r in rows.itertuples(index=False):
                at = f" (at {r.at})" if r.at else ""
                lines.append(f"  - `{r.value}`{at}: {self._effect_words(r)}")
            if key in analysis.OFFERED_KEYS:
                lines.append(f"  - throughput is not compared: `{key}` sets it; whether "
                             "each rate was met is the `target_not_met` check's (above)")
        family = (eff.family.sentence("comparisons") if eff.family is not None
                  else f"α = {eff.alpha:g}")
        head = (f"Each grid key's values against its first value, at the same values of "
                f"the other keys; {len(t)} comparisons, one family: {family}. Better or "
                f"worse exactly where the printed interval of the ratio excludes 1; "
                f"“no significant difference” where it lies within ±{eff.threshold:.0%}.")
        return markdown(head + "\n\n" + "\n".join(lines))

    def _effect_words(self, r: Any) -> str:
        """One effect row in words, by the kit's one rule (`prose`): better/worse only
        with the family's verdict, otherwise the estimate with its adjusted interval and
        "no significant difference", "not significant after adjustment" or
        "inconclusive"; raw and adjusted p side by side."""
        what = METRIC_TEXT[r.metric]
        ratio = prose.fmt_ratio(r.ratio)
        ci = ("" if math.isnan(r.ratio_ci_low) else
              f" ({prose.ci_text(r.ratio_ci_level, r.ratio_ci_low, r.ratio_ci_high)})")
        p = ("" if math.isnan(r.p_adj) else
             f", {prose.fmt_p(r.p)}, BH-adjusted {prose.fmt_p(r.p_adj)}")
        # The failed measurement checks the verdict rests on, said with it.
        p += f"; but {r.caveat}" if getattr(r, "caveat", "") else ""
        if r.verdict in (verdict.BETTER, verdict.WORSE):
            return f"{what} {r.verdict}, {ratio}{ci}{p}"
        if r.verdict == verdict.NO_DIFFERENCE:
            return f"{what} {ratio}{ci}: no significant difference (within " \
                   f"±{self.threshold:.0%}){p}"
        if not math.isnan(r.p) and r.p < self.alpha:
            return f"{what} {ratio}{ci}: not significant after adjustment{p}"
        return f"{what} {ratio}{ci}: inconclusive (too few runs to tell){p}"

    def effect_figure(self) -> Any:
        t = self.effects().table
        if t.empty:
            return None
        # Short labels (the key's last part, the value, the other keys' values): the
        # plot keeps its width, the full names are in the list above.
        shown = t.assign(label=[f"{r.key.rsplit('.', 1)[-1]}={r.value}"
                                + (f" @ {r.at}" if r.at else "")
                                for r in t.itertuples(index=False)])
        fig = plots.forest(shown, ["label"], threshold=self.threshold,
                           title=f"{self.name}: each value against its key's first")
        return self._publish(fig, "effects")

    # -- figures -------------------------------------------------------------------------
    def _config_ops(self) -> pd.DataFrame:
        runs = self.loaded.runs[["run_id", *self.keys]].copy()
        runs["configuration"] = [analysis.config_label(r, self.keys)
                                 for _, r in runs.iterrows()]
        ops = self.loaded.ops
        if "warmup" in ops:
            ops = ops[~ops["warmup"].to_numpy(bool)]
        frame = pd.DataFrame({"run_id": ops["run_id"].astype(str).to_numpy(),
                              "latency_ns": ops["latency_ns"].to_numpy(),
                              "start_ns": ops["start_ns"].to_numpy()})
        return frame.merge(runs[["run_id", "configuration"]].astype({"run_id": str}),
                           on="run_id")

    def ecdf(self) -> Any:
        ops = self._config_ops()
        if ops.empty:
            return None
        fig = plots.latency_ecdf(ops, "configuration",
                                 title=f"{self.name}: latency per op, by configuration "
                                       f"({self._clients_short()})",
                                 sample_every=self.loaded.sample_every)
        return self._publish(fig, "latency-cdf")

    def capacity(self) -> Any:
        """An offered-load sweep's latency-throughput curve, with the capacity search's
        SLO and answer when the experiment has a `search.json`; None without a sweep."""
        if not sweeps.is_sweep(self.loaded):
            return None
        exp_dir = Path(self.loaded.runs["run_dir"].iloc[0]).parent
        found = sweeps.read_search(exp_dir)
        others = [k for k in self.keys if k != sweeps.RATE_KEY]
        fig = sweeps.figure(self.loaded, self.name, found, others[:1])
        parts = [self._publish(fig, "capacity")]
        if found:
            cap = found.get("capacity_ops_s")
            lo, hi = found.get("ci_low"), found.get("ci_high")
            ci = (f" (95% CI {lo:,.0f}-{hi:,.0f})" if lo is not None and hi is not None
                  else f" (up to {hi:,.0f})" if hi is not None else "")
            said = (f"The capacity search found **{cap:,.0f} ops/s**{ci} at {found['slo']} "
                    f"({len(found.get('steps', []))} steps; {found.get('stopped', '')})."
                    if cap is not None else
                    f"The capacity search found no rate meeting {found['slo']} "
                    f"({found.get('stopped', '')}).")
            parts.insert(0, markdown(said))
        return parts

    def over_time(self) -> Any:
        series = analysis.per_second(self.loaded, self.loaded.sample_every)
        seconds = series.groupby("config")["second"].nunique() if len(series) else []
        if not len(seconds) or max(seconds) < MIN_SECONDS:
            return markdown(f"*Runs of under {MIN_SECONDS} s: no figure over time (a point "
                            "or two per configuration says nothing about drift).*")
        fig = plots.per_second(series, title=f"{self.name}: throughput and p99 per second "
                                             f"of the runs ({self._clients_short()})")
        return self._publish(fig, "over-time")

    def _clients_short(self) -> str:
        runs = self.loaded.runs
        parts = []
        for col, noun in (("loadgen_processes", "process"), ("loadgen_connections",
                                                              "connection")):
            vals = runs[col].dropna().unique() if col in runs else []
            if len(vals) == 1:
                parts.append(_n(int(vals[0]), noun))
        modes = runs["loadgen_mode"].dropna().unique() if "loadgen_mode" in runs else []
        if len(modes) == 1:
            parts.append(f"{modes[0]} loop")
        return ", ".join(parts) or "clients varied"

    def _publish(self, fig: Any, what: str) -> Any:
        return plots.publish(fig, f"{self.name}-{what}", self.figures_dir)

    # -- provenance ----------------------------------------------------------------------
    def provenance(self) -> Any:
        m = self.manifest
        kit = m.typed_kit
        hosts = "; ".join(f"{name}: {h.get('cpu_model') or h.get('cpu', '?')}, "
                          f"{h.get('cpu_count', '?')} CPUs, {h.get('kernel', '?')}"
                          for name, h in m.hosts.items())
        servers = "\n".join(
            f"- `{name}` ({s.get('kind')} {s.get('version', '')}): "
            + ", ".join(f"{k}={v}" for k, v in sorted((s.get("config") or {}).items())
                        if not isinstance(v, dict | list))
            for name, s in m.services.items())
        spec = m.typed_extra.spec
        if spec:
            import yaml

            spec_text = (f"\n\nThe spec (`{m.spec_file}`), as the runs recorded it:\n\n"
                         f"```yaml\n{yaml.safe_dump(dict(spec), sort_keys=False).strip()}"
                         "\n```")
        else:
            spec_text = (f"\n\nThe runs name the spec `{m.spec_file}` (recorded before "
                         "manifests carried the spec itself).")
        return markdown(f"### Provenance\n\nMeasured by kit {kit.version} (commit "
                        f"{kit.git_commit or '?'}{', modified' if kit.git_dirty else ''}) "
                        f"on {hosts or 'hosts not recorded'}. Servers as they reported "
                        f"their settings:\n\n{servers or '- none recorded'}{spec_text}")


def server_words(name: str, s: Any) -> str:
    """One server as the sentence of what was measured names it: where it ran (the
    kit's, or one at an address the kit did not start), over TLS or not, and what a
    proxy stood in front of."""
    s = s if isinstance(s, dict) else {}
    config = s.get("config") if isinstance(s.get("config"), dict) else {}
    where = (f"at {s.get('address')}:{s.get('port')}, not started by the kit"
             if s.get("started_by") else f"on {s.get('host')}")
    tls = s.get("tls") or config.get("tls")
    after = config.get("after")
    return (f"`{name}`: {s.get('kind')} {s.get('version', '')} {where}"
            + (f", over {tls}" if tls else "")
            + (f", in front of {', '.join(f'`{a}`' for a in after)}" if after else "")
            + (f" ({s.get('auth')})" if s.get("auth") else ""))


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _pause(runs: pd.DataFrame) -> str:
    """clients.pause_us, when a run paused: its latencies include up to that much."""
    col = "loadgen_pause_us"
    vals = sorted({float(v) for v in runs[col].dropna()}) if col in runs else []
    if not any(vals):
        return ""
    return (f"a pause of {' or '.join(f'{v:g}' for v in vals)} µs before each wait "
            "(clients.pause_us: latencies include up to that much)")
