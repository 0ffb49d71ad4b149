"""What the kit reads from a server outside the timed loop (who it is, its settings, its
counters: Redis INFO and CONFIG GET, memcached `stats`, PostgreSQL's settings, an HTTP
app's /stats), held to bounds, and the record of a reply cut at one.

A server at an address may be anyone's: one that answers INFO with 200,000 lines or
CONFIG GET * with 400,000 entries once cost a 100-op run 2 min 53 s, 484 MB and a 20 MB
manifest (issue 48). Each reply is read to at most `MAX_REPLY_BYTES` and `MAX_ENTRIES`
entries, each name and value to `MAX_VALUE_CHARS`; past a bound the rest is left unread
and the `Reading` says what was cut, which the manifest records beside what was kept. A
value that is not a finite number (`nan`, `inf`) is kept as its text: strict JSON has no
such number, and a counter of NaN would poison every difference taken of it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

#: Bytes of one reply. A real one is far smaller: Redis 7's INFO everything with every
#: command's statistics is ~40 KB, CONFIG GET * ~10 KB, memcached's `stats` ~3 KB.
MAX_REPLY_BYTES = 1 << 20
#: Entries (lines, names and values, rows) of one reply: Redis 7 has ~240 commands (~400
#: with subcommands) and ~200 settings, PostgreSQL 16 ~360 settings, memcached ~100 stats.
MAX_ENTRIES = 4096
#: Characters of one name or value kept: a path, a version or a server's `save` rule.
MAX_VALUE_CHARS = 1024
#: Characters of a server's version kept: Redis's are ~10 (7.0.15), PostgreSQL's ~40.
MAX_VERSION_CHARS = 100


class Reading(dict[str, Any]):
    """A server's reply as name -> value, with `cut`: what was left out and why (empty:
    nothing). The manifest records the notes beside the values (`cut_note`)."""

    def __init__(self, items: Iterable[tuple[str, Any]] = (), cut: Iterable[str] = ()
                 ) -> None:
        super().__init__(items)
        self.cut: list[str] = list(cut)

    def keep(self, names: Iterable[str]) -> Reading:
        """The entries named (those present), with the same notes."""
        return Reading(((k, self[k]) for k in names if k in self), self.cut)


#: Notes of one reply recorded: a reply of 4,096 long values has 4,096 of them.
MAX_NOTES = 8


def cut_note(cut: Iterable[str]) -> str | None:
    """The notes of a cut reply in one line for the manifest (None: nothing was cut): the
    first `MAX_NOTES` different ones, and how many more."""
    notes = list(dict.fromkeys(cut))
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"and {len(notes) - MAX_NOTES:,} more"]
    return "; ".join(notes) if notes else None


def bounded_text(text: str, what: str, cut: list[str], limit: int = MAX_VALUE_CHARS) -> str:
    """`text`, or its first `limit` characters with a note in `cut` (naming `what` in at
    most 80 characters)."""
    if len(text) <= limit:
        return text
    what = what if len(what) <= 80 else f"{what[:77]}..."
    cut.append(f"{what} longer than {limit:,} characters: its first {limit:,} kept")
    return text[:limit]


def version_text(text: str) -> str:
    """A server's version as the manifest records it: its first `MAX_VERSION_CHARS`
    characters, and a note where it was longer."""
    if len(text) <= MAX_VERSION_CHARS:
        return text
    return f"{text[:MAX_VERSION_CHARS]} (truncated at {MAX_VERSION_CHARS} characters)"


def stat_value(text: str) -> Any:
    """A server's statistic as text (memcached `stats`, Redis `INFO`): an int, else a
    finite float, else the text (`nan`, `inf`, a version)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def json_value(text: str | bytes) -> Any:
    """JSON from a server with its numbers that are not finite (NaN, Infinity, 1e999)
    kept as their text; ValueError (or RecursionError, nested past Python's limit) where
    it is not JSON. Read a bounded text: its size is the caller's to check."""
    def number(token: str) -> Any:
        value = float(token)
        return value if math.isfinite(value) else token
    return json.loads(text, parse_constant=str, parse_float=number)


def is_number(value: Any) -> bool:
    """An int or a finite float (bool is no number here)."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value))


def numbers_only(reading: Reading, what: str) -> Reading:
    """The entries that are numbers (counters); any other value is named in a note."""
    out = Reading(((k, v) for k, v in reading.items() if is_number(v)), reading.cut)
    others = [k for k in reading if k not in out]
    if others:
        shown = ", ".join(f"{k}={str(reading[k])[:40]!r}" for k in others[:5])
        more = f" and {len(others) - 5:,} more" if len(others) > 5 else ""
        out.cut.append(f"{what}: not finite numbers, left out: {shown}{more}")
    return out
