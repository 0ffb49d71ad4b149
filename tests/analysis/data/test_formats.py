"""The formatters print one figure computed by two paths as one text: a figure at a
printed digit's rounding point and its neighbours a bit away (what a sum taken in another
order gives: DuckDB's and numpy's, the C split's and numpy's, another CPU's) print the
same; figures away from such a point print as they always did."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from harness.analysis.data.formats import human, num, pct, ratio_text, settled


def _neighbours(x: float) -> list[float]:
    """`x` and the floats one and two ulps either side of it."""
    down = np.nextafter(x, -np.inf)
    up = np.nextafter(x, np.inf)
    return [float(v) for v in (np.nextafter(down, -np.inf), down, x, up,
                               np.nextafter(up, np.inf))]


@pytest.mark.parametrize("fmt,point", [
    (human, "1.2345"), (human, "0.00012345"), (num(3), "2.345"), (num(3), "1234.5"),
    (ratio_text, "1.005"), (ratio_text, "12.25"), (pct(2), "0.0125")],
    ids=["human", "human-small", "num", "num-big", "ratio", "ratio-10", "pct"])
def test_last_bit_differences_print_the_same(fmt, point: str) -> None:
    """`point` is where the printed digit rounds; the floats nearest it lie either side."""
    near = _neighbours(float(point))
    assert Decimal(near[0]) < Decimal(point) < Decimal(near[-1])
    assert len({fmt(v) for v in near}) == 1, [fmt(v) for v in near]


def test_a_sum_in_another_order_prints_the_same() -> None:
    """0.1 + 0.2 + 0.3 and 0.3 + 0.2 + 0.1 differ in the last bit."""
    a, b = (0.1 + 0.2) + 0.3, (0.3 + 0.2) + 0.1
    assert a != b and settled(a) == settled(b)
    for fmt in (human, num(16), ratio_text, pct(15)):
        assert fmt(a) == fmt(b), fmt


def test_figures_away_from_a_rounding_point_print_as_before() -> None:
    assert [human(v) for v in (0.1071, 38268.4, 1.254e-05, 6.0, 62810.0)] == [
        "0.1071", "38,268", "0.00001254", "6", "62,810"]
    assert num(3)(0.08618) == "0.0862" and num(3)(31640.2) == "31,640"
    assert ratio_text(1.3204038806742637) == "1.32x" and pct(2)(0.0812) == "8.1%"
    assert settled(float("nan")) != settled(float("nan")) and settled(0.0) == 0.0
    assert settled(float("inf")) == float("inf")


def test_an_interval_that_bounds_nothing_says_so_with_the_runs_it_would_take() -> None:
    """The reader's "p99 1.87 (0.0917-3,006,712) ms" and "0.00-506x": beyond 10x either
    side of the estimate an interval is printed as too few runs to bound."""
    import pandas as pd

    from harness.analysis.data.formats import bound_text, runs_to_bound, unbounded
    from harness.analysis.sections.tables import ci_column

    assert unbounded(1.87, 0.0917, 3_006_712) and unbounded(0.5, 0.0, 506)
    assert unbounded(2.0, 0.1, 3.0)  # 20x below
    assert not unbounded(1.87, 0.2, 18.0) and not unbounded(1.0, 0.8, 1.2)
    assert not unbounded(1.0, float("nan"), float("nan"))  # no interval: said otherwise
    # Width on the log scale shrinks as 1/sqrt(runs): 3 runs at 100x either side need
    # about 3 * (log 100 / log 10)^2 = 12 for 10x.
    assert runs_to_bound(3, 1.0, 0.01, 100.0) == 12
    assert runs_to_bound(3, 1.0, 0.5, 2.0) == 4  # already bounded: at least one more
    assert bound_text(3, 1.0, 0.01, 100.0) == "too few runs to bound (3 runs; about 12 would)"
    t = pd.DataFrame({"mean": [1.87, 2.0], "ci_low": [0.0917, 1.9], "ci_high": [3_006_712, 2.1],
                      "runs": [2, 5]})
    shown = list(ci_column(t))
    assert shown[0].startswith("1.87 (too few runs to bound (2 runs; about ")
    assert shown[1] == "2 (1.9–2.1)"
