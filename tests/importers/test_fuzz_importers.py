"""Fuzzing every importer: random text and mutated real documents either parse into runs
that the writer can store, or raise the documented `ImportFormatError` (a HarnessError)
naming the file; never another exception.

Seeds are the shared seed documents (located as the other importer tests do) and the
captured tool outputs in tests/data/importers. Deterministic (`derandomize=True`) and
bounded; the counts of each outcome are printed (`pytest -s`) for the record.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.importers import IMPORTERS, ImportOptions, ImportResult, import_file, write_import
from harness.results import verify_run
from tests.importers.conftest import DATA, LEGACY, LEGACY_FILES, SEED_FILES, SEEDS

EXAMPLES = 300
WRITE_EVERY = 25
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: The documents each format's fuzzing starts from.
SEED_DOCS: dict[str, list[Path]] = {
    # The in-repo files always; the seed documents too where they are beside the checkout.
    "perfctest": [LEGACY / LEGACY_FILES["000"], SEEDS / SEED_FILES["000"]],
    "gae-bench": [LEGACY / LEGACY_FILES["001"], SEEDS / SEED_FILES["001"]],
    "cluster-perf": [LEGACY / LEGACY_FILES["002"], SEEDS / SEED_FILES["002"]],
    "kv-report": [LEGACY / LEGACY_FILES["003"], SEEDS / SEED_FILES["003"],
                  SEEDS / "004_c2ae75d65a7c35cc.txt"],
    "memtier-json": [DATA / "memtier-2.0-sample.json", DATA / "memtier-old-no-count.json",
                     DATA / "memtier-redis-t2-c5-2s.json"],
    "redis-benchmark-csv": [DATA / "redis-benchmark-7.0-n20000-c10-d100.csv",
                            DATA / "redis-benchmark-7.0-n10000-c50-P4.csv",
                            DATA / "redis-benchmark-old-format.csv"],
    "ycsb": [DATA / "ycsb" / "ycsb-hdrhistogram-text.txt"],
    "ycsb-raw": [DATA / "ycsb" / "ycsb-raw.txt"],
    "ycsb-hdr": [DATA / "ycsb" / "READ.hdr", DATA / "ycsb" / "UPDATE.hdr"],
    "redis-benchmark": [DATA / "redis-benchmark-7.0-n2000-c10-d100.txt",
                        DATA / "redis-benchmark-7.0-n2000-c20-P8-q.txt"],
}
FUZZ_REQUESTS = {"redis-benchmark-csv": 1000, "redis-benchmark": 1000}
JUNK = ["", "0", "-1", "nan", "inf", "-inf", "1e309", "1e-320", "9" * 30, "abc", "--",
        "<br>", "\t", "\u00a0", "\x00", "ms", "ops/sec", ",", '"', "{", "}", "[", "]",
        "null", "true", "-----", "Threads: 4", "1,2,3"]


def _seeds(fmt: str) -> list[str]:
    found = [p.read_text(encoding="utf-8", errors="replace") for p in SEED_DOCS[fmt]
             if p.is_file()]
    # The first of each list is in the repository: a missing one is a broken checkout.
    assert SEED_DOCS[fmt][0].is_file(), f"{SEED_DOCS[fmt][0]} missing from the repository"
    return found


def _mutate_json(draw: st.DrawFn, text: str) -> str:
    """Replace, delete or retype values inside a JSON document."""
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    for _ in range(draw(st.integers(1, 4))):
        node, path = doc, []
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(st.sampled_from(list(node) if isinstance(node, dict)
                                       else range(len(node))))
            path.append((node, key))
            node = node[key]
        if not path:
            continue
        parent, key = path[-1]
        choice = draw(st.sampled_from(["delete", "junk", "number", "list", "dict"]))
        if choice == "delete":
            del parent[key]
        elif choice == "junk":
            parent[key] = draw(st.sampled_from(JUNK))
        elif choice == "number":
            parent[key] = draw(st.one_of(st.integers(-10**20, 10**20),
                                         st.floats(allow_nan=True, allow_infinity=True)))
        elif choice == "list":
            parent[key] = [parent[key]]
        else:
            parent[key] = {"x": parent[key]}
    return json.dumps(doc)


@st.composite
def mutated(draw: st.DrawFn, seeds: list[str]) -> str:
    text = draw(st.sampled_from(seeds))
    if text.lstrip().startswith("{") and draw(st.booleans()):
        text = _mutate_json(draw, text)
        if draw(st.booleans()):
            return text  # still JSON: reaches the parser's checks of the values
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 6))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "swap", "token", "insert",
                                       "cut"]))
        if action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "token":
            words = lines[i].split(" ")
            w = draw(st.integers(0, len(words) - 1))
            words[w] = draw(st.one_of(st.sampled_from(JUNK), st.text(max_size=8)))
            lines[i] = " ".join(words)
        elif action == "insert":
            lines.insert(i, draw(st.one_of(st.sampled_from(JUNK), st.text(max_size=40)))
                         + "\n")
        else:  # cut the line (and the document) short
            lines = [*lines[:i], lines[i][:draw(st.integers(0, len(lines[i])))]]
    return "".join(lines)


def _check_result(result: ImportResult) -> None:
    """What the writer relies on: op names, and finite non-negative integer latencies."""
    assert result.runs
    for run in result.runs:
        assert run.records and "op" in run.grid_point
        for rec in run.records:
            assert isinstance(rec.op, str) and rec.op
            lat = rec.latencies()
            assert lat.dtype == np.int64 and len(lat) > 0
            assert (lat >= 0).all(), f"negative latency in {rec.op}"
            if rec.latencies_ns is not None:
                assert np.isfinite(rec.latencies_ns).all()
            else:
                assert math.isfinite(rec.total_ns) and rec.total_ns >= 0
            if rec.wall_ns is not None:
                assert math.isfinite(rec.wall_ns) and rec.wall_ns > 0


def _parse(fmt: str, path: Path, text: str, counts: Counter) -> None:
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        # Requests per test: the CSV and -q output do not state them (--requests).
        result = import_file(fmt, path, ImportOptions(requests=FUZZ_REQUESTS.get(fmt)))
    except HarnessError as exc:  # ImportFormatError, as documented
        assert str(path) in str(exc), exc  # names the file
        counts[type(exc).__name__] += 1
        return
    _check_result(result)
    counts["parsed"] += 1
    if counts["parsed"] % WRITE_EVERY == 1:  # and the writer stores what was parsed
        raw = path.parent / "raw"
        written = write_import(result, raw, f"fuzz{counts['parsed']}")
        assert len(written) == len(result.runs)
        for run_dir in written:
            verify_run(run_dir)
        counts["written"] += 1


@pytest.mark.parametrize("fmt", sorted(SEED_DOCS))
def test_importer_parses_or_raises_import_format_error(fmt: str, tmp_path: Path) -> None:
    assert sorted(IMPORTERS) == sorted(SEED_DOCS), "a new importer needs its fuzz seeds"
    seeds = _seeds(fmt)
    counts: Counter = Counter()

    @FUZZ
    @given(text=st.one_of(mutated(seeds), st.text(max_size=300),
                          st.sampled_from(seeds).map(lambda s: s[:len(s) // 3])))
    def check(text: str) -> None:
        _parse(fmt, tmp_path / f"fuzz.{fmt}", text, counts)

    check()
    print(f"\nfuzz importer {fmt}: {counts['parsed'] + counts['ImportFormatError']} "
          f"examples: {dict(counts)}")
    assert counts["parsed"] + counts["ImportFormatError"] >= EXAMPLES * 0.9
    assert counts["parsed"] > 0 and counts["ImportFormatError"] > 0


@pytest.mark.parametrize("fmt", sorted(SEED_DOCS))
def test_binary_junk_is_an_import_format_error(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(HarnessError, match=r"junk\.bin"):
        import_file(fmt, path)
