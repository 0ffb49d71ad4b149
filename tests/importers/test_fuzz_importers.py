"""Fuzzing every importer: random text and mutated real documents either parse into runs
that the writer can store, or raise the documented `ImportFormatError` (a HarnessError)
naming the file; never another exception.

Seeds are the shared seed documents (located as the other importer tests do) and the
captured tool outputs in tests/data/importers. Deterministic (`derandomize=True`) and
bounded; the counts of each outcome are printed (`pytest -s`) for the record.

The second test damages each real sample file the way files get damaged (cut short,
bytes flipped, numbers made huge, negative, zero or not finite, lines shuffled) and
counts every outcome instead of stopping at the first: inputs tried, clean errors,
parsed runs, tracebacks, hangs (more than `BOUND_S` of CPU or wall time for one input)
and parsed runs that break the invariants (a negative latency, a count below one).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import signal
import sys
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.importers import (
    IMPORTERS,
    ImportOptions,
    ImportResult,
    ParsedRun,
    Records,
    import_file,
    write_import,
)
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
                     DATA / "memtier-redis-t2-c5-2s.json",
                     DATA / "memtier-memcached-t1-c10-n2000.json"],
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


# --- damaged real files: every outcome counted -------------------------------------------

DAMAGE_EXAMPLES = 150
#: CPU seconds one input may take; real files parse in milliseconds.
BOUND_S = 2.0
DAMAGE = settings(FUZZ, max_examples=DAMAGE_EXAMPLES)
_NUMBER = re.compile(rb"\d+(?:\.\d+)?")
#: Replacements for a number: huge (one with more digits than int() converts by default,
#: a float overflowing to inf), negative, zero, not finite, much larger or smaller.
HUGE = [b"9" * 4301, b"1" + b"0" * 5000, b"18446744073709551616", b"9" * 30, b"1e400",
        b"99999999999"]
ODD = [b"0", b"0.0", b"nan", b"NaN", b"inf", b"-inf", b"Infinity", b"-Infinity"]


class _Hang(BaseException):
    """Raised by the CPU timer in a parse that runs too long (a BaseException, so a
    parser's own ``except Exception`` cannot swallow it)."""


@contextlib.contextmanager
def _cpu_bound(seconds: float) -> Iterator[None]:
    # SIGPROF (CPU time), not SIGALRM: pytest-timeout owns the real-time alarm.
    def fire(signum: int, frame: object) -> None:
        raise _Hang

    old = signal.signal(signal.SIGPROF, fire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def _new_number(draw: st.DrawFn, old: bytes) -> bytes:
    kind = draw(st.sampled_from(["huge", "negative", "odd", "larger", "smaller"]))
    if kind == "huge":
        return draw(st.sampled_from(HUGE))
    if kind == "negative":
        return b"-" + old
    if kind == "odd":
        return draw(st.sampled_from(ODD))
    if kind == "larger":  # e.g. one percentile above the next
        return b"9" + old
    return b"0.00" + old.replace(b".", b"")


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> tuple[bytes, list[str]]:
    """`data` after 1-3 kinds of damage, and what was done (for the failure message)."""
    done: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "number", "number", "number",
                                     "shuffle"]))
        if kind == "truncate" and data:
            cut = draw(st.integers(0, len(data) - 1))
            data = data[:cut]
            done.append(f"cut at byte {cut}")
        elif kind == "flip" and data:
            buf = bytearray(data)
            for _ in range(draw(st.integers(1, 4))):
                i = draw(st.integers(0, len(buf) - 1))
                buf[i] ^= draw(st.integers(1, 255))
                done.append(f"byte {i} flipped")
            data = bytes(buf)
        elif kind == "number":
            spans = [m.span() for m in _NUMBER.finditer(data)]
            if spans:
                a, b = draw(st.sampled_from(spans))
                new = _new_number(draw, data[a:b])
                done.append(f"number {data[a:b][:20]!r} at byte {a} -> {new[:20]!r}"
                            f"{f' ({len(new)} chars)' if len(new) > 20 else ''}")
                data = data[:a] + new + data[b:]
        elif kind == "shuffle":
            lines = data.splitlines(keepends=True)
            order = draw(st.permutations(range(len(lines))))
            data = b"".join(lines[i] for i in order)
            done.append("lines shuffled")
    return data, done


def _rank(key: str) -> float | None:
    """Where a stated figure sits in the distribution: min, p<q>, max; None for others."""
    if key in ("min", "max"):
        return -1.0 if key == "min" else 101.0
    try:
        return float(key[1:]) if key.startswith("p") else None
    except ValueError:
        return None


def _stated_problem(stated: dict) -> str | None:
    """Stated figures (ms) must be finite, non-negative and non-decreasing in rank."""
    for op, figures in stated.items():
        for k, v in figures.items():
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                return f"{op}: stated {k} = {v!r}"
        known = sorted((r, v, k) for k, v in figures.items() if (r := _rank(k)) is not None)
        for (_, v1, k1), (_, v2, k2) in itertools.pairwise(known):
            if v1 > v2:
                return f"{op}: stated {k1} {v1} > {k2} {v2}"
    return None


