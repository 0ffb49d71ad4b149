"""The methodology notebook: the statistical settings this report used, and the
simulation that justifies the choice of tests (power and false verdicts at 3-10 runs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as st

from harness.analysis import intervals, summary, tables, verdict


def settings() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("unit of replication", "one run (a 'set'): per-op latencies within a run are "
             "not independent, so CIs and tests use the runs, never the ops"),
            ("warm-up", "ops flagged warmup are excluded from every statistic"),
            ("time per op", "arithmetic mean (total latency / total ops)"),
            ("rates", "total ops / total time: the harmonic mean of run rates for runs of "
             "a fixed op count, the arithmetic mean for runs of a fixed duration; goodput "
             "counts only ok and miss ops"),
            ("percentiles", "pooled over all measured ops, linear interpolation, failed "
             f"ops included (errors: {', '.join(summary.ERROR_STATUSES)})"),
            ("confidence interval", "95%, runs as the unit: jackknife over runs of the log "
             "estimate with t on runs - 1 df (percentiles: the larger of that SE and the "
             "per-run spread); none with one run, or for a percentile with fewer than "
             f"{intervals.MIN_TAIL_OPS} ops beyond it in a run"),
            ("two configurations", "Welch's t on the log ratio of the averages (the ratio's "
             "CI is the same statistic inverted); paired runs: t-test on log ratios. Rank "
             "tests only where their smallest attainable p is below α"),
            ("several configurations", "Welch's one-way ANOVA on log values, then pairwise "
             "tests, Holm-corrected"),
            ("verdict", "better / worse (significant), no significant difference (CI within "
             f"±{verdict.DEFAULT_THRESHOLD:.0%}), inconclusive (CI allows more: too few runs)"),
            ("families", "each section's findings are Holm-adjusted together"),
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


def test_choice_table(sims: int = 1000, alpha: float = 0.05):
    from IPython.display import HTML  # notebooks only

    t = test_choice(sims=sims, alpha=alpha)
    return HTML(tables.to_html(
        t, numeric=list(t.columns[2:]),
        caption=f"Simulated experiments ({sims} each, seeded): per-run mean times with 10% "
                "run-to-run spread. A rank test whose smallest p is not below α cannot "
                "reject, whatever the data: its power is 0."))
