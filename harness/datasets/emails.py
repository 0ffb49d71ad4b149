"""E-mail-like key-value records, as the seeds used (the Enron corpus).

Two sources with one interface (`len(ds)`, `ds.record(i) -> Record`):

* `GeneratedEmails`: a deterministic generator. Record i is a plain-text message with
  realistic headers and a body of words; its size is log-normal (median `median_bytes`,
  default 2.5 KB, sigma 1.0: heavy-tailed, a few messages of tens of KB), clipped to
  [min_bytes, max_bytes]. Everything is a function of (seed, i), so each client process
  rebuilds exactly its own share and nothing is shipped to client hosts.
* `MaildirEmails`: every regular file under a directory (an Enron maildir, or any
  directory of files), in sorted path order; record i is file ``i % count``.

Keys are message ids such as ``<17.1075855687@example.com>`` (a maildir file's own
`Message-ID` header, else one made from its path). The Enron corpus holds the same
message in several folders, so a maildir's keys can repeat (a later PUT is an update).
`key_style="hash20"` turns each key into 20 hex digits of its SHA-1, for servers that
limit keys to 20 bytes as the course projects did.

Value encoding (both backends, so byte counts compare): the message's bytes with
backslash, CR and LF escaped as ``\\\\``, ``\\r`` and ``\\n``. A value is thus one line
without CR or LF, safe for the line-based course protocol, and `decode_value` restores
the message exactly. Values are about 2 % larger than the messages.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

KEY_STYLES = ("message_id", "hash20")
_NORMAL = NormalDist()
_UNESCAPE_RE = re.compile(rb"\\(.)", re.DOTALL)
_UNESCAPES = {b"\\": b"\\", b"r": b"\r", b"n": b"\n"}
_MSGID_RE = re.compile(rb"^message-id:[ \t]*(\S+)", re.IGNORECASE | re.MULTILINE)
_WORDS_TEXT = (
    "the of to and a in is that for it as with be on not this by are or have from at "
    "gas power energy deal trading market price contract california enron meeting call "
    "please thanks attached schedule agreement review draft report financial risk "
    "credit transaction capacity pipeline storage volume forward swap desk counterparty "
    "week today tomorrow morning friday monday update question comments revised final "
    "legal issue plan team group project status information regarding following"
)
_PEOPLE_TEXT = (
    "phillip.allen john.arnold sally.beck jeff.dasovich mark.haedicke vince.kaminski "
    "louise.kitchen kay.mann sara.shackleton tana.jones steven.kean richard.shapiro"
)
_WORDS, _PEOPLE = _WORDS_TEXT.split(), _PEOPLE_TEXT.split()


@dataclass(frozen=True)
class Record:
    key: bytes
    value: bytes  # encoded with `encode_value`: one line


def encode_value(message: bytes) -> bytes:
    """Escape backslash, CR and LF so that the value is one protocol-safe line."""
    return message.replace(b"\\", b"\\\\").replace(b"\r", b"\\r").replace(b"\n", b"\\n")


def decode_value(value: bytes) -> bytes:
    """Inverse of `encode_value`."""
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPES.get(m.group(1), m.group(0)), value)


def style_key(message_id: bytes, key_style: str) -> bytes:
    if key_style == "message_id":
        return message_id
    if key_style == "hash20":
        return hashlib.sha1(message_id).hexdigest()[:20].encode()
    raise ValueError(f"key_style must be one of {', '.join(KEY_STYLES)}, not {key_style!r}")


def check_params(median_bytes: int, sigma: float, min_bytes: int, max_bytes: int) -> list[str]:
    """Problems with generator parameters (empty when fine)."""
    problems = []
    if median_bytes <= 0 or sigma < 0:
        problems.append("need median_bytes > 0 and sigma >= 0")
    if not 0 < min_bytes <= max_bytes:
        problems.append("need 0 < min_bytes <= max_bytes")
    return problems


class GeneratedEmails:
    """`count` synthetic messages; record i depends only on (seed, i) and the sizes."""

    def __init__(self, count: int, *, seed: int = 1, median_bytes: int = 2500,
                 sigma: float = 1.0, min_bytes: int = 300, max_bytes: int = 120_000,
                 key_style: str = "message_id") -> None:
        problems = check_params(median_bytes, sigma, min_bytes, max_bytes)
        if problems:
            raise ValueError("; ".join(problems))
        style_key(b"", key_style)  # reject an unknown style now, not at record i
        self.count = count
        self.seed = seed
        self.median_bytes, self.sigma = median_bytes, sigma
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.key_style = key_style
        # One seeded block of text; bodies are slices of it at record-specific offsets,
        # so a record costs one slice, not one random draw per word.
        rng = random.Random(seed ^ 0xE4A11)
        words: list[str] = []
        width = 0
        for _ in range(64 * 1024):
            w = rng.choice(_WORDS)
            width += len(w) + 1
            words.append(w + ("\n" if width > 72 else " "))
            width = 0 if width > 72 else width
        self.text = "".join(words).encode()

    def __len__(self) -> int:
        return self.count

    def size(self, i: int) -> int:
        """Size in bytes of message i (before encoding)."""
        u = random.Random(f"{self.seed}:{i}:size").random()
        u = min(max(u, 1e-12), 1 - 1e-12)  # inv_cdf needs 0 < u < 1
        size = round(self.median_bytes * math.exp(self.sigma * _NORMAL.inv_cdf(u)))
        return min(max(size, self.min_bytes), self.max_bytes)

    def message_id(self, i: int) -> bytes:
        stamp = 1_075_800_000 + random.Random(f"{self.seed}:{i}:id").randrange(100_000_000)
        return b"<%d.%d@example.com>" % (i, stamp)

    def message(self, i: int) -> bytes:
        rng = random.Random(f"{self.seed}:{i}:msg")
        sender, rcpt = rng.choice(_PEOPLE), rng.choice(_PEOPLE)
        subject = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 6)))
        day = 1 + rng.randrange(28)
        head = (
            f"Message-ID: {self.message_id(i).decode()}\n"
            f"Date: Mon, {day} May 2001 {rng.randrange(24):02d}:{rng.randrange(60):02d}:00 "
            "-0700 (PDT)\n"
            f"From: {sender}@enron.com\nTo: {rcpt}@enron.com\nSubject: {subject}\n"
            "Mime-Version: 1.0\nContent-Type: text/plain; charset=us-ascii\n"
            "Content-Transfer-Encoding: 7bit\n\n"
        ).encode()
        body_len = max(self.size(i) - len(head), 0)
        text = self.text
        out = bytearray(head)
        pos = rng.randrange(len(text))
        while body_len > 0:  # bodies longer than the block wrap around it
            chunk = text[pos:pos + body_len]
            out += chunk
            body_len -= len(chunk)
            pos = 0
        return bytes(out)

    def record(self, i: int) -> Record:
        return Record(style_key(self.message_id(i), self.key_style),
                      encode_value(self.message(i)))


class MaildirEmails:
    """Every regular file under `path` (sorted), as records; record i is file i % count."""

    def __init__(self, path: Path | str, *, key_style: str = "message_id") -> None:
        self.root = Path(path)
        if not self.root.is_dir():
            raise ValueError(f"dataset {str(self.root)!r} is not a directory")
        style_key(b"", key_style)
        self.key_style = key_style
        files = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames.sort()
            files += [os.path.join(dirpath, f) for f in sorted(filenames)
                      if os.path.isfile(os.path.join(dirpath, f))]
        if not files:
            raise ValueError(f"dataset {str(self.root)!r} holds no files")
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def record(self, i: int) -> Record:
        path = self.files[i % len(self.files)]
        message = Path(path).read_bytes()
        head = message.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
        found = _MSGID_RE.search(head)
        if found:
            mid = found.group(1)
        else:  # no header: a stable id from the path, without whitespace
            rel = os.path.relpath(path, self.root).replace(os.sep, "/")
            mid = b"<%s@maildir>" % re.sub(rb"\s", b"_", rel.encode())
        return Record(style_key(mid, self.key_style), encode_value(message))


def open_dataset(dataset: str, count: int, **params: object) -> GeneratedEmails | MaildirEmails:
    """`generated` (with generator `params`) or the path of a directory of files."""
    key_style = str(params.get("key_style", "message_id"))
    if dataset == "generated":
        return GeneratedEmails(count, **params)  # type: ignore[arg-type]
    return MaildirEmails(os.path.expanduser(dataset), key_style=key_style)
