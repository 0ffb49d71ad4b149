"""Two-level fractional factorial designs: which grid points a spec's ``design:`` runs, and
which effects then share a column (are aliased).

A spec whose grid keys each have exactly two values may ask for ``design: {kind:
fractional, resolution: 4}``: instead of all 2^k combinations, 2^(k-p) of them, chosen
so that no effect of interest shares its column with another (Box, Hunter & Hunter,
ch. 6). Resolution III keeps main effects apart from each other (each aliased with
two-factor interactions); IV keeps main effects clear of two-factor interactions (which
alias among themselves); V keeps every main effect and two-factor interaction apart.
`fractional` takes the smallest design of the resolution asked for, found by a search
over generator words (each added factor the product of some base factors), preferring
fewer short words in the defining relation (minimum aberration) among those it tries.
`harness explain` estimates what the design allows and names the aliases.

Factors are indexed 0..k-1 in grid order; a word is a frozenset of factor indices (an
interaction of those factors; the empty word is the mean).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

Word = frozenset[int]
#: The most factors a design may have (a search beyond grows fast; 12 two-level factors
#: are already 4096 combinations in full).
MAX_FACTORS = 12
#: Generators tried (each a step of the search) per number of base factors before the
#: best design found so far is taken.
_MAX_TRIES = 4_000


def _product(a: Word, b: Word) -> Word:
    return a ^ b  # x_i^2 = 1 for ±1 columns: shared factors cancel


@dataclass(frozen=True)
class Design:
    """A 2^(k-p) design: `factors` (grid keys), their two `levels` each (low first, as
    the grid lists them), and per added factor the word of base factors it equals."""

    factors: tuple[str, ...]
    levels: tuple[tuple[Any, Any], ...]
    generators: tuple[tuple[int, Word], ...]

    @property
    def k(self) -> int:
        return len(self.factors)

    @property
    def p(self) -> int:
        return len(self.generators)

    @cached_property
    def defining_relation(self) -> tuple[Word, ...]:
        """Every non-empty word w with column(w) = +1 on every run (I = w)."""
        gens = [frozenset({added}) | word for added, word in self.generators]
        out: set[Word] = set()
        for r in range(1, len(gens) + 1):
            for combo in itertools.combinations(gens, r):
                w: Word = frozenset()
                for g in combo:
                    w = _product(w, g)
                out.add(w)
        return tuple(sorted(out, key=lambda w: (len(w), sorted(w))))

    @property
    def resolution(self) -> int:
        """The shortest word of the defining relation (a full design: k + 1, beyond all)."""
        return min((len(w) for w in self.defining_relation), default=self.k + 1)

    def rows(self) -> list[tuple[int, ...]]:
        """The runs' ±1 levels, one tuple per run, in standard order of the base factors."""
        added = dict(self.generators)
        base = [i for i in range(self.k) if i not in added]
        out = []
        for signs in itertools.product((-1, 1), repeat=len(base)):
            level = dict(zip(base, signs, strict=True))
            for i, word in sorted(added.items()):
                v = 1
                for j in word:
                    v *= level[j]
                level[i] = v
            out.append(tuple(level[i] for i in range(self.k)))
        return out

    def points(self) -> list[dict[str, Any]]:
        """The grid points the design runs."""
        return [{f: self.levels[i][0 if s < 0 else 1] for i, (f, s) in
                 enumerate(zip(self.factors, row, strict=True))} for row in self.rows()]

    def aliases(self, word: Word, max_order: int = 2) -> list[Word]:
        """The effects of order <= `max_order` sharing `word`'s column (not itself)."""
        out = {_product(word, w) for w in self.defining_relation}
        return sorted((w for w in out if 0 < len(w) <= max_order and w != word),
                      key=lambda w: (len(w), sorted(w)))

    def name(self, word: Word) -> str:
        return ":".join(self.factors[i] for i in sorted(word))

    def describe(self) -> list[str]:
        """Lines for `--dry-run`: the design, its defining relation and the aliases of
        every main effect and two-factor interaction."""
        letters = {i: f for i, f in enumerate(self.factors)}
        lines = [f"fractional factorial 2^({self.k}-{self.p}): {len(self.rows())} of "
                 f"{2 ** self.k} combinations, resolution {self.resolution}"]
        for added, word in self.generators:
            lines.append(f"  {letters[added]} = {self.name(word)}")
        if self.defining_relation:
            lines.append("  defining relation: I = " + " = ".join(
                self.name(w) for w in self.defining_relation))
        seen: set[Word] = set()
        for order in (1, 2):
            for combo in itertools.combinations(range(self.k), order):
                w = frozenset(combo)
                al = self.aliases(w)
                if al and w not in seen:
                    seen.update([w, *al])
                    lines.append("  aliased (one column, estimated as one): "
                                 + " = ".join(self.name(a) for a in [w, *al]))
        return lines


