"""The methodology notebook: the statistical settings this report used, the simulation
that justifies the choice of tests (power and false verdicts at 3-10 runs), and the one
that justifies the multiplicity rule (power, false discovery rate and verdicts against
printed intervals in a 70-row family)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as st

from harness.analysis.checks import tails
from harness.analysis.data import summary
from harness.analysis.sections import tables
from harness.analysis.stats import intervals, multiplicity, verdict


def settings() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("unit of replication", "one run (a 'set'): per-op latencies within a run are "
             "not independent, so CIs and tests use the runs, never the ops"),
            ("warm-up", "ops flagged warmup are excluded from every statistic"),
            ("time per op", "arithmetic mean over runs of each run's mean, each run counting "
             "once (total latency / total ops when the runs hold equally many ops)"),
            ("rates", "each run counting once: the harmonic mean of run rates for runs of a "
             "fixed op count, the arithmetic mean for runs of a fixed duration (total ops / "
             "total time when the runs are equally long); goodput counts only ok and miss "
             "ops"),
            ("percentiles", "pooled over all measured ops, linear interpolation, failed "
             f"ops included (errors: {', '.join(summary.ERROR_STATUSES)})"),
            ("confidence interval", "95% for an estimate, runs as the unit: jackknife over "
             "runs of the log estimate with t on runs - 1 df (percentiles: the larger of "
             "that SE and the per-run spread); none with one run, or for a percentile with "
             f"fewer than {intervals.MIN_TAIL_OPS} ops beyond it in a run. A comparison's "
             "interval is printed at its family's adjusted level, which is stated"),
            ("two configurations", "Welch's t on the log ratio of the averages (the ratio's "
             "CI is the same statistic inverted); paired runs: t-test on log ratios. Rank "
             "tests only where their smallest attainable p is below α"),
            ("several configurations", "every pair compared as above, the pairs claims of "
             "the section's family"),
            ("families", "each report section's claims (a compare's rows × metrics) are one "
             "family: Benjamini-Hochberg at q = α decides which are significant (R of m), "
             "and every ratio interval is printed at 1 − R·q/m (FCR-adjusted, Benjamini-"
             "Yekutieli; 1 − q/m when R = 0); compare --gate familywise: Bonferroni with "
             "simultaneous intervals at 1 − q/m"),
            ("verdict", "better / worse exactly when the printed (adjusted) interval excludes "
             f"1; no significant difference when it lies within ±"
             f"{verdict.DEFAULT_THRESHOLD:.0%}; otherwise inconclusive (not significant after "
             "adjustment, where only the raw p was below α), always with the estimate and "
             "its interval"),
            ("heavy tails", "Hill's estimate of the latencies' tail index from the top √n of "
             f"a group's n ≥ {tails.MIN_OPS:,} ops; below {tails.ALPHA_LIMIT:g} the variance is "
             "infinite and a few ops decide a mean, so the section opens with the group's "
             "percentiles and says its mean's and throughput's intervals are unreliable "
             "(`heavy_tail` in harness summary's checks)"),
        ],
        columns=["what", "how"],
    )


def settings_table(alpha: float = 0.05, confidence: float = 0.95):
    from IPython.display import HTML  # notebooks only

    table = pd.concat([
        pd.DataFrame([("significance level α", f"{alpha:g}"),
                      ("confidence level", f"{confidence:.0%}")], columns=["what", "how"]),
        settings(),
    ], ignore_index=True)
    return HTML(tables.to_html(table, caption="Statistical settings used in this report."))


def _called(base: np.ndarray, cand: np.ndarray, alpha: float) -> np.ndarray:
    """Whether the kit's test calls each simulated pair better or worse."""
    out = np.empty(len(base), bool)
    for i, (b, c) in enumerate(zip(base, cand, strict=True)):
        r = verdict.compare_means(b, c)
        out[i] = verdict.decide(r.low, r.high, r.p, ratio=r.ratio, higher_is_better=False,
                                alpha=alpha) in (verdict.BETTER, verdict.WORSE)
    return out


