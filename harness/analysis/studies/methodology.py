"""The methodology notebook's one table: the statistical settings this report used."""

from __future__ import annotations

import pandas as pd

from harness.analysis import stats, summary, tables


def settings() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("unit of replication", "one run (a 'set'): per-op latencies within a run are "
             "not independent, so CIs and tests use one value per run"),
            ("warm-up", "ops flagged warmup are excluded from every statistic"),
            ("time per op", "arithmetic mean per run, then mean over runs"),
            ("rates", "harmonic mean over runs; pooled = total ops / total wall time"),
            ("percentiles", "pooled over all measured ops, linear interpolation "
             f"(p50, p90, p99, p99.9); errors counted as {', '.join(summary.ERROR_STATUSES)}"),
            ("confidence interval", "t-based; BCa bootstrap (9,999 resamples, seed 0) when "
             "Shapiro-Wilk rejects normality"),
            ("normality check", f"Shapiro-Wilk per group (n ≥ {stats.MIN_NORMALITY_N})"),
            ("two configurations", "Welch's t-test (effect: Hedges' g) if both normal, else "
             "Mann-Whitney U (effect: rank-biserial r); ratio of means with CI (delta "
             "method on log ratio, or bootstrap)"),
            ("several configurations", "Welch's one-way ANOVA if all normal, else "
             "Kruskal-Wallis H; then pairwise tests, Holm-corrected"),
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
