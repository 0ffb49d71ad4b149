"""The kit's one multiplicity rule: which claims of a family are better or worse, and the
level of the intervals printed beside them, chosen together so that they cannot disagree.

A *family* is every claim one output makes at once: a `harness compare` table (its rows x
the metrics asked for) or one report section's findings. `judge` takes the family's
log-ratio tests (`verdict.LogRatio`) and:

- **fdr** (the default): Benjamini-Hochberg (1995) at `q` over the m tested p-values
  decides which claims are significant (R of them), and every ratio interval is printed
  at the marginal level 1 - R q / m: the false coverage-statement rate (FCR) adjusted
  intervals of Benjamini and Yekutieli (2005), whose non-coverage among the selected
  claims is at most q in expectation;
- **familywise**: Bonferroni, for CI gates that must not pass a single false "worse":
  significant iff p < q / m, with intervals at 1 - q / m, which hold simultaneously.

Why they agree by construction (fdr): BH rejects exactly the claims with p below R q / m.
Those rejected have p <= p_(R) < R q / m; every other p_(j), j > R, failed BH's condition,
so p_(j) >= j q / m > R q / m. A t interval at level 1 - a excludes the null iff p < a, so
at a = R q / m the interval excludes 1 iff the claim is significant; a claim is then "no
significant difference" iff that same interval lies inside ±threshold (`verdict.decide`).
The inequality is strict (p < k q / m, not <=) so that a p exactly on the line is neither
significant nor excluded by its interval; with continuous p it makes no difference.

With R = 0 nothing is selected, so BY's bound holds whatever is printed; the kit prints
the intervals at 1 - q / m (max(R, 1) in the formula): the level a first rejection would
have needed, at which every interval of the family includes 1 (that is why none is
significant), rather than the unbounded intervals that level 1 would give. Every printed
level is at least 1 - q (R <= m), so each interval on its own still covers at >= 95%.

The seeded simulation of the methodology notebook (`methodology.family_simulation`) shows
the power and the false discovery rate at 70 rows, and that no row's verdict disagrees
with its printed interval.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.analysis.stats import verdict

FDR = "fdr"
FAMILYWISE = "familywise"
#: The procedures `judge` knows, by the names `--gate` takes.
METHODS: tuple[str, ...] = (FDR, FAMILYWISE)
#: What each is called in tables and prose.
NAMES = {FDR: "Benjamini-Hochberg", FAMILYWISE: "Bonferroni"}
#: The default level of the family: the false discovery rate (fdr) or the familywise
#: error rate (familywise) the verdicts keep.
DEFAULT_Q = 0.05


@dataclass(frozen=True)
class Family:
    """The outcome of the rule over one family's p-values (NaN: not tested, not counted)."""

    method: str
    q: float
    m: int
    rejections: int
    p_adjusted: tuple[float, ...]

    @property
    def level(self) -> float:
        """The confidence level of every interval printed for the family."""
        if self.m == 0:
            return 1 - self.q
        k = 1 if self.method == FAMILYWISE else max(self.rejections, 1)
        return 1 - k * self.q / self.m

    @property
    def name(self) -> str:
        return NAMES[self.method]

    def rejected(self, i: int) -> bool:
        return bool(self.p_adjusted[i] < self.q)

    def sentence(self, what: str = "claims") -> str:
        """How the family was judged, for a caption: procedure, size, level printed."""
        if self.m == 0:
            return f"no test among these {what}: nothing to adjust"
        lvl = fmt_level(self.level)
        head = (f"{self.name} at q = {self.q:g} over the {self.m} tested {what}, "
                f"{self.rejections} significant; ")
        if self.method == FAMILYWISE:
            return head + f"intervals at {lvl} (1 − q/m), simultaneous"
        why = ("1 − R·q/m, R = rejections" if self.rejections else
               "1 − q/m: none significant, the level a first one would have needed")
        return head + f"intervals FCR-adjusted at {lvl} ({why}; Benjamini-Yekutieli)"


def fmt_level(level: float) -> str:
    """``95%``, ``97.9%``, ``99.93%``: two significant digits of 1 - level."""
    a = (1 - level) * 100
    if not a > 0:
        return "100%"
    digits = max(0, 1 - math.floor(math.log10(a)))
    text = f"{100 - a:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{100 - a:.0f}"
    return text + "%"