def test_choice(runs: tuple[int, ...] = (3, 4, 5, 10), *, effect: float = 1.3,
                run_sd: float = 0.1, sims: int = 1000, alpha: float = 0.05,
                seed: int = 0) -> pd.DataFrame:
    """Simulated experiments of per-run mean times (lognormal, `run_sd` run-to-run):
    per number of runs and test, the smallest p the test can give, its false-positive
    rate on identical distributions and its power against an `effect`x slowdown."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in runs:
        same = np.exp(rng.normal(0, run_sd, (2, sims, n)))
        slow = np.exp(rng.normal(0, run_sd, (2, sims, n))) * np.array([1, effect])[:, None,
                                                                                    None]
        mw = lambda x: st.mannwhitneyu(x[0], x[1], axis=1, method="exact").pvalue  # noqa: E731
        wx = lambda x: st.wilcoxon(np.log(x[1]) - np.log(x[0]), axis=1).pvalue  # noqa: E731
        tp = lambda x: st.ttest_1samp(np.log(x[1]) - np.log(x[0]), 0, axis=1).pvalue  # noqa: E731
        for name, floor, false, power in (
            ("Welch t on log ratio (the kit)", 0.0, _called(*same, alpha).mean(),
             _called(*slow, alpha).mean()),
            ("Mann-Whitney U", verdict.min_attainable_p("mannwhitney", n, n),
             (mw(same) < alpha).mean(), (mw(slow) < alpha).mean()),
            ("paired t on log ratios (the kit)", 0.0, (tp(same) < alpha).mean(),
             (tp(slow) < alpha).mean()),
            ("Wilcoxon signed-rank (paired)", verdict.min_attainable_p("wilcoxon", n),
             (wx(same) < alpha).mean(), (wx(slow) < alpha).mean()),
        ):
            rows.append({"runs": n, "test": name, "smallest p": floor,
                         "false better/worse": false, f"power at {effect:g}x": power})
    return pd.DataFrame(rows)


def test_choice_sentence(t: pd.DataFrame, alpha: float = 0.05) -> str:
    """What `test_choice`'s table shows, in words, every number from it: where each rank
    test cannot reject at all, and the power of the kit's test against Mann-Whitney's
    where that one can."""
    power = next(c for c in t.columns if c.startswith("power at"))
    kit, mw = t[t["test"] == "Welch t on log ratio (the kit)"].set_index("runs"), \
        t[t["test"] == "Mann-Whitney U"].set_index("runs")
    wx = t[t["test"] == "Wilcoxon signed-rank (paired)"].set_index("runs")
    dead_mw = [int(n) for n in mw.index if mw.at[n, "smallest p"] >= alpha]
    dead_wx = [int(n) for n in wx.index if wx.at[n, "smallest p"] >= alpha]
    live = [int(n) for n in mw.index if n not in dead_mw]

    def runs(ns: list[int]) -> str:
        return ", ".join(map(str, ns))

    text = (f"The kit's test (Welch t on the log ratio) keeps false better/worse calls at "
            f"{kit['false better/worse'].min():.3g}–{kit['false better/worse'].max():.3g} "
            f"(α = {alpha:g}). ")
    if dead_mw:
        text += (f"Mann-Whitney cannot reject at {runs(dead_mw)} runs (power 0, where the "
                 f"kit's test has {runs([f'{kit.at[n, power]:.3g}' for n in dead_mw])}); ")
    if dead_wx:
        text += f"Wilcoxon's signed-rank test cannot at {runs(dead_wx)} pairs; "
    if live:
        text += ("where Mann-Whitney can reject it has less power than the kit's test: "
                 + ", ".join(f"{mw.at[n, power]:.3g} against {kit.at[n, power]:.3g} at {n} "
                             "runs" for n in live) + ".")
    return text.rstrip("; ") + ("" if text.endswith(".") else ".")


def test_choice_table(sims: int = 1000, alpha: float = 0.05):
    from IPython.display import HTML  # notebooks only

    t = test_choice(sims=sims, alpha=alpha)
    return HTML(tables.to_html(
        t, numeric=list(t.columns[2:]),
        caption=f"Simulated experiments ({sims} each, seeded): per-run mean times with 10% "
                "run-to-run spread. A rank test whose smallest p is not below α cannot "
                "reject, whatever the data: its power is 0.")
        + f"<p>{test_choice_sentence(t, alpha)}</p>")


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p: only to show, beside the kit's rule, what the kit did
    before (verdicts from these, intervals at 95%)."""
    m = p.size
    order = np.argsort(p)
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


