"""Property tests of two importers' inputs built field by field (issue 48 items 5 and 7):
HdrHistogram interval logs whose headers declare any range, significant figures, offset
or cookie and whose counts are any varints (runs of empty buckets past the end, counts
past any bound, bytes cut short), and redis-benchmark CSV files of any numbers. Whatever
they hold: an `ImportFormatError` naming the file, or runs within the op bound; memory
in proportion to what the file holds, never to what its headers declare; and the
decoder's two ways of reading counts (Python for a few bytes, numpy for many) agree.

Fixed budgets (`max_examples`), derandomized: the same examples in CI every time.
"""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import harness.importers.hdr as hdr
from harness.errors import ImportFormatError
from harness.importers import ImportOptions, import_file
from tests.importers.hdrwire import COMPRESSED_COOKIE, ENCODED_COOKIE, interval_log, payload

BUDGET = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.function_scoped_fixture])
MAX_OPS = 20_000
#: Memory one import of these files may hold at its peak: its records (MAX_OPS, a few
#: arrays of 8 bytes each) and a few small payloads; a counts array of what the headers
#: declare (5 figures up to 2^63: 6.3 million entries) is 50 MB.
PEAK_BYTES = 8 << 20

_TOKENS = st.lists(st.one_of(
    st.integers(0, 50), st.integers(-200, -1), st.integers(-(10**7), -1),
    st.sampled_from([10**9, 2**55 - 1, -(2**40), 2**54, 0, 1])), max_size=60)


_SANE_TOKENS = st.lists(st.one_of(st.integers(0, 50), st.integers(-200, -1)), max_size=60)


@st.composite
def _histogram(draw: st.DrawFn) -> str:
    """A compressed histogram: mostly one a library could write (any figures, ranges up
    to 2^63), else of any header and counts, sometimes damaged."""
    if draw(st.integers(0, 9)) < 8:
        lowest = draw(st.sampled_from([1, 1, 2, 1000]))
        return payload(draw(_SANE_TOKENS), digits=draw(st.integers(0, 5)), lowest=lowest,
                       highest=draw(st.sampled_from([3_600_000_000, 10**12, 2**63 - 1])))
    kw: dict[str, Any] = {
        "digits": draw(st.sampled_from([0, 1, 2, 3, 3, 3, 4, 5, 5, -1, 6])),
        "lowest": draw(st.sampled_from([1, 1, 1, 2, 1000, 2**40, 2**62, 0, -1])),
        "highest": draw(st.sampled_from([3_600_000_000, 10**12, 2**62, 2**63 - 1, 2**63 - 1,
                                         1, 1000, -5])),
        "offset": draw(st.sampled_from([0, 0, 0, 0, 1])),
        "cookie": draw(st.sampled_from([ENCODED_COOKIE] * 6 + [0x1C849301, 7])),
        "outer_cookie": draw(st.sampled_from([COMPRESSED_COOKIE] * 6 + [0])),
    }
    if draw(st.integers(0, 9)) == 0:
        kw["body"] = draw(st.binary(max_size=80))
    if draw(st.integers(0, 9)) == 0:
        kw["length"] = draw(st.integers(-5, 500))
    text = payload(draw(_TOKENS), **kw)
    how = draw(st.sampled_from(["whole"] * 6 + ["cut", "flip", "junk"]))
    if how == "cut":
        return text[:draw(st.integers(0, len(text)))]
    if how == "flip":
        at = draw(st.integers(0, len(text) - 1))
        return text[:at] + draw(st.sampled_from("A/+=x!")) + text[at + 1:]
    if how == "junk":
        return text + draw(st.sampled_from(["==", "AAAA", "\u00e9", " tail"]))
    return text


_STAMP = st.sampled_from(["0.000", "1.000", "17.5", "-1.000", "1e300", "nan", "", "9" * 30])
_STAMPS = st.lists(st.none() | st.none() | st.none() | st.tuples(_STAMP, _STAMP), min_size=6,
                   max_size=6)


@BUDGET
@given(hists=st.lists(_histogram(), min_size=1, max_size=6),
       stamps=_STAMPS)
