"""`harness explain`: which grid keys move which latency quantiles, by how much, and
whether they depend on each other, with intervals; the run is the unit.

For each quantile asked for (p50 and p99 by default), each run's own quantile of its
measured ops is the response, on the log scale (effects are ratios: "threads=2
multiplies p99 by 0.62"). It is regressed by least squares on the grid keys, each value
against the key's first (the spec's order: its baseline), with the two-way interactions
(``interactions=2``), optionally a numeric key as a trend per doubling (``trend``) and
the runs' telemetry as covariates (``covariates``: the client's CPU, the machines' steal
and other processes' CPU). Why per-run quantiles and not quantile regression on the
ops: the ops of a run share its server state and its neighbours' noise, so a regression
that took millions of ops as independent would give intervals far too narrow (Treadmill,
ISCA 2016, found run-to-run variation larger than any within-run bound); regressing the
runs' quantiles with replication gives intervals from the runs, as every other interval
of the kit.

Each term is a contrast of the fitted model averaged over the other keys' values (a
main effect is the key's effect at the average of the others; an interaction the
difference of differences), so it means the same whatever the coding. Its standard error
comes from the runs' spread within each configuration (each configuration its own
variance: a sandwich over the cells' pure error, with Satterthwaite's degrees of
freedom, so a noisy configuration does not lend its noise to a quiet one); with
unreplicated configurations or covariates, from the residuals (HC3, residual degrees of
freedom). All terms of one call, over every quantile, are one family under
Benjamini-Hochberg (`harness.analysis.stats.multiplicity`): each interval is printed at the
family's FCR-adjusted level and excludes 1 exactly where the term is significant.

Columns the runs cannot tell apart (a fractional design's aliases, a grid with
combinations excluded) are estimated once and named together: "A:B (aliased with C:D)".
Runs left out, each with why: those pooling leaves out (failed, partial, duplicate) and
those failing a measurement check of their own (`history_runs.RUN_CHECKS`).
The coverage of the intervals, the false-discovery rate and the power are measured by
simulation in benchmarks/explain_coverage.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.explain.data import RunTable, run_table
from harness.analysis.stats import multiplicity, verdict
from harness.errors import ResultsError

DEFAULT_QUANTILES = (0.5, 0.99)
#: Telemetry a run may bring as a covariate, by `--with` name: (what, the step its
#: effect is given per, that step in the telemetry's units). Steps of the size runs
#: differ by: per +1 CPU of other processes would extrapolate far beyond any run.
COVARIATES: dict[str, tuple[str, str, float]] = {
    "cpu": ("the busiest client process's CPU", "+0.1 core", 0.1),
    "steal": ("the largest hypervisor steal on a machine", "+1% steal", 0.01),
    "other_cpu": ("the most CPU other processes used on a machine", "+0.1 CPU", 0.1),
}
_TOL = 1e-9
#: Terms (model columns) one call fits: a 20-value sweep crossed with a 40-value one is
#: 19 + 39 + 741; the work grows as runs x terms^2, and a key of 10,000 values in a
#: tampered tree would be 20,000 terms (a design of 10,000 x 20,000, hours of work).
MAX_TERMS = 1_000
#: Cells of the design (runs x columns): 2**26 doubles are 512 MiB.
MAX_DESIGN_CELLS = 1 << 26


@dataclass(frozen=True)
class Term:
    """One term at one quantile: its ratio with the interval at the family's level."""

    quantile: float
    term: str
    kind: str  # main, interaction, trend, covariate
    effect_ratio: float
    ci_low: float
    ci_high: float
    ci_level: float
    p: float
    q: float
    df: float
    aliased_with: tuple[str, ...] = ()
    significant: bool = False
    #: An interaction's two terms (its name joins them with ":", which a value may hold).
    of: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "aliased_with": list(self.aliased_with),
                "of": list(self.of)}


