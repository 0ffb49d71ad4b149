"""gae-bench: seed 001's set timings reproduce the document's table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.data.load import load
from harness.errors import ImportFormatError
from harness.importers import ImportOptions, import_file, write_import
from harness.importers.gae_bench import op_name
from harness.results import read_manifest
from tests.importers.conftest import import_and_summarise, write_variant

#: The document's table: ms per op, and the ratio to Mem/R-miss ("Mem/R比").
TABLE_MS = {"store_write": 17.94, "store_read": 7.1, "mem_write": 2.29,
            "mem_read_hit": 2.12, "mem_read_miss": 2.07}
TABLE_RATIO = {"store_write": 8.68, "store_read": 3.43, "mem_write": 1.11,
               "mem_read_hit": 1.02, "mem_read_miss": 1}


def _decimals(x: float) -> int:
    text = repr(x)
    return len(text.split(".")[1]) if "." in text else 0


def test_seed_001_reproduces_the_table(seed, tmp_path: Path) -> None:
    table = import_and_summarise("gae-bench", seed("001"), tmp_path, ["op"]).set_index("op")
    assert set(table.index) == set(TABLE_MS)
    assert (table["runs"] == 10).all() and (table["ops"] == 500).all()
    for op, printed in TABLE_MS.items():
        mean = table.loc[op, "latency_mean_ms"]
        assert round(mean, _decimals(printed)) == printed, op
    base = table.loc["mem_read_miss", "latency_mean_ms"]
    for op, printed in TABLE_RATIO.items():
        ratio = table.loc[op, "latency_mean_ms"] / base
        assert round(ratio, max(_decimals(printed), 0)) == printed, op
    # Unrounded: Store/W's ten sets sum to 8.972 s over 500 ops.
    assert table.loc["store_write", "latency_mean_ms"] == pytest.approx(17.944, abs=1e-9)
    # Throughput = ops / wall time = 500 / 8.972 s, as the seed's sets imply.
    assert table.loc["store_write", "throughput_ops_s"] == pytest.approx(500 / 8.972)


def test_seed_001_one_run_per_set(seed, tmp_path: Path) -> None:
    result = import_file("gae-bench", seed("001"))
    write_import(result, tmp_path, "s001")
    loaded = load(tmp_path, columns=["op", "latency_ns", "start_ns", "status"])
    runs = loaded.runs
    assert len(runs) == 50
    assert set(runs["source"]) == {"imported"}
    per_op = runs.groupby("op")["repetition"].apply(sorted)
    assert all(reps == list(range(1, 11)) for reps in per_op)
    first = runs[(runs["op"] == "store_write") & (runs["repetition"] == 1)].iloc[0]
    man = read_manifest(Path(first["run_dir"]))
    assert man.extra["aggregated"] is True
    assert man.extra["imported_from"]["file"] == seed("001").name
    assert man.extra["stated"]["set_seconds"] == "0.949"
    assert man.params["value_size_bytes"] == 100 and man.params["ops_per_set"] == 50
    assert man.hosts == {} and man.services == {} and man.kit == {}
    assert man.started_utc == ""
    ops = loaded.ops[loaded.ops["run_id"] == first["run_id"]]
    assert len(ops) == 50 and ops["latency_ns"].sum() == 949_000_000
    if seed.source == "seed":
        assert man.extra["skipped_lines"] > 100  # the code listing and the prose
    else:
        assert man.extra["skipped_lines"] == 0  # the handler's output only


def test_count_and_size_options(seed, tmp_path: Path) -> None:
    opts = ImportOptions(count=10, size=1000)
    table = import_and_summarise("gae-bench", seed("001"), tmp_path, ["op"], opts)
    row = table.set_index("op").loc["store_write"]
    assert row["ops"] == 100 and row["latency_mean_ms"] == pytest.approx(89.72)


def test_raw_html_output_and_missing_set(tmp_path: Path) -> None:
    html = ("----------DataStore - write<br>0.900<br>1.100<br>"
            "----------Memcached - read - hit<br>0.100<br>\n")
    result = import_file("gae-bench", write_variant(tmp_path, "out.html", html))
    assert [r.grid_point["op"] for r in result.runs] == ["store_write"] * 2 + ["mem_read_hit"]
    assert any("fewer sets" in n for n in result.notes)
    assert result.skipped == []


def test_noise_is_reported_not_guessed(tmp_path: Path) -> None:
    text = "\n".join([
        "Some blog header", "12", "----------DataStore - read", "0.406",
        "page 2 of 3", "0.338", "13", "----------Bogus test", "0.5", "Leave a Reply",
    ])
    result = import_file("gae-bench", write_variant(tmp_path, "x.txt", text))
    assert [r.grid_point["op"] for r in result.runs] == ["store_read", "store_read", "bogus_test"]
    assert [no for no, _ in result.skipped] == [1, 2, 5, 7, 10]
    assert any("Bogus test" in n for n in result.notes)


def test_truncated_file_keeps_complete_sets(tmp_path: Path) -> None:
    text = "----------DataStore - write\n0.949\n0.853\n0.8"  # cut inside "0.877"
    result = import_file("gae-bench", write_variant(tmp_path, "t.txt", text))
    assert [r.extra["stated"]["set_seconds"] for r in result.runs] == ["0.949", "0.853"]
    assert any("cut short" in n for n in result.notes)
    assert result.skipped == [(4, "0.8")]
    whole = import_file("gae-bench", write_variant(tmp_path, "w.txt", text[:-1] + "877"))
    assert len(whole.runs) == 3  # no line break at the end, but the value is whole


def test_nothing_recognisable_names_the_file(tmp_path: Path) -> None:
    p = write_variant(tmp_path, "empty.txt", "just prose\n1\n2\n")
    with pytest.raises(ImportFormatError, match=r"empty\.txt: no gae-bench records found"):
        import_file("gae-bench", p)


@pytest.mark.parametrize(("test", "op"), [
    ("DataStore - write", "store_write"), ("Memcached - read - miss", "mem_read_miss"),
    ("memcached read hit", "mem_read_hit"),
])
def test_test_names_map_to_study_ops(test: str, op: str) -> None:
    assert op_name(test) == (op, True)


def test_manifest_is_plain_json(seed, tmp_path: Path) -> None:
    write_import(import_file("gae-bench", seed("001")), tmp_path, "s001")
    man = next(tmp_path.glob("s001/*/manifest.json"))
    data = json.loads(man.read_text())
    assert data["source"] == "imported" and data["status"] == "complete"
    assert np.isclose(data["counts"]["measured"], 50)


def test_a_set_time_too_large_names_its_line(tmp_path: Path) -> None:
    # Was the generic "total time inf ns" error, after the whole file was read.
    text = "----------DataStore - write\n0.949\n" + "9" * 400 + ".853\n0.877\n"
    with pytest.raises(ImportFormatError, match=r"g\.txt:3: DataStore - write set seconds "
                                                r"999999999999\.\.\. \(404 characters\) is "
                                                "not a finite number"):
        import_file("gae-bench", write_variant(tmp_path, "g.txt", text))