def test_an_interval_log_of_any_histograms(tmp_path_factory: pytest.TempPathFactory,
                                           hists: list[str],
                                           stamps: list[tuple[str, str] | None]) -> None:
    path = interval_log(tmp_path_factory.mktemp("hdr") / "any.hdr", hists)
    lines = path.read_text().splitlines()
    for i, stamp in enumerate(stamps[:len(hists)]):  # times of any kind, now and then
        if stamp is not None:
            rest = lines[3 + i].split(",", 2)[2]
            lines[3 + i] = f"{stamp[0]},{stamp[1]},{rest}"
    path.write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        result = import_file("ycsb-hdr", path, ImportOptions(max_ops=MAX_OPS))
    except ImportFormatError as exc:
        assert str(exc).startswith(str(path))
        event("refused")
        return
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK_BYTES, f"{peak:,} bytes held for {path.stat().st_size:,} bytes"
    event("imported")
    records = [r for run in result.runs for r in run.records]
    total = sum(len(r.latencies_ns) for r in records)
    assert 0 < total <= MAX_OPS
    for r in records:
        assert np.isfinite(r.latencies_ns).all() and (r.latencies_ns >= 0).all()


@BUDGET
@given(tokens=_TOKENS, digits=st.integers(0, 5),
       lowest=st.sampled_from([1, 3, 1000, 2**30]),
       highest=st.sampled_from([10**6, 3_600_000_000, 2**50, 2**63 - 1]),
       repeat=st.integers(1, 40))
def test_counts_read_in_python_and_with_numpy_agree(
        monkeypatch: pytest.MonkeyPatch, tokens: list[int], digits: int, lowest: int,
        highest: int, repeat: int) -> None:
    """The decoder reads a few bytes of counts in Python and many with numpy: the same
    histogram (or the same refusal) both ways."""
    if highest < 2 * lowest:
        highest = 2 * lowest
    text = payload(tokens * repeat, digits=digits, lowest=lowest, highest=highest)

    def read(few: int) -> Any:
        monkeypatch.setattr(hdr, "_FEW", few)
        try:
            got = hdr.decode(text, "x", max_ops=10**8)
        except ImportFormatError as exc:
            return "refused", str(exc).split(" (")[0]
        return got.values.tolist(), got.counts.tolist()

    python, numpy = read(10**9), read(0)
    event("refused" if python[0] == "refused" else "decoded")
    assert python == numpy


# --- redis-benchmark --csv ----------------------------------------------------------

_VALID = st.floats(min_value=0.001, max_value=1e6, allow_nan=False).map(lambda v: f"{v:.3f}")
_NUMBER = st.one_of(
    _VALID, _VALID, _VALID,
    st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e309", "1e-320", "9" * 40, "",
                     "abc", "0.000", "1,5"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr))
_NAME = st.one_of(st.sampled_from(["SET", "GET", "MSET (10 keys)", "LPUSH", ""]),
                  st.text(max_size=15))
_HEADER = '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",' \
          '"p95_latency_ms","p99_latency_ms","max_latency_ms"'


def _row(name: str, numbers: list[str]) -> str:
    quoted = name.replace('"', '""')
    return ",".join([f'"{quoted}"', *(f'"{n}"' for n in numbers)])


@BUDGET
@given(rows=st.lists(st.tuples(_NAME, st.lists(_NUMBER, min_size=1, max_size=8)),
                     max_size=12),
       header=st.booleans(), requests=st.sampled_from([1, 1000, 20_000, 10**6, 10**9]),
       junk=st.lists(st.sampled_from(["", "# comment", '"unclosed', "a,b,c", "\x00"]),
                     max_size=3))
def test_a_redis_benchmark_csv_of_any_numbers(tmp_path_factory: pytest.TempPathFactory,
                                              rows: list[tuple[str, list[str]]],
                                              header: bool, requests: int,
                                              junk: list[str]) -> None:
    lines = ([_HEADER] if header else []) + [_row(n, v) for n, v in rows] + junk
    path = tmp_path_factory.mktemp("csv") / "any.csv"
    path.write_text("\n".join(lines) + "\n")
    try:
        result = import_file("redis-benchmark-csv", path,
                             ImportOptions(requests=requests, max_ops=100_000))
    except ImportFormatError as exc:
        assert str(exc).startswith(str(path))
        event("refused")
        return
    event("imported")
    assert 0 < len(result.runs) <= len(rows)
    assert sum(r.count for run in result.runs for r in run.records) <= 100_000
    for run in result.runs:
        (rec,) = run.records
        assert rec.count == requests and math.isfinite(rec.total_ns) and rec.total_ns >= 0
        assert rec.wall_ns is None or 0 < rec.wall_ns < 2**62  # None: the old layout
        figures = run.extra["stated_latency_ms"]["_all"]
        assert all(math.isfinite(v) and v >= 0 for v in figures.values())