@dataclass(frozen=True)
class Explained:
    experiment: str
    terms: tuple[Term, ...]
    runs: int
    configurations: int
    left_out: tuple[dict[str, str], ...]
    factors: Mapping[str, tuple[Any, ...]]  # key -> values, baseline first
    family: multiplicity.Family
    variance: str  # how the SEs were made
    #: Columns dropped as the aliases of a kept one (with no interval of their own).
    aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "terms": [t.as_dict() for t in self.terms],
                "runs": self.runs, "configurations": self.configurations,
                "left_out": list(self.left_out),
                "factors": {k: [str(v) for v in vs] for k, vs in self.factors.items()},
                "family": self.family.sentence("terms"), "variance": self.variance,
                "notes": list(self.notes)}


@dataclass(frozen=True)
class _Column:
    name: str  # the term it carries ("threads=2", "threads=2:conns=16", "cpu")
    kind: str
    parts: tuple[tuple[str, Any], ...]  # (factor, level) pairs; level None: a trend
    of: tuple[str, ...] = ()  # an interaction's two main terms


def _columns(factors: Mapping[str, tuple[Any, ...]], interactions: int,
             trend: Sequence[str], covariates: Sequence[str]) -> list[_Column]:
    mains: list[_Column] = []
    for f, values in factors.items():
        if f in trend:
            mains.append(_Column(f"{f} (per doubling)", "trend", ((f, None),)))
        else:
            mains += [_Column(f"{f}={v}", "main", ((f, v),)) for v in values[1:]]
    cols = list(mains)
    if interactions >= 2:
        for a, b in itertools.combinations(mains, 2):
            if a.parts[0][0] != b.parts[0][0]:
                cols.append(_Column(f"{a.name}:{b.name}", "interaction", a.parts + b.parts,
                                    (a.name, b.name)))
    cols += [_Column(f"{c} (per {COVARIATES[c][1]})", "covariate", ((c, "cov"),))
             for c in covariates]
    return cols


def _code(values: pd.Series, f: str, level: Any, factors: Mapping[str, tuple[Any, ...]]
          ) -> np.ndarray:
    """Deviation coding of one level: +1 at it, -1 at the baseline, 0 elsewhere (a
    trend: log2 of the value, centred on the levels' mean)."""
    if level is None:
        logs = np.log2(np.array([float(v) for v in factors[f]]))
        return np.log2(values.astype(float).to_numpy()) - logs.mean()
    base = factors[f][0]
    return np.where(values == level, 1.0, np.where(values == base, -1.0, 0.0))


def _code_one(value: Any, f: str, level: Any, factors: Mapping[str, tuple[Any, ...]]
              ) -> float:
    """`_code` of one value."""
    if level is None:
        logs = [math.log2(float(v)) for v in factors[f]]
        return math.log2(float(value)) - sum(logs) / len(logs)
    return 1.0 if value == level else -1.0 if value == factors[f][0] else 0.0


def _contrast(col: _Column, cols: Sequence[_Column], factors: Mapping[str, tuple[Any, ...]]
              ) -> np.ndarray:
    """The term's contrast vector over the model's coefficients: its effect averaged
    over every combination of the other keys' values (a full factorial of them). A
    trend's effect is the slope per doubling (with a level: the slope's change there;
    with another trend: the slope's change per doubling of the other).

    Every column is a product of codes of distinct keys, so its average over that
    factorial is the product of each other key's mean code: the same number as
    enumerating the combinations, without their count (the product of the keys' value
    counts, which a tree of few runs can make astronomical)."""
    j = cols.index(col) + 1
    if col.kind == "covariate":
        e = np.zeros(len(cols) + 1)
        e[j] = 1.0
        return e
    trends = {(f, lv) for f, lv in col.parts if lv is None}
    levels = [(f, lv) for f, lv in col.parts if lv is not None]
    means: dict[tuple[str, Any], float] = {}

    def mean_code(f: str, level: Any) -> float:
        if (f, level) not in means:
            means[f, level] = sum(_code_one(v, f, level, factors)
                                  for v in factors[f]) / len(factors[f])
        return means[f, level]

    total = np.zeros(len(cols) + 1)
    # Difference (of differences) over the term's factors with levels: each at its
    # level (+) or its baseline (-); of the row, or of its derivative in log2 of each
    # of the term's trends (a column without one of them has none).
    for signs in itertools.product((1, 0), repeat=len(levels)):
        point = {f: (level if on else factors[f][0])
                 for (f, level), on in zip(levels, signs, strict=True)}
        sign = (-1) ** (len(levels) - sum(signs))
        if not trends:
            total[0] += sign  # the intercept's column is 1 everywhere
        for i, c in enumerate(cols, start=1):
            if c.kind == "covariate" or not trends <= set(c.parts):
                continue  # at the covariates' mean (centred); no slope in the trends
            v = 1.0
            for g, level in c.parts:
                if (g, level) not in trends:  # d/d(log2 f) of f's own code is 1
                    v *= (_code_one(point[g], g, level, factors) if g in point
                          else mean_code(g, level))
            total[i] += sign * v
    return total


