"""E-mail records: deterministic, heavy-tailed sizes, one-line values, maildir loading."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from harness.datasets.emails import (
    GeneratedEmails,
    MaildirEmails,
    decode_value,
    encode_value,
    open_dataset,
)


def test_records_depend_only_on_seed_and_index() -> None:
    a, b = GeneratedEmails(100, seed=7), GeneratedEmails(5, seed=7)
    assert a.record(3) == b.record(3)  # the count does not matter
    assert a.record(3) != GeneratedEmails(100, seed=8).record(3)
    keys = [a.record(i).key for i in range(100)]
    assert len(set(keys)) == 100
    assert all(k.startswith(b"<%d." % i) and k.endswith(b"@example.com>")
               for i, k in enumerate(keys))


def test_sizes_are_heavy_tailed_with_a_median_of_a_few_kb() -> None:
    ds = GeneratedEmails(3000)
    sizes = [ds.size(i) for i in range(3000)]
    median = statistics.median(sizes)
    assert 2000 <= median <= 3200
    assert statistics.fmean(sizes) > 1.3 * median  # a long right tail
    assert max(sizes) > 10 * median and min(sizes) >= 300
    assert len(ds.message(0)) == ds.size(0)


def test_values_are_one_line_and_decode_to_the_message() -> None:
    ds = GeneratedEmails(50, median_bytes=400)
    for i in range(50):
        value = ds.record(i).value
        assert b"\n" not in value and b"\r" not in value
        assert decode_value(value) == ds.message(i)
    tricky = b"a\\nb\r\n\\\\c\n"
    assert decode_value(encode_value(tricky)) == tricky


def test_hash20_keys_are_20_bytes() -> None:
    key = GeneratedEmails(1, key_style="hash20").record(0).key
    assert len(key) == 20 and int(key, 16) >= 0
    with pytest.raises(ValueError, match="key_style"):
        GeneratedEmails(1, key_style="short")
    with pytest.raises(ValueError, match="median_bytes"):
        GeneratedEmails(1, median_bytes=0)


def test_maildir_records_use_message_ids_and_paths(tmp_path: Path) -> None:
    (tmp_path / "allen-p" / "sent").mkdir(parents=True)
    (tmp_path / "allen-p" / "sent" / "1.").write_bytes(
        b"Message-ID: <18782981.1075855378110.JavaMail.evans@thyme>\r\nSubject: hi\r\n"
        b"\r\nbody\r\n")
    (tmp_path / "allen-p" / "notes").mkdir()
    (tmp_path / "allen-p" / "notes" / "no header").write_bytes(b"just text\n")
    ds = open_dataset(str(tmp_path), 0)
    assert isinstance(ds, MaildirEmails) and len(ds) == 2
    first, second = ds.record(0), ds.record(1)  # sorted: notes/ before sent/
    assert first.key == b"<allen-p/notes/no_header@maildir>"
    assert second.key == b"<18782981.1075855378110.JavaMail.evans@thyme>"
    assert decode_value(second.value).endswith(b"body\r\n")
    assert ds.record(2) == first  # wraps around
    with pytest.raises(ValueError, match="not a directory"):
        MaildirEmails(tmp_path / "missing")