def _aberration(design: Design) -> tuple[int, ...]:
    """Word-length pattern from the shortest words: less is better."""
    counts = [0] * (design.k + 1)
    for w in design.defining_relation:
        counts[len(w)] += 1
    return tuple(counts[3:])


def fractional(factors: Sequence[str], levels: Sequence[Sequence[Any]],
               resolution: int) -> Design:
    """The smallest design of at least `resolution` over `factors` (two levels each)."""
    k = len(factors)
    if not 3 <= resolution <= k + 1:
        raise ValueError(f"resolution {resolution} is not between 3 and {k + 1} "
                         f"for {k} factors")
    if k > MAX_FACTORS:
        raise ValueError(f"{k} factors: at most {MAX_FACTORS} in a fractional design")
    lv = tuple((a, b) for a, b in levels)
    for p in range(k - 1, -1, -1):
        base = k - p
        if 2 ** base < k + 1 and p:
            continue
        words = [frozenset(c) for r in range(max(2, resolution - 1), base + 1)
                 for c in itertools.combinations(range(base), r)]
        best = _search(tuple(factors), lv, base, p, words, resolution)
        if best is not None:
            return best
    return Design(tuple(factors), lv, ())


def _search(factors: tuple[str, ...], levels: tuple[tuple[Any, Any], ...], base: int,
            p: int, words: Sequence[Word], resolution: int) -> Design | None:
    """Of the 2^(k-p) designs whose added factors are products of `words`, one of at
    least `resolution` and, among the first found, of least aberration; None if none
    is found within `_MAX_TRIES` steps.

    Depth first over the words in order, a generator at a time, leaving a branch as
    soon as its defining relation has a word shorter than `resolution` (more
    generators only add words). Taking combinations in order without that pruning
    spent the tries on sets that all shared a failing first pair, and missed designs
    that exist (11 factors at resolution V in 256 runs instead of 128)."""
    best: Design | None = None
    tries = 0

    def extend(start: int, chosen: list[Word], relation: list[Word]) -> None:
        nonlocal best, tries
        if len(chosen) == p:
            d = Design(factors, levels, tuple((base + j, w) for j, w in enumerate(chosen)))
            if best is None or _aberration(d) < _aberration(best):
                best = d
            return
        for i in range(start, len(words)):
            if tries >= _MAX_TRIES:
                return
            tries += 1
            g = words[i] | {base + len(chosen)}
            added = [g, *(_product(g, w) for w in relation)]
            if min(len(w) for w in added) >= resolution:
                extend(i + 1, [*chosen, words[i]], [*relation, *added])

    extend(0, [], [])
    return best


def design_from(spec_design: Mapping[str, Any], grid: Mapping[str, Sequence[Any]]
                ) -> Design | None:
    """The design a validated spec's ``design:`` asks for over its `grid` (None: full)."""
    if spec_design.get("kind", "full") == "full":
        return None
    keys = list(grid)
    return fractional(keys, [grid[k] for k in keys], int(spec_design["resolution"]))