#: The issue's 70-row family: (rows, true ratio cand/base, runs per side).
FAMILY_ROWS: tuple[tuple[int, float, int], ...] = ((40, 1.0, 5), (20, 1.5, 5), (10, 3.0, 3))


def _family_tests(rng: np.random.Generator, rows: tuple[tuple[int, float, int], ...],
                  ops: int, sigma: float, run_sd: float) -> tuple[list, np.ndarray]:
    """One simulated compare: per row, base and cand of `runs` closed-loop runs of `ops`
    lognormal(0, `sigma`) latencies times a lognormal(0, `run_sd`) run effect (cand x the
    row's ratio); pooled mean latency per side (`intervals.ratio_interval`, as compare
    does), then Welch's t on the log ratio. Returns the tests and each row's true ratio."""
    tests, truth = [], []
    for n_rows, ratio, runs in rows:
        for _ in range(n_rows):
            sides = []
            for factor in (1.0, ratio):
                lat = rng.lognormal(0, sigma, (runs, ops)) * rng.lognormal(0, run_sd,
                                                                            (runs, 1))
                sides.append(intervals.ratio_interval(factor * lat.sum(axis=1),
                                                      np.full(runs, float(ops))))
            b, c = sides
            tests.append(verdict.log_ratio_test(b.log_value, b.se_log, b.df,
                                                c.log_value, c.se_log, c.df))
            truth.append(ratio)
    return tests, np.array(truth)