def _design(table: RunTable, cols: list[_Column], factors: Mapping[str, tuple[Any, ...]]
            ) -> np.ndarray:
    x = np.ones((len(table.runs), len(cols) + 1))
    for j, c in enumerate(cols, start=1):
        if c.kind == "covariate":
            name = c.parts[0][0]
            v = table.covariates[name].to_numpy(float) / COVARIATES[name][2]
            x[:, j] = v - v.mean()
            continue
        v = np.ones(len(table.runs))
        for f, level in c.parts:
            v = v * _code(table.runs[f], f, level, factors)
        x[:, j] = v
    return x


def _independent(x: np.ndarray) -> tuple[list[int], list[tuple[int, int | None]]]:
    """Columns kept (the first of every set the runs cannot tell apart, in model order)
    and each dropped column with the kept one it is an alias of (None: a combination of
    several).

    One pass of Gram-Schmidt (twice per column, for round-off): a column is kept when
    what the kept ones leave of it is more than round-off; a dropped one's combination
    comes from the same factorisation. Work n x k^2 for n runs and k columns."""
    from scipy.linalg import solve_triangular

    n = x.shape[0]
    tol = _TOL * max(1.0, float(np.abs(x).max())) * 1e3
    basis = np.zeros((n, min(n, x.shape[1])))
    r = np.zeros((basis.shape[1], basis.shape[1]))
    kept: list[int] = [0]
    dropped: list[tuple[int, int | None]] = []
    rank = 0

    def project(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = basis[:, :rank]
        c1 = q.T @ v
        v = v - q @ c1
        c2 = q.T @ v
        return v - q @ c2, c1 + c2

    for j in range(x.shape[1]):
        resid, coef_q = project(x[:, j])
        norm = float(np.linalg.norm(resid))
        if j == 0 or (norm > tol and rank < basis.shape[1]):
            basis[:, rank] = resid / norm
            r[:rank, rank], r[rank, rank] = coef_q, norm
            rank += 1
            if j:
                kept.append(j)
            continue
        # x[:, j] = Q c = (X_kept R^-1) c: its coefficients on the kept columns.
        coef = solve_triangular(r[:rank, :rank], coef_q)
        used = [i for i in range(len(kept)) if abs(coef[i]) > 1e-6]
        # An alias is one kept column, up to its sign (a design's defining relation);
        # a combination of several means configurations are missing, said as such.
        alias = len(used) == 1 and used[0] > 0 and abs(abs(coef[used[0]]) - 1) < 1e-6
        dropped.append((j, kept[used[0]] if alias else None))
    return kept, dropped


def _fit(y: np.ndarray, x: np.ndarray, cells: np.ndarray, hc3: bool
         ) -> tuple[np.ndarray, Any]:
    """Coefficients and a function contrast -> (estimate, se, df)."""
    xtx_inv = np.linalg.pinv(x.T @ x)
    a = xtx_inv @ x.T  # beta = a @ y
    beta = a @ y
    resid = y - x @ beta
    n, k = x.shape
    if hc3:
        h = np.einsum("ij,ji->i", x, a)
        w = resid**2 / np.maximum(1 - h, 1e-12) ** 2
        df_resid = max(n - k, 1)

        def se_df(c: np.ndarray) -> tuple[float, float]:
            la = c @ a
            return math.sqrt(float(np.sum(la**2 * w))), float(df_resid)

        return beta, se_df
    labels, inv = np.unique(cells, return_inverse=True)
    var = np.zeros(labels.size)
    cnt = np.bincount(inv).astype(float)
    for g in range(labels.size):
        yy = y[inv == g]
        var[g] = yy.var(ddof=1)

    def se_df(c: np.ndarray) -> tuple[float, float]:
        la = c @ a
        wc = np.bincount(inv, weights=la**2, minlength=labels.size) * var
        total = float(wc.sum())
        denom = float(np.sum(wc**2 / (cnt - 1)))
        return math.sqrt(total), (total**2 / denom if denom > 0 else float("inf"))

    return beta, se_df


def explain(
    raw: Path | str,
    experiment: str,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    interactions: int = 2,
    trend: Sequence[str] = (),
    covariates: Sequence[str] = (),
    op: str | None = None,
    q: float = multiplicity.DEFAULT_Q,
    include: Sequence[str] = (),
) -> Explained:
    """The quantile effects of every grid key of `experiment` (see the module doc)."""
    if interactions not in (1, 2):
        raise ResultsError(f"--interactions {interactions}: 1 (main effects) or 2 (and "
                           "two-way interactions)")
    for c in covariates:
        if c not in COVARIATES:
            raise ResultsError(f"--with {c!r}: choose from {', '.join(COVARIATES)}")
    for qq in quantiles:
        if not 0 < qq < 1:
            raise ResultsError(f"quantile {qq!r} is not between 0 and 1 (p99: 0.99)")
    table = run_table(Path(raw), experiment, quantiles, op=op, include=include,
                      covariates=covariates)
    return explain_table(table, experiment, quantiles=quantiles, interactions=interactions,
                         trend=trend, covariates=covariates, q=q)


def _check_size(experiment: str, runs: int, cols: Sequence[_Column],
                factors: Mapping[str, tuple[Any, ...]], trend: Sequence[str]) -> None:
    """Refuse a model too large to fit before any of it is built."""
    if len(cols) <= MAX_TERMS and runs * (len(cols) + 1) <= MAX_DESIGN_CELLS:
        return
    mains = sum(1 if f in trend else len(v) - 1 for f, v in factors.items())
    widest = sorted(factors, key=lambda f: -len(factors[f]))[:3]
    numeric = [f for f in widest if f not in trend and len(factors[f]) > 2 and all(
        isinstance(v, int | float) and not isinstance(v, bool) and v > 0
        for v in factors[f])]
    hint = [f"--trend {f} (one term per doubling)" for f in numeric]
    if mains < len(cols) and mains <= MAX_TERMS:
        hint.append(f"--interactions 1 (the {mains:,} main effects only)")
    raise ResultsError(
        f"{experiment}: {len(cols):,} terms over {runs:,} runs, more than explain fits "
        f"({MAX_TERMS:,} terms, {MAX_DESIGN_CELLS:,} runs x terms); the keys with the "
        "most values: " + ", ".join(f"{f} ({len(factors[f]):,})" for f in widest)
        + (f"; try {' or '.join(hint)}" if hint else ""))


def explain_table(table: RunTable, experiment: str = "", *,
                  quantiles: Sequence[float] = DEFAULT_QUANTILES, interactions: int = 2,
                  trend: Sequence[str] = (), covariates: Sequence[str] = (),
                  q: float = multiplicity.DEFAULT_Q) -> Explained:
    """`explain` on runs already tabled (benchmarks/explain_coverage.py simulates them)."""
    factors = table.factors
    for f in trend:
        if f not in factors:
            raise ResultsError(f"--trend {f!r} is not a grid key of {experiment} "
                               f"({', '.join(factors) or 'none varies'})")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0
                   for v in factors[f]):
            raise ResultsError(f"--trend {f}: its values {list(factors[f])} are not all "
                               "positive numbers (a trend is per doubling)")
    if not factors:
        left = (f" ({len(table.left_out)} run(s) left out, e.g. "
                f"{table.left_out[0]['run_id']}: {table.left_out[0]['reason']})"
                if table.left_out else "")
        raise ResultsError(f"{experiment}: no grid key varies among its runs{left}: "
                           "nothing to explain")
    cols = _columns(factors, interactions, trend, covariates)
    _check_size(experiment, len(table.runs), cols, factors, trend)
    x = _design(table, cols, factors)
    kept, dropped = _independent(x)
    xk = x[:, kept]
    cols_k = [cols[j - 1] for j in kept[1:]]
    cells = table.runs["config_id"].astype(str).to_numpy()
    _, counts = np.unique(cells, return_counts=True)
    hc3 = bool(covariates) or counts.min() < 2
    if len(table.runs) <= xk.shape[1]:
        raise ResultsError(
            f"{experiment}: {len(table.runs)} runs for {xk.shape[1]} coefficients: "
            "nothing left to estimate the run-to-run variation from; run more "
            "repetitions (or --interactions 1)")
    variance = ("residuals, HC3, residual df" if hc3 else
                "each configuration's own run-to-run variance (sandwich), Satterthwaite df")
    # By position, not by name: two columns may print alike (a value "1:b=2" of key a
    # and the interaction of a=1 with b=2), never be taken for each other.
    aliased: dict[int, tuple[str, ...]] = {}
    for j, with_ in dropped:  # the kept column carries its aliases' names
        if with_ is not None:
            aliased[with_] = (*aliased.get(with_, ()), cols[j - 1].name)
    raw_terms = []
    contrasts = [_contrast(col, cols_k, factors) for col in cols_k]
    for qq in quantiles:
        values = table.quantiles[qq].to_numpy(float)
        if np.isnan(values).any():
            raise ResultsError(f"{experiment}: a run has no p{qq * 100:g} (no measured ops)")
        if (values <= 0).any():
            raise ResultsError(
                f"{experiment}: {int((values <= 0).sum())} run(s) have a p{qq * 100:g} of "
                f"{values.min():g} ms, which no measured op takes; effects are ratios (a "
                "log scale) and need latencies above 0 (a damaged or hand-made ops file?)")
        y = np.log(values)
        beta, se_df = _fit(y, xk, cells, hc3)
        for i, (col, c) in enumerate(zip(cols_k, contrasts, strict=True)):
            est = float(c @ beta)
            se, df = se_df(c)
            t = est / se if se > 0 else math.copysign(math.inf, est) if est else 0.0
            # No spread at all: a difference is certain, none is no evidence of one.
            p = float(2 * _t_sf(abs(t), df)) if se > 0 else 0.0 if est else 1.0
            raw_terms.append((qq, i, col, verdict.LogRatio(
                math.exp(est), math.nan, math.nan, p, df, "regression t", t, se)))
    family = multiplicity.adjust([lr.p for *_, lr in raw_terms], q=q)
    terms = []
    for (qq, i, col, lr), qv in zip(raw_terms, family.p_adjusted, strict=True):
        at = _with_interval(lr, family.level)
        terms.append(Term(qq, col.name, col.kind, lr.ratio, at.low, at.high, at.confidence,
                          lr.p, qv, lr.df, aliased.get(kept[i + 1], ()), qv < q, col.of))
    aliases = tuple((cols[j - 1].name, () if with_ is None else (cols[with_ - 1].name,))
                    for j, with_ in dropped)
    return Explained(experiment, tuple(terms), len(table.runs), int(counts.size),
                     tuple(table.left_out), factors, family, variance, aliases,
                     tuple(table.notes))


def _t_sf(t: float, df: float) -> float:
    from scipy.special import stdtr

    return float(stdtr(df, -t)) if math.isfinite(df) else 0.5 * math.erfc(t / math.sqrt(2))


def _with_interval(lr: verdict.LogRatio, level: float) -> verdict.LogRatio:
    from scipy.special import stdtrit

    if not lr.se_log > 0:
        return verdict.LogRatio(lr.ratio, lr.ratio, lr.ratio, lr.p, lr.df,
                                lr.test, lr.t, lr.se_log, level)
    crit = float(stdtrit(lr.df, 0.5 + level / 2)) if math.isfinite(lr.df) else \
        float(stdtrit(1e9, 0.5 + level / 2))
    half = crit * lr.se_log
    lg = math.log(lr.ratio)
    return verdict.LogRatio(lr.ratio, math.exp(lg - half), math.exp(lg + half), lr.p,
                            lr.df, lr.test, lr.t, lr.se_log, level)

