"""Failed ops by kind: the first message of each kind of error a client met, and how
often it met it, for the run's manifest (`loadgen.workers[].errors`).

A run whose ops fail is a finding, not a footnote (`harness.analysis.checks`): a reader
must see *what* failed ("DuplicatePreparedStatementError: prepared statement
"__asyncpg_stmt_d__" already exists", 134 times) beside how many ops did. Messages of
one kind differ only in their numbers, names and quoted parts (a statement's number, a
key, a port); those are masked to find the kind, and the first message is kept whole.

Bounded: at most `MAX_KINDS` kinds (the rest counted under one), each message cut to
`MAX_MESSAGE_CHARS`; a server that answers every op with a new text costs a few KB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_KINDS = 16
MAX_MESSAGE_CHARS = 300
#: The kind every kind past `MAX_KINDS` is counted under.
OTHER_KINDS = "(other kinds)"
#: Numbers, hex runs and quoted parts: what differs between messages of one kind.
_VARIABLE = re.compile(r"""'[^']*'|"[^"]*"|\b0x[0-9a-fA-F]+\b|[0-9a-fA-F]{8,}|\d+""")


def kind_of(message: str) -> str:
    """The kind of an error message: its numbers, hex runs and quoted parts masked."""
    return _VARIABLE.sub("#", message[:MAX_MESSAGE_CHARS]).strip()


@dataclass
class ErrorTally:
    """Counts by kind, with each kind's first message, in the order first met."""

    kinds: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, message: str) -> None:
        kind = kind_of(message)
        if kind not in self.kinds and len(self.kinds) >= MAX_KINDS:
            kind = OTHER_KINDS
        entry = self.kinds.setdefault(kind, [0, message[:MAX_MESSAGE_CHARS]])
        entry[0] += 1

    def as_list(self) -> list[dict[str, Any]]:
        """The manifest's form: [{"kind", "count", "first"}], most frequent first."""
        return [{"kind": k, "count": c, "first": m}
                for k, (c, m) in sorted(self.kinds.items(), key=lambda kv: -kv[1][0])]
