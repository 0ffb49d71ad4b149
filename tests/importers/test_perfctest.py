"""perfctest: seed 000's per-operation log -> one op record per SINGLEOPERATION line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ImportFormatError
from harness.importers import import_file
from tests.importers.conftest import import_and_summarise, write_variant

#: The 21 SINGLEOPERATION times of seed 000, in seconds, as printed.
SEED_TIMES = [
    1.234597, 0.511594, 0.333521, 0.485551, 0.460911, 0.390721, 0.478885, 0.331397,
    0.304744, 0.592656, 0.512465, 0.418029, 0.400537, 0.511262, 0.511853, 0.410005,
    0.614254, 0.614385, 0.409191, 0.336019, 0.483885,
]


def test_seed_000_one_record_per_single_operation(seed, tmp_path: Path) -> None:
    table = import_and_summarise("perfctest", seed("000"), tmp_path, ["threads", "op"])
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["threads"], row["op"], row["ops"]) == (1, "insert", 21)
    assert row["latency_mean_ms"] == pytest.approx(sum(SEED_TIMES) / 21 * 1000)
    assert row["latency_p50_ms"] == pytest.approx(sorted(SEED_TIMES)[10] * 1000)
    # Back to back, one thread: throughput = ops / sum of their times.
    assert row["throughput_ops_s"] == pytest.approx(21 / sum(SEED_TIMES))


def test_seed_000_reading(seed) -> None:
    result = import_file("perfctest", seed("000"))
    (run,) = result.runs
    lat = run.records[0].latencies()
    assert lat[0] == 1_234_597_000  # seconds -> ns, exactly
    assert run.grid_point == {"op": "insert", "threads": 1}
    assert run.params == {"field3": "1"}  # unnamed column, kept verbatim
    assert run.extra["stated_total_s"] == 459.302978
    assert not run.aggregated
    assert any("21 operation(s)" in n for n in run.notes)
    # The column-title line is noise (and, in the seed document, the editor's header).
    skipped = dict(result.skipped)
    if seed.source == "seed":
        assert "2014-11-06-05-28-36.result 2014-11-07-01-38-57.result" in skipped.values()
        assert "1 nthreads operation time" in skipped.values()
    else:
        assert skipped == {1: "nthreads operation time"}


def test_without_line_numbers_and_two_experiments(tmp_path: Path) -> None:
    text = "\n".join([
        "nthreads operation time",
        "1 insert 2.0 ALLOPERATIONS",
        "1 insert 1 1.0 2.0 SINGLEOPERATION",
        "1 insert 1 1.0 2.0 SINGLEOPERATION",
        "4 find 0.9 ALLOPERATIONS",
        "4 find 1 0.2 0.9 SINGLEOPERATION",
        "4 find 2 0.3 0.9 SINGLEOPERATION",
        "4 remove 5.0 ALLOPERATIONS",
    ])
    result = import_file("perfctest", write_variant(tmp_path, "log.result", text))
    assert [r.grid_point for r in result.runs] == [
        {"op": "insert", "threads": 1}, {"op": "find", "threads": 4}]
    assert result.runs[1].params == {}
    assert result.runs[1].extra["field3_values"] == ["1", "2"]
    assert any("remove" in n and "no SINGLEOPERATION" in n for n in result.notes)


def test_truncated_and_noisy(tmp_path: Path) -> None:
    text = "\n".join([
        "Page 3",
        "3 1 insert 1 1.234597 459.302978 SINGLEOPERATION",
        "4 1 insert 1 0.511594 459.302978 SINGLEOP",  # cut
        "5 1 insert 1 0.33",  # cut
    ])
    result = import_file("perfctest", write_variant(tmp_path, "cut.txt", text))
    (run,) = result.runs
    assert run.records[0].latencies().tolist() == [1_234_597_000]
    assert [no for no, _ in result.skipped] == [1, 3, 4]
    assert any("no ALLOPERATIONS line" in n for n in run.notes)


def test_nothing_recognisable(tmp_path: Path) -> None:
    p = write_variant(tmp_path, "prose.txt", "Performance\n\nExperiment 1:\n")
    with pytest.raises(ImportFormatError, match=r"prose\.txt: no perfctest records found"):
        import_file("perfctest", p)


@pytest.mark.parametrize(("line", "message"), [
    ("9" * 4301 + " insert 1 0.5 459.302978 SINGLEOPERATION",
     r"nthreads 999999999999\.\.\. \(4301 characters\) has more digits"),
    ("0 insert 1 0.5 459.302978 SINGLEOPERATION", r"nthreads 0 is below 1"),
    ("1 insert 1 " + "9" * 400 + ".5 459.302978 SINGLEOPERATION",
     r"insert time 999999999999\.\.\. \(402 characters\) is not a finite number"),
    ("1 insert 1 0.5 " + "9" * 400 + " SINGLEOPERATION",
     r"insert total 999999999999\.\.\. \(400 characters\) is not a finite number"),
    # A digit to str.isdigit but not to int(): was a ValueError; not a line of the log.
    ("² insert 1 0.5 459.302978 SINGLEOPERATION", None),
])
def test_impossible_numbers_name_the_line(line: str, message: str | None,
                                          tmp_path: Path) -> None:
    text = "nthreads operation time\n1 insert 1 0.25 459.302978 SINGLEOPERATION\n" + line
    p = write_variant(tmp_path, "p.result", text + "\n")
    if message is None:
        assert import_file("perfctest", p).skipped[-1] == (3, line)
        return
    with pytest.raises(ImportFormatError, match=r"p\.result:3: " + message):
        import_file("perfctest", p)