def adjust(p_values: Sequence[float] | np.ndarray, *, q: float = DEFAULT_Q,
           method: str = FDR) -> Family:
    """Adjusted p-values and rejections of `method` at `q` over the non-NaN `p_values`
    (NaN stays NaN: a claim with no test is not in m). fdr: BH's adjusted p,
    min over j >= i of m p_(j) / j; familywise: m p. Both capped at 1; a claim is
    significant iff its adjusted p < q."""
    if not 0 < q < 1:
        raise ValueError(f"q must be between 0 and 1, not {q!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.size, np.nan)
    tested = ~np.isnan(p)
    m = int(tested.sum())
    if m:
        pt = p[tested]
        if method == FAMILYWISE:
            adj = np.minimum(1.0, m * pt)
        else:
            order = np.argsort(pt, kind="stable")
            scaled = m * pt[order] / np.arange(1, m + 1)
            adj_sorted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
            adj = np.empty(m)
            adj[order] = adj_sorted
        out[tested] = adj
    rejections = int(np.sum(out[tested] < q))
    return Family(method, float(q), m, rejections, tuple(float(x) for x in out))


@dataclass(frozen=True)
class Claim:
    """One claim of a family, judged: the raw test, the adjusted p, the interval at the
    family's level and the verdict that interval agrees with."""

    test: verdict.LogRatio
    p_adjusted: float
    adjusted: verdict.LogRatio
    verdict: str
    #: The family's level q and procedure (`METHODS`), for the claim's sentence.
    q: float = DEFAULT_Q
    method: str = FDR

    @property
    def ratio(self) -> float:
        return self.test.ratio

    @property
    def low(self) -> float:
        return self.adjusted.low

    @property
    def high(self) -> float:
        return self.adjusted.high

    @property
    def level(self) -> float:
        return self.adjusted.confidence

    @property
    def p(self) -> float:
        return self.test.p

    @property
    def significant(self) -> bool:
        return self.verdict in (verdict.BETTER, verdict.WORSE)

    @property
    def significant_unadjusted(self) -> bool:
        """Whether the raw p alone would have been significant at q."""
        return bool(self.test.p < self.q)


@dataclass(frozen=True)
class Judged:
    """A family's claims in the order given, and how they were judged; `keys` (if given
    to `judge`) name them for `get`."""

    family: Family
    claims: tuple[Claim, ...]
    keys: tuple[Hashable, ...] = ()

    def __len__(self) -> int:
        return len(self.claims)

    def __getitem__(self, i: int) -> Claim:
        return self.claims[i]

    def get(self, key: Hashable) -> Claim | None:
        """The claim named `key`, or None."""
        try:
            return self.claims[self.keys.index(key)]
        except ValueError:
            return None

    def oriented(self, a: Hashable, b: Hashable) -> tuple[float, float, float] | None:
        """(ratio, low, high) of a / b at the family's level, from the claim named (a, b)
        or, inverted, (b, a); None if neither is in the family."""
        if (c := self.get((a, b))) is not None:
            return c.ratio, c.low, c.high
        if (c := self.get((b, a))) is not None:
            return 1 / c.ratio, 1 / c.high, 1 / c.low
        return None

    def sentence(self, what: str = "claims") -> str:
        return self.family.sentence(what)


def judge(tests: Sequence[verdict.LogRatio], higher_is_better: Sequence[bool] | bool, *,
          q: float = DEFAULT_Q, threshold: float = verdict.DEFAULT_THRESHOLD,
          method: str = FDR, keys: Sequence[Hashable] = ()) -> Judged:
    """Every test of one family judged by `method` at `q` (see the module doc): better /
    worse iff significant, which is iff the printed interval excludes 1; no significant
    difference iff that interval lies inside ±`threshold`; else inconclusive. `keys`:
    one name per test, for `Judged.get`."""
    tests = list(tests)
    if keys and len(keys) != len(tests):
        raise ValueError("one key per test")
    hib = ([bool(higher_is_better)] * len(tests) if isinstance(higher_is_better, bool)
           else [bool(h) for h in higher_is_better])
    if len(hib) != len(tests):
        raise ValueError("one higher_is_better per test")
    fam = adjust([t.p for t in tests], q=q, method=method)
    claims = []
    for t, h, pa in zip(tests, hib, fam.p_adjusted, strict=True):
        adj = t.at_level(fam.level)
        v = verdict.decide(adj.low, adj.high, pa, ratio=t.ratio, higher_is_better=h,
                           alpha=q, threshold=threshold)
        claims.append(Claim(t, pa, adj, v, float(q), method))
    return Judged(fam, tuple(claims), tuple(keys))


def disagreements(judged: Judged) -> int:
    """Claims whose verdict disagrees with their printed interval (better/worse with an
    interval that includes 1, or not with one that excludes it): 0 by construction, and
    counted by the methodology's simulation to show it."""
    bad = 0
    for c in judged.claims:
        if math.isnan(c.low):
            bad += c.significant
            continue
        excludes = c.low > 1 or c.high < 1
        bad += excludes != c.significant
    return bad