def family_simulation(rows: tuple[tuple[int, float, int], ...] = FAMILY_ROWS, *,
                      ops: int = 500, sigma: float = 0.5, run_sd: float = 0.1,
                      sims: int = 200, q: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Simulated compares of `rows` (default: 40 rows without an effect, 20 with a true
    1.5x slowdown at 5 runs, 10 with 3x at 3 runs; 500 ops per run), each judged three ways:
    Holm with unadjusted 95% intervals (the kit before), Benjamini-Hochberg with
    FCR-adjusted intervals (the kit), Bonferroni with simultaneous intervals (compare
    --gate familywise). Per procedure: the share of true effects found per effect size,
    the false discovery rate (false better/worse over all better/worse, 0 when none, mean
    over compares), the familywise error rate, and the rows whose verdict disagrees with
    the interval printed beside it (better/worse with an interval that includes 1, or
    not better/worse with one beyond 1 and the ±5% margin)."""
    rng = np.random.default_rng(seed)
    effects = sorted({r for _, r, _ in rows if r != 1.0})
    names = {"holm": "Holm, unadjusted 95% intervals (before)",
             multiplicity.FDR: "Benjamini-Hochberg, FCR-adjusted intervals (the kit)",
             multiplicity.FAMILYWISE: "Bonferroni, simultaneous intervals (--gate familywise)"}
    found = {k: {e: 0 for e in effects} for k in names}
    fdp = dict.fromkeys(names, 0.0)
    fcr = dict.fromkeys(names, 0.0)
    covered = dict.fromkeys(names, 0)
    fwe = dict.fromkeys(names, 0)
    bad = dict.fromkeys(names, 0)
    level = dict.fromkeys(names, 0.0)
    n_rows = sum(n for n, _, _ in rows)
    for _ in range(sims):
        tests, truth = _family_tests(rng, rows, ops, sigma, run_sd)
        p = np.array([t.p for t in tests])
        for key in names:
            if key == "holm":
                adj = _holm(p)
                calls = np.array([verdict.decide(t.low, t.high, a, ratio=t.ratio,
                                                 higher_is_better=False)
                                  for t, a in zip(tests, adj, strict=True)])
                lows, highs = np.array([t.low for t in tests]), np.array([t.high for t in tests])
                level[key] += 0.95
            else:
                j = multiplicity.judge(tests, False, q=q, method=key)
                calls = np.array([c.verdict for c in j.claims])
                lows, highs = np.array([c.low for c in j.claims]), np.array(
                    [c.high for c in j.claims])
                level[key] += j.family.level
            sig = np.isin(calls, [verdict.BETTER, verdict.WORSE])
            margin = verdict.DEFAULT_THRESHOLD
            beyond = (lows > 1 + margin) | (highs < 1 - margin)
            excludes = (lows > 1) | (highs < 1)
            bad[key] += int(np.sum(sig & ~excludes) + np.sum(~sig & beyond))
            false = sig & (truth == 1.0)
            fdp[key] += false.sum() / max(sig.sum(), 1)
            # Benjamini-Yekutieli's criterion: intervals of the selected rows that miss.
            miss = ~((lows <= truth) & (truth <= highs))
            fcr[key] += (sig & miss).sum() / max(sig.sum(), 1)
            covered[key] += int((~miss).sum())
            fwe[key] += bool(false.any())
            for e in effects:
                found[key][e] += int(np.sum(sig & (truth == e)))
    out = []
    for key, name in names.items():
        row = {"procedure": name, "mean level printed": level[key] / sims}
        for e in effects:
            n_e = sum(n for n, r, _ in rows if r == e) * sims
            row[f"found at {e:g}x"] = found[key][e] / n_e
        row.update({"false discovery rate": fdp[key] / sims,
                    "false coverage-statement rate": fcr[key] / sims,
                    "coverage of every interval": covered[key] / (n_rows * sims),
                    "familywise error rate": fwe[key] / sims,
                    f"rows disagreeing with their interval (of {n_rows * sims:,})": bad[key]})
        out.append(row)
    return pd.DataFrame(out)


def family_sentence(t: pd.DataFrame) -> str:
    """What `family_simulation`'s table shows, every number from it."""
    by = t.set_index("procedure")
    old, kit, gate = by.index
    found = [c for c in t.columns if c.startswith("found at")]
    bad = next(c for c in t.columns if c.startswith("rows disagreeing"))

    def finds(name: str) -> str:
        return " and ".join(f"{by.at[name, c]:.1%} of the true {c.removeprefix('found at ')} "
                            "slowdowns" for c in found)

    return (f"Before, Holm's verdicts beside unadjusted 95% intervals found {finds(old)}, "
            f"and {by.at[old, bad]:,} rows disagreed with their interval. Benjamini-Hochberg "
            f"finds {finds(kit)} at a false discovery rate of "
            f"{by.at[kit, 'false discovery rate']:.3f}, printing intervals at "
            f"{by.at[kit, 'mean level printed']:.1%} on average, and {by.at[kit, bad]:,} rows "
            f"disagree with their interval. Bonferroni (--gate familywise) keeps the "
            f"familywise error rate at {by.at[gate, 'familywise error rate']:.3f} and finds "
            f"{finds(gate)}; {by.at[gate, bad]:,} rows disagree.")


def family_table(sims: int = 200, q: float = 0.05):
    from IPython.display import HTML  # notebooks only

    t = family_simulation(sims=sims, q=q)
    desc = ", ".join(f"{n} rows at {r:g}x ({k} runs a side)" for n, r, k in FAMILY_ROWS)
    return HTML(tables.to_html(
        t, numeric=list(t.columns[1:]),
        caption=f"Simulated 70-row compares ({sims}, seeded): {desc}; 500 ops per run, "
                "10% run-to-run spread. Found: the share of true slowdowns called worse. A row "
                "disagrees with its interval when it is called better/worse while the "
                "printed interval includes 1, or not while that interval lies beyond 1 and "
                f"the ±{verdict.DEFAULT_THRESHOLD:.0%} margin.")
        + f"<p>{family_sentence(t)}</p>")
