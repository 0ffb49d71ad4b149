"""kv-report: seed 003's Report blocks -> put/get runs with the time per request."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.errors import ImportFormatError
from harness.importers import import_file
from tests.importers.conftest import import_and_summarise, write_variant

#: Every block of seed 003, in order: servers, clients, put ms, put count, get ms,
#: get count, cache (strategy, size) as assigned (the cache line before the block).
SEED_003 = [
    (5, 1, 3541, 1047, 3120, 1047, None),
    (10, 1, 4437, 1047, 3960, 1047, ("LFU", 5)),
    (15, 1, 4677, 1047, 4319, 1047, ("LFU", 5)),
    (10, 1, 4094, 1047, 4290, 1047, ("FIFO", 10)),
    (10, 1, 4926, 1047, 4145, 1047, ("LRU", 10)),
    (10, 1, 4595, 1047, 4440, 1047, ("LFU", 10)),
    (10, 10, 12651, 1047, 12183, 1047, ("LFU", 10)),
    (10, 15, 12557, 1047, 12656, 1047, ("LFU", 10)),
    (10, 20, 12033, 1047, 12139, 1047, None),
    (10, 5, 10741, 1047, 10747, 1047, None),
    (10, 1, 5353, 1047, 5155, 1047, None),
    (10, 20, 10852, 1047, 10848, 841, None),
    (5, 20, 9176, 1044, 9043, 907, None),
    (5, 20, 4625, 1046, 4604, 1045, None),
]


def test_seed_003_time_per_request(seed, tmp_path: Path) -> None:
    result = import_file("kv-report", seed("003"))
    assert len(result.runs) == 2 * len(SEED_003)
    for i, (servers, clients, put_ms, put_n, get_ms, get_n, cache) in enumerate(SEED_003):
        put, get = result.runs[2 * i], result.runs[2 * i + 1]
        for run, op, ms, n in ((put, "put", put_ms, put_n), (get, "get", get_ms, get_n)):
            assert run.grid_point["op"] == op
            assert (run.grid_point["servers"], run.grid_point["clients"]) == (servers, clients)
            cached = (run.grid_point.get("cache_strategy"), run.grid_point.get("cache_size"))
            assert cached == (cache or (None, None)), (i, op)
            rec = run.records[0]
            assert (rec.count, rec.total_ns) == (n, ms * 1e6)


def test_seed_003_summary_matches_the_reports(seed, tmp_path: Path) -> None:
    by = ["servers", "clients", "cache_strategy", "cache_size", "op"]
    table = import_and_summarise("kv-report", seed("003"), tmp_path, ["run_id", *by])
    expected = []
    for servers, clients, put_ms, put_n, get_ms, get_n, _ in SEED_003:
        expected += [(servers, clients, "put", put_ms / put_n), (servers, clients, "get",
                                                                 get_ms / get_n)]
    got = sorted(zip(table["servers"], table["clients"], table["op"],
                     table["latency_mean_ms"], strict=True))
    for (s, c, op, ms), (s2, c2, op2, ms2) in zip(sorted(expected), got, strict=True):
        assert (s, c, op) == (s2, c2, op2)
        assert ms2 == pytest.approx(ms, abs=1e-6)
    # The first report: 3541 ms / 1047 puts = 3.38 ms per put, 3120 / 1047 = 2.98 per get.
    first = table[(table["servers"] == 5) & (table["clients"] == 1)].set_index("op")
    assert round(first.loc["put", "latency_mean_ms"], 2) == 3.38
    assert round(first.loc["get", "latency_mean_ms"], 2) == 2.98
    assert pd.isna(first.loc["put", "cache_strategy"])


#: The three scaling runs' comment lines: the seed's, and the in-repo file's own words.
ANNOTATIONS = {
    "seed": ("This is the data", "On run time scaled by added 3 more servers",
             "Removed 2 Servers on the fly"),
    "legacy": ("scaling: one server added, then removed",
               "scaling: 3 servers added while the clients ran",
               "scaling: 2 servers removed while the clients ran"),
}


def test_seed_003_scaling_runs_are_annotated(seed) -> None:
    result = import_file("kv-report", seed("003"))
    first, added, removed = ANNOTATIONS[seed.source]
    notes = {r.grid_point.get("annotation") for r in result.runs}
    assert removed in notes
    assert added in notes
    scaled = [r for r in result.runs if r.grid_point.get("annotation")]
    assert len(scaled) == 6
    second = next(r for r in scaled if r.grid_point["servers"] == 5)
    assert second.extra["stated"]["throughput"] == "841/1047"
    assert any("differs from the counts" in n for n in second.notes)
    ok = next(r for r in scaled if r.grid_point["annotation"].startswith(first))
    assert ok.extra["stated"]["success_fraction"] == pytest.approx(841 / 1047)
    assert not any("differs" in n for n in ok.notes)


def test_seed_003_noise_skipped(seed) -> None:
    result = import_file("kv-report", seed("003"))
    skipped = [text for _, text in result.skipped]
    assert skipped.count("Reached here....") == 2  # the test program's own output
    if seed.source == "seed":
        assert skipped.count(
            "Akshaya Muralidharan Aynesh Sundararaj Bakar Andguladze Group 6 MS2") == 3
        assert "Cache Test" in skipped
    else:
        assert len(skipped) == 2


def test_wrapped_fields_author_line_inside_block(tmp_path: Path) -> None:
    text = """\
