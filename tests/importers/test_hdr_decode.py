"""The HdrHistogram decoder (`harness.importers.hdr.decode`) against what we did not
write: logs HdrHistogram's own Java classes wrote over every number of significant
figures (0 to 5) and ranges up to Long.MAX_VALUE, read back exactly as Java's
`recordedValues()` reads them; histograms the `hdrhistogram` package encodes, read as its
recorded iterator reads them. And its bounds: a header declaring the widest range is
read without the counts array it declares (issue 48 #5: a 409-byte log of 5 figures up
to 2^63 once took 88 s of CPU), and every damaged header is one line naming the file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tracemalloc
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main as cli_main
from harness.errors import ImportFormatError
from harness.importers.hdr import Layout, decode
from tests.importers.hdrwire import counts_index, interval_log, payload, varint

JAVA_SOURCE = Path(__file__).resolve().parents[1] / "data" / "importers" / "hdr" / \
    "MakeHdrLogs.java"
JAR = Path("/usr/share/java/hdrhistogram.jar")  # Debian: libhdrhistogram-java


@pytest.fixture(scope="module")
def java_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    java = shutil.which("java")
    if java is None or not JAR.is_file():
        msg = ("java or HdrHistogram's jar missing: apt-get install default-jre-headless "
               "libhdrhistogram-java")
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    out = tmp_path_factory.mktemp("java-hdr")
    subprocess.run([java, "-cp", str(JAR), str(JAVA_SOURCE), str(out)], check=True,
                   capture_output=True, timeout=600)
    return out


def _recorded(h: object) -> list[tuple[int, int]]:
    return [(it.value_iterated_to, it.count_added_in_this_iter_step)
            for it in h.get_recorded_iterator()]  # type: ignore[attr-defined]


def test_logs_written_by_java_decode_as_java_reads_them(java_logs: Path) -> None:
    logs = sorted(java_logs.glob("*.hlog"))
    assert len(logs) == 30  # 0 to 5 figures, five ranges each
    seen_digits, top_values = set(), 0
    for log in logs:
        expected: dict[int, list[tuple[int, int]]] = defaultdict(list)
        intervals = None
        for line in log.with_suffix(".expected").read_text().splitlines():
            parts = line.split(",")
            if parts[0] == "intervals":
                intervals = int(parts[1])
            else:
                expected[int(parts[0])].append((int(parts[1]), int(parts[2])))
        payloads = [line.rsplit(",", 1)[1] for line in log.read_text().splitlines()
                    if re.match(r"^\d", line)]
        assert len(payloads) == intervals == 4
        for i, text in enumerate(payloads):
            got = decode(text, f"{log.name}:{i}", max_ops=10**8)
            assert list(zip(got.values.tolist(), got.counts.tolist(), strict=True)) == \
                expected[i], (log.name, i)
            seen_digits.add(got.significant_digits)
            top_values += int(got.values.size and got.values[-1] > 2**60)
        assert not expected[3]  # the empty interval decodes to nothing
    assert seen_digits == {0, 1, 2, 3, 4, 5}
    assert top_values >= 10  # the top buckets of the widest ranges were read too


@pytest.mark.parametrize("digits", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(("lowest", "highest"), [(1, 3_600_000_000), (1, 2**62),
                                                 (1000, 10**13), (5, 2**50)])
def test_histograms_of_the_hdrhistogram_package_decode_as_it_reads_them(
        digits: int, lowest: int, highest: int) -> None:
    from hdrh.histogram import HdrHistogram

    rng = np.random.default_rng(digits * 7 + lowest)
    hist = HdrHistogram(lowest, highest, digits)
    values = np.exp(rng.uniform(np.log(lowest), np.log(min(highest, 2**61)), 500))
    for v in values.astype(np.int64):
        hist.record_value(int(v), int(rng.integers(1, 4)))
    hist.record_value(lowest)
    text = hist.encode().decode()
    got = decode(text, "x")
    ref = HdrHistogram.decode(text)
    # The package's own decoded counts array, each non-empty bucket's value as it says.
    counts = np.ctypeslib.as_array(ref.counts)
    expected = [(ref.get_highest_equivalent_value(ref.get_value_from_index(int(i))),
                 int(counts[i])) for i in np.flatnonzero(counts)]
    assert list(zip(got.values.tolist(), got.counts.tolist(), strict=True)) == expected
    if digits <= 3:  # its recorded iterator too (a Python step per bucket: slow at 5)
        assert _recorded(ref) == expected
    assert got.total == hist.get_total_count() and got.significant_digits == digits


def test_the_widest_declared_range_is_read_without_its_counts_array(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 48 #5: a 409-byte log whose histograms declare 5 significant figures up to
    2^63 - 1, each counting one value near the top. Their counts array would hold 6.3
    million entries (50 MB, and a Python step for each: 88 s of CPU before); decoding
    them holds at most 256 KiB of memory at a time, whatever the header declares."""
    top = [2**62 + i * 2**55 for i in range(3)]
    payloads = [payload([-counts_index(v, 5), 1], digits=5, highest=2**63 - 1) for v in top]
    path = interval_log(tmp_path / "wide.hdr", payloads,
                        ", Tue Nov 14 22:13:20 UTC 2023")
    assert path.stat().st_size == 409
    assert Layout.of(1, 2**63 - 1, 5, "x").counts_len > 6_000_000
    tracemalloc.start()
    try:
        decoded = [decode(p, "x") for p in payloads]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 << 10, f"{peak:,} bytes held to decode three one-count histograms"
    assert [int(d.values[0]) >= v for d, v in zip(decoded, top, strict=True)] == [True] * 3
    assert [d.total for d in decoded] == [1, 1, 1]
    # The import reads them and refuses the latency (past int64 ns) in one line.
    assert cli_main(["import", "ycsb-hdr", str(path), "-o", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    assert "wide.hdr:4" in err and "Traceback" not in err


def _damaged(**kw: object) -> str:
    return payload([5, -3, 2], **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "says"), [
    (_damaged(digits=6), "6 significant figures"),
    (_damaged(digits=-1), "-1 significant figures"),
    (_damaged(lowest=0), "value range of 0"),
    (_damaged(lowest=100, highest=150), "value range of 100 to 150"),
    (_damaged(highest=-5), "value range"),
    (_damaged(lowest=2**60, highest=2**62, digits=5), "more than a 64-bit value holds"),
    (_damaged(offset=3), "normalizing index offset 3"),
    (_damaged(cookie=0x12345678), "is not HdrHistogram's V2"),
    (_damaged(outer_cookie=0x1C849314 ^ 0x1000), "is not HdrHistogram's V2"),
    (_damaged(length=1000), "says 1000 bytes of counts"),
    (payload([], body=b"\x85"), "cut short"),
    (payload([], body=varint(2**57)), "more than 8 bytes"),
    (payload([10**9]), "counts 1,000,000,000 ops (more than 100,000,000"),
    (payload([2**55 - 1] * 3), f"counts {3 * (2**55 - 1):,} ops"),
    (payload([-(2**40)]), "empty buckets, past its last"),
    (payload([-23_000, 1], highest=1000), "past its"),
    (payload([], body=b"\0" * 3000, highest=1000), "more counts than its"),
    ("HISTFAAAAB942pNpmSzMwMDA", "damaged compressed histogram"),
    ("not base64 at all!", "damaged compressed histogram"),
    ("", "shorter than its header"),
])
def test_damaged_histograms_are_one_named_error(text: str, says: str) -> None:
    with pytest.raises(ImportFormatError, match=re.escape(says)) as err:
        decode(text, "f.hdr:7")
    assert str(err.value).startswith("f.hdr:7: ")


def test_a_count_past_max_ops_is_refused_with_the_option_that_allows_it() -> None:
    with pytest.raises(ImportFormatError, match="--max-ops 3000000"):
        decode(payload([-100, 3_000_000]), "x")
    assert decode(payload([-100, 3_000_000]), "x", max_ops=3_000_000).total == 3_000_000
