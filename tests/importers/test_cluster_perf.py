"""cluster-perf: seed 002's two cluster_perf outputs -> µs per object as printed."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from harness.errors import ImportFormatError
from harness.importers import import_file
from tests.importers.conftest import import_and_summarise, write_variant

#: (mode, op) -> (count, milliseconds, the integer µs/op the tool printed)
SEED_002 = {
    ("local-cluster", "insert"): (100000, 562, 5),
    ("local-cluster", "hash_search"): (100000, 113, 1),
    ("local-cluster", "tree_search"): (100000, 285, 2),
    ("local-cluster", "sequential"): (100000, 100, 1),
    ("local-cluster", "search_delete"): (100000, 782, 7),
    ("network-cluster", "insert"): (100000, 2656, 26),
    ("network-cluster", "hash_search"): (100000, 141, 1),
    ("network-cluster", "tree_search"): (100000, 359, 3),
    ("network-cluster", "sequential"): (100000, 94, 0),
    ("network-cluster", "search_delete"): (100001, 1703, 17),
}


def test_seed_002_microseconds_per_object(seed, tmp_path: Path) -> None:
    table = import_and_summarise("cluster-perf", seed("002"), tmp_path,
                                 ["mode", "nodes", "op"]).set_index(["mode", "op"])
    assert len(table) == len(SEED_002)
    assert set(table["nodes"]) == {2}
    for key, (count, ms, printed_us) in SEED_002.items():
        row = table.loc[key]
        us = row["latency_mean_ms"] * 1000
        assert row["ops"] == count
        assert us == pytest.approx(ms * 1000 / count, rel=1e-9)  # from the unrounded total
        assert math.floor(us + 1e-9) == printed_us, key  # the tool rounds down
        assert row["throughput_ops_s"] == pytest.approx(count / (ms / 1000))
    assert round(table.loc[("local-cluster", "insert"), "latency_mean_ms"] * 1000, 2) == 5.62


def test_seed_002_context_kept(seed) -> None:
    result = import_file("cluster-perf", seed("002"))
    local, network = result.runs[0], result.runs[5]
    assert [n["host"] for n in local.extra["cluster_nodes"]] == ["127.0.0.1", "127.0.0.1"]
    assert [n["host"] for n in network.extra["cluster_nodes"]] == ["192.168.1.220",
                                                                   "192.168.1.100"]
    assert local.extra["settings"]["This node ID"] == "0"
    assert network.extra["settings"]["This node ID"] == "1"
    assert local.extra["stated"]["microsecs_per_object"] == "5"
    assert all(r.aggregated for r in result.runs)
    skipped = [text for _, text in result.skipped]
    if seed.source == "seed":
        assert "Figure 1: Screen-shoton VM Centos" in skipped
    assert "Press any key to continue . . ." in skipped


SINGLE = """\
Number of nodes : 1
Node 10.0.0.5:20000, rank 1
Insert:
1000 objects: 10 milliseconds (10 microsecs/object)
Tree search:
"""


def test_single_node_and_truncated_output(tmp_path: Path) -> None:
    result = import_file("cluster-perf", write_variant(tmp_path, "one.log", SINGLE))
    (run,) = result.runs  # the tree search has no result line: cut off, not imported
    assert run.grid_point == {"op": "insert", "nodes": 1, "mode": "single-node"}


def test_no_node_list(tmp_path: Path) -> None:
    text = "Hash search:\n....\n50 searches: 1.5 milliseconds\n"
    result = import_file("cluster-perf", write_variant(tmp_path, "bare.log", text))
    (run,) = result.runs
    assert run.grid_point == {"op": "hash_search"}
    assert any("number of nodes" in n for n in run.notes)
    assert run.records[0].latencies().sum() == 1_500_000


def test_result_without_title_is_not_guessed(tmp_path: Path) -> None:
    text = "100000 objects: 562 milliseconds\nInsert:\n10 objects: 1 milliseconds\n"
    result = import_file("cluster-perf", write_variant(tmp_path, "x.log", text))
    assert [r.records[0].count for r in result.runs] == [10]
    assert any("without an operation title" in n for n in result.notes)


def test_nothing_recognisable(tmp_path: Path) -> None:
    p = write_variant(tmp_path, "none.log", "Test report.\nInsert:\n")
    with pytest.raises(ImportFormatError, match=r"none\.log: no cluster-perf records found"):
        import_file("cluster-perf", p)


@pytest.mark.parametrize(("result_line", "message"), [
    # Formerly a traceback (ValueError: ... needs a positive op count).
    ("00000 searches: 113 milliseconds", r"bad\.log:2: hash_search count 0 is below 1"),
    ("9" * 4301 + " searches: 113 milliseconds", r"bad\.log:2: hash_search count "
     r"999999999999\.\.\. \(4301 characters\) has more digits"),
    ("100000 searches: " + "9" * 400 + " milliseconds", r"bad\.log:2: hash_search "
     r"milliseconds 999999999999\.\.\. \(400 characters\) is not a finite number"),
])
def test_impossible_result_names_the_line(result_line: str, message: str,
                                          tmp_path: Path) -> None:
    p = write_variant(tmp_path, "bad.log", f"Hash search:\n{result_line}\n")
    with pytest.raises(ImportFormatError, match=message):
        import_file("cluster-perf", p)


@pytest.mark.parametrize(("nodes", "message"), [
    ("0", "Number of nodes 0 is below 1"),
    ("9" * 4301, r"Number of nodes 999999999999\.\.\. \(4301 characters\) has more digits"),
])
def test_impossible_number_of_nodes_names_the_line(nodes: str, message: str,
                                                   tmp_path: Path) -> None:
    p = write_variant(tmp_path, "bad.log", SINGLE.replace("Number of nodes : 1",
                                                          f"Number of nodes : {nodes}"))
    with pytest.raises(ImportFormatError, match=rf"bad\.log:1: {message}"):
        import_file("cluster-perf", p)


def test_a_long_run_of_digits_is_read_in_linear_time(tmp_path: Path) -> None:
    # The result pattern once backtracked over every start inside a digit run: 50,000
    # digits took minutes.
    p = write_variant(tmp_path, "digits.log", "Insert:\n" + "7" * 50_000 + " objects\n"
                      "..........10 objects: 1 milliseconds\n")  # dots, spaces lost
    t0 = time.monotonic()
    assert [r.records[0].count for r in import_file("cluster-perf", p).runs] == [10]
    assert time.monotonic() - t0 < 1