Cache Type: LRU Cache Size 3
=====Report=====
Number of Servers: 2
Some Author Line
Number of Clients: 4
Total Put Time in ms: 100
Total Put Count: 10 Total Get Time in ms: 50
Total Get Count: 5
Throughput: 50%
"""
    result = import_file("kv-report", write_variant(tmp_path, "r.txt", text))
    put, get = result.runs
    assert put.grid_point == {"op": "put", "servers": 2, "clients": 4,
                              "cache_strategy": "LRU", "cache_size": 3}
    assert get.records[0].latencies().sum() == 50_000_000
    assert result.skipped == [(4, "Some Author Line")]


def test_missing_header_and_truncated_block(tmp_path: Path) -> None:
    text = """\
======Report======
Number of Servers: 1 Number of Clients: 1
Total Put Time in ms: 10 Total Put Count: 5 Total Get Time in ms: 8 Total Get Count: 4
Number of Servers: 3 Number of Clients: 1
Total Put Time in ms: 30 Total Put Count: 10 Total Get Time in ms: 2"""
    result = import_file("kv-report", write_variant(tmp_path, "t.txt", text))
    assert [(r.grid_point["servers"], r.grid_point["op"]) for r in result.runs] == [
        (1, "put"), (1, "get"), (3, "put")]
    third = result.runs[2]
    assert any("without a Report header" in n for n in third.notes)
    assert any("get: time or count missing" in n for n in third.notes)


def test_cache_line_applies_to_next_block_only(tmp_path: Path) -> None:
    text = """\
======Report======
Number of Servers: 1 Number of Clients: 1
Total Put Time in ms: 10 Total Put Count: 5 Total Get Time in ms: 8 Total Get Count: 4
Cache Type:LFU Cache Size 5
Reached here....
======Report======
Number of Servers: 2 Number of Clients: 1
Total Put Time in ms: 10 Total Put Count: 5 Total Get Time in ms: 8 Total Get Count: 4
======Report======
Number of Servers: 3 Number of Clients: 1
Total Put Time in ms: 10 Total Put Count: 5 Total Get Time in ms: 8 Total Get Count: 4
"""
    result = import_file("kv-report", write_variant(tmp_path, "c.txt", text))
    caches = [r.grid_point.get("cache_strategy") for r in result.runs[::2]]
    assert caches == [None, "LFU", None]


def test_nothing_recognisable(tmp_path: Path) -> None:
    p = write_variant(tmp_path, "n.txt", "Performance Test Report\nReached here....\n")
    with pytest.raises(ImportFormatError, match=r"n\.txt: no kv-report records found"):
        import_file("kv-report", p)


BLOCK = """\
======Report======
Number of Servers: 1 Number of Clients: 1
Total Put Time in ms: 10 Total Put Count: 5
Total Get Time in ms: 8 Total Get Count: {get_count}
Throughput: {throughput}
"""


@pytest.mark.parametrize(("get_count", "throughput", "message"), [
    # A huge count was an OverflowError (int / int too large for a float), 4301 digits
    # Python's int-conversion ValueError.
    ("1" + "0" * 400, "100%", r"k\.txt:4: Total Get Count 100000000000\.\.\. \(401 "
     r"characters\) has more digits than any measurement"),
    ("9" * 4301, "100%", r"k\.txt:4: Total Get Count 999999999999\.\.\. \(4301 characters\)"),
    (str(10**8 + 1), "100%", r"k\.txt:4: Total Get Count 100,000,001 is more than"),
    ("4", "4/" + "9" * 4301, r"k\.txt:5: Throughput 999999999999\.\.\. \(4301 characters\)"),
    ("4", "9" * 400 + "%", r"k\.txt:5: Throughput 999999999999\.\.\. \(400 characters\) is "
     "not a finite number"),
])
def test_impossible_figures_name_the_line(get_count: str, throughput: str, message: str,
                                          tmp_path: Path) -> None:
    p = write_variant(tmp_path, "k.txt", BLOCK.format(get_count=get_count,
                                                      throughput=throughput))
    with pytest.raises(ImportFormatError, match=message):
        import_file("kv-report", p)


def test_zero_gets_is_said_so_not_called_missing(tmp_path: Path) -> None:
    p = write_variant(tmp_path, "k.txt", BLOCK.format(get_count="0", throughput="0/5"))
    (put,) = import_file("kv-report", p).runs
    assert put.grid_point["op"] == "put"
    assert any("get: 0 ops in 8 ms; no get run" in n for n in put.notes), put.notes
