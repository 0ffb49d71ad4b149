"""The failures a run's clients met, by kind, as its manifest keeps them: the first
message of each kind and how often (`harness.loadgen.errtally` writes them per client
into ``loadgen.workers[].errors``); read back, so every entry is type-checked and cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.results.damage import count_problem
from harness.results.manifest import Manifest

#: How many kinds of failure a reader lists per run (`failure_kinds`).
MAX_FAILURE_KINDS = 16


def failure_kinds(manifest: Manifest) -> list[tuple[str, int | None, str]]:
    """(kind, how often, first message) of the failures a run's clients met, merged over
    its workers (`loadgen.workers[].errors`, written by `harness.loadgen.errtally`), most
    frequent first. A run written before those tallies gives each worker's last error,
    how often unknown (None). Read back, so every entry is type-checked and bounded."""
    merged: dict[str, list[Any]] = {}
    workers = manifest.loadgen.get("workers")
    for w in workers if isinstance(workers, list) else []:
        if not isinstance(w, Mapping):
            continue
        tallies = w.get("errors")
        if isinstance(tallies, list):
            for t in tallies[:MAX_FAILURE_KINDS]:
                if not isinstance(t, Mapping):
                    continue
                kind, count, first = t.get("kind"), t.get("count"), t.get("first")
                if (isinstance(kind, str) and isinstance(first, str)
                        and count_problem(count) is None):
                    entry = merged.setdefault(kind[:300], [0, first[:300]])
                    entry[0] = (entry[0] or 0) + int(count)
        elif isinstance(w.get("last_error"), str):
            merged.setdefault(w["last_error"][:300], [None, w["last_error"][:300]])
    ranked = sorted(merged.items(), key=lambda kv: -(kv[1][0] or 0))
    return [(kind, count, first) for kind, (count, first) in ranked[:MAX_FAILURE_KINDS]]