def _invariant_problem(result: ImportResult) -> str | None:
    """What a parsed run may not hold: a negative or non-finite latency, a count below
    one, stated percentiles out of order."""
    for run in result.runs:
        if not run.records:
            return f"run at line {run.line} without records"
        if problem := _stated_problem(run.extra.get("stated_latency_ms") or {}):
            return problem
        for rec in run.records:
            if rec.latencies_ns is not None:
                lat = rec.latencies_ns
                if len(lat) == 0 or not (np.isfinite(lat).all() and (lat >= 0).all()):
                    return f"{rec.op}: {len(lat)} latencies, some negative or not finite"
            elif rec.count < 1 or not (math.isfinite(rec.total_ns) and rec.total_ns >= 0):
                return f"{rec.op}: {rec.count} ops taking {rec.total_ns} ns"
            if rec.wall_ns is not None and not (math.isfinite(rec.wall_ns)
                                                and rec.wall_ns > 0):
                return f"{rec.op}: wall time {rec.wall_ns} ns"
            if rec.start_ns is not None and len(rec.start_ns) and not (
                    rec.start_ns.min() >= 0 and rec.start_ns.max() < 2**62):
                return f"{rec.op}: start times {rec.start_ns.min()} .. {rec.start_ns.max()}"
    return None


def _outcome(fmt: str, path: Path, data: bytes) -> tuple[str, str]:
    """(outcome, detail): error, parsed, traceback, hang, unnamed error or invalid run."""
    path.write_bytes(data)
    options = ImportOptions(requests=FUZZ_REQUESTS.get(fmt))
    try:  # CPU time, not wall time: a shared machine stretches the wall clock
        with _cpu_bound(BOUND_S):
            result = import_file(fmt, path, options)
    except _Hang:
        return "hangs", f"more than {BOUND_S} s of CPU"
    except HarnessError as exc:
        if str(path) not in str(exc):
            return "errors not naming the file", str(exc)
        return "clean errors", ""
    except Exception as exc:  # noqa: BLE001 - counted: what this test is here to find
        return "tracebacks", "".join(traceback.format_exception_only(exc)).strip()[:300]
    problem = _invariant_problem(result)
    return ("invalid runs", problem) if problem else ("parsed", "")


#: (format, sample file) pairs: every real sample of every format that is present.
SAMPLES = [(fmt, p) for fmt, paths in sorted(SEED_DOCS.items()) for p in paths if p.is_file()]
_TOTAL: Counter = Counter()


@pytest.mark.parametrize(("fmt", "sample"), SAMPLES,
                         ids=[f"{fmt}:{p.name}" for fmt, p in SAMPLES])
def test_damaged_samples_fail_cleanly(fmt: str, sample: Path, tmp_path: Path) -> None:
    counts: Counter = Counter()
    bad: dict[str, list[str]] = {}
    original = sample.read_bytes()

    @DAMAGE
    @given(case=damaged(original))
    def check(case: tuple[bytes, list[str]]) -> None:
        data, done = case
        outcome, detail = _outcome(fmt, tmp_path / sample.name, data)
        counts["inputs tried"] += 1
        counts[outcome] += 1
        if outcome not in ("clean errors", "parsed"):
            bad.setdefault(outcome, []).append(f"{'; '.join(done)}: {detail}")

    check()
    _TOTAL.update(counts)
    order = ["inputs tried", "clean errors", "parsed", "tracebacks", "hangs",
             "errors not naming the file", "invalid runs"]
    line = ", ".join(f"{k} {counts[k]}" for k in order)
    print(f"\ndamaged {fmt} {sample.name}: {line}\n  all samples so far: "
          + ", ".join(f"{k} {_TOTAL[k]}" for k in order))
    assert counts["inputs tried"] >= DAMAGE_EXAMPLES * 0.9
    assert not bad, "\n".join(f"{k} ({len(v)}): " + " | ".join(v[:3]) for k, v in bad.items())


@pytest.mark.parametrize(("parse", "outcome"), [
    (lambda path, options: int("9" * 4301), "tracebacks"),
    (lambda path, options: [0 for _ in iter(int, 1)], "hangs"),  # never ends
    (lambda path, options: ImportResult("x", path, runs=[ParsedRun(
        [Records("op", count=0)], {"op": "op"})]), "invalid runs"),
    (lambda path, options: ImportResult("x", path, runs=[ParsedRun(
        [Records.aggregate("op", 1, 5.0)], {"op": "op"},
        extra={"stated_latency_ms": {"op": {"p50": 5.0, "p99": 0.001}}})]), "invalid runs"),
    (lambda path, options: ImportResult("x", path, runs=[ParsedRun(
        [Records.aggregate("op", 1, 5.0)], {"op": "op"})]), "parsed"),
])
def test_each_damage_outcome_is_seen(parse, outcome: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The counts above can only be trusted if each outcome is recognised."""
    monkeypatch.setattr(IMPORTERS.get("kv-report"), "parse", parse)
    monkeypatch.setattr(sys.modules[__name__], "BOUND_S", 0.3)
    assert _outcome("kv-report", tmp_path / "f.txt", b"x")[0] == outcome
